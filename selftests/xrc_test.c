// SPDX-License-Identifier: GPL-2.0
/*
 * The XRC target-QP manager (Documentation/userspace-api.rst, "XRC target
 * QPs"), on rxe and on siw: targets outlive their creator, registrations are
 * per process and end with the process or the socket, events reach every
 * registered process exactly once and in order, device removal ends every
 * registration with a final event, and nothing is left behind.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <linux/capability.h>
#include <linux/rrds.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_socket.h"

#define NS_A	"rrds-a"
#define NS_B	"rrds-b"
#define INFO_MAX 256

/* Field and constant compared as the u32 the ABI makes them. */
#define EXPECT_U32(want, seen) EXPECT_EQ((uint32_t)(want), (uint32_t)(seen))

FIXTURE(xrc) {
	int qps0;	/* RC QPs on the pair's devices as the test starts */
};

FIXTURE_VARIANT(xrc) {
	const char *kind;	/* fixtures.sh <kind>-up; devices <kind>_a, <kind>_b */
	const char *local;	/* rrds-a's address, on <kind>_a */
	const char *remote;	/* rrds-b's address, on <kind>_b */
	bool real_error_event;	/* the driver raises LAST_WQE_REACHED on error */
	/* In band: the QP state once connected (RTR; iw_cm moves it to RTS), and
	 * whether a QP in error can take another initiator (siw has no way out
	 * of ERROR). */
	uint32_t connected_state;
	bool qp_reusable;
};

FIXTURE_VARIANT_ADD(xrc, rxe) {
	.kind = "rxe", .local = "10.254.1.1", .remote = "10.254.1.2", .real_error_event = true,
	.connected_state = 2, .qp_reusable = true,
};

FIXTURE_VARIANT_ADD(xrc, siw) {
	.kind = "siw", .local = "10.254.2.1", .remote = "10.254.2.2", .real_error_event = false,
	.connected_state = 3, .qp_reusable = false,
};

FIXTURE_SETUP(xrc)
{
	SKIP_WITHOUT_DRIVER(variant->kind);
	ASSERT_EQ(0, pair_up_loaded(variant->kind));
	self->qps0 = rc_qps(variant->kind);
	ASSERT_LE(0, self->qps0);
	/* The test (and every child it forks) lives in rrds-a. */
	ASSERT_EQ(0, enter_ns(NS_A));
}

FIXTURE_TEARDOWN(xrc)
{
	/* A case that failed while holding a target's receives lets them go. */
	if (!access(RRDS_DEBUGFS "/xrc_repost_hold", F_OK))
		set_hold("xrc_repost_hold", false);
}

static int xsock(const char *ip)
{
	return bound_socket(ip, 0);
}

/* Creates a target; 0 or -errno. */
static int xrc_create(int fd, uint32_t *qp_num, uint32_t *backend)
{
	struct rrds_xrc_create c = { 0 };
	socklen_t len = sizeof(c);

	if (getsockopt(fd, SOL_RDS, RRDS_XRC_CREATE, &c, &len))
		return -errno;
	if (len != sizeof(c))
		return -EPROTO;
	*qp_num = c.qp_num;
	if (backend)
		*backend = c.backend;
	return 0;
}

static int xrc_qp_op(int fd, int op, uint32_t qp_num)
{
	struct rrds_xrc_qp q = { .qp_num = qp_num };

	return setsockopt(fd, SOL_RDS, op, &q, sizeof(q)) ? -errno : 0;
}

static int xrc_inject(int fd, uint32_t qp_num, uint32_t action, uint32_t event)
{
	struct rrds_xrc_inject in = { .qp_num = qp_num, .action = action, .event = event };

	return setsockopt(fd, SOL_RDS, RRDS_XRC_INJECT, &in, sizeof(in)) ? -errno : 0;
}

/* The namespace's targets; how many, or -errno. */
static int targets(int fd, struct rrds_info_xrc_target *out)
{
	socklen_t len = INFO_MAX * sizeof(*out);
	int each = getsockopt(fd, SOL_RDS, RRDS_INFO_XRC_TARGETS, out, &len);

	if (each < 0)
		return -errno;
	if (each != sizeof(*out) || len % sizeof(*out))
		return -EPROTO;
	return len / sizeof(*out);
}

/* The record of @qp_num, or NULL. */
static struct rrds_info_xrc_target *target_of(struct rrds_info_xrc_target *t, int n,
					      uint32_t qp_num)
{
	for (int i = 0; i < n; i++)
		if (t[i].qp_num == qp_num)
			return &t[i];
	return NULL;
}

/* Registrations of @qp_num per the listing: -1 if not listed. */
static int registrations(int fd, uint32_t qp_num)
{
	struct rrds_info_xrc_target t[INFO_MAX], *r;
	int n = targets(fd, t);

	r = n < 0 ? NULL : target_of(t, n, qp_num);
	return r ? (int)r->registrations : -1;
}

/*
 * Whether next_event() returns SRQ_LIMIT_REACHED events. An initiator that
 * sends a burst faster than the target's receives come back raises them at
 * random, so only the case about them (and the children it forks) asks.
 */
static bool keep_srq_limit_events;

/*
 * The next event within @ms: 1 and *@ev, 0 on timeout, -errno. Checks the
 * recvmsg is a 0-byte one carrying exactly our cmsg.
 */
static int next_event(int fd, struct rrds_xrc_event *ev, int ms)
{
	char control[CMSG_SPACE(sizeof(*ev)) + 64];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	double end = now() + ms / 1000.0;
	struct cmsghdr *c;
	int found;
	ssize_t n;

	do {
		struct msghdr msg = { .msg_control = control,
				      .msg_controllen = sizeof(control) };
		double left = end - now();

		if (poll(&p, 1, left > 0 ? (int)(left * 1000) : 0) < 0)
			return -errno;
		if (!(p.revents & POLLIN))
			return 0;
		n = recvmsg(fd, &msg, MSG_DONTWAIT);
		if (n < 0)
			return -errno;
		if (n != 0)
			return -EPROTO;
		found = 0;
		for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_RDS ||
			    c->cmsg_type != (int)RRDS_CMSG_XRC_EVENT ||
			    c->cmsg_len != CMSG_LEN(sizeof(*ev)))
				return -EPROTO;
			memcpy(ev, CMSG_DATA(c), sizeof(*ev));
			found++;
		}
		if (found != 1)
			return -EPROTO;
	} while (ev->event == RRDS_XRC_EV_SRQ_LIMIT_REACHED && !keep_srq_limit_events);
	return 1;
}

/* Forks a child that never outlives the test; 0 in the child. */
static pid_t spawn(void)
{
	pid_t parent = getpid(), pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
	}
	return pid;
}

static int child_status(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void send_u32(int fd, uint32_t v)
{
	if (write(fd, &v, sizeof(v)) != sizeof(v))
		_exit(90);
}

/* Reads a u32 from a pipe within 60 s; false on EOF or timeout. */
static bool recv_u32(int fd, uint32_t *v)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, 60000) != 1)
		return false;
	return read(fd, v, sizeof(*v)) == sizeof(*v);
}

/*
 * A target outlives its creator while another process is registered; the
 * last unregistration destroys its QP.
 */
TEST_F(xrc, creator_killed_target_survives)
{
	struct rrds_info_xrc_target t[INFO_MAX], *r;
	uint32_t qp_num, backend;
	int up[2], fd, n;
	pid_t creator;

	ASSERT_EQ(0, pipe(up));
	creator = spawn();
	ASSERT_LE(0, creator);
	if (creator == 0) {
		int cfd = xsock(variant->local);

		if (cfd < 0 || xrc_create(cfd, &qp_num, &backend))
			_exit(2);
		send_u32(up[1], qp_num);
		send_u32(up[1], backend);
		pause();
		_exit(0);
	}
	ASSERT_TRUE(recv_u32(up[0], &qp_num));
	ASSERT_TRUE(recv_u32(up[0], &backend));
	/* rxe and siw have no XRC: the backend says so. */
	EXPECT_U32(RRDS_XRC_BACKEND_EMULATED, backend);
	fd = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xrc_qp_op(fd, RRDS_XRC_REGISTER, qp_num));
	n = targets(fd, t);
	ASSERT_EQ(1, n);
	r = target_of(t, n, qp_num);
	ASSERT_NE(NULL, r);
	EXPECT_U32(2, r->registrations);
	EXPECT_U32(RRDS_XRC_BACKEND_EMULATED, r->backend);
	EXPECT_U32(1, r->qp_state);	/* INIT */
	EXPECT_EQ(0, strncmp((char *)r->device, variant->kind, 3));
	EXPECT_EQ(self->qps0 + 1, rc_qps(variant->kind));

	ASSERT_EQ(0, kill(creator, SIGKILL));
	EXPECT_EQ(128 + SIGKILL, child_status(creator));
	EXPECT_TRUE(WAIT_FOR(10, registrations(fd, qp_num) == 1));
	EXPECT_EQ(self->qps0 + 1, rc_qps(variant->kind));

	ASSERT_EQ(0, xrc_qp_op(fd, RRDS_XRC_UNREGISTER, qp_num));
	EXPECT_EQ(0, targets(fd, t));
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
	close(fd);
}

