// SPDX-License-Identifier: GPL-2.0
/*
 * The PF_RDS socket family over the loopback transport: creation, bind,
 * connect, getname, send and receive, options, and the module's lifetime
 * against open sockets. Errnos are upstream RDS's (net/rds).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <linux/rds.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_socket.h"

RRDS_LOADED_FIXTURE(rds);

TEST_F(rds, socket_accepts_seqpacket_only)
{
	int fd = rds_socket();

	ASSERT_LE(0, fd);
	close(fd);
	EXPECT_EQ(-ESOCKTNOSUPPORT, ERR(socket(AF_RDS, SOCK_DGRAM, 0)));
	EXPECT_EQ(-ESOCKTNOSUPPORT, ERR(socket(AF_RDS, SOCK_STREAM, 0)));
	EXPECT_EQ(-ESOCKTNOSUPPORT, ERR(socket(AF_RDS, SOCK_SEQPACKET, 1)));
}

TEST_F(rds, bind_rejects_bad_addresses_with_einval)
{
	struct sockaddr_in a = sin4("127.0.0.1", 4000);
	struct sockaddr_in zero = sin4("0.0.0.0", 4000), bcast = sin4("255.255.255.255", 4000);
	struct sockaddr_in mcast = sin4("224.0.0.1", 4000), unspec = a;
	struct sockaddr_in6 any6 = sin6("::", 4000, 0), mc6 = sin6("ff02::1", 4000, 0);
	struct sockaddr_in6 ll = sin6("fe80::1", 4000, 0), mapped0 = sin6("::ffff:0.0.0.0", 4000, 0);
	int fd = rds_socket();

	ASSERT_LE(0, fd);
	unspec.sin_family = AF_UNSPEC;
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&a, 1)));
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&a, sizeof(a) - 1)));
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&zero, sizeof(zero))));
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&bcast, sizeof(bcast))));
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&mcast, sizeof(mcast))));
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&unspec, sizeof(unspec))));
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&any6, sizeof(any6))));
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&any6, sizeof(any6) - 4)));
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&mc6, sizeof(mc6))));
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&ll, sizeof(ll))));
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&mapped0, sizeof(mapped0))));
	/* Port 1 is reserved for RDS probes. */
	a.sin_port = htons(1);
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&a, sizeof(a))));
	close(fd);
}

TEST_F(rds, bind_unservable_address_is_eaddrnotavail)
{
	struct sockaddr_in a = sin4("10.254.9.9", 4000);
	int fd = rds_socket();

	ASSERT_LE(0, fd);
	EXPECT_EQ(-EADDRNOTAVAIL, ERR(bind(fd, (struct sockaddr *)&a, sizeof(a))));
	close(fd);
}

TEST_F(rds, bind_port_zero_picks_free_port)
{
	int a = bound_socket("127.0.0.1", 0), b = bound_socket("127.0.0.1", 0);

	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	EXPECT_LE(2, local_port(a));
	EXPECT_NE(local_port(a), local_port(b));
	close(a);
	close(b);
}

TEST_F(rds, bind_twice_is_einval_and_taken_port_eaddrinuse)
{
	struct sockaddr_in a = sin4("127.0.0.1", 4001);
	struct sockaddr_in6 mapped = sin6("::ffff:127.0.0.1", 4001, 0);
	int fd = bound_socket("127.0.0.1", 4001), other = rds_socket(), third;

	ASSERT_LE(0, fd);
	ASSERT_LE(0, other);
	EXPECT_EQ(-EINVAL, ERR(bind(fd, (struct sockaddr *)&a, sizeof(a))));
	EXPECT_EQ(-EADDRINUSE, ERR(bind(other, (struct sockaddr *)&a, sizeof(a))));
	/* The v4-mapped spelling is the same address. */
	EXPECT_EQ(-EADDRINUSE, ERR(bind(other, (struct sockaddr *)&mapped, sizeof(mapped))));
	/* Another loopback address, same port: fine. */
	third = bound_socket("127.0.0.2", 4001);
	EXPECT_LE(0, third);
	close(third);
	/* Closing frees the port at once. */
	close(fd);
	EXPECT_EQ(0, ERR(bind(other, (struct sockaddr *)&a, sizeof(a))));
	close(other);
}

