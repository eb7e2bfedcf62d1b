// SPDX-License-Identifier: GPL-2.0
/*
 * rds_datagram: the smallest useful RDS program. Two sockets bound to one
 * address exchange a datagram and its reply; nothing here is rrds-specific,
 * so it runs unchanged against the in-tree rds module.
 *
 *   cc -o rds_datagram rds_datagram.c
 *   ./rds_datagram [ADDRESS]        default 127.0.0.1
 *
 * Exits 0 when the reply came back intact.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/rds.h>

#ifndef AF_RDS
#define AF_RDS 21	/* older libcs lack it */
#endif

/* A socket bound to @ip with a port the kernel picks; its address in @addr. */
static int bound(const char *ip, struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_RDS, SOCK_SEQPACKET, 0);

	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	if (fd < 0 || inet_pton(AF_INET, ip, &addr->sin_addr) != 1 ||
	    bind(fd, (struct sockaddr *)addr, sizeof(*addr)) ||
	    getsockname(fd, (struct sockaddr *)addr, &len)) {
		perror("rds_datagram: socket/bind");
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	const char *ip = argc > 1 ? argv[1] : "127.0.0.1";
	const char question[] = "ping from a", answer[] = "pong from b";
	struct sockaddr_in a, b, from;
	socklen_t from_len = sizeof(from);
	char buf[64];
	ssize_t n;
	int fa, fb;

	fa = bound(ip, &a);
	fb = bound(ip, &b);
	if (fa < 0 || fb < 0)
		return 1;
	/* RDS is connectionless: every send names its destination. */
	if (sendto(fa, question, sizeof(question), 0, (struct sockaddr *)&b, sizeof(b)) < 0) {
		perror("rds_datagram: sendto");
		return 1;
	}
	/* One recvfrom is one whole datagram, with its sender. */
	n = recvfrom(fb, buf, sizeof(buf), 0, (struct sockaddr *)&from, &from_len);
	if (n != sizeof(question) || memcmp(buf, question, n) || from.sin_port != a.sin_port) {
		fprintf(stderr, "rds_datagram: b got %zd bytes: %s\n", n, n < 0 ? strerror(errno) : "");
		return 1;
	}
	if (sendto(fb, answer, sizeof(answer), 0, (struct sockaddr *)&from, from_len) < 0) {
		perror("rds_datagram: reply");
		return 1;
	}
	n = recv(fa, buf, sizeof(buf), 0);
	if (n != sizeof(answer) || memcmp(buf, answer, n)) {
		fprintf(stderr, "rds_datagram: a got %zd bytes\n", n);
		return 1;
	}
	printf("%s:%u -> %s:%u: \"%s\", reply \"%s\"\n", ip, ntohs(a.sin_port), ip,
	       ntohs(b.sin_port), question, buf);
	close(fa);
	close(fb);
	return 0;
}