/* A process that dies while its socket lives on (shared with its parent). */
TEST_F(xrc, process_exit_ends_registration_on_shared_socket)
{
	uint32_t qp_num;
	int fd, shared;
	pid_t kid;

	fd = xsock(variant->local);
	shared = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_LE(0, shared);
	ASSERT_EQ(0, xrc_create(fd, &qp_num, NULL));
	kid = spawn();
	ASSERT_LE(0, kid);
	if (kid == 0) {
		if (xrc_qp_op(shared, RRDS_XRC_REGISTER, qp_num))
			_exit(2);
		pause();
		_exit(0);
	}
	ASSERT_TRUE(WAIT_FOR(10, registrations(fd, qp_num) == 2));
	ASSERT_EQ(0, kill(kid, SIGKILL));
	EXPECT_EQ(128 + SIGKILL, child_status(kid));
	/* The parent still holds the socket: only the process's exit ends it. */
	EXPECT_TRUE(WAIT_FOR(10, registrations(fd, qp_num) == 1));
	close(shared);
	close(fd);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

/* Closing the socket a registration was made through ends it. */
TEST_F(xrc, close_ends_registrations)
{
	struct rrds_info_xrc_target t[INFO_MAX];
	uint32_t a, b;
	int fd, other;

	fd = xsock(variant->local);
	other = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_LE(0, other);
	ASSERT_EQ(0, xrc_create(fd, &a, NULL));
	ASSERT_EQ(0, xrc_create(fd, &b, NULL));
	EXPECT_NE(a, b);
	ASSERT_EQ(2, targets(other, t));
	EXPECT_EQ(self->qps0 + 2, rc_qps(variant->kind));
	close(fd);
	EXPECT_EQ(0, targets(other, t));
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
	close(other);
}

TEST_F(xrc, errors)
{
	struct rrds_info_xrc_target t[INFO_MAX];
	struct rrds_xrc_create c;
	struct rrds_xrc_qp q = { 0 };
	struct rrds_xrc_inject in = { 0 };
	uint32_t qp_num, unused;
	socklen_t len;
	int fd, fd2, lo, unbound, status;
	pid_t kid;

	unbound = rds_socket();
	ASSERT_LE(0, unbound);
	EXPECT_EQ(-ENOTCONN, xrc_create(unbound, &unused, NULL));
	EXPECT_EQ(-ENOTCONN, xrc_qp_op(unbound, RRDS_XRC_REGISTER, 1));
	lo = xsock("127.0.0.1");
	ASSERT_LE(0, lo);
	EXPECT_EQ(-EOPNOTSUPP, xrc_create(lo, &unused, NULL));

	fd = xsock(variant->local);
	fd2 = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_LE(0, fd2);
	/* Every option's length is exact. */
	len = sizeof(c) - 1;
	EXPECT_EQ(-EINVAL, ERR(getsockopt(fd, SOL_RDS, RRDS_XRC_CREATE, &c, &len)));
	len = sizeof(c) + 4;
	EXPECT_EQ(-EINVAL, ERR(getsockopt(fd, SOL_RDS, RRDS_XRC_CREATE, &c, &len)));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, RRDS_XRC_REGISTER, &q, sizeof(q) - 1)));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, RRDS_XRC_REGISTER, &q, sizeof(q) + 1)));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, RRDS_XRC_UNREGISTER, &q, 0)));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, RRDS_XRC_INJECT, &in, sizeof(in) - 4)));
	EXPECT_EQ(0, targets(fd, t));
	EXPECT_EQ(0, rc_qps(variant->kind) - self->qps0);

	ASSERT_EQ(0, xrc_create(fd, &qp_num, NULL));
	q.qp_num = qp_num;
	q.reserved = 1;
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd2, SOL_RDS, RRDS_XRC_REGISTER, &q, sizeof(q))));
	/* One registration per process, whichever socket asks. */
	EXPECT_EQ(-EALREADY, xrc_qp_op(fd, RRDS_XRC_REGISTER, qp_num));
	EXPECT_EQ(-EALREADY, xrc_qp_op(fd2, RRDS_XRC_REGISTER, qp_num));
	EXPECT_EQ(-ENOENT, xrc_qp_op(fd, RRDS_XRC_REGISTER, qp_num + 1000));
	EXPECT_EQ(-ENOENT, xrc_qp_op(fd, RRDS_XRC_UNREGISTER, qp_num + 1000));
	EXPECT_EQ(-ENOENT, xrc_inject(fd, qp_num + 1000, RRDS_XRC_INJECT_EVENT,
				      RRDS_XRC_EV_QP_FATAL));
	EXPECT_EQ(-EINVAL, xrc_inject(fd, qp_num, 99, 0));
	EXPECT_EQ(-EINVAL, xrc_inject(fd, qp_num, RRDS_XRC_INJECT_EVENT, 8 /* DEVICE_FATAL */));
	in.qp_num = qp_num;
	in.action = RRDS_XRC_INJECT_EVENT;
	in.event = RRDS_XRC_EV_QP_FATAL;
	in.reserved = 1;
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, RRDS_XRC_INJECT, &in, sizeof(in))));

	/* RDS_INFO's sizing protocol: too small a buffer says how much is needed. */
	len = 0;
	EXPECT_EQ(-ENOSPC, ERR(getsockopt(fd, SOL_RDS, RRDS_INFO_XRC_TARGETS, t, &len)));
	EXPECT_EQ(sizeof(t[0]), len);

	kid = spawn();
	ASSERT_LE(0, kid);
	if (kid == 0) {
		int kfd = xsock(variant->local);

		/* Not registered: unregistering is ENOENT. */
		if (xrc_qp_op(kfd, RRDS_XRC_UNREGISTER, qp_num) != -ENOENT)
			_exit(10);
		if (xrc_qp_op(kfd, RRDS_XRC_REGISTER, qp_num))
			_exit(11);
		if (drop_capability(CAP_NET_ADMIN))
			_exit(12);
		if (xrc_inject(kfd, qp_num, RRDS_XRC_INJECT_EVENT, RRDS_XRC_EV_QP_FATAL) != -EPERM)
			_exit(13);
		if (xrc_inject(kfd, qp_num, RRDS_XRC_INJECT_QP_ERROR, 0) != -EPERM)
			_exit(14);
		/* Another namespace does not see the target, whatever device it asks. */
		if (enter_ns(NS_B))
			_exit(15);
		kfd = xsock(variant->remote);
		if (kfd < 0 || xrc_qp_op(kfd, RRDS_XRC_REGISTER, qp_num) != -ENOENT)
			_exit(16);
		if (targets(kfd, t) != 0)
			_exit(17);
		_exit(0);
	}
	status = child_status(kid);
	EXPECT_EQ(0, status);
	/* The child's registration ended with it. */
	EXPECT_TRUE(WAIT_FOR(10, registrations(fd, qp_num) == 1));
	EXPECT_EQ(0, xrc_qp_op(fd2, RRDS_XRC_UNREGISTER, qp_num));
	EXPECT_EQ(-ENOENT, xrc_qp_op(fd, RRDS_XRC_UNREGISTER, qp_num));
	EXPECT_EQ(0, targets(fd, t));
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
	close(fd);
	close(fd2);
	close(lo);
	close(unbound);
}

#define NOBODY	65534

/*
 * Registering keeps a target alive and delivers its events: only its
 * creator's uid, or CAP_NET_ADMIN, may. Another user gets EPERM (QP numbers
 * are listed to everyone in the namespace), and can still make its own.
 */
