// SPDX-License-Identifier: GPL-2.0
/*
 * Data integrity under load over the loopback transport: sender processes and
 * receiver processes, each with its own PF_RDS socket bound to 127.0.0.1, pass
 * datagrams of 0 bytes to 1 MiB to each other, chosen by deterministic
 * pseudo-random streams (one per sender).
 *
 * Every receiver replays every sender's stream, so it knows exactly which
 * messages each sender owes it, in which order, and each one's size and
 * contents. It proves that each of them arrives exactly once, in order, whole
 * (recvmsg's length is the size sent, no MSG_TRUNC) and byte-exact, with
 * msg_name the sender's address and port, and that nothing else arrives.
 * Messages shorter than the 24-byte header are recognised by their source port
 * and their place in the replayed stream.
 *
 * Sizes are log-uniform in two tiers, so that every size class up to 1 MiB
 * occurs while the total volume stays small enough for a TCG VM: a message is
 * "large" with probability 1/large_one_in, then k is uniform in
 * [small_k_max + 1, max_k]; otherwise k is uniform in [0, small_k_max]; the
 * size is uniform in [0, 2^k], both ends included. Each sender's first eight
 * messages have forced sizes: 2^max_k (1 MiB in the full run), 0, 1, 23, 24,
 * 25, 2^max_k - 1 and 4096.
 *
 * Sends and receives are non-blocking with poll(); EAGAIN and ENOBUFS (a full
 * send buffer, a congested destination) are retried. Every wait is bounded by
 * a deadline, so a lost message fails the test rather than hanging it.
 *
 * Tunables, from the environment: RRDS_INTEGRITY_MSGS (the 8x8 run's total,
 * 50000), RRDS_INTEGRITY_DEADLINE (seconds; 120 for the 2x2 run, 240 for the
 * 8x8 one; keep it below the harness's 300 s timeout less REAP_GRACE_S) and
 * RRDS_INTEGRITY_SEED (0). The size distributions are the workloads in the two
 * tests at the end.
 *
 * Only the fixture is rrds-specific: the checks hold for the in-tree rds too.
 */
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_socket.h"
#include "payload.h"

#define MAX_SENDERS	16
#define MAX_RECEIVERS	16
#define SNDBUF		(8 << 20)	/* SO_SNDBUFFORCE: 1 MiB must be below sndbuf/2 */
/*
 * SO_RCVBUFFORCE: small enough that receivers congest (over 256 KiB queued)
 * and senders see ENOBUFS, so the congestion and poll paths are exercised.
 */
#define RCVBUF		(256 << 10)
#define RETRY_WAIT_MS	20		/* poll(POLLOUT) after EAGAIN or ENOBUFS... */
#define RETRY_NAP_MS	2		/* ...and at least this long before retrying */
#define REAP_GRACE_S	30		/* the parent's wait beyond the children's deadline */

struct workload {
	int senders, receivers;
	long msgs;		/* in all, split evenly across the senders */
	int small_k_max;	/* small tier: k uniform in [0, small_k_max] */
	int large_one_in;	/* one message in this many is from the large tier... */
	int max_k;		/* ...where k is uniform in [small_k_max + 1, max_k] */
	int deadline_s;		/* for the whole exchange */
	uint64_t seed;
};

/* Carried at the start of every message, truncated if the message is shorter. */
struct msg_header {
	uint32_t sender;
	uint32_t receiver;
	uint64_t seq;		/* per (sender, receiver), from 0 */
	uint64_t size;
};

#define HDR	sizeof(struct msg_header)

/* What each child reports to the parent (shared memory). */
struct child_stats {
	long msgs;
	long long bytes;
	long eagain, enobufs;
};

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : def;
}

/* splitmix64: the finaliser, and the generator on top of it. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static inline uint64_t next64(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ULL;
	return mix64(*state);
}

static uint64_t content_seed(const struct workload *w, int sender, int receiver, uint64_t seq)
{
	return mix64(w->seed ^ mix64(((uint64_t)sender << 48) ^ ((uint64_t)receiver << 32) ^ seq));
}

/* A message: the header (truncated to @size), then pattern words (the last one truncated). */
static void fill_message(unsigned char *buf, size_t size, const struct msg_header *h,
			 uint64_t seed)
{
	payload_fill(buf, size, h, HDR, seed);
}

/* The offset of the first byte that differs from fill_message()'s, or -1. */
static long mismatch(const unsigned char *buf, size_t size, const struct msg_header *h,
		     uint64_t seed)
{
	return payload_mismatch(buf, size, h, HDR, seed);
}