TEST_F(rds, bind_ipv6_loopback)
{
	struct sockaddr_in6 a = sin6("::1", 0, 0), got;
	socklen_t len = sizeof(got);
	int fd = rds_socket();

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ERR(bind(fd, (struct sockaddr *)&a, sizeof(a))));
	ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)&got, &len));
	EXPECT_EQ(sizeof(struct sockaddr_in6), len);
	EXPECT_EQ(AF_INET6, got.sin6_family);
	EXPECT_EQ(0, memcmp(&got.sin6_addr, &a.sin6_addr, 16));
	close(fd);
}

TEST_F(rds, getname_and_connect)
{
	struct sockaddr_in got, peer = sin4("127.0.0.1", 4100);
	struct sockaddr_in zero = sin4("0.0.0.0", 1), mcast = sin4("224.0.0.1", 1), unspec = peer;
	struct sockaddr_in6 any6 = sin6("::", 1, 0);
	socklen_t len = sizeof(got);
	int fd = rds_socket();

	ASSERT_LE(0, fd);
	unspec.sin_family = AF_UNSPEC;
	ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)&got, &len));
	EXPECT_EQ(16U, len);
	EXPECT_EQ(AF_UNSPEC, got.sin_family);
	len = sizeof(got);
	EXPECT_EQ(-ENOTCONN, ERR(getpeername(fd, (struct sockaddr *)&got, &len)));

	EXPECT_EQ(-EDESTADDRREQ, ERR(connect(fd, (struct sockaddr *)&zero, sizeof(zero))));
	EXPECT_EQ(-EINVAL, ERR(connect(fd, (struct sockaddr *)&mcast, sizeof(mcast))));
	EXPECT_EQ(-EPROTOTYPE, ERR(connect(fd, (struct sockaddr *)&any6, sizeof(any6))));
	EXPECT_EQ(-EAFNOSUPPORT, ERR(connect(fd, (struct sockaddr *)&unspec, sizeof(unspec))));
	EXPECT_EQ(-EINVAL, ERR(connect(fd, (struct sockaddr *)&peer, 1)));

	ASSERT_EQ(0, connect(fd, (struct sockaddr *)&peer, sizeof(peer)));
	len = sizeof(got);
	ASSERT_EQ(0, getpeername(fd, (struct sockaddr *)&got, &len));
	EXPECT_EQ(16U, len);
	EXPECT_EQ(0, memcmp(&got, &peer, sizeof(got)));
	/* Unbound but connected: a zero address of the peer's family. */
	len = sizeof(got);
	ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)&got, &len));
	EXPECT_EQ(AF_INET, got.sin_family);
	EXPECT_EQ(0U, got.sin_addr.s_addr);
	close(fd);
}

TEST_F(rds, unsupported_calls_are_eopnotsupp)
{
	int fd = rds_socket();

	ASSERT_LE(0, fd);
	EXPECT_EQ(-EOPNOTSUPP, ERR(shutdown(fd, SHUT_RDWR)));
	EXPECT_EQ(-EOPNOTSUPP, ERR(listen(fd, 1)));
	close(fd);
}

