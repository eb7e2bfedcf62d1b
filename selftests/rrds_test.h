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
#include <sys/utsname.h>
#include <unistd.h>
#include <fcntl.h>
#include <dirent.h>
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

/*
 * Kernel workers running an rrds work item right now (their comm ends in
 * "+rrds", the module's workqueue), or only those of them in uninterruptible
 * sleep (state D), which the load average counts. From /proc without a fork:
 * ps takes a second or more per call in the test VM.
 */
static inline int rrds_busy_workers(bool uninterruptible_only)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	int busy = 0;

	if (!proc)
		return -1;
	while ((e = readdir(proc))) {
		char path[300], stat[256], *comm_end;
		ssize_t len;
		int fd;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		len = read(fd, stat, sizeof(stat) - 1);
		close(fd);
		if (len <= 0)
			continue;
		stat[len] = 0;
		/* "pid (comm) S ...": comm is a worker's name and its workqueue's. */
		comm_end = strrchr(stat, ')');
		if (!comm_end || comm_end - stat < 5 || strncmp(comm_end - 5, "+rrds", 5))
			continue;
		if (!uninterruptible_only || comm_end[2] == 'D')
			busy++;
	}
	closedir(proc);
	return busy;
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
 * Logs rrds's IB links, the rdma_cm ids and QPs, (iWARP) the TCP sockets on
 * RDS's port in each namespace, and the kernel stacks of the tasks inside
 * rrds, rdma_cm or ib_cm (a handler held up shows there) or unregistering a
 * device: for a link or a device removal that hangs on.
 */
static inline void log_ib_links(void)
{
	fflush(stdout);
	sh("sed 's/^/# ib_links: /' %s/ib_links; rdma resource show cm_id | sed 's/^/# /'; "
	   "rdma resource show qp | sed 's/^/# /'; "
	   "for ns in $(ip netns list | cut -d' ' -f1); do "
	   "ip netns exec $ns ss -tanoi 'sport = :18634 or dport = :18634' | sed \"s/^/# tcp $ns: /\"; "
	   "done; "
	   "for t in /proc/[0-9]*/task/[0-9]*; do s=$(cat $t/stack 2>/dev/null); "
	   "case \"$s\" in *rrds*|*rdma_*|*cma_*|*cm_*|*ib_unregister*) "
	   "echo \"# stack of ${t#/proc/} ($(cat $t/comm 2>/dev/null)):\"; "
	   "echo \"$s\" | sed 's/^/#   /';; esac; done", RRDS_DEBUGFS);
}

/* The number in environment variable @name (any base strtol reads), or @def when unset or empty. */
static inline long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : def;
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

/* Protection domains rrds holds on @dev (all devices if NULL), per rdma(8). */
static inline int rrds_pds(const char *dev)
{
	char out[32];

	if (sh_out(out, sizeof(out),
		   "rdma resource show pd | grep '^dev %s ' | grep -c 'comm \\[rrds\\]'",
		   dev ? dev : "[^ ]*") < 0)
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

/* Whether a module list of the running kernel (modules.dep, .builtin) names @module. */
static inline bool module_listed(const char *list, const char *module)
{
	char path[256], line[512], want[64];
	struct utsname uts;
	bool found = false;
	FILE *f;

	if (uname(&uts))
		return false;
	snprintf(path, sizeof(path), "/lib/modules/%s/%s", uts.release, list);
	snprintf(want, sizeof(want), "/%s.ko", module);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, ":\n")] = 0;
		found = strstr(line, want) != NULL;
	}
	fclose(f);
	return found;
}

/* Whether @module is loaded or built in. */
static inline bool module_present(const char *module)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "/sys/module/%s", module);
	return !stat(path, &st) || module_listed("modules.builtin", module);
}

/*
 * Whether the running kernel has the driver of a device pair ("rxe" or "siw"),
 * loaded, built in or as a module: Debian's stock kernel has no siw.
 */
static inline bool rdma_driver_present(const char *kind)
{
	const char *module = strcmp(kind, "rxe") ? kind : "rdma_rxe";

	return module_present(module) || module_listed("modules.dep", module);
}

/*
 * The cases that hold or fail a path need the debugfs hooks, which only a
 * test build has (make RRDS_TEST_HOOKS=1, as make check builds): says so
 * once when the loaded module lacks them.
 */