/* A sender's stream of messages: destination and size of each, in sending order. */
struct stream {
	int sender;
	long index, count;
	uint64_t rng;
};

struct planned {
	int receiver;
	size_t size;
};

static size_t max_size(const struct workload *w)
{
	return (size_t)1 << w->max_k;
}

static void stream_init(struct stream *st, const struct workload *w, int sender)
{
	st->sender = sender;
	st->index = 0;
	st->count = w->msgs / w->senders + (sender < w->msgs % w->senders);
	st->rng = mix64(w->seed + 0x5eed) ^ mix64(sender + 1);
}

static size_t pick_size(const struct workload *w, uint64_t *rng)
{
	int k;

	if (next64(rng) % w->large_one_in == 0)
		k = w->small_k_max + 1 + next64(rng) % (w->max_k - w->small_k_max);
	else
		k = next64(rng) % (w->small_k_max + 1);
	return next64(rng) % (((uint64_t)1 << k) + 1);
}

/* The next message of the stream; false at its end. */
static bool stream_next(const struct workload *w, struct stream *st, struct planned *p)
{
	const size_t max = max_size(w);
	const size_t forced[] = { max, 0, 1, HDR - 1, HDR, HDR + 1, max - 1, 4096 };
	long j = st->index;

	if (j >= st->count)
		return false;
	st->index++;
	if ((size_t)j < ARRAY_SIZE(forced)) {
		p->receiver = (st->sender + j) % w->receivers;
		p->size = forced[j] < max ? forced[j] : max;
		return true;
	}
	p->receiver = next64(&st->rng) % w->receivers;
	p->size = pick_size(w, &st->rng);
	return true;
}

/* The next message of the stream bound for @receiver; false if there is none. */
static bool stream_next_for(const struct workload *w, struct stream *st, int receiver,
			    struct planned *p)
{
	while (stream_next(w, st, p))
		if (p->receiver == receiver)
			return true;
	return false;
}

/* Children: report on stderr and exit non-zero; the parent sees the status. */
static char who[32];
static double deadline;

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int len;

	/* One write, so that children failing together do not interleave. */
	len = snprintf(msg, sizeof(msg), "# %s: ", who);
	va_start(ap, fmt);
	len += vsnprintf(msg + len, sizeof(msg) - len - 1, fmt, ap);
	va_end(ap);
	if (len > (int)sizeof(msg) - 2)
		len = sizeof(msg) - 2;
	msg[len++] = '\n';
	if (write(STDERR_FILENO, msg, len) < 0)
		_exit(2);
	_exit(1);
}

/* Waits for @events on @fd for at most @ms (and never past the deadline); 0 if it expired. */
static int wait_fd(int fd, short events, int ms)
{
	double left = deadline - now();
	struct pollfd p = { .fd = fd, .events = events };
	int ret;

	if (left <= 0)
		return 0;
	if (left * 1000 < ms)
		ms = left * 1000 + 1;
	ret = poll(&p, 1, ms);
	if (ret < 0 && errno != EINTR)
		die("poll: %s", strerror(errno));
	return 1;
}

/* Waits until every writer of the pipe @fd has closed it (EOF), or dies at the deadline. */
static void wait_eof(int fd, const char *what)
{
	char c;

	for (;;) {
		ssize_t n;

		if (now() > deadline)
			die("deadline passed waiting for %s", what);
		wait_fd(fd, POLLIN, 1000);
		n = read(fd, &c, 1);
		if (n == 0)
			return;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			die("read pipe: %s", strerror(errno));
	}
}

/* The exchange, as the parent sets it up and the children see it. */
struct exchange {
	const struct workload *w;
	int rx[MAX_RECEIVERS], tx[MAX_SENDERS];
	int rx_port[MAX_RECEIVERS], tx_port[MAX_SENDERS];
	long expect[MAX_SENDERS][MAX_RECEIVERS];	/* messages from each sender to each */
	int senders_done[2];	/* written by the senders, EOF once all have sent everything */
	int receivers_done[2];	/* written by the receivers, EOF once all have exited */
	struct child_stats *stats;	/* receivers, then senders */
};