TEST_F(rds, send_errors)
{
	struct sockaddr_in to = sin4("127.0.0.1", 4200), zero = sin4("0.0.0.0", 4200);
	struct sockaddr_in6 to6 = sin6("::1", 4200, 0);
	int unbound = rds_socket(), fd = bound_socket("127.0.0.1", 0);
	static char big[(1 << 20) + 1];
	int sndbuf = 4 << 20;

	ASSERT_LE(0, unbound);
	ASSERT_LE(0, fd);
	EXPECT_EQ(-ENOTCONN, ERR(sendto(unbound, "x", 1, 0, (struct sockaddr *)&to, sizeof(to))));
	EXPECT_EQ(-ENOTCONN, ERR(send(fd, "x", 1, 0)));
	EXPECT_EQ(-EOPNOTSUPP, ERR(sendto(fd, "x", 1, MSG_NOSIGNAL, (struct sockaddr *)&to, sizeof(to))));
	EXPECT_EQ(-EOPNOTSUPP, ERR(sendto(fd, "x", 1, MSG_MORE, (struct sockaddr *)&to, sizeof(to))));
	EXPECT_EQ(-EINVAL, ERR(sendto(fd, "x", 1, 0, (struct sockaddr *)&to, 8)));
	EXPECT_EQ(-EINVAL, ERR(sendto(fd, "x", 1, 0, (struct sockaddr *)&zero, sizeof(zero))));
	EXPECT_EQ(-EOPNOTSUPP, ERR(sendto(fd, "x", 1, 0, (struct sockaddr *)&to6, sizeof(to6))));
	/* Default SO_SNDBUF: the limit is half the kernel's (doubled) value. */
	EXPECT_EQ(-EMSGSIZE, ERR(sendto(fd, big, 106497, 0, (struct sockaddr *)&to, sizeof(to))));
	EXPECT_EQ(106496, ERR(sendto(fd, big, 106496, 0, (struct sockaddr *)&to, sizeof(to))));
	/* 1 MiB is the ceiling whatever the buffer. */
	ASSERT_EQ(0, setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)));
	EXPECT_EQ(1 << 20, ERR(sendto(fd, big, 1 << 20, 0, (struct sockaddr *)&to, sizeof(to))));
	EXPECT_EQ(-EMSGSIZE, ERR(sendto(fd, big, (1 << 20) + 1, 0, (struct sockaddr *)&to, sizeof(to))));
	close(unbound);
	close(fd);
}

TEST_F(rds, loopback_roundtrip_keeps_data_order_and_source)
{
	int rx = bound_socket("127.0.0.1", 0), tx = bound_socket("127.0.0.1", 0);
	struct sockaddr_in to, from;
	socklen_t len;
	char buf[64];
	int i;

	ASSERT_LE(0, rx);
	ASSERT_LE(0, tx);
	to = sin4("127.0.0.1", local_port(rx));
	for (i = 0; i < 10; i++) {
		snprintf(buf, sizeof(buf), "message %d", i);
		ASSERT_EQ((int)strlen(buf), ERR(sendto(tx, buf, strlen(buf), 0, (struct sockaddr *)&to, sizeof(to))));
	}
	for (i = 0; i < 10; i++) {
		char want[64];

		snprintf(want, sizeof(want), "message %d", i);
		len = sizeof(from);
		memset(buf, 0, sizeof(buf));
		ASSERT_EQ((int)strlen(want), ERR(recvfrom(rx, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len)));
		EXPECT_STREQ(want, buf);
		EXPECT_EQ(16U, len);
		EXPECT_EQ(AF_INET, from.sin_family);
		EXPECT_EQ(htonl(INADDR_LOOPBACK), from.sin_addr.s_addr);
		EXPECT_EQ(local_port(tx), ntohs(from.sin_port));
	}
	EXPECT_EQ(-EAGAIN, ERR(recv(rx, buf, sizeof(buf), MSG_DONTWAIT)));
	close(rx);
	close(tx);
}

/*
 * sendmmsg adds MSG_BATCH to every message but the last: rrds takes it (in-tree
 * RDS fails the batch's first message with EOPNOTSUPP), so a batch goes whole,
 * in order.
 */
