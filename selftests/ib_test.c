// SPDX-License-Identifier: GPL-2.0
/*
 * The IB transport between two network namespaces, once over the rxe pair and
 * once over the siw pair of fixtures.sh (a variant each): rds-ping, ordered
 * byte-exact delivery of 0 B to 1 MiB messages, a 4x4 integrity exchange
 * (alone, and raced by socket churn, link flaps and unload attempts),
 * RDS_INFO_CONNECTIONS, simultaneous connects, teardown when the last socket
 * of a namespace closes, TOS and IPv6 connections, a link flap, a peer
 * that lost its state, connect/close cycles, and a namespace deleted under
 * live connections.
 *
 * A socket belongs to the namespace of the process that creates it, so every
 * socket here is opened by a child that entered rrds-a (the variant's local
 * address, rrds-a's end of the pair) or rrds-b (the remote address). A
 * namespace accepts connections only while one of its sockets is bound to an
 * RDMA address: receivers bind before anyone sends to them.
 *
 * Closing a socket discards what it has not yet delivered (upstream release),
 * so senders stay open until their receivers are done.
 *
 * Processes meet at gates: pipes whose write ends the holders close as they
 * pass; a gate opens (EOF) once every holder has passed, or died. Every
 * process closes at once the write ends of the gates it does not hold.
 * Children report on stderr and exit non-zero, and every wait is bounded by a
 * deadline, so a lost message fails a test rather than hanging it.
 *
 * Under TCG the IB pairs move well under 1 MB/s (`make demo`): the volumes
 * below keep each test within a few minutes. Tunables, from the environment:
 * RRDS_IB_INTEGRITY_MSGS (the 4x4 run's total, 4000), RRDS_IB_INTEGRITY_DEADLINE
 * (seconds, 150), RRDS_IB_INTEGRITY_SEED (0), RRDS_IB_FLAP_MSGS (2000) and
 * RRDS_IB_CYCLES (1000).
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include <linux/rrds.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_socket.h"
#include "payload.h"
#include "integrity_workload.h"

#define NS_A		"rrds-a"	/* the local address's namespace */
#define NS_B		"rrds-b"	/* the remote address's */
#define MIB		(1 << 20)
#define SNDBUF		(8 << 20)	/* SO_SNDBUFFORCE: 1 MiB must be below sndbuf/2 */
#define RCVBUF		(4 << 20)	/* SO_RCVBUFFORCE where pushing back is not the point */
#define RETRY_WAIT_MS	20		/* poll(POLLOUT) after EAGAIN or ENOBUFS... */
#define RETRY_NAP_MS	2		/* ...and at least this long before retrying */
#define REAP_GRACE_S	30		/* the parent's wait beyond the children's deadline */
#define SETTLE_S	10		/* teardown reaching debugfs and rdma(8) */
#define NETNS_GONE_S	30		/* a namespace dismantled, its devices unregistered */
#define PAIR_DEADLINE_S	60		/* connecting and one message each way */
#define RELEASE_WAIT_S	120		/* beyond the deadline: a child held for the parent's checks */
#define FAULT_INTERVAL	100		/* of rrds's allocations, one candidate to fail... */
#define FAULT_PERCENT	20		/* ...which fails this often: 1 in 500 in all */
#define UNLOAD_GRACE_S	2		/* deferred frees may hold the module briefly */

/* RDS ports (the namespaces are ours alone: fixed ports identify senders). */
#define MSG_RX_PORT	4000
#define MSG_TX_PORT	4001
#define INTEGRITY_RX_PORT 5000		/* + receiver */
#define INTEGRITY_TX_PORT 5100		/* + sender */
#define PAIR_PORT	6000
#define RACE_PORT	6100
#define FLAP_RX_PORT	7000
#define FLAP_TX_PORT	7001
#define CYCLE_RX_PORT	8000
#define CYCLE_TX_PORT	8001

FIXTURE(ib) {
	int conns0, maps0;	/* debugfs rrds/objects as the test starts */
	bool netem;		/* a qdisc to remove in teardown */
	bool faults;		/* allocation failures to stop in teardown */
};

FIXTURE_VARIANT(ib) {
	const char *kind;	/* fixtures.sh <kind>-up; devices <kind>_a, <kind>_b */
	const char *local;	/* rrds-a's address */
	const char *remote;	/* rrds-b's address */
	const char *veth;	/* rrds-a's netdev under <kind>_a */
	const char *peer_veth;	/* rrds-b's, under <kind>_b */
	const char *local6;	/* rrds-a's IPv6 address (ipv6 case) */
	const char *remote6;	/* rrds-b's */
};

FIXTURE_VARIANT_ADD(ib, rxe) {
	.kind = "rxe", .local = "10.254.1.1", .remote = "10.254.1.2", .veth = "rxa",
	.peer_veth = "rxb", .local6 = "fd00:254:1::1", .remote6 = "fd00:254:1::2",
};

FIXTURE_VARIANT_ADD(ib, siw) {
	.kind = "siw", .local = "10.254.2.1", .remote = "10.254.2.2", .veth = "swa",
	.peer_veth = "swb", .local6 = "fd00:254:2::1", .remote6 = "fd00:254:2::2",
};

/* Reads "connections N" and "congestion_maps N" from debugfs. */
static int objects(int *conns, int *maps)
{
	char buf[256];

	if (read_file(RRDS_DEBUGFS "/objects", buf, sizeof(buf)) < 0)
		return -1;
	return sscanf(buf, "connections %d congestion_maps %d", conns, maps) == 2 ? 0 : -1;
}

/*
 * The live RC QPs on the @kind devices: those `rdma resource show qp` lists,
 * plus the up links' QPs (debugfs ib_links, "qp DEVICE/QPN") that it does
 * not list, counted in @untracked. ib_core's resource tracker cannot track a
 * QP created while one with the same number is being destroyed (the window
 * of rdma_restrack_begin_del), and siw hands a freed number out again at
 * once: a path that builds its winning link while its losing attempt is torn
 * down has a live QP that rdma(8) does not show (testing.rst). -1: unread.
 */
static int live_rc_qps(const char *kind, int *untracked)
{
	char links[16384], dev[32], *line;
	int listed = rc_qps(kind);
	unsigned int qpn;

	*untracked = 0;
	if (listed < 0 || read_file(RRDS_DEBUGFS "/ib_links", links, sizeof(links)) < 0)
		return -1;
	for (line = strstr(links, " qp "); line; line = strstr(line + 1, " qp ")) {
		if (sscanf(line, " qp %31[^/]/%u", dev, &qpn) != 2 ||
		    strncmp(dev, kind, strlen(kind)) || dev[strlen(kind)] != '_')
			continue;
		if (sh("rdma resource show qp link %s/1 lqpn %u 2>/dev/null | grep -q ' type RC '",
		       dev, qpn))
			(*untracked)++;
	}
	return listed + *untracked;
}

FIXTURE_SETUP(ib)
{
	/*
	 * Idempotent: also brings back a link left down, or the pair that
	 * namespace_deleted_with_live_connections removes.
	 */
	SKIP_WITHOUT_DRIVER(variant->kind);
	ASSERT_EQ(0, pair_up_loaded(variant->kind));
	ASSERT_EQ(0, objects(&self->conns0, &self->maps0));
}

/* netem on both ends of the pair's veth; "" removes it. */
static int netem(const FIXTURE_VARIANT(ib) *v, const char *spec)
{
	int rc = 0;

	if (*spec) {
		rc |= sh("ip netns exec %s tc qdisc replace dev %s root netem %s", NS_A, v->veth,
			 spec);
		rc |= sh("ip netns exec %s tc qdisc replace dev %s root netem %s", NS_B,
			 v->peer_veth, spec);
	} else {
		rc |= sh("ip netns exec %s tc qdisc del dev %s root", NS_A, v->veth);
		rc |= sh("ip netns exec %s tc qdisc del dev %s root", NS_B, v->peer_veth);
	}
	return rc;
}

FIXTURE_TEARDOWN(ib)
{
	if (self->netem)
		netem(variant, "");
	if (self->faults)
		stop_alloc_failures();
}

/* Children: report on stderr and exit non-zero; the parent sees the status. */
static char who[32] = "test";
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

/* Waits for @events on @fd for at most @ms (and never past @limit); 0 if @limit passed. */
static int wait_fd_until(int fd, short events, int ms, double limit)
{
	double left = limit - now();
	struct pollfd p = { .fd = fd, .events = events };

	if (left <= 0)
		return 0;
	if (left * 1000 < ms)
		ms = left * 1000 + 1;
	if (poll(&p, 1, ms) < 0 && errno != EINTR)
		die("poll: %s", strerror(errno));
	return 1;
}

static int wait_fd(int fd, short events, int ms)
{
	return wait_fd_until(fd, events, ms, deadline);
}

/* Passes gate @g: closes this process's write end. */
static void gate_pass(int g[2])
{
	if (g[1] >= 0)
		close(g[1]);
	g[1] = -1;
}

/* Passes gate @g and waits for it to open; false if @limit came first. */
static bool gate_wait_until(int g[2], double limit)
{
	char c;

	gate_pass(g);
	for (;;) {
		ssize_t n = read(g[0], &c, 1);

		if (n == 0)
			return true;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		if (!wait_fd_until(g[0], POLLIN, 1000, limit))
			return false;
	}
}

/* In a child: the same, dying at the deadline. */
static void gate_wait(int g[2], const char *what)
{
	if (!gate_wait_until(g, deadline))
		die("deadline passed waiting for %s", what);
}

/* In a child: waits for the parent to end its checks, however long they took. */
static void gate_wait_release(int g[2])
{
	if (!gate_wait_until(g, deadline + RELEASE_WAIT_S))
		die("the test never released this child");
}

static void gate_open(struct __test_metadata *_metadata, int g[2])
{
	ASSERT_EQ(0, pipe2(g, O_NONBLOCK | O_CLOEXEC));
}

struct kid {
	pid_t pid;
	char name[24];
};

/*
 * Forks a child that enters network namespace @ns (if any): returns 0 in the child,
 * its pid (or -1) in the parent, which keeps it in @k.
 */
static pid_t spawn_in(struct kid *k, const char *ns, const char *name)
{
	pid_t parent = getpid(), pid;
	int rc;

	snprintf(k->name, sizeof(k->name), "%s", name);
	fflush(NULL);
	pid = fork();
	if (pid) {
		k->pid = pid;
		return pid;
	}
	/* Never outlive a test that died. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	snprintf(who, sizeof(who), "%s", name);
	/* NULL: stay in the initial namespace. */
	rc = ns ? enter_ns(ns) : 0;
	if (rc)
		die("entering %s: %s", ns, strerror(-rc));
	return 0;
}

/* Whether child @k has exited (it stays unreaped). */
static bool exited(const struct kid *k)
{
	siginfo_t si = { 0 };

	if (k->pid <= 0)
		return true;
	return waitid(P_PID, k->pid, &si, WEXITED | WNOHANG | WNOWAIT) || si.si_pid;
}

static void kill_kids(struct kid *k, int n)
{
	for (int i = 0; i < n; i++)
		if (k[i].pid > 0)
			kill(k[i].pid, SIGKILL);
}

/*
 * Reaps the children @k[0..n): after the first failure, or once @limit has
 * passed, kills those left. Returns how many failed.
 */
static int reap(struct __test_metadata *_metadata, struct kid *k, int n, double limit)
{
	int failed = 0, left = 0, i, status;
	bool killing = false;

	for (i = 0; i < n; i++)
		left += k[i].pid > 0;
	while (left) {
		bool reaped = false;

		for (i = 0; i < n; i++) {
			pid_t pid;

			if (k[i].pid <= 0)
				continue;
			pid = waitpid(k[i].pid, &status, WNOHANG);
			if (pid == 0 || (pid < 0 && errno == EINTR))
				continue;
			k[i].pid = 0;
			left--;
			reaped = true;
			if (pid > 0 && WIFEXITED(status) && !WEXITSTATUS(status))
				continue;
			if (pid < 0)
				TH_LOG("waitpid for %s: %s", k[i].name, strerror(errno));
			else if (WIFEXITED(status))
				TH_LOG("%s exited with %d", k[i].name, WEXITSTATUS(status));
			else if (!killing)
				TH_LOG("%s killed by signal %d", k[i].name, WTERMSIG(status));
			failed++;
			if (!killing) {
				kill_kids(k, n);
				killing = true;
			}
		}
		if (!left || reaped)
			continue;
		if (!killing && now() > limit) {
			TH_LOG("%d children still running: killed", left);
			kill_kids(k, n);
			killing = true;
			failed++;
		}
		usleep(20000);
	}
	return failed;
}

/*
 * Set while allocations fail on purpose (integrity_under_allocation_failures):
 * a call that fails with ENOMEM is retried, and counted.
 */
static bool retry_enomem;
static long enomem_count;

/* Naps before retrying a call that failed with ENOMEM; false if it may not be retried. */
static bool enomem_retry(void)
{
	if (errno != ENOMEM || !retry_enomem)
		return false;
	enomem_count++;
	poll(NULL, 0, RETRY_NAP_MS);
	return true;
}

/* In a child: a socket bound to @ip:@port, in the child's namespace. */
static int child_socket(const char *ip, int port)
{
	int fd;

	while ((fd = bound_socket(ip, port)) < 0 && now() < deadline && enomem_retry())
		;
	if (fd < 0)
		die("socket bound to %s:%d: %s", ip, port, strerror(errno));
	return fd;
}

static void set_buf(int fd, int opt, int bytes)
{
	if (setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes)))
		die("setsockopt(%d, %d): %s", opt, bytes, strerror(errno));
}

static long eagain_count, enobufs_count;

/*
 * Sends one message to @to (@tolen bytes, either family), retrying while
 * the send buffer is full (EAGAIN) or the destination congested (ENOBUFS);
 * dies at the deadline.
 */
static void send_msg_to(int fd, const void *buf, size_t size, const struct sockaddr *to,
			socklen_t tolen)
{
	for (;;) {
		ssize_t n = sendto(fd, buf, size, MSG_DONTWAIT, to, tolen);

		if (n >= 0) {
			if ((size_t)n != size)
				die("sendto of %zu bytes returned %zd", size, n);
			return;
		}
		if (now() > deadline)
			die("deadline passed sending %zu bytes (last error %s)", size,
			    strerror(errno));
		if (errno == EAGAIN || errno == ENOBUFS) {
			double start = now();

			if (errno == EAGAIN)
				eagain_count++;
			else
				enobufs_count++;
			/* POLLOUT may come at once (a refused port): never spin. */
			wait_fd(fd, POLLOUT, RETRY_WAIT_MS);
			if (now() - start < RETRY_NAP_MS / 1000.0)
				poll(NULL, 0, RETRY_NAP_MS);
		} else if (errno != EINTR && !enomem_retry()) {
			die("sendto of %zu bytes: %s", size, strerror(errno));
		}
	}
}

static void send_msg(int fd, const void *buf, size_t size, const struct sockaddr_in *to)
{
	send_msg_to(fd, buf, size, (const struct sockaddr *)to, sizeof(*to));
}

static void send_msg6(int fd, const void *buf, size_t size, const struct sockaddr_in6 *to)
{
	send_msg_to(fd, buf, size, (const struct sockaddr *)to, sizeof(*to));
}

/* Dies unless @from (@len bytes) is @ip:@port; an @ip with a colon is IPv6. */
static void check_source(const struct sockaddr_storage *from, socklen_t len, const char *ip,
			 int port)
{
	char got[INET6_ADDRSTRLEN] = "?";

	if (strchr(ip, ':')) {
		const struct sockaddr_in6 *f = (const struct sockaddr_in6 *)from;
		struct sockaddr_in6 want = sin6(ip, port, 0);

		if (len != sizeof(*f) || f->sin6_family != AF_INET6)
			die("source address of %u bytes, family %d", len, f->sin6_family);
		if (!memcmp(&f->sin6_addr, &want.sin6_addr, 16) && f->sin6_port == want.sin6_port)
			return;
		inet_ntop(AF_INET6, &f->sin6_addr, got, sizeof(got));
		die("message from [%s]:%d, want [%s]:%d", got, ntohs(f->sin6_port), ip, port);
	} else {
		const struct sockaddr_in *f = (const struct sockaddr_in *)from;
		struct sockaddr_in want = sin4(ip, port);

		if (len != sizeof(*f) || f->sin_family != AF_INET)
			die("source address of %u bytes, family %d", len, f->sin_family);
		if (f->sin_addr.s_addr == want.sin_addr.s_addr && f->sin_port == want.sin_port)
			return;
		inet_ntop(AF_INET, &f->sin_addr, got, sizeof(got));
		die("message from %s:%d, want %s:%d", got, ntohs(f->sin_port), ip, port);
	}
}

/*
 * Receives the next message, whole, into @buf; dies unless it comes from
 * @ip:@port (IPv4 or IPv6), or at the deadline (saying it was waiting for
 * @what).
 */
static ssize_t recv_from(int fd, void *buf, size_t size, const char *what, const char *ip,
			 int port)
{
	struct sockaddr_storage from;
	struct iovec iov = { .iov_base = buf, .iov_len = size };
	struct msghdr mh = { .msg_name = &from, .msg_iov = &iov, .msg_iovlen = 1 };

	for (;;) {
		ssize_t n;

		mh.msg_namelen = sizeof(from);
		n = recvmsg(fd, &mh, MSG_DONTWAIT);
		if (n >= 0) {
			if (mh.msg_flags & MSG_TRUNC)
				die("%s truncated (%zd bytes)", what, n);
			check_source(&from, mh.msg_namelen, ip, port);
			return n;
		}
		if (errno != EAGAIN && errno != EINTR)
			die("recvmsg: %s", strerror(errno));
		if (now() > deadline)
			die("deadline passed waiting for %s", what);
		wait_fd(fd, POLLIN, 1000);
	}
}

/* At the start of a numbered message (truncated if the message is shorter). */
struct numbered {
	uint64_t seq;
	uint64_t size;
};

static uint64_t numbered_seed(uint64_t stream, uint64_t seq)
{
	return mix64(mix64(stream + 1) ^ seq);
}

/* Fills @buf with message @seq of @stream, @size bytes. */
static void numbered_fill(unsigned char *buf, size_t size, uint64_t stream, uint64_t seq)
{
	struct numbered h = { .seq = seq, .size = size };

	payload_fill(buf, size, &h, sizeof(h), numbered_seed(stream, seq));
}

/* Dies unless the @n bytes at @buf are message @seq of @stream, of @size bytes. */
static void numbered_check(const unsigned char *buf, ssize_t n, size_t size, uint64_t stream,
			   uint64_t seq)
{
	struct numbered h = { .seq = seq, .size = size };
	uint64_t got;
	long bad;

	/* Say which message came instead, if it can be told. */
	if ((size_t)n >= sizeof(got)) {
		memcpy(&got, buf, sizeof(got));
		if (got != seq)
			die("got message %llu (%zd bytes), want %llu: lost, duplicated or reordered",
			    (unsigned long long)got, n, (unsigned long long)seq);
	}
	if ((size_t)n != size)
		die("message %llu: %zd bytes, want %zu", (unsigned long long)seq, n, size);
	bad = payload_mismatch(buf, n, &h, sizeof(h), numbered_seed(stream, seq));
	if (bad >= 0)
		die("message %llu (%zd bytes) differs at byte %ld", (unsigned long long)seq, n,
		    bad);
}

/* Reads one byte from the pipe @fd; dies at EOF (its writer is gone) or the deadline. */
static void read_byte(int fd, const char *what)
{
	char c;

	for (;;) {
		ssize_t n = read(fd, &c, 1);

		if (n == 1)
			return;
		if (n == 0)
			die("%s: its writer is gone", what);
		if (errno != EAGAIN && errno != EINTR)
			die("%s: %s", what, strerror(errno));
		if (!wait_fd(fd, POLLIN, 1000))
			die("deadline passed waiting for %s", what);
	}
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

/*
 * Dies unless RDS_INFO_CONNECTIONS, read through @fd, lists exactly one
 * connection @laddr -> @faddr, over "infiniband", that has sent a message.
 */
static void check_ib_connection(int fd, const char *laddr, const char *faddr)
{
	struct sockaddr_in l = sin4(laddr, 0), f = sin4(faddr, 0);
	struct rds_info_connection *c;
	int each, found = 0;
	socklen_t len;
	void *buf;

	each = info(fd, RDS_INFO_CONNECTIONS, &buf, &len);
	if (each != sizeof(*c))
		die("RDS_INFO_CONNECTIONS: record size %d", each);
	c = buf;
	for (size_t i = 0; i < len / sizeof(*c); i++) {
		char transport[sizeof(c[i].transport) + 1] = "";

		if (c[i].laddr != l.sin_addr.s_addr || c[i].faddr != f.sin_addr.s_addr)
			continue;
		found++;
		memcpy(transport, c[i].transport, sizeof(c[i].transport));
		if (strcmp(transport, "infiniband"))
			die("connection %s -> %s over \"%s\"", laddr, faddr, transport);
		if (!(c[i].flags & RDS_INFO_CONNECTION_FLAG_CONNECTED))
			die("connection %s -> %s: flags %#x", laddr, faddr, c[i].flags);
		/* Sequence numbers start at 1: ours has sent one. */
		if (c[i].next_tx_seq < 2)
			die("connection %s -> %s: next_tx_seq %llu", laddr, faddr,
			    (unsigned long long)c[i].next_tx_seq);
	}
	free(buf);
	if (found != 1)
		die("%d connections %s -> %s listed", found, laddr, faddr);
}

/*
 * Dies unless RDS_INFO_IB_CONNECTIONS and RDS6_INFO_IB_CONNECTIONS list the
 * up connection @laddr -> @faddr once each, with the rings' sizes and, over
 * RoCE, the IPv4-mapped GIDs of the two addresses (iWARP GIDs are MACs).
 */
static void check_ib_info(int fd, const char *laddr, const char *faddr, bool roce)
{
	struct sockaddr_in l = sin4(laddr, 0), f = sin4(faddr, 0);
	struct rds6_info_rdma_connection *c6;
	struct rds_info_rdma_connection *c;
	unsigned char lgid[16] = { [10] = 0xff, [11] = 0xff }, fgid[16];
	int each, found = 0;
	socklen_t len;
	void *buf;

	memcpy(&lgid[12], &l.sin_addr, 4);
	memcpy(fgid, lgid, 12);
	memcpy(&fgid[12], &f.sin_addr, 4);
	each = info(fd, RDS_INFO_IB_CONNECTIONS, &buf, &len);
	if (each != sizeof(*c))
		die("RDS_INFO_IB_CONNECTIONS: record size %d (%zu)", each, sizeof(*c));
	c = buf;
	for (size_t i = 0; i < len / sizeof(*c); i++) {
		if (c[i].src_addr != l.sin_addr.s_addr || c[i].dst_addr != f.sin_addr.s_addr)
			continue;
		found++;
		if (c[i].max_send_wr != 257 || c[i].max_recv_wr != 256 || !c[i].max_send_sge)
			die("IB connection %s -> %s: send_wr %u recv_wr %u send_sge %u", laddr,
			    faddr, c[i].max_send_wr, c[i].max_recv_wr, c[i].max_send_sge);
		/* The MR pool: 64 MRs of 257 pages, or what the device maps (siw 256). */
		if (c[i].rdma_mr_max != 64 || c[i].rdma_mr_size != (roce ? 257 : 256))
			die("IB connection %s -> %s: rdma_mr_max %u rdma_mr_size %u", laddr, faddr,
			    c[i].rdma_mr_max, c[i].rdma_mr_size);
		if (roce && (memcmp(c[i].src_gid, lgid, 16) || memcmp(c[i].dst_gid, fgid, 16)))
			die("IB connection %s -> %s: GIDs are not the addresses'", laddr, faddr);
		if (c[i].tos)
			die("IB connection %s -> %s: tos %u", laddr, faddr, c[i].tos);
	}
	free(buf);
	if (found != 1)
		die("%d IB connections %s -> %s listed", found, laddr, faddr);

	found = 0;
	each = info(fd, RDS6_INFO_IB_CONNECTIONS, &buf, &len);
	if (each != sizeof(*c6))
		die("RDS6_INFO_IB_CONNECTIONS: record size %d (%zu)", each, sizeof(*c6));
	c6 = buf;
	for (size_t i = 0; i < len / sizeof(*c6); i++) {
		if (memcmp(&c6[i].src_addr, lgid, 16) || memcmp(&c6[i].dst_addr, fgid, 16))
			continue;
		found++;
		if (c6[i].max_send_wr != 257 || c6[i].max_recv_wr != 256)
			die("IB connection %s -> %s (RDS6): send_wr %u recv_wr %u", laddr, faddr,
			    c6[i].max_send_wr, c6[i].max_recv_wr);
	}
	free(buf);
	if (found != 1)
		die("%d IB connections %s -> %s listed by RDS6_INFO", found, laddr, faddr);
}

static void __attribute__((noreturn)) run_pinger(const FIXTURE_VARIANT(ib) *v, int bound[2])
{
	struct timeval tv = { .tv_sec = 20 };
	struct sockaddr_in to = sin4(v->remote, 0);
	struct sockaddr_storage from;
	socklen_t len = sizeof(from);
	char buf[16];
	ssize_t n;
	int fd;

	gate_wait(bound, "rrds-b's socket");
	fd = child_socket(v->local, 0);
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		die("SO_RCVTIMEO: %s", strerror(errno));
	/* The first send makes the connection. */
	if (sendto(fd, "", 0, 0, (struct sockaddr *)&to, sizeof(to)))
		die("ping: %s", strerror(errno));
	n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len);
	if (n < 0)
		die("no pong within %ld s: %s", (long)tv.tv_sec, strerror(errno));
	if (n)
		die("pong of %zd bytes", n);
	check_source(&from, len, v->remote, 0);
	_exit(0);
}

