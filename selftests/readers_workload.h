/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Several threads reading one RDS socket while several senders send
 * messages of distinct sizes and fill bytes: every message must arrive
 * once, whole, attributed to its sender (abuse_test, over loopback and IB).
 *
 * readers_exchange() makes the receiving socket (and a socket that wakes
 * readers at the end) in the calling thread's network namespace at the
 * moment it is called with @rx_ns, the senders in @tx_ns, and then runs
 * READERS reader and SENDERS sender threads.
 */
#ifndef READERS_WORKLOAD_H
#define READERS_WORKLOAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/time.h>

#include "rrds_test.h"
#include "rds_socket.h"


#define READERS		4
#define SENDERS		8
#define PER_SENDER	1250
#define TOTAL		(SENDERS * PER_SENDER)
#define READ_BUF	4096
#define LOGGED		8	/* mismatches described in the log at most */

/* Sender @i's messages all have this size, distinct per sender. */
static size_t msg_size(int i)
{
	return 64 + 97 * i;
}

static uint8_t fill_byte(int i, uint32_t k)
{
	return (uint8_t)(i * 31 + k);
}

/* Message @k of sender @i: (k, i) as two native uint32, then fill_byte(i, k). */
static void make_message(unsigned char *buf, int i, uint32_t k)
{
	uint32_t hdr[2] = { k, (uint32_t)i };

	memset(buf, fill_byte(i, k), msg_size(i));
	memcpy(buf, hdr, sizeof(hdr));
}

struct mismatch {
	int sender;		/* by source port; -1 if no sender has it */
	int port;
	long len, want_len;
	uint32_t k, i;		/* the header as received */
	long offset;		/* of the first wrong fill byte, or -1 */
};

struct exchange {
	int rx, stop_port;
	in_addr_t from_addr;	/* the senders' address */
	int ports[SENDERS];
	int received;		/* messages from senders' ports, atomic */
	int recv_err;		/* the first reader's recvfrom errno, or 0 */
	int mismatches;		/* atomic */
	pthread_mutex_t lock;	/* for first[] */
	struct mismatch first[LOGGED];
	int seen[SENDERS][PER_SENDER];	/* atomic */
};

struct sender {
	int idx, fd, sent, err;	/* err: errno of a failed send, -1 for a short one */
	struct sockaddr_in to;
};

static void *send_all(void *arg)
{
	struct sender *s = arg;
	unsigned char buf[READ_BUF];
	size_t size = msg_size(s->idx);

	for (uint32_t k = 0; k < PER_SENDER; k++) {
		ssize_t n;

		make_message(buf, s->idx, k);
		n = sendto(s->fd, buf, size, 0, (struct sockaddr *)&s->to, sizeof(s->to));
		if (n < 0) {
			s->err = errno;
			break;
		}
		if ((size_t)n != size) {
			s->err = -1;
			break;
		}
		s->sent++;
	}
	return NULL;
}

static void note_mismatch(struct exchange *x, const struct mismatch *m)
{
	int n = __atomic_fetch_add(&x->mismatches, 1, __ATOMIC_RELAXED);

	if (n >= LOGGED)
		return;
	pthread_mutex_lock(&x->lock);
	x->first[n] = *m;
	pthread_mutex_unlock(&x->lock);
}

