/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The integrity workload of integrity_test.c (loopback) and ib_test.c (IB,
 * across namespaces): one deterministic pseudo-random stream of messages per
 * sender, which every receiver replays to know what each sender owes it, in
 * which order, and each message's size and contents. integrity_test.c
 * describes the size distribution. Tests include this after
 * kselftest_harness.h and define die(), which reports and exits a child.
 */
#ifndef RRDS_INTEGRITY_WORKLOAD_H
#define RRDS_INTEGRITY_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "payload.h"

#define MAX_SENDERS	16
#define MAX_RECEIVERS	16

/* The test's own: one report on stderr, then the child exits. */
static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...);

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
	long enomem;		/* failed sends and receives retried (fault injection) */
};

static inline uint64_t content_seed(const struct workload *w, int sender, int receiver,
				    uint64_t seq)
{
	return mix64(w->seed ^ mix64(((uint64_t)sender << 48) ^ ((uint64_t)receiver << 32) ^ seq));
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

static inline size_t max_size(const struct workload *w)
{
	return (size_t)1 << w->max_k;
}

static inline void stream_init(struct stream *st, const struct workload *w, int sender)
{
	st->sender = sender;
	st->index = 0;
	st->count = w->msgs / w->senders + (sender < w->msgs % w->senders);
	st->rng = mix64(w->seed + 0x5eed) ^ mix64(sender + 1);
}

static inline size_t pick_size(const struct workload *w, uint64_t *rng)
{
	int k;

	if (next64(rng) % w->large_one_in == 0)
		k = w->small_k_max + 1 + next64(rng) % (w->max_k - w->small_k_max);
	else
		k = next64(rng) % (w->small_k_max + 1);
	return next64(rng) % (((uint64_t)1 << k) + 1);
}

/* The next message of the stream; false at its end. */
static inline bool stream_next(const struct workload *w, struct stream *st, struct planned *p)
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
static inline bool stream_next_for(const struct workload *w, struct stream *st, int receiver,
				   struct planned *p)
{
	while (stream_next(w, st, p))
		if (p->receiver == receiver)
			return true;
	return false;
}

/*
 * The parent's plan: how many messages each sender owes each receiver, in
 * @expect. Returns the bytes of them all.
 */
static inline long long plan_exchange(const struct workload *w,
				      long expect[MAX_SENDERS][MAX_RECEIVERS])
{
	long long bytes = 0;
	int i;

	for (i = 0; i < w->senders; i++) {
		struct stream s;
		struct planned p;

		stream_init(&s, w, i);
		while (stream_next(w, &s, &p)) {
			expect[i][p.receiver]++;
			bytes += p.size;
		}
	}
	return bytes;
}

/*
 * A sender's next message: sets @p, and fills @buf with it, numbered from
 * @seq (one per receiver). False at the end of the stream.
 */
static inline bool next_message(const struct workload *w, struct stream *st, uint64_t *seq,
				unsigned char *buf, struct planned *p)
{
	struct msg_header h;

	if (!stream_next(w, st, p))
		return false;
	h = (struct msg_header){
		.sender = st->sender, .receiver = p->receiver,
		.seq = seq[p->receiver]++, .size = p->size,
	};
	payload_fill(buf, p->size, &h, HDR, content_seed(w, st->sender, p->receiver, h.seq));
	return true;
}

/* What a receiver knows of each sender: the replayed stream, what it owes and how far it got. */
struct receiver {
	const struct workload *w;
	int id;
	long total;		/* messages owed by all the senders */
	struct stream streams[MAX_SENDERS];
	long expect[MAX_SENDERS];
	long got[MAX_SENDERS];
};

static inline void receiver_init(struct receiver *rv, const struct workload *w, int id,
				 long expect[MAX_SENDERS][MAX_RECEIVERS])
{
	int s;

	*rv = (struct receiver){ .w = w, .id = id };
	for (s = 0; s < w->senders; s++) {
		stream_init(&rv->streams[s], w, s);
		rv->expect[s] = expect[s][id];
		rv->total += rv->expect[s];
	}
}

/* Dies unless the @n bytes in @buf (recvmsg's @flags) are the next message sender @s owes us. */
static inline void check_from(struct receiver *rv, int s, const unsigned char *buf, ssize_t n,
			      int flags)
{
	const struct workload *w = rv->w;
	struct msg_header h;
	struct planned p;
	long bad, seq;

	seq = rv->got[s];
	if (flags & MSG_TRUNC)
		die("message %ld from sender %d truncated (%zd bytes)", seq, s, n);
	if (seq == rv->expect[s] || !stream_next_for(w, &rv->streams[s], rv->id, &p))
		die("extra message of %zd bytes from sender %d after its %ld", n, s, seq);
	/* A wrong size: a message lost, duplicated, reordered or resized. */
	if ((size_t)n != p.size)
		die("message %ld from sender %d: %zd bytes, want %zu", seq, s, n, p.size);
	h = (struct msg_header){ .sender = s, .receiver = rv->id, .seq = seq, .size = p.size };
	bad = payload_mismatch(buf, n, &h, HDR, content_seed(w, s, rv->id, seq));
	if (bad >= 0) {
		char how[160];

		payload_describe(how, sizeof(how), buf, n, &h, HDR, content_seed(w, s, rv->id, seq),
				 bad);
		die("message %ld from sender %d (%zd bytes) differs at byte %ld: %s", seq, s, n, bad,
		    how);
	}
	rv->got[s]++;
}

/* At the deadline, with @msgs of the messages received: dies saying what is missing. */
static inline void __attribute__((noreturn)) die_lost(const struct receiver *rv, long msgs)
{
	char counts[MAX_SENDERS * 24] = "";
	size_t len = 0;
	int s;

	for (s = 0; s < rv->w->senders; s++)
		len += snprintf(counts + len, sizeof(counts) - len, " %ld/%ld", rv->got[s],
				rv->expect[s]);
	die("deadline passed with %ld of %ld messages; got/expected from each sender:%s",
	    msgs, rv->total, counts);
}

/* @stats (receivers, then senders), summed: the receivers' messages and bytes, senders' retries. */
static inline struct child_stats sum_stats(const struct workload *w,
					   const struct child_stats *stats)
{
	struct child_stats sum = { 0 };
	int i;

	for (i = 0; i < w->receivers; i++) {
		sum.msgs += stats[i].msgs;
		sum.bytes += stats[i].bytes;
		sum.enomem += stats[i].enomem;
	}
	for (i = 0; i < w->senders; i++) {
		sum.eagain += stats[w->receivers + i].eagain;
		sum.enobufs += stats[w->receivers + i].enobufs;
		sum.enomem += stats[w->receivers + i].enomem;
	}
	return sum;
}

#endif /* RRDS_INTEGRITY_WORKLOAD_H */
