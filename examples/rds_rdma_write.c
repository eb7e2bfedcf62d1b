// SPDX-License-Identifier: GPL-2.0
/*
 * rds_rdma_write: RDMA through RDS. A receiver registers a buffer
 * (RDS_GET_MR) and sends its cookie; the sender writes into it with an
 * RDMA WRITE carried by a message (RDS_CMSG_RDMA_ARGS, RDS_RDMA_NOTIFY_ME)
 * and gets the outcome as an RDS_CMSG_RDMA_STATUS notification; the
 * receiver checks the bytes once the message arrives (RDS delivers it only
 * after the RDMA is done).
 *
 *   cc -o rds_rdma_write rds_rdma_write.c
 *   ./rds_rdma_write LOCAL REMOTE [NETNS]
 *
 * LOCAL and REMOTE are addresses of RDMA devices (an rxe or siw pair, for
 * instance); the receiver binds REMOTE, in the network namespace NETNS
 * (/run/netns/NETNS) if given. Exits 0 when the receiver saw the bytes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/rds.h>

#ifndef AF_RDS
#define AF_RDS 21	/* older libcs lack it */
#endif

enum { LEN = 4096, SENDER_PORT = 5001, RECEIVER_PORT = 5002 };

static int bound(const char *ip, int port, struct sockaddr_in *addr)
{
	int fd = socket(AF_RDS, SOCK_SEQPACKET, 0);

	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_port = htons(port);
	if (fd < 0 || inet_pton(AF_INET, ip, &addr->sin_addr) != 1 ||
	    bind(fd, (struct sockaddr *)addr, sizeof(*addr))) {
		perror("rds_rdma_write: socket/bind");
		return -1;
	}
	return fd;
}

/* Registers a buffer, hands its cookie to the sender, checks the write. */
static int receive(const char *ip, const char *netns, const struct sockaddr_in *sender)
{
	static char buf[LEN] __attribute__((aligned(4096)));
	uint64_t cookie;
	struct rds_get_mr_args mr = {
		.vec = { .addr = (uintptr_t)buf, .bytes = LEN },
		.cookie_addr = (uintptr_t)&cookie,
	};
	struct sockaddr_in self;
	char msg[16];
	int fd, i;

	if (netns) {
		char path[256];
		int ns;

		snprintf(path, sizeof(path), "/run/netns/%s", netns);
		ns = open(path, O_RDONLY);
		if (ns < 0 || setns(ns, CLONE_NEWNET)) {
			perror("rds_rdma_write: setns");
			return 1;
		}
	}
	fd = bound(ip, RECEIVER_PORT, &self);
	if (fd < 0)
		return 1;
	if (setsockopt(fd, SOL_RDS, RDS_GET_MR, &mr, sizeof(mr))) {
		perror("rds_rdma_write: RDS_GET_MR");
		return 1;
	}
	if (sendto(fd, &cookie, sizeof(cookie), 0, (const struct sockaddr *)sender,
		   sizeof(*sender)) < 0 || recv(fd, msg, sizeof(msg), 0) < 0) {
		perror("rds_rdma_write: receiver");
		return 1;
	}
	for (i = 0; i < LEN; i++) {
		if (buf[i] != (char)i) {
			fprintf(stderr, "rds_rdma_write: byte %d not written\n", i);
			return 1;
		}
	}
	printf("receiver: message \"%s\", %d bytes written into its buffer\n", msg, LEN);
	fflush(stdout);		/* the child leaves with _exit() */
	return 0;
}

/* RDMA WRITEs @buf to @cookie at @to, then waits for the outcome. */
static int write_to(int fd, const struct sockaddr_in *to, uint64_t cookie, char *buf)
{
	struct rds_iovec local = { .addr = (uintptr_t)buf, .bytes = LEN };
	struct rds_rdma_args args = {
		.cookie = cookie,
		.remote_vec = { .addr = 0, .bytes = LEN },
		.local_vec_addr = (uintptr_t)&local,
		.nr_local = 1,
		.flags = RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
		.user_token = 42,
	};
	char control[CMSG_SPACE(sizeof(args))] = { 0 };
	struct iovec data = { .iov_base = "written", .iov_len = 8 };
	struct msghdr msg = {
		.msg_name = (void *)to, .msg_namelen = sizeof(*to),
		.msg_iov = &data, .msg_iovlen = 1,
		.msg_control = control, .msg_controllen = sizeof(control),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	struct rds_rdma_notify note;

	c->cmsg_level = SOL_RDS;
	c->cmsg_type = RDS_CMSG_RDMA_ARGS;
	c->cmsg_len = CMSG_LEN(sizeof(args));
	memcpy(CMSG_DATA(c), &args, sizeof(args));
	if (sendmsg(fd, &msg, 0) < 0) {
		perror("rds_rdma_write: sendmsg RDS_CMSG_RDMA_ARGS");
		return 1;
	}
	/* The outcome: a 0-byte receive carrying RDS_CMSG_RDMA_STATUS. */
	memset(&msg, 0, sizeof(msg));
	msg.msg_control = control;
	msg.msg_controllen = sizeof(control);
	if (recvmsg(fd, &msg, 0) < 0) {
		perror("rds_rdma_write: recvmsg");
		return 1;
	}
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_RDS || c->cmsg_type != RDS_CMSG_RDMA_STATUS)
			continue;
		memcpy(&note, CMSG_DATA(c), sizeof(note));
		printf("sender: RDMA WRITE token %llu status %d%s\n",
		       (unsigned long long)note.user_token, note.status,
		       note.status == RDS_RDMA_SUCCESS ? " (success)" : "");
		return note.status != RDS_RDMA_SUCCESS;
	}
	fprintf(stderr, "rds_rdma_write: no RDS_CMSG_RDMA_STATUS\n");
	return 1;
}

int main(int argc, char **argv)
{
	static char buf[LEN];
	struct sockaddr_in self, to;
	uint64_t cookie;
	int fd, status, i;
	pid_t child;

	if (argc < 3) {
		fprintf(stderr, "usage: %s LOCAL REMOTE [NETNS]\n", argv[0]);
		return 2;
	}
	fd = bound(argv[1], SENDER_PORT, &self);
	if (fd < 0)
		return 1;
	child = fork();
	if (child == 0)
		_exit(receive(argv[2], argc > 3 ? argv[3] : NULL, &self));
	/* The cookie is the receiver's first datagram. */
	if (child < 0 || recv(fd, &cookie, sizeof(cookie), 0) != sizeof(cookie)) {
		perror("rds_rdma_write: waiting for the cookie");
		return 1;
	}
	for (i = 0; i < LEN; i++)
		buf[i] = (char)i;
	memset(&to, 0, sizeof(to));
	to.sin_family = AF_INET;
	to.sin_port = htons(RECEIVER_PORT);
	inet_pton(AF_INET, argv[2], &to.sin_addr);
	if (write_to(fd, &to, cookie, buf)) {
		kill(child, SIGTERM);
		return 1;
	}
	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	close(fd);
	return 0;
}
