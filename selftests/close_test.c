// SPDX-License-Identifier: GPL-2.0
/*
 * Closing and killing PF_RDS sockets with messages in flight, over the
 * loopback transport: a receiver closed with unread messages (some of 1 MiB)
 * frees them; a sender closed after filling a receiver leaves every accepted
 * message readable, byte-exact; a sender killed with SIGKILL in the middle of
 * a stream of 1 MiB sends is reaped at once and leaves only whole, intact
 * messages; and sockets holding queued messages in both directions pin the
 * module until the last one closes, after which it unloads.
 *
 * rrds congests a loopback receiver whose queue exceeds its SO_RCVBUF (see
 * flow_test.c); upstream's loopback never does, so there a send to a receiver
 * that does not read never fails or blocks. The tests therefore bound every
 * such sending loop (CLOSE_CAP_*, KILL_WINDOW) and accept EAGAIN and ENOBUFS as
 * the only ways a non-blocking send may be refused.
 *
 * Closing a socket discards what it has queued but not yet transmitted
 * (upstream rds_release), so a sender is closed only once its messages are
 * known to have reached the receiver, except in the SIGKILL test, which
 * accepts any prefix of the stream.
 */
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_socket.h"
#include "payload.h"

#define MIB		(1 << 20)
#define SNDBUF		(8 << 20)	/* SO_SNDBUFFORCE: room for 1 MiB messages */
#define RCVBUF		(16 << 20)	/* SO_RCVBUFFORCE: never pushes back in these tests */
#define SMALL_RCVBUF	(256 << 10)	/* for a receiver meant to push back early */
#define KILL_RCVBUF	(2 << 20)	/* the killed sender's receiver: may push back */

/* Tunables; override with -D. */
#ifndef UNREAD_MSGS
#define UNREAD_MSGS	24		/* queued on a receiver that closes unread */
#endif
#ifndef CLOSE_CAP_MSGS
#define CLOSE_CAP_MSGS	64		/* a send loop that is never refused stops here... */
#endif
#ifndef CLOSE_CAP_BYTES
#define CLOSE_CAP_BYTES	(24 << 20)	/* ...or here */
#endif
#ifndef KILL_RUN_MS
#define KILL_RUN_MS	1500		/* the sender to kill streams this long... */
#endif
#ifndef KILL_STALL_MS
#define KILL_STALL_MS	300		/* ...then the receiver stops reading this long */
#endif
#ifndef KILL_WINDOW
#define KILL_WINDOW	48		/* messages the sender may be ahead of the reader */
#endif
#define KILL_REAP_MS	20000		/* a SIGKILLed sender must be reaped within this */
#define DELIVERY_MS	5000		/* wait for a message known to be on its way */
#define UNLOAD_GRACE_MS	2000		/* deferred frees may hold the module briefly */

/* Message sizes the tests cycle through: the edges of 0, a page and 1 MiB. */
static const size_t sizes[] = {
	MIB, 0, 1, 15, 16, 17, 4095, 4096, 4097, 65536, MIB - 1, 300001, 7, MIB,
};

#define NSIZES ARRAY_SIZE(sizes)

/* Carried at the start of every message, truncated if the message is shorter. */
struct msg_header {
	uint64_t tag;	/* which stream */
	uint64_t seq;	/* from 0 */
};

#define HDR sizeof(struct msg_header)

