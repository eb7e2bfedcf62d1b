// SPDX-License-Identifier: GPL-2.0
/*
 * Memory registration (Documentation/userspace-api.rst, "Memory
 * registration"), on rxe and on siw: RDS_GET_MR works on an unconnected
 * socket through the device's registration QP, cookies carry the offset,
 * keys change on every reuse of a pooled MR, RDS_FREE_MR invalidates,
 * every bad input gets upstream's errno, and closing or many processes
 * registering at once leave nothing pinned, registered or connected.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/capability.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_socket.h"

#define NS_A	"rrds-a"
#define MIB	(1u << 20)
#define PAGE	4096u

FIXTURE(mr) {
	int qps0;	/* RC QPs on the pair's devices as the test starts */
	char *buf;	/* 2 MiB + 2 pages, mapped read-write */
	size_t buf_len;
};

FIXTURE_VARIANT(mr) {
	const char *kind;	/* fixtures.sh <kind>-up; devices <kind>_a, <kind>_b */
	const char *local;	/* rrds-a's address, on <kind>_a */
	unsigned int max_pages;	/* the device's fast-reg page list limit */
};

FIXTURE_VARIANT_ADD(mr, rxe) {
	.kind = "rxe", .local = "10.254.1.1", .max_pages = 512,
};

FIXTURE_VARIANT_ADD(mr, siw) {
	.kind = "siw", .local = "10.254.2.1", .max_pages = 256,
};

FIXTURE_SETUP(mr)
{
	char up[16];

	snprintf(up, sizeof(up), "%s-up", variant->kind);
	ASSERT_EQ(0, fixture(up));
	if (!rrds_loaded())
		ASSERT_EQ(0, rrds_load());
	self->qps0 = rc_qps(variant->kind);
	ASSERT_LE(0, self->qps0);
	ASSERT_EQ(0, enter_ns(NS_A));
	self->buf_len = 2 * MIB + 2 * PAGE;
	self->buf = mmap(NULL, self->buf_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->buf);
	memset(self->buf, 0x5a, self->buf_len);
}

FIXTURE_TEARDOWN(mr)
{
	munmap(self->buf, self->buf_len);
}

/* A global counter by name (RDS_INFO_COUNTERS); -1 if missing. */
static long long counter(const char *name)
{
	struct rds_info_counter c[128];
	socklen_t len = sizeof(c);
	int fd = rds_socket(), each;
	long long value = -1;

	if (fd < 0)
		return -1;
	each = getsockopt(fd, SOL_RDS, RDS_INFO_COUNTERS, c, &len);
	close(fd);
	if (each != sizeof(c[0]))
		return -1;
	for (unsigned int i = 0; i < len / sizeof(c[0]); i++)
		if (!strncmp((char *)c[i].name, name, sizeof(c[i].name)))
			value = c[i].value;
	return value;
}

static long long pinned_now(void)
{
	return counter("mr_pages_pinned") - counter("mr_pages_unpinned");
}

/* RDS_GET_MR of @len bytes at @addr; 0 or -errno, the cookie in *@cookie. */
static int get_mr(int fd, const void *addr, uint64_t len, uint64_t flags, uint64_t *cookie)
{
	struct rds_get_mr_args a = {
		.vec = { .addr = (uintptr_t)addr, .bytes = len },
		.cookie_addr = (uintptr_t)cookie,
		.flags = flags,
	};

	return setsockopt(fd, SOL_RDS, RDS_GET_MR, &a, sizeof(a)) ? -errno : 0;
}

static int free_mr(int fd, uint64_t cookie, uint64_t flags)
{
	struct rds_free_mr_args f = { .cookie = cookie, .flags = flags };

	return setsockopt(fd, SOL_RDS, RDS_FREE_MR, &f, sizeof(f)) ? -errno : 0;
}

