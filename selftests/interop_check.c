// SPDX-License-Identifier: GPL-2.0
/*
 * rrds against an in-tree RDS/IB peer (interop.h; run by scripts/interop,
 * which boots interop_peer's VM beside this one): both speak upstream's
 * wire protocol over rxe, so each side's connections, messages of every
 * size, pings and RDMA through the other's memory registrations work and
 * arrive intact. The cases run in order; the first waits for the peer.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_rdma.h"
#include "payload.h"
#include "interop.h"

#define PAGE	4096u

/* eth0 addressed, an rxe device on it and rrds loaded (idempotent); 0 or -1. */
static int interop_up(void)
{
	if (sh("modprobe rdma_rxe && ip link set eth0 mtu 1500 up && "
	       "{ ip -4 addr show dev eth0 | grep -q ' %s/' || ip addr add %s/24 dev eth0; } && "
	       "ip addr replace %s/64 dev eth0 nodad && "
	       "{ rdma link show rxe0/1 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev eth0; }",
	       INTEROP_RRDS_IP, INTEROP_RRDS_IP, INTEROP_RRDS_IP6))
		return -1;
	return rrds_loaded() ? 0 : rrds_load();
}

FIXTURE(interop) {
	int fd;			/* bound to INTEROP_RRDS_IP:INTEROP_PORT */
	unsigned char *buf;	/* a message of up to INTEROP_MAX bytes */
	unsigned char *mem;	/* INTEROP_MAX + a page, page-aligned: registered memory */
};