static inline void note_missing_test_hooks(void)
{
	static bool said;

	if (said || access(RRDS_DEBUGFS, F_OK) || !access(RRDS_DEBUGFS "/xmit_hold", F_OK))
		return;
	said = true;
	fprintf(stderr, "# rrds.ko has no test hooks (built without RRDS_TEST_HOOKS=1): "
		"the cases that use %s/*_hold and *_fail fail\n", RRDS_DEBUGFS);
}

/*
 * Loads rrds.ko with finit_module and module parameters ("name=value ..."),
 * as insmod does; returns 0 or -errno.
 */
static inline int rrds_load_with(const char *params)
{
	int fd, ret;

	/* Where ib_core and rdma_cm are modules (distribution kernels), as modprobe would. */
	if (!module_present("rdma_cm") && sh("modprobe -q rdma_cm"))
		return -ENOENT;
	fd = open(rrds_ko(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, params, 0);
	ret = ret ? -errno : 0;
	close(fd);
	if (!ret)
		note_missing_test_hooks();
	return ret;
}

/* Loads rrds.ko with its default parameters; returns 0 or -errno. */
static inline int rrds_load(void)
{
	return rrds_load_with("");
}

/*
 * Whether a device of the pair <kind>_a / <kind>_b has its GSI QP in error:
 * rxe moves it there for good when a MAD goes out while its netdev is down,
 * and the device then makes no connection.
 */
static inline bool gsi_broken(const char *kind)
{
	return !sh("rdma resource show qp | grep ' %s_[ab]/.* type GSI state ERR' >/dev/null",
		   kind);
}

/* In a fixture's setup: skip the case when the kernel lacks the pair's driver. */
#define SKIP_WITHOUT_DRIVER(kind)					\
	do {								\
		if (!rdma_driver_present(kind))				\
			SKIP(return, "this kernel has no %s driver", kind); \
	} while (0)

/*
 * Whether RDMA device @dev has its uverbs device. A removal takes it away
 * after every client added later (rrds among them) has let the device go,
 * and well before the device's own sysfs directory: rdma(8) stops listing
 * a device at the removal's start, sysfs at its end.
 */
static inline bool has_uverbs(const char *dev)
{
	DIR *d = opendir("/sys/class/infiniband_verbs");
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		char path[300], name[64];

		if (strncmp(e->d_name, "uverbs", 6))
			continue;
		snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev", e->d_name);
		found = read_file(path, name, sizeof(name)) > 0 &&
			!strncmp(name, dev, strlen(dev)) && name[strlen(dev)] == '\n';
	}
	closedir(d);
	return found;
}

/*
 * Whether both devices of the pair <kind>_a / <kind>_b are registered, not
 * being removed, with port 1 ACTIVE.
 */
static inline bool pair_active(const char *kind)
{
	for (char end = 'a'; end <= 'b'; end++) {
		char path[96], state[32], dev[32];

		snprintf(dev, sizeof(dev), "%s_%c", kind, end);
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/state", dev);
		if (read_file(path, state, sizeof(state)) < 0 || !strstr(state, "ACTIVE") ||
		    !has_uverbs(dev))
			return false;
	}
	return true;
}

/*
 * Brings the <kind> device pair up (fixtures.sh <kind>-up, idempotent); 0 or
 * -1. Both up already (the usual case): no script, which costs about 1.4 s
 * in the test VM.
 */
static inline int pair_up(const char *kind)
{
	char up[16];

	if (pair_active(kind))
		return 0;
	snprintf(up, sizeof(up), "%s-up", kind);
	return fixture(up) ? -1 : 0;
}

/* pair_up(), and loads rrds if it is not loaded; 0 or -1. */
static inline int pair_up_loaded(const char *kind)
{
	if (pair_up(kind))
		return -1;
	return rrds_loaded() ? 0 : rrds_load();
}

/* Unloads @module as rmmod does, without its fork; 0 or -errno. */
static inline int delete_module(const char *module)
{
	return syscall(SYS_delete_module, module, O_NONBLOCK) ? -errno : 0;
}

/*
 * Unloads @module if it is loaded as a module (built-in ones have no
 * refcnt), without a fork: a process costs 0.2 s and more in the test VM.
 * 0 or -errno.
 */
static inline int unload_module(const char *module)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/module/%s/refcnt", module);
	return access(path, F_OK) ? 0 : delete_module(module);
}

/* Unloads rrds; returns 0 or -errno. */
static inline int rrds_unload(void)
{
	return delete_module("rrds");
}

