// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile RDS/IB peer (hostile_peer, beside this program) against rrds, on
 * rxe and on siw: frames no RDS sender makes must neither crash the kernel nor
 * hand a socket bytes the peer never sent, and the link must keep working or
 * be reset.
 *
 * The test runs in namespace rrds-a with an rrds socket bound to the pair's
 * address there (so rrds listens); hostile_peer runs in rrds-b, connects to
 * that listener with rdma_cm and sends the frames its command line describes.
 * Its stdout (one line per event) comes back through a pipe; closing its stdin
 * ends a --hold.
 */
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_socket.h"
#include "payload.h"

#define NS_A		"rrds-a"	/* rrds's socket */
#define NS_B		"rrds-b"	/* hostile_peer */
#define RRDS_PORT	4000		/* the rrds socket's port */
#define PEER_PORT	4100		/* the port hostile_peer's frames come from */
#define PEER_TIMEOUT_S	20		/* hostile_peer --timeout: each of its waits */
#define PEER_EXIT_S	(3 * PEER_TIMEOUT_S)	/* connect, send, wait, with room */
#define ARRIVE_S	20		/* a message rrds accepted reaching the socket */
#define SETTLE_S	10		/* rrds handling a link's end */
#define QUIET_S		3		/* a refused message's time to turn up anyway */
#define FLAG_RETRANSMITTED 0x04		/* RDS_FLAG_RETRANSMITTED */
#define SHOWN_BYTES	64		/* payload bytes hostile_peer prints */
#define STR_(x)		#x
#define STR(x)		STR_(x)
/* The ports of every frame hostile_peer sends. */
#define PORTS		"sport=" STR(PEER_PORT) ",dport=" STR(RRDS_PORT)

FIXTURE(peer) {
	int fd;		/* bound to the variant's local address, RRDS_PORT */
};

FIXTURE_VARIANT(peer) {
	const char *kind;	/* fixtures.sh <kind>-up */
	const char *local;	/* rrds-a's address: rrds */
	const char *remote;	/* rrds-b's: hostile_peer */
};

FIXTURE_VARIANT_ADD(peer, rxe) {
	.kind = "rxe", .local = "10.254.1.1", .remote = "10.254.1.2",
};

FIXTURE_VARIANT_ADD(peer, siw) {
	.kind = "siw", .local = "10.254.2.1", .remote = "10.254.2.2",
};

FIXTURE_SETUP(peer)
{
	SKIP_WITHOUT_DRIVER(variant->kind);
	ASSERT_EQ(0, pair_up_loaded(variant->kind));
	ASSERT_EQ(0, enter_ns(NS_A));
	self->fd = bound_socket(variant->local, RRDS_PORT);
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(peer)
{
	close(self->fd);
}

/* A running hostile_peer. */
struct hostile {
	pid_t pid;
	int out;		/* its stdout */
	int in;			/* its stdin */
	char buf[4096];		/* output read but not yet taken as lines */
	size_t len;
};

/*
 * Starts hostile_peer in rrds-b, connecting to the variant's rrds address,
 * with the options @fmt adds; 0 or -1.
 */
static int __attribute__((format(printf, 3, 4)))
hostile_start(struct hostile *h, const FIXTURE_VARIANT(peer) *v, const char *fmt, ...)
{
	char exe[PATH_MAX], args[1024];
	int out[2], in[2];
	ssize_t n;
	va_list ap;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0 || pipe2(out, O_CLOEXEC) || pipe2(in, O_CLOEXEC))
		return -1;
	exe[n] = '\0';
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	fprintf(stderr, "# hostile_peer %s\n", args);
	fflush(NULL);
	h->pid = fork();
	if (h->pid < 0)
		return -1;
	if (h->pid == 0) {
		char cmd[PATH_MAX + 1200];

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		snprintf(cmd, sizeof(cmd), "exec %s/hostile_peer --addr %s --peer %s --timeout %d %s",
			 dirname(exe), v->remote, v->local, PEER_TIMEOUT_S, args);
		if (enter_ns(NS_B) || dup2(out[1], STDOUT_FILENO) < 0 ||
		    dup2(in[0], STDIN_FILENO) < 0)
			_exit(1);
		/* Not the test's rrds socket: it must close when the test does. */
		close_range(3, ~0U, 0);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(1);
	}
	close(out[1]);
	close(in[0]);
	h->out = out[0];
	h->in = in[1];
	h->len = 0;
	return 0;
}