/* Quick first: a basic failure of the pair shows here, in seconds. */
TEST_F(ib, ping_across_namespaces_gets_pong)
{
	int bound[2], pinged[2];
	struct kid k[2] = { 0 };

	gate_open(_metadata, bound);	/* rrds-b's socket is bound */
	gate_open(_metadata, pinged);	/* the pinger is done */
	deadline = now() + PAIR_DEADLINE_S;
	/* Only for rrds-b to accept connections: port 0 answers pings. */
	if (!spawn_in(&k[0], NS_B, "rrds-b socket")) {
		int fd;

		gate_pass(pinged);
		fd = child_socket(variant->remote, 0);
		gate_pass(bound);
		gate_wait(pinged, "the pinger");
		close(fd);
		_exit(0);
	}
	ASSERT_LT(0, k[0].pid);
	if (!spawn_in(&k[1], NS_A, "pinger"))
		run_pinger(variant, bound);
	ASSERT_LT(0, k[1].pid);
	gate_pass(bound);
	gate_pass(pinged);
	EXPECT_EQ(0, reap(_metadata, k, 2, deadline + REAP_GRACE_S));
}

#define MESSAGES	300
#define MSG_STREAM	1

/*
 * Message @i's size: the edges (4 KiB is the IB fragment), then a log-uniform
 * spread, mostly up to 64 KiB, one in 50 up to 1 MiB (about 5 MB in all).
 */
static size_t message_size(int i)
{
	static const size_t edges[] = { 0, 1, 4095, 4096, 4097, 8191, 8192, 8193, 65536, MIB };
	uint64_t r = mix64(i);
	int k;

	if ((size_t)i < ARRAY_SIZE(edges))
		return edges[i];
	k = i % 50 ? r % 17 : 17 + r % 4;
	return ((size_t)1 << k) / 2 + (r >> 32) % (((size_t)1 << k) / 2 + 1);
}

/* A numbered stream of @count messages, message i of @size(i) bytes, at most @max. */
struct numbered_stream {
	int count;
	size_t (*size)(int i);
	size_t max;
	uint64_t stream;
};

static void __attribute__((noreturn)) run_stream_receiver(const FIXTURE_VARIANT(ib) *v,
							  const struct numbered_stream *ns,
							  int ready[2])
{
	unsigned char *buf = malloc(ns->max + 1);
	char what[40];
	int fd, i;

	if (!buf)
		die("out of memory");
	fd = child_socket(v->remote, MSG_RX_PORT);
	set_buf(fd, SO_RCVBUFFORCE, RCVBUF);
	gate_pass(ready);
	for (i = 0; i < ns->count; i++) {
		ssize_t n;

		snprintf(what, sizeof(what), "message %d of %d", i, ns->count);
		n = recv_from(fd, buf, ns->max + 1, what, v->local, MSG_TX_PORT);
		numbered_check(buf, n, ns->size(i), ns->stream, i);
	}
	_exit(0);
}

static void __attribute__((noreturn)) run_stream_sender(const FIXTURE_VARIANT(ib) *v,
							const struct numbered_stream *ns,
							int ready[2], int done[2])
{
	struct sockaddr_in to = sin4(v->remote, MSG_RX_PORT);
	unsigned char *buf = malloc(ns->max);
	int fd, i;

	if (!buf)
		die("out of memory");
	fd = child_socket(v->local, MSG_TX_PORT);
	set_buf(fd, SO_SNDBUFFORCE, SNDBUF);
	gate_wait(ready, "the receiver");
	for (i = 0; i < ns->count; i++) {
		numbered_fill(buf, ns->size(i), ns->stream, i);
		send_msg(fd, buf, ns->size(i), &to);
	}
	gate_wait(done, "the receiver");
	_exit(0);
}

/*
 * Sends @ns from rrds-a to rrds-b, back to back, and checks that it arrives
 * in order, byte for byte, from the sender's address and port; 0 if so.
 */
static int send_stream(struct __test_metadata *_metadata, const FIXTURE_VARIANT(ib) *v,
		       const struct numbered_stream *ns)
{
	int ready[2], done[2];
	struct kid k[2] = { 0 };

	gate_open(_metadata, ready);	/* the receiver is bound */
	gate_open(_metadata, done);	/* the receiver has exited */
	deadline = now() + 120;
	if (!spawn_in(&k[0], NS_B, "receiver"))
		run_stream_receiver(v, ns, ready);
	if (k[0].pid <= 0)
		return -1;
	if (!spawn_in(&k[1], NS_A, "sender")) {
		gate_pass(ready);
		gate_pass(done);
		run_stream_sender(v, ns, ready, done);
	}
	if (k[1].pid <= 0) {
		reap(_metadata, k, 1, 0);	/* past its limit: killed */
		return -1;
	}
	gate_pass(ready);
	gate_pass(done);
	return reap(_metadata, k, 2, deadline + REAP_GRACE_S);
}

TEST_F(ib, messages_cross_namespaces_intact)
{
	long long acks_asked = rds_counter("send_ack_required");
	long long acks_seen = rds_counter("recv_ack_required");
	long long emptied = rds_counter("send_queue_empty");
	static const struct numbered_stream ns = {
		.count = MESSAGES, .size = message_size, .max = MIB, .stream = MSG_STREAM,
	};

	ASSERT_LE(0, acks_asked);
	ASSERT_LE(0, acks_seen);
	ASSERT_LE(0, emptied);
	EXPECT_EQ(0, send_stream(_metadata, variant, &ns));
	/* Upstream's rhythm: at least every ninth message asks for an ack. */
	EXPECT_LE(acks_asked + MESSAGES / 9, rds_counter("send_ack_required"));
	EXPECT_LE(acks_seen + MESSAGES / 9, rds_counter("recv_ack_required"));
	/* The sender's unacknowledged bytes went back to 0 at least once. */
	EXPECT_LT(emptied, rds_counter("send_queue_empty"));
}

#define SMALL_MESSAGES	3000
#define SMALL_STREAM	2

/* Small message @i's size: 0 to 699 bytes, odd ones included. */
static size_t small_size(int i)
{
	return (size_t)(i * 7) % 700;
}

/*
 * Small messages sent faster than the link completes them share frames
 * between rrds peers (design.rst, "Packed frames"): every message arrives
 * intact and in order, some went packed, and every packed one sent was
 * received as such.
 */
TEST_F(ib, small_messages_share_frames)
{
	long long frames = rds_counter("ib_tx_packed_frames");
	long long packed = rds_counter("ib_tx_packed_messages");
	long long unpacked = rds_counter("ib_rx_packed_messages");
	static const struct numbered_stream ns = {
		.count = SMALL_MESSAGES, .size = small_size, .max = 1024, .stream = SMALL_STREAM,
	};

	ASSERT_LE(0, frames);
	ASSERT_LE(0, packed);
	ASSERT_LE(0, unpacked);
	EXPECT_EQ(0, send_stream(_metadata, variant, &ns));
	frames = rds_counter("ib_tx_packed_frames") - frames;
	packed = rds_counter("ib_tx_packed_messages") - packed;
	unpacked = rds_counter("ib_rx_packed_messages") - unpacked;
	TH_LOG("%lld of %d messages in %lld packed frames", packed, SMALL_MESSAGES, frames);
	EXPECT_LT(0, frames);
	/* More than one message per packed frame, on average. */
	EXPECT_LT(frames, packed);
	EXPECT_EQ(packed, unpacked);
}

#define LARGE_MESSAGES	200
#define LARGE_STREAM	3
#define FRAME_BYTES	8192	/* FRAME_PAGES pages: design.rst, "Large frames" */

/* Large message @i's size: 4097 bytes to 64 KiB, never a whole page. */
static size_t large_size(int i)
{
	return 4097 + (size_t)(i * 1237) % 61439;
}

/* The frames of a message of @len bytes that carry more than a page. */
static long long large_frames(size_t len)
{
	return len / FRAME_BYTES + (len % FRAME_BYTES > 4096);
}

/*
 * Between rrds peers a frame carries up to two pages (design.rst, "Large
 * frames"): messages of 4 KiB to 64 KiB arrive intact and in order, and
 * exactly the frames that hold more than a page were sent and received as
 * large ones.
 */
TEST_F(ib, large_messages_go_in_two_page_frames)
{
	long long sent = rds_counter("ib_tx_large_frames");
	long long received = rds_counter("ib_rx_large_frames");
	long long expected = 0;
	static const struct numbered_stream ns = {
		.count = LARGE_MESSAGES, .size = large_size, .max = 65536, .stream = LARGE_STREAM,
	};
	int i;

	ASSERT_LE(0, sent);
	ASSERT_LE(0, received);
	for (i = 0; i < LARGE_MESSAGES; i++)
		expected += large_frames(large_size(i));
	EXPECT_EQ(0, send_stream(_metadata, variant, &ns));
	sent = rds_counter("ib_tx_large_frames") - sent;
	received = rds_counter("ib_rx_large_frames") - received;
	TH_LOG("%d messages: %lld large frames sent, %lld received, %lld expected",
	       LARGE_MESSAGES, sent, received, expected);
	EXPECT_EQ(expected, sent);
	EXPECT_EQ(expected, received);
}

#define FULL_MSG	16384
#define FULL_SNDBUF	65536	/* SO_SNDBUFFORCE: four FULL_MSG fit */

/*
 * Fills the send buffer with messages to a host of the subnet that does not
 * exist (no connection can carry them while its address resolves), then
 * expects the next non-blocking send to fail with EAGAIN and to count in
 * send_queue_full, as upstream's rds_sendmsg does.
 */
static void __attribute__((noreturn)) run_full_sender(const FIXTURE_VARIANT(ib) *v)
{
	static char buf[FULL_MSG];
	char absent[INET_ADDRSTRLEN];
	long long full = rds_counter("send_queue_full");
	struct sockaddr_in to;
	int fd, i;

	snprintf(absent, sizeof(absent), "%.*s.99",
		 (int)(strrchr(v->remote, '.') - v->remote), v->remote);
	to = sin4(absent, PAIR_PORT);
	fd = child_socket(v->local, 0);
	set_buf(fd, SO_SNDBUFFORCE, FULL_SNDBUF);
	/* Accepted while the queued bytes are below the limit (upstream's rule). */
	for (i = 0; i < FULL_SNDBUF / FULL_MSG; i++)
		if (sendto(fd, buf, FULL_MSG, MSG_DONTWAIT, (struct sockaddr *)&to,
			   sizeof(to)) != FULL_MSG)
			die("message %d to %s: %s", i, absent, strerror(errno));
	errno = 0;
	if (sendto(fd, buf, FULL_MSG, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to)) != -1 ||
	    errno != EAGAIN)
		die("send into a full buffer: %s", errno ? strerror(errno) : "accepted");
	if (full < 0 || rds_counter("send_queue_full") < full + 1)
		die("send_queue_full %lld before, %lld after", full,
		    rds_counter("send_queue_full"));
	close(fd);
	_exit(0);
}

TEST_F(ib, full_send_buffer_refuses_with_eagain)
{
	struct kid k = { 0 };

	deadline = now() + 30;
	if (!spawn_in(&k, NS_A, "sender"))
		run_full_sender(variant);
	ASSERT_LT(0, k.pid);
	EXPECT_EQ(0, reap(_metadata, &k, 1, deadline + REAP_GRACE_S));
}

#define CONG_RX_PORT	6300
#define CONG_TX_PORT	6301
#define CONG_MSG	1024
#define CONG_MAX_MSGS	3500	/* far beyond what a 32 KiB receive buffer takes... */
#define CONG_PACE	8	/* ...sent this many at a time, 5 ms apart, so the map */
				/* can cross before the 4 MiB queue limit drops any */

/* The RDS_CMSG_CONG_UPDATE mask of a 0-byte notice on @fd; 0 if none came within @ms. */
static uint64_t cong_notice(int fd, int ms)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(uint64_t))];
	} control;
	struct msghdr m = { .msg_control = &control, .msg_controllen = sizeof(control) };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct cmsghdr *c;
	uint64_t mask;

	if (poll(&p, 1, ms) != 1 || recvmsg(fd, &m, MSG_DONTWAIT) != 0)
		return 0;
	c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_level != SOL_RDS || c->cmsg_type != RDS_CMSG_CONG_UPDATE ||
	    c->cmsg_len != CMSG_LEN(sizeof(mask)))
		return 0;
	memcpy(&mask, CMSG_DATA(c), sizeof(mask));
	return mask;
}

/*
 * The congestion tests' sockets: *rx in rrds-b at CONG_RX_PORT with a 16 KiB
 * SO_RCVBUF (congested past 16 KiB queued), *tx in rrds-a at CONG_TX_PORT;
 * the task is left in rrds-a.
 */
static void cong_sockets(struct __test_metadata *_metadata, const FIXTURE_VARIANT(ib) *v,
			 int *rx, int *tx)
{
	int rcvbuf = 16 << 10;

	ASSERT_EQ(0, enter_ns(NS_B));
	*rx = bound_socket(v->remote, CONG_RX_PORT);
	ASSERT_LE(0, *rx);
	ASSERT_EQ(0, setsockopt(*rx, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)));
	ASSERT_EQ(0, enter_ns(NS_A));
	*tx = bound_socket(v->local, CONG_TX_PORT);
	ASSERT_LE(0, *tx);
}

/*
 * Reads the @sent messages of CONG_MSG bytes numbered from 0 and filled with
 * @fill from @rx, in order; each may take up to 10 s to come.
 */
static void read_numbered(struct __test_metadata *_metadata, int rx, int sent, unsigned char fill)
{
	long long dropped0 = rds_counter("recv_drop_queue_full");
	unsigned char buf[CONG_MSG + 1];
	int got = 0;
	ssize_t n;

	while (got < sent) {
		struct pollfd p = { .fd = rx, .events = POLLIN };

		n = recv(rx, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0) {
			ASSERT_EQ(EAGAIN, errno);
			ASSERT_EQ(1, poll(&p, 1, 10000))
				TH_LOG("message %d of %d lost; %lld dropped since reading began", got,
				       sent, rds_counter("recv_drop_queue_full") - dropped0);
			continue;
		}
		numbered_check(buf, n, CONG_MSG, fill, got);
		got++;
	}
}

/*
 * Congestion crosses the link: rrds-b's socket, with a 32 KiB receive
 * buffer, reads nothing; rrds-a's non-blocking sender gets ENOBUFS, which it
 * can only get from rrds-b's congestion map, sent on the wire
 * (cong_update_queued) and applied here (cong_update_received). Once rrds-b
 * has read everything, the cleared map comes back: the sender's
 * RDS_CONG_MONITOR reports the port, and sending works again. Every message
 * arrives once, in order.
 */
TEST_F(ib, congestion_maps_cross_the_wire_and_clear)
{
	long long queued0 = rds_counter("cong_update_queued");
	long long received0 = rds_counter("cong_update_received");
	long long refused0 = rds_counter("cong_send_error");
	struct sockaddr_in to = sin4(variant->remote, CONG_RX_PORT);
	unsigned char buf[CONG_MSG + 1];
	int rx, tx, on = 1, sent = 0, sndbuf = SNDBUF;
	uint64_t mask = 0;
	double limit;
	ssize_t n;

	ASSERT_LE(0, queued0);
	cong_sockets(_metadata, variant, &rx, &tx);
	ASSERT_EQ(0, setsockopt(tx, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)));
	ASSERT_EQ(0, setsockopt(tx, SOL_RDS, RDS_CONG_MONITOR, &on, sizeof(on)));

	/* Send until the peer's map says the port is congested. */
	limit = now() + 60;
	for (;;) {
		numbered_fill(buf, CONG_MSG, 0x5c, sent);
		n = sendto(tx, buf, CONG_MSG, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to));
		if (n == CONG_MSG) {
			sent++;
			ASSERT_GT(CONG_MAX_MSGS, sent) TH_LOG("never congested");
			if (sent % CONG_PACE == 0)
				poll(NULL, 0, 5);
			continue;
		}
		ASSERT_TRUE(errno == EAGAIN || errno == ENOBUFS) TH_LOG("%s", strerror(errno));
		if (errno == ENOBUFS)
			break;
		ASSERT_GT(limit, now()) TH_LOG("no ENOBUFS in 60 s (%d sent)", sent);
		poll(NULL, 0, RETRY_WAIT_MS);
	}
	EXPECT_LT(queued0, rds_counter("cong_update_queued"));
	EXPECT_LT(received0, rds_counter("cong_update_received"));
	EXPECT_LT(refused0, rds_counter("cong_send_error"));
	/* Still congested: nothing has been read. */
	EXPECT_EQ(-ENOBUFS, ERR(sendto(tx, buf, CONG_MSG, MSG_DONTWAIT,
				       (struct sockaddr *)&to, sizeof(to))));

	/*
	 * Read everything; the cleared map comes back and is reported. A
	 * notice says the port's bit changed, either way: the first one read
	 * here may be the congestion's own, with the clear still on its way
	 * (seen on 4 vCPUs), so the sender tries until the map lets it through.
	 */
	read_numbered(_metadata, rx, sent, 0x5c);
	numbered_fill(buf, CONG_MSG, 0x5c, sent);
	limit = now() + 20;
	for (;;) {
		mask |= cong_notice(tx, 200);
		n = sendto(tx, buf, CONG_MSG, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to));
		if (n == CONG_MSG || errno != ENOBUFS || now() > limit)
			break;
	}
	EXPECT_EQ(1ULL << (CONG_RX_PORT % 64), mask);
	EXPECT_EQ(CONG_MSG, n) TH_LOG("%s", strerror(errno));
	struct pollfd p = { .fd = rx, .events = POLLIN };

	ASSERT_EQ(1, poll(&p, 1, 10000));
	n = recv(rx, buf, sizeof(buf), MSG_DONTWAIT);
	numbered_check(buf, n, CONG_MSG, 0x5c, sent);
	EXPECT_EQ(-EAGAIN, ERR(recv(rx, buf, sizeof(buf), MSG_DONTWAIT)));
	TH_LOG("%s: congested after %d messages of %d bytes", variant->kind, sent, CONG_MSG);
	close(tx);
	close(rx);
}

/*
 * A sender that honours congestion loses nothing, however fast it sends:
 * rrds-a sends 1 KiB messages as fast as it can, with the default send
 * buffer, to a socket in rrds-b that reads nothing until the sender gets
 * ENOBUFS. The map must reach the sender before what it had already sent
 * fills rrds-b's queue to its limit (4 MiB): every message then arrives,
 * once, in order, and rrds-b drops none (recv_drop_queue_full).
 */
TEST_F(ib, unpaced_sender_is_stopped_before_the_receiver_drops)
{
	long long dropped0 = rds_counter("recv_drop_queue_full");
	struct sockaddr_in to = sin4(variant->remote, CONG_RX_PORT);
	unsigned char buf[CONG_MSG + 1];
	int rx, tx, sent = 0;
	double start, limit;
	ssize_t n;

	ASSERT_LE(0, dropped0);
	cong_sockets(_metadata, variant, &rx, &tx);

	start = now();
	limit = start + 60;
	for (;;) {
		numbered_fill(buf, CONG_MSG, 0x3a, sent);
		n = sendto(tx, buf, CONG_MSG, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to));
		if (n == CONG_MSG) {
			sent++;
			continue;
		}
		ASSERT_TRUE(errno == EAGAIN || errno == ENOBUFS) TH_LOG("%s", strerror(errno));
		if (errno == ENOBUFS)
			break;
		ASSERT_GT(limit, now()) TH_LOG("no ENOBUFS in 60 s (%d sent)", sent);
		poll(NULL, 0, 1);
	}
	TH_LOG("%s: ENOBUFS after %d messages of %d bytes, %.2f s", variant->kind, sent, CONG_MSG,
	       now() - start);
	read_numbered(_metadata, rx, sent, 0x3a);
	EXPECT_EQ(dropped0, rds_counter("recv_drop_queue_full"));
	close(tx);
	close(rx);
}

/*
 * One process per namespace, each with a socket bound to its end of the pair
 * at PAIR_PORT: rrds-a sends one message, rrds-b answers it, then both hold
 * their sockets until the parent lets them go.
 */