TEST_F(xrc, another_users_target_is_eperm)
{
	uint32_t qp_num;
	int fd, status;
	pid_t kid;

	fd = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xrc_create(fd, &qp_num, NULL));

	kid = spawn();
	ASSERT_LE(0, kid);
	if (kid == 0) {
		uint32_t own;
		int kfd = xsock(variant->local);

		if (kfd < 0 || setresuid(NOBODY, NOBODY, NOBODY))
			_exit(10);
		if (xrc_qp_op(kfd, RRDS_XRC_REGISTER, qp_num) != -EPERM)
			_exit(11);
		if (registrations(kfd, qp_num) != 1)
			_exit(12);
		/* It may still make targets of its own. */
		if (xrc_create(kfd, &own, NULL))
			_exit(13);
		_exit(0);
	}
	status = child_status(kid);
	EXPECT_EQ(0, status);

	/* The creator's uid needs no capability. */
	kid = spawn();
	ASSERT_LE(0, kid);
	if (kid == 0) {
		int kfd = xsock(variant->local);

		if (kfd < 0 || drop_capability(CAP_NET_ADMIN))
			_exit(20);
		if (xrc_qp_op(kfd, RRDS_XRC_REGISTER, qp_num))
			_exit(21);
		_exit(0);
	}
	status = child_status(kid);
	EXPECT_EQ(0, status);
	close(fd);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

/*
 * rrds reloaded with xrc_max_targets_per_user=2 and xrc_max_targets_per_net=3:
 * a user's third live target is EDQUOT, the namespace's fourth ENOSPC, and a
 * target that goes frees its place.
 */
TEST_F(xrc, target_limits_per_user_and_namespace)
{
	uint32_t q[3];
	int fd, status;
	pid_t kid;

	ASSERT_EQ(0, rrds_unload());
	ASSERT_EQ(0, rrds_load_with("xrc_max_targets_per_user=2 xrc_max_targets_per_net=3"));
	fd = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xrc_create(fd, &q[0], NULL));
	ASSERT_EQ(0, xrc_create(fd, &q[1], NULL));
	EXPECT_EQ(-EDQUOT, xrc_create(fd, &q[2], NULL));

	kid = spawn();
	ASSERT_LE(0, kid);
	if (kid == 0) {
		uint32_t mine;
		int kfd = xsock(variant->local);

		if (kfd < 0 || setresuid(NOBODY, NOBODY, NOBODY))
			_exit(10);
		/* Its own quota, but the namespace has room for one more only. */
		if (xrc_create(kfd, &mine, NULL))
			_exit(11);
		if (xrc_create(kfd, &mine, NULL) != -ENOSPC)
			_exit(12);
		close(kfd);
		_exit(0);
	}
	status = child_status(kid);
	EXPECT_EQ(0, status);
	/* Unregistering destroys a target: its place is free again. */
	ASSERT_EQ(0, xrc_qp_op(fd, RRDS_XRC_UNREGISTER, q[0]));
	EXPECT_EQ(0, xrc_create(fd, &q[2], NULL));
	close(fd);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
	/* Later tests get the defaults. */
	EXPECT_EQ(0, rrds_unload());
	EXPECT_EQ(0, rrds_load());
}

/* The events a fan-out registrant must see, in order. */
/*
 * In a child: RRDS_XRC_REGISTER with fail-nth at 1, 2, ... until it makes
 * fewer allocations. Exits with 100 + the failures seen, or the line of a
 * check that did not hold (the parent holds the creator's registration).
 */
static int register_failing(const char *ip, uint32_t qp_num)
{
	int fd = xsock(ip), n, injected = 1, failures = 0, ret;

	if (fd < 0)
		return __LINE__;
	for (n = 1; injected && n <= NTH_MAX; n++) {
		if (fail_nth_arm(n))
			return __LINE__;
		ret = xrc_qp_op(fd, RRDS_XRC_REGISTER, qp_num);
		injected = fail_nth_disarm();
		if (injected < 0)
			return __LINE__;
		if (ret < 0) {
			if (ret != -ENOMEM || registrations(fd, qp_num) != 1)
				return __LINE__;
			failures++;
			continue;
		}
		if (registrations(fd, qp_num) != 2 ||
		    xrc_qp_op(fd, RRDS_XRC_UNREGISTER, qp_num) || registrations(fd, qp_num) != 1)
			return __LINE__;
	}
	return injected ? __LINE__ : 100 + failures;
}

/*
 * fail-nth (rrds_test.h) over creating a target, registering with it from
 * another process, and listing targets: a call that fails says ENOMEM and
 * leaves no target, registration or QP behind; one that succeeds did it all.
 */