/*
 * Reads hostile_peer's output (logged) for at most @secs, until a line that
 * starts with @prefix (copied to @line) or, with @prefix NULL, to its end. 0,
 * or -1 on end of output or timeout.
 */
static int hostile_line(struct hostile *h, const char *prefix, char *line, size_t size,
			int secs)
{
	double end = now() + secs;

	for (;;) {
		char *nl = memchr(h->buf, '\n', h->len);
		struct pollfd p = { .fd = h->out, .events = POLLIN };
		ssize_t n;

		if (nl) {
			size_t taken = nl + 1 - h->buf;
			bool match;

			*nl = '\0';
			fprintf(stderr, "# hostile_peer: %s\n", h->buf);
			match = prefix && !strncmp(h->buf, prefix, strlen(prefix));
			if (match) {
				size_t n = taken - 1 < size - 1 ? taken - 1 : size - 1;

				memcpy(line, h->buf, n);
				line[n] = '\0';
			}
			memmove(h->buf, h->buf + taken, h->len - taken);
			h->len -= taken;
			if (match)
				return 0;
			continue;
		}
		if (h->len == sizeof(h->buf) - 1)
			h->len = 0;	/* a line too long to be one of ours */
		if (now() >= end || poll(&p, 1, 100) < 0)
			return -1;
		if (!p.revents)
			continue;
		n = read(h->out, h->buf + h->len, sizeof(h->buf) - 1 - h->len);
		if (n <= 0)
			return -1;
		h->len += n;
	}
}

/* Ends a --hold, logs the rest of the output, reaps: the exit status, or -1. */
static int hostile_finish(struct hostile *h)
{
	int status;

	close(h->in);
	hostile_line(h, NULL, NULL, 0, PEER_EXIT_S);
	close(h->out);
	/* Its output ended (or it hung): it exits now, or is killed. */
	if (!WAIT_FOR(5, waitpid(h->pid, &status, WNOHANG) != 0)) {
		kill(h->pid, SIGKILL);
		waitpid(h->pid, &status, 0);
		fprintf(stderr, "# hostile_peer hung: killed\n");
		return -1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* IB links whose line has @fields (debugfs rrds/ib_links, every namespace); -1 if unreadable. */
static int links_with(const char *fields)
{
	static char buf[16384];
	int n = 0;

	if (read_file(RRDS_DEBUGFS "/ib_links", buf, sizeof(buf)) < 0)
		return -1;
	for (char *at = buf; (at = strstr(at, fields)); at++)
		n++;
	return n;
}

static int links_up(void)
{
	return links_with(" state up ");
}

/* The next message on @fd within @secs into @buf: its whole length, or -1. */
static ssize_t receive(int fd, unsigned char *buf, size_t size, int secs,
		       struct sockaddr_in *from)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	socklen_t alen = sizeof(*from);

	if (poll(&p, 1, secs * 1000) != 1)
		return -1;
	return recvfrom(fd, buf, size, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)from, &alen);
}

/*
 * Expects one message of @len pattern bytes (payload.h, @seed) from the
 * variant's remote address, port PEER_PORT; logs what differs. 0 or -1.
 */
