/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the rrds selftests: running fixture commands, loading the
 * module under test, reading files. Tests include this after
 * kselftest_harness.h.
 */
#ifndef RRDS_TEST_H
#define RRDS_TEST_H

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <linux/capability.h>

#define RRDS_DEBUGFS "/sys/kernel/debug/rrds"

/*
 * Under TCG with KASAN and lockdep, creating an RDMA device takes ~5 s and
 * every spawned process ~0.5 s: the harness's 30 s default is too short.
 */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 300

/* Runs a shell command; returns its exit status, or -1 if it did not exit. */
static inline int __attribute__((format(printf, 1, 2))) sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int status;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	status = system(cmd);
	if (status == -1 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Runs a shell command and captures its stdout (NUL terminated, truncated). */
static inline int __attribute__((format(printf, 3, 4)))
sh_out(char *out, size_t size, const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	size_t len = 0;
	FILE *p;
	int status;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (len + 1 < size) {
		size_t n = fread(out + len, 1, size - 1 - len, p);

		if (!n)
			break;
		len += n;
	}
	out[len] = '\0';
	status = pclose(p);
	if (status == -1 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Reads a whole (small) file; returns its length or -errno. */
static inline ssize_t read_file(const char *path, char *buf, size_t size)
{
	ssize_t len = 0, n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -errno;
	while ((size_t)len + 1 < size &&
	       (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	if (n < 0)
		len = -errno;
	close(fd);
	if (len >= 0)
		buf[len] = '\0';
	return len;
}

/* Monotonic seconds. */
static inline double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Evaluates @cond every 100 ms until it holds or @secs pass; whether it held. */
#define WAIT_FOR(secs, cond) ({						\
	double __end = now() + (secs);					\
	bool __held;							\
	while (!(__held = (cond)) && now() < __end)			\
		usleep(100000);						\
	__held;								\
})

/*
 * Logs rrds's IB links and the rdma_cm ids and QPs, for a link that hangs
 * on, and the kernel stacks of the tasks inside rrds, rdma_cm or ib_cm
 * (a handler held up shows there).
 */
static inline void log_ib_links(void)
{
	fflush(stdout);
	sh("sed 's/^/# ib_links: /' %s/ib_links; rdma resource show cm_id | sed 's/^/# /'; "
	   "rdma resource show qp | sed 's/^/# /'; "
	   "for t in /proc/[0-9]*/task/[0-9]*; do s=$(cat $t/stack 2>/dev/null); "
	   "case \"$s\" in *rrds*|*rdma_*|*cma_*|*cm_*) "
	   "echo \"# stack of ${t#/proc/} ($(cat $t/comm 2>/dev/null)):\"; "
	   "echo \"$s\" | sed 's/^/#   /';; esac; done", RRDS_DEBUGFS);
}

/* Moves the calling thread into network namespace @ns (/run/netns/@ns); 0 or -errno. */
static inline int enter_ns(const char *ns)
{
	char path[64];
	int fd, rc;

	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = setns(fd, CLONE_NEWNET) ? -errno : 0;
	close(fd);
	return rc;
}

/*
 * RC QPs on the devices <kind>_a and <kind>_b, per rdma(8): in the test VM
 * only rrds makes them (connections through rdma_cm, XRC targets itself).
 * -1 if rdma fails.
 */
/* Drops capability @cap from the calling thread's effective set; 0 or -errno. */
static inline int drop_capability(int cap)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -errno;
	d[cap / 32].effective &= ~(1u << (cap % 32));
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

static inline int rc_qps(const char *kind)
{
	char out[32];

	if (sh_out(out, sizeof(out),
		   "qps=$(rdma resource show qp) || exit 2; "
		   "echo \"$qps\" | grep -E '^link %s_[ab]/' | grep -c ' type RC '; exit 0", kind))
		return -1;
	return atoi(out);
}

static inline const char *rrds_ko(void)
{
	const char *ko = getenv("RRDS_KO");

	return ko ? ko : "../rrds.ko";
}

static inline const char *selftests_dir(void)
{
	const char *dir = getenv("RRDS_SELFTESTS");

	return dir ? dir : ".";
}

static inline int fixture(const char *what)
{
	return sh("%s/fixtures.sh %s", selftests_dir(), what);
}

static inline int rrds_loaded(void)
{
	struct stat st;

	return stat("/sys/module/rrds", &st) == 0;
}

/* Loads rrds.ko with finit_module, as insmod does; returns 0 or -errno. */
static inline int rrds_load(void)
{
	int fd = open(rrds_ko(), O_RDONLY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, "", 0);
	ret = ret ? -errno : 0;
	close(fd);
	return ret;
}

/*
 * Brings the <kind> device pair up (fixtures.sh <kind>-up, idempotent) and
 * loads rrds if it is not loaded; 0 or -1.
 */
static inline int pair_up_loaded(const char *kind)
{
	char up[16];

	snprintf(up, sizeof(up), "%s-up", kind);
	if (fixture(up))
		return -1;
	return rrds_loaded() ? 0 : rrds_load();
}

/* Unloads rrds; returns 0 or -errno. */
static inline int rrds_unload(void)
{
	return syscall(SYS_delete_module, "rrds", O_NONBLOCK) ? -errno : 0;
}

/* Fixture setup: a test starts with rrds not loaded, whatever the last one left. */
static inline int rrds_ensure_unloaded(void)
{
	return rrds_loaded() ? rrds_unload() : 0;
}

/* A fixture with no state whose setup makes sure rrds is loaded. */
#define RRDS_LOADED_FIXTURE(name)					\
	FIXTURE(name) {							\
		int unused;						\
	};								\
	FIXTURE_SETUP(name)						\
	{								\
		if (!rrds_loaded())					\
			ASSERT_EQ(0, rrds_load());			\
	}								\
	FIXTURE_TEARDOWN(name)						\
	{								\
	}

#endif /* RRDS_TEST_H */
