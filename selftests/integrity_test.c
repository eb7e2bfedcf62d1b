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
#include "integrity_workload.h"

#define SNDBUF		(8 << 20)	/* SO_SNDBUFFORCE: 1 MiB must be below sndbuf/2 */
/*
 * SO_RCVBUFFORCE: small enough that receivers congest (over 256 KiB queued)
 * and senders see ENOBUFS, so the congestion and poll paths are exercised.
 */
#define RCVBUF		(256 << 10)
#define RETRY_WAIT_MS	20		/* poll(POLLOUT) after EAGAIN or ENOBUFS... */
#define RETRY_NAP_MS	2		/* ...and at least this long before retrying */
#define REAP_GRACE_S	30		/* the parent's wait beyond the children's deadline */

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
	while (next_message(w, &s, seq, buf, &p)) {
		send_one(x, id, buf, p.size, &to[p.receiver]);
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

/* Dies unless the @n bytes in @buf are the next message that the sender at @from owes us. */
static void check_message(const struct exchange *x, struct receiver *rv, const unsigned char *buf,
			  ssize_t n, const struct msghdr *mh, const struct sockaddr_in *from)
{
	int s;

	if (mh->msg_namelen != sizeof(*from) || from->sin_family != AF_INET ||
	    from->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
		die("msg_name is not 127.0.0.1 (namelen %u, family %d)", mh->msg_namelen,
		    from->sin_family);
	for (s = 0; s < x->w->senders; s++)
		if (x->tx_port[s] == ntohs(from->sin_port))
			break;
	if (s == x->w->senders)
		die("message of %zd bytes from unknown port %d", n, ntohs(from->sin_port));
	check_from(rv, s, buf, n, mh->msg_flags);
}

static void __attribute__((noreturn)) run_receiver(struct exchange *x, int id)
{
	const struct workload *w = x->w;
	struct child_stats *st = &x->stats[id];
	const size_t bufsize = max_size(w) + 1;
	unsigned char *buf = malloc(bufsize);
	struct receiver rv;

	snprintf(who, sizeof(who), "receiver %d", id);
	if (!buf)
		die("out of memory");
	receiver_init(&rv, w, id, x->expect);
	while (st->msgs < rv.total) {
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
				die_lost(&rv, st->msgs);
			wait_fd(x->rx[id], POLLIN, 1000);
			continue;
		}
		check_message(x, &rv, buf, n, &mh, &from);
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
	struct exchange x = { .w = w };
	struct child_stats got;
	long long want_bytes;
	double start, secs;
	bool hung = false;

	ASSERT_GE(MAX_SENDERS, w->senders);
	ASSERT_GE(MAX_RECEIVERS, w->receivers);
	ASSERT_LE(w->senders, w->msgs);
	ASSERT_GE(20, w->max_k);
	ASSERT_GT(w->max_k, w->small_k_max);

	want_bytes = plan_exchange(w, x.expect);
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

	got = sum_stats(w, x.stats);
	EXPECT_EQ(w->msgs, got.msgs);
	EXPECT_EQ(want_bytes, got.bytes);
	TH_LOG("%dx%d: %ld messages, %lld bytes in %.2f s (%.2f MB/s); %ld EAGAIN, %ld ENOBUFS",
	       w->senders, w->receivers, got.msgs, got.bytes, secs, got.bytes / secs / 1e6,
	       got.eagain, got.enobufs);
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