static void *read_all(void *arg)
{
	struct exchange *x = arg;
	unsigned char buf[READ_BUF];

	while (__atomic_load_n(&x->received, __ATOMIC_ACQUIRE) < TOTAL) {
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		struct mismatch m = { .sender = -1, .offset = -1 };
		uint32_t hdr[2] = { 0, 0 };
		ssize_t len;
		int s = -1;

		len = recvfrom(x->rx, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		if (len < 0) {
			int zero = 0;

			/* A timeout (SO_RCVTIMEO) too: every message was owed. */
			__atomic_compare_exchange_n(&x->recv_err, &zero, errno, false,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
			break;
		}
		m.port = ntohs(from.sin_port);
		if (m.port == x->stop_port)
			break;
		for (int i = 0; i < SENDERS; i++)
			if (x->ports[i] == m.port)
				s = i;
		m.sender = s;
		m.len = len;
		if (len >= (ssize_t)sizeof(hdr))
			memcpy(hdr, buf, sizeof(hdr));
		m.k = hdr[0];
		m.i = hdr[1];
		if (s < 0 || flen != sizeof(from) || from.sin_addr.s_addr != x->from_addr) {
			note_mismatch(x, &m);
			continue;
		}
		m.want_len = msg_size(s);
		if (len != m.want_len || m.i != (uint32_t)s || m.k >= PER_SENDER) {
			note_mismatch(x, &m);
		} else {
			for (long j = sizeof(hdr); j < len; j++) {
				if (buf[j] != fill_byte(s, m.k)) {
					m.offset = j;
					break;
				}
			}
			if (m.offset >= 0)
				note_mismatch(x, &m);
			else
				__atomic_fetch_add(&x->seen[s][m.k], 1, __ATOMIC_RELAXED);
		}
		__atomic_fetch_add(&x->received, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* What a readers_exchange() saw. */
struct readers_outcome {
	int sent, received, mismatches, recv_err, send_errors;
	long missing, repeated;
	double seconds;
	struct mismatch first[LOGGED];
};

/*
 * The exchange: receiver bound to @rx_ip:0 in namespace @rx_ns (NULL: the
 * current one), senders bound to @tx_ip:0 in @tx_ns. 0, or -errno if a
 * socket could not be set up; the outcome in *@out.
 */
static inline int readers_exchange(const char *rx_ns, const char *rx_ip, const char *tx_ns,
				   const char *tx_ip, struct readers_outcome *out)
{
	struct timeval rcvtimeo = { .tv_sec = 10 }, sndtimeo = { .tv_sec = 30 };
	struct exchange *x = calloc(1, sizeof(*x));
	struct sender s[SENDERS] = { 0 };
	pthread_t readers[READERS], senders[SENDERS];
	struct sockaddr_in to, from = sin4(tx_ip, 0);
	int stop = -1, ret = 0;
	double start;
	char byte = 0;

	memset(out, 0, sizeof(*out));
	if (!x)
		return -ENOMEM;
	pthread_mutex_init(&x->lock, NULL);
	x->from_addr = from.sin_addr.s_addr;
	if (rx_ns && enter_ns(rx_ns))
		ret = -EIO;
	x->rx = ret ? -1 : bound_socket(rx_ip, 0);
	stop = x->rx < 0 ? -1 : bound_socket(rx_ip, 0);
	if (!ret && (x->rx < 0 || stop < 0 ||
		     setsockopt(x->rx, SOL_SOCKET, SO_RCVTIMEO, &rcvtimeo, sizeof(rcvtimeo))))
		ret = -errno;
	to = sin4(rx_ip, ret ? 0 : local_port(x->rx));
	x->stop_port = ret ? 0 : local_port(stop);
	if (!ret && tx_ns && enter_ns(tx_ns))
		ret = -EIO;
	for (int i = 0; i < SENDERS; i++) {
		s[i].idx = i;
		s[i].to = to;
		s[i].fd = ret ? -1 : bound_socket(tx_ip, 0);
		if (!ret && (s[i].fd < 0 || setsockopt(s[i].fd, SOL_SOCKET, SO_SNDTIMEO,
							&sndtimeo, sizeof(sndtimeo))))
			ret = -errno;
		x->ports[i] = ret ? 0 : local_port(s[i].fd);
	}
	if (ret)
		goto out;

	start = now();
	for (int i = 0; i < READERS; i++)
		pthread_create(&readers[i], NULL, read_all, x);
	for (int i = 0; i < SENDERS; i++)
		pthread_create(&senders[i], NULL, send_all, &s[i]);
	for (int i = 0; i < SENDERS; i++)
		pthread_join(senders[i], NULL);
	for (double end = now() + 60; now() < end;) {
		if (__atomic_load_n(&x->received, __ATOMIC_ACQUIRE) >= TOTAL ||
		    __atomic_load_n(&x->recv_err, __ATOMIC_RELAXED))
			break;
		usleep(10000);
	}
	/* Wakes readers still blocked: one message each. */
	for (int i = 0; i < READERS; i++)
		sendto(stop, &byte, 1, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to));
	for (int i = 0; i < READERS; i++)
		pthread_join(readers[i], NULL);
	out->seconds = now() - start;
	for (int i = 0; i < SENDERS; i++) {
		out->send_errors += s[i].err != 0;
		out->sent += s[i].sent;
		for (int k = 0; k < PER_SENDER; k++) {
			out->missing += x->seen[i][k] == 0;
			out->repeated += x->seen[i][k] > 1;
		}
	}
	out->received = x->received;
	out->mismatches = x->mismatches;
	out->recv_err = x->recv_err;
	memcpy(out->first, x->first, sizeof(out->first));
out:
	for (int i = 0; i < SENDERS; i++)
		if (s[i].fd >= 0)
			close(s[i].fd);
	if (stop >= 0)
		close(stop);
	if (x->rx >= 0)
		close(x->rx);
	pthread_mutex_destroy(&x->lock);
	free(x);
	return ret;
}

#endif /* READERS_WORKLOAD_H */
