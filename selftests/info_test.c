// SPDX-License-Identifier: GPL-2.0
/*
 * Options, control messages and RDS_INFO snapshots over the loopback
 * transport: RDS_CANCEL_SENT_TO, the MR options (refused on loopback),
 * SO_TIMESTAMP, SO_RDS_MSG_RXPATH_LATENCY, send cmsg validation, and the
 * RDS_INFO sizing protocol and records, with upstream RDS's errnos.
 */
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_socket.h"

FIXTURE(rds) {
	int a, b; /* two sockets bound to 127.0.0.1, a sends to b */
	struct sockaddr_in to;
};

FIXTURE_SETUP(rds)
{
	if (!rrds_loaded())
		ASSERT_EQ(0, rrds_load());
	self->a = bound_socket("127.0.0.1", 0);
	self->b = bound_socket("127.0.0.1", 0);
	ASSERT_LE(0, self->a);
	ASSERT_LE(0, self->b);
	self->to = sin4("127.0.0.1", local_port(self->b));
}

FIXTURE_TEARDOWN(rds)
{
	close(self->a);
	close(self->b);
}

static int send_to(int fd, const struct sockaddr_in *to, const void *buf, size_t len)
{
	return ERR(sendto(fd, buf, len, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof(*to)));
}

/* Reads an RDS_INFO snapshot with the sizing protocol; returns the record size. */
static int info(int fd, int name, void **out, socklen_t *len)
{
	socklen_t need = 0;
	int each;

	*out = NULL;
	each = getsockopt(fd, SOL_RDS, name, NULL, &need);
	if (each >= 0) {
		*len = need; /* nothing to report: 0 bytes, and the record size */
		return each;
	}
	if (errno != ENOSPC)
		return -errno;
	*out = malloc(need);
	*len = need;
	each = getsockopt(fd, SOL_RDS, name, *out, len);
	return each < 0 ? -errno : each;
}

TEST_F(rds, info_sizing_protocol_enospc_then_record_size)
{
	socklen_t len = 0;
	char small[40];
	void *buf;
	int each;

	/* Too small: ENOSPC and the bytes needed. */
	EXPECT_EQ(-ENOSPC, ERR(getsockopt(self->a, SOL_RDS, RDS_INFO_COUNTERS, NULL, &len)));
	EXPECT_LT(40U, len);
	EXPECT_EQ(0U, len % 40);
	len = sizeof(small);
	EXPECT_EQ(-ENOSPC, ERR(getsockopt(self->a, SOL_RDS, RDS_INFO_COUNTERS, small, &len)));
	each = info(self->a, RDS_INFO_COUNTERS, &buf, &len);
	EXPECT_EQ(40, each);
	EXPECT_EQ(0U, len % 40);
	free(buf);
	/* Numbers no producer answers. */
	len = 0;
	EXPECT_EQ(-ENOPROTOOPT, ERR(getsockopt(self->a, SOL_RDS, 10002, NULL, &len)));
	EXPECT_EQ(-ENOPROTOOPT, ERR(getsockopt(self->a, SOL_RDS, RDS_INFO_TCP_SOCKETS, NULL, &len)));
	len = -1;
	EXPECT_EQ(-EINVAL, ERR(getsockopt(self->a, SOL_RDS, RDS_INFO_COUNTERS, NULL, &len)));
}

static uint64_t counter(int fd, const char *name)
{
	struct rds_info_counter *c;
	socklen_t len;
	uint64_t v = ~0ULL;
	void *buf;

	if (info(fd, RDS_INFO_COUNTERS, &buf, &len) != sizeof(*c))
		return v;
	c = buf;
	for (size_t i = 0; i < len / sizeof(*c); i++)
		if (!strcmp((char *)c[i].name, name))
			v = c[i].value;
	free(buf);
	return v;
}

TEST_F(rds, info_counters_count_deliveries_under_upstream_names)
{
	uint64_t queued = counter(self->a, "recv_queued");
	uint64_t delivered = counter(self->a, "recv_delivered");
	char buf[100];

	ASSERT_NE(~0ULL, queued);
	ASSERT_NE(~0ULL, counter(self->a, "mprds_catchup_tx0_retries"));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(10, send_to(self->a, &self->to, "0123456789", 10));
	EXPECT_EQ(queued + 3, counter(self->a, "recv_queued"));
	ASSERT_EQ(10, recv(self->b, buf, sizeof(buf), MSG_DONTWAIT));
	EXPECT_EQ(delivered + 1, counter(self->a, "recv_delivered"));
}