static int receive_exact(int fd, const FIXTURE_VARIANT(peer) *v, size_t len, uint64_t seed)
{
	static unsigned char buf[16384];
	struct sockaddr_in from = { 0 }, want = sin4(v->remote, PEER_PORT);
	ssize_t got = receive(fd, buf, sizeof(buf), ARRIVE_S, &from);
	long bad;

	if (got < 0) {
		fprintf(stderr, "# no %zu-byte message within %d s\n", len, ARRIVE_S);
		return -1;
	}
	if ((size_t)got != len || from.sin_addr.s_addr != want.sin_addr.s_addr ||
	    from.sin_port != want.sin_port) {
		fprintf(stderr, "# got %zd bytes from %s:%d, wanted %zu from %s:%d\n", got,
			inet_ntoa(from.sin_addr), ntohs(from.sin_port), len, v->remote, PEER_PORT);
		return -1;
	}
	bad = payload_mismatch(buf, len, NULL, 0, seed);
	if (bad >= 0) {
		fprintf(stderr, "# the %zu-byte message differs at byte %ld\n", len, bad);
		return -1;
	}
	return 0;
}

/*
 * Expects nothing on @fd for QUIET_S: a message there was refused by rrds.
 * If one arrives anyway, logs how many of its bytes are not the pattern
 * (@seed) of the message the peer sent @sent bytes of. 0 or -1.
 */
static int nothing_arrives(int fd, size_t sent, uint64_t seed)
{
	static unsigned char buf[16384], want[16384];
	struct sockaddr_in from;
	ssize_t got = receive(fd, buf, sizeof(buf), QUIET_S, &from);
	size_t differ = 0;

	if (got < 0)
		return 0;
	payload_fill(want, sizeof(want), NULL, 0, seed);
	for (size_t i = 0; i < (size_t)got && i < sizeof(buf); i++)
		differ += buf[i] != want[i];
	fprintf(stderr, "# a %zd-byte message was delivered, of which the peer sent %zu bytes: "
		"%zu bytes differ from what it would have sent\n", got, sent, differ);
	return -1;
}

/*
 * A message numbered 2^64 - 1 is delivered (the next expected number wraps
 * instead of overflowing), and so is the next, numbered 0 and flagged as
 * retransmitted: rrds, like upstream (rds_recv_incoming), drops a
 * retransmission numbered below the next expected, so it arrives only if that
 * wrapped to 0.
 */
TEST_F(peer, huge_sequence_is_delivered)
{
	struct hostile h;

	ASSERT_EQ(0, hostile_start(&h, variant,
				   "--send seq=%" PRIu64 ",bytes=100,seed=1," PORTS
				   " --send seq=0,bytes=200,flags=%d,seed=2," PORTS " --hold",
				   UINT64_MAX, FLAG_RETRANSMITTED));
	EXPECT_EQ(0, receive_exact(self->fd, variant, 100, 1));
	EXPECT_EQ(0, receive_exact(self->fd, variant, 200, 2));
	/* --hold: the link stayed up until now. */
	EXPECT_EQ(0, hostile_finish(&h));
}

/*
 * A peer granting more send credits than fit in rrds's count (connect data
 * offering 0xffffffff, then a credit update of 255) is capped: the kernel
 * lives, and a message from rrds reaches the peer.
 */
TEST_F(peer, excess_credits_are_capped)
{
	struct sockaddr_in to = sin4(variant->remote, PEER_PORT);
	unsigned char msg[SHOWN_BYTES];
	char line[512], payload[2 * SHOWN_BYTES + 1], want[2 * SHOWN_BYTES + 1];
	int len = 0, sport = 0, dport = 0;
	struct hostile h;

	ASSERT_EQ(0, hostile_start(&h, variant,
				   "--credit 0xffffffff --send len=0,credit=255 --recv 1 --hold"));
	ASSERT_EQ(0, hostile_line(&h, "sent ", line, sizeof(line), PEER_EXIT_S));
	payload_fill(msg, sizeof(msg), NULL, 0, 3);
	EXPECT_EQ((ssize_t)sizeof(msg),
		  sendto(self->fd, msg, sizeof(msg), 0, (struct sockaddr *)&to, sizeof(to)));
	ASSERT_EQ(0, hostile_line(&h, "message ", line, sizeof(line), PEER_EXIT_S));
	ASSERT_EQ(4, sscanf(line, "message seq=%*s len=%d sport=%d dport=%d flags=%*s payload=%128s",
			    &len, &sport, &dport, payload));
	EXPECT_EQ((int)sizeof(msg), len);
	EXPECT_EQ(RRDS_PORT, sport);
	EXPECT_EQ(PEER_PORT, dport);
	for (size_t i = 0; i < sizeof(msg); i++)
		sprintf(want + 2 * i, "%02x", msg[i]);
	EXPECT_STREQ(want, payload);
	EXPECT_EQ(0, hostile_finish(&h));
}