FIXTURE_SETUP(interop)
{
	int size = 16 << 20;
	struct timeval tv = { .tv_sec = 30 };

	ASSERT_EQ(0, interop_up());
	self->fd = bound_socket(INTEROP_RRDS_IP, INTEROP_PORT);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, setsockopt(self->fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)));
	ASSERT_EQ(0, setsockopt(self->fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)));
	setsockopt(self->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(self->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	self->buf = malloc(INTEROP_MAX);
	self->mem = aligned_alloc(PAGE, INTEROP_MAX + PAGE);
	ASSERT_NE(NULL, self->buf);
	ASSERT_NE(NULL, self->mem);
}

FIXTURE_TEARDOWN(interop)
{
	close(self->fd);
	free(self->buf);
	free(self->mem);
}

static const struct sockaddr_in *peer(void)
{
	static struct sockaddr_in a;

	a = sin4(INTEROP_PEER_IP, INTEROP_PORT);
	return &a;
}

/* A request of @len bytes (at least the command) in @buf to the peer; 0 or -errno. */
static int send_request(int fd, const void *buf, size_t len)
{
	return sendto(fd, buf, len, 0, (const struct sockaddr *)peer(), sizeof(*peer())) < 0 ?
		-errno : 0;
}

static int request(int fd, struct interop_cmd c)
{
	return send_request(fd, &c, sizeof(c));
}

/*
 * The next message from the peer's bound socket into @buf: its length, and
 * its command in *@c; -errno (ETIMEDOUT after 30 s), or -EPROTO if it came
 * from elsewhere or is shorter than a command.
 */
static ssize_t receive(int fd, unsigned char *buf, size_t size, struct interop_cmd *c)
{
	struct sockaddr_in from;
	socklen_t len = sizeof(from);
	ssize_t got = recvfrom(fd, buf, size, 0, (struct sockaddr *)&from, &len);

	if (got < 0)
		return -errno;
	if (from.sin_addr.s_addr != peer()->sin_addr.s_addr || from.sin_port != peer()->sin_port ||
	    got < (ssize_t)sizeof(*c)) {
		fprintf(stderr, "# unexpected: %zd bytes from %s:%d (first byte %#x)\n", got,
			inet_ntoa(from.sin_addr), ntohs(from.sin_port), got > 0 ? buf[0] : 0);
		return -EPROTO;
	}
	memcpy(c, buf, sizeof(*c));
	return got;
}

/* The peer's OP_RESULT: 0 with *@r, or -errno / -EPROTO. */
static int result(int fd, struct interop_cmd *r)
{
	struct interop_cmd c;
	ssize_t got = receive(fd, (unsigned char *)&c, sizeof(c), &c);

	if (got < 0)
		return got;
	*r = c;
	return c.op == OP_RESULT ? 0 : -EPROTO;
}

/*
 * The in-tree peer queued a message to rrds before rrds was loaded: its
 * reconnects reach rrds's listener, rrds accepts, and the message arrives.
 */
TEST_F_TIMEOUT(interop, in_tree_peer_connects_first, 400)
{
	struct interop_cmd c = { 0 };
	ssize_t got = -ETIMEDOUT;

	/* The peer's VM boots beside this one: allow it a few minutes. */
	for (int i = 0; i < 10 && got == -ETIMEDOUT; i++)
		got = receive(self->fd, self->buf, INTEROP_MAX, &c);
	ASSERT_EQ((ssize_t)sizeof(c), got);
	EXPECT_EQ(OP_HELLO, c.op);
}

/* Whether RDS_INFO_CONNECTIONS lists rrds's connection to the peer over IB. */
static bool ib_connection_listed(int fd)
{
	struct rds_info_connection conns[64];
	socklen_t len = sizeof(conns);
	int each = getsockopt(fd, SOL_RDS, RDS_INFO_CONNECTIONS, conns, &len);

	if (each != sizeof(conns[0]))
		return false;
	for (unsigned int i = 0; i < len / sizeof(conns[0]); i++)
		if (conns[i].laddr == sin4(INTEROP_RRDS_IP, 0).sin_addr.s_addr &&
		    conns[i].faddr == peer()->sin_addr.s_addr &&
		    !strcmp((char *)conns[i].transport, "infiniband"))
			return true;
	return false;
}

/* rrds pings the in-tree kernel (port 0): the pong comes from port 0. */
TEST_F(interop, ping_in_tree_peer)
{
	struct sockaddr_in to = sin4(INTEROP_PEER_IP, 0), from;
	socklen_t len = sizeof(from);

	ASSERT_EQ(0, ERR(sendto(self->fd, NULL, 0, 0, (struct sockaddr *)&to, sizeof(to))));
	ASSERT_EQ(0, ERR(recvfrom(self->fd, self->buf, 64, 0, (struct sockaddr *)&from, &len)));
	EXPECT_EQ(to.sin_addr.s_addr, from.sin_addr.s_addr);
	EXPECT_EQ(0, from.sin_port);
	EXPECT_TRUE(ib_connection_listed(self->fd));
}

/* The in-tree peer pings rrds, which answers from the kernel. */
TEST_F(interop, in_tree_peer_pings_rrds)
{
	struct interop_cmd r = { 0 };

	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_PING }));
	ASSERT_EQ(0, result(self->fd, &r));
	EXPECT_EQ(0, r.status);
	EXPECT_EQ(1u, r.count);
}

/*
 * Messages of every size, single and multi-fragment up to 1 MiB, sent in
 * windows of ten and echoed by the in-tree peer: back in order, intact.
 */
TEST_F_TIMEOUT(interop, messages_echoed_intact, 900)
{
	static const size_t sizes[] = {
		sizeof(struct interop_cmd), 41, 1000, 4095, 4096, 4097, 8192, 65535, 65536,
		INTEROP_MAX,
	};
	const size_t n = sizeof(sizes) / sizeof(sizes[0]);
	unsigned char *out = self->mem;

	for (uint64_t round = 0; round < 3; round++) {
		for (size_t i = 0; i < n; i++) {
			struct interop_cmd c = { .op = OP_ECHO, .seed = round * n + i, .len = sizes[i] };

			payload_fill(out, sizes[i], &c, sizeof(c), c.seed);
			ASSERT_EQ(0, send_request(self->fd, out, sizes[i]));
		}
		for (size_t i = 0; i < n; i++) {
			struct interop_cmd c;
			ssize_t got = receive(self->fd, self->buf, INTEROP_MAX, &c);

			ASSERT_EQ((ssize_t)sizes[i], got);
			ASSERT_EQ(round * n + i, c.seed);
			ASSERT_EQ(-1, payload_mismatch(self->buf, got, &c, sizeof(c), c.seed));
		}
	}
}