TEST_F(rds, info_sockets_lists_bound_ipv4_sockets_with_inode)
{
	struct rds_info_socket *s;
	struct stat st;
	int unbound = rds_socket(), found = 0, each, sndbuf = 50000;
	socklen_t len;
	void *buf;

	ASSERT_LE(0, unbound);
	ASSERT_EQ(0, setsockopt(self->a, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)));
	ASSERT_EQ(0, fstat(self->a, &st));
	each = info(self->a, RDS_INFO_SOCKETS, &buf, &len);
	ASSERT_EQ((int)sizeof(*s), each);
	ASSERT_EQ(28, each);
	s = buf;
	for (size_t i = 0; i < len / sizeof(*s); i++) {
		if (s[i].inum == st.st_ino) {
			found++;
			EXPECT_EQ(htonl(INADDR_LOOPBACK), s[i].bound_addr);
			EXPECT_EQ(htons(local_port(self->a)), s[i].bound_port);
			/* The halved value: SO_SNDBUF doubles 50000 to 100000. */
			EXPECT_EQ(50000U, s[i].sndbuf);
		}
		EXPECT_NE(0U, s[i].bound_addr); /* unbound sockets are not listed */
	}
	EXPECT_EQ(1, found);
	free(buf);

	/* RDS6_INFO_SOCKETS lists every socket, the unbound one too. */
	ASSERT_EQ(0, fstat(unbound, &st));
	each = info(self->a, RDS6_INFO_SOCKETS, &buf, &len);
	ASSERT_EQ(52, each);
	found = 0;
	for (size_t i = 0; i < len / 52; i++) {
		struct rds6_info_socket *s6 = (void *)((char *)buf + i * 52);

		found += s6->inum == st.st_ino;
	}
	EXPECT_EQ(1, found);
	free(buf);
	close(unbound);
}

TEST_F(rds, info_recv_messages_and_connections)
{
	struct rds_info_message *m;
	struct rds_info_connection *c;
	socklen_t len;
	int each, found = 0;
	void *buf;

	ASSERT_EQ(5, send_to(self->a, &self->to, "hello", 5));
	ASSERT_EQ(0, send_to(self->a, &self->to, "", 0));
	each = info(self->a, RDS_INFO_RECV_MESSAGES, &buf, &len);
	ASSERT_EQ(26, each);
	m = buf;
	for (size_t i = 0; i < len / sizeof(*m); i++) {
		if (m[i].lport != htons(local_port(self->b)))
			continue;
		EXPECT_EQ(htons(local_port(self->a)), m[i].fport);
		EXPECT_EQ(htonl(INADDR_LOOPBACK), m[i].laddr);
		EXPECT_EQ(found ? 0U : 5U, m[i].len);
		found++;
	}
	EXPECT_EQ(2, found);
	free(buf);
	/* The loopback connection 127.0.0.1 -> 127.0.0.1, connected; every
	 * message took a sequence number; nothing waits to be sent or acked. */
	each = info(self->a, RDS_INFO_CONNECTIONS, &buf, &len);
	ASSERT_EQ(42, each);
	c = buf;
	found = 0;
	for (size_t i = 0; i < len / sizeof(*c); i++) {
		if (c[i].laddr != htonl(INADDR_LOOPBACK) || c[i].faddr != htonl(INADDR_LOOPBACK))
			continue;
		found++;
		EXPECT_STREQ("loopback", (char *)c[i].transport);
		EXPECT_EQ(RDS_INFO_CONNECTION_FLAG_CONNECTED, c[i].flags);
		EXPECT_LE(3ULL, c[i].next_tx_seq);
		EXPECT_EQ(c[i].next_tx_seq, c[i].next_rx_seq);
	}
	EXPECT_EQ(1, found);
	free(buf);
	len = 0;
	EXPECT_EQ(26, ERR(getsockopt(self->a, SOL_RDS, RDS_INFO_SEND_MESSAGES, NULL, &len)));
	EXPECT_EQ(0U, len);
	EXPECT_EQ(26, ERR(getsockopt(self->a, SOL_RDS, RDS_INFO_RETRANS_MESSAGES, NULL, &len)));
	EXPECT_EQ(0U, len);
}

