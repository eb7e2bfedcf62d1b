// SPDX-License-Identifier: GPL-2.0
/*
 * siw on its own, no rrds: reset TCP connections to a siw listener before
 * siw has accepted them, and see whether the listener survives (see
 * Documentation/testing.rst). Run on demand inside the test VM, with
 * fixtures.sh siw-up done:
 *
 *   siw_listen_repro [--rounds N] [--burst K]
 *
 * A server in namespace rrds-a (10.254.2.1) listens with rdma_cm and
 * rejects every connect request it gets, counting them. Each round, a
 * client in rrds-b (10.254.2.2) opens K plain TCP connections to the
 * listener's port and resets each at once (SO_LINGER 0), then probes the
 * listener with an rdma_cm connect. A new connection's socket carries the
 * listener's siw endpoint until siw accepts it, and a reset before then
 * makes siw release the listener's endpoint instead: its socket closes
 * and the probe's connect request never reaches the server ("listener
 * lost"). Destroying the listener then frees the endpoint a second time
 * (KASAN: use-after-free in siw_destroy_listen).
 *
 * Prints one line per lost probe and a summary; exits 1 if a probe was
 * lost, 2 on a usage or set-up error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#include "rdmacm_repro.h"

#define SERVER_ADDR	"10.254.2.1"
#define CLIENT_ADDR	"10.254.2.2"
#define PORT		18997
#define WAIT_MS		2000
#define MAX_BURST	4096

static int rounds = 50, burst = 32;

/* Listens until @stop, rejecting and counting each request in @requests. */
static void __attribute__((noreturn)) server(int ready_fd, volatile long *requests,
					     volatile int *stop)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listener;

	enter_ns("rrds-a");
	inet_pton(AF_INET, SERVER_ADDR, &addr.sin_addr);
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listener, (struct sockaddr *)&addr) || rdma_listen(listener, 128))
		die("listen");
	if (write(ready_fd, "r", 1) != 1)
		die("ready");
	while (!*stop) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		struct rdma_cm_event *ev;

		if (poll(&p, 1, 100) != 1 || rdma_get_cm_event(ch, &ev))
			continue;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *child = ev->id;

			__atomic_add_fetch(requests, 1, __ATOMIC_RELAXED);
			rdma_ack_cm_event(ev);
			rdma_reject(child, NULL, 0);
			rdma_destroy_id(child);
		} else {
			rdma_ack_cm_event(ev);
		}
	}
	/* On an unpatched siw, this is where KASAN reports the endpoint freed twice. */
	rdma_destroy_id(listener);
	rdma_destroy_event_channel(ch);
	exit(0);
}

/*
 * Opens K TCP connections to the listener, each reset as soon as connect()
 * returns: the reset follows the handshake's last ACK closely enough to
 * reach the new socket before siw's work queue accepts it.
 */
static void reset_burst(const struct sockaddr_in *dst)
{
	struct linger reset = { .l_onoff = 1, .l_linger = 0 };

	for (int i = 0; i < burst; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0)
			die("socket");
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
		/* Refused once the listener is gone: that is the verdict's job. */
		connect(fd, (const struct sockaddr *)dst, sizeof(*dst));
		close(fd);
	}
}

/* One rdma_cm connect to the listener: it only has to reach the server. */
static void probe(const struct sockaddr_in *dst)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1 };
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;

	inet_pton(AF_INET, CLIENT_ADDR, &src.sin_addr);
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)dst, WAIT_MS) ||
	    take_event(ch, WAIT_MS) != RDMA_CM_EVENT_ADDR_RESOLVED ||
	    rdma_resolve_route(id, WAIT_MS) ||
	    take_event(ch, WAIT_MS) != RDMA_CM_EVENT_ROUTE_RESOLVED ||
	    rdma_create_qp(id, NULL, &attr))
		die("probe set-up");
	if (!rdma_connect(id, &param))
		take_event(ch, WAIT_MS);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

int main(int argc, char **argv)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct shared {
		long requests;
		int stop;
	} *shared;
	int lost = 0, ready[2];
	pid_t pid;
	char c;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--rounds"))
			rounds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--burst"))
			burst = atoi(argv[i + 1]);
		else
			argc = 0;
	}
	if (argc % 2 != 1 || rounds < 1 || burst < 1 || burst > MAX_BURST) {
		fprintf(stderr, "usage: siw_listen_repro [--rounds N] [--burst K<=%d]\n", MAX_BURST);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	inet_pton(AF_INET, SERVER_ADDR, &dst.sin_addr);
	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (shared == MAP_FAILED || pipe(ready))
		die("set-up");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0)
		server(ready[1], &shared->requests, &shared->stop);
	if (read(ready[0], &c, 1) != 1)
		die("server");
	enter_ns("rrds-b");
	for (int r = 0; r < rounds && !lost; r++) {
		long before = __atomic_load_n(&shared->requests, __ATOMIC_RELAXED);

		reset_burst(&dst);
		probe(&dst);
		if (__atomic_load_n(&shared->requests, __ATOMIC_RELAXED) == before) {
			printf("round %d: the probe's connect request never reached the listener\n",
			       r);
			lost++;
		}
	}
	__atomic_store_n(&shared->stop, 1, __ATOMIC_RELAXED);
	waitpid(pid, NULL, 0);
	printf("rounds: %s; %ld connect requests reached the listener\n",
	       lost ? "listener lost" : "listener kept", shared->requests);
	return lost ? 1 : 0;
}