/*
 * Receives the peer's OP_STREAM of @count messages numbered from @first:
 * how many arrived in order and intact before the first that did not (or
 * none came), which is described on stderr.
 */
static uint64_t streamed_intact(int fd, unsigned char *buf, uint64_t first, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		struct interop_cmd c = { 0 };
		ssize_t got = receive(fd, buf, INTEROP_MAX, &c);

		if (got < 0 || c.op != OP_STREAMED || c.seed != first + i || c.len != (uint64_t)got ||
		    payload_mismatch(buf, got, &c, sizeof(c), c.seed) != -1) {
			fprintf(stderr, "# stream message %llu: got %zd, op %#x, seed %llu, len %llu\n",
				(unsigned long long)i, got, got < 0 ? 0 : c.op,
				got < 0 ? 0ULL : (unsigned long long)c.seed,
				got < 0 ? 0ULL : (unsigned long long)c.len);
			return i;
		}
	}
	return count;
}

/* The in-tree peer streams 210 messages of mixed sizes: all arrive, in order, intact. */
TEST_F_TIMEOUT(interop, in_tree_stream_intact, 900)
{
	const uint64_t count = 210, first = 1000;

	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_STREAM, .seed = first,
							     .count = count }));
	ASSERT_EQ(count, streamed_intact(self->fd, self->buf, first, count));
}

/* Ten 1000-byte messages echoed one by one, numbered from @seed: back intact. */
static void echo_round(struct __test_metadata *_metadata, int fd, unsigned char *buf,
		       unsigned char *out, uint64_t seed)
{
	for (uint64_t i = 0; i < 10; i++) {
		struct interop_cmd c = { .op = OP_ECHO, .seed = seed + i, .len = 1000 };
		ssize_t got;

		payload_fill(out, c.len, &c, sizeof(c), c.seed);
		ASSERT_EQ(0, send_request(fd, out, c.len));
		got = receive(fd, buf, INTEROP_MAX, &c);
		ASSERT_EQ(1000, got);
		ASSERT_EQ(seed + i, c.seed);
		ASSERT_EQ(-1, payload_mismatch(buf, got, &c, sizeof(c), c.seed));
	}
}

/*
 * The in-tree peer streams 400 messages numbered from @first; after 100,
 * rrds runs @cut, and @restore 2 s later. Whatever in-tree retransmits after
 * the reconnect (flagged, from its acknowledged sequence on), every message
 * arrives once, in order, intact; then ten echoes go both ways.
 */
static void interrupted_in_tree_stream(struct __test_metadata *_metadata,
				       FIXTURE_DATA(interop) *self, uint64_t first,
				       const char *cut, const char *restore)
{
	const uint64_t count = 400, before = 100;
	long long resets = rds_counter("conn_reset"), old = rds_counter("recv_drop_old_seq");

	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_STREAM, .seed = first,
							     .count = count }));
	ASSERT_EQ(before, streamed_intact(self->fd, self->buf, first, before));
	ASSERT_EQ(0, sh("%s", cut));
	sleep(2);
	ASSERT_EQ(0, sh("%s", restore));
	ASSERT_EQ(count - before,
		  streamed_intact(self->fd, self->buf, first + before, count - before));
	/* Whether the link failed (in-tree's RC retries may also outlast 2 s). */
	TH_LOG("connection resets %lld, retransmissions dropped as delivered %lld",
	       rds_counter("conn_reset") - resets, rds_counter("recv_drop_old_seq") - old);
	echo_round(_metadata, self->fd, self->buf, self->mem, first + count);
}

/* rrds's eth0 down for 2 s in an in-tree stream. */
TEST_F_TIMEOUT(interop, in_tree_stream_survives_link_flap, 900)
{
	interrupted_in_tree_stream(_metadata, self, 9000, "ip link set eth0 down",
				   "ip link set eth0 up");
}

/*
 * rrds's RDMA device deleted (rdma link del) in an in-tree stream and
 * re-added 2 s later: rrds's connection and listener go with the device
 * and come back on the new one.
 */