struct pair {
	const FIXTURE_VARIANT(ib) *v;
	bool check_info;	/* each side checks RDS_INFO_CONNECTIONS */
	int extra;		/* messages rrds-a sends after the exchange */
	struct kid k[2];	/* [0] in rrds-a, [1] in rrds-b */
	int bound[2];		/* held by both: open once both are bound */
	int exchanged[2];	/* held by both: open once both messages arrived */
	int release[2][2];	/* held by the parent: each side may close and exit */
};

static void expect_byte(int fd, char want, const char *peer)
{
	char buf[16];
	ssize_t n = recv_from(fd, buf, sizeof(buf), "the other side's message", peer, PAIR_PORT);

	if (n != 1 || buf[0] != want)
		die("got %zd bytes ('%c'), want '%c'", n, n > 0 ? buf[0] : '?', want);
}

static void __attribute__((noreturn)) run_pair_side(struct pair *p, int side)
{
	const char *mine = side ? p->v->remote : p->v->local;
	const char *peer = side ? p->v->local : p->v->remote;
	struct sockaddr_in to = sin4(peer, PAIR_PORT);
	int fd;

	gate_pass(p->release[!side]);
	fd = child_socket(mine, PAIR_PORT);
	gate_wait(p->bound, "the other side to bind");
	/* rrds-a connects; rrds-b answers on the connection it accepted. */
	if (side == 0) {
		send_msg(fd, "a", 1, &to);
		expect_byte(fd, 'b', peer);
		for (int i = 0; i < p->extra; i++)
			send_msg(fd, "c", 1, &to);
	} else {
		expect_byte(fd, 'a', peer);
		send_msg(fd, "b", 1, &to);
		for (int i = 0; i < p->extra; i++)
			expect_byte(fd, 'c', peer);
	}
	if (p->check_info) {
		check_ib_connection(fd, mine, peer);
		check_ib_info(fd, mine, peer, !strcmp(p->v->kind, "rxe"));
	}
	gate_pass(p->exchanged);
	gate_wait_release(p->release[side]);
	close(fd);
	_exit(0);
}

/* Starts both sides and waits until each has the other's message. */
static void pair_start(struct __test_metadata *_metadata, struct pair *p)
{
	bool ok;
	int side;

	gate_open(_metadata, p->bound);
	gate_open(_metadata, p->exchanged);
	gate_open(_metadata, p->release[0]);
	gate_open(_metadata, p->release[1]);
	deadline = now() + PAIR_DEADLINE_S;
	for (side = 0; side < 2; side++) {
		if (!spawn_in(&p->k[side], side ? NS_B : NS_A, side ? "rrds-b side" : "rrds-a side"))
			run_pair_side(p, side);
		ASSERT_LT(0, p->k[side].pid);
	}
	gate_pass(p->bound);
	ok = gate_wait_until(p->exchanged, deadline) && !exited(&p->k[0]) && !exited(&p->k[1]);
	if (!ok) {
		TH_LOG("the two sides did not exchange their messages");
		reap(_metadata, p->k, 2, 0);
	}
	ASSERT_TRUE(ok);
}

/* Lets @side close its socket and exit; returns 0 if it succeeded. */
static int pair_release(struct __test_metadata *_metadata, struct pair *p, int side)
{
	gate_pass(p->release[side]);
	return reap(_metadata, &p->k[side], 1, now() + REAP_GRACE_S);
}

/*
 * The line of the IB link from @from to @to in debugfs rrds/ib_links, read
 * into @buf and cut at its end; NULL if there is no such link.
 */
static char *link_line(char *buf, size_t size, const char *from, const char *to)
{
	char head[96], *line, *end;

	if (read_file(RRDS_DEBUGFS "/ib_links", buf, size) < 0)
		return NULL;
	snprintf(head, sizeof(head), "%s -> %s ", from, to);
	line = strstr(buf, head);
	if (!line)
		return NULL;
	end = strchr(line, '\n');
	if (end)
		*end = '\0';
	return line;
}

/*
 * The sends of the IB link from @from to @to (debugfs rrds/ib_links):
 * completed, posted, and signalled ones not yet completed; false if there
 * is no such link.
 */
static bool link_sends(const char *from, const char *to, long long *done, long long *posted,
		       long long *signalled)
{
	char buf[65536], *line = link_line(buf, sizeof(buf), from, to);
	char *send = line ? strstr(line, " send ") : NULL;
	char *sig = line ? strstr(line, " signalled ") : NULL;

	return send && sig && sscanf(send, " send %lld/%lld", done, posted) == 2 &&
	       sscanf(sig, " signalled %lld", signalled) == 1;
}

/*
 * Frames sent while the send ring is nearly idle go unsignalled (design.rst,
 * "Unsignalled sends"): a link that falls idle with some at the end of its
 * ring gets no completion that frees their slots, so the watchdog posts an
 * explicit ack, whose completion does. After the pair's exchange (whose
 * explicit acks cover what was sent before them) rrds-a sends one more
 * message, which asks for no ack and gets no reply; within seconds its link
 * shows every send completed and no signalled one pending.
 */
TEST_F(ib, idle_link_settles_unsignalled_sends)
{
	struct pair p = { .v = variant, .extra = 1 };
	long long done = -1, posted = -1, signalled = -1;
	bool settled;

	pair_start(_metadata, &p);
	ASSERT_TRUE(link_sends(variant->local, variant->remote, &done, &posted, &signalled));
	TH_LOG("after the messages: send %lld/%lld, signalled %lld", done, posted, signalled);
	settled = WAIT_FOR(SETTLE_S, link_sends(variant->local, variant->remote, &done, &posted,
						&signalled) &&
				     done == posted && !signalled);
	TH_LOG("then: send %lld/%lld, signalled %lld", done, posted, signalled);
	EXPECT_TRUE(settled);
	EXPECT_LE(1 + p.extra, posted);
	EXPECT_EQ(0, pair_release(_metadata, &p, 0));
	EXPECT_EQ(0, pair_release(_metadata, &p, 1));
}

/*
 * The receives of the IB link from @from to @to (debugfs rrds/ib_links):
 * completed, posted, and the ring's size; false if there is no such link.
 */
static bool link_receives(const char *from, const char *to, long long *done, long long *posted,
			  long long *ring)
{
	char buf[65536], *line = link_line(buf, sizeof(buf), from, to);
	char *recv = line ? strstr(line, " recv ") : NULL;
	char *size = line ? strstr(line, " ring ") : NULL;

	return recv && size && sscanf(recv, " recv %lld/%lld", done, posted) == 2 &&
	       sscanf(size, " ring %lld", ring) == 1;
}

#define RING_HOLD_PORT	6700	/* a socket each side keeps the links up with */
#define RING_START	32	/* module parameter ib_recv_ring_start's default */
#define RING_MAX	256	/* RECV_SLOTS */
#define RING_MESSAGES	1500
#define RING_STREAM	10

/* One frame each (FRAME_BYTES), too large to pack. */
static size_t ring_size(int i)
{
	return 6000 + (size_t)(i * 131) % 2000;
}

/*
 * A socket bound to @ip:@port in namespace @ns, made by the calling thread,
 * which goes back to its own namespace; -1 on failure.
 */
static int bound_socket_in(const char *ns, const char *ip, int port)
{
	int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), fd = -1;

	if (own < 0)
		return -1;
	if (!enter_ns(ns))
		fd = bound_socket(ip, port);
	if (setns(own, CLONE_NEWNET) && fd >= 0) {
		close(fd);
		fd = -1;
	}
	close(own);
	return fd;
}

/*
 * A link posts ib_recv_ring_start receive buffers at set-up and grants
 * its rrds peer as many credits (design.rst, "Rings and credits"): both ends of
 * a pair that exchanged two messages hold 32. A peer that fills the ring
 * within a second doubles it, up to 256: a stream of 1,500 one-frame
 * messages grows the receiving end's ring by as many doublings as its
 * rate allows (from 32 to 256 once a second brings 128 frames, counted by
 * ib_rx_ring_grown), every buffer of the grown ring posted, and arrives
 * intact.
 */
TEST_F(ib, receive_ring_starts_small_and_grows_with_traffic)
{
	struct pair p = { .v = variant };
	long long done, posted, ring, grown = rds_counter("ib_rx_ring_grown");
	static const struct numbered_stream ns = {
		.count = RING_MESSAGES, .size = ring_size, .max = FRAME_BYTES,
		.stream = RING_STREAM,
	};
	/* The links outlive the stream's sockets, to be read after it. */
	int hold_a = bound_socket_in(NS_A, variant->local, RING_HOLD_PORT);
	int hold_b = bound_socket_in(NS_B, variant->remote, RING_HOLD_PORT);

	ASSERT_LE(0, hold_a);
	ASSERT_LE(0, hold_b);
	ASSERT_LE(0, grown);
	pair_start(_metadata, &p);
	ASSERT_TRUE(link_receives(variant->local, variant->remote, &done, &posted, &ring));
	TH_LOG("after the exchange, a: recv %lld/%lld ring %lld", done, posted, ring);
	EXPECT_EQ(RING_START, ring);
	EXPECT_EQ(RING_START, posted - done);
	ASSERT_TRUE(link_receives(variant->remote, variant->local, &done, &posted, &ring));
	TH_LOG("after the exchange, b: recv %lld/%lld ring %lld", done, posted, ring);
	EXPECT_EQ(RING_START, ring);
	EXPECT_EQ(RING_START, posted - done);
	EXPECT_EQ(0, pair_release(_metadata, &p, 0));
	EXPECT_EQ(0, pair_release(_metadata, &p, 1));
	EXPECT_EQ(grown, rds_counter("ib_rx_ring_grown"));

	EXPECT_EQ(0, send_stream(_metadata, variant, &ns));
	grown = rds_counter("ib_rx_ring_grown") - grown;
	ASSERT_TRUE(link_receives(variant->remote, variant->local, &done, &posted, &ring));
	TH_LOG("%d messages: receive rings doubled %lld times; b: recv %lld/%lld ring %lld",
	       RING_MESSAGES, grown, done, posted, ring);
	/*
	 * How far the receiving end's ring grows depends on the rate: the
	 * 2-vCPU pass has always reached 256 (three doublings), while on four
	 * under TCG a second sometimes brings fewer than 128 frames and the
	 * ring stops at 128. Grown it must be, by whole doublings, with every
	 * buffer posted.
	 */
	EXPECT_LE(RING_START * 2, ring);
	EXPECT_GE(RING_MAX, ring);
	EXPECT_EQ(0, ring & (ring - 1));
	EXPECT_EQ(ring, posted - done);
	EXPECT_LE(1, grown);
	close(hold_a);
	close(hold_b);
}

#define BUSY_PORT		6150
#define BUSY_ROUNDS_MIN		20
#define BUSY_ROUNDS_MAX		400
#define BUSY_USEC		100000

/*
 * Sends numbered 64 B messages from @a to @b one at a time, each read by a
 * blocking recvmsg on @b straight after the send (with @by_poll, a poll()
 * then a non-blocking one), for at least
 * BUSY_ROUNDS_MIN rounds and, with @until_polled, until a busy poll has
 * taken a completion itself (recv_busy_polled grew), at most
 * BUSY_ROUNDS_MAX. Every message arrives whole and in order. Returns the
 * rounds.
 */
static int busy_rounds(struct __test_metadata *_metadata, const FIXTURE_VARIANT(ib) *v, int a,
		       int b, bool until_polled, bool by_poll)
{
	struct sockaddr_in to = sin4(v->remote, BUSY_PORT);
	long long polled = rds_counter("recv_busy_polled");
	unsigned char out[64], in[128];
	int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), i;

	/* The sender's task in its namespace: an iWARP connect runs in it. */
	if (own < 0 || enter_ns(NS_A)) {
		TH_LOG("cannot enter %s", NS_A);
		return -1;
	}
	for (i = 0; i < BUSY_ROUNDS_MAX; i++) {
		struct sockaddr_in from;
		socklen_t fromlen = sizeof(from);
		ssize_t n;

		if (i >= BUSY_ROUNDS_MIN &&
		    (!until_polled || rds_counter("recv_busy_polled") > polled))
			break;
		numbered_fill(out, sizeof(out), BUSY_PORT, i);
		send_msg(a, out, sizeof(out), &to);
		if (by_poll) {
			struct pollfd pfd = { .fd = b, .events = POLLIN };

			EXPECT_EQ(1, poll(&pfd, 1, 10000));
		}
		n = recvfrom(b, in, sizeof(in), by_poll ? MSG_DONTWAIT : 0,
			     (struct sockaddr *)&from, &fromlen);
		if (n < 0)
			TH_LOG("round %d: recvfrom: %s", i, strerror(errno));
		EXPECT_EQ((ssize_t)sizeof(out), n);
		if (n != (ssize_t)sizeof(out))
			break;
		EXPECT_EQ(0, memcmp(in, out, sizeof(out)));
	}
	if (setns(own, CLONE_NEWNET))
		i = -1;
	close(own);
	return i;
}

/* Reads net.core.@name into @buf, without its newline. */
static bool read_sysctl(const char *name, char *buf, int size)
{
	char path[64];
	FILE *f;
	bool read;

	snprintf(path, sizeof(path), "/proc/sys/net/core/%s", name);
	f = fopen(path, "r");
	if (!f)
		return false;
	read = fgets(buf, size, f) != NULL;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return read;
}

/* An RDS socket bound to @ip:BUSY_PORT in @ns, reads bounded by 10 s. */
static int busy_socket(const char *ns, const char *ip)
{
	struct timeval tv = { .tv_sec = 10 };
	int fd = bound_socket_in(ns, ip, BUSY_PORT);

	if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * SO_BUSY_POLL (and net.core.busy_read, its default for new sockets): a
 * blocking recvmsg with nothing to read polls the receive CQ of the link
 * its socket's last message came over before it sleeps, and takes the
 * completions it finds itself (recv_busy_polls counts the busy polls,
 * recv_busy_polled the completions they took), never past SO_RCVTIMEO;
 * with net.core.busy_poll, poll() on such a socket does too. Without it a recvmsg never
 * polls. Messages arrive whole and in order either way. On one vCPU the
 * device's own work needs the CPU the poller spins on (rxe completes from
 * a work item): the poller yields to it, so only two or more vCPUs can
 * show a completion taken by the poll.
 */
TEST_F(ib, busy_poll_takes_receive_completions_in_recvmsg)
{
	int a = busy_socket(NS_A, variant->local), b = busy_socket(NS_B, variant->remote);
	long long polls = rds_counter("recv_busy_polls"), polled, after;
	bool smp = sysconf(_SC_NPROCESSORS_ONLN) > 1;
	int usec = BUSY_USEC, got = 0, rounds;
	socklen_t len = sizeof(got);
	char old_busy_read[32] = "0", old_busy_poll[32] = "0";
	struct timeval quick = { .tv_usec = 300000 };
	double start;

	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	ASSERT_LE(0, polls);

	/* Off: nobody polls. */
	rounds = busy_rounds(_metadata, variant, a, b, false, false);
	EXPECT_EQ(BUSY_ROUNDS_MIN, rounds);
	EXPECT_EQ(polls, rds_counter("recv_busy_polls"));

	/* SO_BUSY_POLL on the receiving socket. */
	ASSERT_EQ(0, setsockopt(b, SOL_SOCKET, SO_BUSY_POLL, &usec, sizeof(usec)));
	ASSERT_EQ(0, getsockopt(b, SOL_SOCKET, SO_BUSY_POLL, &got, &len));
	EXPECT_EQ(BUSY_USEC, got);
	polled = rds_counter("recv_busy_polled");
	rounds = busy_rounds(_metadata, variant, a, b, smp, false);
	after = rds_counter("recv_busy_polls");
	TH_LOG("SO_BUSY_POLL: %d rounds, %lld recvmsg busy-polled, %lld completions taken",
	       rounds, after - polls, rds_counter("recv_busy_polled") - polled);
	EXPECT_LE(BUSY_ROUNDS_MIN, rounds);
	EXPECT_LT(polls, after);
	if (smp)
		EXPECT_LT(polled, rds_counter("recv_busy_polled"));

	/* A spin never outlasts SO_RCVTIMEO, however long SO_BUSY_POLL is. */
	usec = 5 * 1000 * 1000;
	ASSERT_EQ(0, setsockopt(b, SOL_SOCKET, SO_BUSY_POLL, &usec, sizeof(usec)));
	ASSERT_EQ(0, setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &quick, sizeof(quick)));
	start = now();
	EXPECT_EQ(-1, recv(b, &got, sizeof(got), 0));
	EXPECT_EQ(ETIMEDOUT, errno);
	TH_LOG("SO_BUSY_POLL 5 s, SO_RCVTIMEO 300 ms: recv gave up after %.2f s", now() - start);
	EXPECT_GT(2.0, now() - start);
	close(b);

	/* net.core.busy_read: the default of sockets made after it is set. */
	ASSERT_TRUE(read_sysctl("busy_read", old_busy_read, sizeof(old_busy_read)));
	ASSERT_EQ(0, sh("echo 100000 > /proc/sys/net/core/busy_read"));
	b = busy_socket(NS_B, variant->remote);
	EXPECT_EQ(0, sh("echo %s > /proc/sys/net/core/busy_read", old_busy_read));
	ASSERT_LE(0, b);
	polls = rds_counter("recv_busy_polls");
	rounds = busy_rounds(_metadata, variant, a, b, false, false);
	TH_LOG("net.core.busy_read: %d rounds, %lld recvmsg busy-polled", rounds,
	       rds_counter("recv_busy_polls") - polls);
	EXPECT_EQ(BUSY_ROUNDS_MIN, rounds);
	EXPECT_LT(polls, rds_counter("recv_busy_polls"));

	/* net.core.busy_poll: poll() spins on a socket with SO_BUSY_POLL. */
	ASSERT_TRUE(read_sysctl("busy_poll", old_busy_poll, sizeof(old_busy_poll)));
	ASSERT_EQ(0, sh("echo 100000 > /proc/sys/net/core/busy_poll"));
	polls = rds_counter("recv_busy_polls");
	polled = rds_counter("recv_busy_polled");
	rounds = busy_rounds(_metadata, variant, a, b, smp, true);
	EXPECT_EQ(0, sh("echo %s > /proc/sys/net/core/busy_poll", old_busy_poll));
	TH_LOG("net.core.busy_poll: %d rounds, %lld poll() busy polls, %lld completions taken",
	       rounds, rds_counter("recv_busy_polls") - polls,
	       rds_counter("recv_busy_polled") - polled);
	EXPECT_LE(BUSY_ROUNDS_MIN, rounds);
	EXPECT_LT(polls, rds_counter("recv_busy_polls"));
	if (smp)
		EXPECT_LT(polled, rds_counter("recv_busy_polled"));
	close(a);
	close(b);
}

TEST_F(ib, info_shows_infiniband_connections_in_both_namespaces)
{
	struct pair p = { .v = variant, .check_info = true };

	/* Each side checks its own namespace's view before passing. */
	pair_start(_metadata, &p);
	EXPECT_EQ(0, pair_release(_metadata, &p, 0));
	EXPECT_EQ(0, pair_release(_metadata, &p, 1));
}

#define TOS_PORT	6200
#define TOS_VALUE	5
#define TOS_DOWN_VALUE	7
#define TOS_MSGS	20
#define TOS_SIZE	100

/*
 * Bit n set for each connection @laddr -> @faddr with TOS n (< 64) in
 * RDS_INFO_CONNECTIONS, and in *@ib for each in RDS_INFO_IB_CONNECTIONS.
 */
static long long tos_bits(int fd, const char *laddr, const char *faddr, long long *ib,
			  long long *connected)
{
	struct sockaddr_in l = sin4(laddr, 0), f = sin4(faddr, 0);
	struct rds_info_rdma_connection *r;
	struct rds_info_connection *c;
	long long bits = 0;
	socklen_t len;
	void *buf;

	if (info(fd, RDS_INFO_CONNECTIONS, &buf, &len) != sizeof(*c))
		die("RDS_INFO_CONNECTIONS failed");
	c = buf;
	*connected = 0;
	for (size_t i = 0; i < len / sizeof(*c); i++) {
		if (c[i].laddr != l.sin_addr.s_addr || c[i].faddr != f.sin_addr.s_addr ||
		    c[i].tos >= 64)
			continue;
		bits |= 1LL << c[i].tos;
		if (c[i].flags & RDS_INFO_CONNECTION_FLAG_CONNECTED)
			*connected |= 1LL << c[i].tos;
	}
	free(buf);
	*ib = 0;
	if (info(fd, RDS_INFO_IB_CONNECTIONS, &buf, &len) != sizeof(*r))
		die("RDS_INFO_IB_CONNECTIONS failed");
	r = buf;
	for (size_t i = 0; i < len / sizeof(*r); i++)
		if (r[i].src_addr == l.sin_addr.s_addr && r[i].dst_addr == f.sin_addr.s_addr &&
		    r[i].tos < 64)
			*ib |= 1LL << r[i].tos;
	free(buf);
	return bits;
}

/*
 * A connection that never comes up (its peer address answers nobody) is
 * listed with its TOS in both RDS_INFO tables, as upstream lists an IB
 * connection's addresses and TOS before it is up. Run in rrds-a.
 */
static void check_tos_while_down(const char *mine)
{
	char nobody[INET_ADDRSTRLEN];
	struct sockaddr_in to = sin4(mine, TOS_PORT);
	rds_tos_t tos = TOS_DOWN_VALUE;
	long long bits, ib, connected;
	int fd;

	/* The pair's subnet, a host that does not exist (x.x.x.99). */
	to.sin_addr.s_addr = (to.sin_addr.s_addr & htonl(0xffffff00)) | htonl(99);
	inet_ntop(AF_INET, &to.sin_addr, nobody, sizeof(nobody));
	fd = child_socket(mine, TOS_PORT + 1);
	if (ioctl(fd, SIOCRDSSETTOS, &tos))
		die("SIOCRDSSETTOS: %s", strerror(errno));
	send_msg(fd, "x", 1, &to);
	bits = tos_bits(fd, mine, nobody, &ib, &connected);
	if (bits != 1LL << TOS_DOWN_VALUE || ib != 1LL << TOS_DOWN_VALUE)
		die("connection %s -> %s (never up) by TOS: %#llx, IB %#llx, want %#llx", mine,
		    nobody, bits, ib, 1LL << TOS_DOWN_VALUE);
	if (connected)
		die("connection %s -> %s (never up) flagged CONNECTED", mine, nobody);
	close(fd);
}

/*
 * rrds-a (side 0) sends TOS_MSGS with TOS_VALUE, rrds-b answers from its
 * TOS 0 socket; then each side finds a connection with each TOS to the
 * other in both RDS_INFO tables.
 */