/* Fixture setup: a test starts with rrds not loaded, whatever the last one left. */
static inline int rrds_ensure_unloaded(void)
{
	return unload_module("rrds");
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

/*
 * Allocation-failure injection (failslab and fail_page_alloc, debugfs) with
 * rrds's code on the stack: the test kernel has the stack-trace filter
 * (CONFIG_FAULT_INJECTION_STACKTRACE_FILTER), so failures can be confined to
 * allocations that rrds makes, in any context (system calls, completion
 * handlers, work items), not those of the rest of the kernel.
 */
#define FAULT_ATTRS		{ "failslab", "fail_page_alloc" }
/*
 * How far up the stack rrds may be from the allocator: its own allocations
 * and those of the functions it calls directly (rdma_create_id, ib_alloc_cq,
 * sk_alloc). Never with the device driver on the stack (start_alloc_failures'
 * @driver): its failure paths are not ours to test. rxe leaves a QP's
 * receive task stopped for good when modify_qp fails for want of memory, so
 * a drain of that QP never returns; siw, failing in accept, leaves its
 * connection endpoint and work items allocated.
 */
#define FAULT_DRIVER(kind)	(strcmp(kind, "rxe") ? (kind) : "rdma_rxe")
#define FAULT_DEPTH		8
#define FAULT_DEBUGFS		"/sys/kernel/debug/"

/* Writes @val to the file @path (debugfs, proc); 0 or -errno. */
static inline int write_string(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;
	ssize_t len = strlen(val);

	if (fd < 0)
		return -errno;
	if (write(fd, val, len) != len)
		rc = -errno;
	close(fd);
	return rc;
}

/* Whether the debugfs hold @name has a task waiting in it ("1 1"). */
static inline bool holding(const char *name)
{
	char path[128], buf[16];

	snprintf(path, sizeof(path), RRDS_DEBUGFS "/%s", name);
	return read_file(path, buf, sizeof(buf)) > 0 && !strncmp(buf, "1 1", 3);
}

/* Arms (@on) or releases the debugfs hold @name. */
static inline int set_hold(const char *name, bool on)
{
	char path[128];

	snprintf(path, sizeof(path), RRDS_DEBUGFS "/%s", name);
	return write_string(path, on ? "1" : "0");
}

/* Whether the kernel has the fault injection the allocation tests drive. */
static inline bool fault_injection_present(void)
{
	static const char *const attrs[] = FAULT_ATTRS;
	char path[128];

	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		snprintf(path, sizeof(path), "/sys/kernel/debug/%s/times", attrs[i]);
		if (access(path, W_OK))
			return false;
	}
	return true;
}

/* In a case: skip it on a kernel without fault injection (Debian's). */
#define SKIP_WITHOUT_FAULT_INJECTION()					\
	do {								\
		if (!fault_injection_present())				\
			SKIP(return, "this kernel has no failslab/fail_page_alloc"); \
	} while (0)