TEST_F_TIMEOUT(interop, in_tree_stream_survives_device_readded, 900)
{
	interrupted_in_tree_stream(_metadata, self, 12000, "rdma link del rxe0",
				   "rdma link add rxe0 type rxe netdev eth0");
}

/* Whether debugfs shows an rrds link up with credits (flow control) @on. */
static bool link_credits(bool on)
{
	char out[16];

	if (sh_out(out, sizeof(out), "grep -c ' up 1 .* credits %s ' /sys/kernel/debug/rrds/ib_links",
		   on ? "on" : "off"))
		return false;
	return atoi(out) > 0;
}

/*
 * With net.rds.ib.flow_control set, in-tree RDS offers no credits when it
 * connects (its receives are posted after) but takes up the ones rrds
 * offers and then advertises its own: rrds must advertise the buffers it
 * posts and send only on the peer's grants, or the peer stops after 256
 * messages. 600 messages from the peer and 300 echoed, in order and intact.
 */
TEST_F_TIMEOUT(interop, in_tree_flow_control_honoured, 900)
{
	const uint64_t count = 600, first = 5000;
	struct interop_cmd r = { 0 };
	long long reaped0;
	bool reaped;

	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_FLOW_CONTROL, .count = 1 }));
	ASSERT_EQ(0, result(self->fd, &r));
	ASSERT_EQ(0, r.status);
	/*
	 * A new connection, made with the peer's new setting: the initial
	 * namespace keeps its connections, so let the idle link be reaped (the
	 * in-tree peer reconnects at once).
	 */
	reaped0 = rds_counter("ib_idle_reaped");
	ASSERT_EQ(0, sh("echo 1 > /proc/sys/net/rrds/idle_timeout_secs"));
	reaped = WAIT_FOR(30, rds_counter("ib_idle_reaped") > reaped0);
	ASSERT_EQ(0, sh("echo 300 > /proc/sys/net/rrds/idle_timeout_secs"));
	ASSERT_TRUE(reaped);

	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_STREAM, .seed = first,
							     .count = count }));
	ASSERT_EQ(count, streamed_intact(self->fd, self->buf, first, count));
	EXPECT_TRUE(link_credits(true));
	for (uint64_t i = 0; i < 300; i++) {
		struct interop_cmd c = { .op = OP_ECHO, .seed = i, .len = 100 };

		payload_fill(self->mem, 100, &c, sizeof(c), c.seed);
		ASSERT_EQ(0, send_request(self->fd, self->mem, 100));
		if (i % 10 != 9)
			continue;
		for (uint64_t j = i - 9; j <= i; j++) {
			ssize_t got = receive(self->fd, self->buf, INTEROP_MAX, &c);

			ASSERT_EQ(100, got);
			ASSERT_EQ(j, c.seed);
			ASSERT_EQ(-1, payload_mismatch(self->buf, got, &c, sizeof(c), c.seed));
		}
	}
	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_FLOW_CONTROL, .count = 0 }));
	ASSERT_EQ(0, result(self->fd, &r));
	EXPECT_EQ(0, r.status);
}

/* Lengths and page offsets of the RDMA cases. */
static const struct { size_t len, off; } rdma_cases[] = {
	{ 1, 0 }, { 4095, 1 }, { 4096, 0 }, { 65536, 100 }, { INTEROP_MAX, 0 },
};

/*
 * The in-tree peer registers memory with RDS_CMSG_RDMA_MAP (its only way on
 * an FRWR device) and announces the cookie; rrds READs the pattern from it
 * and WRITEs another, which the peer finds there.
 */