TEST_F(rds, sendmmsg_sends_the_whole_batch_in_order)
{
	int rx = bound_socket("127.0.0.1", 0), tx = bound_socket("127.0.0.1", 0);
	struct mmsghdr msgs[3] = {};
	struct iovec iov[3];
	struct sockaddr_in to;
	char data[3][16], buf[64];
	int i;

	ASSERT_LE(0, rx);
	ASSERT_LE(0, tx);
	to = sin4("127.0.0.1", local_port(rx));
	for (i = 0; i < 3; i++) {
		snprintf(data[i], sizeof(data[i]), "batch %d", i);
		iov[i] = (struct iovec){ .iov_base = data[i], .iov_len = strlen(data[i]) };
		msgs[i].msg_hdr = (struct msghdr){ .msg_name = &to, .msg_namelen = sizeof(to),
						   .msg_iov = &iov[i], .msg_iovlen = 1 };
	}
	ASSERT_EQ(3, ERR(sendmmsg(tx, msgs, 3, 0)));
	for (i = 0; i < 3; i++) {
		EXPECT_EQ((unsigned int)strlen(data[i]), msgs[i].msg_len);
		memset(buf, 0, sizeof(buf));
		ASSERT_EQ((int)strlen(data[i]), ERR(recv(rx, buf, sizeof(buf), MSG_DONTWAIT)));
		EXPECT_STREQ(data[i], buf);
	}
	EXPECT_EQ(-EAGAIN, ERR(recv(rx, buf, sizeof(buf), MSG_DONTWAIT)));
	close(rx);
	close(tx);
}

TEST_F(rds, connected_send_zero_length_peek_and_trunc)
{
	int rx = bound_socket("127.0.0.1", 0), tx = bound_socket("127.0.0.1", 0);
	struct sockaddr_in to, from;
	struct msghdr mh = { 0 };
	struct iovec iov;
	socklen_t len = sizeof(from);
	char buf[8];

	ASSERT_LE(0, rx);
	ASSERT_LE(0, tx);
	to = sin4("127.0.0.1", local_port(rx));
	ASSERT_EQ(0, connect(tx, (struct sockaddr *)&to, sizeof(to)));

	ASSERT_EQ(0, ERR(send(tx, "", 0, 0)));
	ASSERT_EQ(0, ERR(recvfrom(rx, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len)));
	EXPECT_EQ(16U, len);
	EXPECT_EQ(local_port(tx), ntohs(from.sin_port));

	ASSERT_EQ(12, ERR(send(tx, "hello, world", 12, 0)));
	EXPECT_EQ(5, ERR(recv(rx, buf, 5, MSG_PEEK)));
	EXPECT_EQ(0, memcmp(buf, "hello", 5));
	/* MSG_TRUNC returns the full length; the flag says the copy was short. */
	iov.iov_base = buf;
	iov.iov_len = 5;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	EXPECT_EQ(12, ERR(recvmsg(rx, &mh, MSG_TRUNC)));
	EXPECT_TRUE(mh.msg_flags & MSG_TRUNC);
	/* The rest of a truncated message is gone. */
	EXPECT_EQ(-EAGAIN, ERR(recv(rx, buf, sizeof(buf), MSG_DONTWAIT)));
	EXPECT_EQ(0, ERR(recv(rx, buf, sizeof(buf), MSG_OOB)));
	close(rx);
	close(tx);
}

TEST_F(rds, blocking_recv_times_out_with_etimedout)
{
	struct timeval tv = { .tv_usec = 200000 }, start, end;
	int fd = bound_socket("127.0.0.1", 0);
	char buf[4];

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	gettimeofday(&start, NULL);
	EXPECT_EQ(-ETIMEDOUT, ERR(recv(fd, buf, sizeof(buf), 0)));
	gettimeofday(&end, NULL);
	EXPECT_LE(150000, (end.tv_sec - start.tv_sec) * 1000000 + end.tv_usec - start.tv_usec);
	close(fd);
}

