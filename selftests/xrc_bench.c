// SPDX-License-Identifier: GPL-2.0
/*
 * XRC target-QP manager benchmark (scripts/bench-xrc runs it in the VM).
 *
 *   xrc_bench ADDRESS PROCESSES [ROUNDS]
 *
 * With PROCESSES processes registered with one target on the device of
 * ADDRESS (the caller's namespace), measures:
 *   - register and unregister: one more process registering and
 *     unregistering, ROUNDS times each (setsockopt time);
 *   - inject: the RRDS_XRC_INJECT setsockopt that synthesizes an event; the
 *     kernel queues it on every registration inside that call, so its time
 *     grows with PROCESSES if fan-out is O(registrations);
 *   - refused inject: the same call with an event it may not inject, which
 *     fails after the target lookup: the cost of everything but the fan-out;
 *     (inject - refused) / PROCESSES is the fan-out's cost per registration
 *     (queueing the event and waking the process);
 *   - fan-out: from just before the inject until the last registered process
 *     has read the event (wakeups and scheduling included).
 * Prints one line of key=value pairs, microseconds, medians and 99th
 * percentiles.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/rrds.h>

#include "rds_socket.h"

#define MAX_ROUNDS 1000

struct shared {
	int ready;
	int received[MAX_ROUNDS];	/* processes that read round r's event */
	int64_t last[MAX_ROUNDS];	/* when the last of them did, ns */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *what)
{
	fprintf(stderr, "xrc_bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int qp_op(int fd, int op, uint32_t qp_num)
{
	struct rrds_xrc_qp q = { .qp_num = qp_num };

	return setsockopt(fd, SOL_RDS, op, &q, sizeof(q));
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *v, int n, int p)
{
	qsort(v, n, sizeof(*v), cmp);
	return v[(n - 1) * p / 100];
}

/* Reads one event (blocking); false on error. */
static int read_event(int fd)
{
	char control[CMSG_SPACE(sizeof(struct rrds_xrc_event))];
	struct msghdr msg = { .msg_control = control, .msg_controllen = sizeof(control) };

	return recvmsg(fd, &msg, 0) == 0 && msg.msg_controllen > 0;
}

static void __attribute__((noreturn)) registrant(const char *addr, uint32_t qp_num,
						 struct shared *sh, int rounds)
{
	int fd = bound_socket(addr, 0);

	if (fd < 0 || qp_op(fd, RRDS_XRC_REGISTER, qp_num))
		_exit(2);
	__atomic_fetch_add(&sh->ready, 1, __ATOMIC_SEQ_CST);
	for (int r = 0; r < rounds; r++) {
		int64_t t, seen;

		if (!read_event(fd))
			_exit(3);
		t = now_ns();
		/* The round's stamp is the latest arrival. */
		seen = __atomic_load_n(&sh->last[r], __ATOMIC_SEQ_CST);
		while (seen < t && !__atomic_compare_exchange_n(&sh->last[r], &seen, t, false,
								__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			;
		__atomic_fetch_add(&sh->received[r], 1, __ATOMIC_SEQ_CST);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	static double reg[MAX_ROUNDS], unreg[MAX_ROUNDS], inject[MAX_ROUNDS], fan[MAX_ROUNDS];
	static double base[MAX_ROUNDS];
	double inject_p50, base_p50;
	struct rrds_xrc_create c;
	socklen_t len = sizeof(c);
	struct shared *sh;
	int procs, rounds, fd, probe, kids;
	pid_t *pids;

	if (argc < 3) {
		fprintf(stderr, "usage: xrc_bench ADDRESS PROCESSES [ROUNDS]\n");
		return 2;
	}
	procs = atoi(argv[2]);
	rounds = argc > 3 ? atoi(argv[3]) : 200;
	if (procs < 1 || rounds < 1 || rounds > MAX_ROUNDS)
		return 2;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap");
	fd = bound_socket(argv[1], 0);
	if (fd < 0 || getsockopt(fd, SOL_RDS, RRDS_XRC_CREATE, &c, &len))
		die("create");
	/* The creator is registered too: procs - 1 more processes. */
	kids = procs - 1;
	pids = calloc(kids + 1, sizeof(*pids));
	for (int i = 0; i < kids; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die("fork");
		if (pids[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			registrant(argv[1], c.qp_num, sh, rounds);
		}
	}
	while (__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST) < kids)
		usleep(10000);

	/* Register / unregister of one more process (this one, via another socket
	 * would be EALREADY: a child does it). */
	pids[kids] = fork();
	if (pids[kids] == 0) {
		probe = bound_socket(argv[1], 0);
		if (probe < 0)
			_exit(2);
		for (int r = 0; r < rounds; r++) {
			double t0 = now_us(), t1, t2;

			if (qp_op(probe, RRDS_XRC_REGISTER, c.qp_num))
				_exit(3);
			t1 = now_us();
			if (qp_op(probe, RRDS_XRC_UNREGISTER, c.qp_num))
				_exit(4);
			t2 = now_us();
			reg[r] = t1 - t0;
			unreg[r] = t2 - t1;
		}
		printf("processes=%d register_us_p50=%.1f register_us_p99=%.1f "
		       "unregister_us_p50=%.1f unregister_us_p99=%.1f ",
		       procs, pct(reg, rounds, 50), pct(reg, rounds, 99), pct(unreg, rounds, 50),
		       pct(unreg, rounds, 99));
		fflush(stdout);
		_exit(0);
	}
	{
		int status;

		if (waitpid(pids[kids], &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			die("register/unregister prober");
	}

	/* The same call refused after the target lookup (an event it may not
	 * inject): everything but the fan-out itself. */
	for (int r = 0; r < rounds; r++) {
		struct rrds_xrc_inject in = { .qp_num = c.qp_num, .action = RRDS_XRC_INJECT_EVENT,
					      .event = 8 /* DEVICE_FATAL: EINVAL */ };
		double t0 = now_us();

		if (!setsockopt(fd, SOL_RDS, RRDS_XRC_INJECT, &in, sizeof(in)) || errno != EINVAL)
			die("baseline inject");
		base[r] = now_us() - t0;
	}
	for (int r = 0; r < rounds; r++) {
		struct rrds_xrc_inject in = { .qp_num = c.qp_num, .action = RRDS_XRC_INJECT_EVENT,
					      .event = RRDS_XRC_EV_COMM_EST };
		double t0 = now_us(), t1;
		int64_t t0_ns = now_ns();

		if (setsockopt(fd, SOL_RDS, RRDS_XRC_INJECT, &in, sizeof(in)))
			die("inject");
		t1 = now_us();
		if (!read_event(fd))
			die("own event");
		while (__atomic_load_n(&sh->received[r], __ATOMIC_SEQ_CST) < kids)
			sched_yield();
		inject[r] = t1 - t0;
		fan[r] = ((kids ? __atomic_load_n(&sh->last[r], __ATOMIC_SEQ_CST) : now_ns()) - t0_ns) /
			 1e3;
	}
	inject_p50 = pct(inject, rounds, 50);
	base_p50 = pct(base, rounds, 50);
	printf("inject_us_p50=%.1f inject_us_p99=%.1f refused_inject_us_p50=%.1f "
	       "fanout_per_registration_us=%.1f fanout_all_us_p50=%.1f fanout_all_us_p99=%.1f\n",
	       inject_p50, pct(inject, rounds, 99), base_p50, (inject_p50 - base_p50) / procs,
	       pct(fan, rounds, 50), pct(fan, rounds, 99));
	for (int i = 0; i < kids; i++) {
		int status;

		if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			die("registrant");
	}
	close(fd);
	return 0;
}