static inline int write_attr(const char *attr, const char *file, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Writes a value to debugfs <attr>/<file>; 0 or -errno. */
static inline int write_attr(const char *attr, const char *file, const char *fmt, ...)
{
	char path[128], val[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(val, sizeof(val), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), FAULT_DEBUGFS "%s/%s", attr, file);
	return write_string(path, val);
}

/*
 * [start, end) of module @mod's text, from /proc/kallsyms: from its first
 * text symbol to the first symbol of anything else above its last (or 1 MiB
 * beyond it); 0, or -1 if the module has no text symbol.
 */
static inline int module_text_range(const char *mod, unsigned long *start, unsigned long *end)
{
	unsigned long lo = ~0UL, hi = 0, next = ~0UL, addr;
	char line[512], type, name[256], tag[64], want[64];
	FILE *f = fopen("/proc/kallsyms", "re");
	int pass;

	if (!f)
		return -1;
	snprintf(want, sizeof(want), "[%s]", mod);
	for (pass = 0; pass < 2; pass++) {
		rewind(f);
		while (fgets(line, sizeof(line), f)) {
			int n = sscanf(line, "%lx %c %255s %63s", &addr, &type, name, tag);
			bool ours = n == 4 && !strcmp(tag, want);

			if (n < 3 || !addr)
				continue;
			if (pass == 0 && ours && (type == 't' || type == 'T')) {
				lo = addr < lo ? addr : lo;
				hi = addr > hi ? addr : hi;
			} else if (pass == 1 && !ours && addr > hi && addr < next) {
				next = addr;
			}
		}
		if (!hi)
			break;
	}
	fclose(f);
	if (!hi)
		return -1;
	/* Nothing above: no more than the last function can be (they are far smaller). */
	if (next == ~0UL)
		next = hi + (1UL << 20);
	*start = lo;
	*end = next;
	return 0;
}

static inline int rrds_text_range(unsigned long *start, unsigned long *end)
{
	return module_text_range("rrds", start, end);
}

/* Stops injecting; the failures injected since the last start, or -1. */
static inline long stop_alloc_failures(void)
{
	static const char *const attrs[] = FAULT_ATTRS;
	long injected = 0;
	size_t i;

	for (i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		char path[128], buf[32];
		long left;

		if (write_attr(attrs[i], "probability", "0"))
			return -1;
		snprintf(path, sizeof(path), FAULT_DEBUGFS "%s/times", attrs[i]);
		if (read_file(path, buf, sizeof(buf)) < 0 || sscanf(buf, "%ld", &left) != 1)
			return -1;
		/* start_alloc_failures sets times to 1 << 30 (-1 when never started). */
		if (left >= 0)
			injected += (1L << 30) - left;
		write_attr(attrs[i], "times", "-1");
	}
	return injected;
}

/*
 * Fails allocations (slab and page) made with rrds's code within @depth
 * frames of the allocator and the code of module @driver (if not NULL: the
 * device driver under test) nowhere on the stack, whatever their GFP flags:
 * of every @interval such allocations one is a candidate, which fails with
 * probability @percent %. Silently (no stack dump per failure). 0 or -1.
 */
static inline int start_alloc_failures(int interval, int percent, int depth,
				       const char *driver)
{
	static const char *const attrs[] = FAULT_ATTRS;
	unsigned long start, end, reject_start = 0, reject_end = 0;
	size_t i;

	if (rrds_text_range(&start, &end))
		return -1;
	if (driver && module_text_range(driver, &reject_start, &reject_end))
		return -1;
	for (i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		const char *a = attrs[i];

		if (write_attr(a, "probability", "0") ||
		    write_attr(a, "task-filter", "N") ||
		    write_attr(a, "verbose", "0") ||
		    write_attr(a, "ignore-gfp-wait", "N") ||
		    write_attr(a, "space", "0") ||
		    write_attr(a, "interval", "%d", interval) ||
		    write_attr(a, "require-start", "%#lx", start) ||
		    write_attr(a, "require-end", "%#lx", end) ||
		    write_attr(a, "reject-start", "%#lx", reject_start) ||
		    write_attr(a, "reject-end", "%#lx", reject_end) ||
		    write_attr(a, "stacktrace-depth", "%d", depth) ||
		    write_attr(a, "times", "%ld", 1L << 30))
			return -1;
		if (!strcmp(a, "fail_page_alloc") &&
		    (write_attr(a, "ignore-gfp-highmem", "N") || write_attr(a, "min-order", "0")))
			return -1;
	}
	for (i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
		if (write_attr(attrs[i], "probability", "%d", percent))
			return -1;
	return 0;
}

/*
 * fail-nth: the calling thread's @nth allocation from now on, among those
 * the filter of start_alloc_failures admits (call it first, with @percent
 * 0), fails. 0 or -errno.
 */
static inline int fail_nth_arm(int nth)
{
	char val[16];

	snprintf(val, sizeof(val), "%d", nth);
	return write_string("/proc/thread-self/fail-nth", val);
}

/* Disarms fail-nth: 1 if the armed failure was injected, 0 if not, -errno. */
static inline int fail_nth_disarm(void)
{
	char buf[16];
	unsigned int left;

	if (read_file("/proc/thread-self/fail-nth", buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "%u", &left) != 1)
		return -EIO;
	if (left && fail_nth_arm(0))
		return -EIO;
	return left == 0;
}

/*
 * A fail-nth loop runs a call with its n-th allocation by rrds failing, for
 * n = 1, 2, ..., until the call makes fewer than n (NTH_FAILING reports the
 * failure was not injected).
 */
#define NTH_MAX		100	/* allocations one call may make */

/* @call (a system call) with fail-nth armed at @n: its result or -errno; @injected set. */
#define NTH_FAILING(n, injected, call) ({				\
	long __r;							\
	int __e;							\
	ASSERT_EQ(0, fail_nth_arm(n));					\
	__r = (call);							\
	__e = errno;							\
	injected = fail_nth_disarm();					\
	ASSERT_LE(0, injected);						\
	__r < 0 ? -__e : __r;						\
})

#endif /* RRDS_TEST_H */