TEST_F(rds, poll_reports_in_and_out)
{
	int rx = bound_socket("127.0.0.1", 0), tx = bound_socket("127.0.0.1", 0);
	struct pollfd p = { .events = POLLIN | POLLOUT };
	struct sockaddr_in to;

	ASSERT_LE(0, rx);
	ASSERT_LE(0, tx);
	p.fd = rx;
	ASSERT_EQ(1, poll(&p, 1, 0));
	EXPECT_EQ(POLLOUT, p.revents & (POLLIN | POLLOUT | POLLERR | POLLHUP));
	to = sin4("127.0.0.1", local_port(rx));
	ASSERT_EQ(1, ERR(sendto(tx, "x", 1, 0, (struct sockaddr *)&to, sizeof(to))));
	ASSERT_EQ(1, poll(&p, 1, 1000));
	EXPECT_EQ(POLLIN | POLLOUT, p.revents & (POLLIN | POLLOUT | POLLERR | POLLHUP));
	close(rx);
	close(tx);
}

TEST_F(rds, options_recverr_transport_and_unknown)
{
	int fd = rds_socket(), v = 7, t = -2;
	socklen_t len = sizeof(v);

	ASSERT_LE(0, fd);
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, RDS_RECVERR, &v, 2)));
	ASSERT_EQ(0, setsockopt(fd, SOL_RDS, RDS_RECVERR, &v, sizeof(v)));
	v = 0;
	ASSERT_EQ(0, getsockopt(fd, SOL_RDS, RDS_RECVERR, &v, &len));
	EXPECT_EQ(1, v);
	EXPECT_EQ(4U, len);
	len = 2;
	EXPECT_EQ(-EINVAL, ERR(getsockopt(fd, SOL_RDS, RDS_RECVERR, &v, &len)));

	len = sizeof(t);
	ASSERT_EQ(0, getsockopt(fd, SOL_RDS, SO_RDS_TRANSPORT, &t, &len));
	EXPECT_EQ(RDS_TRANS_NONE, t);
	t = 3;
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, SO_RDS_TRANSPORT, &t, sizeof(t))));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, SO_RDS_TRANSPORT, &t, 8)));
	EXPECT_EQ(-ENOPROTOOPT, ERR(setsockopt(fd, SOL_RDS, 4, &v, sizeof(v))));
	EXPECT_EQ(-ENOPROTOOPT, ERR(setsockopt(fd, SOL_IP, 1, &v, sizeof(v))));
	len = sizeof(v);
	EXPECT_EQ(-ENOPROTOOPT, ERR(getsockopt(fd, SOL_RDS, RDS_CONG_MONITOR, &v, &len)));
	close(fd);

	fd = bound_socket("127.0.0.1", 0);
	ASSERT_LE(0, fd);
	len = sizeof(t);
	ASSERT_EQ(0, getsockopt(fd, SOL_RDS, SO_RDS_TRANSPORT, &t, &len));
	EXPECT_EQ(3, t); /* upstream's internal RDS_TRANS_LOOP */
	t = RDS_TRANS_TCP;
	EXPECT_EQ(-EOPNOTSUPP, ERR(setsockopt(fd, SOL_RDS, SO_RDS_TRANSPORT, &t, sizeof(t))));
	close(fd);
}

TEST_F(rds, rds_ping_is_answered_from_port_0)
{
	int fd = bound_socket("127.0.0.1", 0), other = bound_socket("127.0.0.1", 0);
	struct sockaddr_in ping = sin4("127.0.0.1", 0), from;
	socklen_t len = sizeof(from);
	char buf[4];

	ASSERT_LE(0, fd);
	ASSERT_LE(0, other);
	ASSERT_EQ(0, ERR(sendto(fd, "", 0, 0, (struct sockaddr *)&ping, sizeof(ping))));
	ASSERT_EQ(0, ERR(recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len)));
	EXPECT_EQ(0, from.sin_port);
	EXPECT_EQ(htonl(INADDR_LOOPBACK), from.sin_addr.s_addr);
	/* The ping itself reaches no socket. */
	EXPECT_EQ(-EAGAIN, ERR(recv(other, buf, sizeof(buf), MSG_DONTWAIT)));
	EXPECT_EQ(-EAGAIN, ERR(recv(fd, buf, sizeof(buf), MSG_DONTWAIT)));
	close(fd);
	close(other);
}