/* Frames a peer sends (--send options), the payload bytes and the seed they carry. */
struct refused {
	const char *frames;
	size_t sent;
	uint64_t seed;
};

/*
 * Each of @cases, sent by a fresh peer that then holds on, delivers nothing
 * and makes rrds reset the link (conn_reset grows, and rrds has no link up
 * while the peer still holds its end), and the peer is told.
 */
static void expect_refused(struct __test_metadata *_metadata, const FIXTURE_VARIANT(peer) *v,
			   int fd, const struct refused *cases, size_t n)
{
	char line[512];
	struct hostile h;

	for (size_t i = 0; i < n; i++) {
		long long resets;

		/* The last peer's link is gone, its reset counted. */
		ASSERT_TRUE(WAIT_FOR(SETTLE_S, links_up() == 0));
		resets = rds_counter("conn_reset");
		ASSERT_LE(0, resets);
		ASSERT_EQ(0, hostile_start(&h, v, "%s --expect-disconnect --hold",
					   cases[i].frames));
		EXPECT_EQ(0, hostile_line(&h, "disconnected", line, sizeof(line),
					  PEER_TIMEOUT_S + SETTLE_S)) {
			TH_LOG("case %zu: hostile_peer saw no disconnect", i);
			log_ib_links();
		}
		EXPECT_TRUE(WAIT_FOR(SETTLE_S, rds_counter("conn_reset") > resets)) {
			TH_LOG("case %zu: rrds did not reset the link", i);
		}
		/* rrds's end is down, whatever the peer was told. */
		EXPECT_EQ(0, links_up()) {
			TH_LOG("case %zu: rrds kept the link up", i);
		}
		EXPECT_EQ(0, nothing_arrives(fd, cases[i].sent, cases[i].seed)) {
			TH_LOG("case %zu: something of what the peer sent was delivered", i);
		}
		EXPECT_EQ(0, hostile_finish(&h));
	}
}

/*
 * A fragment shorter than its message's length implies (one byte of a
 * 4096-byte message; 100 bytes as the first of two fragments of 8192) would
 * leave the rest of its receive page, stale kernel memory, in the message:
 * rrds delivers nothing and resets the link (conn_reset grows, and rrds has
 * no link up, while the peer, holding on, has not yet closed its end), and
 * the peer is told. A fresh connection then carries an ordinary message.
 */
TEST_F(peer, short_fragment_is_refused)
{
	static const struct refused cases[] = {
		{ "--send seq=1,len=4096,bytes=1,seed=4," PORTS, 1, 4 },
		{ "--send seq=2,len=8192,bytes=100,seed=5," PORTS
		  " --send seq=2,len=8192,frag=1,seed=5," PORTS, 4196, 5 },
	};
	struct hostile h;

	/*
	 * The peer is told. On rxe it once was not, in about one run in six,
	 * while rrds told ib_cm of the establishment itself (design.rst, "Up").
	 */
	expect_refused(_metadata, variant, self->fd, cases, ARRAY_SIZE(cases));
	ASSERT_EQ(0, hostile_start(&h, variant, "--send seq=3,bytes=300,seed=6," PORTS " --hold"));
	EXPECT_EQ(0, receive_exact(self->fd, variant, 300, 6));
	EXPECT_EQ(0, hostile_finish(&h));
}

