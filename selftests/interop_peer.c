// SPDX-License-Identifier: GPL-2.0
/*
 * The in-tree side of the interop test (interop.h): runs over the in-tree
 * RDS/IB, answers interop_check's requests until @stop_file exists, and
 * exits 0 unless a call of its own failed in a way the requests cannot
 * report.
 *
 *   interop_peer STOP_FILE
 */
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>

#include "interop.h"
#include "payload.h"
#include "rds_rdma.h"

static const char tag[] = "interop-peer";

static bool stopped(const char *stop_file)
{
	struct stat st;

	return stat(stop_file, &st) == 0;
}

static int send_to(int fd, const struct sockaddr_in *to, const void *buf, size_t len)
{
	return sendto(fd, buf, len, 0, (const struct sockaddr *)to, sizeof(*to)) < 0 ? -errno : 0;
}

static int reply(int fd, const struct sockaddr_in *to, uint8_t op, int32_t status, uint64_t count)
{
	struct interop_cmd r = { .op = op, .status = status, .count = count };

	return send_to(fd, to, &r, sizeof(r));
}

/* OP_RESULT of a READ; @seed 1 if its data arrived only after its notification. */
static int reply_late(int fd, const struct sockaddr_in *to, int32_t status, uint64_t count,
		      bool late)
{
	struct interop_cmd r = { .op = OP_RESULT, .status = status, .count = count, .seed = late };

	return send_to(fd, to, &r, sizeof(r));
}

/* Pings rrds from @fd: 1 if the pong came back within 20 s, else 0 or -errno. */
static int ping(int fd, const char *ip)
{
	struct sockaddr_in to = sin4(ip, 0), from;
	socklen_t len;
	char buf[64];

	if (send_to(fd, &to, NULL, 0))
		return -errno;
	for (int i = 0; i < 20; i++) {
		ssize_t got;

		len = sizeof(from);
		got = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len);
		if (got == 0 && from.sin_port == 0)
			return 1;
		if (got < 0 && errno != EAGAIN && errno != ETIMEDOUT)
			return -errno;
	}
	return 0;
}

/* Sends @n messages of sizes cycling through a list, numbered from @seed. */
static int stream(int fd, const struct sockaddr_in *to, unsigned char *buf, uint64_t seed,
		  uint64_t n)
{
	static const size_t sizes[] = {
		sizeof(struct interop_cmd), 100, 4095, 4096, 4097, 9000, 65536,
	};

	for (uint64_t i = 0; i < n; i++) {
		size_t len = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
		struct interop_cmd h = { .op = OP_STREAMED, .seed = seed + i, .len = len };
		int ret;

		payload_fill(buf, len, &h, sizeof(h), seed + i);
		ret = send_to(fd, to, buf, len);
		if (ret)
			return ret;
	}
	return 0;
}