TEST_F(rds, tos_reads_zero_and_cannot_be_set_on_loopback)
{
	int fd = bound_socket("127.0.0.1", 0);
	unsigned char tos = 0xff;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ioctl(fd, SIOCRDSGETTOS, &tos));
	EXPECT_EQ(0, tos);
	tos = 1;
	EXPECT_EQ(-ENOTTY, ERR(ioctl(fd, SIOCRDSSETTOS, &tos)));
	close(fd);
}

TEST_F(rds, python_socket_module_speaks_rds)
{
	EXPECT_EQ(0, sh("python3 %s/af_rds.py", selftests_dir()));
}

/* Module lifetime: these two run last and leave rrds unloaded. */
/*
 * fail-nth over the calls of a loopback exchange: each call runs again and
 * again with the n-th allocation rrds makes in it failing, n = 1, 2, ...,
 * until it makes fewer than n. A call that fails says ENOMEM and leaves
 * nothing half done: a send that failed queued nothing, a receive that
 * failed kept its message, a failed bind or option can be done again.
 */
TEST_F(rds, failed_allocations_fail_calls_cleanly)
{
	SKIP_WITHOUT_FAULT_INJECTION();
	struct sockaddr_in any = sin4("127.0.0.1", 0), to;
	int rx = bound_socket("127.0.0.1", 0), tx = bound_socket("127.0.0.1", 0);
	int n, injected = 1, on = 1, fd, failures[6] = { 0 };
	struct timeval timeout = { .tv_sec = 10 };
	char msg[32], buf[64];
	long ret;

	ASSERT_LE(0, rx);
	ASSERT_LE(0, tx);
	to = sin4("127.0.0.1", local_port(rx));
	ASSERT_EQ(0, setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)));
	ASSERT_EQ(0, start_alloc_failures(1, 0, FAULT_DEPTH, NULL));

	for (n = 1, injected = 1; injected && n <= NTH_MAX; n++) {
		ret = NTH_FAILING(n, injected, socket(AF_RDS, SOCK_SEQPACKET, 0));
		if (ret >= 0) {
			close(ret);
			continue;
		}
		EXPECT_EQ(-ENOMEM, ret);
		failures[0]++;
	}
	EXPECT_FALSE(injected);

	for (n = 1, injected = 1; injected && n <= NTH_MAX; n++) {
		fd = rds_socket();
		ASSERT_LE(0, fd);
		ret = NTH_FAILING(n, injected, bind(fd, (struct sockaddr *)&any, sizeof(any)));
		if (ret < 0) {
			EXPECT_EQ(-ENOMEM, ret);
			failures[1]++;
			EXPECT_EQ(0, ERR(bind(fd, (struct sockaddr *)&any, sizeof(any))));
		}
		EXPECT_LT(0, local_port(fd));
		close(fd);
	}
	EXPECT_FALSE(injected);

	for (n = 1, injected = 1; injected && n <= NTH_MAX; n++) {
		snprintf(msg, sizeof(msg), "send %d", n);
		ret = NTH_FAILING(n, injected, sendto(tx, msg, strlen(msg), MSG_DONTWAIT,
						       (struct sockaddr *)&to, sizeof(to)));
		memset(buf, 0, sizeof(buf));
		if (ret < 0) {
			EXPECT_EQ(-ENOMEM, ret);
			failures[2]++;
			EXPECT_EQ(-EAGAIN, ERR(recv(rx, buf, sizeof(buf), MSG_DONTWAIT)));
			continue;
		}
		EXPECT_EQ((long)strlen(msg), ret);
		EXPECT_EQ((int)strlen(msg), ERR(recv(rx, buf, sizeof(buf), 0)));
		EXPECT_STREQ(msg, buf);
	}
	EXPECT_FALSE(injected);

	for (n = 1, injected = 1; injected && n <= NTH_MAX; n++) {
		snprintf(msg, sizeof(msg), "receive %d", n);
		ASSERT_EQ((int)strlen(msg), ERR(sendto(tx, msg, strlen(msg), 0,
						       (struct sockaddr *)&to, sizeof(to))));
		memset(buf, 0, sizeof(buf));
		ret = NTH_FAILING(n, injected, recv(rx, buf, sizeof(buf), 0));
		if (ret < 0) {
			EXPECT_EQ(-ENOMEM, ret);
			failures[3]++;
			ret = ERR(recv(rx, buf, sizeof(buf), 0));
		}
		EXPECT_EQ((long)strlen(msg), ret);
		EXPECT_STREQ(msg, buf);
		EXPECT_EQ(-EAGAIN, ERR(recv(rx, buf, sizeof(buf), MSG_DONTWAIT)));
	}
	EXPECT_FALSE(injected);

	for (n = 1, injected = 1; injected && n <= NTH_MAX; n++) {
		fd = bound_socket("127.0.0.1", 0);
		ASSERT_LE(0, fd);
		ret = NTH_FAILING(n, injected, setsockopt(fd, SOL_RDS, RDS_CONG_MONITOR, &on,
							  sizeof(on)));
		if (ret < 0) {
			EXPECT_EQ(-ENOMEM, ret);
			failures[4]++;
			EXPECT_EQ(0, ERR(setsockopt(fd, SOL_RDS, RDS_CONG_MONITOR, &on, sizeof(on))));
		}
		close(fd);
	}
	EXPECT_FALSE(injected);

	for (n = 1, injected = 1; injected && n <= NTH_MAX; n++) {
		static char info[64 << 10];
		socklen_t len = sizeof(info);

		ret = NTH_FAILING(n, injected, getsockopt(rx, SOL_RDS, RDS_INFO_SOCKETS, info, &len));
		if (ret < 0) {
			EXPECT_EQ(-ENOMEM, ret);
			failures[5]++;
		}
	}
	EXPECT_FALSE(injected);

	TH_LOG("failed with ENOMEM: socket %d, bind %d, send %d, receive %d, cong monitor %d, "
	       "info %d", failures[0], failures[1], failures[2], failures[3], failures[4],
	       failures[5]);
	/* Creating a socket and sending a message allocate: the test reached rrds. */
	EXPECT_LT(0, failures[0]);
	EXPECT_LT(0, failures[2]);
	EXPECT_EQ(-EAGAIN, ERR(recv(rx, buf, sizeof(buf), MSG_DONTWAIT)));
	close(rx);
	close(tx);
}

