// SPDX-License-Identifier: GPL-2.0
/*
 * siw on its own, no rrds: connect, have the passive side send at once and
 * close, and see whether the active side hears of the close (see
 * Documentation/testing.rst). Run on demand inside the test VM, with
 * fixtures.sh siw-up done:
 *
 *   siw_close_repro [--rounds N] [--sends K] [--size BYTES]
 *
 * Each round: a server in namespace rrds-a (10.254.2.1) accepts one
 * connection, posts K SENDs of BYTES as soon as rdma_accept returns, waits
 * for them to complete, disconnects and tears down; the client in rrds-b
 * (10.254.2.2) connects with K receives posted and waits up to 5 s for
 * RDMA_CM_EVENT_DISCONNECTED. A round in which none comes is "lost": the
 * client's TCP connection is then looked up in /proc/net/tcp (CLOSE-WAIT:
 * the FIN arrived and siw raised nothing). Connect attempts that fail with
 * ENOMEM are counted too (the same per-endpoint work pool running dry).
 *
 * Prints one line per lost round and a summary; exits 1 if any round was
 * lost, 2 on a usage or set-up error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#include "rdmacm_repro.h"
#include "tcp_state.h"

#define SERVER_ADDR	"10.254.2.1"
#define CLIENT_ADDR	"10.254.2.2"
#define PORT		18999
#define MAX_SENDS	64
#define MAX_SIZE	16384
#define WAIT_MS		5000

static int rounds = 200, sends = 8, size = 4096;

struct end {
	struct rdma_event_channel *channel;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char *buf;
};

/* PD, CQ, MR and QP for @e->id, with @recvs receives posted; 0 or -1. */
static int make_qp(struct end *e, int recvs)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = MAX_SENDS, .max_recv_wr = MAX_SENDS,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	e->pd = ibv_alloc_pd(e->id->verbs);
	e->cq = e->pd ? ibv_create_cq(e->id->verbs, 2 * MAX_SENDS, NULL, NULL, 0) : NULL;
	e->buf = calloc(MAX_SENDS, MAX_SIZE);
	e->mr = e->cq && e->buf ? ibv_reg_mr(e->pd, e->buf, (size_t)MAX_SENDS * MAX_SIZE,
					      IBV_ACCESS_LOCAL_WRITE) : NULL;
	attr.send_cq = attr.recv_cq = e->cq;
	if (!e->mr || rdma_create_qp(e->id, e->pd, &attr))
		return -1;
	for (int i = 0; i < recvs; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)e->buf + (size_t)i * MAX_SIZE,
				       .length = MAX_SIZE, .lkey = e->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(e->id->qp, &wr, &bad))
			return -1;
	}
	return 0;
}

static void tear_down(struct end *e, bool keep_channel)
{
	if (e->id && e->id->qp)
		rdma_destroy_qp(e->id);
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->cq)
		ibv_destroy_cq(e->cq);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->id)
		rdma_destroy_id(e->id);
	free(e->buf);
	if (!keep_channel && e->channel)
		rdma_destroy_event_channel(e->channel);
	*e = (struct end){ .channel = keep_channel ? e->channel : NULL };
}

/* Accepts one connection, sends at once, waits for the sends, closes. */
static void serve_one(struct rdma_event_channel *ch)
{
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1 };
	struct rdma_cm_event *ev;
	struct end e = { .channel = ch };
	int done = 0, type;
	double end;

	/* A connect request, or nothing (the client gave up): the round ends. */
	type = next_event(ch, 3 * WAIT_MS, &ev);
	if (type != RDMA_CM_EVENT_CONNECT_REQUEST) {
		if (type >= 0)
			rdma_ack_cm_event(ev);
		return;
	}
	e.id = ev->id;
	rdma_ack_cm_event(ev);
	if (make_qp(&e, 0) || rdma_accept(e.id, &param)) {
		tear_down(&e, true);
		return;
	}
	/*
	 * siw has the QP in RTS and its MPA reply sent once rdma_accept returns:
	 * the sends follow the reply as closely as user space can.
	 */
	for (int i = 0; i < sends; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)e.buf + (size_t)i * MAX_SIZE,
				       .length = size, .lkey = e.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		if (ibv_post_send(e.id->qp, &wr, &bad))
			break;
	}
	if (take_event(ch, WAIT_MS) != RDMA_CM_EVENT_ESTABLISHED) {
		tear_down(&e, true);
		return;
	}
	end = now_s() + WAIT_MS / 1000.0;
	while (done < sends && now_s() < end) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(e.cq, 16, wc);

		if (n < 0)
			break;
		done += n;
		if (!n)
			usleep(1000);
	}
	rdma_disconnect(e.id);
	/* Our own close comes back as DISCONNECTED (siw: its CLOSE upcall). */
	take_event(ch, WAIT_MS);
	tear_down(&e, true);
}