TEST_F(xrc, failed_allocations_fail_calls_cleanly)
{
	SKIP_WITHOUT_FAULT_INJECTION();
	struct rrds_info_xrc_target t[INFO_MAX];
	int fd = xsock(variant->local), other = xsock(variant->local);
	int n, injected, status, failures[3] = { 0 };
	uint32_t qp_num;
	pid_t kid;
	long ret;

	ASSERT_LE(0, fd);
	ASSERT_LE(0, other);
	ASSERT_EQ(0, start_alloc_failures(1, 0, FAULT_DEPTH, FAULT_DRIVER(variant->kind)));

	for (n = 1, injected = 1; injected && n <= NTH_MAX; n++) {
		ret = NTH_FAILING(n, injected, xrc_create(fd, &qp_num, NULL));
		if (ret < 0) {
			EXPECT_EQ(-ENOMEM, ret);
			failures[0]++;
			EXPECT_EQ(0, targets(other, t));
			continue;
		}
		EXPECT_EQ(1, registrations(other, qp_num));
		EXPECT_EQ(0, xrc_qp_op(fd, RRDS_XRC_UNREGISTER, qp_num));
		EXPECT_EQ(0, targets(other, t));
	}
	EXPECT_FALSE(injected);

	/* Registrations are per process: a child registers, its own fail-nth armed. */
	ASSERT_EQ(0, xrc_create(fd, &qp_num, NULL));
	kid = spawn();
	ASSERT_LE(0, kid);
	if (!kid)
		_exit(register_failing(variant->local, qp_num));
	status = child_status(kid);
	ASSERT_GE(status, 100) TH_LOG("child failed at line %d", status);
	failures[1] = status - 100;
	EXPECT_EQ(1, registrations(fd, qp_num));

	for (n = 1, injected = 1; injected && n <= NTH_MAX; n++) {
		ret = NTH_FAILING(n, injected, targets(other, t));
		if (ret < 0) {
			EXPECT_EQ(-ENOMEM, ret);
			failures[2]++;
		} else {
			EXPECT_EQ(1, ret);
		}
	}
	EXPECT_FALSE(injected);

	EXPECT_EQ(0, xrc_qp_op(fd, RRDS_XRC_UNREGISTER, qp_num));
	TH_LOG("failed with ENOMEM: create %d, register %d, list %d", failures[0], failures[1],
	       failures[2]);
	EXPECT_LT(0, failures[0]);
	EXPECT_LT(0, failures[1]);
	close(fd);
	close(other);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

static const uint32_t synthesized[] = {
	RRDS_XRC_EV_QP_FATAL, RRDS_XRC_EV_QP_REQ_ERR, RRDS_XRC_EV_QP_ACCESS_ERR,
	RRDS_XRC_EV_COMM_EST, RRDS_XRC_EV_SQ_DRAINED,
};
#define FAN_EVENTS (1 + sizeof(synthesized) / sizeof(synthesized[0]))

/*
 * A registrant: registers (or registers and then unregisters, if @leave),
 * reports ready, then collects events until @want arrived and 1 s more has
 * passed quietly, and reports them all.
 */
static void __attribute__((noreturn)) fan_child(const char *ip, uint32_t qp_num, bool leave,
					       int want, int report)
{
	struct rrds_xrc_event ev[FAN_EVENTS + 4];
	double end = now() + 60;
	int fd = xsock(ip), got = 0, r;

	if (fd < 0 || xrc_qp_op(fd, RRDS_XRC_REGISTER, qp_num))
		_exit(20);
	if (leave && xrc_qp_op(fd, RRDS_XRC_UNREGISTER, qp_num))
		_exit(21);
	send_u32(report, 0);
	while (now() < end && got < (int)(sizeof(ev) / sizeof(ev[0]))) {
		r = next_event(fd, &ev[got], got >= want ? 1000 : 500);
		if (r < 0)
			_exit(22);
		if (r == 0 && got >= want)
			break;
		got += r;
	}
	send_u32(report, got);
	for (int i = 0; i < got; i++) {
		send_u32(report, ev[i].event);
		send_u32(report, ev[i].flags);
		send_u32(report, ev[i].qp_num);
	}
	_exit(0);
}

/* Checks a registrant's report: the error event, then the synthesized ones. */
static void check_report(struct __test_metadata *_metadata, const FIXTURE_VARIANT(xrc) *variant,
			 int fd, uint32_t qp_num, int want, const char *who)
{
	uint32_t got, event, flags, qp;

	ASSERT_TRUE(recv_u32(fd, &got)) TH_LOG("%s: no report", who);
	ASSERT_EQ(want, (int)got) TH_LOG("%s: wrong number of events", who);
	for (uint32_t i = 0; i < got; i++) {
		ASSERT_TRUE(recv_u32(fd, &event));
		ASSERT_TRUE(recv_u32(fd, &flags));
		ASSERT_TRUE(recv_u32(fd, &qp));
		EXPECT_EQ(qp_num, qp);
		if (i == 0) {
			EXPECT_U32(RRDS_XRC_EV_QP_LAST_WQE_REACHED, event);
			EXPECT_U32(variant->real_error_event ? 0 : RRDS_XRC_EVENT_SYNTHESIZED, flags);
		} else {
			EXPECT_EQ(synthesized[i - 1], event) TH_LOG("%s: event %u", who, i);
			EXPECT_U32(RRDS_XRC_EVENT_SYNTHESIZED, flags);
		}
	}
}

/*
 * Three processes registered and one that left before the events: each of
 * the three gets every event exactly once, in order; the fourth none.
 */
TEST_F(xrc, events_fan_out_once_in_order)
{
	struct rrds_info_xrc_target t[INFO_MAX], *r;
	struct rrds_xrc_event ev;
	uint32_t qp_num, ready;
	int report[3][2], fd, n;
	pid_t kids[3];

	fd = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xrc_create(fd, &qp_num, NULL));
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(0, pipe(report[i]));
		kids[i] = spawn();
		ASSERT_LE(0, kids[i]);
		if (kids[i] == 0)
			fan_child(variant->local, qp_num, i == 2, i == 2 ? 0 : FAN_EVENTS,
				  report[i][1]);
		ASSERT_TRUE(recv_u32(report[i][0], &ready));
	}
	ASSERT_EQ(3, registrations(fd, qp_num));

	/* A real error where the driver raises one, then synthesized events. */
	ASSERT_EQ(0, xrc_inject(fd, qp_num, RRDS_XRC_INJECT_QP_ERROR, 0));
	/* The first event must come before the synthesized ones to check order. */
	ASSERT_EQ(1, next_event(fd, &ev, 10000));
	EXPECT_U32(RRDS_XRC_EV_QP_LAST_WQE_REACHED, ev.event);
	EXPECT_U32(variant->real_error_event ? 0 : RRDS_XRC_EVENT_SYNTHESIZED, ev.flags);
	EXPECT_EQ(qp_num, ev.qp_num);
	for (size_t i = 0; i < sizeof(synthesized) / sizeof(synthesized[0]); i++)
		ASSERT_EQ(0, xrc_inject(fd, qp_num, RRDS_XRC_INJECT_EVENT, synthesized[i]));
	for (size_t i = 0; i < sizeof(synthesized) / sizeof(synthesized[0]); i++) {
		ASSERT_EQ(1, next_event(fd, &ev, 5000));
		EXPECT_EQ(synthesized[i], ev.event);
		EXPECT_U32(RRDS_XRC_EVENT_SYNTHESIZED, ev.flags);
	}
	EXPECT_EQ(0, next_event(fd, &ev, 1000));

	check_report(_metadata, variant, report[0][0], qp_num, FAN_EVENTS, "registrant 0");
	check_report(_metadata, variant, report[1][0], qp_num, FAN_EVENTS, "registrant 1");
	check_report(_metadata, variant, report[2][0], qp_num, 0, "unregistered");
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(0, child_status(kids[i]));

	n = targets(fd, t);
	r = target_of(t, n, qp_num);
	ASSERT_NE(NULL, r);
	EXPECT_U32(6, r->qp_state);	/* error */
	EXPECT_EQ(3 * FAN_EVENTS, r->events);
	EXPECT_U32(0, r->overflows);
	close(fd);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

/* A full queue never blocks the handler: the loss is counted and flagged. */
TEST_F(xrc, overflow_is_reported)
{
	struct rrds_info_xrc_target t[INFO_MAX], *r;
	struct rrds_xrc_event ev;
	const int extra = 6;
	uint32_t qp_num;
	int fd, n;

	fd = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xrc_create(fd, &qp_num, NULL));
	for (int i = 0; i < RRDS_XRC_EVENT_QUEUE_LEN + extra; i++)
		ASSERT_EQ(0, xrc_inject(fd, qp_num, RRDS_XRC_INJECT_EVENT, RRDS_XRC_EV_COMM_EST));
	for (int i = 0; i < RRDS_XRC_EVENT_QUEUE_LEN; i++) {
		bool last = i == RRDS_XRC_EVENT_QUEUE_LEN - 1;

		ASSERT_EQ(1, next_event(fd, &ev, 1000)) TH_LOG("event %d", i);
		EXPECT_U32(RRDS_XRC_EV_COMM_EST, ev.event);
		EXPECT_U32(RRDS_XRC_EVENT_SYNTHESIZED | (last ? RRDS_XRC_EVENT_OVERFLOW : 0),
			  ev.flags);
		EXPECT_EQ(last ? extra : 0, (int)ev.lost);
	}
	EXPECT_EQ(0, next_event(fd, &ev, 200));
	n = targets(fd, t);
	r = target_of(t, n, qp_num);
	ASSERT_NE(NULL, r);
	EXPECT_U32(RRDS_XRC_EVENT_QUEUE_LEN, r->events);
	EXPECT_EQ(extra, r->overflows);
	close(fd);
}

/* Removing the device ends every registration with a final event. */
TEST_F(xrc, device_removal_sends_final_event)
{
	struct rrds_info_xrc_target t[INFO_MAX];
	struct rrds_xrc_event ev;
	uint32_t qp_num, ready, v;
	int report[2], fd;
	pid_t kid;

	fd = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xrc_create(fd, &qp_num, NULL));
	ASSERT_EQ(0, pipe(report));
	kid = spawn();
	ASSERT_LE(0, kid);
	if (kid == 0) {
		int kfd = xsock(variant->local);

		if (kfd < 0 || xrc_qp_op(kfd, RRDS_XRC_REGISTER, qp_num))
			_exit(2);
		send_u32(report[1], 0);
		if (next_event(kfd, &ev, 60000) != 1)
			_exit(3);
		send_u32(report[1], ev.event);
		send_u32(report[1], ev.flags);
		/* The registration is over. */
		if (xrc_qp_op(kfd, RRDS_XRC_UNREGISTER, qp_num) != -ENOENT)
			_exit(4);
		_exit(0);
	}
	ASSERT_TRUE(recv_u32(report[0], &ready));
	ASSERT_EQ(2, registrations(fd, qp_num));
	ASSERT_EQ(0, sh("rdma link del %s_a", variant->kind));
	ASSERT_EQ(1, next_event(fd, &ev, 10000));
	EXPECT_U32(RRDS_XRC_EV_TARGET_GONE, ev.event);
	EXPECT_U32(RRDS_XRC_EVENT_SYNTHESIZED | RRDS_XRC_EVENT_FINAL, ev.flags);
	EXPECT_EQ(qp_num, ev.qp_num);
	ASSERT_TRUE(recv_u32(report[0], &v));
	EXPECT_U32(RRDS_XRC_EV_TARGET_GONE, v);
	ASSERT_TRUE(recv_u32(report[0], &v));
	EXPECT_U32(RRDS_XRC_EVENT_SYNTHESIZED | RRDS_XRC_EVENT_FINAL, v);
	EXPECT_EQ(0, child_status(kid));
	EXPECT_EQ(0, targets(fd, t));
	close(fd);
	/* Bring the pair back for the next test, and unload cleanly. */
	ASSERT_EQ(0, pair_up(variant->kind));
	ASSERT_EQ(0, rrds_unload());
}