static int set_buf(int fd, int opt, int bytes)
{
	return setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* 1 if @fd has @events within @ms, else 0 (or -errno). */
static int wait_for(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int ret = ERR(poll(&p, 1, ms > 0 ? ms : 0));

	return ret > 0 ? !!(p.revents & events) : ret;
}

static uint64_t seed_of(uint64_t tag, uint64_t seq)
{
	uint64_t x = tag * 0xbf58476d1ce4e5b9ULL ^ seq * 0x94d049bb133111ebULL;

	return x ^ (x >> 31);
}

/* Message @seq of stream @tag: the header (truncated to @size), then pattern bytes. */
static void fill_message(unsigned char *buf, size_t size, uint64_t tag, uint64_t seq)
{
	const struct msg_header h = { .tag = tag, .seq = seq };

	payload_fill(buf, size, &h, HDR, seed_of(tag, seq));
}

/* The offset of the first byte that differs from fill_message()'s, or -1. */
static long mismatch(const unsigned char *buf, size_t size, uint64_t tag, uint64_t seq)
{
	const struct msg_header h = { .tag = tag, .seq = seq };

	return payload_mismatch(buf, size, &h, HDR, seed_of(tag, seq));
}

/*
 * Receives one message into @buf of @bufsize bytes, waiting up to @ms for it;
 * returns its length or -errno (-EAGAIN if none came), stores its source port
 * (-1 if msg_name is not 127.0.0.1) and sets *@trunc if it did not fit. poll()
 * may report POLLIN with nothing to read (upstream's first poll after a
 * congestion map update): keep trying until the time is up.
 */
static ssize_t recv_one(int fd, void *buf, size_t bufsize, int ms, int *port, int *trunc)
{
	long long end = now_ms() + ms;
	struct sockaddr_in from;
	struct iovec iov = { .iov_base = buf, .iov_len = bufsize };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	for (;;) {
		memset(&from, 0, sizeof(from));
		mh.msg_name = &from;
		mh.msg_namelen = sizeof(from);
		n = recvmsg(fd, &mh, MSG_DONTWAIT);
		if (n >= 0 || errno != EAGAIN || now_ms() >= end)
			break;
		wait_for(fd, POLLIN, end - now_ms());
	}
	if (n < 0)
		return -errno;
	*port = mh.msg_namelen == sizeof(from) && from.sin_family == AF_INET &&
		from.sin_addr.s_addr == htonl(INADDR_LOOPBACK) ? ntohs(from.sin_port) : -1;
	*trunc = !!(mh.msg_flags & MSG_TRUNC);
	return n;
}

/* Waits up to @ms until a message is queued on @fd, without taking it; 0 or -errno. */
static int wait_message(int fd, int ms)
{
	long long end = now_ms() + ms;
	char c;

	while (recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0) {
		if (errno != EAGAIN || now_ms() >= end)
			return -errno;
		wait_for(fd, POLLIN, end - now_ms());
	}
	return 0;
}

/*
 * Unloads rrds once no socket is left; rrds_unload()'s result. A short grace
 * lets frees deferred to RCU or a workqueue finish.
 */
static int unload_after_close(struct __test_metadata *_metadata)
{
	long long end = now_ms() + UNLOAD_GRACE_MS;
	int ret, retries = 0;

	while ((ret = rrds_unload()) == -EWOULDBLOCK && now_ms() < end) {
		usleep(20000);
		retries++;
	}
	if (retries)
		TH_LOG("unload: %d retries, then %s", retries, ret ? strerror(-ret) : "success");
	return ret;
}

RRDS_LOADED_FIXTURE(rds);

TEST_F(rds, close_with_unread_messages_frees_them_and_module_unloads)
{
	int rx = bound_socket("127.0.0.1", 0), tx = bound_socket("127.0.0.1", 0), port, trunc;
	unsigned char *buf = malloc(MIB + 1);
	struct sockaddr_in to;
	int i;

	ASSERT_NE(NULL, buf);
	ASSERT_LE(0, rx);
	ASSERT_LE(0, tx);
	ASSERT_EQ(0, set_buf(rx, SO_RCVBUFFORCE, RCVBUF));
	ASSERT_EQ(0, set_buf(tx, SO_SNDBUFFORCE, SNDBUF));
	to = sin4("127.0.0.1", local_port(rx));
	for (i = 0; i < UNREAD_MSGS; i++) {
		size_t size = sizes[i % NSIZES];

		fill_message(buf, size, 1, i);
		ASSERT_EQ((int)size, ERR(sendto(tx, buf, size, 0, (struct sockaddr *)&to,
						 sizeof(to))));
	}
	/* The first is queued: peek at it without taking it. */
	ASSERT_EQ(0, wait_message(rx, DELIVERY_MS));
	ASSERT_EQ(MIB, ERR(recv(rx, buf, MIB + 1, MSG_PEEK | MSG_DONTWAIT)));
	EXPECT_EQ(-1, mismatch(buf, MIB, 1, 0));

	EXPECT_EQ(0, close(rx));
	/* The port is free at once, and a new socket on it starts empty. */
	rx = bound_socket("127.0.0.1", ntohs(to.sin_port));
	ASSERT_LE(0, rx);
	EXPECT_EQ(-EAGAIN, recv_one(rx, buf, MIB + 1, 200, &port, &trunc));
	EXPECT_EQ(0, close(rx));
	/* Nobody holds the port now: the send succeeds, the message is dropped. */
	fill_message(buf, MIB, 1, UNREAD_MSGS);
	EXPECT_EQ(MIB, ERR(sendto(tx, buf, MIB, 0, (struct sockaddr *)&to, sizeof(to))));
	EXPECT_EQ(0, close(tx));

	EXPECT_EQ(0, unload_after_close(_metadata));
	EXPECT_FALSE(rrds_loaded());
	free(buf);
}

TEST_F(rds, close_sender_keeps_accepted_messages_readable)
{
	int rx = bound_socket("127.0.0.1", 0), tx = bound_socket("127.0.0.1", 0);
	size_t *accepted = calloc(CLOSE_CAP_MSGS, sizeof(*accepted)), total = 0;
	unsigned char *buf = malloc(MIB + 1);
	int i, n = 0, refused = 0, tx_port, port, trunc;
	struct sockaddr_in to;

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, accepted);
	ASSERT_LE(0, rx);
	ASSERT_LE(0, tx);
	ASSERT_EQ(0, set_buf(rx, SO_RCVBUFFORCE, SMALL_RCVBUF));
	ASSERT_EQ(0, set_buf(tx, SO_SNDBUFFORCE, SNDBUF));
	to = sin4("127.0.0.1", local_port(rx));
	tx_port = local_port(tx);

	/*
	 * One message first, and wait for it: upstream brings a new loopback
	 * connection up asynchronously, and close discards what is not yet sent.
	 */
	fill_message(buf, 1, 2, 0);
	ASSERT_EQ(1, ERR(sendto(tx, buf, 1, 0, (struct sockaddr *)&to, sizeof(to))));
	accepted[n++] = 1;
	ASSERT_EQ(0, wait_message(rx, DELIVERY_MS));

	/* Fill the receiver until a send is refused (or the cap). */
	while (n < CLOSE_CAP_MSGS && total < CLOSE_CAP_BYTES) {
		size_t size = sizes[n % NSIZES];
		int ret;

		fill_message(buf, size, 2, n);
		ret = ERR(sendto(tx, buf, size, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to)));
		if (ret < 0) {
			refused = ret;
			break;
		}
		ASSERT_EQ((int)size, ret);
		accepted[n++] = size;
		total += size;
	}
	/* A full send buffer or a congested receiver; nothing else. */
	if (refused)
		ASSERT_TRUE(refused == -EAGAIN || refused == -ENOBUFS)
			TH_LOG("send refused with %s", strerror(-refused));
	TH_LOG("%d messages (%zu bytes) accepted, then %s", n, total,
	       !refused ? "the cap" : refused == -EAGAIN ? "EAGAIN" : "ENOBUFS");
	EXPECT_EQ(0, close(tx));

	for (i = 0; i < n; i++) {
		ssize_t got = recv_one(rx, buf, MIB + 1, DELIVERY_MS, &port, &trunc);

		ASSERT_EQ((ssize_t)accepted[i], got) TH_LOG("message %d", i);
		EXPECT_FALSE(trunc);
		EXPECT_EQ(tx_port, port);
		ASSERT_EQ(-1, mismatch(buf, got, 2, i)) TH_LOG("message %d", i);
	}
	EXPECT_EQ(-EAGAIN, recv_one(rx, buf, MIB + 1, 200, &port, &trunc));
	EXPECT_EQ(0, close(rx));
	free(buf);
	free(accepted);
}