static void send_one(struct exchange *x, int id, const void *buf, size_t size,
		     const struct sockaddr_in *to)
{
	struct child_stats *st = &x->stats[x->w->receivers + id];
	int fd = x->tx[id];

	for (;;) {
		ssize_t n = sendto(fd, buf, size, MSG_DONTWAIT, (const struct sockaddr *)to,
				   sizeof(*to));

		if (n >= 0) {
			if ((size_t)n != size)
				die("sendto of %zu bytes returned %zd", size, n);
			return;
		}
		if (now() > deadline)
			die("deadline passed sending %zu bytes to port %d (last error %s)",
			    size, ntohs(to->sin_port), strerror(errno));
		if (errno == EAGAIN || errno == ENOBUFS) {
			double start = now();

			if (errno == EAGAIN)
				st->eagain++;
			else
				st->enobufs++;
			/*
			 * rrds withholds POLLOUT until a refused port clears;
			 * in-tree rds may report it at once: never spin.
			 */
			wait_fd(fd, POLLOUT, RETRY_WAIT_MS);
			if (now() - start < RETRY_NAP_MS / 1000.0)
				poll(NULL, 0, RETRY_NAP_MS);
		} else if (errno != EINTR) {
			die("sendto of %zu bytes to port %d: %s", size, ntohs(to->sin_port),
			    strerror(errno));
		}
	}
}

static void __attribute__((noreturn)) run_sender(struct exchange *x, int id)
{
	const struct workload *w = x->w;
	struct child_stats *st = &x->stats[w->receivers + id];
	struct sockaddr_in to[MAX_RECEIVERS];
	uint64_t seq[MAX_RECEIVERS] = { 0 };
	unsigned char *buf = malloc(max_size(w) + 8);
	struct stream s;
	struct planned p;
	int r;

	snprintf(who, sizeof(who), "sender %d", id);
	if (!buf)
		die("out of memory");
	for (r = 0; r < w->receivers; r++)
		to[r] = sin4("127.0.0.1", x->rx_port[r]);
	stream_init(&s, w, id);
	while (stream_next(w, &s, &p)) {
		struct msg_header h = {
			.sender = id, .receiver = p.receiver,
			.seq = seq[p.receiver], .size = p.size,
		};

		fill_message(buf, p.size, &h, content_seed(w, id, p.receiver, h.seq));
		send_one(x, id, buf, p.size, &to[p.receiver]);
		seq[p.receiver]++;
		st->msgs++;
		st->bytes += p.size;
	}
	close(x->senders_done[1]);
	/*
	 * Keep the socket open until every receiver is done: closing it would
	 * discard whatever a transport had not yet delivered (upstream release).
	 */
	wait_eof(x->receivers_done[0], "the receivers");
	_exit(0);
}

/* What a receiver knows of each sender: the replayed stream and how far it got. */
struct receiver {
	struct exchange *x;
	int id;
	struct stream streams[MAX_SENDERS];
	long got[MAX_SENDERS];
};

static void __attribute__((noreturn)) die_lost(struct receiver *rv, long total)
{
	const struct workload *w = rv->x->w;
	char counts[MAX_SENDERS * 24] = "";
	size_t len = 0;
	int s;

	for (s = 0; s < w->senders; s++)
		len += snprintf(counts + len, sizeof(counts) - len, " %ld/%ld", rv->got[s],
				rv->x->expect[s][rv->id]);
	die("deadline passed with %ld of %ld messages; got/expected from each sender:%s",
	    rv->x->stats[rv->id].msgs, total, counts);
}