/*
 * rrds's receive buffers hold two pages (design.rst, "Large frames"): a
 * fragment of 8 KiB is taken from any peer, as part of a longer message too.
 */
TEST_F(peer, two_page_fragment_is_taken)
{
	long long large = rds_counter("ib_rx_large_frames");
	struct hostile h;

	ASSERT_LE(0, large);
	ASSERT_EQ(0, hostile_start(&h, variant, "--send seq=1,len=12000,bytes=8192,seed=50," PORTS
				   " --send seq=1,len=12000,frag=2,seed=50," PORTS
				   " --send seq=2,len=8192,bytes=8192,seed=51," PORTS " --hold"));
	EXPECT_EQ(0, receive_exact(self->fd, variant, 12000, 50));
	EXPECT_EQ(0, receive_exact(self->fd, variant, 8192, 51));
	EXPECT_EQ(large + 2, rds_counter("ib_rx_large_frames"));
	/* The accepted link's rdma_cm id carries its connection, so its events reach it. */
	EXPECT_EQ(1, links_with(" state up side passive ctx ok ")) {
		log_ib_links();
	}
	EXPECT_EQ(0, hostile_finish(&h));
}

/*
 * A two-page fragment that brings more than its message lacks, or whose
 * second page is short of the message's next whole page, is refused: nothing
 * is delivered and the link is reset.
 */
TEST_F(peer, overlong_fragment_is_refused)
{
	static const struct refused cases[] = {
		{ "--send seq=1,len=5000,bytes=8192,seed=52," PORTS, 5000, 52 },
		{ "--send seq=2,len=12000,bytes=6000,seed=53," PORTS, 12000, 53 },
	};

	expect_refused(_metadata, variant, self->fd, cases, ARRAY_SIZE(cases));
}

/*
 * rrds offers every peer to take packed frames (design.rst, "Packed
 * frames"): one SEND carrying whole messages as records. Those of a
 * well-formed one are delivered in order, one message each.
 */
TEST_F(peer, packed_frame_is_delivered_in_order)
{
	long long unpacked = rds_counter("ib_rx_packed_messages");
	struct hostile h;

	ASSERT_LE(0, unpacked);
	ASSERT_EQ(0, hostile_start(&h, variant, "--send seq=1,len=100,records=5,seed=20," PORTS
				   " --send seq=6,len=0,records=2," PORTS
				   " --send seq=8,len=333,seed=30," PORTS " --hold"));
	for (int i = 0; i < 5; i++)
		EXPECT_EQ(0, receive_exact(self->fd, variant, 100, 20 + i));
	EXPECT_EQ(0, receive_exact(self->fd, variant, 0, 0));
	EXPECT_EQ(0, receive_exact(self->fd, variant, 0, 0));
	EXPECT_EQ(0, receive_exact(self->fd, variant, 333, 30));
	EXPECT_EQ(unpacked + 7, rds_counter("ib_rx_packed_messages"));
	EXPECT_EQ(0, hostile_finish(&h));
}

/*
 * A malformed packed frame (a record whose header checksum fails, records
 * that overrun the frame, a frame claiming a sequence number) delivers
 * nothing, not even its good records, and resets the link; the peer is told.
 */
TEST_F(peer, malformed_packed_frame_is_refused)
{
	static const struct refused cases[] = {
		{ "--send seq=1,len=64,records=3,badrec=1,seed=40," PORTS, 64, 40 },
		{ "--send flags=0x80,len=200,bytes=200,seed=41", 200, 41 },
		{ "--send seq=5,flags=0x80,len=56,bytes=56,seed=42", 56, 42 },
	};

	expect_refused(_metadata, variant, self->fd, cases, ARRAY_SIZE(cases));
}

#define PINGS		200		/* within the 256 receives rrds posts (siw: no RNR) */
#define MAX_PONGS	64		/* MAX_QUEUED_PONGS */

