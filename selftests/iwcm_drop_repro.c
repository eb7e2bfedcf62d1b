// SPDX-License-Identifier: GPL-2.0
/*
 * The iWARP connection manager on its own, no rrds: destroy rdma_cm
 * listeners while connect requests arrive, and count the connections that
 * nobody accepted nor rejected (see Documentation/testing.rst). Run on
 * demand inside the test VM, with fixtures.sh siw-up done:
 *
 *   iwcm_drop_repro [--seconds S] [--connectors N]
 *
 * A server in namespace rrds-a (10.254.2.1) creates a listener, keeps it
 * for up to 2 ms and destroys it, in a loop, never taking an event. N
 * connectors in rrds-b (10.254.2.2) connect to it in a loop, each with 32
 * bytes of private data, and give up on each attempt after 2 s. A request
 * that iwcm drops because its listener is going is never rejected: siw's
 * endpoint for it (a siw_cep, its work items) stays allocated, and so does
 * the copy of its private data that iwcm made, which nothing points to. Once
 * all have stopped, kmemleak (the test kernel has it) is asked to scan, and
 * the unreferenced objects allocated by cm_event_handler or by siw's
 * connection manager are counted.
 *
 * Prints the attempts, their outcomes and the leaked objects; exits 1 if any
 * leaked, 2 on a usage or set-up error (no kmemleak among them).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#include "rdmacm_repro.h"

#define SERVER_ADDR	"10.254.2.1"
#define CLIENT_ADDR	"10.254.2.2"
#define PORT		18998
#define WAIT_MS		2000
#define MAX_CONNECTORS	32

#define KMEMLEAK	"/sys/kernel/debug/kmemleak"

/* What the connectors saw, shared across their processes. */
struct outcomes {
	long attempts, established, rejected, other, setup_failed;
};

static int seconds = 30, connectors = 8;

/* Listeners that live up to 2 ms each, until @end; never takes an event. */
static void __attribute__((noreturn)) server(double end)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct rdma_event_channel *ch;
	long cycles = 0;

	enter_ns("rrds-a");
	inet_pton(AF_INET, SERVER_ADDR, &addr.sin_addr);
	ch = rdma_create_event_channel();
	if (!ch)
		die("event channel");
	srand(getpid());
	while (now_s() < end) {
		struct rdma_cm_id *listener;

		if (rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP))
			die("create listener");
		if (!rdma_bind_addr(listener, (struct sockaddr *)&addr) &&
		    !rdma_listen(listener, 64)) {
			cycles++;
			usleep(rand() % 2000);
		}
		rdma_destroy_id(listener);
	}
	printf("server: %ld listeners created and destroyed\n", cycles);
	exit(0);
}

/* One connect attempt from rrds-b, counted in @o. */
static void connect_once(struct outcomes *o)
{
	struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET,
								     .sin_port = htons(PORT) };
	unsigned char private_data[32];
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .private_data = private_data,
					 .private_data_len = sizeof(private_data) };
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	int type;

	memset(private_data, 0xa5, sizeof(private_data));
	inet_pton(AF_INET, CLIENT_ADDR, &src.sin_addr);
	inet_pton(AF_INET, SERVER_ADDR, &dst.sin_addr);
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, WAIT_MS) ||
	    take_event(ch, WAIT_MS) != RDMA_CM_EVENT_ADDR_RESOLVED ||
	    rdma_resolve_route(id, WAIT_MS) ||
	    take_event(ch, WAIT_MS) != RDMA_CM_EVENT_ROUTE_RESOLVED ||
	    /* No PD and no CQs given: librdmacm uses the device's default ones. */
	    rdma_create_qp(id, NULL, &attr)) {
		__atomic_add_fetch(&o->setup_failed, 1, __ATOMIC_RELAXED);
		goto out;
	}
	__atomic_add_fetch(&o->attempts, 1, __ATOMIC_RELAXED);
	if (rdma_connect(id, &param)) {
		__atomic_add_fetch(&o->other, 1, __ATOMIC_RELAXED);
		goto out;
	}
	type = take_event(ch, WAIT_MS);
	if (type == RDMA_CM_EVENT_ESTABLISHED)
		__atomic_add_fetch(&o->established, 1, __ATOMIC_RELAXED);
	else if (type == RDMA_CM_EVENT_REJECTED)
		__atomic_add_fetch(&o->rejected, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&o->other, 1, __ATOMIC_RELAXED);
out:
	if (id && id->qp)
		rdma_destroy_qp(id);
	if (id)
		rdma_destroy_id(id);
	if (ch)
		rdma_destroy_event_channel(ch);
}

static void kmemleak_command(const char *command)
{
	FILE *f = fopen(KMEMLEAK, "w");

	if (!f || fputs(command, f) < 0 || fclose(f))
		die(KMEMLEAK " (debugfs mounted, CONFIG_DEBUG_KMEMLEAK?)");
}

/*
 * The objects kmemleak reports unreferenced whose allocation went through
 * @function, each report being "unreferenced object ..." and its backtrace.
 */
static int leaked_under(const char *function)
{
	char line[256];
	bool in_report = false, counted = false;
	int n = 0;
	FILE *f = fopen(KMEMLEAK, "r");

	if (!f)
		die(KMEMLEAK);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "unreferenced object", 19)) {
			in_report = true;
			counted = false;
		} else if (in_report && !counted && strstr(line, function)) {
			n++;
			counted = true;
		}
	}
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	struct outcomes *o;
	int private_data, endpoints;
	pid_t server_pid;
	double end;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--seconds"))
			seconds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--connectors"))
			connectors = atoi(argv[i + 1]);
		else
			argc = 0;
	}
	if (argc % 2 != 1 || seconds < 1 || connectors < 1 || connectors > MAX_CONNECTORS) {
		fprintf(stderr, "usage: iwcm_drop_repro [--seconds S] [--connectors N<=%d]\n",
			MAX_CONNECTORS);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Only what this run leaks counts. */
	kmemleak_command("clear");
	o = mmap(NULL, sizeof(*o), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (o == MAP_FAILED)
		die("mmap");
	end = now_s() + seconds;
	server_pid = fork();
	if (server_pid < 0)
		die("fork");
	if (server_pid == 0)
		server(end);
	for (int i = 0; i < connectors; i++) {
		pid_t pid = fork();

		if (pid < 0)
			die("fork");
		if (pid == 0) {
			enter_ns("rrds-b");
			while (now_s() < end)
				connect_once(o);
			exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	printf("attempts %ld: established %ld, rejected %ld, other %ld (set-up failed %ld)\n",
	       o->attempts, o->established, o->rejected, o->other, o->setup_failed);
	/*
	 * kmemleak reports an object once it is 5 s old and unchanged since the
	 * scan before: two scans.
	 */
	sleep(6);
	kmemleak_command("scan");
	kmemleak_command("scan");
	private_data = leaked_under("cm_event_handler");
	endpoints = leaked_under("siw_cep_alloc") + leaked_under("siw_cm_alloc_work");
	printf("leaked: %d copies of private data (cm_event_handler), %d siw endpoint objects\n",
	       private_data, endpoints);
	return private_data + endpoints ? 1 : 0;
}