/* The child to kill: streams 1 MiB messages with blocking sends, at most KILL_WINDOW ahead. */
static void __attribute__((noreturn)) stream_sender(int rx_port, const long *nread)
{
	struct sockaddr_in to = sin4("127.0.0.1", rx_port);
	unsigned char *buf = malloc(MIB);
	int fd = bound_socket("127.0.0.1", 0);
	long seq;

	if (!buf || fd < 0 || set_buf(fd, SO_SNDBUFFORCE, SNDBUF)) {
		perror("# stream_sender: setup");
		_exit(1);
	}
	for (seq = 0;; seq++) {
		while (seq - __atomic_load_n(nread, __ATOMIC_ACQUIRE) >= KILL_WINDOW)
			usleep(1000);
		fill_message(buf, MIB, 3, seq);
		if (sendto(fd, buf, MIB, 0, (struct sockaddr *)&to, sizeof(to)) != MIB) {
			perror("# stream_sender: sendto");
			_exit(1);
		}
	}
}

/* Reads one message of the killed sender's stream and checks it; false if none came. */
static bool read_streamed(struct __test_metadata *_metadata, int rx, unsigned char *buf, int ms,
			  long *nread, int *sender_port)
{
	ssize_t n;
	int port, trunc;

	n = recv_one(rx, buf, MIB + 1, ms, &port, &trunc);
	if (n == -EAGAIN)
		return false;
	/* Whole: 1 MiB exactly, nothing cut off. */
	ASSERT_EQ(MIB, n) TH_LOG("message %ld", *nread);
	ASSERT_FALSE(trunc);
	if (*sender_port < 0)
		*sender_port = port;
	ASSERT_EQ(*sender_port, port);
	/* Intact, and the next one: none lost, duplicated or reordered. */
	ASSERT_EQ(-1, mismatch(buf, n, 3, *nread)) TH_LOG("message %ld", *nread);
	__atomic_store_n(nread, *nread + 1, __ATOMIC_RELEASE);
	return true;
}

