/* SPDX-License-Identifier: GPL-2.0 */
/*
 * RDMA helpers shared by the selftests that register memory and post RDMA
 * through PF_RDS: RDS_GET_MR / RDS_FREE_MR, sends with SOL_RDS control
 * messages, RDMA status notifications and announced cookies.
 */
#ifndef RDS_RDMA_H
#define RDS_RDMA_H

#include <stdint.h>
#include <sys/time.h>

#include "rds_socket.h"

/* RDS_GET_MR of @len bytes at @addr; 0 or -errno, the cookie in *@cookie. */
static inline int get_mr(int fd, const void *addr, uint64_t len, uint64_t flags, uint64_t *cookie)
{
	struct rds_get_mr_args a = {
		.vec = { .addr = (uintptr_t)addr, .bytes = len },
		.cookie_addr = (uintptr_t)cookie,
		.flags = flags,
	};

	return setsockopt(fd, SOL_RDS, RDS_GET_MR, &a, sizeof(a)) ? -errno : 0;
}

static inline int free_mr(int fd, uint64_t cookie, uint64_t flags)
{
	struct rds_free_mr_args f = { .cookie = cookie, .flags = flags };

	return setsockopt(fd, SOL_RDS, RDS_FREE_MR, &f, sizeof(f)) ? -errno : 0;
}

/* The next RDMA status on @fd: 1 with *@token and *@status, 0 if none in time, -errno. */
static inline int rdma_status(int fd, uint64_t *token, int *status)
{
	struct rds_rdma_notify n;
	char control[CMSG_SPACE(sizeof(n)) + 64], data[64];
	struct iovec v = { .iov_base = data, .iov_len = sizeof(data) };
	struct msghdr msg = {
		.msg_iov = &v, .msg_iovlen = 1,
		.msg_control = control, .msg_controllen = sizeof(control),
	};
	struct cmsghdr *c;
	ssize_t got;

	*token = 0;
	*status = -1;
	got = recvmsg(fd, &msg, 0);
	if (got < 0)
		return errno == EAGAIN || errno == ETIMEDOUT ? 0 : -errno;
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level == SOL_RDS && c->cmsg_type == RDS_CMSG_RDMA_STATUS &&
		    c->cmsg_len == CMSG_LEN(sizeof(n))) {
			memcpy(&n, CMSG_DATA(c), sizeof(n));
			*token = n.user_token;
			*status = n.status;
			return got == 0 ? 1 : -EPROTO;
		}
	}
	return -EPROTO;
}

/*
 * The next RDMA status on @fd, waiting at most @tries receive timeouts: the
 * status, or -errno, or -ETIMEDOUT if none came.
 */
static inline int rdma_status_within(int fd, int tries)
{
	uint64_t token;
	int status;

	for (int i = 0; i < tries; i++) {
		int got = rdma_status(fd, &token, &status);

		if (got == 1)
			return status;
		if (got < 0)
			return got;
	}
	return -ETIMEDOUT;
}

/* Sends and receives on @fd give up after 20 s. */
static inline void set_timeouts(int fd)
{
	struct timeval tv = { .tv_sec = 20 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* One SOL_RDS control message of a send. */
struct rds_cm {
	int type;
	const void *arg;
	size_t len;
};

/* The largest control message argument send_cmsgs() takes (struct rds_atomic_args). */
#define RDS_CM_MAX	80

/*
 * @data (@len bytes) to @ip:@port with the control messages @cm[@n] (at
 * most 4, each at most RDS_CM_MAX bytes, or E2BIG) and sendmsg's @flags;
 * 0 or -errno.
 */
static inline int send_cmsgs_flags(int fd, const char *ip, int port, const struct rds_cm *cm,
				   int n, const void *data, size_t len, int flags)
{
	union {
		char buf[4 * CMSG_SPACE(RDS_CM_MAX)];
		struct cmsghdr align;
	} control;
	struct sockaddr_in to = sin4(ip, port);
	struct iovec v = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr msg = {
		.msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = &v, .msg_iovlen = 1,
		.msg_control = control.buf,
	};
	size_t used = 0;

	if (n > 4)
		return -E2BIG;
	memset(&control, 0, sizeof(control));
	for (int i = 0; i < n; i++) {
		struct cmsghdr *c = (struct cmsghdr *)(control.buf + used);

		if (cm[i].len > RDS_CM_MAX)
			return -E2BIG;
		c->cmsg_level = SOL_RDS;
		c->cmsg_type = cm[i].type;
		c->cmsg_len = CMSG_LEN(cm[i].len);
		memcpy(CMSG_DATA(c), cm[i].arg, cm[i].len);
		used += CMSG_SPACE(cm[i].len);
	}
	msg.msg_controllen = used;
	return sendmsg(fd, &msg, flags) < 0 ? -errno : 0;
}

/* send_cmsgs_flags() without flags. */
static inline int send_cmsgs(int fd, const char *ip, int port, const struct rds_cm *cm, int n,
			     const void *data, size_t len)
{
	return send_cmsgs_flags(fd, ip, port, cm, n, data, len, 0);
}

/*
 * sendmsg with RDS_CMSG_RDMA_ARGS from @fd to @ip:@port: the operation on
 * @cookie (+@roff, @rlen bytes), the local @iov, then @len bytes of @data.
 */
static inline int rdma_send(int fd, const char *ip, int port, uint64_t cookie, uint64_t roff,
		     uint64_t rlen, struct rds_iovec *iov, uint64_t n, uint64_t flags,
		     uint64_t token, const void *data, size_t len)
{
	struct rds_rdma_args args = {
		.cookie = cookie,
		.remote_vec = { .addr = roff, .bytes = rlen },
		.local_vec_addr = (uintptr_t)iov,
		.nr_local = n,
		.flags = flags,
		.user_token = token,
	};
	struct rds_cm cm = { RDS_CMSG_RDMA_ARGS, &args, sizeof(args) };

	return send_cmsgs(fd, ip, port, &cm, 1, data, len);
}

/* A message into @buf: its length or -errno; the RDMA_DEST cookie in *@cookie (0 if none). */
static inline ssize_t recv_cookie(int fd, char *buf, size_t size, uint64_t *cookie)
{
	char control[CMSG_SPACE(sizeof(uint64_t)) + 64];
	struct iovec v = { .iov_base = buf, .iov_len = size };
	struct msghdr msg = {
		.msg_iov = &v, .msg_iovlen = 1,
		.msg_control = control, .msg_controllen = sizeof(control),
	};
	ssize_t got = recvmsg(fd, &msg, 0);

	*cookie = 0;
	if (got < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_RDS && c->cmsg_type == RDS_CMSG_RDMA_DEST &&
		    c->cmsg_len == CMSG_LEN(sizeof(*cookie)))
			memcpy(cookie, CMSG_DATA(c), sizeof(*cookie));
	return got;
}

#endif /* RDS_RDMA_H */