/*
 * A peer that pings and never acknowledges holds at most 64 of rrds's pongs
 * (conn.rs MAX_QUEUED_PONGS): pings past that go unanswered and are counted
 * (send_pong_dropped), where upstream queues a pong for every ping.
 */
TEST_F(peer, unacknowledged_pongs_are_capped)
{
	long long pongs = rds_counter("send_pong"), dropped = rds_counter("send_pong_dropped");
	char line[512];
	struct hostile h;
	int got = 0;

	ASSERT_LE(0, pongs);
	ASSERT_LE(0, dropped);
	ASSERT_EQ(0, hostile_start(&h, variant, "--send seq=1,len=0,sport=" STR(PEER_PORT)
				   ",dport=0,count=%d --no-ack --hold", PINGS));
	/* Pongs come while it pings; then a quiet spell in which no more may come. */
	while (got <= MAX_PONGS &&
	       hostile_line(&h, "message ", line, sizeof(line),
			    got < MAX_PONGS ? PEER_TIMEOUT_S : QUIET_S) == 0)
		got++;
	EXPECT_EQ(MAX_PONGS, got);
	EXPECT_TRUE(WAIT_FOR(SETTLE_S,
			     rds_counter("send_pong_dropped") - dropped == PINGS - MAX_PONGS)) {
		TH_LOG("send_pong_dropped grew by %lld, wanted %d",
		       rds_counter("send_pong_dropped") - dropped, PINGS - MAX_PONGS);
	}
	EXPECT_EQ(pongs + MAX_PONGS, rds_counter("send_pong"));
	EXPECT_EQ(0, hostile_finish(&h));
	/*
	 * Its 64 pongs stay queued for its address, rrds reconnecting to deliver
	 * them, as for any message not acknowledged: the next case starts afresh.
	 */
	close(self->fd);
	EXPECT_EQ(0, rrds_unload());
	EXPECT_EQ(0, rrds_load());
	self->fd = bound_socket(variant->local, RRDS_PORT);
	ASSERT_LE(0, self->fd);
}

#define FLOOD		600		/* 8 KiB messages: 4.7 MiB */
#define QUEUE_LIMIT	(4 << 20)	/* recv::queue_limit for SO_RCVBUF below 1 MiB */

/*
 * A peer that ignores rrds's congestion map and goes on sending to a socket
 * that does not read fills its receive queue up to the hard limit, 4 MiB
 * (each message charged its length), and no further: the rest is dropped
 * and counted (recv_drop_queue_full). What was queued is intact and in
 * order. rxe only: hostile_peer does not count rrds's credits, and over
 * iWARP a send with no receive posted ends the connection (no RNR retry).
 */
TEST_F(peer, peer_ignoring_congestion_meets_the_queue_limit)
{
	long long full = rds_counter("recv_drop_queue_full");
	const int queued = QUEUE_LIMIT / 8192;
	struct hostile h;
	char line[512];
	int n;

	if (strcmp(variant->kind, "rxe"))
		SKIP(return, "hostile_peer would overrun rrds's receive ring on iWARP");
	ASSERT_LE(0, full);
	ASSERT_EQ(0, hostile_start(&h, variant, "--send seq=1,len=8192,bytes=8192,seed=700," PORTS
				   ",count=%d --hold", FLOOD));
	ASSERT_EQ(0, hostile_line(&h, "sent ", line, sizeof(line), 3 * PEER_TIMEOUT_S)) {
		/* Once in a CI run the link went down midway: say who took it. */
		TH_LOG("conn_reset %lld, ib_link_stalled %lld", rds_counter("conn_reset"),
		       rds_counter("ib_link_stalled"));
		log_ib_links();
	}
	EXPECT_TRUE(WAIT_FOR(SETTLE_S,
			     rds_counter("recv_drop_queue_full") - full == FLOOD - queued)) {
		TH_LOG("recv_drop_queue_full grew by %lld, wanted %d",
		       rds_counter("recv_drop_queue_full") - full, FLOOD - queued);
	}
	for (n = 0; n < queued; n++) {
		if (receive_exact(self->fd, variant, 8192, 700 + n))
			break;
	}
	EXPECT_EQ(queued, n);
	EXPECT_EQ(0, nothing_arrives(self->fd, 8192, 700 + queued));
	EXPECT_EQ(0, hostile_finish(&h));
}