static void server(int ready_fd)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listener;

	enter_ns("rrds-a");
	inet_pton(AF_INET, SERVER_ADDR, &addr.sin_addr);
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listener, (struct sockaddr *)&addr) || rdma_listen(listener, 16))
		die("listen");
	if (write(ready_fd, "r", 1) != 1)
		die("ready");
	for (;;)
		serve_one(ch);
}

/* One round as the client: 1 if the close was lost, 0 if heard, -1 if no connection. */
static int client_round(int round, int *enomem)
{
	struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET,
								     .sin_port = htons(PORT) };
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	struct end e = { 0 };
	int type, lost = -1;
	double end;

	inet_pton(AF_INET, CLIENT_ADDR, &src.sin_addr);
	inet_pton(AF_INET, SERVER_ADDR, &dst.sin_addr);
	e.channel = rdma_create_event_channel();
	if (!e.channel || rdma_create_id(e.channel, &e.id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(e.id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000) ||
	    take_event(e.channel, WAIT_MS) != RDMA_CM_EVENT_ADDR_RESOLVED ||
	    rdma_resolve_route(e.id, 2000) ||
	    take_event(e.channel, WAIT_MS) != RDMA_CM_EVENT_ROUTE_RESOLVED ||
	    make_qp(&e, sends))
		goto out;
	if (rdma_connect(e.id, &param)) {
		*enomem += errno == ENOMEM;
		goto out;
	}
	if (take_event(e.channel, WAIT_MS) != RDMA_CM_EVENT_ESTABLISHED)
		goto out;
	lost = 1;
	end = now_s() + WAIT_MS / 1000.0;
	while (now_s() < end) {
		type = take_event(e.channel, 50);
		if (type == RDMA_CM_EVENT_DISCONNECTED) {
			lost = 0;
			break;
		}
	}
	if (lost)
		printf("round %d: no DISCONNECTED in %d ms; TCP state %#x (8: CLOSE-WAIT)\n", round,
		       WAIT_MS, tcp_state_of((struct sockaddr_in *)rdma_get_local_addr(e.id)));
	rdma_disconnect(e.id);
out:
	tear_down(&e, false);
	return lost;
}

int main(int argc, char **argv)
{
	int lost = 0, heard = 0, failed = 0, enomem = 0, ready[2];
	pid_t pid;
	char c;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--rounds"))
			rounds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--sends"))
			sends = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--size"))
			size = atoi(argv[i + 1]);
		else
			argc = 0;
	}
	if (argc % 2 != 1 || rounds < 1 || sends < 0 || sends > MAX_SENDS || size < 1 ||
	    size > MAX_SIZE) {
		fprintf(stderr, "usage: siw_close_repro [--rounds N] [--sends K<=%d] [--size B<=%d]\n",
			MAX_SENDS, MAX_SIZE);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(ready))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0)
		server(ready[1]);
	if (read(ready[0], &c, 1) != 1)
		die("server");
	enter_ns("rrds-b");
	for (int r = 0; r < rounds; r++) {
		int got = client_round(r, &enomem);

		lost += got == 1;
		heard += got == 0;
		failed += got < 0;
	}
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	printf("rounds %d: close heard %d, close lost %d, no connection %d (connect ENOMEM %d)\n",
	       rounds, heard, lost, failed, enomem);
	return lost ? 1 : 0;
}