/* Where the registration lives does not matter: unbound is ENOTCONN, loopback EOPNOTSUPP. */
TEST_F(mr, get_mr_needs_an_rdma_bound_socket)
{
	int unbound = rds_socket(), loop = bound_socket("127.0.0.1", 0);
	int fd = bound_socket(variant->local, 0);
	uint64_t cookie = 0;

	ASSERT_LE(0, unbound);
	ASSERT_LE(0, loop);
	ASSERT_LE(0, fd);
	EXPECT_EQ(-ENOTCONN, get_mr(unbound, self->buf, 100, 0, &cookie));
	EXPECT_EQ(-EINVAL, free_mr(unbound, 1, 0));
	EXPECT_EQ(-EINVAL, free_mr(unbound, 0, 0));
	EXPECT_EQ(-EOPNOTSUPP, get_mr(loop, self->buf, 100, 0, &cookie));
	EXPECT_EQ(-EINVAL, free_mr(loop, 0, 0));
	/* Bound, never connected: the registration QP makes it work. */
	ASSERT_EQ(0, get_mr(fd, self->buf + 100, 1000, 0, &cookie));
	EXPECT_NE(0u, (uint32_t)cookie);
	EXPECT_EQ(100u, cookie >> 32);
	EXPECT_EQ(0, free_mr(fd, cookie, RDS_RDMA_INVALIDATE));
	EXPECT_EQ(-EINVAL, free_mr(fd, cookie, 0));
	close(unbound);
	close(loop);
	close(fd);
}

TEST_F(mr, sizes_offsets_and_limits)
{
	static const struct { size_t off, len; } cases[] = {
		{ 0, 1 }, { 0, PAGE - 1 }, { 0, PAGE }, { 1, PAGE }, { 0, 64 * 1024 },
		{ 123, 64 * 1024 + 7 }, { 0, MIB }, { PAGE - 1, 2 }, { 77, MIB },
	};
	int fd = bound_socket(variant->local, 0);
	long long reg0 = counter("mr_registered");
	int ok = 0;

	ASSERT_LE(0, fd);
	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *at = self->buf + cases[i].off;
		size_t pages = (cases[i].off + cases[i].len + PAGE - 1) / PAGE;
		uint64_t cookie = 0;
		int want = pages > variant->max_pages ? -EMSGSIZE : 0;

		EXPECT_EQ(want, get_mr(fd, at, cases[i].len, 0, &cookie)) {
			TH_LOG("case %u: %zu bytes at offset %zu", i, cases[i].len, cases[i].off);
		}
		if (want)
			continue;
		ok++;
		EXPECT_EQ(cases[i].off % PAGE, cookie >> 32);
		EXPECT_EQ(0, free_mr(fd, cookie, 0));
	}
	EXPECT_EQ(reg0 + ok, counter("mr_registered"));
	/* More than a message's worth (upstream's RDS_MAX_MSG_SIZE + a page). */
	EXPECT_EQ(-EMSGSIZE, get_mr(fd, self->buf + 1, MIB + PAGE, 0, NULL));
	EXPECT_EQ(0, free_mr(fd, 0, 0));
	EXPECT_TRUE(WAIT_FOR(10, pinned_now() == 0));
	close(fd);
}

static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -errno;
	d[0].effective &= ~(1u << CAP_IPC_LOCK);
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