TEST_F_TIMEOUT(interop, rrds_rdma_on_in_tree_mr, 900)
{
	struct interop_cmd note = { .op = OP_NOTE };

	for (size_t i = 0; i < sizeof(rdma_cases) / sizeof(rdma_cases[0]); i++) {
		size_t len = rdma_cases[i].len, off = rdma_cases[i].off;
		struct rds_iovec iov = { .addr = (uintptr_t)self->mem, .bytes = len };
		struct interop_cmd c = { 0 }, r = { 0 };
		uint64_t cookie;

		TH_LOG("%zu bytes at page offset %zu", len, off);
		ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_MAP, .len = len,
								     .seed = 10 + i, .count = off }));
		ASSERT_EQ((ssize_t)sizeof(c), recv_cookie(self->fd, (char *)&c, sizeof(c), &cookie));
		ASSERT_EQ(OP_MAPPED, c.op);
		ASSERT_NE(0u, cookie);

		memset(self->mem, 0, len);
		ASSERT_EQ(0, rdma_send(self->fd, INTEROP_PEER_IP, INTEROP_PORT, cookie, 0, len, &iov, 1,
				       RDS_RDMA_NOTIFY_ME, 1, &note, sizeof(note)));
		ASSERT_EQ(RDS_RDMA_SUCCESS, rdma_status_within(self->fd, 2));
		EXPECT_EQ(-1, payload_mismatch(self->mem, len, "", 0, 10 + i));

		payload_fill(self->mem, len, "", 0, 20 + i);
		ASSERT_EQ(0, rdma_send(self->fd, INTEROP_PEER_IP, INTEROP_PORT, cookie, 0, len, &iov, 1,
				       RDS_RDMA_NOTIFY_ME | RDS_RDMA_READWRITE, 2, &note,
				       sizeof(note)));
		ASSERT_EQ(RDS_RDMA_SUCCESS, rdma_status_within(self->fd, 2));
		ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_CHECK, .seed = 20 + i,
								     .count = off }));
		ASSERT_EQ(0, result(self->fd, &r));
		EXPECT_EQ(0u, r.count);
		/* Not USE_ONCE: the MR outlived both RDMA messages. */
		EXPECT_EQ(0, r.status);
	}
}

/*
 * A USE_ONCE mapping of the in-tree peer goes when rrds's RDMA message
 * arrives: rrds's message names the MR's key in its RDMA extension header,
 * as in-tree's own do.
 */
TEST_F_TIMEOUT(interop, rrds_rdma_on_in_tree_use_once_mr, 300)
{
	const size_t len = 65536;
	struct rds_iovec iov = { .addr = (uintptr_t)self->mem, .bytes = len };
	struct interop_cmd c = { 0 }, r = { 0 }, note = { .op = OP_NOTE };
	uint64_t cookie;

	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_MAP, .len = len, .seed = 50,
							     .cookie = RDS_RDMA_USE_ONCE }));
	ASSERT_EQ((ssize_t)sizeof(c), recv_cookie(self->fd, (char *)&c, sizeof(c), &cookie));
	ASSERT_EQ(OP_MAPPED, c.op);
	ASSERT_NE(0u, cookie);
	payload_fill(self->mem, len, "", 0, 51);
	ASSERT_EQ(0, rdma_send(self->fd, INTEROP_PEER_IP, INTEROP_PORT, cookie, 0, len, &iov, 1,
			       RDS_RDMA_NOTIFY_ME | RDS_RDMA_READWRITE, 3, &note, sizeof(note)));
	ASSERT_EQ(RDS_RDMA_SUCCESS, rdma_status_within(self->fd, 2));
	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_CHECK, .seed = 51 }));
	ASSERT_EQ(0, result(self->fd, &r));
	EXPECT_EQ(0u, r.count);
	/* In-tree's RDS_FREE_MR finds no MR for the cookie any more. */
	EXPECT_EQ(-EINVAL, r.status);
}

/*
 * rrds registers memory with RDS_GET_MR and sends the cookie in a message;
 * the in-tree peer READs the pattern from it, then WRITEs another, which
 * is in place when the WRITE's message arrives.
 */