TEST(open_socket_pins_module)
{
	int fd;

	if (!rrds_loaded())
		ASSERT_EQ(0, rrds_load());
	fd = rds_socket();
	ASSERT_LE(0, fd);
	EXPECT_EQ(-EWOULDBLOCK, rrds_unload());
	EXPECT_TRUE(rrds_loaded());
	close(fd);
	ASSERT_EQ(0, rrds_unload());
	EXPECT_EQ(-EAFNOSUPPORT, ERR(rds_socket()));
}

TEST(load_fails_eexist_while_in_tree_rds_is_loaded)
{
	ASSERT_EQ(0, rrds_ensure_unloaded());
	ASSERT_EQ(0, sh("modprobe rds"));
	/*
	 * rrds's init fails with -EEXIST; the module loader reports an init's
	 * EEXIST as EBUSY (kernel/module/main.c: EEXIST means "already loaded").
	 */
	EXPECT_EQ(-EBUSY, rrds_load());
	EXPECT_FALSE(rrds_loaded());
	EXPECT_EQ(0, sh("dmesg | tail -n 20 | grep -q 'PF_RDS is already registered'"));
	ASSERT_EQ(0, sh("rmmod rds"));
	ASSERT_EQ(0, rrds_load());
	ASSERT_EQ(0, rrds_unload());
}

TEST_HARNESS_MAIN