static void __attribute__((noreturn)) run_tos_side(const FIXTURE_VARIANT(ib) *v, int side,
						   int bound[2], int exchanged[2], int checked[2])
{
	const char *mine = side ? v->remote : v->local;
	const char *peer = side ? v->local : v->remote;
	struct sockaddr_in to = sin4(peer, TOS_PORT);
	unsigned char buf[TOS_SIZE + 1];
	const long long want = 1 | 1LL << TOS_VALUE;
	long long bits, ib, connected;
	rds_tos_t tos = TOS_VALUE;
	char what[40];
	int fd, i;

	fd = child_socket(mine, TOS_PORT);
	if (side == 0 && ioctl(fd, SIOCRDSSETTOS, &tos))
		die("SIOCRDSSETTOS: %s", strerror(errno));
	gate_wait(bound, "the other side to bind");
	if (side == 0) {
		for (i = 0; i < TOS_MSGS; i++) {
			numbered_fill(buf, TOS_SIZE, TOS_VALUE, i);
			send_msg(fd, buf, TOS_SIZE, &to);
		}
		if (recv_from(fd, buf, sizeof(buf), "the answer", peer, TOS_PORT) != 1 ||
		    buf[0] != 'r')
			die("the answer is not 'r'");
		/* Set once: a second SIOCRDSSETTOS is refused, as upstream. */
		tos = 1;
		if (ioctl(fd, SIOCRDSSETTOS, &tos) == 0 || errno != EINVAL)
			die("a second SIOCRDSSETTOS: %s, want EINVAL", strerror(errno));
	} else {
		for (i = 0; i < TOS_MSGS; i++) {
			ssize_t n;

			snprintf(what, sizeof(what), "message %d of %d", i, TOS_MSGS);
			n = recv_from(fd, buf, sizeof(buf), what, peer, TOS_PORT);
			numbered_check(buf, n, TOS_SIZE, TOS_VALUE, i);
		}
		send_msg(fd, "r", 1, &to);
	}
	gate_wait(exchanged, "the exchange");
	/* Both connections are up: the TOS 0 one carried the answer. */
	bits = tos_bits(fd, mine, peer, &ib, &connected);
	if (bits != want || ib != want || connected != want)
		die("connections %s -> %s by TOS: %#llx, IB %#llx, CONNECTED %#llx, want %#llx",
		    mine, peer, bits, ib, connected, want);
	if (side == 0)
		check_tos_while_down(mine);
	gate_wait(checked, "the other side's checks");
	close(fd);
	_exit(0);
}

/*
 * A TOS (SIOCRDSSETTOS) gets its own connection, which both ends key by
 * it: the TOS travels in the connect private data.
 */
TEST_F(ib, tos_gets_its_own_connection)
{
	int bound[2], exchanged[2], checked[2];
	struct kid k[2] = { 0 };
	int side;

	gate_open(_metadata, bound);
	gate_open(_metadata, exchanged);
	gate_open(_metadata, checked);
	deadline = now() + PAIR_DEADLINE_S;
	for (side = 0; side < 2; side++) {
		if (!spawn_in(&k[side], side ? NS_B : NS_A, side ? "rrds-b side" : "rrds-a side"))
			run_tos_side(variant, side, bound, exchanged, checked);
		ASSERT_LT(0, k[side].pid);
	}
	gate_pass(bound);
	gate_pass(exchanged);
	gate_pass(checked);
	EXPECT_EQ(0, reap(_metadata, k, 2, deadline + REAP_GRACE_S));
}

#define STOPPED_PORT	6400	/* receiver; + 1, + 2: the two senders */
#define STOPPED_TOS	11	/* a connection of its own, down as the test starts */

/*
 * rrds-b: receives "one" (from the stopped sender) and "two" (from the
 * other), in any order.
 */
static void __attribute__((noreturn)) run_stopped_receiver(const FIXTURE_VARIANT(ib) *v,
							   int bound[2])
{
	int fd = child_socket(v->remote, STOPPED_PORT), got = 0;
	char buf[8];

	gate_pass(bound);
	for (int i = 0; i < 2; i++) {
		ssize_t n;

		n = recv_from(fd, buf, sizeof(buf), "a message of a sender", v->local,
			      STOPPED_PORT + 1 + i);
		if (n != 3)
			die("%zd bytes, want 3", n);
		got |= !memcmp(buf, "one", 3) ? 1 : !memcmp(buf, "two", 3) ? 2 : 4;
	}
	if (got != 3)
		die("got %#x, want both messages", got);
	_exit(0);
}

/*
 * Whether debugfs ib_links shows the connection @laddr -> @faddr with
 * STOPPED_TOS waiting for a task to run its connect.
 */
static bool link_waits_for_task(const char *laddr, const char *faddr)
{
	char buf[65536], want[96], *line;

	if (read_file(RRDS_DEBUGFS "/ib_links", buf, sizeof(buf)) < 0)
		return false;
	snprintf(want, sizeof(want), "%s -> %s tos %d ", laddr, faddr, STOPPED_TOS);
	line = strstr(buf, want);
	if (!line)
		return false;
	line = strstr(line, " task_connect ");
	return line && line[strlen(" task_connect ")] != '-';
}

/* A socket of rrds-a with STOPPED_TOS that sends @text from port @port. */
static int stopped_sender(const FIXTURE_VARIANT(ib) *v, int port, const char *text)
{
	struct sockaddr_in to = sin4(v->remote, STOPPED_PORT);
	rds_tos_t tos = STOPPED_TOS;
	int fd = child_socket(v->local, port);

	if (ioctl(fd, SIOCRDSSETTOS, &tos))
		die("SIOCRDSSETTOS: %s", strerror(errno));
	send_msg(fd, text, 3, &to);
	return fd;
}

static const FIXTURE_VARIANT(ib) *blocked_variant;

/* The blocked sender's second thread: sends "one" once the leader is blocked. */
static void *send_one_later(void *unused)
{
	(void)unused;
	sleep(1);
	stopped_sender(blocked_variant, STOPPED_PORT + 1, "one");
	return NULL;
}

/*
 * iWARP connects run as task work of the last task that sent (siw opens its
 * TCP socket in the calling task's namespace). A sender blocked where task
 * work cannot run (stopped, or in an uninterruptible wait) before its task
 * ran the connect must not hold the connection down for everyone: after
 * 5 s the attempt fails, and the next one runs in the task that sent since.
 * Both messages arrive while the first sender is still blocked.
 */
/*
 * A path waiting to reconnect waits on a timer, not in a worker: messages to
 * 40 addresses of the pair's subnet where no host answers (address
 * resolution fails, the path backs off, tries again while its message
 * waits) keep at most a few rrds workers busy at any moment. Paths that
 * slept their backoff in their work item held one worker each, most of the
 * time.
 */
#define UNANSWERED 40

TEST_F(ib, paths_waiting_to_reconnect_hold_no_worker)
{
	const char *dot = strrchr(variant->local, '.');
	int fd, busy, busy_max = 0;
	long long attempts0, attempts;
	char ip[32];
	double start, elapsed;

	ASSERT_NE(NULL, dot);
	ASSERT_EQ(0, enter_ns(NS_A));
	fd = bound_socket(variant->local, 0);
	ASSERT_LE(0, fd);
	for (int i = 0; i < UNANSWERED; i++) {
		struct sockaddr_in to;

		snprintf(ip, sizeof(ip), "%.*s.%d", (int)(dot - variant->local), variant->local,
			 100 + i);
		to = sin4(ip, 4000);
		ASSERT_EQ(1, sendto(fd, "x", 1, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to)))
			TH_LOG("%s: %s", ip, strerror(errno));
	}
	sleep(3);
	attempts0 = rds_counter("ib_connect_attempts");
	start = now();
	for (int i = 0; i < 20; i++) {
		busy = rrds_busy_workers(false);
		ASSERT_LE(0, busy);
		busy_max = busy > busy_max ? busy : busy_max;
		usleep(200 * 1000);
	}
	attempts = rds_counter("ib_connect_attempts") - attempts0;
	elapsed = now() - start;
	TH_LOG("%d paths backing off: at most %d rrds workers busy, %lld connect attempts in %.1f s",
	       UNANSWERED, busy_max, attempts, elapsed);
	close(fd);
	EXPECT_GE(8, busy_max);
	/*
	 * And they do try again, each more than once while sampled, but no
	 * faster than the backoff lets them (a window of 1 s by now: about
	 * one attempt a second, never four).
	 */
	EXPECT_LE(2 * UNANSWERED, attempts);
	EXPECT_GE(4 * UNANSWERED * elapsed, attempts);
}

TEST_F(ib, blocked_connecting_task_does_not_hold_the_connection)
{
	long long overdue0 = rds_counter("ib_task_connects_overdue");
	struct kid k[2] = { 0 };
	int bound[2], status, fd;

	if (strcmp(variant->kind, "siw"))
		SKIP(return, "only iWARP connects run as task work");
	gate_open(_metadata, bound);
	deadline = now() + PAIR_DEADLINE_S;
	if (!spawn_in(&k[0], NS_B, "receiver"))
		run_stopped_receiver(variant, bound);
	ASSERT_LT(0, k[0].pid);
	gate_wait(bound, "the receiver to bind");
	if (!spawn_in(&k[1], NS_A, "blocked sender")) {
		pthread_t sender;

		/*
		 * The main thread, which connects run in (the group leader), is
		 * blocked where task work never runs before a second thread
		 * sends: a vfork parent waits uninterruptibly, as a stopped task
		 * does. (A task that stops or blocks after its own send may run
		 * the connect on the way: with warm caches it is queued before
		 * the send returns to user mode.) The vfork child waits until
		 * this process dies.
		 */
		blocked_variant = variant;
		if (pthread_create(&sender, NULL, send_one_later, NULL))
			_exit(1);
		if (vfork() == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			pause();
			_exit(0);
		}
		_exit(0);
	}
	ASSERT_LT(0, k[1].pid);
	/* The connect handed to the blocked task, before anyone else sends. */
	EXPECT_TRUE(WAIT_FOR(30, link_waits_for_task(variant->local, variant->remote)));
	ASSERT_EQ(0, enter_ns(NS_A));
	fd = stopped_sender(variant, STOPPED_PORT + 2, "two");
	/* Waiting here runs our task work: the retried connect. */
	EXPECT_EQ(0, reap(_metadata, k, 1, deadline + REAP_GRACE_S));
	TH_LOG("overdue task connects: %lld", rds_counter("ib_task_connects_overdue") - overdue0);
	EXPECT_LT(overdue0, rds_counter("ib_task_connects_overdue"));
	kill(k[1].pid, SIGKILL);
	waitpid(k[1].pid, &status, 0);
	close(fd);
}

#define V6_PORT		6300
#define V6_STREAM	6

static const size_t v6_sizes[] = { 0, 1, 100, 4095, 4096, 4097, 65536, MIB };

/* A socket bound to [@ip]:@port in the child's namespace. */
static int child_socket6(const char *ip, int port)
{
	struct sockaddr_in6 a = sin6(ip, port, 0);
	int fd = rds_socket();

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)))
		die("socket bound to [%s]:%d: %s", ip, port, strerror(errno));
	return fd;
}

/*
 * Dies unless RDS6_INFO_CONNECTIONS lists [@laddr] -> [@faddr] once, over
 * "infiniband", and RDS6_INFO_IB_CONNECTIONS once, over RoCE with the
 * addresses as GIDs.
 */
static void check_ib_connection6(int fd, const char *laddr, const char *faddr, bool roce)
{
	struct sockaddr_in6 l = sin6(laddr, 0, 0), f = sin6(faddr, 0, 0);
	struct rds6_info_rdma_connection *r;
	struct rds6_info_connection *c;
	int found = 0, ib = 0;
	socklen_t len;
	void *buf;

	if (info(fd, RDS6_INFO_CONNECTIONS, &buf, &len) != sizeof(*c))
		die("RDS6_INFO_CONNECTIONS failed");
	c = buf;
	for (size_t i = 0; i < len / sizeof(*c); i++) {
		if (memcmp(&c[i].laddr, &l.sin6_addr, 16) || memcmp(&c[i].faddr, &f.sin6_addr, 16))
			continue;
		found++;
		if (strcmp((char *)c[i].transport, "infiniband") ||
		    !(c[i].flags & RDS_INFO_CONNECTION_FLAG_CONNECTED))
			die("connection [%s] -> [%s]: transport %.16s, flags %#x", laddr, faddr,
			    c[i].transport, c[i].flags);
	}
	free(buf);
	if (info(fd, RDS6_INFO_IB_CONNECTIONS, &buf, &len) != sizeof(*r))
		die("RDS6_INFO_IB_CONNECTIONS failed");
	r = buf;
	for (size_t i = 0; i < len / sizeof(*r); i++) {
		if (memcmp(&r[i].src_addr, &l.sin6_addr, 16) ||
		    memcmp(&r[i].dst_addr, &f.sin6_addr, 16))
			continue;
		ib++;
		if (roce && (memcmp(r[i].src_gid, &l.sin6_addr, 16) ||
			     memcmp(r[i].dst_gid, &f.sin6_addr, 16)))
			die("IB connection [%s] -> [%s]: GIDs are not the addresses", laddr, faddr);
	}
	free(buf);
	if (found != 1 || ib != 1)
		die("[%s] -> [%s]: %d connections, %d IB connections listed", laddr, faddr, found,
		    ib);
}

/*
 * rrds-a (side 0) pings rrds-b over IPv6 and sends it messages of 0 B to
 * 1 MiB, which rrds-b echoes: all arrive in order and intact, and each
 * side lists the IPv6 connection.
 */
static void __attribute__((noreturn)) run_v6_side(const FIXTURE_VARIANT(ib) *v, int side,
						  int bound[2], int done[2])
{
	const char *mine = side ? v->remote6 : v->local6;
	const char *peer = side ? v->local6 : v->remote6;
	struct sockaddr_in6 to = sin6(peer, V6_PORT, 0);
	const size_t n = ARRAY_SIZE(v6_sizes);
	unsigned char *buf = malloc(MIB + 1);
	char what[48];
	int fd;

	if (!buf)
		die("out of memory");
	fd = child_socket6(mine, V6_PORT);
	set_buf(fd, SO_SNDBUFFORCE, SNDBUF);
	set_buf(fd, SO_RCVBUFFORCE, RCVBUF);
	gate_wait(bound, "the other side to bind");
	if (side == 0) {
		struct sockaddr_in6 ping = sin6(peer, 0, 0);

		send_msg6(fd, "", 0, &ping);
		if (recv_from(fd, buf, MIB + 1, "the pong", peer, 0) != 0)
			die("a pong with data");
		for (size_t i = 0; i < n; i++) {
			numbered_fill(buf, v6_sizes[i], V6_STREAM, i);
			send_msg6(fd, buf, v6_sizes[i], &to);
		}
	}
	for (size_t i = 0; i < n; i++) {
		ssize_t got;

		snprintf(what, sizeof(what), "message %zu of %zu", i, n);
		got = recv_from(fd, buf, MIB + 1, what, peer, V6_PORT);
		numbered_check(buf, got, v6_sizes[i], V6_STREAM, i);
		if (side == 1)
			send_msg6(fd, buf, got, &to);
	}
	check_ib_connection6(fd, mine, peer, !strcmp(v->kind, "rxe"));
	gate_wait(done, "the other side");
	close(fd);
	_exit(0);
}

/* The IB transport over IPv6 (rdma_cm port 16385, the 4.1 private data). */
TEST_F(ib, ipv6_messages_and_ping)
{
	int bound[2], done[2];
	struct kid k[2] = { 0 };
	int side;

	ASSERT_EQ(0, sh("ip -n %s addr replace %s/64 dev %s nodad && "
			"ip -n %s addr replace %s/64 dev %s nodad", NS_A, variant->local6,
			variant->veth, NS_B, variant->remote6, variant->peer_veth));
	gate_open(_metadata, bound);
	gate_open(_metadata, done);
	deadline = now() + 120;
	for (side = 0; side < 2; side++) {
		if (!spawn_in(&k[side], side ? NS_B : NS_A, side ? "rrds-b side" : "rrds-a side"))
			run_v6_side(variant, side, bound, done);
		ASSERT_LT(0, k[side].pid);
	}
	gate_pass(bound);
	gate_pass(done);
	EXPECT_EQ(0, reap(_metadata, k, 2, deadline + REAP_GRACE_S));
}

#define PROBE_BINDS	100

/*
 * A bind to an RDMA address, and RDS_GET_MR's search for the socket's
 * device, find the device from the address's interface: binding an rdma_cm
 * id to find it scans every device under rdma_cm's global mutex, which
 * device addition and a namespace's exit also need (the fuzzer's binds once
 * held up a namespace's exit). 100 binds over IPv4, one over IPv6 and an
 * RDS_GET_MR make no such probe (ib_address_probes); an address no
 * interface has is still EADDRNOTAVAIL, loopback still not an RDMA one.
 */
TEST_F(ib, binds_find_the_device_without_an_rdma_cm_probe)
{
	static char page[4096] __attribute__((aligned(4096)));
	long long probes0 = rds_counter("ib_address_probes");
	struct rds_get_mr_args mr = { .vec = { .addr = (uintptr_t)page, .bytes = sizeof(page) } };
	struct sockaddr_in6 a6 = sin6(variant->local6, 0, 0);
	struct sockaddr_in absent = sin4("10.254.99.254", 0), lo = sin4("127.0.0.1", 0);
	int fds[PROBE_BINDS], fd6, nobody, pinned, ib = RDS_TRANS_IB;
	uint64_t cookie = 0;
	double start;

	ASSERT_LE(0, probes0) TH_LOG("no ib_address_probes counter");
	ASSERT_EQ(0, sh("ip -n %s addr replace %s/64 dev %s nodad", NS_A, variant->local6,
			variant->veth));
	ASSERT_EQ(0, enter_ns(NS_A));
	start = now();
	for (int i = 0; i < PROBE_BINDS; i++) {
		fds[i] = bound_socket(variant->local, 0);
		ASSERT_LE(0, fds[i]) TH_LOG("bind %d to %s: %s", i, variant->local, strerror(errno));
	}
	TH_LOG("%d binds to %s in %.2f s", PROBE_BINDS, variant->local, now() - start);
	fd6 = rds_socket();
	ASSERT_LE(0, fd6);
	ASSERT_EQ(0, bind(fd6, (struct sockaddr *)&a6, sizeof(a6))) TH_LOG("%s", strerror(errno));
	mr.cookie_addr = (uintptr_t)&cookie;
	ASSERT_EQ(0, setsockopt(fds[0], SOL_RDS, RDS_GET_MR, &mr, sizeof(mr)))
		TH_LOG("RDS_GET_MR: %s", strerror(errno));
	EXPECT_NE(0ULL, (unsigned long long)cookie);
	EXPECT_EQ(probes0, rds_counter("ib_address_probes"));

	/*
	 * An address no interface has (upstream's EADDRNOTAVAIL), and loopback
	 * on a socket pinned to IB (upstream's ENOPROTOOPT).
	 */
	nobody = rds_socket();
	ASSERT_LE(0, nobody);
	EXPECT_EQ(-EADDRNOTAVAIL, ERR(bind(nobody, (struct sockaddr *)&absent, sizeof(absent))));
	pinned = rds_socket();
	ASSERT_LE(0, pinned);
	ASSERT_EQ(0, setsockopt(pinned, SOL_RDS, SO_RDS_TRANSPORT, &ib, sizeof(ib)));
	EXPECT_EQ(-ENOPROTOOPT, ERR(bind(pinned, (struct sockaddr *)&lo, sizeof(lo))));
	close(nobody);
	close(pinned);
	for (int i = 0; i < PROBE_BINDS; i++)
		close(fds[i]);
	close(fd6);
}

#define RACE_MSGS	101
#define RACE_SIZE	64

static void __attribute__((noreturn)) run_racer(const FIXTURE_VARIANT(ib) *v, int side,
						int bound[2], int received[2], int release[2])
{
	const char *mine = side ? v->remote : v->local;
	const char *peer = side ? v->local : v->remote;
	struct sockaddr_in to = sin4(peer, RACE_PORT);
	unsigned char buf[RACE_SIZE + 1];
	char what[40];
	int fd, i;

	gate_pass(release);
	fd = child_socket(mine, RACE_PORT);
	gate_wait(bound, "the other side to bind");
	/* Both first sends at once: each side starts a connect to the other. */
	for (i = 0; i < RACE_MSGS; i++) {
		numbered_fill(buf, RACE_SIZE, side, i);
		send_msg(fd, buf, RACE_SIZE, &to);
	}
	for (i = 0; i < RACE_MSGS; i++) {
		ssize_t n;

		snprintf(what, sizeof(what), "message %d of %d", i, RACE_MSGS);
		n = recv_from(fd, buf, sizeof(buf), what, peer, RACE_PORT);
		numbered_check(buf, n, RACE_SIZE, !side, i);
	}
	gate_pass(received);
	gate_wait_release(release);
	_exit(0);
}

TEST_F(ib, connect_race_converges)
{
	int bound[2], received[2], release[2], conns, maps, side, untracked;
	struct kid k[2] = { 0 };
	bool ok;

	gate_open(_metadata, bound);	/* held by both: both bound */
	gate_open(_metadata, received);	/* held by both: both got everything */
	gate_open(_metadata, release);	/* held by the parent: checks done */
	deadline = now() + PAIR_DEADLINE_S;
	for (side = 0; side < 2; side++) {
		if (!spawn_in(&k[side], side ? NS_B : NS_A, side ? "rrds-b racer" : "rrds-a racer"))
			run_racer(variant, side, bound, received, release);
		ASSERT_LT(0, k[side].pid);
	}
	gate_pass(bound);
	ok = gate_wait_until(received, deadline) && !exited(&k[0]) && !exited(&k[1]);
	if (!ok) {
		TH_LOG("the racers did not get each other's messages");
		reap(_metadata, k, 2, 0);
	}
	ASSERT_TRUE(ok);
	/* One connection per namespace, over one QP each: the losing attempt is gone. */
	ASSERT_EQ(0, objects(&conns, &maps));
	EXPECT_EQ(self->conns0 + 2, conns);
	if (!WAIT_FOR(SETTLE_S, live_rc_qps(variant->kind, &untracked) == 2)) {
		char links[4096];

		if (read_file(RRDS_DEBUGFS "/ib_links", links, sizeof(links)) >= 0)
			TH_LOG("ib_links:\n%s", links);
		sh("rdma resource show qp >&2");
	}
	EXPECT_EQ(2, live_rc_qps(variant->kind, &untracked));
	if (untracked)
		TH_LOG("%d of them not tracked by ib_core (a QP number reused at once)",
		       untracked);
	gate_pass(release);
	EXPECT_EQ(0, reap(_metadata, k, 2, now() + REAP_GRACE_S));
}

#define IDLE_RX_PORT	6400
#define IDLE_TX_PORT	6401
#define IDLE_SIZE	200
#define IDLE_STREAM	9
#define IDLE_ROUNDS	8

/* Whether rrds-a lists its connection @laddr -> @faddr (TOS 0) as CONNECTED; -1 if not listed. */
static int listed_connected(int fd, const char *laddr, const char *faddr)
{
	long long bits, ib, connected;

	bits = tos_bits(fd, laddr, faddr, &ib, &connected);
	return bits & 1 ? (int)(connected & 1) : -1;
}