TEST_F_TIMEOUT(interop, in_tree_rdma_on_rrds_mr, 900)
{
	for (size_t i = 0; i < sizeof(rdma_cases) / sizeof(rdma_cases[0]); i++) {
		size_t len = rdma_cases[i].len, off = rdma_cases[i].off;
		unsigned char *at = self->mem + off;
		struct interop_cmd c = { 0 }, r = { 0 };
		uint64_t cookie;

		TH_LOG("%zu bytes at page offset %zu", len, off);
		payload_fill(at, len, "", 0, 30 + i);
		ASSERT_EQ(0, get_mr(self->fd, at, len, RDS_RDMA_READWRITE, &cookie));

		ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_READ, .len = len,
								     .seed = 30 + i,
								     .cookie = cookie }));
		ASSERT_EQ((ssize_t)sizeof(c), receive(self->fd, self->buf, INTEROP_MAX, &c));
		ASSERT_EQ(OP_READ_DONE, c.op);
		ASSERT_EQ(0, result(self->fd, &r));
		EXPECT_EQ(RDS_RDMA_SUCCESS, r.status);
		/* What rrds's memory served, once it has all landed at the peer. */
		EXPECT_EQ(0u, r.count);
		if (r.seed)
			TH_LOG("in-tree notified its READ done before the data had landed (testing.rst)");

		ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_WRITE, .len = len,
								     .seed = 40 + i,
								     .cookie = cookie }));
		ASSERT_EQ((ssize_t)sizeof(c), receive(self->fd, self->buf, INTEROP_MAX, &c));
		ASSERT_EQ(OP_WRITTEN, c.op);
		/* The WRITE is complete when its message arrives. */
		EXPECT_EQ(-1, payload_mismatch(at, len, "", 0, 40 + i));
		ASSERT_EQ(0, result(self->fd, &r));
		EXPECT_EQ(RDS_RDMA_SUCCESS, r.status);

		ASSERT_EQ(0, free_mr(self->fd, cookie, RDS_RDMA_INVALIDATE));
	}
}

/*
 * A USE_ONCE MR of rrds goes when the in-tree peer's RDMA message arrives
 * (it names the key in its RDMA extension header): FREE_MR then finds no
 * MR, and the data written is in place.
 */
TEST_F_TIMEOUT(interop, in_tree_rdma_on_rrds_use_once_mr, 300)
{
	const size_t len = 65536;
	struct interop_cmd c = { 0 }, r = { 0 };
	uint64_t cookie;

	memset(self->mem, 0, len);
	ASSERT_EQ(0, get_mr(self->fd, self->mem, len, RDS_RDMA_USE_ONCE | RDS_RDMA_READWRITE,
			    &cookie));
	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_WRITE, .len = len, .seed = 60,
							     .cookie = cookie }));
	ASSERT_EQ((ssize_t)sizeof(c), receive(self->fd, self->buf, INTEROP_MAX, &c));
	ASSERT_EQ(OP_WRITTEN, c.op);
	EXPECT_EQ(-1, payload_mismatch(self->mem, len, "", 0, 60));
	ASSERT_EQ(0, result(self->fd, &r));
	EXPECT_EQ(RDS_RDMA_SUCCESS, r.status);
	EXPECT_EQ(-EINVAL, free_mr(self->fd, cookie, RDS_RDMA_INVALIDATE));
}

/* Whether RDS6_INFO_CONNECTIONS lists rrds's IPv6 connection to the peer over IB. */
static bool ib_connection6_listed(int fd)
{
	struct sockaddr_in6 l = sin6(INTEROP_RRDS_IP6, 0, 0), f = sin6(INTEROP_PEER_IP6, 0, 0);
	struct rds6_info_connection conns[64];
	socklen_t len = sizeof(conns);

	if (getsockopt(fd, SOL_RDS, RDS6_INFO_CONNECTIONS, conns, &len) != sizeof(conns[0]))
		return false;
	for (unsigned int i = 0; i < len / sizeof(conns[0]); i++)
		if (!memcmp(&conns[i].laddr, &l.sin6_addr, 16) &&
		    !memcmp(&conns[i].faddr, &f.sin6_addr, 16) &&
		    !strcmp((char *)conns[i].transport, "infiniband"))
			return true;
	return false;
}

/*
 * Over IPv6 (rdma_cm port 16385, the 4.1 private data with IPv6
 * addresses): rrds pings the in-tree kernel, and messages of 40 B to 1 MiB
 * come back from the peer's IPv6 socket in order and intact.
 */