TEST_F(rds, cancel_sent_to_checks_length_and_binding)
{
	struct sockaddr_in to = self->to;
	int unbound = rds_socket();

	EXPECT_EQ(-ENOTCONN, ERR(setsockopt(unbound, SOL_RDS, RDS_CANCEL_SENT_TO, &to,
					    sizeof(to))));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(self->a, SOL_RDS, RDS_CANCEL_SENT_TO, &to, 8)));
	EXPECT_EQ(0, setsockopt(self->a, SOL_RDS, RDS_CANCEL_SENT_TO, &to, sizeof(to)));
	/* The family is not checked (upstream). */
	to.sin_family = AF_UNIX;
	EXPECT_EQ(0, setsockopt(self->a, SOL_RDS, RDS_CANCEL_SENT_TO, &to, sizeof(to)));
	/* Delivered messages are not taken back. */
	ASSERT_EQ(3, send_to(self->a, &self->to, "abc", 3));
	EXPECT_EQ(0, setsockopt(self->a, SOL_RDS, RDS_CANCEL_SENT_TO, &self->to,
				sizeof(self->to)));
	EXPECT_EQ(3, ERR(recv(self->b, &to, sizeof(to), MSG_DONTWAIT)));
	close(unbound);
}

TEST_F(rds, memory_registration_options_on_loopback)
{
	struct rds_get_mr_args mr = { 0 };
	struct rds_get_mr_for_dest_args mrd = { 0 };
	struct rds_free_mr_args fr = { 0 };
	int unbound = rds_socket();

	EXPECT_EQ(-EINVAL, ERR(setsockopt(self->a, SOL_RDS, RDS_GET_MR, &mr, sizeof(mr) - 1)));
	EXPECT_EQ(-ENOTCONN, ERR(setsockopt(unbound, SOL_RDS, RDS_GET_MR, &mr, sizeof(mr))));
	/* The loopback transport registers no memory. */
	EXPECT_EQ(-EOPNOTSUPP, ERR(setsockopt(self->a, SOL_RDS, RDS_GET_MR, &mr, sizeof(mr))));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(self->a, SOL_RDS, RDS_GET_MR_FOR_DEST, &mrd, 32)));
	EXPECT_EQ(-EOPNOTSUPP, ERR(setsockopt(self->a, SOL_RDS, RDS_GET_MR_FOR_DEST, &mrd,
					      sizeof(mrd))));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(self->a, SOL_RDS, RDS_FREE_MR, &fr, sizeof(fr) - 1)));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(self->a, SOL_RDS, RDS_FREE_MR, &fr, sizeof(fr))));
	close(unbound);
}