/* Reloads rrds with @params once nothing holds it. */
static int reload_with(const char *params)
{
	if (!WAIT_FOR(UNLOAD_GRACE_S + 10, rrds_ensure_unloaded() == 0))
		return -EBUSY;
	return rrds_load_with(params);
}

/*
 * Idle links go and come back (module parameter idle_timeout_secs, here 2,
 * which each namespace's sysctl net.rrds.idle_timeout_secs starts from):
 * after an exchange the link carries nothing, so within a few seconds it is
 * taken down (ib_idle_reaped grows, the connection is no longer CONNECTED,
 * its RC QPs are gone), and the next message in either direction brings it
 * back with the sequence numbers kept: every message arrives exactly once,
 * in order. Then 8 sends that race the reap (one every 1.5 to 3.5 s, each way
 * in turn, so reaps race sends and incoming connects): still exactly once.
 * Last, the sysctl set to 0 in both namespaces keeps an idle link up.
 */
TEST_F_TIMEOUT(ib, idle_link_is_reaped_and_comes_back, 300)
{
	struct sockaddr_in to_b = sin4(variant->remote, IDLE_RX_PORT);
	struct sockaddr_in to_a = sin4(variant->local, IDLE_TX_PORT);
	unsigned char buf[IDLE_SIZE + 1];
	uint64_t seq_ab = 0, seq_ba = 0;
	long long reaped0;
	int a, b, untracked;
	ssize_t n;

	ASSERT_EQ(0, reload_with("idle_timeout_secs=2"));
	reaped0 = rds_counter("ib_idle_reaped");
	ASSERT_LE(0, reaped0);
	deadline = now() + 240;
	ASSERT_EQ(0, enter_ns(NS_B));
	b = bound_socket(variant->remote, IDLE_RX_PORT);
	ASSERT_LE(0, b);
	ASSERT_EQ(0, enter_ns(NS_A));
	a = bound_socket(variant->local, IDLE_TX_PORT);
	ASSERT_LE(0, a);

	for (int i = 0; i < 10; i++) {
		numbered_fill(buf, IDLE_SIZE, IDLE_STREAM, seq_ab);
		send_msg(a, buf, IDLE_SIZE, &to_b);
		n = recv_from(b, buf, sizeof(buf), "a message before the reap", variant->local,
			      IDLE_TX_PORT);
		numbered_check(buf, n, IDLE_SIZE, IDLE_STREAM, seq_ab++);
	}
	ASSERT_EQ(1, listed_connected(a, variant->local, variant->remote));
	/* Idle: the link goes, and with it its QPs. */
	ASSERT_TRUE(WAIT_FOR(20, rds_counter("ib_idle_reaped") > reaped0));
	EXPECT_TRUE(WAIT_FOR(10, listed_connected(a, variant->local, variant->remote) == 0));
	EXPECT_TRUE(WAIT_FOR(20, live_rc_qps(variant->kind, &untracked) == 0))
		TH_LOG("%d RC QPs left", live_rc_qps(variant->kind, &untracked));

	/* Back on the next send, each way, numbering on. */
	numbered_fill(buf, IDLE_SIZE, IDLE_STREAM, seq_ab);
	send_msg(a, buf, IDLE_SIZE, &to_b);
	n = recv_from(b, buf, sizeof(buf), "the first message after the reap", variant->local,
		      IDLE_TX_PORT);
	numbered_check(buf, n, IDLE_SIZE, IDLE_STREAM, seq_ab++);
	EXPECT_EQ(1, listed_connected(a, variant->local, variant->remote));

	/* Sends racing the reap, alternating sides. */
	for (int round = 0; round < IDLE_ROUNDS; round++) {
		bool from_a = round % 2 == 0;
		uint64_t *seq = from_a ? &seq_ab : &seq_ba;
		int stream = from_a ? IDLE_STREAM : IDLE_STREAM + 1;

		poll(NULL, 0, 1500 + (round * 397) % 2000);
		numbered_fill(buf, IDLE_SIZE, stream, *seq);
		/*
		 * From the sending socket's namespace: over iWARP the connect runs
		 * in the sending task, and siw opens its TCP socket in the task's
		 * namespace.
		 */
		ASSERT_EQ(0, enter_ns(from_a ? NS_A : NS_B));
		send_msg(from_a ? a : b, buf, IDLE_SIZE, from_a ? &to_b : &to_a);
		n = recv_from(from_a ? b : a, buf, sizeof(buf), "a message racing the reap",
			      from_a ? variant->local : variant->remote,
			      from_a ? IDLE_TX_PORT : IDLE_RX_PORT);
		numbered_check(buf, n, IDLE_SIZE, stream, (*seq)++);
	}
	ASSERT_EQ(0, enter_ns(NS_A));
	/* Nothing more: no message came twice. */
	poll(NULL, 0, 1000);
	EXPECT_EQ(-EAGAIN, ERR(recv(a, buf, sizeof(buf), MSG_DONTWAIT)));
	EXPECT_EQ(-EAGAIN, ERR(recv(b, buf, sizeof(buf), MSG_DONTWAIT)));
	TH_LOG("%s: %lld links reaped idle", variant->kind,
	       rds_counter("ib_idle_reaped") - reaped0);
	EXPECT_LT(reaped0 + 2, rds_counter("ib_idle_reaped"));

	/* Per namespace, net.rrds.idle_timeout_secs (from the parameter); 0: never. */
	for (int i = 0; i < 2; i++) {
		char cmd[160], got[32] = "";
		const char *ns = i ? NS_B : NS_A;

		snprintf(cmd, sizeof(cmd), "ip netns exec %s cat /proc/sys/net/rrds/idle_timeout_secs",
			 ns);
		ASSERT_EQ(0, sh_out(got, sizeof(got), "%s", cmd));
		EXPECT_EQ(2, atoi(got)) TH_LOG("%s: %s", ns, got);
		ASSERT_EQ(0, sh("ip netns exec %s sh -c 'echo 0 > /proc/sys/net/rrds/idle_timeout_secs'",
				ns));
	}
	numbered_fill(buf, IDLE_SIZE, IDLE_STREAM, seq_ab);
	send_msg(a, buf, IDLE_SIZE, &to_b);
	n = recv_from(b, buf, sizeof(buf), "a message with reaping off", variant->local,
		      IDLE_TX_PORT);
	numbered_check(buf, n, IDLE_SIZE, IDLE_STREAM, seq_ab++);
	reaped0 = rds_counter("ib_idle_reaped");
	poll(NULL, 0, 5000);
	EXPECT_EQ(reaped0, rds_counter("ib_idle_reaped"));
	EXPECT_EQ(1, listed_connected(a, variant->local, variant->remote));
	close(a);
	close(b);
	/* The next case loads rrds with its defaults. */
	EXPECT_EQ(0, reload_with(""));
}

#define EV_RX_PORT	6600
#define EV_ALL_PORT	6601
#define EV_USED_PORT	6602
#define EV_IDLE_PORT	6603
#define EV_QUIET_PORT	6604
#define EV_MAX		16

/* The connection events queued on @fd, read until none comes for @wait_ms; how many. */
static int conn_events(int fd, struct rrds_conn_event *out, int max, int wait_ms)
{
	int n = 0;

	for (;;) {
		union {
			struct cmsghdr align;
			char buf[CMSG_SPACE(sizeof(struct rrds_conn_event))];
		} control;
		char data[8];
		struct iovec iov = { .iov_base = data, .iov_len = sizeof(data) };
		struct msghdr m = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = &control, .msg_controllen = sizeof(control),
		};
		struct pollfd p = { .fd = fd, .events = POLLIN };
		struct cmsghdr *c;

		if (poll(&p, 1, wait_ms) != 1 || recvmsg(fd, &m, MSG_DONTWAIT) != 0)
			return n;
		c = CMSG_FIRSTHDR(&m);
		if (!c || c->cmsg_level != SOL_RDS || c->cmsg_type != RRDS_CMSG_CONN_EVENT ||
		    c->cmsg_len != CMSG_LEN(sizeof(*out)))
			return -1;
		if (n < max)
			memcpy(&out[n], CMSG_DATA(c), sizeof(*out));
		n++;
	}
}

/* Whether @e is about @laddr -> @faddr with TOS 0, @event and @reason. */
static bool conn_event_is(const struct rrds_conn_event *e, const char *laddr, const char *faddr,
			  unsigned int event, unsigned int reason)
{
	struct sockaddr_in l = sin4(laddr, 0), f = sin4(faddr, 0);
	unsigned char lm[16] = { [10] = 0xff, [11] = 0xff }, fm[16];

	memcpy(&lm[12], &l.sin_addr, 4);
	memcpy(fm, lm, 12);
	memcpy(&fm[12], &f.sin_addr, 4);
	return !memcmp(e->laddr, lm, 16) && !memcmp(e->faddr, fm, 16) && e->tos == 0 &&
	       e->event == event && e->reason == reason && !e->flags && !e->lost;
}

static int conn_monitor(int fd, int mode)
{
	return ERR(setsockopt(fd, SOL_RDS, RRDS_CONN_MONITOR, &mode, sizeof(mode)));
}

/*
 * RRDS_CONN_MONITOR: in rrds-a, a socket monitoring all of the namespace's
 * connections and one monitoring those it sends on each get exactly: UP
 * when its first message brings the link up; DOWN with reason IDLE when
 * the link is reaped idle (net.rrds.idle_timeout_secs 2); UP again with
 * the next message; DOWN or RESET with reason PEER_CLOSED or LINK_ERROR
 * when the peer's device is removed (rdma link del), and UP once it is
 * back and a message goes. A socket that monitors connections it sent on
 * but sent on none, and a socket that did not ask, get nothing.
 */
TEST_F_TIMEOUT(ib, connection_events_reach_the_sockets_that_ask, 300)
{
	const char *l = variant->local, *r = variant->remote;
	struct sockaddr_in to = sin4(r, EV_RX_PORT);
	struct rrds_conn_event ev[EV_MAX];
	int rx, all, used, idle, quiet, relisten, mode = 0, n;
	socklen_t len = sizeof(mode);
	char buf[8];

	ASSERT_EQ(0, reload_with("idle_timeout_secs=0"));
	deadline = now() + 240;
	ASSERT_EQ(0, enter_ns(NS_B));
	rx = bound_socket(r, EV_RX_PORT);
	ASSERT_LE(0, rx);
	ASSERT_EQ(0, enter_ns(NS_A));
	all = bound_socket(l, EV_ALL_PORT);
	used = bound_socket(l, EV_USED_PORT);
	idle = bound_socket(l, EV_IDLE_PORT);
	quiet = bound_socket(l, EV_QUIET_PORT);
	ASSERT_LE(0, all);
	ASSERT_LE(0, used);
	ASSERT_LE(0, idle);
	ASSERT_LE(0, quiet);
	EXPECT_EQ(-EINVAL, conn_monitor(all, 3));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(all, SOL_RDS, RRDS_CONN_MONITOR, &mode, 2)));
	ASSERT_EQ(0, conn_monitor(all, RRDS_CONN_MONITOR_ALL));
	ASSERT_EQ(0, conn_monitor(used, RRDS_CONN_MONITOR_USED));
	ASSERT_EQ(0, conn_monitor(idle, RRDS_CONN_MONITOR_USED));
	ASSERT_EQ(0, getsockopt(all, SOL_RDS, RRDS_CONN_MONITOR, &mode, &len));
	EXPECT_EQ(RRDS_CONN_MONITOR_ALL, mode);

	/* Up, with the first message of `used` (and one of `quiet`). */
	send_msg(used, "u", 1, &to);
	recv_from(rx, buf, sizeof(buf), "used's message", l, EV_USED_PORT);
	send_msg(quiet, "q", 1, &to);
	recv_from(rx, buf, sizeof(buf), "quiet's message", l, EV_QUIET_PORT);
	for (int s = 0; s < 2; s++) {
		n = conn_events(s ? used : all, ev, EV_MAX, 2000);
		ASSERT_EQ(1, n) TH_LOG("%s: %d events at link up", s ? "used" : "all", n);
		EXPECT_TRUE(conn_event_is(&ev[0], l, r, RRDS_CONN_EV_UP, 0))
			TH_LOG("event %u reason %u flags %#x", ev[0].event, ev[0].reason, ev[0].flags);
	}

	/* Reaped idle. */
	ASSERT_EQ(0, sh("ip netns exec %s sh -c 'echo 2 > /proc/sys/net/rrds/idle_timeout_secs'",
			NS_A));
	for (int s = 0; s < 2; s++) {
		n = conn_events(s ? used : all, ev, EV_MAX, 8000);
		ASSERT_EQ(1, n) TH_LOG("%s: %d events at the reap", s ? "used" : "all", n);
		EXPECT_TRUE(conn_event_is(&ev[0], l, r, RRDS_CONN_EV_DOWN, RRDS_CONN_REASON_IDLE))
			TH_LOG("event %u reason %u", ev[0].event, ev[0].reason);
	}
	ASSERT_EQ(0, sh("ip netns exec %s sh -c 'echo 0 > /proc/sys/net/rrds/idle_timeout_secs'",
			NS_A));
	send_msg(used, "v", 1, &to);
	recv_from(rx, buf, sizeof(buf), "used's message after the reap", l, EV_USED_PORT);
	for (int s = 0; s < 2; s++) {
		n = conn_events(s ? used : all, ev, EV_MAX, 2000);
		ASSERT_EQ(1, n);
		EXPECT_TRUE(conn_event_is(&ev[0], l, r, RRDS_CONN_EV_UP, 0));
	}

	/* The peer's device goes: down (a reset if a message waited), then up again. */
	ASSERT_EQ(0, sh("rdma link del %s_b", variant->kind));
	for (int s = 0; s < 2; s++) {
		n = conn_events(s ? used : all, ev, EV_MAX, 10000);
		ASSERT_EQ(1, n) TH_LOG("%s: %d events at the peer's removal", s ? "used" : "all", n);
		EXPECT_TRUE(ev[0].event == RRDS_CONN_EV_DOWN || ev[0].event == RRDS_CONN_EV_RESET);
		EXPECT_TRUE(ev[0].reason == RRDS_CONN_REASON_PEER_CLOSED ||
			    ev[0].reason == RRDS_CONN_REASON_LINK_ERROR)
			TH_LOG("reason %u", ev[0].reason);
	}
	ASSERT_EQ(0, pair_up_loaded(variant->kind));
	/*
	 * rrds-b listens again on its address from a task of rrds-b: siw opens
	 * its listening TCP socket in the calling task's namespace.
	 */
	ASSERT_EQ(0, enter_ns(NS_B));
	relisten = bound_socket(r, 0);
	ASSERT_EQ(0, enter_ns(NS_A));
	ASSERT_LE(0, relisten);
	send_msg(used, "w", 1, &to);
	recv_from(rx, buf, sizeof(buf), "used's message after the device is back", l,
		  EV_USED_PORT);
	for (int s = 0; s < 2; s++) {
		n = conn_events(s ? used : all, ev, EV_MAX, 2000);
		ASSERT_EQ(1, n);
		EXPECT_TRUE(conn_event_is(&ev[0], l, r, RRDS_CONN_EV_UP, 0));
	}

	/* Nothing for the sockets that did not ask or sent nothing. */
	EXPECT_EQ(0, conn_events(idle, ev, EV_MAX, 0));
	EXPECT_EQ(-EAGAIN, ERR(recv(quiet, buf, sizeof(buf), MSG_DONTWAIT)));
	/* Off: nothing more. */
	ASSERT_EQ(0, conn_monitor(all, RRDS_CONN_MONITOR_OFF));
	close(used);
	close(idle);
	close(quiet);
	close(all);
	close(relisten);
	close(rx);
	EXPECT_EQ(0, reload_with(""));
}

TEST_F(ib, connections_go_when_last_socket_closes)
{
	struct pair p = { .v = variant };
	int conns, maps;

	pair_start(_metadata, &p);
	ASSERT_EQ(0, objects(&conns, &maps));
	EXPECT_EQ(self->conns0 + 2, conns);
	EXPECT_LE(2, rc_qps(variant->kind));
	EXPECT_EQ(0, pair_release(_metadata, &p, 0));
	EXPECT_EQ(0, pair_release(_metadata, &p, 1));
	/* No rrds socket is left in either namespace. */
	WAIT_FOR(SETTLE_S, !objects(&conns, &maps) && !conns && maps == self->maps0 &&
		 !rc_qps(variant->kind));
	ASSERT_EQ(0, objects(&conns, &maps));
	EXPECT_EQ(0, conns);
	EXPECT_EQ(self->maps0, maps);
	EXPECT_EQ(0, rc_qps(variant->kind));
}

/* One thread of rebinding_while_the_last_socket_closes. */
struct rebinder {
	const char *addr;
	int first_port;
	int rounds;
	int failed;		/* binds that failed */
	int last_errno;
};

static void *rebind_rounds(void *arg)
{
	struct rebinder *r = arg;

	for (int i = 0; i < r->rounds; i++) {
		struct sockaddr_in a = sin4(r->addr, r->first_port + i);
		int fd = rds_socket();

		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a))) {
			r->failed++;
			r->last_errno = errno;
		}
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

/*
 * Two threads of one namespace each bind a socket to the same address (each
 * its own port) and close it, over and over, so that one often binds while
 * the other closes the address's last socket: every bind succeeds. Until
 * the closing socket's listener went under the listener table's lock, a
 * bind in that instant found no listener, and listening on the port the old
 * one still held failed with EADDRINUSE.
 */
TEST_F(ib, rebinding_while_the_last_socket_closes)
{
	struct rebinder r[2] = {
		{ .addr = variant->local, .first_port = 20000, .rounds = 400 },
		{ .addr = variant->local, .first_port = 30000, .rounds = 400 },
	};
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		pthread_t t[2];

		if (enter_ns(NS_A))
			_exit(2);
		for (int i = 0; i < 2; i++)
			if (pthread_create(&t[i], NULL, rebind_rounds, &r[i]))
				_exit(2);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < 2; i++)
			if (r[i].failed)
				fprintf(stderr, "# thread %d: %d of %d binds failed, the last with %s\n",
					i, r[i].failed, r[i].rounds, strerror(r[i].last_errno));
		_exit(r[0].failed || r[1].failed);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

/*
 * The 4x4 exchange: integrity_workload.h's replayed pseudo-random streams
 * (one per sender; every receiver replays them all to know what it is owed),
 * with the senders in rrds-a and the receivers in rrds-b.
 */
#define SENDERS		4
#define RECEIVERS	4
#define INTEGRITY_RCVBUF (256 << 10)	/* receivers congest: ENOBUFS, maps on the wire */

/* The exchange, as the parent sets it up and the children see it. */
struct exchange {
	const struct workload *w;
	const FIXTURE_VARIANT(ib) *v;
	long expect[MAX_SENDERS][MAX_RECEIVERS];	/* messages from each sender to each */
	int rx_ready[2];	/* held by the receivers: open once all are bound */
	int senders_done[2];	/* held by the senders: open once all have sent everything */
	int receivers_done[2];	/* held by the receivers: open once all have exited */
	struct child_stats *stats;	/* receivers, then senders */
};

static void __attribute__((noreturn)) run_sender(struct exchange *x, int id)
{
	const struct workload *w = x->w;
	struct child_stats *st = &x->stats[RECEIVERS + id];
	struct sockaddr_in to[RECEIVERS];
	uint64_t seq[RECEIVERS] = { 0 };
	unsigned char *buf = malloc(max_size(w) + 8);
	struct stream s;
	struct planned p;
	int fd, r;

	gate_pass(x->rx_ready);
	gate_pass(x->receivers_done);
	if (!buf)
		die("out of memory");
	for (r = 0; r < RECEIVERS; r++)
		to[r] = sin4(x->v->remote, INTEGRITY_RX_PORT + r);
	fd = child_socket(x->v->local, INTEGRITY_TX_PORT + id);
	set_buf(fd, SO_SNDBUFFORCE, SNDBUF);
	gate_wait(x->rx_ready, "the receivers to bind");
	stream_init(&s, w, id);
	while (next_message(w, &s, seq, buf, &p)) {
		send_msg(fd, buf, p.size, &to[p.receiver]);
		st->msgs++;
		st->bytes += p.size;
		st->eagain = eagain_count;
		st->enobufs = enobufs_count;
		st->enomem = enomem_count;
	}
	gate_pass(x->senders_done);
	/* Keep the socket open until every receiver is done. */
	gate_wait(x->receivers_done, "the receivers");
	_exit(0);
}

/* Dies unless the @n bytes in @buf are the next message that the sender at @from owes us. */
static void check_message(const struct exchange *x, struct receiver *rv, const unsigned char *buf,
			  ssize_t n, const struct msghdr *mh, const struct sockaddr_in *from)
{
	struct sockaddr_in local = sin4(x->v->local, 0);
	int s;

	if (mh->msg_namelen != sizeof(*from) || from->sin_family != AF_INET ||
	    from->sin_addr.s_addr != local.sin_addr.s_addr)
		die("msg_name is not %s (namelen %u, family %d)", x->v->local,
		    mh->msg_namelen, from->sin_family);
	s = ntohs(from->sin_port) - INTEGRITY_TX_PORT;
	if (s < 0 || s >= SENDERS)
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
	int fd;

	gate_pass(x->senders_done);
	if (!buf)
		die("out of memory");
	receiver_init(&rv, w, id, x->expect);
	fd = child_socket(x->v->remote, INTEGRITY_RX_PORT + id);
	set_buf(fd, SO_RCVBUFFORCE, INTEGRITY_RCVBUF);
	gate_pass(x->rx_ready);
	while (st->msgs < rv.total) {
		struct sockaddr_in from;
		struct iovec iov = { .iov_base = buf, .iov_len = bufsize };
		struct msghdr mh = {
			.msg_name = &from, .msg_namelen = sizeof(from),
			.msg_iov = &iov, .msg_iovlen = 1,
		};
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);

		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR && !enomem_retry())
				die("recvmsg: %s", strerror(errno));
			st->enomem = enomem_count;
			if (now() > deadline)
				die_lost(&rv, st->msgs);
			if (errno == EAGAIN)
				wait_fd(fd, POLLIN, 1000);
			continue;
		}
		check_message(x, &rv, buf, n, &mh, &from);
		st->msgs++;
		st->bytes += n;
	}
	/* Every sender has sent everything: nothing more may be queued. */
	gate_wait(x->senders_done, "the senders");
	if (recv(fd, buf, bufsize, MSG_DONTWAIT) >= 0 || errno != EAGAIN)
		die("a message arrived after the last expected one (or recv failed: %s)",
		    strerror(errno));
	_exit(0);
}