/* A running xrc_initiator (beside this program), its stdout on @out. */
struct initiator {
	pid_t pid;
	int out;
};

/* Starts xrc_initiator in rrds-b against @qp_num; 0 or -1. */
static int initiator_start(struct initiator *in, const FIXTURE_VARIANT(xrc) *v, uint32_t qp_num,
			   int bytes, int count, bool hold)
{
	char exe[PATH_MAX], prog[PATH_MAX + 16], qp[16], b[16], c[16];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int out[2];

	if (n < 0 || pipe2(out, O_CLOEXEC))
		return -1;
	exe[n] = '\0';
	snprintf(prog, sizeof(prog), "%s/xrc_initiator", dirname(exe));
	snprintf(qp, sizeof(qp), "%u", qp_num);
	snprintf(b, sizeof(b), "%d", bytes);
	snprintf(c, sizeof(c), "%d", count);
	in->pid = spawn();
	if (in->pid < 0)
		return -1;
	if (in->pid == 0) {
		if (dup2(out[1], STDOUT_FILENO) < 0)
			_exit(1);
		/* Not the test's rrds sockets: its exit must not end registrations. */
		close_range(3, ~0U, 0);
		execl(prog, prog, NS_B, v->remote, v->local, qp, b, c, hold ? "hold" : NULL,
		      (char *)NULL);
		_exit(1);
	}
	close(out[1]);
	in->out = out[0];
	return 0;
}

/*
 * Whether the initiator printed a line starting with @want within 60 s; @line
 * holds the last whole line it printed (that one, if so).
 */
static bool initiator_said(struct initiator *in, const char *want, char *line, size_t size)
{
	char buf[128];
	size_t len = 0;
	double end = now() + 60;

	line[0] = '\0';
	while (now() < end && len + 1 < sizeof(buf)) {
		struct pollfd p = { .fd = in->out, .events = POLLIN };

		if (poll(&p, 1, 1000) != 1)
			continue;
		if (read(in->out, &buf[len], 1) != 1)
			break;
		if (buf[len] != '\n') {
			len++;
			continue;
		}
		buf[len] = '\0';
		snprintf(line, size, "%s", buf);
		if (!strncmp(line, want, strlen(want)))
			return true;
		len = 0;
	}
	return false;
}

/* The target's listing record (copied), or a record with qp_num 0. */
static struct rrds_info_xrc_target record_of(int fd, uint32_t qp_num)
{
	struct rrds_info_xrc_target t[INFO_MAX], *r, none = { 0 };
	int n = targets(fd, t);

	r = n < 0 ? NULL : target_of(t, n, qp_num);
	return r ? *r : none;
}

/*
 * Registrants for an in-band case: the test's socket holds the target's
 * first registration, two children the others; each child reports
 * the events it got (fan_child).
 */
static void two_registrants(struct __test_metadata *_metadata, const FIXTURE_VARIANT(xrc) *v,
			    uint32_t qp_num, int want, int report[2][2], pid_t kids[2])
{
	uint32_t ready;

	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, pipe(report[i]));
		kids[i] = spawn();
		ASSERT_LE(0, kids[i]);
		if (kids[i] == 0)
			fan_child(v->local, qp_num, false, want, report[i][1]);
		ASSERT_TRUE(recv_u32(report[i][0], &ready));
	}
}

/* Each registrant got @want LAST_WQE_REACHED events, none synthesized. */
static void registrants_saw_error(struct __test_metadata *_metadata, uint32_t qp_num, int want,
				  int report[2][2], pid_t kids[2])
{
	uint32_t got, event, flags, qp;

	for (int i = 0; i < 2; i++) {
		ASSERT_TRUE(recv_u32(report[i][0], &got));
		EXPECT_EQ(want, (int)got);
		for (uint32_t k = 0; k < got; k++) {
			ASSERT_TRUE(recv_u32(report[i][0], &event));
			ASSERT_TRUE(recv_u32(report[i][0], &flags));
			ASSERT_TRUE(recv_u32(report[i][0], &qp));
			EXPECT_U32(RRDS_XRC_EV_QP_LAST_WQE_REACHED, event);
			EXPECT_U32(0, flags);
			EXPECT_EQ(qp_num, qp);
		}
		EXPECT_EQ(0, child_status(kids[i]));
	}
}

/*
 * The target's initiator has left: no connection, the QP in error, and the
 * driver's error event (where it raises one, else none) at the test's
 * registration on @fd and at the two registrants, once each.
 */
static void initiator_left(struct __test_metadata *_metadata, const FIXTURE_VARIANT(xrc) *v,
			   int fd, uint32_t qp_num, int report[2][2], pid_t kids[2])
{
	struct rrds_xrc_event ev;

	EXPECT_TRUE(WAIT_FOR(30, record_of(fd, qp_num).connections == 0));
	if (v->real_error_event) {
		ASSERT_EQ(1, next_event(fd, &ev, 20000));
		EXPECT_U32(RRDS_XRC_EV_QP_LAST_WQE_REACHED, ev.event);
		EXPECT_U32(0, ev.flags);
		EXPECT_EQ(qp_num, ev.qp_num);
	}
	EXPECT_EQ(0, next_event(fd, &ev, 1000)) TH_LOG("event %u flags %#x", ev.event, ev.flags);
	EXPECT_U32(6, record_of(fd, qp_num).qp_state);	/* error */
	registrants_saw_error(_metadata, qp_num, v->real_error_event ? 1 : 0, report, kids);
}

/*
 * In-band set-up: an initiator in rrds-b connects to a target by naming it
 * and sends; the target counts the bytes. While it is connected a second
 * initiator is refused (busy), as are unknown targets. Killing the
 * initiator's process disconnects it: the QP goes to error, and on rxe the
 * device's own LAST_WQE_REACHED reaches all three registered processes once,
 * not marked synthesized. The next initiator is accepted onto the same QP.
 */
TEST_F(xrc, initiator_connects_in_band)
{
	struct rrds_info_xrc_target r;
	struct initiator first, busy, unknown, second;
	uint32_t qp_num;
	int report[2][2], fd, want = variant->real_error_event ? 1 : 0;
	char line[128];
	pid_t kids[2];

	fd = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xrc_create(fd, &qp_num, NULL));
	two_registrants(_metadata, variant, qp_num, want, report, kids);
	ASSERT_EQ(3, registrations(fd, qp_num));

	ASSERT_EQ(0, initiator_start(&first, variant, qp_num, 1000, 100, true));
	ASSERT_TRUE(initiator_said(&first, "sent ", line, sizeof(line))) TH_LOG("%s", line);
	EXPECT_STREQ("sent 100000", line);
	ASSERT_TRUE(initiator_said(&first, "holding", line, sizeof(line))) TH_LOG("%s", line);
	r = record_of(fd, qp_num);
	ASSERT_EQ(qp_num, r.qp_num);
	EXPECT_EQ(100000ULL, r.bytes_received);
	EXPECT_U32(1, r.connections);
	EXPECT_U32(1, r.accepted);
	EXPECT_U32(variant->connected_state, r.qp_state);

	/* Busy, then unknown: refused with rrds's reasons. */
	ASSERT_EQ(0, initiator_start(&busy, variant, qp_num, 100, 1, false));
	EXPECT_TRUE(initiator_said(&busy, "rejected", line, sizeof(line))) TH_LOG("%s", line);
	EXPECT_EQ(RRDS_XRC_REJECT_BUSY, atoi(line + strlen("rejected ")));
	EXPECT_EQ(3, child_status(busy.pid));
	ASSERT_EQ(0, initiator_start(&unknown, variant, qp_num + 1000, 100, 1, false));
	EXPECT_TRUE(initiator_said(&unknown, "rejected", line, sizeof(line))) TH_LOG("%s", line);
	EXPECT_EQ(RRDS_XRC_REJECT_NO_TARGET, atoi(line + strlen("rejected ")));
	EXPECT_EQ(3, child_status(unknown.pid));

	/* The initiator's process dies: its side disconnects. */
	ASSERT_EQ(0, kill(first.pid, SIGKILL));
	EXPECT_EQ(128 + SIGKILL, child_status(first.pid));
	initiator_left(_metadata, variant, fd, qp_num, report, kids);

	/* The same target takes the next initiator, where the QP can leave error. */
	ASSERT_EQ(0, initiator_start(&second, variant, qp_num, 100, 10, false));
	if (!variant->qp_reusable) {
		EXPECT_TRUE(initiator_said(&second, "rejected", line, sizeof(line)))
			TH_LOG("%s", line);
		EXPECT_EQ(RRDS_XRC_REJECT_FAILED, atoi(line + strlen("rejected ")));
		EXPECT_EQ(3, child_status(second.pid));
		EXPECT_U32(1, record_of(fd, qp_num).accepted);
		close(fd);
		EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
		return;
	}
	ASSERT_TRUE(initiator_said(&second, "sent ", line, sizeof(line))) TH_LOG("%s", line);
	EXPECT_EQ(0, child_status(second.pid));
	r = record_of(fd, qp_num);
	EXPECT_EQ(101000ULL, r.bytes_received);
	EXPECT_U32(2, r.accepted);
	EXPECT_TRUE(WAIT_FOR(30, record_of(fd, qp_num).connections == 0));
	close(fd);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