TEST_F(mr, bad_input)
{
	struct rds_get_mr_args a = { .vec = { .addr = (uintptr_t)self->buf, .bytes = 10 } };
	struct rds_get_mr_for_dest_args d = { .vec = a.vec };
	int fd = bound_socket(variant->local, 0);
	char *hole;
	uint64_t cookie;
	pid_t pid;
	int status;

	ASSERT_LE(0, fd);
	/* Option lengths must be exact. */
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, RDS_GET_MR, &a, sizeof(a) - 1)));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, RDS_GET_MR, &d, sizeof(d))));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, RDS_GET_MR_FOR_DEST, &a, sizeof(a))));
	EXPECT_EQ(-EINVAL, ERR(setsockopt(fd, SOL_RDS, RDS_FREE_MR, &a, 8)));
	/* Empty, wrapping and over-4-GiB ranges. */
	EXPECT_EQ(-EINVAL, get_mr(fd, self->buf, 0, 0, &cookie));
	EXPECT_EQ(-EINVAL, get_mr(fd, (void *)(uintptr_t)-4096, 8192, 0, &cookie));
	EXPECT_EQ(-EINVAL, get_mr(fd, self->buf, (1ull << 32) + 1, 0, &cookie));
	/* Unmapped memory, and an unwritable cookie address (the MR is undone). */
	hole = mmap(NULL, 2 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, hole);
	EXPECT_EQ(-EFAULT, get_mr(fd, hole, 100, 0, &cookie));
	EXPECT_EQ(-EFAULT, get_mr(fd, self->buf, 100, 0, (uint64_t *)hole));
	munmap(hole, 2 * PAGE);
	EXPECT_TRUE(WAIT_FOR(10, pinned_now() == 0));
	/* GET_MR_FOR_DEST ignores the destination, as upstream. */
	d.cookie_addr = (uintptr_t)&cookie;
	EXPECT_EQ(0, ERR(setsockopt(fd, SOL_RDS, RDS_GET_MR_FOR_DEST, &d, sizeof(d))));
	EXPECT_EQ(0, free_mr(fd, cookie, 0));
	/* Unknown cookies. */
	EXPECT_EQ(-EINVAL, free_mr(fd, 0x12345678, 0));
	EXPECT_EQ(-EINVAL, free_mr(fd, cookie, 0));

	/* RLIMIT_MEMLOCK, as mlock: 0 without CAP_IPC_LOCK is EPERM, past it ENOMEM. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rlimit none = { 0, 0 }, small = { 64 * 1024, 64 * 1024 };

		if (drop_ipc_lock())
			_exit(10);
		if (setrlimit(RLIMIT_MEMLOCK, &none))
			_exit(11);
		if (get_mr(fd, self->buf, 100, 0, &cookie) != -EPERM)
			_exit(12);
		if (setrlimit(RLIMIT_MEMLOCK, &small))
			_exit(13);
		if (get_mr(fd, self->buf, 128 * 1024, 0, &cookie) != -ENOMEM)
			_exit(14);
		if (get_mr(fd, self->buf, 32 * 1024, 0, &cookie) || free_mr(fd, cookie, 0))
			_exit(15);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_TRUE(WAIT_FOR(10, pinned_now() == 0));
	close(fd);
}

/* A pooled MR comes back with its key byte moved on: old cookies never match again. */
TEST_F(mr, reuse_changes_the_key)
{
	int fd = bound_socket(variant->local, 0);
	long long hits0 = counter("mr_pool_hit");
	uint32_t seen[64];
	int n = 0;

	ASSERT_LE(0, fd);
	for (int i = 0; i < 64; i++) {
		uint64_t cookie;

		ASSERT_EQ(0, get_mr(fd, self->buf, 3 * PAGE, 0, &cookie));
		seen[n++] = (uint32_t)cookie;
		ASSERT_EQ(0, free_mr(fd, cookie, RDS_RDMA_INVALIDATE));
	}
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			EXPECT_NE(seen[i], seen[j]);
	EXPECT_LE(hits0 + 60, counter("mr_pool_hit"));
	close(fd);
}