/*
 * A peer that posts no receive answers every frame rrds sends with
 * receiver-not-ready, which RoCE retries for ever: the watchdog resets the
 * link once its sends have made no progress for 8 s (ib_link_stalled)
 * instead of holding it, and the messages on it, for good. iWARP has no such
 * answer: siw fails the peer's QP at the first frame, a link error.
 */
TEST_F(peer, peer_taking_no_frames_has_its_link_reset)
{
	long long stalled = rds_counter("ib_link_stalled"), resets = rds_counter("conn_reset");
	struct sockaddr_in to = sin4(variant->remote, PEER_PORT);
	char line[512], payload[100] = "waits for the next link";
	struct hostile h;

	ASSERT_LE(0, stalled);
	ASSERT_TRUE(WAIT_FOR(SETTLE_S, links_up() == 0));
	ASSERT_EQ(0, hostile_start(&h, variant, "--starve --expect-disconnect --hold"));
	ASSERT_EQ(0, hostile_line(&h, "established", line, sizeof(line), PEER_EXIT_S));
	ASSERT_EQ((ssize_t)sizeof(payload), sendto(self->fd, payload, sizeof(payload), 0,
					  (struct sockaddr *)&to, sizeof(to)));
	EXPECT_EQ(0, hostile_line(&h, "disconnected", line, sizeof(line),
				  PEER_TIMEOUT_S + SETTLE_S)) {
		log_ib_links();
	}
	EXPECT_TRUE(WAIT_FOR(SETTLE_S, rds_counter("conn_reset") > resets));
	if (!strcmp(variant->kind, "rxe"))
		EXPECT_EQ(stalled + 1, rds_counter("ib_link_stalled"));
	EXPECT_EQ(0, hostile_finish(&h));
}

/*
 * An accepted iWARP link sends nothing before the peer's first frame
 * (design.rst, "iWARP"): to a peer that stays silent, rrds's congestion map
 * comes only from the watchdog, a second or more after establishment; a
 * peer that sends is answered, and that is not counted as a link
 * established by its receive (ib_established_by_receive, an IB matter).
 */
TEST_F(peer, iwarp_responder_speaks_second)
{
	long long by_receive = rds_counter("ib_established_by_receive");
	char line[512];
	struct hostile h;
	double up;

	if (strcmp(variant->kind, "siw"))
		SKIP(return, "iWARP only");
	ASSERT_LE(0, by_receive);
	ASSERT_EQ(0, hostile_start(&h, variant, "--hold"));
	ASSERT_EQ(0, hostile_line(&h, "established", line, sizeof(line), PEER_EXIT_S));
	up = now();
	ASSERT_EQ(0, hostile_line(&h, "frame ", line, sizeof(line), SETTLE_S));
	/* At once before; the watchdog's second tick now (reading may lag). */
	EXPECT_LE(0.5, now() - up);
	EXPECT_EQ(0, hostile_finish(&h));
	ASSERT_TRUE(WAIT_FOR(SETTLE_S, links_up() == 0));
	ASSERT_EQ(0, hostile_start(&h, variant, "--send seq=1,bytes=10,seed=60," PORTS " --hold"));
	EXPECT_EQ(0, receive_exact(self->fd, variant, 10, 60));
	EXPECT_EQ(by_receive, rds_counter("ib_established_by_receive"));
	EXPECT_EQ(0, hostile_finish(&h));
}

/*
 * A peer that sends a message and leaves (disconnect, destroy) takes rrds's
 * link down within seconds, and its message is delivered. On rxe the link
 * stayed up some 70 s while rrds told ib_cm of the establishment itself
 * (design.rst, "Up"): the peer's first frame overtakes its RTU.
 */