/* Dies unless the @n bytes in @buf are the next message that the sender at @from owes us. */
static void check_message(struct receiver *rv, const unsigned char *buf, ssize_t n,
			  const struct msghdr *mh, const struct sockaddr_in *from)
{
	const struct workload *w = rv->x->w;
	struct msg_header h;
	struct planned p;
	long bad, seq;
	int s;

	if (mh->msg_namelen != sizeof(*from) || from->sin_family != AF_INET ||
	    from->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
		die("msg_name is not 127.0.0.1 (namelen %u, family %d)", mh->msg_namelen,
		    from->sin_family);
	for (s = 0; s < w->senders; s++)
		if (rv->x->tx_port[s] == ntohs(from->sin_port))
			break;
	if (s == w->senders)
		die("message of %zd bytes from unknown port %d", n, ntohs(from->sin_port));
	seq = rv->got[s];
	if (mh->msg_flags & MSG_TRUNC)
		die("message %ld from sender %d truncated (%zd bytes)", seq, s, n);
	if (seq == rv->x->expect[s][rv->id] || !stream_next_for(w, &rv->streams[s], rv->id, &p))
		die("extra message of %zd bytes from sender %d after its %ld", n, s, seq);
	/* A wrong size: a message lost, duplicated, reordered or resized. */
	if ((size_t)n != p.size)
		die("message %ld from sender %d: %zd bytes, want %zu", seq, s, n, p.size);
	h = (struct msg_header){ .sender = s, .receiver = rv->id, .seq = seq, .size = p.size };
	bad = mismatch(buf, n, &h, content_seed(w, s, rv->id, seq));
	if (bad >= 0)
		die("message %ld from sender %d (%zd bytes) differs at byte %ld", seq, s, n, bad);
	rv->got[s]++;
}

static void __attribute__((noreturn)) run_receiver(struct exchange *x, int id)
{
	const struct workload *w = x->w;
	struct child_stats *st = &x->stats[id];
	const size_t bufsize = max_size(w) + 1;
	unsigned char *buf = malloc(bufsize);
	struct receiver rv = { .x = x, .id = id };
	long total = 0;
	int s;

	snprintf(who, sizeof(who), "receiver %d", id);
	if (!buf)
		die("out of memory");
	for (s = 0; s < w->senders; s++) {
		stream_init(&rv.streams[s], w, s);
		total += x->expect[s][id];
	}
	while (st->msgs < total) {
		struct sockaddr_in from;
		struct iovec iov = { .iov_base = buf, .iov_len = bufsize };
		struct msghdr mh = {
			.msg_name = &from, .msg_namelen = sizeof(from),
			.msg_iov = &iov, .msg_iovlen = 1,
		};
		ssize_t n = recvmsg(x->rx[id], &mh, MSG_DONTWAIT);

		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				die("recvmsg: %s", strerror(errno));
			if (now() > deadline)
				die_lost(&rv, total);
			wait_fd(x->rx[id], POLLIN, 1000);
			continue;
		}
		check_message(&rv, buf, n, &mh, &from);
		st->msgs++;
		st->bytes += n;
	}
	/* Every sender has sent everything: nothing more may be queued. */
	wait_eof(x->senders_done[0], "the senders");
	if (recv(x->rx[id], buf, bufsize, MSG_DONTWAIT) >= 0 || errno != EAGAIN)
		die("a message arrived after the last expected one (or recv failed: %s)",
		    strerror(errno));
	_exit(0);
}

static void close_all_but(struct exchange *x, int keep)
{
	int i;

	for (i = 0; i < x->w->receivers; i++)
		if (x->rx[i] != keep)
			close(x->rx[i]);
	for (i = 0; i < x->w->senders; i++)
		if (x->tx[i] != keep)
			close(x->tx[i]);
}