/* Closing frees every MR; the last socket takes the registration QP down. */
TEST_F(mr, close_releases_everything)
{
	int fd = bound_socket(variant->local, 0), other = bound_socket(variant->local, 0);
	long long inv0 = counter("mr_invalidated");
	uint64_t cookie;

	ASSERT_LE(0, fd);
	ASSERT_LE(0, other);
	for (int i = 0; i < 20; i++)
		ASSERT_EQ(0, get_mr(fd, self->buf + i * 10 * PAGE, 9 * PAGE, 0, &cookie));
	ASSERT_EQ(0, get_mr(other, self->buf, PAGE, RDS_RDMA_INVALIDATE, &cookie));
	EXPECT_EQ(20 * 9 + 1, pinned_now());
	/* The registration QP pair (active and passive ends). */
	EXPECT_EQ(self->qps0 + 2, rc_qps(variant->kind));
	close(fd);
	EXPECT_TRUE(WAIT_FOR(10, pinned_now() == 1));
	EXPECT_LE(inv0 + 20, counter("mr_invalidated"));
	EXPECT_EQ(self->qps0 + 2, rc_qps(variant->kind));
	EXPECT_EQ(0, free_mr(other, cookie, 0));
	EXPECT_EQ(0, pinned_now());
	close(other);
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

/*
 * Removing the device deregisters every MR on it at once; sockets keep the
 * pinned pages until they free or close, and the module unloads after.
 */
TEST_F(mr, device_removal_deregisters_and_frees_on_close)
{
	int fd = bound_socket(variant->local, 0);
	long long stale0 = counter("mr_stale");
	uint64_t cookie[3];

	ASSERT_LE(0, fd);
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, get_mr(fd, self->buf + i * 4 * PAGE, 4 * PAGE, 0, &cookie[i]));
	ASSERT_EQ(12, pinned_now());
	ASSERT_EQ(0, sh("rdma link del %s_a", variant->kind));
	EXPECT_LE(stale0 + 3, counter("mr_stale"));
	EXPECT_EQ(12, pinned_now());
	EXPECT_EQ(0, free_mr(fd, cookie[0], RDS_RDMA_INVALIDATE));
	EXPECT_EQ(8, pinned_now());
	EXPECT_NE(0, get_mr(fd, self->buf, PAGE, 0, &cookie[0]));
	close(fd);
	EXPECT_TRUE(WAIT_FOR(10, pinned_now() == 0));
	/* Bring the pair back for the next test, and unload cleanly. */
	ASSERT_EQ(0, fixture(variant->kind[0] == 'r' ? "rxe-up" : "siw-up"));
	ASSERT_EQ(0, rrds_unload());
}

/* Many processes register and free at once: every cookie is theirs, nothing is left. */
TEST_F_TIMEOUT(mr, processes_register_at_once, 600)
{
	enum { PROCS = 8, ROUNDS = 400 };
	long long reg0 = counter("mr_registered");
	pid_t pids[PROCS];

	for (int p = 0; p < PROCS; p++) {
		pids[p] = fork();
		ASSERT_LE(0, pids[p]);
		if (pids[p] == 0) {
			int fd = bound_socket(variant->local, 0);
			uint64_t held[8] = { 0 };

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (fd < 0)
				_exit(20);
			srand(p + 1);
			for (int r = 0; r < ROUNDS; r++) {
				int slot = rand() % 8;
				size_t off = (rand() % 256) * PAGE + rand() % PAGE;
				size_t len = 1 + rand() % (64 * 1024);

				if (held[slot]) {
					if (free_mr(fd, held[slot], rand() % 2 ? RDS_RDMA_INVALIDATE : 0))
						_exit(21);
					if (free_mr(fd, held[slot], 0) != -EINVAL)
						_exit(22);
					held[slot] = 0;
				} else if (get_mr(fd, self->buf + off, len, 0, &held[slot])) {
					_exit(23);
				} else if ((held[slot] >> 32) != off % PAGE) {
					_exit(24);
				}
			}
			/* Half free what they hold, half leave it to close. */
			if (p % 2)
				for (int s = 0; s < 8; s++)
					if (held[s] && free_mr(fd, held[s], 0))
						_exit(25);
			close(fd);
			_exit(0);
		}
	}
	for (int p = 0; p < PROCS; p++) {
		int status;

		ASSERT_EQ(pids[p], waitpid(pids[p], &status, 0));
		EXPECT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status)) {
			TH_LOG("process %d", p);
		}
	}
	EXPECT_LE(reg0 + PROCS * ROUNDS / 4, counter("mr_registered"));
	EXPECT_TRUE(WAIT_FOR(10, pinned_now() == 0));
	EXPECT_TRUE(WAIT_FOR(10, rc_qps(variant->kind) == self->qps0));
}

TEST_HARNESS_MAIN