TEST_F_TIMEOUT(interop, ipv6_ping_and_echo, 600)
{
	static const size_t sizes[] = { sizeof(struct interop_cmd), 4096, 4097, 65536, INTEROP_MAX };
	struct sockaddr_in6 a = sin6(INTEROP_RRDS_IP6, INTEROP_PORT, 0);
	struct sockaddr_in6 to = sin6(INTEROP_PEER_IP6, INTEROP_PORT, 0);
	struct sockaddr_in6 ping = sin6(INTEROP_PEER_IP6, 0, 0), from;
	const size_t n = sizeof(sizes) / sizeof(sizes[0]);
	int fd = rds_socket(), size = 16 << 20;
	socklen_t len = sizeof(from);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)&a, sizeof(a)));
	ASSERT_EQ(0, setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)));
	ASSERT_EQ(0, setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)));
	set_timeouts(fd);

	ASSERT_EQ(0, ERR(sendto(fd, NULL, 0, 0, (struct sockaddr *)&ping, sizeof(ping))));
	ASSERT_EQ(0, ERR(recvfrom(fd, self->buf, 64, 0, (struct sockaddr *)&from, &len)));
	EXPECT_EQ(sizeof(from), len);
	EXPECT_EQ(0, memcmp(&from.sin6_addr, &ping.sin6_addr, 16));
	EXPECT_EQ(0, from.sin6_port);

	for (size_t i = 0; i < n; i++) {
		struct interop_cmd c = { .op = OP_ECHO, .seed = 80 + i, .len = sizes[i] };

		payload_fill(self->mem, sizes[i], &c, sizeof(c), c.seed);
		ASSERT_EQ((ssize_t)sizes[i], sendto(fd, self->mem, sizes[i], 0,
						    (struct sockaddr *)&to, sizeof(to)));
	}
	for (size_t i = 0; i < n; i++) {
		struct interop_cmd c;
		ssize_t got;

		len = sizeof(from);
		got = recvfrom(fd, self->buf, INTEROP_MAX, 0, (struct sockaddr *)&from, &len);
		ASSERT_EQ((ssize_t)sizes[i], got);
		EXPECT_EQ(0, memcmp(&from.sin6_addr, &to.sin6_addr, 16));
		EXPECT_EQ(to.sin6_port, from.sin6_port);
		memcpy(&c, self->buf, sizeof(c));
		ASSERT_EQ(80 + i, c.seed);
		ASSERT_EQ(-1, payload_mismatch(self->buf, got, &c, sizeof(c), c.seed));
	}
	EXPECT_TRUE(ib_connection6_listed(fd));
	close(fd);
}

/*
 * The in-tree peer WRITEs to a cookie rrds has freed (RDS_RDMA_INVALIDATE):
 * the WRITE fails (a remote access error takes both QPs to the error
 * state), rrds's memory is untouched, in-tree reports a failed status, and
 * the connection recovers: echoes go both ways afterwards.
 */
TEST_F_TIMEOUT(interop, in_tree_rdma_on_freed_rrds_mr_fails_and_recovers, 300)
{
	const size_t len = 4096;
	struct interop_cmd c = { 0 };
	uint64_t cookie;
	ssize_t got;

	memset(self->mem, 0, len);
	ASSERT_EQ(0, get_mr(self->fd, self->mem, len, RDS_RDMA_READWRITE, &cookie));
	ASSERT_EQ(0, free_mr(self->fd, cookie, RDS_RDMA_INVALIDATE));
	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_WRITE, .len = len, .seed = 90,
							     .cookie = cookie }));
	/* The WRITE's message goes with its failed op (upstream never resends one). */
	do {
		got = receive(self->fd, self->buf, INTEROP_MAX, &c);
		ASSERT_LE(0, got);
	} while (c.op == OP_WRITTEN);
	ASSERT_EQ(OP_RESULT, c.op);
	EXPECT_NE(RDS_RDMA_SUCCESS, c.status);
	TH_LOG("in-tree's status for its WRITE: %d (RDS_RDMA_REMOTE_ERROR is %d)", c.status,
	       RDS_RDMA_REMOTE_ERROR);
	for (size_t i = 0; i < len; i++)
		ASSERT_EQ(0, self->mem[i]);
	echo_round(_metadata, self->fd, self->buf, self->mem + len, 13000);
}