/* The count named @name in debugfs rrds/objects; -1 if unreadable. */
static int rrds_objects(const char *name)
{
	char buf[256], *at;
	size_t len = strlen(name);

	if (read_file(RRDS_DEBUGFS "/objects", buf, sizeof(buf)) < 0)
		return -1;
	for (at = buf; (at = strstr(at, name)); at += len)
		if ((at == buf || at[-1] == '\n') && at[len] == ' ')
			return atoi(at + len + 1);
	return -1;
}

/* A struct rrds_xrc_remote for the target @qp_num at IPv4 @ip. */
static struct rrds_xrc_remote xrc_remote(const char *ip, uint32_t qp_num)
{
	struct rrds_xrc_remote r = { .qp_num = qp_num };

	r.addr[10] = r.addr[11] = 0xff;
	inet_pton(AF_INET, ip, &r.addr[12]);
	return r;
}

/* RRDS_XRC_CONNECT or RRDS_XRC_DISCONNECT; 0 or -errno. */
static int xrc_remote_op(int fd, int op, const char *ip, uint32_t qp_num)
{
	struct rrds_xrc_remote r = xrc_remote(ip, qp_num);

	return setsockopt(fd, SOL_RDS, op, &r, sizeof(r)) ? -errno : 0;
}

/* Sends @len bytes of @buf through the socket's initiator to @qp_num at @ip; bytes or -errno. */
static ssize_t xrc_send(int fd, const char *ip, uint32_t qp_num, const void *buf, size_t len)
{
	struct rrds_xrc_remote r = xrc_remote(ip, qp_num);
	char control[CMSG_SPACE(sizeof(r))];
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct cmsghdr *c;
	ssize_t n;

	memset(control, 0, sizeof(control));
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_RDS;
	c->cmsg_type = RRDS_CMSG_XRC_SEND;
	c->cmsg_len = CMSG_LEN(sizeof(r));
	memcpy(CMSG_DATA(c), &r, sizeof(r));
	n = sendmsg(fd, &msg, 0);
	return n < 0 ? -errno : n;
}

/*
 * A kernel-side initiator in rrds-b: connects a socket bound to the
 * variant's remote address to @qp_num (reports 0 or the errno), sends @count
 * messages of @size bytes (reports the bytes sent, or the errno negated),
 * then, for each u32 read from @cmd, sends one more message and reports the
 * result the same way, until @cmd closes. Killed by the test to end it.
 */
static void __attribute__((noreturn)) kinit_child(const FIXTURE_VARIANT(xrc) *v, uint32_t qp_num,
						 int count, int size, int report, int cmd)
{
	static char buf[RRDS_XRC_SEND_MAX];
	int64_t sent = 0;
	uint32_t go;
	ssize_t n;
	int fd, r;

	memset(buf, 0x5a, sizeof(buf));
	if (enter_ns(NS_B))
		_exit(30);
	fd = xsock(v->remote);
	if (fd < 0)
		_exit(31);
	r = xrc_remote_op(fd, RRDS_XRC_CONNECT, v->local, qp_num);
	send_u32(report, -r);
	if (r)
		_exit(0);
	for (int i = 0; i < count; i++) {
		n = xrc_send(fd, v->local, qp_num, buf, size);
		if (n < 0) {
			sent = n;
			break;
		}
		sent += n;
	}
	send_u32(report, (uint32_t)sent);
	while (recv_u32(cmd, &go)) {
		n = xrc_send(fd, v->local, qp_num, buf, size);
		send_u32(report, (uint32_t)n);
	}
	_exit(0);
}

/* A running kinit_child: its pid, and the pipes to and from it. */
struct kinit {
	pid_t pid;
	int report;
	int cmd;
};

static int kinit_start(struct kinit *k, const FIXTURE_VARIANT(xrc) *v, uint32_t qp_num, int count,
		       int size)
{
	int report[2], cmd[2];

	if (pipe(report) || pipe(cmd))
		return -1;
	k->pid = spawn();
	if (k->pid < 0)
		return -1;
	if (k->pid == 0) {
		close(report[0]);
		close(cmd[1]);
		kinit_child(v, qp_num, count, size, report[1], cmd[0]);
	}
	close(report[1]);
	close(cmd[0]);
	k->report = report[0];
	k->cmd = cmd[1];
	return 0;
}

/* The next value the child reports, as an int; INT_MIN if none came. */
static int kinit_said(struct kinit *k)
{
	uint32_t v;

	return recv_u32(k->report, &v) ? (int)v : INT_MIN;
}

/*
 * The start of a kernel-initiator case: a target made through the test's
 * socket (*@fd, *@qp_num) with two more processes registered, and a
 * kernel-side initiator in rrds-b that connected to it and sent @count
 * messages of @size bytes, which the target counted.
 */
static void kinit_case_start(struct __test_metadata *_metadata, const FIXTURE_VARIANT(xrc) *v,
			     int want, int *fd, uint32_t *qp_num, int report[2][2], pid_t kids[2],
			     struct kinit *k, int count, int size)
{
	*fd = xsock(v->local);
	ASSERT_LE(0, *fd);
	ASSERT_EQ(0, xrc_create(*fd, qp_num, NULL));
	two_registrants(_metadata, v, *qp_num, want, report, kids);
	ASSERT_EQ(3, registrations(*fd, *qp_num));
	ASSERT_EQ(0, kinit_start(k, v, *qp_num, count, size));
	ASSERT_EQ(0, kinit_said(k));
	/* A blocking send returns once the target's receive has it. */
	ASSERT_EQ(count * size, kinit_said(k));
	EXPECT_TRUE(WAIT_FOR(10, record_of(*fd, *qp_num).bytes_received == (uint64_t)count * size));
	EXPECT_U32(1, record_of(*fd, *qp_num).connections);
}

/*
 * Kernel-side initiators (RRDS_XRC_CONNECT): one in rrds-b connects to a
 * target with three registered processes and sends 100 messages of 1,000 B
 * through RRDS_CMSG_XRC_SEND; the target counts the bytes. Refusals come
 * back as errnos: EBUSY while the target has its initiator, ECONNREFUSED for
 * an unknown target or an address nothing listens on, EISCONN for a second
 * connect of the same socket. Killing the initiator's process disconnects
 * it: the QP goes to error and on rxe the device's LAST_WQE_REACHED reaches
 * all three processes once, not marked synthesized; nothing of the
 * initiator is left (its QP, the count of initiators).
 */