static void log_task(struct __test_metadata *_metadata, pid_t pid)
{
	char path[64], wchan[64] = "?", sys[128] = "?";

	snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
	read_file(path, wchan, sizeof(wchan));
	snprintf(path, sizeof(path), "/proc/%d/syscall", pid);
	read_file(path, sys, sizeof(sys));
	sys[strcspn(sys, "\n")] = '\0';
	TH_LOG("sender before SIGKILL: wchan %s, syscall %s", wchan, sys);
}

TEST_F(rds, kill_sender_mid_send_leaves_only_whole_messages)
{
	long *nread = mmap(NULL, sizeof(*nread), PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int rx = bound_socket("127.0.0.1", 0), rx_port = local_port(rx), sender_port = -1, status;
	unsigned char *buf = malloc(MIB + 1);
	pid_t child, parent = getpid(), reaped;
	long long end;

	ASSERT_NE(MAP_FAILED, nread);
	ASSERT_NE(NULL, buf);
	ASSERT_LE(0, rx);
	ASSERT_EQ(0, set_buf(rx, SO_RCVBUFFORCE, KILL_RCVBUF));
	*nread = 0;
	fflush(NULL);
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		close(rx);
		stream_sender(rx_port, nread);
	}

	/* Read while the child streams: it spends its time inside sendmsg. */
	if (!read_streamed(_metadata, rx, buf, DELIVERY_MS * 4, nread, &sender_port)) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		ASSERT_TRUE(false) TH_LOG("no message from the sender");
	}
	for (end = now_ms() + KILL_RUN_MS; now_ms() < end;)
		read_streamed(_metadata, rx, buf, 100, nread, &sender_port);
	/* Stop reading: the queue grows (or the sender blocks, if the receiver pushes back). */
	usleep(KILL_STALL_MS * 1000);
	log_task(_metadata, child);
	ASSERT_EQ(0, kill(child, SIGKILL));

	/* Reaped at once, by the signal. */
	for (end = now_ms() + KILL_REAP_MS;
	     (reaped = waitpid(child, &status, WNOHANG)) == 0 && now_ms() < end;)
		usleep(10000);
	ASSERT_EQ(child, reaped) TH_LOG("SIGKILLed sender not reaped in %d ms", KILL_REAP_MS);
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		TH_LOG("sender ended with status %#x", status);

	/* Drain: whole, intact, in order, up to the last message the sender completed. */
	while (read_streamed(_metadata, rx, buf, 500, nread, &sender_port))
		;
	EXPECT_LE(1, *nread);
	TH_LOG("%ld messages of 1 MiB received", *nread);
	EXPECT_EQ(0, close(rx));
	EXPECT_EQ(0, unload_after_close(_metadata));
	EXPECT_FALSE(rrds_loaded());
	munmap(nread, sizeof(*nread));
	free(buf);
}

