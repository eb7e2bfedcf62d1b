/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the on-demand kernel-bug reproducers (siw_close_repro,
 * siw_listen_repro, iwcm_drop_repro) share: failing a set-up step with exit
 * status 2, entering the fixtures' namespaces, a monotonic clock, and
 * rdma_cm events with a timeout.
 */
#ifndef RRDS_SELFTEST_RDMACM_REPRO_H
#define RRDS_SELFTEST_RDMACM_REPRO_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

/* A set-up error: the program's name, @what and errno; exit status 2. */
static inline void __attribute__((noreturn)) die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, strerror(errno));
	exit(2);
}

/* Moves the calling process into the network namespace @ns (ip netns). */
static inline void enter_ns(const char *ns)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET))
		die(path);
	close(fd);
}

static inline double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The next event on @ch within @ms (its type, the event left to ack), or -1. */
static inline int next_event(struct rdma_event_channel *ch, int ms, struct rdma_cm_event **ev)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };

	if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(ch, ev))
		return -1;
	return (*ev)->event;
}

/* Acks the next event on @ch within @ms and returns its type, or -1. */
static inline int take_event(struct rdma_event_channel *ch, int ms)
{
	struct rdma_cm_event *ev;
	int type = next_event(ch, ms, &ev);

	if (type >= 0)
		rdma_ack_cm_event(ev);
	return type;
}

#endif