TEST_F(peer, leaving_peer_takes_the_link_down)
{
	long long unowned = rds_counter("ib_cm_events_unowned");
	struct hostile h;

	ASSERT_LE(0, unowned);
	for (int i = 0; i < 3; i++) {
		ASSERT_TRUE(WAIT_FOR(SETTLE_S, links_up() == 0));
		ASSERT_EQ(0, hostile_start(&h, variant, "--send seq=%d,bytes=10,seed=%d," PORTS,
					   i + 1, 8 + i));
		EXPECT_EQ(0, hostile_finish(&h));
		EXPECT_EQ(0, receive_exact(self->fd, variant, 10, 8 + i));
		EXPECT_TRUE(WAIT_FOR(SETTLE_S, links_up() == 0)) {
			TH_LOG("round %d: rrds kept the link up after the peer left "
			       "(ib_cm_events_unowned %lld)", i, rds_counter("ib_cm_events_unowned"));
			log_ib_links();
		}
	}
	/* Every event of the peer's connections reached the connection. */
	EXPECT_EQ(unowned, rds_counter("ib_cm_events_unowned"));
}

/*
 * Connect data that names another host as its source (upstream takes the
 * addresses on trust, so a peer could open connections in anyone's name)
 * is refused: hostile_peer's retries all fail, and its message never
 * reaches the socket.
 */
TEST_F(peer, another_hosts_address_is_refused)
{
	char line[512];
	struct hostile h;

	ASSERT_EQ(0, hostile_start(&h, variant, "--claim 10.254.9.9 --timeout 5 --send seq=1,"
				   "bytes=10,seed=7," PORTS));
	EXPECT_NE(0, hostile_line(&h, "established", line, sizeof(line), PEER_EXIT_S)) {
		TH_LOG("rrds accepted a connection in another host's name");
	}
	EXPECT_EQ(1, hostile_finish(&h));
	EXPECT_EQ(0, nothing_arrives(self->fd, 10, 7));
}

/*
 * A peer opening one connection per TOS value (256 are possible, each with
 * its receive ring) meets max_conns_per_peer: with rrds reloaded at 2, two
 * connections come up and stay, the third is rejected, and a message on an
 * accepted one still arrives.
 */
TEST_F(peer, connections_per_tos_are_capped)
{
	long long refused0;
	struct hostile h[3];
	char line[512];

	close(self->fd);
	ASSERT_EQ(0, rrds_unload());
	ASSERT_EQ(0, rrds_load_with("max_conns_per_peer=2"));
	self->fd = bound_socket(variant->local, RRDS_PORT);
	ASSERT_LE(0, self->fd);
	refused0 = rds_counter("conn_limit_refused");
	for (int tos = 1; tos <= 2; tos++) {
		ASSERT_EQ(0, hostile_start(&h[tos - 1], variant, "--tos %d --hold", tos));
		ASSERT_EQ(0, hostile_line(&h[tos - 1], "established", line, sizeof(line),
					  PEER_EXIT_S));
	}
	ASSERT_EQ(0, hostile_start(&h[2], variant, "--tos 3 --timeout 5"));
	EXPECT_NE(0, hostile_line(&h[2], "established", line, sizeof(line), PEER_EXIT_S)) {
		TH_LOG("a third connection from one peer was accepted");
	}
	EXPECT_EQ(1, hostile_finish(&h[2]));
	EXPECT_LT(refused0, rds_counter("conn_limit_refused"));
	/* The two accepted ones held until now (--hold). */
	EXPECT_EQ(0, hostile_finish(&h[0]));
	EXPECT_EQ(0, hostile_finish(&h[1]));
	/* Later tests get the defaults. */
	close(self->fd);
	EXPECT_EQ(0, rrds_unload());
	EXPECT_EQ(0, rrds_load());
	self->fd = bound_socket(variant->local, RRDS_PORT);
	ASSERT_LE(0, self->fd);
}

TEST_HARNESS_MAIN