/* Bit n set for each of rrds's connections to the peer with TOS n (< 64); -1 on error. */
static long long rrds_tos_bits(int fd)
{
	static struct rds_info_connection conns[256];
	socklen_t len = sizeof(conns);
	long long bits = 0;

	if (getsockopt(fd, SOL_RDS, RDS_INFO_CONNECTIONS, conns, &len) != sizeof(conns[0]))
		return -1;
	for (unsigned int i = 0; i < len / sizeof(conns[0]); i++)
		if (conns[i].faddr == peer()->sin_addr.s_addr && conns[i].tos < 64 &&
		    !strcmp((char *)conns[i].transport, "infiniband"))
			bits |= 1LL << conns[i].tos;
	return bits;
}

/* The TOS of each of the in-tree peer's connections to rrds, as bits (OP_CONNS). */
static long long peer_tos_bits(int fd)
{
	struct interop_cmd r = { 0 };

	if (request(fd, (struct interop_cmd){ .op = OP_CONNS }) || result(fd, &r) || r.status)
		return -1;
	return r.count;
}

/*
 * Each TOS has its own connection, and both ends agree on it: rrds sends
 * with TOS 1 (the echo comes back on the peer's TOS 0 connection), the
 * in-tree peer sends with TOS 2, and each side lists connections with TOS
 * 0, 1 and 2 to the other (the TOS travels in the connect private data).
 */
TEST_F_TIMEOUT(interop, tos_connections_both_ways, 300)
{
	struct interop_cmd c = { .op = OP_ECHO, .seed = 70, .len = 200 };
	int fd = bound_socket(INTEROP_RRDS_IP, INTEROP_PORT + 1);
	bool result_seen = false, tos_seen = false;
	rds_tos_t tos = 1;
	ssize_t got;

	ASSERT_LE(0, fd);
	set_timeouts(fd);
	ASSERT_EQ(0, ioctl(fd, SIOCRDSSETTOS, &tos));
	payload_fill(self->mem, c.len, &c, sizeof(c), c.seed);
	ASSERT_EQ((ssize_t)c.len, sendto(fd, self->mem, c.len, 0, (const struct sockaddr *)peer(),
					 sizeof(*peer())));
	got = receive(fd, self->buf, INTEROP_MAX, &c);
	ASSERT_EQ(200, got);
	EXPECT_EQ(70u, c.seed);
	EXPECT_EQ(-1, payload_mismatch(self->buf, got, &c, sizeof(c), c.seed));
	EXPECT_EQ(3, peer_tos_bits(self->fd) & 3);

	/* The peer's OP_RESULT and its TOS 2 message come on two connections: any order. */
	ASSERT_EQ(0, request(self->fd, (struct interop_cmd){ .op = OP_TOS_SEND, .count = 2 }));
	for (int i = 0; i < 2; i++) {
		struct sockaddr_in from;
		socklen_t len = sizeof(from);

		got = recvfrom(self->fd, &c, sizeof(c), 0, (struct sockaddr *)&from, &len);
		ASSERT_EQ((ssize_t)sizeof(c), got);
		ASSERT_EQ(peer()->sin_addr.s_addr, from.sin_addr.s_addr);
		if (c.op == OP_RESULT) {
			EXPECT_EQ(INTEROP_PORT, ntohs(from.sin_port));
			EXPECT_EQ(0, c.status);
			result_seen = true;
		} else {
			EXPECT_EQ(OP_TOS_SENT, c.op);
			EXPECT_EQ(INTEROP_PORT + 1, ntohs(from.sin_port));
			tos_seen = true;
		}
	}
	EXPECT_TRUE(result_seen);
	EXPECT_TRUE(tos_seen);
	EXPECT_EQ(7, rrds_tos_bits(self->fd) & 7);
	EXPECT_EQ(7, peer_tos_bits(self->fd) & 7);
	close(fd);
}

TEST_HARNESS_MAIN