/* The 4x4 exchange of @w between rrds-a (senders) and rrds-b (receivers). */
static void integrity_4x4(struct __test_metadata *_metadata, const FIXTURE_VARIANT(ib) *variant,
			  const struct workload *wp, const char *what)
{
	const struct workload w = *wp;
	const int nchild = SENDERS + RECEIVERS;
	struct exchange x = { .w = &w, .v = variant };
	struct kid k[SENDERS + RECEIVERS] = { 0 };
	struct child_stats got;
	long long want_bytes;
	double start, secs;
	char name[24];
	int i;

	ASSERT_LE(SENDERS, w.msgs);
	want_bytes = plan_exchange(&w, x.expect);
	gate_open(_metadata, x.rx_ready);
	gate_open(_metadata, x.senders_done);
	gate_open(_metadata, x.receivers_done);
	x.stats = mmap(NULL, nchild * sizeof(*x.stats), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, x.stats);

	start = now();
	deadline = start + w.deadline_s;
	for (i = 0; i < nchild; i++) {
		bool sender = i >= RECEIVERS;
		int id = sender ? i - RECEIVERS : i;

		snprintf(name, sizeof(name), "%s %d", sender ? "sender" : "receiver", id);
		if (!spawn_in(&k[i], sender ? NS_A : NS_B, name)) {
			if (sender)
				run_sender(&x, id);
			run_receiver(&x, id);
		}
		if (k[i].pid < 0) {
			TH_LOG("fork: %s", strerror(errno));
			kill_kids(k, i);
			ASSERT_LT(0, k[i].pid);
		}
	}
	gate_pass(x.rx_ready);
	gate_pass(x.senders_done);
	gate_pass(x.receivers_done);
	EXPECT_EQ(0, reap(_metadata, k, nchild, deadline + REAP_GRACE_S));
	secs = now() - start;

	got = sum_stats(&w, x.stats);
	EXPECT_EQ(w.msgs, got.msgs);
	EXPECT_EQ(want_bytes, got.bytes);
	TH_LOG("%s 4x4%s: %ld messages, %lld bytes in %.2f s (%.2f MB/s); %ld EAGAIN, %ld ENOBUFS, "
	       "%ld ENOMEM", variant->kind, what, got.msgs, got.bytes, secs,
	       got.bytes / secs / 1e6, got.eagain, got.enobufs, got.enomem);
	munmap(x.stats, nchild * sizeof(*x.stats));
}

TEST_F(ib, integrity_4x4_across_namespaces)
{
	const struct workload w = {
		.senders = SENDERS, .receivers = RECEIVERS,
		.msgs = env_long("RRDS_IB_INTEGRITY_MSGS", 4000),
		.small_k_max = 10, .large_one_in = 16, .max_k = 16,
		.deadline_s = env_long("RRDS_IB_INTEGRITY_DEADLINE", 150),
		.seed = env_long("RRDS_IB_INTEGRITY_SEED", 0),
	};

	integrity_4x4(_metadata, variant, &w, "");
}

/*
 * The 4x4 exchange with 5% of the packets lost, 5% duplicated and 1%
 * corrupted, both ways: rxe's RC retransmission (or siw's TCP) and rrds's
 * reconnect and retransmission must still deliver every message exactly
 * once, in order.
 */
TEST_F(ib, integrity_under_netem_loss_duplication_corruption)
{
	const struct workload w = {
		.senders = SENDERS, .receivers = RECEIVERS,
		.msgs = env_long("RRDS_IB_NETEM_MSGS", 1000),
		.small_k_max = 10, .large_one_in = 16, .max_k = 16,
		.deadline_s = env_long("RRDS_IB_NETEM_DEADLINE", 300),
		.seed = env_long("RRDS_IB_INTEGRITY_SEED", 0) + 1,
	};

	self->netem = true;
	ASSERT_EQ(0, netem(variant, "loss 5% duplicate 5% corrupt 1%"));
	integrity_4x4(_metadata, variant, &w, " under netem");
	self->netem = false;
	EXPECT_EQ(0, netem(variant, ""));
}

/* A hardware counter of port 1 of @dev (rdma statistic); -1 if unreadable. */
static long long port_counter(const char *dev, const char *name)
{
	char out[32];

	if (sh_out(out, sizeof(out),
		   "rdma statistic show link %s/1 | tr -s ' ' '\\n' | grep -A1 -x '%s' | tail -n 1",
		   dev, name) || !*out)
		return -1;
	return atoll(out);
}

/*
 * The 4x4 exchange, every message large, with an ACK timeout of 4 ms
 * (module parameter ib_ack_timeout=10) and 3 ms of delay each way on the
 * veth pair: rxe retransmits constantly. It can
 * complete a request it is still resending (a duplicate ack of its last
 * PSN comes in meanwhile) and goes on reading the request's buffers, so a
 * link that freed a message at its completion had rxe read freed pages
 * (KASAN, in rxe_mr_copy). Every message still arrives exactly once, and
 * the kernel log stays clean.
 */
TEST_F(ib, early_retransmissions_keep_send_buffers_alive)
{
	const struct workload w = {
		.senders = SENDERS, .receivers = RECEIVERS,
		.msgs = env_long("RRDS_IB_RETRANSMIT_MSGS", 3000),
		.small_k_max = 10, .large_one_in = env_long("RRDS_IB_RETRANSMIT_LARGE_ONE_IN", 1),
		.max_k = 16, .deadline_s = env_long("RRDS_IB_RETRANSMIT_DEADLINE", 300),
		.seed = env_long("RRDS_IB_INTEGRITY_SEED", 0) + 3,
	};
	char dev[16], params[32], delay[32];
	long long dup0;

	if (strcmp(variant->kind, "rxe"))
		SKIP(return, "siw's retransmissions are TCP's");
	snprintf(dev, sizeof(dev), "%s_b", variant->kind);
	dup0 = port_counter(dev, "duplicate_request");
	ASSERT_LE(0, dup0);
	snprintf(params, sizeof(params), "ib_ack_timeout=%ld",
		 env_long("RRDS_IB_RETRANSMIT_ACK_TIMEOUT", 10));
	ASSERT_EQ(0, reload_with(params));
	/*
	 * A round trip longer than the timeout: without it a fast kernel
	 * (the distribution's, no KASAN) acks in time and resends nothing.
	 */
	snprintf(delay, sizeof(delay), "delay %ldms",
		 env_long("RRDS_IB_RETRANSMIT_DELAY_MS", 3));
	self->netem = true;
	ASSERT_EQ(0, netem(variant, delay));
	integrity_4x4(_metadata, variant, &w, " with a short ACK timeout");
	self->netem = false;
	EXPECT_EQ(0, netem(variant, ""));
	/* The case is moot unless requests were resent. */
	EXPECT_LT(dup0, port_counter(dev, "duplicate_request"));
	TH_LOG("%lld requests received twice", port_counter(dev, "duplicate_request") - dup0);
	EXPECT_EQ(0, reload_with(""));
}

/*
 * The 4x4 exchange while allocations made by rrds fail at random, in every
 * context: system calls (sends and receives fail with ENOMEM and are
 * retried), completion handlers and work items (a link that cannot refill
 * its receive ring or set itself up fails, reconnects and retransmits).
 * Every message a send accepted must still arrive exactly once, in order.
 */
TEST_F(ib, integrity_under_allocation_failures)
{
	SKIP_WITHOUT_FAULT_INJECTION();
	const struct workload w = {
		.senders = SENDERS, .receivers = RECEIVERS,
		.msgs = env_long("RRDS_IB_FAULT_MSGS", 1000),
		.small_k_max = 10, .large_one_in = 16, .max_k = 16,
		.deadline_s = env_long("RRDS_IB_FAULT_DEADLINE", 150),
		.seed = env_long("RRDS_IB_INTEGRITY_SEED", 0) + 2,
	};
	long injected;

	/*
	 * Opt-in on siw: connects cut short on either side meet siw's
	 * siw_destroy_listen use-after-free (testing.rst), which crashed a CI run.
	 */
	if (!strcmp(variant->kind, "siw") && !env_long("RRDS_IB_FAULT_SIW", 0))
		SKIP(return, "siw_destroy_listen use-after-free in siw (testing.rst): RRDS_IB_FAULT_SIW=1");
	self->faults = true;
	retry_enomem = true;
	ASSERT_EQ(0, start_alloc_failures(env_long("RRDS_IB_FAULT_INTERVAL", FAULT_INTERVAL),
					  FAULT_PERCENT, FAULT_DEPTH,
					  FAULT_DRIVER(variant->kind)));
	integrity_4x4(_metadata, variant, &w, " under allocation failures");
	injected = stop_alloc_failures();
	self->faults = false;
	retry_enomem = false;
	TH_LOG("%ld allocations failed", injected);
	EXPECT_LT(0, injected);
}

/*
 * What races the 4x4 exchange in integrity_while_sockets_churn_links_flap:
 * counted by the disturbing children in shared memory.
 */
struct disturbance {
	int stop;
	long flaps, unloads_refused, churn_sockets, shutdowns, sink_reopens;
};

#define CHURN_SINK_PORT	6500	/* each namespace's churn sink; churners bind port 0 */
#define CHURNERS	2	/* per namespace */
#define FLAP_GAP_MS	1000	/* between flaps, at least... */
#define FLAP_GAP_SPREAD	1500	/* ...plus up to this */
#define FLAP_DOWN_MS	1000
#define FLAP_SETTLED_S	3	/* up on both ends this long before a flap: ib_cm's MADs done */

/* Whether both ends of the pair show their link up (debugfs rrds/ib_links). */
static bool pair_links_up(const FIXTURE_VARIANT(ib) *v)
{
	static char buf[65536];
	char head[2][80];
	int up = 0;

	if (read_file(RRDS_DEBUGFS "/ib_links", buf, sizeof(buf)) < 0)
		return false;
	snprintf(head[0], sizeof(head[0]), "%s -> %s ", v->local, v->remote);
	snprintf(head[1], sizeof(head[1]), "%s -> %s ", v->remote, v->local);
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
		for (int side = 0; side < 2; side++)
			up += !strncmp(line, head[side], strlen(head[side])) &&
			      strstr(line, " state up ");
	return up >= 2;
}

/*
 * In the initial namespace: flaps one end's veth at a time, only once the
 * link has been up on both ends for FLAP_SETTLED_S (a flap that cuts a
 * handshake can put rxe's GSI QP in error for good, whatever rrds does:
 * fuzz_test.c), and tries to unload rrds, which its open sockets must refuse.
 */
static void __attribute__((noreturn)) run_flapper(const FIXTURE_VARIANT(ib) *v,
						  struct disturbance *d)
{
	uint64_t rng = 0x5eed ^ getpid();
	double next = now() + 1, since = 0, up_since = 0;
	bool logged = false;

	while (!__atomic_load_n(&d->stop, __ATOMIC_RELAXED)) {
		int rc = rrds_unload();

		if (!rc)
			die("rrds unloaded under open sockets");
		if (rc != -EWOULDBLOCK)
			die("delete_module under open sockets: %s, not EWOULDBLOCK", strerror(-rc));
		d->unloads_refused++;
		if (!pair_links_up(v))
			up_since = 0;
		else if (!up_since)
			up_since = now();
		if (now() >= next && up_since && now() - up_since >= FLAP_SETTLED_S) {
			bool b = next64(&rng) & 1;
			const char *ns = b ? NS_B : NS_A, *veth = b ? v->peer_veth : v->veth;

			if (sh("ip -n %s link set %s down", ns, veth))
				die("%s's %s would not go down", ns, veth);
			poll(NULL, 0, FLAP_DOWN_MS);
			if (sh("ip -n %s link set %s up", ns, veth))
				die("%s's %s would not come up", ns, veth);
			d->flaps++;
			next = now() + (FLAP_GAP_MS + next64(&rng) % FLAP_GAP_SPREAD) / 1000.0;
			since = now();
			up_since = 0;
			logged = false;
		} else if (!up_since && since && !logged && now() - since > SETTLE_S * 3) {
			/* A link that does not come back: how it stands, once. */
			printf("# flapper: the link is not up on both ends %.0f s after flap %ld\n",
			       now() - since, d->flaps);
			log_ib_links();
			sh("dmesg | grep -i 'rrds\\|siw\\|rxe' | tail -40 | sed 's/^/# dmesg: /'");
			logged = true;
		}
		poll(NULL, 0, 100);
	}
	_exit(0);
}

/*
 * In one namespace, on the pair's own connection: sockets bound to port 0
 * send a few messages to the other namespace's sink and are closed at once,
 * half of them after shutdown() (refused, as upstream); churner 0 also keeps
 * a sink that it drains a little and then closes with messages unread, and
 * re-opens. Every send
 * either queues or is refused for space, whatever the link is doing.
 */
static void __attribute__((noreturn)) run_churner(const FIXTURE_VARIANT(ib) *v, int side, int id,
						  struct disturbance *d)
{
	const char *mine = side ? v->remote : v->local, *theirs = side ? v->local : v->remote;
	struct sockaddr_in sink_addr = sin4(theirs, CHURN_SINK_PORT);
	uint64_t rng = mix64(side * 16 + id + 1);
	unsigned char buf[2048];
	int sink = -1;

	memset(buf, 0xc0 + side, sizeof(buf));
	for (long round = 0; !__atomic_load_n(&d->stop, __ATOMIC_RELAXED); round++) {
		int fd = socket(PF_RDS, SOCK_SEQPACKET, 0);
		struct sockaddr_in any = sin4(mine, 0);
		int sends = 1 + next64(&rng) % 4;

		if (id == 0 && round % 16 == 0) {
			if (sink >= 0) {
				while (recv(sink, buf, sizeof(buf), MSG_DONTWAIT) > 0 && next64(&rng) % 4)
					;
				close(sink);
				__atomic_fetch_add(&d->sink_reopens, 1, __ATOMIC_RELAXED);
			}
			sink = bound_socket(mine, CHURN_SINK_PORT);
			if (sink < 0)
				die("churn sink %s:%d: %s", mine, CHURN_SINK_PORT, strerror(errno));
		}
		if (fd < 0 || bind(fd, (struct sockaddr *)&any, sizeof(any)))
			die("churn socket bound to %s:0: %s", mine, strerror(errno));
		while (sends--) {
			size_t size = next64(&rng) % sizeof(buf);

			if (sendto(fd, buf, size, MSG_DONTWAIT, (struct sockaddr *)&sink_addr,
				   sizeof(sink_addr)) != (ssize_t)size &&
			    errno != EAGAIN && errno != ENOBUFS)
				die("churn send of %zu bytes to %s: %s", size, theirs,
				    strerror(errno));
		}
		if (next64(&rng) & 1) {
			/* Upstream's RDS has no shutdown (sock_no_shutdown): neither has rrds. */
			if (!shutdown(fd, SHUT_RDWR) || errno != EOPNOTSUPP)
				die("shutdown: %s, not EOPNOTSUPP", strerror(errno));
			__atomic_fetch_add(&d->shutdowns, 1, __ATOMIC_RELAXED);
		}
		close(fd);
		__atomic_fetch_add(&d->churn_sockets, 1, __ATOMIC_RELAXED);
		poll(NULL, 0, next64(&rng) % 20);
	}
	_exit(0);
}

/*
 * In one namespace: keeps a socket bound on the pair's address until told to
 * stop, so that the connection stays while the churners' sockets come and go
 * (a namespace's connections go with its last bound socket).
 */
static void __attribute__((noreturn)) run_holder(const FIXTURE_VARIANT(ib) *v, int side,
						 struct disturbance *d)
{
	int fd = bound_socket(side ? v->remote : v->local, CHURN_SINK_PORT + 1);

	if (fd < 0)
		die("holder %s:%d: %s", side ? v->remote : v->local, CHURN_SINK_PORT + 1,
		    strerror(errno));
	while (!__atomic_load_n(&d->stop, __ATOMIC_RELAXED))
		poll(NULL, 0, 100);
	_exit(0);
}

/*
 * The 4x4 exchange on one connection while other sockets on that same
 * connection open, send, shut down and close in both namespaces, either end's
 * link goes down and up again, and rmmod is tried throughout: every message
 * of the exchange still arrives exactly once, in order, intact, the module
 * refuses to unload while sockets are open, and once they are closed it
 * unloads. make check also runs it on 4 vCPUs (smp4.*).
 */
TEST_F_TIMEOUT(ib, integrity_while_sockets_churn_links_flap_and_unload_is_tried, 600)
{
	const struct workload w = {
		.senders = SENDERS, .receivers = RECEIVERS,
		.msgs = env_long("RRDS_IB_CHURN_MSGS", 8000),
		.small_k_max = 10, .large_one_in = 16, .max_k = 16,
		.deadline_s = env_long("RRDS_IB_CHURN_DEADLINE", 300),
		.seed = env_long("RRDS_IB_INTEGRITY_SEED", 0) + 3,
	};
	struct kid k[1 + 2 * CHURNERS + 2] = { 0 };
	struct disturbance *d;
	char name[24];
	/* Holds the module from before the first unload attempt to after the last. */
	int pin = socket(PF_RDS, SOCK_SEQPACKET, 0);

	ASSERT_LE(0, pin);
	d = mmap(NULL, sizeof(*d), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, d);
	/* The children's own deadline: the exchange's, and the grace after it. */
	deadline = now() + w.deadline_s + REAP_GRACE_S;
	if (!spawn_in(&k[0], NULL, "flapper"))
		run_flapper(variant, d);
	ASSERT_LT(0, k[0].pid);
	for (int i = 0; i < 2 * CHURNERS; i++) {
		snprintf(name, sizeof(name), "churner %c%d", 'a' + i / CHURNERS, i % CHURNERS);
		if (!spawn_in(&k[1 + i], i / CHURNERS ? NS_B : NS_A, name))
			run_churner(variant, i / CHURNERS, i % CHURNERS, d);
		ASSERT_LT(0, k[1 + i].pid);
	}
	for (int side = 0; side < 2; side++) {
		struct kid *h = &k[1 + 2 * CHURNERS + side];

		if (!spawn_in(h, side ? NS_B : NS_A, side ? "holder b" : "holder a"))
			run_holder(variant, side, d);
		ASSERT_LT(0, h->pid);
	}
	/*
	 * The exchange starts once a first flap is over (the churners bring
	 * the links up, the holders keep them; a flap waits until they have
	 * been up FLAP_SETTLED_S): on a fast kernel (a distribution's, real
	 * hardware) the whole exchange can otherwise end before the first
	 * flap. Not while a link is down: connecting then can put rxe's GSI
	 * QP in error for good (fuzz_test.c).
	 */
	ASSERT_TRUE(WAIT_FOR(w.deadline_s / 2, __atomic_load_n(&d->flaps, __ATOMIC_RELAXED) >= 1));
	integrity_4x4(_metadata, variant, &w, " while sockets churn and links flap");
	__atomic_store_n(&d->stop, 1, __ATOMIC_RELAXED);
	EXPECT_EQ(0, reap(_metadata, k, ARRAY_SIZE(k), now() + SETTLE_S + FLAP_DOWN_MS / 1000));
	sh("ip -n %s link set %s up; ip -n %s link set %s up", NS_A, variant->veth, NS_B,
	   variant->peer_veth);
	TH_LOG("%ld link flaps, %ld unloads refused, %ld churn sockets (%ld shut down), "
	       "%ld sinks re-opened", d->flaps, d->unloads_refused, d->churn_sockets,
	       d->shutdowns, d->sink_reopens);
	EXPECT_LE(1, d->flaps);
	EXPECT_LE(10, d->unloads_refused);
	EXPECT_LE(100, d->churn_sockets);
	close(pin);
	/* Every socket is closed: the module goes. */
	EXPECT_TRUE(WAIT_FOR(SETTLE_S, rrds_unload() == 0));
	/*
	 * rxe moves a port's GSI QP to error for good when a MAD goes out while
	 * its netdev is down (fuzz_test.c), after which the device makes no
	 * connection: re-create the pair for the cases after this one.
	 */
	if (gsi_broken(variant->kind)) {
		TH_LOG("a GSI QP is in error after the flaps (rxe): re-creating the devices");
		sh("rdma link del %s_a; rdma link del %s_b", variant->kind, variant->kind);
		EXPECT_EQ(0, pair_up_loaded(variant->kind));
	}
	munmap(d, sizeof(*d));
}

#define FLAP_SIZE	1024
#define FLAP_AT		300	/* messages received before the link goes down */
#define FLAP_STREAM	2

static void __attribute__((noreturn)) run_flap_receiver(const FIXTURE_VARIANT(ib) *v, int n,
							int ready[2], int halfway[2],
							int down[2])
{
	unsigned char buf[FLAP_SIZE + 1];
	struct pollfd pfd;
	char what[40];
	int fd, i;

	gate_pass(down);
	fd = child_socket(v->remote, FLAP_RX_PORT);
	gate_pass(ready);
	for (i = 0; i < n; i++) {
		ssize_t len;

		if (i == FLAP_AT)
			gate_pass(halfway);
		snprintf(what, sizeof(what), "message %d of %d", i, n);
		len = recv_from(fd, buf, sizeof(buf), what, v->local, FLAP_TX_PORT);
		numbered_check(buf, len, FLAP_SIZE, FLAP_STREAM, i);
	}
	/* A duplicate of a retransmitted message would come after the last one. */
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&pfd, 1, 1000) > 0) {
		ssize_t len = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		uint64_t seq = 0;

		if (len >= (ssize_t)sizeof(seq))
			memcpy(&seq, buf, sizeof(seq));
		die("a message of %zd bytes (number %llu) after the last one", len,
		    (unsigned long long)seq);
	}
	_exit(0);
}

static void __attribute__((noreturn)) run_flap_sender(const FIXTURE_VARIANT(ib) *v, int n,
						      int ready[2], int down[2], int done[2])
{
	struct sockaddr_in to = sin4(v->remote, FLAP_RX_PORT);
	/* The second half is sent from the moment the link is down. */
	const int hold = n / 2 > FLAP_AT ? n / 2 : FLAP_AT;
	unsigned char buf[FLAP_SIZE];
	int fd, i;

	gate_pass(down);
	gate_pass(done);
	fd = child_socket(v->local, FLAP_TX_PORT);
	gate_wait(ready, "the receiver");
	for (i = 0; i < n; i++) {
		if (i == hold)
			gate_wait(down, "the link to go down");
		numbered_fill(buf, FLAP_SIZE, FLAP_STREAM, i);
		send_msg(fd, buf, FLAP_SIZE, &to);
	}
	gate_wait(done, "the receiver");
	_exit(0);
}

/* How a stream is interrupted half way. */
enum interruption {
	VETH_DOWN,	/* rrds-a's veth down for 2 s, then up */
	DEVICE_READDED,	/* rrds-b's RDMA device deleted, re-added 2 s later */
};

/*
 * A stream of numbered messages from rrds-a to rrds-b, interrupted once
 * FLAP_AT have arrived: every message arrives exactly once, in order, the
 * second half sent from the moment of the interruption.
 */