static pid_t spawn(struct exchange *x, bool sender, int id)
{
	pid_t parent = getpid(), pid;

	fflush(NULL);
	pid = fork();
	if (pid)
		return pid;
	/* Never outlive a test that died. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	close_all_but(x, sender ? x->tx[id] : x->rx[id]);
	if (sender) {
		close(x->senders_done[0]);
		close(x->receivers_done[1]);
		run_sender(x, id);
	}
	close(x->senders_done[1]);
	close(x->receivers_done[0]);
	run_receiver(x, id);
}

static void run_exchange(struct __test_metadata *_metadata, const struct workload *w)
{
	const int nchild = w->senders + w->receivers;
	int sndbuf = SNDBUF, rcvbuf = RCVBUF, i, r, failed = 0, left;
	pid_t pids[MAX_SENDERS + MAX_RECEIVERS];
	long long want_bytes = 0, got_bytes = 0;
	long got_msgs = 0, eagain = 0, enobufs = 0;
	struct exchange x = { .w = w };
	double start, secs;
	bool hung = false;

	ASSERT_GE(MAX_SENDERS, w->senders);
	ASSERT_GE(MAX_RECEIVERS, w->receivers);
	ASSERT_LE(w->senders, w->msgs);
	ASSERT_GE(20, w->max_k);
	ASSERT_GT(w->max_k, w->small_k_max);

	for (i = 0; i < w->senders; i++) {
		struct stream s;
		struct planned p;

		stream_init(&s, w, i);
		while (stream_next(w, &s, &p)) {
			x.expect[i][p.receiver]++;
			want_bytes += p.size;
		}
	}
	for (i = 0; i < w->receivers; i++) {
		x.rx[i] = bound_socket("127.0.0.1", 0);
		ASSERT_LE(0, x.rx[i]);
		ASSERT_EQ(0, setsockopt(x.rx[i], SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
					sizeof(rcvbuf)));
		x.rx_port[i] = local_port(x.rx[i]);
	}
	for (i = 0; i < w->senders; i++) {
		x.tx[i] = bound_socket("127.0.0.1", 0);
		ASSERT_LE(0, x.tx[i]);
		ASSERT_EQ(0, setsockopt(x.tx[i], SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf,
					sizeof(sndbuf)));
		x.tx_port[i] = local_port(x.tx[i]);
	}
	/* Non-blocking: wait_eof() polls them against the deadline. */
	ASSERT_EQ(0, pipe2(x.senders_done, O_NONBLOCK));
	ASSERT_EQ(0, pipe2(x.receivers_done, O_NONBLOCK));
	x.stats = mmap(NULL, nchild * sizeof(*x.stats), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, x.stats);

	start = now();
	deadline = start + w->deadline_s;
	for (i = 0; i < nchild; i++) {
		bool sender = i >= w->receivers;

		pids[i] = spawn(&x, sender, sender ? i - w->receivers : i);
		if (pids[i] < 0) {
			TH_LOG("fork: %s", strerror(errno));
			for (r = 0; r < i; r++)
				kill(pids[r], SIGKILL);
			ASSERT_LE(0, pids[i]);
		}
	}
	close_all_but(&x, -1);
	close(x.senders_done[0]);
	close(x.senders_done[1]);
	close(x.receivers_done[0]);
	close(x.receivers_done[1]);

	/* Reap everyone; after the first failure, stop the rest. */
	for (left = nchild; left;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);

		if (pid == 0) {
			if (!hung && now() > deadline + REAP_GRACE_S) {
				TH_LOG("children still running %d s after the deadline",
				       REAP_GRACE_S);
				for (i = 0; i < nchild; i++)
					if (pids[i])
						kill(pids[i], SIGKILL);
				hung = true;
				failed++;
			}
			usleep(20000);
			continue;
		}
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			TH_LOG("waitpid: %s", strerror(errno));
			failed++;
			break;
		}
		for (i = 0; i < nchild && pids[i] != pid; i++)
			;
		if (i == nchild)
			continue;
		pids[i] = 0;
		left--;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		TH_LOG("%s %d %s %d", i < w->receivers ? "receiver" : "sender",
		       i < w->receivers ? i : i - w->receivers,
		       WIFEXITED(status) ? "exited with" : "killed by signal",
		       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		if (!failed++)
			for (r = 0; r < nchild; r++)
				if (pids[r])
					kill(pids[r], SIGKILL);
	}
	secs = now() - start;
	EXPECT_EQ(0, failed);

	for (i = 0; i < w->receivers; i++) {
		got_msgs += x.stats[i].msgs;
		got_bytes += x.stats[i].bytes;
	}
	for (i = 0; i < w->senders; i++) {
		eagain += x.stats[w->receivers + i].eagain;
		enobufs += x.stats[w->receivers + i].enobufs;
	}
	EXPECT_EQ(w->msgs, got_msgs);
	EXPECT_EQ(want_bytes, got_bytes);
	TH_LOG("%dx%d: %ld messages, %lld bytes in %.2f s (%.2f MB/s); %ld EAGAIN, %ld ENOBUFS",
	       w->senders, w->receivers, got_msgs, got_bytes, secs, got_bytes / secs / 1e6, eagain,
	       enobufs);
	munmap(x.stats, nchild * sizeof(*x.stats));
}

RRDS_LOADED_FIXTURE(rds);

/* Quick first: a basic failure shows here, in seconds. */
TEST_F(rds, two_by_two_up_to_64k_arrive_once_in_order_intact)
{
	const struct workload w = {
		.senders = 2, .receivers = 2, .msgs = 2000,
		.small_k_max = 10, .large_one_in = 4, .max_k = 16,
		.deadline_s = env_long("RRDS_INTEGRITY_DEADLINE", 120),
		.seed = env_long("RRDS_INTEGRITY_SEED", 0),
	};

	run_exchange(_metadata, &w);
}

TEST_F(rds, eight_by_eight_up_to_1m_arrive_once_in_order_intact)
{
	const struct workload w = {
		.senders = 8, .receivers = 8,
		.msgs = env_long("RRDS_INTEGRITY_MSGS", 50000),
		.small_k_max = 12, .large_one_in = 64, .max_k = 20,
		.deadline_s = env_long("RRDS_INTEGRITY_DEADLINE", 240),
		.seed = env_long("RRDS_INTEGRITY_SEED", 0),
	};

	run_exchange(_metadata, &w);
}

TEST_HARNESS_MAIN