TEST_F(rds, sockets_with_queued_messages_pin_module_until_last_close)
{
	int a = bound_socket("127.0.0.1", 0), b = bound_socket("127.0.0.1", 0);
	static const size_t a_to_b[] = { MIB, 0, 10 }, b_to_a[] = { MIB, 3 };
	unsigned char *buf = malloc(MIB + 1);
	struct sockaddr_in to_a, to_b;
	int port, trunc, a_port;
	size_t i;

	ASSERT_NE(NULL, buf);
	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	ASSERT_EQ(0, set_buf(a, SO_SNDBUFFORCE, SNDBUF));
	ASSERT_EQ(0, set_buf(b, SO_SNDBUFFORCE, SNDBUF));
	ASSERT_EQ(0, set_buf(a, SO_RCVBUFFORCE, RCVBUF));
	ASSERT_EQ(0, set_buf(b, SO_RCVBUFFORCE, RCVBUF));
	a_port = local_port(a);
	to_a = sin4("127.0.0.1", a_port);
	to_b = sin4("127.0.0.1", local_port(b));
	for (i = 0; i < ARRAY_SIZE(a_to_b); i++) {
		fill_message(buf, a_to_b[i], 4, i);
		ASSERT_EQ((int)a_to_b[i], ERR(sendto(a, buf, a_to_b[i], 0,
						      (struct sockaddr *)&to_b, sizeof(to_b))));
	}
	for (i = 0; i < ARRAY_SIZE(b_to_a); i++) {
		fill_message(buf, b_to_a[i], 5, i);
		ASSERT_EQ((int)b_to_a[i], ERR(sendto(b, buf, b_to_a[i], 0,
						      (struct sockaddr *)&to_a, sizeof(to_a))));
	}
	/*
	 * Both directions travel on the one 127.0.0.1 connection, in order:
	 * with b's first message at a, a's three are at b.
	 */
	ASSERT_EQ(0, wait_message(a, DELIVERY_MS));
	ASSERT_EQ(0, wait_message(b, DELIVERY_MS));

	/* delete_module(O_NONBLOCK) on a module in use: EWOULDBLOCK, not EBUSY. */
	EXPECT_EQ(-EWOULDBLOCK, rrds_unload());
	EXPECT_TRUE(rrds_loaded());
	EXPECT_EQ(0, close(a));
	EXPECT_EQ(-EWOULDBLOCK, rrds_unload());
	EXPECT_TRUE(rrds_loaded());

	/* What a sent before it closed is still b's to read. */
	for (i = 0; i < ARRAY_SIZE(a_to_b); i++) {
		ssize_t n = recv_one(b, buf, MIB + 1, DELIVERY_MS, &port, &trunc);

		ASSERT_EQ((ssize_t)a_to_b[i], n);
		EXPECT_FALSE(trunc);
		EXPECT_EQ(a_port, port);
		EXPECT_EQ(-1, mismatch(buf, n, 4, i));
	}
	EXPECT_EQ(-EAGAIN, recv_one(b, buf, MIB + 1, 0, &port, &trunc));
	EXPECT_EQ(-EWOULDBLOCK, rrds_unload());

	EXPECT_EQ(0, close(b));
	EXPECT_EQ(0, unload_after_close(_metadata));
	EXPECT_FALSE(rrds_loaded());
	free(buf);
}

TEST_HARNESS_MAIN