static int send_with_cmsg(int fd, const struct sockaddr_in *to, int level, int type,
			  const void *data, size_t len, int flags)
{
	char control[CMSG_SPACE(64)] = { 0 };
	struct iovec iov = { .iov_base = "x", .iov_len = 1 };
	struct msghdr m = {
		.msg_name = (void *)to, .msg_namelen = sizeof(*to),
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = control, .msg_controllen = CMSG_SPACE(len),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	c->cmsg_level = level;
	c->cmsg_type = type;
	c->cmsg_len = CMSG_LEN(len);
	memcpy(CMSG_DATA(c), data, len);
	return ERR(sendmsg(fd, &m, flags | MSG_DONTWAIT));
}

TEST_F(rds, send_cmsgs_are_checked_as_upstream)
{
	struct rds_rdma_args args = { 0 };
	struct rds_iovec vec;
	uint64_t cookie = 0;
	int fd = 0;
	char buf[8];

	/* Unknown SOL_RDS type; short RDMA_ARGS. */
	EXPECT_EQ(-EINVAL, send_with_cmsg(self->a, &self->to, SOL_RDS, 99, &cookie, 8, 0));
	EXPECT_EQ(-EINVAL, send_with_cmsg(self->a, &self->to, SOL_RDS, RDS_CMSG_RDMA_ARGS,
					  &args, sizeof(args) - 8, 0));
	/* RDMA args are checked first: no local iovec is EINVAL, as upstream. */
	EXPECT_EQ(-EINVAL, send_with_cmsg(self->a, &self->to, SOL_RDS, RDS_CMSG_RDMA_ARGS,
					  &args, sizeof(args), 0));
	/* A cookie the socket has no MR for: EINVAL (upstream's rds_cmsg_rdma_dest). */
	EXPECT_EQ(-EINVAL, send_with_cmsg(self->a, &self->to, SOL_RDS, RDS_CMSG_RDMA_DEST,
					  &cookie, sizeof(cookie), 0));
	/* A well-formed RDMA operation: the loopback transport has no RDMA. */
	vec.addr = (uintptr_t)buf;
	vec.bytes = sizeof(buf);
	args.local_vec_addr = (uintptr_t)&vec;
	args.nr_local = 1;
	args.remote_vec.bytes = sizeof(buf);
	EXPECT_EQ(-EOPNOTSUPP, send_with_cmsg(self->a, &self->to, SOL_RDS, RDS_CMSG_RDMA_ARGS,
					      &args, sizeof(args), 0));
	/* MSG_ZEROCOPY without a cookie cmsg. */
	EXPECT_EQ(-EINVAL, send_with_cmsg(self->a, &self->to, SOL_SOCKET, SCM_RIGHTS, &fd,
					  sizeof(fd), MSG_ZEROCOPY));
	/* Other levels are ignored: SCM_RIGHTS goes nowhere, the data arrives. */
	EXPECT_EQ(1, send_with_cmsg(self->a, &self->to, SOL_SOCKET, SCM_RIGHTS, &fd, sizeof(fd),
				    0));
	EXPECT_EQ(1, ERR(recv(self->b, buf, sizeof(buf), MSG_DONTWAIT)));
	EXPECT_EQ(-EAGAIN, ERR(recv(self->b, buf, sizeof(buf), MSG_DONTWAIT)));
}

static struct cmsghdr *recv_with_cmsgs(int fd, char *control, size_t size, int *ret)
{
	static char buf[64];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	static struct msghdr m;

	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = control;
	m.msg_controllen = size;
	*ret = ERR(recvmsg(fd, &m, MSG_DONTWAIT));
	return *ret < 0 ? NULL : CMSG_FIRSTHDR(&m);
}

TEST_F(rds, so_timestamp_stamps_received_messages)
{
	char control[256];
	struct cmsghdr *c;
	struct timeval tv, before;
	int on = 1, ret;

	/* At SOL_RDS a wrong length is EFAULT (upstream). */
	EXPECT_EQ(-EFAULT, ERR(setsockopt(self->b, SOL_RDS, SO_TIMESTAMP_OLD, &on, 2)));
	ASSERT_EQ(0, setsockopt(self->b, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof(on)));
	gettimeofday(&before, NULL);
	ASSERT_EQ(2, send_to(self->a, &self->to, "ts", 2));
	c = recv_with_cmsgs(self->b, control, sizeof(control), &ret);
	ASSERT_EQ(2, ret);
	ASSERT_NE(NULL, c);
	EXPECT_EQ(SOL_SOCKET, c->cmsg_level);
	EXPECT_EQ(SO_TIMESTAMP_OLD, c->cmsg_type);
	memcpy(&tv, CMSG_DATA(c), sizeof(tv));
	EXPECT_LE(before.tv_sec, tv.tv_sec);
	EXPECT_GE(before.tv_sec + 60, tv.tv_sec);
	/* Off again (at SOL_RDS this time): no cmsg. */
	on = 0;
	ASSERT_EQ(0, setsockopt(self->b, SOL_RDS, SO_TIMESTAMP_OLD, &on, sizeof(on)));
	ASSERT_EQ(2, send_to(self->a, &self->to, "ts", 2));
	c = recv_with_cmsgs(self->b, control, sizeof(control), &ret);
	EXPECT_EQ(2, ret);
	EXPECT_EQ(NULL, c);
	/* SO_TIMESTAMP_NEW: the 64-bit cmsg. */
	on = 1;
	ASSERT_EQ(0, setsockopt(self->b, SOL_RDS, SO_TIMESTAMP_NEW, &on, sizeof(on)));
	ASSERT_EQ(2, send_to(self->a, &self->to, "ts", 2));
	c = recv_with_cmsgs(self->b, control, sizeof(control), &ret);
	ASSERT_EQ(2, ret);
	ASSERT_NE(NULL, c);
	EXPECT_EQ(SOL_SOCKET, c->cmsg_level);
	EXPECT_EQ(SO_TIMESTAMP_NEW, c->cmsg_type);
	EXPECT_EQ(CMSG_LEN(16), c->cmsg_len);
}

TEST_F(rds, rxpath_latency_traces_as_cmsg)
{
	struct rds_rx_trace_so so = { .rx_traces = 2, .rx_trace_pos = { 1, 2 } };
	struct rds_cmsg_rx_trace tr;
	char control[256];
	struct cmsghdr *c;
	int ret;

	EXPECT_EQ(-EFAULT, ERR(setsockopt(self->b, SOL_RDS, SO_RDS_MSG_RXPATH_LATENCY, &so, 3)));
	so.rx_traces = 4;
	EXPECT_EQ(-EFAULT, ERR(setsockopt(self->b, SOL_RDS, SO_RDS_MSG_RXPATH_LATENCY, &so,
					  sizeof(so))));
	so.rx_traces = 2;
	so.rx_trace_pos[1] = 3;
	EXPECT_EQ(-EFAULT, ERR(setsockopt(self->b, SOL_RDS, SO_RDS_MSG_RXPATH_LATENCY, &so,
					  sizeof(so))));
	so.rx_trace_pos[1] = 2;
	ASSERT_EQ(0, setsockopt(self->b, SOL_RDS, SO_RDS_MSG_RXPATH_LATENCY, &so, sizeof(so)));
	ASSERT_EQ(3, send_to(self->a, &self->to, "lat", 3));
	c = recv_with_cmsgs(self->b, control, sizeof(control), &ret);
	ASSERT_EQ(3, ret);
	ASSERT_NE(NULL, c);
	EXPECT_EQ(SOL_RDS, c->cmsg_level);
	EXPECT_EQ(RDS_CMSG_RXPATH_LATENCY, c->cmsg_type);
	EXPECT_EQ(CMSG_LEN(sizeof(tr)), c->cmsg_len);
	memcpy(&tr, CMSG_DATA(c), sizeof(tr));
	EXPECT_EQ(2, tr.rx_traces);
	EXPECT_EQ(1, tr.rx_trace_pos[0]);
	EXPECT_EQ(2, tr.rx_trace_pos[1]);
	/* Queued-to-socket minus data start, and cmsg time minus queued: both
	 * measured, both under a minute. */
	EXPECT_LT(0ULL, tr.rx_trace[0]);
	EXPECT_GT(60000000000ULL, tr.rx_trace[0]);
	EXPECT_LT(0ULL, tr.rx_trace[1]);
	EXPECT_GT(60000000000ULL, tr.rx_trace[1]);
}

/* In a new network namespace: bind the port `port` (taken in the parent's),
 * talk to itself, and see only its own connection. Exit status says what failed. */
static int netns_child(int port)
{
	struct sockaddr_in to = sin4("127.0.0.1", port);
	struct rds_info_connection *c;
	socklen_t len;
	char buf[8];
	void *recs;
	int fd;

	if (unshare(CLONE_NEWNET))
		return 10;
	fd = bound_socket("127.0.0.1", port);
	if (fd < 0)
		return 11;
	if (info(fd, RDS_INFO_CONNECTIONS, &recs, &len) != 42 || len != 0)
		return 12; /* a new namespace starts with no connection */
	if (send_to(fd, &to, "ns", 2) != 2 || recv(fd, buf, sizeof(buf), MSG_DONTWAIT) != 2)
		return 13;
	if (info(fd, RDS_INFO_CONNECTIONS, &recs, &len) != 42 || len != 42)
		return 14;
	c = recs;
	if (c->next_tx_seq != 2)
		return 15;
	free(recs);
	close(fd);
	return 0;
}

TEST_F(rds, network_namespaces_have_their_own_ports_and_connections)
{
	int port = local_port(self->b), status;
	char buf[8];
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(netns_child(port));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* The parent's socket on the same port got nothing of it. */
	EXPECT_EQ(-EAGAIN, ERR(recv(self->b, buf, sizeof(buf), MSG_DONTWAIT)));
	ASSERT_EQ(2, send_to(self->a, &self->to, "me", 2));
	EXPECT_EQ(2, ERR(recv(self->b, buf, sizeof(buf), MSG_DONTWAIT)));
}

static int bound6(int port)
{
	struct sockaddr_in6 a = sin6("::1", port, 0);
	int fd = rds_socket();

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)))
		return -1;
	return fd;
}