static void interrupted_stream(struct __test_metadata *_metadata,
			       const FIXTURE_VARIANT(ib) *variant, enum interruption how)
{
	const int n = env_long("RRDS_IB_FLAP_MSGS", 2000);
	int ready[2], halfway[2], down[2], done[2];
	struct kid k[2] = { 0 };
	double start;
	bool interrupted;

	gate_open(_metadata, ready);	/* held by the receiver: bound */
	gate_open(_metadata, halfway);	/* held by the receiver: FLAP_AT messages in */
	gate_open(_metadata, down);	/* held by the parent: the link is down */
	gate_open(_metadata, done);	/* held by the receiver: it has exited */
	start = now();
	deadline = start + 120;
	if (!spawn_in(&k[0], NS_B, "receiver"))
		run_flap_receiver(variant, n, ready, halfway, down);
	ASSERT_LT(0, k[0].pid);
	if (!spawn_in(&k[1], NS_A, "sender")) {
		gate_pass(ready);
		gate_pass(halfway);
		run_flap_sender(variant, n, ready, down, done);
	}
	ASSERT_LT(0, k[1].pid);
	gate_pass(ready);
	gate_pass(done);
	interrupted = gate_wait_until(halfway, deadline) && !exited(&k[0]);
	if (interrupted && how == VETH_DOWN) {
		EXPECT_EQ(0, sh("ip -n %s link set %s down", NS_A, variant->veth));
		gate_pass(down);
		sleep(2);
		EXPECT_EQ(0, sh("ip -n %s link set %s up", NS_A, variant->veth));
	} else if (interrupted) {
		/* The listener's device: rrds-b must listen again on the new one. */
		EXPECT_EQ(0, sh("rdma link del %s_b", variant->kind));
		gate_pass(down);
		sleep(2);
		EXPECT_EQ(0, sh("ip netns exec %s rdma link add %s_b type %s netdev %s", NS_B,
				variant->kind, variant->kind, variant->peer_veth));
	} else {
		TH_LOG("the receiver did not get %d messages: not interrupted", FLAP_AT);
	}
	gate_pass(down);
	EXPECT_EQ(0, reap(_metadata, k, 2, deadline + REAP_GRACE_S));
	EXPECT_TRUE(interrupted);
	TH_LOG("%s: %d messages of %d B in %.1f s across %s", variant->kind, n, FLAP_SIZE,
	       now() - start,
	       how == VETH_DOWN ? "a 2 s link outage" : "the receiver's device re-added");
}

TEST_F(ib, link_flap_loses_nothing)
{
	interrupted_stream(_metadata, variant, VETH_DOWN);
}

TEST_F(ib, device_readded_loses_nothing)
{
	interrupted_stream(_metadata, variant, DEVICE_READDED);
}

#define RESTART_MSGS	5
#define RESTART_SIZE	256
#define RESTART_STREAM	4

/*
 * rrds-b's side of restarted_peer_is_told_apart: takes rrds-a's message,
 * then sends RESTART_MSGS once the parent has cut rrds-b's egress.
 */
static void __attribute__((noreturn)) run_restart_sender(const FIXTURE_VARIANT(ib) *v,
							 int bound[2], int connected[2], int cut[2],
							 int release[2])
{
	struct sockaddr_in to = sin4(v->local, PAIR_PORT);
	unsigned char buf[RESTART_SIZE];
	int fd, i;

	gate_pass(cut);
	gate_pass(release);
	fd = child_socket(v->remote, PAIR_PORT);
	gate_wait(bound, "rrds-a to bind");
	expect_byte(fd, 'a', v->local);
	gate_wait(connected, "the parent");
	gate_wait(cut, "rrds-b's egress to be cut");
	for (i = 0; i < RESTART_MSGS; i++) {
		numbered_fill(buf, RESTART_SIZE, RESTART_STREAM, i);
		send_msg(fd, buf, RESTART_SIZE, &to);
	}
	gate_wait_release(release);
	close(fd);
	_exit(0);
}

/*
 * rrds-a's side of the restart and orphan cases: binds, connects with a
 * one-byte message to rrds-b, then takes @msgs numbered messages of @size
 * bytes from it, in order.
 */
static void __attribute__((noreturn)) run_hello_then_receive(const FIXTURE_VARIANT(ib) *v,
							     int bound[2], int msgs, size_t size,
							     int stream)
{
	struct sockaddr_in to = sin4(v->remote, PAIR_PORT);
	unsigned char buf[1024 + 1];
	char what[40];
	int fd, i;

	if (size >= sizeof(buf))
		die("messages of %zu bytes do not fit", size);
	fd = child_socket(v->local, PAIR_PORT);
	gate_wait(bound, "rrds-b to bind");
	/* rrds-a connects: rrds-b's side of the link is the passive one. */
	send_msg(fd, "a", 1, &to);
	for (i = 0; i < msgs; i++) {
		ssize_t n;

		snprintf(what, sizeof(what), "message %d of %d", i, msgs);
		n = recv_from(fd, buf, sizeof(buf), what, v->remote, PAIR_PORT);
		numbered_check(buf, n, size, stream, i);
	}
	_exit(0);
}

static void __attribute__((noreturn)) run_restart_receiver(const FIXTURE_VARIANT(ib) *v,
							   int bound[2], int connected[2],
							   int cut[2], int release[2])
{
	gate_pass(connected);
	gate_pass(cut);
	gate_pass(release);
	run_hello_then_receive(v, bound, RESTART_MSGS, RESTART_SIZE, RESTART_STREAM);
}

/*
 * rrds-a forgets its connection (its last socket closes) and keeps its
 * sequence numbers; rrds-b then loses all its state (its namespace is
 * deleted and made anew), so it numbers from 1 again, below what rrds-a
 * resumes from. rrds-a connects; rrds-b's first messages are cut off
 * (netem loss on its egress) and flushed by its device's removal, so the
 * next link carries them flagged RETRANSMITTED. rrds-a must see rrds-b's
 * new incarnation as a restart and deliver them, not drop them as old.
 * rxe only (see below).
 */
TEST_F(ib, restarted_peer_is_told_apart)
{
	int bound[2], connected[2], cut[2], release[2], conns = -1, maps;
	struct pair p = { .v = variant };
	struct kid k[2] = { 0 };
	long long restarts0;
	bool up;

	/*
	 * Not on siw: its TCP stream can still deliver the cut messages on the
	 * old link (nothing is retransmitted); and once rrds-b did reconnect,
	 * the sequence crashed the kernel in siw itself (KASAN use-after-free of a listening
	 * endpoint in siw_destroy_listen). The incarnation logic is the same
	 * on every device.
	 */
	if (!strcmp(variant->kind, "siw"))
		SKIP(return, "siw cannot force the retransmission (see testing.rst)");

	/* Each side's first connection gets a message across. */
	pair_start(_metadata, &p);
	EXPECT_EQ(0, pair_release(_metadata, &p, 0));
	EXPECT_TRUE(WAIT_FOR(SETTLE_S, !objects(&conns, &maps) && conns == self->conns0 + 1));
	ASSERT_EQ(0, sh("ip netns del %s", NS_B));
	EXPECT_EQ(0, pair_release(_metadata, &p, 1));
	ASSERT_TRUE(WAIT_FOR(NETNS_GONE_S,
			     sh("ip -n %s link show %s >/dev/null 2>&1", NS_A, variant->veth)));
	ASSERT_TRUE(WAIT_FOR(SETTLE_S, !objects(&conns, &maps) && !conns));
	ASSERT_EQ(0, pair_up_loaded(variant->kind));
	restarts0 = rds_counter("ib_peer_restarts");
	ASSERT_LE(0, restarts0);

	gate_open(_metadata, bound);	/* held by both: bound */
	gate_open(_metadata, connected);	/* held by rrds-b: rrds-a's message arrived */
	gate_open(_metadata, cut);	/* held by the parent: rrds-b's egress is cut */
	gate_open(_metadata, release);	/* held by the parent: rrds-b may close */
	deadline = now() + 90;
	if (!spawn_in(&k[0], NS_A, "rrds-a receiver"))
		run_restart_receiver(variant, bound, connected, cut, release);
	ASSERT_LT(0, k[0].pid);
	if (!spawn_in(&k[1], NS_B, "rrds-b sender"))
		run_restart_sender(variant, bound, connected, cut, release);
	ASSERT_LT(0, k[1].pid);
	gate_pass(bound);
	up = gate_wait_until(connected, deadline) && !exited(&k[1]);
	if (up) {
		self->netem = true;
		EXPECT_EQ(0, sh("ip netns exec %s tc qdisc replace dev %s root netem loss 100%%",
				NS_B, variant->peer_veth));
		gate_pass(cut);
		/* The messages are posted, and lost. */
		sleep(1);
		EXPECT_EQ(0, sh("rdma link del %s_b", variant->kind));
		EXPECT_EQ(0, sh("ip netns exec %s tc qdisc del dev %s root", NS_B,
				variant->peer_veth));
		self->netem = false;
		EXPECT_EQ(0, sh("ip netns exec %s rdma link add %s_b type %s netdev %s", NS_B,
				variant->kind, variant->kind, variant->peer_veth));
	} else {
		TH_LOG("rrds-a's message did not reach rrds-b");
	}
	gate_pass(cut);
	EXPECT_EQ(0, reap(_metadata, k, 1, deadline + REAP_GRACE_S));
	gate_pass(release);
	EXPECT_EQ(0, reap(_metadata, &k[1], 1, now() + REAP_GRACE_S));
	EXPECT_TRUE(up);
	/* rrds-a's resumed connection saw one restart; rrds-b's new one none. */
	EXPECT_EQ(restarts0 + 1, rds_counter("ib_peer_restarts"));
}

/*
 * Both sides forget their connection (each namespace's last socket closes)
 * and the next pair resumes on both: each connection takes up its forgotten
 * one's incarnations with its sequence numbers, so neither end takes the
 * other for restarted (which would drop what it had handed to the first
 * link of the race as sent to the "old" peer).
 */
TEST_F(ib, resumed_peers_are_not_restarts)
{
	struct pair first = { .v = variant }, second = { .v = variant };
	long long restarts0;
	int conns = -1, maps;

	pair_start(_metadata, &first);
	EXPECT_EQ(0, pair_release(_metadata, &first, 0));
	EXPECT_EQ(0, pair_release(_metadata, &first, 1));
	ASSERT_TRUE(WAIT_FOR(SETTLE_S, !objects(&conns, &maps) && conns == self->conns0));
	restarts0 = rds_counter("ib_peer_restarts");
	ASSERT_LE(0, restarts0);
	pair_start(_metadata, &second);
	EXPECT_EQ(restarts0, rds_counter("ib_peer_restarts"));
	EXPECT_EQ(0, pair_release(_metadata, &second, 0));
	EXPECT_EQ(0, pair_release(_metadata, &second, 1));
}

#define ORPHAN_MSGS	5
#define ORPHAN_SIZE	512
#define ORPHAN_STREAM	5

/* What a sending thread needs: its socket and the destination. */
struct thread_sender {
	int fd;
	struct sockaddr_in to;
};

/* Runs @fn(@arg) in a second thread of this process and waits for it. */
static void run_in_thread(void *(*fn)(void *), void *arg)
{
	pthread_t thread;
	int rc;

	rc = pthread_create(&thread, NULL, fn, arg);
	if (rc)
		die("pthread_create: %s", strerror(rc));
	rc = pthread_join(thread, NULL);
	if (rc)
		die("pthread_join: %s", strerror(rc));
}

/* rrds-b's thread: queues the messages while the link is down, and exits. */
static void *run_orphan_thread(void *arg)
{
	struct thread_sender *s = arg;
	unsigned char buf[ORPHAN_SIZE];

	for (int i = 0; i < ORPHAN_MSGS; i++) {
		numbered_fill(buf, ORPHAN_SIZE, ORPHAN_STREAM, i);
		send_msg(s->fd, buf, ORPHAN_SIZE, &s->to);
	}
	return NULL;
}

/*
 * rrds-b's side of reconnects_for_a_thread_that_exited: receives only,
 * except for a thread that sends while the link is down and exits before
 * the link can come back.
 */
static void __attribute__((noreturn)) run_orphan_sender(const FIXTURE_VARIANT(ib) *v,
							int bound[2], int connected[2],
							int down[2], int sent[2], int release[2])
{
	struct thread_sender s = { .to = sin4(v->local, PAIR_PORT) };

	gate_pass(down);
	gate_pass(release);
	s.fd = child_socket(v->remote, PAIR_PORT);
	gate_wait(bound, "rrds-a to bind");
	expect_byte(s.fd, 'a', v->local);
	gate_wait(connected, "the parent");
	gate_wait(down, "rrds-b's device to go");
	run_in_thread(run_orphan_thread, &s);
	gate_pass(sent);
	gate_wait_release(release);
	close(s.fd);
	_exit(0);
}

static void __attribute__((noreturn)) run_orphan_receiver(const FIXTURE_VARIANT(ib) *v,
							  int bound[2], int connected[2],
							  int down[2], int sent[2],
							  int release[2])
{
	gate_pass(connected);
	gate_pass(down);
	gate_pass(sent);
	gate_pass(release);
	run_hello_then_receive(v, bound, ORPHAN_MSGS, ORPHAN_SIZE, ORPHAN_STREAM);
}

/* rrds-b's side of a case of queue_while_down(). */
typedef void (*down_sender_fn)(const FIXTURE_VARIANT(ib) *v, int bound[2], int connected[2],
			       int down[2], int sent[2], int release[2]);

/*
 * The parent of the cases in which only rrds-b can reconnect: rrds-a says
 * hello and then only receives; once rrds-b's device is gone, @sender (in
 * rrds-b) queues the messages, passes the sent gate and waits for release;
 * the device comes back and rrds-a must receive them.
 */
static void queue_while_down(struct __test_metadata *_metadata, const FIXTURE_VARIANT(ib) *variant,
			     down_sender_fn sender)
{
	int bound[2], connected[2], down[2], sent[2], release[2];
	struct kid k[2] = { 0 };
	bool up, queued = false;

	gate_open(_metadata, bound);	/* held by both: bound */
	gate_open(_metadata, connected);	/* held by rrds-b: rrds-a's message arrived */
	gate_open(_metadata, down);	/* held by the parent: rrds-b's device is gone */
	gate_open(_metadata, sent);	/* held by rrds-b: its messages are queued */
	gate_open(_metadata, release);	/* held by the parent: rrds-b may close */
	deadline = now() + 90;
	if (!spawn_in(&k[0], NS_A, "rrds-a receiver"))
		run_orphan_receiver(variant, bound, connected, down, sent, release);
	ASSERT_LT(0, k[0].pid);
	if (!spawn_in(&k[1], NS_B, "rrds-b sender"))
		sender(variant, bound, connected, down, sent, release);
	ASSERT_LT(0, k[1].pid);
	gate_pass(bound);
	gate_pass(sent);
	up = gate_wait_until(connected, deadline) && !exited(&k[1]);
	if (up) {
		EXPECT_EQ(0, sh("rdma link del %s_b", variant->kind));
		gate_pass(down);
		queued = gate_wait_until(sent, deadline) && !exited(&k[1]);
		EXPECT_EQ(0, sh("ip netns exec %s rdma link add %s_b type %s netdev %s", NS_B,
				variant->kind, variant->kind, variant->peer_veth));
	} else {
		TH_LOG("rrds-a's message did not reach rrds-b");
	}
	gate_pass(down);
	EXPECT_EQ(0, reap(_metadata, k, 1, deadline + REAP_GRACE_S));
	gate_pass(release);
	EXPECT_EQ(0, reap(_metadata, &k[1], 1, now() + REAP_GRACE_S));
	EXPECT_TRUE(up);
	EXPECT_TRUE(queued);
}

/*
 * The side that was connected to gets its queued messages across on its
 * own. rrds-a connects and then only receives; rrds-b's device goes, and
 * while it is gone a thread of rrds-b queues messages and exits. rrds-a has
 * nothing to send, so only rrds-b can reconnect. Over iWARP that connect
 * must run in a live task of rrds-b's namespace (design.rst, iWARP): the
 * thread that sent is gone, the process's main thread, waiting on a pipe,
 * is there.
 */
TEST_F(ib, reconnects_for_a_thread_that_exited)
{
	queue_while_down(_metadata, variant, run_orphan_sender);
}

/*
 * rrds-b's side of reconnects_for_queued_messages_when_the_last_sender_exited:
 * queues its messages while the link is down, then a process of its own
 * sends on the same connection last and exits.
 */
static void __attribute__((noreturn)) run_outlived_sender(const FIXTURE_VARIANT(ib) *v,
							  int bound[2], int connected[2],
							  int down[2], int sent[2], int release[2])
{
	struct thread_sender s = { .to = sin4(v->local, PAIR_PORT) };
	unsigned char buf[ORPHAN_SIZE];
	int go[2], status;
	pid_t last;

	gate_pass(down);
	gate_pass(release);
	s.fd = child_socket(v->remote, PAIR_PORT);
	if (pipe(go))
		die("pipe: %s", strerror(errno));
	/* The last sender, bound now: no bind succeeds while the device is gone. */
	last = fork();
	if (last < 0)
		die("fork: %s", strerror(errno));
	if (last == 0) {
		int fd;
		char c;

		/* Not a holder of the case's gates, nor of rrds-b's first socket. */
		close_range(3, go[0] - 1, 0);
		close_range(go[0] + 1, ~0U, 0);
		fd = child_socket(v->remote, 0);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		send_msg(fd, "x", 1, &s.to);
		/* Its message goes with its socket: the link is down. */
		close(fd);
		_exit(0);
	}
	close(go[0]);
	gate_wait(bound, "rrds-a to bind");
	expect_byte(s.fd, 'a', v->local);
	gate_wait(connected, "the parent");
	gate_wait(down, "rrds-b's device to go");
	for (int i = 0; i < ORPHAN_MSGS; i++) {
		numbered_fill(buf, ORPHAN_SIZE, ORPHAN_STREAM, i);
		send_msg(s.fd, buf, ORPHAN_SIZE, &s.to);
	}
	if (write(go[1], "g", 1) != 1)
		die("write: %s", strerror(errno));
	if (waitpid(last, &status, 0) != last || !WIFEXITED(status) || WEXITSTATUS(status))
		die("the last sender failed (status %#x)", status);
	gate_pass(sent);
	gate_wait_release(release);
	close(s.fd);
	_exit(0);
}

/*
 * Over iWARP a reconnect runs in the task that last sent on the connection
 * (design.rst, iWARP). When that task has exited, one whose message is
 * still queued takes its place: rrds-b queues messages while its device is
 * gone, another process of rrds-b then sends last on the same connection
 * and exits, and rrds-a only receives. Once the device is back, rrds-b's
 * messages must arrive (before, the connects failed for ever: nobody was
 * left to run them until someone sent again).
 */
TEST_F(ib, reconnects_for_queued_messages_when_the_last_sender_exited)
{
	long long from_queue0 = rds_counter("ib_connector_from_queue");

	if (strcmp(variant->kind, "siw"))
		SKIP(return, "only iWARP connects run as task work");
	queue_while_down(_metadata, variant, run_outlived_sender);
	EXPECT_LT(from_queue0, rds_counter("ib_connector_from_queue"));
}

/* rrds-b's side of closing_while_down_keeps_the_device: two messages. */
static void __attribute__((noreturn)) run_two_byte_receiver(const FIXTURE_VARIANT(ib) *v,
							    int bound[2], int first[2])
{
	int fd = child_socket(v->remote, PAIR_PORT);

	gate_pass(bound);
	expect_byte(fd, '1', v->local);
	gate_pass(first);
	expect_byte(fd, '2', v->local);
	_exit(0);
}

/*
 * rrds-a's sender: its socket is the namespace's only one, kept open until
 * @close_gate opens (closing a socket drops what it has not sent).
 */
static void __attribute__((noreturn)) run_byte_sender(const FIXTURE_VARIANT(ib) *v, char byte,
						      int close_gate[2], const char *what)
{
	struct sockaddr_in to = sin4(v->remote, PAIR_PORT);
	int fd = child_socket(v->local, PAIR_PORT);

	send_msg(fd, &byte, 1, &to);
	gate_wait(close_gate, what);
	close(fd);
	_exit(0);
}

/*
 * The start of a two-byte exchange from rrds-a to rrds-b: opens @first
 * (held by rrds-b until '1' arrived), @second (until '2' arrived) and
 * @hold (held by the parent), starts rrds-b's receiver as k[0] and, once
 * it is bound, rrds-a's first sender as k[1], which sends '1' and closes
 * its socket once @hold opens (@what: what it waits for).
 */
static void start_two_bytes(struct __test_metadata *_metadata, const FIXTURE_VARIANT(ib) *v,
			    struct kid k[2], int first[2], int second[2], int hold[2],
			    const char *what)
{
	int bound[2];

	gate_open(_metadata, bound);
	gate_open(_metadata, first);
	gate_open(_metadata, second);
	gate_open(_metadata, hold);
	deadline = now() + 90;
	if (!spawn_in(&k[0], NS_B, "rrds-b receiver")) {
		gate_pass(hold);
		run_two_byte_receiver(v, bound, first);
	}
	ASSERT_LT(0, k[0].pid);
	gate_pass(first);
	gate_pass(second);
	ASSERT_TRUE(gate_wait_until(bound, deadline));
	if (!spawn_in(&k[1], NS_A, "rrds-a first sender"))
		run_byte_sender(v, '1', hold, what);
	ASSERT_LT(0, k[1].pid);
}

/*
 * rrds-a's last socket closes while its port is down, with the connection
 * up before: the connection goes, but its link's id must wait for the port
 * (destroying it sends a disconnect request, and over rxe a send failing
 * while the netdev is down moves the port's GSI QP to error for good: no
 * connection could be made on the device again). Once the port is back, a
 * new socket connects and its message arrives; no GSI QP is in error.
 */
TEST_F(ib, closing_while_down_keeps_the_device)
{
	int first[2], down[2], second[2];
	struct kid k[3] = { 0 };
	char qps[4096] = "";
	bool sent = false;

	/* @down: held by the parent until rrds-a's link is down. */
	start_two_bytes(_metadata, variant, k, first, second, down, "the link to go down");
	if (gate_wait_until(first, deadline) && !exited(&k[0])) {
		EXPECT_EQ(0, sh("ip -n %s link set %s down", NS_A, variant->veth));
		sleep(1);
		gate_pass(down);
		/* The sender closes rrds-a's last socket while the port is down. */
		EXPECT_EQ(0, reap(_metadata, &k[1], 1, deadline));
		EXPECT_EQ(0, sh("ip -n %s link set %s up", NS_A, variant->veth));
		/* The watchdog's next ticks tear the waiting link down. */
		sleep(4);
		if (!spawn_in(&k[2], NS_A, "rrds-a second sender"))
			run_byte_sender(variant, '2', second, "rrds-b to take the message");
		ASSERT_LT(0, k[2].pid);
		sent = true;
	} else {
		TH_LOG("the first message did not arrive");
	}
	gate_pass(down);
	EXPECT_EQ(0, reap(_metadata, k, 3, deadline + REAP_GRACE_S));
	EXPECT_TRUE(sent);
	/* rxe's GSI QPs (siw has none). */
	EXPECT_LE(0, sh_out(qps, sizeof(qps), "rdma resource show qp | grep ' %s_[ab]/.* type GSI '",
			    variant->kind));
	EXPECT_EQ(NULL, strstr(qps, "state ERR")) TH_LOG("%s", qps);
}

