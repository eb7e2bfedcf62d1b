// SPDX-License-Identifier: GPL-2.0
/*
 * An XRC initiator in user space, as a verbs program would be one, run by
 * xrc_test: connects an RC QP through rdma_cm to RRDS_XRC_CM_PORT of a
 * target's address, naming the target in the private data, then sends.
 *
 *   xrc_initiator NETNS LOCAL REMOTE QP_NUM BYTES COUNT [hold]
 *
 * Sends COUNT messages of BYTES (at most 4096) and prints "sent N"; with
 * "hold", then prints "holding" and waits to be killed, else disconnects.
 * A refused connect prints "rejected REASON" (rrds's reason) and exits 3;
 * any other failure exits 2.
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <linux/rrds.h>

#include "rdmacm_repro.h"

#define BUF_MAX 4096
#define DEPTH 16

static struct sockaddr_in addr_of(const char *ip, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
		errno = EINVAL;
		die(ip);
	}
	return a;
}

/* Waits for the next event, which must be @want; else dies (3 if refused). */
static void expect_event(struct rdma_event_channel *ch, int want)
{
	struct rdma_cm_event *ev;
	int type = next_event(ch, 20000, &ev);

	if (type == RDMA_CM_EVENT_REJECTED) {
		const struct rrds_xrc_reject_private *r = ev->param.conn.private_data;

		if (ev->param.conn.private_data_len >= sizeof(*r) &&
		    ntohl(r->magic) == RRDS_XRC_CM_MAGIC)
			printf("rejected %u\n", ntohl(r->reason));
		else
			printf("rejected without a reason\n");
		fflush(stdout);
		exit(3);
	}
	if (type != want) {
		fprintf(stderr, "xrc_initiator: event %d (%s), wanted %s\n", type,
			type < 0 ? "none" : rdma_event_str(type), rdma_event_str(want));
		exit(2);
	}
	rdma_ack_cm_event(ev);
}

int main(int argc, char **argv)
{
	struct rrds_xrc_connect_private priv = {
		.magic = htonl(RRDS_XRC_CM_MAGIC), .version = RRDS_XRC_CM_VERSION,
	};
	struct ibv_qp_init_attr qpa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.sq_sig_all = 1,
	};
	struct rdma_conn_param param = { .retry_count = 7, .rnr_retry_count = 7 };
	struct sockaddr_in src, dst;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_wc wc[DEPTH];
	long bytes, count, posted = 0, done = 0;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	static char buf[BUF_MAX];

	if (argc < 7 || argc > 8) {
		fprintf(stderr, "usage: xrc_initiator NETNS LOCAL REMOTE QP_NUM BYTES COUNT [hold]\n");
		return 2;
	}
	enter_ns(argv[1]);
	src = addr_of(argv[2], 0);
	dst = addr_of(argv[3], RRDS_XRC_CM_PORT);
	priv.qp_num = htonl(strtoul(argv[4], NULL, 0));
	bytes = atol(argv[5]);
	count = atol(argv[6]);
	if (bytes <= 0 || bytes > BUF_MAX || count < 0) {
		errno = EINVAL;
		die("BYTES or COUNT");
	}
	memset(buf, 0x5a, sizeof(buf));

	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 5000))
		die("rdma_resolve_addr");
	expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	if (rdma_resolve_route(id, 5000))
		die("rdma_resolve_route");
	expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	pd = ibv_alloc_pd(id->verbs);
	cq = pd ? ibv_create_cq(id->verbs, DEPTH, NULL, NULL, 0) : NULL;
	mr = cq ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		die("pd, cq or mr");
	qpa.send_cq = qpa.recv_cq = cq;
	if (rdma_create_qp(id, pd, &qpa))
		die("rdma_create_qp");
	param.private_data = &priv;
	param.private_data_len = sizeof(priv);
	if (rdma_connect(id, &param))
		die("rdma_connect");
	expect_event(ch, RDMA_CM_EVENT_ESTABLISHED);

	while (done < count) {
		while (posted < count && posted - done < DEPTH) {
			struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = bytes,
					       .lkey = mr->lkey };
			struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
						  .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED }, *bad;

			if (ibv_post_send(id->qp, &wr, &bad))
				die("ibv_post_send");
			posted++;
		}
		int n = ibv_poll_cq(cq, DEPTH, wc);

		if (n < 0)
			die("ibv_poll_cq");
		if (n == 0)
			usleep(100);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "xrc_initiator: send %ld: %s\n", done,
					ibv_wc_status_str(wc[i].status));
				return 2;
			}
		}
		done += n;
	}
	printf("sent %ld\n", done * bytes);
	fflush(stdout);
	if (argc == 8 && !strcmp(argv[7], "hold")) {
		printf("holding\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	rdma_disconnect(id);
	expect_event(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	return 0;
}