static int port6(int fd)
{
	struct sockaddr_in6 a;
	socklen_t len = sizeof(a);

	return getsockname(fd, (struct sockaddr *)&a, &len) ? -1 : ntohs(a.sin6_port);
}

TEST_F(rds, ipv6_loopback_roundtrip_and_rds6_records)
{
	int a = bound6(0), b = bound6(0), found = 0;
	struct sockaddr_in6 to = sin6("::1", port6(b), 0), from;
	socklen_t fromlen = sizeof(from), len;
	struct in6_addr lo = IN6ADDR_LOOPBACK_INIT;
	char buf[16];
	void *recs;

	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	ASSERT_EQ(3, ERR(sendto(a, "six", 3, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to))));
	/* The queued message, in the IPv6 receive-queue records only. */
	ASSERT_EQ(50, info(a, RDS6_INFO_RECV_MESSAGES, &recs, &len));
	for (size_t i = 0; i < len / 50; i++) {
		struct rds6_info_message *m = (void *)((char *)recs + i * 50);

		if (m->lport != htons(port6(b)))
			continue;
		found++;
		EXPECT_EQ(3U, m->len);
		EXPECT_EQ(htons(port6(a)), m->fport);
		EXPECT_EQ(0, memcmp(&lo, &m->laddr, sizeof(lo)));
		EXPECT_EQ(0, memcmp(&lo, &m->faddr, sizeof(lo)));
	}
	free(recs);
	EXPECT_EQ(1, found);
	ASSERT_EQ(26, info(a, RDS_INFO_RECV_MESSAGES, &recs, &len));
	for (size_t i = 0; i < len / sizeof(struct rds_info_message); i++)
		EXPECT_NE(htons(port6(b)), ((struct rds_info_message *)recs)[i].lport);
	free(recs);
	/* The source comes back as a 28-byte sockaddr_in6. */
	ASSERT_EQ(3, ERR(recvfrom(b, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from,
				  &fromlen)));
	EXPECT_EQ(28U, fromlen);
	EXPECT_EQ(AF_INET6, from.sin6_family);
	EXPECT_EQ(htons(port6(a)), from.sin6_port);
	EXPECT_EQ(0, memcmp(&lo, &from.sin6_addr, sizeof(lo)));
	/* ::1 -> ::1 is an IPv6 connection: listed by RDS6_INFO_CONNECTIONS only. */
	ASSERT_EQ(65, info(a, RDS6_INFO_CONNECTIONS, &recs, &len));
	found = 0;
	for (size_t i = 0; i < len / 65; i++) {
		struct rds6_info_connection *c = (void *)((char *)recs + i * 65);

		if (!memcmp(&lo, &c->laddr, sizeof(lo)) && !memcmp(&lo, &c->faddr, sizeof(lo))) {
			found++;
			EXPECT_STREQ("loopback", (char *)c->transport);
		}
	}
	free(recs);
	EXPECT_EQ(1, found);
	close(a);
	close(b);
}