/*
 * A connect started while rrds-a's port is down (its veth without carrier,
 * the route still there) must wait for the port:
 * its request would go out on the port's GSI QP, which rxe moves to error
 * for good when a send fails there, and no connection would be made on the
 * device again. A first message brings the connection up and rrds-a's
 * last socket closes (the link goes while the port is up); then, with a
 * static neighbour entry for rrds-b in rrds-a, rrds-b's veth goes down, a
 * new rrds-a socket sends, and 2 s later the veth comes back: the message
 * arrives, at least one connect was held back, and no GSI QP is in error.
 */
TEST_F(ib, connecting_while_down_keeps_the_device)
{
	int first[2], closed[2], second[2];
	long long held0 = rds_counter("ib_connect_port_down");
	struct kid k[3] = { 0 };
	char qps[4096] = "";
	bool sent = false;

	if (strcmp(variant->kind, "rxe"))
		SKIP(return, "rxe's GSI QP: siw connects over TCP");
	/* @closed: held by the parent until the first sender may close. */
	start_two_bytes(_metadata, variant, k, first, second, closed, "the first message to arrive");
	if (gate_wait_until(first, deadline) && !exited(&k[0])) {
		/* rrds-a's last socket closes with the port up: its link goes. */
		gate_pass(closed);
		EXPECT_EQ(0, reap(_metadata, &k[1], 1, deadline));
		sleep(4);
		/*
		 * A carrier loss flushes the neighbour cache, and address
		 * resolution would fail before any request: a static entry
		 * (as some deployments keep) lets the connect reach its route.
		 */
		EXPECT_EQ(0, sh("ip -n %s neigh replace %s lladdr $(ip -n %s -o link show %s | "
				"sed -n 's|.*link/ether \\([^ ]*\\).*|\\1|p') nud permanent dev %s",
				NS_A, variant->remote, NS_B, variant->peer_veth, variant->veth));
		EXPECT_EQ(0, sh("ip -n %s link set %s down", NS_B, variant->peer_veth));
		EXPECT_TRUE(WAIT_FOR(10, !sh("rdma link show %s_a/1 | grep -q 'state DOWN'",
					      variant->kind)));
		if (!spawn_in(&k[2], NS_A, "rrds-a second sender"))
			run_byte_sender(variant, '2', second, "rrds-b to take the message");
		ASSERT_LT(0, k[2].pid);
		sleep(2);
		EXPECT_EQ(0, sh("ip -n %s link set %s up", NS_B, variant->peer_veth));
		sent = true;
	} else {
		TH_LOG("the first message did not arrive");
	}
	gate_pass(closed);
	EXPECT_EQ(0, reap(_metadata, k, 3, deadline + REAP_GRACE_S));
	sh("ip -n %s neigh del %s dev %s 2>/dev/null", NS_A, variant->remote, variant->veth);
	EXPECT_TRUE(sent);
	EXPECT_LT(held0, rds_counter("ib_connect_port_down"));
	EXPECT_LE(0, sh_out(qps, sizeof(qps), "rdma resource show qp | grep ' %s_[ab]/.* type GSI '",
			    variant->kind));
	EXPECT_EQ(NULL, strstr(qps, "state ERR")) TH_LOG("%s", qps);
	/* A device whose GSI QP is in error makes no connection: re-create it. */
	if (gsi_broken(variant->kind)) {
		sh("rdma link del %s_a; rdma link del %s_b", variant->kind, variant->kind);
		EXPECT_EQ(0, pair_up_loaded(variant->kind));
	}
}

#define DEVICE_GONE_S	30	/* rdma link del with nothing waiting: a few seconds */
#define DELETED_MARK	"/tmp/rrds-device-deleted"	/* rdma link del has returned */

/*
 * rrds-a's last socket closes while its port is down, and its device is
 * removed between the connection leaving the table and its link being
 * torn down: the removal's sweep cannot see the path, and the closing task
 * then finds the link's port down. It must tear the link down rather than
 * keep it for the port (an orphan the removal already swept), or rdma_cm's
 * part of the removal waits for the link's id until the watchdog gives up
 * on the port, a minute later.
 */
TEST_F_TIMEOUT(ib, device_removed_while_the_last_socket_closes_goes_at_once, 240)
{
	struct pair p = { .v = variant };
	double removing, gone = 0;
	bool held;

	pair_start(_metadata, &p);
	ASSERT_EQ(0, sh("ip -n %s link set %s down", NS_A, variant->veth));
	EXPECT_TRUE(WAIT_FOR(10, !sh("rdma link show %s_a/1 | grep -q 'state DOWN'",
				     variant->kind)));
	ASSERT_EQ(0, set_hold("forget_hold", true));
	/* rrds-a closes its socket: the connection is forgotten, held before its teardown. */
	gate_pass(p.release[0]);
	held = WAIT_FOR(30, holding("forget_hold"));
	EXPECT_TRUE(held);
	if (held) {
		ASSERT_EQ(0, set_hold("device_remove_hold", true));
		unlink(DELETED_MARK);
		/* It returns once ib_core let the device go, rdma_cm's part included. */
		ASSERT_EQ(0, sh("{ rdma link del %s_a >/dev/null 2>&1; touch " DELETED_MARK "; } &",
				variant->kind));
		/* rrds's removal swept the connections, and waits before the PDs go. */
		EXPECT_TRUE(WAIT_FOR(30, holding("device_remove_hold")));
	}
	set_hold("forget_hold", false);
	EXPECT_EQ(0, reap(_metadata, &p.k[0], 1, now() + REAP_GRACE_S));
	set_hold("device_remove_hold", false);
	removing = now();
	if (WAIT_FOR(120, !access(DELETED_MARK, F_OK)))
		gone = now() - removing;
	unlink(DELETED_MARK);
	TH_LOG("%s_a gone %.1f s after its removal went on", variant->kind, gone);
	EXPECT_LT(0, gone);
	EXPECT_GT(DEVICE_GONE_S, gone);
	EXPECT_EQ(0, pair_release(_metadata, &p, 1));
	/* The fixture adds the device and brings the link up again. */
	EXPECT_EQ(0, sh("ip -n %s link set %s up", NS_A, variant->veth));
}

/* rrds-b's side of send_racing_link_up_is_not_lost: one byte. */
static void __attribute__((noreturn)) run_one_byte_receiver(const FIXTURE_VARIANT(ib) *v,
							    int bound[2])
{
	int fd = child_socket(v->remote, PAIR_PORT);

	gate_pass(bound);
	expect_byte(fd, 'h', v->local);
	_exit(0);
}

static void *send_h(void *arg)
{
	struct thread_sender *s = arg;

	send_msg(s->fd, "h", 1, &s->to);
	return NULL;
}

/*
 * rrds-a's side: a second thread sends, so that the main thread, waiting
 * in pthread_join, is there to run an iWARP connect (the connector is the
 * thread group's leader) while the sender is held in the kernel.
 */
static void __attribute__((noreturn)) run_thread_sender(const FIXTURE_VARIANT(ib) *v,
							int bound[2], int close_gate[2])
{
	struct thread_sender s = { .to = sin4(v->remote, PAIR_PORT) };

	s.fd = child_socket(v->local, PAIR_PORT);
	gate_wait(bound, "rrds-b to bind");
	run_in_thread(send_h, &s);
	gate_wait(close_gate, "rrds-b to take the message");
	close(s.fd);
	_exit(0);
}

/*
 * A send that finds the link down starts the connect and leaves its
 * message queued; when the link comes up, the transport transmits the
 * queue. If that call comes while the sending thread is still inside its
 * own attempt, it returns at once (one thread transmits at a time), and
 * the sending thread must then try again itself: nothing else would send
 * the message (rrds-b sends nothing, nothing is outstanding for a
 * completion to resume). debugfs xmit_hold keeps the sender inside its
 * refused attempt until another call to transmit has found it, so the two
 * always meet.
 */
TEST_F(ib, send_racing_link_up_is_not_lost)
{
	long long contention = rds_counter("send_lock_contention");
	long long raced = rds_counter("send_lock_queue_raced");
	int bound[2], received[2];
	struct kid k[2] = { 0 };
	char armed[8] = "";

	gate_open(_metadata, bound);	/* held by rrds-b: bound */
	gate_open(_metadata, received);	/* held by rrds-b: the byte arrived */
	deadline = now() + PAIR_DEADLINE_S;
	ASSERT_EQ(0, sh("echo 1 > " RRDS_DEBUGFS "/xmit_hold"));
	if (!spawn_in(&k[0], NS_B, "rrds-b receiver"))
		run_one_byte_receiver(variant, bound);	/* exiting passes received */
	ASSERT_LT(0, k[0].pid);
	gate_pass(received);
	if (!spawn_in(&k[1], NS_A, "rrds-a sender")) {
		gate_pass(bound);
		run_thread_sender(variant, bound, received);
	}
	ASSERT_LT(0, k[1].pid);
	gate_pass(bound);
	EXPECT_EQ(0, reap(_metadata, k, 2, deadline + REAP_GRACE_S));
	/* The hold was taken, and the link's call to transmit met it. */
	EXPECT_LE(0, sh_out(armed, sizeof(armed), "cat " RRDS_DEBUGFS "/xmit_hold"));
	EXPECT_EQ(0, strcmp(armed, "0\n")) TH_LOG("xmit_hold still reads %s", armed);
	EXPECT_LT(contention, rds_counter("send_lock_contention"));
	/* The held thread, refused, tried again for the call that met it. */
	EXPECT_LT(raced, rds_counter("send_lock_queue_raced"));
	sh("echo 0 > " RRDS_DEBUGFS "/xmit_hold");
}

#define OVERTAKE_MSGS	20	/* posted on the link that is then cut */
#define OVERTAKE_SIZE	256
#define OVERTAKE_STREAM	5

/*
 * rrds-b's side of held_send_does_not_overtake_retransmissions: a hello,
 * then messages 0 to OVERTAKE_MSGS, in order.
 */
static void __attribute__((noreturn)) run_overtake_receiver(const FIXTURE_VARIANT(ib) *v,
							    int bound[2], int hello[2])
{
	unsigned char buf[OVERTAKE_SIZE + 1];
	char what[40];
	int fd, i;

	fd = child_socket(v->remote, PAIR_PORT);
	gate_pass(bound);
	expect_byte(fd, 'h', v->local);
	gate_pass(hello);
	for (i = 0; i <= OVERTAKE_MSGS; i++) {
		ssize_t n;

		snprintf(what, sizeof(what), "message %d of %d", i, OVERTAKE_MSGS + 1);
		n = recv_from(fd, buf, sizeof(buf), what, v->local, PAIR_PORT);
		numbered_check(buf, n, OVERTAKE_SIZE, OVERTAKE_STREAM, i);
	}
	_exit(0);	/* passes `received` */
}

static void *send_last_numbered(void *arg)
{
	struct thread_sender *s = arg;
	unsigned char buf[OVERTAKE_SIZE];

	numbered_fill(buf, OVERTAKE_SIZE, OVERTAKE_STREAM, OVERTAKE_MSGS);
	send_msg(s->fd, buf, OVERTAKE_SIZE, &s->to);
	return NULL;
}

/*
 * rrds-a's side: a hello, then OVERTAKE_MSGS messages once the link is cut,
 * then the last one from a second thread (held in the kernel; the main
 * thread, in pthread_join, runs an iWARP reconnect meanwhile). The socket
 * stays open until rrds-b has everything: closing would drop what is queued.
 */
static void __attribute__((noreturn)) run_overtake_sender(const FIXTURE_VARIANT(ib) *v,
							  int bound[2], int cut[2], int sent[2],
							  int armed[2], int received[2])
{
	struct thread_sender s = { .to = sin4(v->remote, PAIR_PORT) };
	unsigned char buf[OVERTAKE_SIZE];
	int i;

	s.fd = child_socket(v->local, PAIR_PORT);
	gate_wait(bound, "rrds-b to bind");
	send_msg(s.fd, "h", 1, &s.to);
	gate_wait(cut, "the link to be cut");
	for (i = 0; i < OVERTAKE_MSGS; i++) {
		numbered_fill(buf, OVERTAKE_SIZE, OVERTAKE_STREAM, i);
		send_msg(s.fd, buf, OVERTAKE_SIZE, &s.to);
	}
	gate_pass(sent);
	gate_wait(armed, "xmit_post_hold to be armed");
	run_in_thread(send_last_numbered, &s);
	gate_wait(received, "rrds-b to take every message");
	close(s.fd);
	_exit(0);
}

/*
 * A thread that has taken a message from its connection's queue, and not
 * yet handed it to the transport, when the link fails: the reset puts the
 * message back, flagged as a retransmission, behind those sent before it.
 * If the thread then hands its copy to the next link, it goes first and
 * unflagged; the peer takes it, and drops every earlier retransmitted one
 * as already seen (a fuzz run over siw lost a window of messages each way
 * so). debugfs xmit_post_hold keeps the thread there while the test cuts
 * the link (netem drops everything) until it is declared dead, restores
 * it, and waits for the next link: every message must still arrive, once,
 * in order, the transport having refused the stale copy. Without the
 * refusal, rrds-b gets message 20 first and never the others.
 */
TEST_F_TIMEOUT(ib, held_send_does_not_overtake_retransmissions, 300)
{
	long long resets = rds_counter("conn_reset");
	long long refused = rds_counter("ib_xmit_after_reset");
	int bound[2], hello[2], cut[2], sent[2], armed[2], received[2];
	struct kid k[2] = { 0 };
	bool held = false, reset = false, up = false;

	/*
	 * siw completes a SEND once TCP has taken it, so a link whose packets
	 * netem drops never fails in time; the race is in the core's transmit
	 * and the IB transport's xmit, the same for both.
	 */
	if (strcmp(variant->kind, "rxe"))
		SKIP(return, "siw: netem cannot make the link fail (sends complete into TCP)");
	gate_open(_metadata, bound);	/* held by rrds-b: bound */
	gate_open(_metadata, hello);	/* held by rrds-b: the hello arrived */
	gate_open(_metadata, cut);	/* held by the parent: netem drops everything */
	gate_open(_metadata, sent);	/* held by rrds-a: the first messages went */
	gate_open(_metadata, armed);	/* held by the parent: the hold is armed */
	gate_open(_metadata, received);	/* held by rrds-b: everything arrived */
	deadline = now() + 180;
	if (!spawn_in(&k[0], NS_B, "rrds-b receiver")) {
		gate_pass(cut);
		gate_pass(sent);
		gate_pass(armed);
		run_overtake_receiver(variant, bound, hello);
	}
	ASSERT_LT(0, k[0].pid);
	if (!spawn_in(&k[1], NS_A, "rrds-a sender")) {
		gate_pass(bound);
		gate_pass(hello);
		gate_pass(cut);
		gate_pass(armed);
		gate_pass(received);
		run_overtake_sender(variant, bound, cut, sent, armed, received);
	}
	ASSERT_LT(0, k[1].pid);
	gate_pass(bound);
	gate_pass(hello);
	gate_pass(sent);
	gate_pass(received);
	if (gate_wait_until(hello, deadline) && WAIT_FOR(30, pair_links_up(variant))) {
		self->netem = true;
		EXPECT_EQ(0, netem(variant, "loss 100%"));
		gate_pass(cut);
		if (gate_wait_until(sent, deadline)) {
			EXPECT_EQ(0, set_hold("xmit_post_hold", true));
			gate_pass(armed);
			held = WAIT_FOR(20, holding("xmit_post_hold"));
		}
		/* The watchdog gives up on the link (no send progress for 8 s). */
		reset = held && WAIT_FOR(60, rds_counter("conn_reset") > resets);
			EXPECT_EQ(0, netem(variant, ""));
		self->netem = false;
		up = reset && WAIT_FOR(90, pair_links_up(variant));
	}
	gate_pass(cut);
	gate_pass(armed);
	set_hold("xmit_post_hold", false);
	EXPECT_EQ(0, reap(_metadata, k, 2, deadline + REAP_GRACE_S));
	EXPECT_TRUE(held);
	EXPECT_TRUE(reset);
	EXPECT_TRUE(up);
	/* The held copy met the next link and was refused. */
	EXPECT_LT(refused, rds_counter("ib_xmit_after_reset"));
}

#define CYCLE_SIZE	64
#define CYCLE_STREAM	3

static void __attribute__((noreturn)) run_cycle_receiver(const FIXTURE_VARIANT(ib) *v,
							 int cycles, int ready[2], int acks[2],
							 int received[2], int release[2])
{
	unsigned char buf[CYCLE_SIZE + 1];
	char what[40];
	int fd, i;

	gate_pass(release);
	fd = child_socket(v->remote, CYCLE_RX_PORT);
	gate_pass(ready);
	for (i = 0; i < cycles; i++) {
		ssize_t n;

		snprintf(what, sizeof(what), "message %d of %d", i, cycles);
		n = recv_from(fd, buf, sizeof(buf), what, v->local, CYCLE_TX_PORT);
		numbered_check(buf, n, CYCLE_SIZE, CYCLE_STREAM, i);
		if (write(acks[1], "", 1) != 1)
			die("ack: %s", strerror(errno));
	}
	gate_pass(received);
	gate_wait_release(release);
	_exit(0);
}

static void __attribute__((noreturn)) run_cycle_sender(const FIXTURE_VARIANT(ib) *v,
						       int cycles, int ready[2], int acks[2])
{
	struct sockaddr_in to = sin4(v->remote, CYCLE_RX_PORT);
	unsigned char buf[CYCLE_SIZE];
	int i;

	close(acks[1]);
	gate_wait(ready, "the receiver");
	for (i = 0; i < cycles; i++) {
		/* rrds-a's only socket: each close takes its connections down. */
		int fd = child_socket(v->local, CYCLE_TX_PORT);

		numbered_fill(buf, CYCLE_SIZE, CYCLE_STREAM, i);
		send_msg(fd, buf, CYCLE_SIZE, &to);
		/* Closing drops what is not yet delivered: wait for the receiver's word. */
		read_byte(acks[0], "the receiver's ack");
		close(fd);
	}
	_exit(0);
}

/*
 * Its own deadline (60 s + 0.5 s a cycle) plus the reaping and settling
 * after it, not the harness's default 300 s: 1000 cycles take 180 to 300 s
 * under TCG, and the default killed a siw run that was still progressing.
 */
TEST_F_TIMEOUT(ib, reconnect_cycles_leak_nothing, 60 + 1000 / 2 + 2 * REAP_GRACE_S + SETTLE_S + 60)
{
	const int cycles = env_long("RRDS_IB_CYCLES", 1000);
	int ready[2], acks[2], received[2], release[2], qps0, qps, conns, maps;
	struct kid k[2] = { 0 };
	double start;
	bool ok;

	/*
	 * The sender's namespace frees its connection with its last socket
	 * and the next one resumes it (sequence numbers and incarnation); the
	 * receiver's side keeps its own, and drops what the connect data
	 * acknowledges rather than retransmitting it.
	 */
	/* Nothing is connected yet. */
	qps0 = rc_qps(variant->kind);
	ASSERT_LE(0, qps0);
	gate_open(_metadata, ready);	/* held by the receiver: bound */
	gate_open(_metadata, acks);	/* the receiver writes a byte per message */
	gate_open(_metadata, received);	/* held by the receiver: got everything */
	gate_open(_metadata, release);	/* held by the parent: checks done */
	start = now();
	/* About 0.25 s a cycle under TCG; twice that, and the set-up. */
	deadline = start + 60 + cycles / 2;
	if (!spawn_in(&k[0], NS_B, "receiver"))
		run_cycle_receiver(variant, cycles, ready, acks, received, release);
	ASSERT_LT(0, k[0].pid);
	if (!spawn_in(&k[1], NS_A, "sender")) {
		gate_pass(received);
		gate_pass(release);
		run_cycle_sender(variant, cycles, ready, acks);
	}
	ASSERT_LT(0, k[1].pid);
	gate_pass(ready);
	close(acks[1]);
	ok = gate_wait_until(received, deadline) && !exited(&k[0]);
	if (!ok) {
		TH_LOG("the receiver did not get its %d messages", cycles);
		reap(_metadata, k, 2, 0);
	}
	ASSERT_TRUE(ok);
	/* The sender closes its last socket and exits. */
	ASSERT_EQ(0, reap(_metadata, &k[1], 1, deadline + REAP_GRACE_S));
	TH_LOG("%s: %d connect/send/close cycles in %.1f s", variant->kind, cycles,
	       now() - start);
	/*
	 * rrds-a has no socket, so no connection; rrds-b keeps one (to a peer
	 * that is gone) while its receiver is open: at most a QP per side.
	 */
	WAIT_FOR(SETTLE_S, rc_qps(variant->kind) <= qps0 + 2);
	qps = rc_qps(variant->kind);
	EXPECT_LE(0, qps);
	EXPECT_GE(qps0 + 2, qps);
	ASSERT_EQ(0, objects(&conns, &maps));
	EXPECT_GE(self->conns0 + 1, conns);
	gate_pass(release);
	EXPECT_EQ(0, reap(_metadata, k, 1, now() + REAP_GRACE_S));
}

/*
 * Last of each variant: it deletes rrds-b, and with it the veth pair and both
 * RDMA devices on it, and unloads rrds. Neither is restored here: every
 * test's setup brings its own pair up (fixtures.sh <kind>-up, which also
 * recreates rrds-b) and loads rrds.
 *
 * The name goes while rrds-b's socket is open and both connections are up
 * (ip netns del only unmounts it); the namespace itself can go only once its
 * last process and socket are gone, and then only if nothing of rrds still
 * holds it (an rdma_cm id holds its namespace). Its veth going from rrds-a
 * shows it was dismantled.
 */
TEST_F(ib, namespace_deleted_with_live_connections)
{
	struct pair p = { .v = variant };
	int conns = -1, maps;

	pair_start(_metadata, &p);
	ASSERT_EQ(0, objects(&conns, &maps));
	EXPECT_EQ(self->conns0 + 2, conns);
	ASSERT_EQ(0, sh("ip netns del %s", NS_B));
	EXPECT_EQ(0, pair_release(_metadata, &p, 1));
	EXPECT_TRUE(WAIT_FOR(NETNS_GONE_S,
			     sh("ip -n %s link show %s >/dev/null 2>&1", NS_A, variant->veth)));
	/* rrds-a's connection lost its peer and its device; its socket closes now. */
	EXPECT_EQ(0, pair_release(_metadata, &p, 0));
	EXPECT_TRUE(WAIT_FOR(SETTLE_S, !objects(&conns, &maps) && !conns));
	EXPECT_EQ(0, conns);
	/* Unregistering a device waits for its rdma_cm ids: nothing of rrds held them. */
	EXPECT_TRUE(WAIT_FOR(NETNS_GONE_S,
			     sh("rdma link show | grep -qE '^link %s_[ab]/'", variant->kind)));
	EXPECT_TRUE(WAIT_FOR(UNLOAD_GRACE_S, !rrds_unload()));
	EXPECT_FALSE(rrds_loaded());
}

TEST_HARNESS_MAIN