TEST_F(xrc, kernel_initiator_connects_in_band)
{
	static char big[RRDS_XRC_SEND_MAX + 1];
	int report[2][2], fd, probe, want = variant->real_error_event ? 1 : 0;
	struct rrds_info_xrc_target r;
	struct kinit first;
	uint32_t qp_num;
	pid_t kids[2];

	kinit_case_start(_metadata, variant, want, &fd, &qp_num, report, kids, &first, 100, 1000);
	r = record_of(fd, qp_num);
	ASSERT_EQ(qp_num, r.qp_num);
	EXPECT_EQ(100000ULL, r.bytes_received);
	EXPECT_U32(1, r.accepted);
	EXPECT_U32(variant->connected_state, r.qp_state);

	/* Refusals, from rrds-b; the test's process goes back to rrds-a after. */
	ASSERT_EQ(0, enter_ns(NS_B));
	probe = xsock(variant->remote);
	ASSERT_LE(0, probe);
	EXPECT_EQ(-EBUSY, xrc_remote_op(probe, RRDS_XRC_CONNECT, variant->local, qp_num));
	EXPECT_EQ(-ECONNREFUSED,
		  xrc_remote_op(probe, RRDS_XRC_CONNECT, variant->local, qp_num + 1000));
	/* rrds-b's address: no target was made through it, so nothing listens. */
	EXPECT_EQ(-ECONNREFUSED, xrc_remote_op(probe, RRDS_XRC_CONNECT, variant->remote, qp_num));
	EXPECT_EQ(-ENOTCONN, xrc_send(probe, variant->local, qp_num, "x", 1));
	EXPECT_EQ(-ENOENT, xrc_remote_op(probe, RRDS_XRC_DISCONNECT, variant->local, qp_num));
	EXPECT_EQ(-EMSGSIZE, xrc_send(probe, variant->local, qp_num, big, sizeof(big)));
	close(probe);
	ASSERT_EQ(0, enter_ns(NS_A));
	EXPECT_U32(1, record_of(fd, qp_num).accepted);

	/* The initiator's process dies: its socket's close disconnects it. */
	ASSERT_EQ(0, kill(first.pid, SIGKILL));
	EXPECT_EQ(128 + SIGKILL, child_status(first.pid));
	initiator_left(_metadata, variant, fd, qp_num, report, kids);
	EXPECT_TRUE(WAIT_FOR(10, rrds_objects("xrc_initiators") == 0));
	close(fd);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

/*
 * Deleting the initiator's device shuts the kernel-side initiator down
 * before its PD goes: the target sees the disconnect, its QP goes to error
 * and on rxe the device's LAST_WQE_REACHED reaches all three registered
 * processes once; the initiator's next send fails with ENODEV.
 */
TEST_F(xrc, kernel_initiator_device_removed)
{
	int report[2][2], fd, want = variant->real_error_event ? 1 : 0;
	struct kinit k;
	uint32_t qp_num;
	pid_t kids[2];

	kinit_case_start(_metadata, variant, want, &fd, &qp_num, report, kids, &k, 10, 100);

	ASSERT_EQ(0, sh("rdma link del %s_b", variant->kind));
	initiator_left(_metadata, variant, fd, qp_num, report, kids);
	/* Shut down with the device, though its socket still holds it. */
	EXPECT_EQ(0, rrds_objects("xrc_initiators"));
	/* The initiator is down: its next send says why. */
	send_u32(k.cmd, 1);
	EXPECT_EQ(-ENODEV, kinit_said(&k));
	close(k.cmd);
	EXPECT_EQ(0, child_status(k.pid));
	EXPECT_EQ(0, rrds_objects("xrc_initiators"));
	close(fd);
	/* Bring the pair back for the next test, and unload cleanly. */
	ASSERT_EQ(0, pair_up(variant->kind));
	ASSERT_EQ(0, rrds_unload());
}

/*
 * The SRQ limit of an emulated target: with its receives kept from being
 * posted again (debugfs xrc_repost_hold), an initiator's 13th message leaves
 * 3 of its 16 receives posted, under the limit of 4, and the device's own
 * SRQ_LIMIT_REACHED reaches both registered processes once, not marked
 * synthesized.
 */
TEST_F(xrc, srq_limit_reaches_every_registration)
{
	struct rrds_xrc_event ev;
	struct initiator in;
	uint32_t qp_num, ready, got, event, flags, qp;
	int report[2], fd;
	char line[128];
	pid_t kid;

	note_missing_test_hooks();
	keep_srq_limit_events = true;
	fd = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xrc_create(fd, &qp_num, NULL));
	ASSERT_EQ(0, pipe(report));
	kid = spawn();
	ASSERT_LE(0, kid);
	if (kid == 0)
		fan_child(variant->local, qp_num, false, 1, report[1]);
	ASSERT_TRUE(recv_u32(report[0], &ready));
	ASSERT_EQ(2, registrations(fd, qp_num));

	ASSERT_EQ(0, set_hold("xrc_repost_hold", true));
	ASSERT_EQ(0, initiator_start(&in, variant, qp_num, 100, 13, true));
	ASSERT_TRUE(initiator_said(&in, "sent ", line, sizeof(line))) TH_LOG("%s", line);
	EXPECT_STREQ("sent 1300", line);
	ASSERT_EQ(1, next_event(fd, &ev, 20000));
	EXPECT_U32(RRDS_XRC_EV_SRQ_LIMIT_REACHED, ev.event);
	EXPECT_U32(0, ev.flags);
	EXPECT_EQ(qp_num, ev.qp_num);
	EXPECT_EQ(0, next_event(fd, &ev, 1000)) TH_LOG("event %u flags %#x", ev.event, ev.flags);
	ASSERT_TRUE(recv_u32(report[0], &got));
	ASSERT_EQ(1, (int)got);
	ASSERT_TRUE(recv_u32(report[0], &event));
	ASSERT_TRUE(recv_u32(report[0], &flags));
	ASSERT_TRUE(recv_u32(report[0], &qp));
	EXPECT_U32(RRDS_XRC_EV_SRQ_LIMIT_REACHED, event);
	EXPECT_U32(0, flags);
	EXPECT_EQ(qp_num, qp);
	EXPECT_EQ(0, child_status(kid));
	EXPECT_EQ(1300ULL, record_of(fd, qp_num).bytes_received);

	ASSERT_EQ(0, set_hold("xrc_repost_hold", false));
	ASSERT_EQ(0, kill(in.pid, SIGKILL));
	EXPECT_EQ(128 + SIGKILL, child_status(in.pid));
	close(fd);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

/* Whether @path contains @needle (read whole). */
static bool file_has(const char *path, const char *needle)
{
	char buf[8192];

	return read_file(path, buf, sizeof(buf)) > 0 && strstr(buf, needle);
}

/*
 * The rrds command: `xrc create` holds a target and prints its events,
 * `xrc watch` registers with it, `xrc list` shows both registrations,
 * `xrc inject` reaches both, and both unregister as they end.
 */
TEST_F(xrc, cli_lifecycle)
{
	const char *create_out = "/tmp/rrds-xrc-create.out", *watch_out = "/tmp/rrds-xrc-watch.out";
	char tool[512], out[4096], want[128], line[256];
	uint32_t qp_num = 0;
	const char *p;

	snprintf(tool, sizeof(tool), "%s/../tools/target/release/rrds", selftests_dir());
	ASSERT_EQ(0, access(tool, X_OK)) TH_LOG("%s not built", tool);
	unlink(create_out);
	unlink(watch_out);
	ASSERT_EQ(0, sh("(%s xrc create -I %s -c 2 -d 60; echo exit=$?) >%s 2>&1 &", tool,
			variant->local, create_out));
	ASSERT_TRUE(WAIT_FOR(30, file_has(create_out, "created qp_num=")));
	ASSERT_LT(0, read_file(create_out, out, sizeof(out)));
	p = strstr(out, "created qp_num=");
	ASSERT_EQ(1, sscanf(p, "created qp_num=%u", &qp_num));
	EXPECT_NE(NULL, strstr(out, "backend=emulated"));
	ASSERT_EQ(0, sh("(%s xrc watch -I %s -c 2 -d 60 %u; echo exit=$?) >%s 2>&1 &", tool,
			variant->local, qp_num, watch_out));
	ASSERT_TRUE(WAIT_FOR(30, file_has(watch_out, "registered qp_num=")));

	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s xrc list", tool));
	snprintf(line, sizeof(line), "%u", qp_num);
	p = strstr(out, line);
	ASSERT_NE(NULL, p) TH_LOG("list: %s", out);
	EXPECT_NE(NULL, strstr(p, "emulated"));
	EXPECT_NE(NULL, strstr(p, " 2 ")) TH_LOG("list: %s", out);

	ASSERT_EQ(0, sh("%s xrc inject -I %s %u", tool, variant->local, qp_num));
	ASSERT_EQ(0, sh("%s xrc inject -I %s %u --event comm_est", tool, variant->local, qp_num));
	EXPECT_NE(0, sh("%s xrc inject -I %s %u --event bogus 2>/dev/null", tool, variant->local,
			qp_num));

	snprintf(want, sizeof(want), "unregistered qp_num=%u", qp_num);
	EXPECT_TRUE(WAIT_FOR(30, file_has(create_out, "exit=0")));
	EXPECT_TRUE(WAIT_FOR(30, file_has(watch_out, "exit=0")));
	for (int i = 0; i < 2; i++) {
		const char *f = i ? watch_out : create_out;

		ASSERT_LT(0, read_file(f, out, sizeof(out)));
		snprintf(line, sizeof(line), "event qp_num=%u event=last_wqe_reached%s", qp_num,
			 variant->real_error_event ? "\n" : " synthesized\n");
		EXPECT_NE(NULL, strstr(out, line)) TH_LOG("%s: %s", f, out);
		snprintf(line, sizeof(line), "event qp_num=%u event=comm_est synthesized\n", qp_num);
		EXPECT_NE(NULL, strstr(out, line)) TH_LOG("%s: %s", f, out);
		EXPECT_NE(NULL, strstr(out, want)) TH_LOG("%s: %s", f, out);
	}
	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s xrc list", tool));
	EXPECT_EQ(NULL, strstr(out, "emulated")) TH_LOG("list: %s", out);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

/*
 * rrds xrc send: from rrds-b, a kernel-side initiator connects to a target,
 * sends 5 messages of 100 B (counted by the target) and disconnects (the
 * target sees it leave). A message past a receive buffer is refused with
 * EMSGSIZE before anything is sent, and the command fails.
 */
TEST_F(xrc, cli_sends_through_a_kernel_initiator)
{
	char tool[512], out[4096], want[128];
	uint32_t qp_num;
	int fd;

	snprintf(tool, sizeof(tool), "%s/../tools/target/release/rrds", selftests_dir());
	ASSERT_EQ(0, access(tool, X_OK)) TH_LOG("%s not built", tool);
	fd = xsock(variant->local);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xrc_create(fd, &qp_num, NULL));
	ASSERT_EQ(0, sh_out(out, sizeof(out), "ip netns exec %s %s xrc send -I %s %s %u -c 5 -s 100",
			    NS_B, tool, variant->remote, variant->local, qp_num))
		TH_LOG("%s", out);
	snprintf(want, sizeof(want), "sent qp_num=%u messages=5 bytes=500", qp_num);
	EXPECT_NE(NULL, strstr(out, want)) TH_LOG("%s", out);
	EXPECT_TRUE(WAIT_FOR(10, record_of(fd, qp_num).bytes_received == 500));
	EXPECT_U32(1, record_of(fd, qp_num).accepted);
	EXPECT_TRUE(WAIT_FOR(30, record_of(fd, qp_num).connections == 0));
	if (variant->qp_reusable) {
		EXPECT_NE(0, sh_out(out, sizeof(out), "ip netns exec %s %s xrc send -I %s %s %u -s 4097 2>&1",
				    NS_B, tool, variant->remote, variant->local, qp_num));
		EXPECT_NE(NULL, strstr(out, "Message too long")) TH_LOG("%s", out);
		EXPECT_EQ(500ULL, record_of(fd, qp_num).bytes_received);
	}
	close(fd);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

/* Shared by the stress test's processes. */
struct stress_shared {
	int stop;		/* set by the test: processes exit */
	int ops;		/* operations done by every process */
	int failures;		/* unexpected results */
	char why[128];
};

#define STRESS_TARGETS	4
#define STRESS_PROCS	64

static uint64_t next64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * A stress process: random register / unregister / close / event reads on
 * the targets, checking each errno against its own view of its registrations.
 */
static void __attribute__((noreturn)) stress_child(const char *ip, const uint32_t *qps,
						   struct stress_shared *sh_, int goal, uint64_t seed)
{
	bool registered[STRESS_TARGETS] = { false };
	struct rrds_xrc_event ev;
	int fd = xsock(ip);

	(void)goal;
	while (!__atomic_load_n(&sh_->stop, __ATOMIC_RELAXED)) {
		uint64_t r = next64(&seed);
		int i = r % STRESS_TARGETS, rc, want;

		switch ((r >> 8) % 8) {
		case 0: case 1: case 2:
			rc = xrc_qp_op(fd, RRDS_XRC_REGISTER, qps[i]);
			want = registered[i] ? -EALREADY : 0;
			registered[i] = true;
			break;
		case 3: case 4:
			rc = xrc_qp_op(fd, RRDS_XRC_UNREGISTER, qps[i]);
			want = registered[i] ? 0 : -ENOENT;
			registered[i] = false;
			break;
		case 5:
			close(fd);
			fd = xsock(ip);
			memset(registered, 0, sizeof(registered));
			rc = want = fd < 0 ? -1 : 0;
			break;
		default:
			while ((rc = next_event(fd, &ev, 0)) == 1)
				;
			want = 0;
			break;
		}
		if (rc != want) {
			if (__atomic_fetch_add(&sh_->failures, 1, __ATOMIC_RELAXED) == 0)
				snprintf(sh_->why, sizeof(sh_->why),
					 "op %d on target %d: %d, expected %d",
					 (int)((r >> 8) % 8), i, rc, want);
		}
		__atomic_fetch_add(&sh_->ops, 1, __ATOMIC_RELAXED);
	}
	_exit(0);
}

/*
 * 64 processes registering, unregistering, closing and being killed at
 * random while events are injected: every errno as expected, and in the end
 * only the test's own registrations, then nothing.
 */
TEST_F_TIMEOUT(xrc, stress_random_processes, 900)
{
	struct rrds_info_xrc_target t[INFO_MAX];
	struct stress_shared *shared;
	uint32_t qps[STRESS_TARGETS];
	pid_t kids[STRESS_PROCS];
	const int goal = 10000, min_kills = 16;
	uint64_t seed = 0x5eed;
	int fd, kills = 0, n;
	double limit = now() + 600;

	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	ASSERT_NE(MAP_FAILED, shared);
	fd = xsock(variant->local);
	ASSERT_LE(0, fd);
	for (int i = 0; i < STRESS_TARGETS; i++)
		ASSERT_EQ(0, xrc_create(fd, &qps[i], NULL));
	for (int i = 0; i < STRESS_PROCS; i++) {
		kids[i] = spawn();
		ASSERT_LE(0, kids[i]);
		if (kids[i] == 0)
			stress_child(variant->local, qps, shared, goal, 0x9e3779b97f4a7c15ull * (i + 1));
	}
	/* Until both enough operations and enough kills happened. */
	while ((__atomic_load_n(&shared->ops, __ATOMIC_RELAXED) < goal || kills < min_kills) &&
	       now() < limit) {
		uint64_t r = next64(&seed);
		int k = r % STRESS_PROCS;

		ASSERT_EQ(0, xrc_inject(fd, qps[(r >> 8) % STRESS_TARGETS], RRDS_XRC_INJECT_EVENT,
					RRDS_XRC_EV_COMM_EST));
		if ((r >> 16) % 4 == 0) {
			/* Kill one and start another in its place. */
			kill(kids[k], SIGKILL);
			waitpid(kids[k], NULL, 0);
			kills++;
			kids[k] = spawn();
			ASSERT_LE(0, kids[k]);
			if (kids[k] == 0)
				stress_child(variant->local, qps, shared, goal, r | 1);
		}
		usleep(20000);
		/* Our own events: keep reading so our queue does not just overflow. */
		{
			struct rrds_xrc_event ev;

			while (next_event(fd, &ev, 0) == 1)
				;
		}
	}
	__atomic_store_n(&shared->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < STRESS_PROCS; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	TH_LOG("%d operations, %d processes killed", shared->ops, kills);
	EXPECT_LE(goal, shared->ops);
	EXPECT_LE(min_kills, kills);
	EXPECT_EQ(0, shared->failures) TH_LOG("%s", shared->why);
	/* Only the test's own registration is left on each target. */
	for (int i = 0; i < STRESS_TARGETS; i++) {
		bool alone = WAIT_FOR(10, registrations(fd, qps[i]) == 1);

		EXPECT_TRUE(alone) TH_LOG("target %d", i);
	}
	for (int i = 0; i < STRESS_TARGETS; i++)
		EXPECT_EQ(0, xrc_qp_op(fd, RRDS_XRC_UNREGISTER, qps[i]));
	n = targets(fd, t);
	EXPECT_EQ(0, n);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
	close(fd);
	munmap(shared, sizeof(*shared));
	/* Nothing pins the module: everything was released. */
	EXPECT_EQ(0, rrds_unload());
}

TEST_HARNESS_MAIN