/* Reads "connections N" and "congestion_maps N" from debugfs. */
static int objects(int *conns, int *maps)
{
	char buf[256];

	if (read_file(RRDS_DEBUGFS "/objects", buf, sizeof(buf)) < 0)
		return -1;
	return sscanf(buf, "connections %d congestion_maps %d", conns, maps) == 2 ? 0 : -1;
}

TEST_F(rds, connections_and_maps_go_with_their_last_user)
{
	int conns0, maps0, conns, maps, fd = bound_socket("127.0.0.1", 0);
	char ip[32];

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, objects(&conns0, &maps0));
	/* 200 destinations nobody listens on: a connection and a map each. */
	for (int i = 0; i < 200; i++) {
		struct sockaddr_in to;

		snprintf(ip, sizeof(ip), "127.0.%d.%d", 1 + i / 250, 1 + i % 250);
		to = sin4(ip, 5000);
		ASSERT_EQ(1, send_to(fd, &to, "x", 1));
	}
	ASSERT_EQ(0, objects(&conns, &maps));
	EXPECT_EQ(conns0 + 200, conns);
	EXPECT_EQ(maps0 + 200, maps);
	/* Closing the only socket that used them frees them all. */
	close(fd);
	ASSERT_EQ(0, objects(&conns, &maps));
	EXPECT_EQ(conns0, conns);
	EXPECT_EQ(maps0, maps);
}

TEST_HARNESS_MAIN