/* Sets in-tree RDS/IB's flow_control sysctl; 0 or -errno. */
static int set_flow_control(uint64_t on)
{
	FILE *f = fopen("/proc/sys/net/rds/ib/flow_control", "w");
	int ret;

	if (!f)
		return -errno;
	ret = fprintf(f, "%d\n", on ? 1 : 0) < 0 ? -EIO : 0;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

struct mapping {
	unsigned char *mem;
	size_t len;
	uint64_t cookie;
};

/* RDS_CMSG_RDMA_MAP of @len pattern bytes at page offset @off, sent in OP_MAPPED. */
static int map(int fd, const struct sockaddr_in *to, struct mapping *m, size_t len, size_t off,
	       uint64_t seed, uint64_t flags)
{
	struct interop_cmd r = { .op = OP_MAPPED, .len = len };
	struct rds_get_mr_args args = { .flags = RDS_RDMA_READWRITE | flags };
	struct rds_cm cm = { RDS_CMSG_RDMA_MAP, &args, sizeof(args) };
	char ip[INET_ADDRSTRLEN];
	int ret;

	if (len > INTEROP_MAX || off >= 4096 || (flags & ~(uint64_t)RDS_RDMA_USE_ONCE))
		return -EINVAL;
	m->len = len;
	memset(m->mem, 0, INTEROP_MAX + 4096);
	payload_fill(m->mem + off, len, "", 0, seed);
	args.vec.addr = (uintptr_t)(m->mem + off);
	args.vec.bytes = len;
	args.cookie_addr = (uintptr_t)&m->cookie;
	inet_ntop(AF_INET, &to->sin_addr, ip, sizeof(ip));
	ret = send_cmsgs(fd, ip, ntohs(to->sin_port), &cm, 1, &r, sizeof(r));
	if (ret)
		m->cookie = 0;
	return ret;
}

/* One RDMA of @len bytes on @cookie with a local buffer; its status, then the check. */
static int rdma(int fd, const struct sockaddr_in *to, unsigned char *local,
		const struct interop_cmd *c, bool write)
{
	struct interop_cmd r = { .op = write ? OP_WRITTEN : OP_READ_DONE, .len = c->len };
	struct rds_iovec iov = { .addr = (uintptr_t)local, .bytes = c->len };
	uint64_t flags = RDS_RDMA_NOTIFY_ME | (write ? RDS_RDMA_READWRITE : 0);
	char ip[INET_ADDRSTRLEN];
	long mismatch = -1;
	bool late = false;
	int status;

	if (c->len > INTEROP_MAX)
		return reply(fd, to, OP_RESULT, -EINVAL, 0);
	if (write)
		payload_fill(local, c->len, "", 0, c->seed);
	else
		memset(local, 0, c->len);
	inet_ntop(AF_INET, &to->sin_addr, ip, sizeof(ip));
	status = rdma_send(fd, ip, ntohs(to->sin_port), c->cookie, 0, c->len, &iov, 1, flags, 1, &r,
			   sizeof(r));
	if (!status)
		status = rdma_status_within(fd, 30);
	if (!status && !write)
		mismatch = payload_mismatch(local, c->len, "", 0, c->seed);
	if (mismatch >= 0) {
		long zeros = 0;

		while (mismatch + zeros < (long)c->len && !local[mismatch + zeros])
			zeros++;
		printf("%s: READ of %llu bytes reported done with byte %ld on not there (%ld zero bytes)\n",
		       tag, (unsigned long long)c->len, mismatch, zeros);
		/* Data still landing after the notification: wait for it, and say so. */
		for (int i = 0; i < 50 && mismatch >= 0; i++) {
			usleep(100000);
			mismatch = payload_mismatch(local, c->len, "", 0, c->seed);
		}
		printf("%s: %s\n", tag, mismatch < 0 ? "all of it arrived after the notification" :
						      "still differs after 5 s");
		late = true;
	}
	return reply_late(fd, to, status, mismatch + 1, late);
}

/* OP_TOS_SENT from a new socket on INTEROP_PORT + 1 with TOS @tos, kept in *@tos_fd. */
static int tos_send(int *tos_fd, const struct sockaddr_in *to, uint64_t tos)
{
	struct interop_cmd t = { .op = OP_TOS_SENT, .count = tos };
	rds_tos_t byte = tos;

	/* Closing drops what the socket has not sent: the last one stays open. */
	if (*tos_fd >= 0)
		close(*tos_fd);
	*tos_fd = bound_socket(INTEROP_PEER_IP, INTEROP_PORT + 1);
	if (*tos_fd < 0)
		return -errno;
	if (ioctl(*tos_fd, SIOCRDSSETTOS, &byte))
		return -errno;
	return send_to(*tos_fd, to, &t, sizeof(t));
}

/* Bit n set for each connection to rrds with TOS n, from RDS_INFO_CONNECTIONS; or -errno. */
static long long tos_bits(int fd)
{
	static struct rds_info_connection conns[256];
	struct in_addr rrds = sin4(INTEROP_RRDS_IP, 0).sin_addr;
	socklen_t len = sizeof(conns);
	long long bits = 0;
	int each = getsockopt(fd, SOL_RDS, RDS_INFO_CONNECTIONS, conns, &len);

	if (each < 0)
		return -errno;
	if (each != sizeof(conns[0]))
		return -EPROTO;
	for (unsigned int i = 0; i < len / sizeof(conns[0]); i++)
		if (conns[i].faddr == rrds.s_addr && conns[i].tos < 64)
			bits |= 1LL << conns[i].tos;
	return bits;
}

/* Echoes every message queued on the IPv6 socket @fd6 back to its sender; 0 or -errno. */
static int echo6(int fd6, unsigned char *buf, size_t size)
{
	for (;;) {
		struct sockaddr_in6 from;
		socklen_t len = sizeof(from);
		ssize_t got = recvfrom(fd6, buf, size, MSG_DONTWAIT, (struct sockaddr *)&from, &len);

		if (got < 0)
			return errno == EAGAIN ? 0 : -errno;
		if (sendto(fd6, buf, got, 0, (struct sockaddr *)&from, len) < 0)
			return -errno;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in rrds = sin4(INTEROP_RRDS_IP, INTEROP_PORT), from;
	size_t size = INTEROP_MAX + sizeof(struct interop_cmd);
	struct interop_cmd hello = { .op = OP_HELLO };
	struct mapping m = { 0 };
	unsigned char *buf, *local;
	int fd, bufsize = 16 << 20;
	struct timeval tv = { .tv_sec = 1 };
	unsigned long served = 0;
	int tos_fd = -1, fd6;
	struct sockaddr_in6 a6 = sin6(INTEROP_PEER_IP6, INTEROP_PORT, 0);

	if (argc != 2) {
		fprintf(stderr, "usage: %s STOP_FILE\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	buf = malloc(size);
	local = aligned_alloc(4096, INTEROP_MAX);
	m.mem = aligned_alloc(4096, INTEROP_MAX + 4096);
	fd = bound_socket(INTEROP_PEER_IP, INTEROP_PORT);
	fd6 = rds_socket();
	if (!buf || !local || !m.mem || fd < 0 || fd6 < 0 ||
	    bind(fd6, (struct sockaddr *)&a6, sizeof(a6))) {
		perror(tag);
		return 1;
	}
	setsockopt(fd6, SOL_SOCKET, SO_SNDBUFFORCE, &bufsize, sizeof(bufsize));
	setsockopt(fd6, SOL_SOCKET, SO_RCVBUFFORCE, &bufsize, sizeof(bufsize));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bufsize, sizeof(bufsize));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bufsize, sizeof(bufsize));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	tv.tv_sec = 20;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

	/* Queued until rrds is up: the in-tree side connects first. */
	if (send_to(fd, &rrds, &hello, sizeof(hello))) {
		perror(tag);
		return 1;
	}
	printf("%s: up, hello queued to %s:%d\n", tag, INTEROP_RRDS_IP, INTEROP_PORT);

	while (!stopped(argv[1])) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = fd6, .events = POLLIN } };
		socklen_t from_len = sizeof(from);
		struct interop_cmd c;
		ssize_t got;
		int ret = 0;

		if (poll(p, 2, 1000) < 0 && errno != EINTR) {
			perror(tag);
			return 1;
		}
		if (p[1].revents) {
			ret = echo6(fd6, buf, size);
			if (ret)
				printf("%s: IPv6 echo failed: %s\n", tag, strerror(-ret));
		}
		if (!p[0].revents)
			continue;
		got = recvfrom(fd, buf, size, MSG_DONTWAIT, (struct sockaddr *)&from, &from_len);
		/* RDS's receive timeout is ETIMEDOUT, as upstream's. */
		if (got < 0 && (errno == EAGAIN || errno == ETIMEDOUT))
			continue;
		if (got < (ssize_t)sizeof(c)) {
			printf("%s: recvfrom %zd (%s) from %s:%d, ignored\n", tag, got,
			       got < 0 ? strerror(errno) : "short", inet_ntoa(from.sin_addr),
			       ntohs(from.sin_port));
			continue;
		}
		memcpy(&c, buf, sizeof(c));
		served++;
		switch (c.op) {
		case OP_ECHO:
			ret = send_to(fd, &from, buf, got);
			break;
		case OP_STREAM:
			ret = stream(fd, &from, buf, c.seed, c.count);
			break;
		case OP_PING:
			ret = reply(fd, &from, OP_RESULT, 0, ping(fd, INTEROP_RRDS_IP));
			break;
		case OP_MAP:
			ret = map(fd, &from, &m, c.len, c.count, c.seed, c.cookie);
			if (ret)
				ret = reply(fd, &from, OP_RESULT, ret, 0);
			break;
		case OP_CHECK: {
			long at = payload_mismatch(m.mem + c.count, m.len, "", 0, c.seed);
			/* EINVAL: a USE_ONCE MR went with rrds's RDMA message. */
			int freed = m.cookie ? free_mr(fd, m.cookie, RDS_RDMA_INVALIDATE) : -ENOENT;

			m.cookie = 0;
			ret = reply(fd, &from, OP_RESULT, freed, at + 1);
			break;
		}
		case OP_TOS_SEND:
			ret = reply(fd, &from, OP_RESULT, tos_send(&tos_fd, &from, c.count), 0);
			break;
		case OP_CONNS: {
			long long bits = tos_bits(fd);

			ret = reply(fd, &from, OP_RESULT, bits < 0 ? bits : 0, bits < 0 ? 0 : bits);
			break;
		}
		case OP_READ:
		case OP_WRITE:
			ret = rdma(fd, &from, local, &c, c.op == OP_WRITE);
			break;
		case OP_FLOW_CONTROL:
			ret = reply(fd, &from, OP_RESULT, set_flow_control(c.count), 0);
			break;
		case OP_NOTE:
			break;
		default:
			printf("%s: unknown request %#x\n", tag, c.op);
			ret = reply(fd, &from, OP_RESULT, -EINVAL, 0);
		}
		if (ret)
			printf("%s: request '%c' failed: %s\n", tag, c.op, strerror(-ret));
	}
	if (tos_fd >= 0)
		close(tos_fd);
	close(fd6);
	printf("%s: stopped after %lu requests\n", tag, served);
	return 0;
}
