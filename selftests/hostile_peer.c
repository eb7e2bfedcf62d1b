// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile RDS/IB peer for peer_test: connects to an rrds listener with
 * rdma_cm the way upstream RDS/IB does (port 18634, protocol 3.1 connect
 * private data), then sends frames whose every header field the command line
 * sets, however wrong, and prints what rrds sends back. Runs on rxe and siw
 * (iWARP: plain SENDs only, one SGE each).
 *
 *   hostile_peer --addr A --peer B [--port P] [--claim C] [--tos T] [--credit N]
 *                [--timeout S] [--send KEY=VALUE,...]... [--recv N]
 *                [--expect-disconnect] [--hold] [--no-ack] [--starve]
 *
 * --addr is this end's address (the namespace's RDMA address), --peer the
 * rrds end's; --port connects to rdma_cm port P instead of RDS's 18634 (a
 * registration QP's listener, say). --claim names C instead of A as the source address in the
 * connect data (another host's, say). --tos is the connect data's type of
 * service (default 0): each TOS is a connection of its own. --credit is the connect data's
 * dp_credit (default 0: no flow control). Each --send is one frame (header
 * + payload in one SEND), with keys seq, ack, len (h_len), bytes (payload
 * actually sent, at most 8192: rrds takes fragments of two pages from every
 * peer), frag (which 4 KiB fragment of the message
 * the payload is), sport, dport, flags, credit, seed (payload pattern,
 * payload.h) and csum=good|none|bad.
 * Defaults: all 0, csum good, len = bytes, bytes = what an honest sender puts
 * in fragment frag of a len-byte message.
 * records=K makes the frame an rrds packed frame (flags 0x80, sequence and
 * ports 0, len = bytes = the records' size) of K messages, message i a
 * record of its header (sequence seq + i, len, sport, dport, flags 0) and
 * len bytes of pattern seed + i, padded to 8 bytes; badrec=J spoils record
 * J's header checksum. (rrds offers to take packed frames from every peer;
 * this one does not offer to take them, so rrds never sends it one.)
 * count=N sends N messages like the frame, the sequence and seed one higher
 * each (one "sent" line for all). rrds's credits are not counted: on siw,
 * keep N within the credit rrds grants at connect.
 *
 * --starve posts no receive, so that every frame rrds sends meets a
 * receiver-not-ready answer (on RoCE; siw fails the QP instead).
 *
 * Then, in this order: --recv N waits for N whole messages from rrds (acks
 * and congestion maps not counted; each message is acknowledged, unless
 * --no-ack);
 * --expect-disconnect waits for rrds to take the link down (an rdma_cm
 * event or a failed work request; over iWARP also rrds's end of the TCP
 * connection closed for 3 s with neither, which siw can fail to report);
 * --hold waits,
 * whatever happened before, until stdin reaches end of file before exiting,
 * so that the caller can look at rrds while this end still holds the link
 * (the link going down then is a failure, unless expected). Every wait but
 * --hold ends after --timeout seconds (default 20).
 *
 * stdout, one line per event: "established credit=N" (rrds's dp_credit),
 * "sent ...", "frame ..." for every frame received, "message ... payload=HEX"
 * (the first 64 bytes) for every whole message, "disconnected (why)".
 * Errors go to stderr. Exit status: 0 if everything asked for happened, 1 if
 * not (connect refused, a wait timed out, the link went down unexpectedly),
 * 2 for a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <endian.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "payload.h"
#include "tcp_state.h"

#define RDS_IB_PORT	18634		/* upstream's RDS_PORT: rdma_cm port of IPv4 */
#define HEADER_LEN	48		/* struct rds_header */
#define FRAG_SIZE	4096		/* RDS_FRAG_SIZE: payload per frame */
#define MAX_FRAME	(2 * FRAG_SIZE)	/* rrds's receive buffers: two pages */
#define SLOT_SIZE	(HEADER_LEN + MAX_FRAME)
#define FLAG_PACKED	0x80		/* rrds: the frame carries message records */
#define PACK_ALIGN	8
#define RECV_SLOTS	256		/* room for rrds's congestion map, acks and messages */
#define MAX_FRAMES	32		/* --send options */
#define ACK_SLOTS	16		/* our acks in flight at once */
#define FLAG_CONG_BITMAP 0x01		/* RDS_FLAG_CONG_BITMAP */
#define SHOWN_BYTES	64		/* payload bytes printed per message */
/*
 * ib_core resolves a neighbour it lacks only at the deadline when no
 * neighbour event wakes it (veth peers in other namespaces; see
 * admin-guide.rst): resolve with a short one, and retry.
 */
#define ADDR_TIMEOUT_MS	1000
#define RETRY_US	500000

/* struct rds_header (net/rds/rds.h): big-endian but for the checksum. */
struct wire_header {
	uint64_t sequence;
	uint64_t ack;
	uint32_t len;
	uint16_t sport;
	uint16_t dport;
	uint8_t flags;
	uint8_t credit;
	uint8_t padding[4];
	uint16_t csum;		/* ip_fast_csum() of the header, native order */
	uint8_t exthdr[16];
};
_Static_assert(sizeof(struct wire_header) == HEADER_LEN, "rds_header is 48 bytes");

/* struct rds_ib_connect_private (net/rds/ib.h), the IPv4 form. */
struct connect_private {
	uint32_t saddr;		/* the connecting end's address */
	uint32_t daddr;		/* the accepting end's */
	uint8_t major;
	uint8_t minor;
	uint16_t minor_mask;
	uint8_t tos;
	uint8_t reserved1;
	uint16_t reserved2;
	uint64_t ack_seq;
	uint32_t credit;	/* receives posted: the other side's send credits */
	uint32_t padding;
} __attribute__((packed));
_Static_assert(sizeof(struct connect_private) == 32, "rds_ib_connect_private is 32 bytes");

enum csum_kind { CSUM_GOOD, CSUM_NONE, CSUM_BAD };

struct frame {
	uint64_t seq, ack, seed;
	uint32_t len, bytes, frag;
	uint16_t sport, dport;
	uint8_t flags, credit;
	bool len_set, bytes_set;
	enum csum_kind csum;
	uint32_t records, badrec;	/* records=K (0: not packed), badrec=J + 1 */
	uint32_t count;			/* count=N: sent N times (0: once) */
};

/* The connection and what arrived on it. */
struct peer {
	struct rdma_event_channel *channel;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	unsigned char *buf;	/* RECV_SLOTS, then MAX_FRAMES, then ACK_SLOTS slots */
	bool up;
	unsigned int sends_done, acks_in_flight, next_ack;
	/* The message being received. */
	bool partial;
	struct wire_header first;
	uint32_t got;
	unsigned char head[SHOWN_BYTES];
	unsigned int messages;
};

static int timeout_s = 20;
/* --no-ack: never acknowledge rrds's messages. */
static bool no_ack;
static bool starve;	/* --starve: no receive posted */
/* How long a closed TCP connection may go unreported (llp_closed_unnoticed). */
#define LLP_GRACE_S	3
/* The source address the connect data names (--claim), if not this end's. */
static const char *claimed_saddr;
/* The connect data's type of service (--tos). */
static uint8_t connect_tos;
/* The rdma_cm port to connect to (--port). */
static uint16_t connect_port = RDS_IB_PORT;

static void __attribute__((format(printf, 1, 2))) warnx(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "hostile_peer: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned char *slot(struct peer *p, unsigned int i)
{
	return p->buf + (size_t)i * SLOT_SIZE;
}

/* ip_fast_csum() over the 48 bytes, as upstream's rds_message_make_checksum. */
static uint16_t header_checksum(const struct wire_header *h)
{
	const unsigned char *b = (const unsigned char *)h;
	uint32_t sum = 0;
	uint16_t word;

	for (unsigned int i = 0; i < HEADER_LEN; i += 2) {
		memcpy(&word, b + i, 2);
		sum += word;
	}
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

static void header_fill(struct wire_header *h, const struct frame *f)
{
	memset(h, 0, sizeof(*h));
	h->sequence = htobe64(f->seq);
	h->ack = htobe64(f->ack);
	h->len = htobe32(f->len);
	h->sport = htobe16(f->sport);
	h->dport = htobe16(f->dport);
	h->flags = f->flags;
	h->credit = f->credit;
	if (f->csum == CSUM_NONE)
		return;
	h->csum = header_checksum(h);
	if (f->csum == CSUM_BAD)
		h->csum ^= 0x5a5a;
}

static int post_receive(struct peer *p, unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)slot(p, i), .length = SLOT_SIZE, .lkey = p->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(p->id->qp, &wr, &bad);
}

/* Posts slot @i (a send or ack slot) holding a header and @bytes of payload. */
static int post_send(struct peer *p, unsigned int i, uint32_t bytes)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)slot(p, i), .length = HEADER_LEN + bytes, .lkey = p->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	return ibv_post_send(p->id->qp, &wr, &bad);
}

static void link_down(struct peer *p, const char *why)
{
	if (!p->up)
		return;
	p->up = false;
	printf("disconnected (%s)\n", why);
}

/* Acknowledges message @seq with an explicit ack, so rrds can let it go. */
static void send_ack(struct peer *p, uint64_t seq)
{
	struct frame f = { .ack = seq };
	unsigned int i = RECV_SLOTS + MAX_FRAMES + p->next_ack;

	/* Acks are cumulative: skipping one while all slots are busy loses nothing. */
	if (!p->up || no_ack || p->acks_in_flight == ACK_SLOTS)
		return;
	header_fill((struct wire_header *)slot(p, i), &f);
	if (post_send(p, i, 0) == 0) {
		p->acks_in_flight++;
		p->next_ack = (p->next_ack + 1) % ACK_SLOTS;
	}
}

static void print_message(struct peer *p)
{
	uint32_t len = be32toh(p->first.len);
	uint32_t shown = len < SHOWN_BYTES ? len : SHOWN_BYTES;

	printf("message seq=%" PRIu64 " len=%u sport=%u dport=%u flags=%#x payload=",
	       be64toh(p->first.sequence), len, be16toh(p->first.sport), be16toh(p->first.dport),
	       p->first.flags);
	for (uint32_t i = 0; i < shown; i++)
		printf("%02x", p->head[i]);
	printf("\n");
}

/* A frame from rrds: print it, and count and acknowledge whole messages. */
static void frame_received(struct peer *p, const unsigned char *b, uint32_t byte_len)
{
	struct wire_header h;
	uint32_t data, len;

	if (byte_len < HEADER_LEN) {
		printf("frame runt bytes=%u\n", byte_len);
		return;
	}
	data = byte_len - HEADER_LEN;
	memcpy(&h, b, sizeof(h));
	len = be32toh(h.len);
	printf("frame seq=%" PRIu64 " ack=%" PRIu64 " len=%u sport=%u dport=%u flags=%#x credit=%u"
	       " bytes=%u csum=%s\n", be64toh(h.sequence), be64toh(h.ack), len, be16toh(h.sport),
	       be16toh(h.dport), h.flags, h.credit, data,
	       !h.csum || header_checksum(&h) == 0 ? "ok" : "bad");
	/* An explicit ack or credit update, or a congestion map: no message. */
	if ((!h.sport && !h.dport && !len && !data) || (h.flags & FLAG_CONG_BITMAP))
		return;
	if (!p->partial || h.sequence != p->first.sequence) {
		p->partial = true;
		p->first = h;
		p->got = 0;
	}
	if (p->got < SHOWN_BYTES)
		memcpy(p->head + p->got, b + HEADER_LEN,
		       data < SHOWN_BYTES - p->got ? data : SHOWN_BYTES - p->got);
	p->got += data;
	if (p->got < len)
		return;
	p->partial = false;
	p->messages++;
	print_message(p);
	send_ack(p, be64toh(h.sequence));
}

/* Handles what completed: receives (reposted), sends, acks. */
static void poll_cq(struct peer *p)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(p->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			unsigned int s = wc[i].wr_id;

			if (wc[i].status != IBV_WC_SUCCESS) {
				if (s >= RECV_SLOTS + MAX_FRAMES)
					p->acks_in_flight--;
				if (p->up)
					warnx("work request %u: %s", s,
					      ibv_wc_status_str(wc[i].status));
				link_down(p, "completion error");
				continue;
			}
			if (wc[i].opcode & IBV_WC_RECV) {
				frame_received(p, slot(p, s), wc[i].byte_len);
				if (p->up && post_receive(p, s))
					link_down(p, "cannot repost a receive");
			} else if (s >= RECV_SLOTS + MAX_FRAMES) {
				p->acks_in_flight--;
			} else {
				p->sends_done++;
			}
		}
	}
	if (n < 0)
		link_down(p, "ibv_poll_cq failed");
}

/*
 * Waits up to @ms for an rdma_cm event (and, given @eof, for stdin to end)
 * and handles completions. Returns the event (to ack with rdma_ack_cm_event),
 * or NULL; sets *@eof when stdin ended.
 */
static struct rdma_cm_event *step(struct peer *p, int ms, bool *eof)
{
	struct pollfd fds[2] = {
		/* No channel: a connect that failed early, held for --hold. */
		{ .fd = p->channel ? p->channel->fd : -1, .events = POLLIN },
		{ .fd = STDIN_FILENO, .events = POLLIN },
	};
	struct rdma_cm_event *ev = NULL;

	if (p->cq)
		poll_cq(p);
	if (poll(fds, eof ? 2 : 1, ms) > 0) {
		if (eof && fds[1].revents) {
			char c[256];

			if (read(STDIN_FILENO, c, sizeof(c)) <= 0)
				*eof = true;
		}
		if (fds[0].revents && rdma_get_cm_event(p->channel, &ev))
			ev = NULL;
	}
	if (p->cq)
		poll_cq(p);
	return ev;
}

/* After ESTABLISHED: any event ends the link (DISCONNECTED, DEVICE_REMOVAL...). */
/*
 * Over iWARP, whether this end's TCP connection has been in CLOSE-WAIT (rrds
 * closed its end) for LLP_GRACE_S with no rdma_cm event. siw can lose that
 * event: its endpoint's pool of four CM work items may be empty when the FIN
 * arrives (Documentation/testing.rst), and its QP then stays in RTS with
 * sending suspended, so nothing else would ever tell this end.
 */
static bool llp_closed_unnoticed(struct peer *p)
{
	static double closed_since;
	struct sockaddr_in *local;

	if (!p->id || !p->id->verbs ||
	    p->id->verbs->device->transport_type != IBV_TRANSPORT_IWARP)
		return false;
	local = (struct sockaddr_in *)rdma_get_local_addr(p->id);
	if (local->sin_family != AF_INET || tcp_state_of(local) != TCP_STATE_CLOSE_WAIT) {
		closed_since = 0;
		return false;
	}
	if (!closed_since)
		closed_since = now_s();
	return now_s() - closed_since >= LLP_GRACE_S;
}

static void step_connected(struct peer *p, int ms, bool *eof)
{
	struct rdma_cm_event *ev = step(p, ms, eof);

	if (!ev)
		return;
	link_down(p, rdma_event_str(ev->event));
	rdma_ack_cm_event(ev);
}

/*
 * Waits for @want; anything else fails the connect. 0, 1 if worth retrying
 * (the address did not resolve, or rrds rejected the connect), or -1.
 */
static int wait_event(struct peer *p, enum rdma_cm_event_type want, struct connect_private *reply)
{
	double end = now_s() + timeout_s;
	struct rdma_cm_event *ev;

	while (now_s() < end) {
		ev = step(p, 100, NULL);
		if (!ev)
			continue;
		if (ev->event != want) {
			/* Over iWARP a refusal can come as a connect error. */
			bool retry = ev->event == RDMA_CM_EVENT_REJECTED ||
				     ev->event == RDMA_CM_EVENT_CONNECT_ERROR ||
				     ev->event == RDMA_CM_EVENT_UNREACHABLE ||
				     ev->event == RDMA_CM_EVENT_ADDR_ERROR;

			warnx("connect: %s (status %d)", rdma_event_str(ev->event), ev->status);
			rdma_ack_cm_event(ev);
			return retry ? 1 : -1;
		}
		if (reply && ev->param.conn.private_data_len >= sizeof(*reply))
			memcpy(reply, ev->param.conn.private_data, sizeof(*reply));
		rdma_ack_cm_event(ev);
		return 0;
	}
	warnx("connect: no %s within %d s", rdma_event_str(want), timeout_s);
	return -1;
}

/* The QP, its CQ and buffers; every receive posted before connecting. */
static int make_qp(struct peer *p)
{
	size_t size = (size_t)(RECV_SLOTS + MAX_FRAMES + ACK_SLOTS) * SLOT_SIZE;
	struct ibv_qp_init_attr attr = {
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = MAX_FRAMES + ACK_SLOTS,
			.max_recv_wr = RECV_SLOTS,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};

	p->pd = ibv_alloc_pd(p->id->verbs);
	p->cq = p->pd ? ibv_create_cq(p->id->verbs, RECV_SLOTS + MAX_FRAMES + ACK_SLOTS,
				      NULL, NULL, 0) : NULL;
	p->buf = aligned_alloc(4096, size);
	if (!p->cq || !p->buf) {
		warnx("cannot allocate a PD, CQ or buffers: %s", strerror(errno));
		return -1;
	}
	memset(p->buf, 0, size);
	p->mr = ibv_reg_mr(p->pd, p->buf, size, IBV_ACCESS_LOCAL_WRITE);
	attr.send_cq = attr.recv_cq = p->cq;
	if (!p->mr || rdma_create_qp(p->id, p->pd, &attr)) {
		warnx("cannot register memory or create the QP: %s", strerror(errno));
		return -1;
	}
	for (unsigned int i = 0; i < (starve ? 0 : RECV_SLOTS); i++) {
		if (post_receive(p, i)) {
			warnx("cannot post receive %u", i);
			return -1;
		}
	}
	return 0;
}

/* Connects; 0, 1 if worth retrying (wait_event), or -1. */
static int connect_to(struct peer *p, const char *addr, const char *peer_addr, uint32_t credit)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(connect_port) };
	struct connect_private mine = {
		.major = 3, .minor = 1, .minor_mask = htobe16(0x0003), .credit = htobe32(credit),
	}, reply = { 0 };
	struct rdma_conn_param param = {
		.private_data = &mine, .private_data_len = sizeof(mine),
		.responder_resources = 1, .initiator_depth = 1,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	int rc;

	if (inet_pton(AF_INET, addr, &src.sin_addr) != 1 ||
	    inet_pton(AF_INET, peer_addr, &dst.sin_addr) != 1) {
		warnx("not an IPv4 address: %s or %s", addr, peer_addr);
		return -1;
	}
	/* Upstream's saddr is the connecting end's address: rrds keys the connection on it. */
	mine.saddr = src.sin_addr.s_addr;
	mine.daddr = dst.sin_addr.s_addr;
	mine.tos = connect_tos;
	if (claimed_saddr && inet_pton(AF_INET, claimed_saddr, &mine.saddr) != 1) {
		warnx("not an IPv4 address: %s", claimed_saddr);
		return -1;
	}
	p->channel = rdma_create_event_channel();
	if (!p->channel || rdma_create_id(p->channel, &p->id, NULL, RDMA_PS_TCP) ||
	    fcntl(p->channel->fd, F_SETFL, O_NONBLOCK)) {
		warnx("rdma_cm: %s", strerror(errno));
		return -1;
	}
	if (rdma_resolve_addr(p->id, (struct sockaddr *)&src, (struct sockaddr *)&dst,
			      ADDR_TIMEOUT_MS)) {
		warnx("rdma_resolve_addr: %s", strerror(errno));
		return -1;
	}
	rc = wait_event(p, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
	if (rc)
		return rc;
	if (rdma_resolve_route(p->id, timeout_s * 1000) ||
	    wait_event(p, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) || make_qp(p)) {
		warnx("could not connect to %s:%d", peer_addr, connect_port);
		return -1;
	}
	/*
	 * Over iWARP (siw) the TCP connect happens here, and can fail at once
	 * (ENOMEM from siw, about once per peer_test run): retried, as a
	 * refusal is.
	 */
	if (rdma_connect(p->id, &param)) {
		warnx("rdma_connect to %s:%d: %s", peer_addr, connect_port, strerror(errno));
		return 1;
	}
	rc = wait_event(p, RDMA_CM_EVENT_ESTABLISHED, &reply);
	if (rc)
		return rc;
	p->up = true;
	printf("established credit=%u\n", be32toh(reply.credit));
	return 0;
}

/* Bytes a message of @len bytes takes as a record of a packed frame. */
static uint64_t record_bytes(uint64_t len)
{
	return HEADER_LEN + (len + PACK_ALIGN - 1) / PACK_ALIGN * PACK_ALIGN;
}

/* Sends @f from its own slot and waits for the send to complete; 0 or -1. */
static int send_frame(struct peer *p, unsigned int n, const struct frame *f, bool say)
{
	unsigned int i = RECV_SLOTS + n, done = p->sends_done;
	unsigned char *b = slot(p, i);
	double end = now_s() + timeout_s;
	uint32_t bytes = f->bytes;

	if (f->records) {
		struct frame outer = { .ack = f->ack, .credit = f->credit, .flags = FLAG_PACKED };

		bytes = 0;
		for (uint32_t r = 0; r < f->records; r++) {
			struct frame inner = *f;

			inner.seq = f->seq + r;
			inner.flags = 0;
			inner.ack = 0;
			inner.credit = 0;
			inner.csum = f->badrec == r + 1 ? CSUM_BAD : CSUM_GOOD;
			header_fill((struct wire_header *)(b + HEADER_LEN + bytes), &inner);
			payload_fill(b + 2 * HEADER_LEN + bytes, f->len, NULL, 0, f->seed + r);
			bytes += record_bytes(f->len);
		}
		outer.len = outer.bytes = bytes;
		header_fill((struct wire_header *)b, &outer);
	} else {
		header_fill((struct wire_header *)b, f);
		/* Word k of the message pattern is word k - 512 * frag of this fragment's. */
		payload_fill(b + HEADER_LEN, f->bytes, NULL, 0,
			     f->seed + (uint64_t)f->frag * FRAG_SIZE / 8);
	}
	if (post_send(p, i, bytes)) {
		warnx("ibv_post_send failed");
		return -1;
	}
	while (p->up && p->sends_done == done && now_s() < end)
		step_connected(p, 50, NULL);
	if (p->sends_done == done)
		return -1;
	if (!say)
		return 0;
	printf("sent seq=%" PRIu64 " len=%u bytes=%u frag=%u sport=%u dport=%u flags=%#x"
	       " credit=%u ack=%" PRIu64 "\n", f->seq, f->len, f->bytes, f->frag, f->sport,
	       f->dport, f->flags, f->credit, f->ack);
	return 0;
}

/*
 * Sends @f, or with count=N, N messages like it (sequence and seed one
 * higher each), each waiting for the last to complete: 0 or -1.
 */
static int send_frames(struct peer *p, unsigned int n, const struct frame *f)
{
	struct frame each = *f;

	if (!f->count)
		return send_frame(p, n, f, true);
	for (uint32_t r = 0; r < f->count; r++, each.seq++, each.seed++) {
		if (send_frame(p, n, &each, false))
			return -1;
	}
	printf("sent %u like seq=%" PRIu64 " len=%u dport=%u\n", f->count, f->seq, f->len,
	       f->dport);
	return 0;
}

static void tear_down(struct peer *p)
{
	if (p->id && p->up)
		rdma_disconnect(p->id);
	if (p->id && p->id->qp)
		rdma_destroy_qp(p->id);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->cq)
		ibv_destroy_cq(p->cq);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->id)
		rdma_destroy_id(p->id);
	if (p->channel)
		rdma_destroy_event_channel(p->channel);
	free(p->buf);
}

/* Parses one unsigned value within [0, max]; 0 or -1. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno || end == s || *end || *s == '-' || *out > max ? -1 : 0;
}

/* Parses a --send argument; 0 or -1. */
static int parse_frame(char *arg, struct frame *f)
{
	char *save, *kv;

	for (kv = strtok_r(arg, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *val = strchr(kv, '=');
		uint64_t v = 0;

		if (!val)
			return -1;
		*val++ = '\0';
		if (!strcmp(kv, "csum")) {
			if (!strcmp(val, "good"))
				f->csum = CSUM_GOOD;
			else if (!strcmp(val, "none"))
				f->csum = CSUM_NONE;
			else if (!strcmp(val, "bad"))
				f->csum = CSUM_BAD;
			else
				return -1;
			continue;
		}
		if (parse_u64(val, UINT64_MAX, &v))
			return -1;
		if (!strcmp(kv, "seq"))
			f->seq = v;
		else if (!strcmp(kv, "ack"))
			f->ack = v;
		else if (!strcmp(kv, "seed"))
			f->seed = v;
		else if (!strcmp(kv, "len") && v <= UINT32_MAX)
			f->len = v, f->len_set = true;
		else if (!strcmp(kv, "bytes") && v <= MAX_FRAME)
			f->bytes = v, f->bytes_set = true;
		else if (!strcmp(kv, "frag") && v < UINT32_MAX / FRAG_SIZE)
			f->frag = v;
		else if (!strcmp(kv, "sport") && v <= UINT16_MAX)
			f->sport = v;
		else if (!strcmp(kv, "dport") && v <= UINT16_MAX)
			f->dport = v;
		else if (!strcmp(kv, "flags") && v <= UINT8_MAX)
			f->flags = v;
		else if (!strcmp(kv, "credit") && v <= UINT8_MAX)
			f->credit = v;
		else if (!strcmp(kv, "records") && v <= 64)
			f->records = v;
		else if (!strcmp(kv, "badrec") && v < 64)
			f->badrec = v + 1;
		else if (!strcmp(kv, "count") && v <= 100000)
			f->count = v;
		else
			return -1;
	}
	/* A packed frame is one frame: it is not repeated. */
	if (f->records && f->count)
		return -1;
	/* The records must fit in one frame. */
	if (f->records && (uint64_t)f->records * record_bytes(f->len) > FRAG_SIZE)
		return -1;
	if (!f->len_set)
		f->len = f->bytes;
	if (!f->bytes_set) {
		uint64_t off = (uint64_t)f->frag * FRAG_SIZE;

		f->bytes = off >= f->len ? 0 : f->len - off > FRAG_SIZE ? FRAG_SIZE : f->len - off;
	}
	return 0;
}

/* Sends @frames, then waits for what was asked; 0 if it all happened, or -1. */
static int play(struct peer *p, const struct frame *frames, unsigned int nframes,
		unsigned int want_messages, bool expect_disconnect)
{
	double end;

	for (unsigned int i = 0; i < nframes; i++) {
		if (send_frames(p, i, &frames[i]) == 0)
			continue;
		/* rrds may refuse a frame by resetting the link: then stop sending. */
		if (expect_disconnect && !p->up)
			break;
		warnx("frame %u was not sent%s", i, p->up ? " in time" : ": the link went down");
		return -1;
	}
	end = now_s() + timeout_s;
	while (p->up && p->messages < want_messages && now_s() < end)
		step_connected(p, 50, NULL);
	if (p->messages < want_messages) {
		warnx("%u of %u messages arrived", p->messages, want_messages);
		return -1;
	}
	end = now_s() + timeout_s;
	while (expect_disconnect && p->up && now_s() < end) {
		step_connected(p, 50, NULL);
		if (p->up && llp_closed_unnoticed(p))
			link_down(p, "TCP closed by rrds, no event from siw");
	}
	if (expect_disconnect && p->up) {
		warnx("rrds kept the link up for %d s", timeout_s);
		return -1;
	}
	return 0;
}

static void __attribute__((noreturn)) usage(void)
{
	fprintf(stderr,
		"usage: hostile_peer --addr A --peer B [--port P] [--claim C] [--tos T] [--credit N]\n"
		"                    [--timeout S] [--send KEY=VALUE,...]... [--recv N]"
		" [--expect-disconnect] [--hold] [--no-ack] [--starve]\n"
		"  send keys: seq ack len bytes frag sport dport flags credit seed records badrec"
		" count csum=good|none|bad\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "peer", required_argument, NULL, 'p' },
		{ "port", required_argument, NULL, 'P' },
		{ "claim", required_argument, NULL, 'C' },
		{ "tos", required_argument, NULL, 'T' },
		{ "credit", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "send", required_argument, NULL, 's' },
		{ "recv", required_argument, NULL, 'r' },
		{ "expect-disconnect", no_argument, NULL, 'd' },
		{ "hold", no_argument, NULL, 'h' },
		{ "no-ack", no_argument, NULL, 'n' },
		{ "starve", no_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	struct frame frames[MAX_FRAMES] = { 0 };
	const char *addr = NULL, *peer_addr = NULL;
	unsigned int nframes = 0, want_messages = 0;
	bool expect_disconnect = false, hold = false;
	struct peer p = { 0 };
	uint64_t credit = 0, v;
	int opt, rc;
	double end;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'a':
			addr = optarg;
			break;
		case 'p':
			peer_addr = optarg;
			break;
		case 'P':
			if (parse_u64(optarg, UINT16_MAX, &v) || !v)
				usage();
			connect_port = v;
			break;
		case 'C':
			claimed_saddr = optarg;
			break;
		case 'T':
			if (parse_u64(optarg, UINT8_MAX, &v))
				usage();
			connect_tos = v;
			break;
		case 'c':
			if (parse_u64(optarg, UINT32_MAX, &credit))
				usage();
			break;
		case 't':
			if (parse_u64(optarg, 3600, &v) || !v)
				usage();
			timeout_s = v;
			break;
		case 's':
			if (nframes == MAX_FRAMES || parse_frame(optarg, &frames[nframes++]))
				usage();
			break;
		case 'r':
			if (parse_u64(optarg, UINT32_MAX, &v))
				usage();
			want_messages = v;
			break;
		case 'd':
			expect_disconnect = true;
			break;
		case 'h':
			hold = true;
			break;
		case 'n':
			no_ack = true;
			break;
		case 'S':
			starve = true;
			break;
		default:
			usage();
		}
	}
	if (!addr || !peer_addr || optind != argc)
		usage();

	/*
	 * rrds rejects a connect while it holds a link it thinks is up, and drops
	 * that link: retry, as upstream's reconnect does (and after a neighbour
	 * resolution that timed out).
	 */
	end = now_s() + timeout_s;
	while ((rc = connect_to(&p, addr, peer_addr, credit)) == 1 && now_s() < end) {
		tear_down(&p);
		memset(&p, 0, sizeof(p));
		usleep(RETRY_US);
	}
	if (rc) {
		if (rc == 1)
			warnx("no connection to %s within %d s", peer_addr, timeout_s);
		rc = 1;
		goto out;
	}
	rc = play(&p, frames, nframes, want_messages, expect_disconnect) ? 1 : 0;
out:
	if (hold) {
		bool was_up = p.up, eof = false;

		while (!eof)
			step_connected(&p, 100, &eof);
		if (was_up && !p.up && !expect_disconnect) {
			warnx("the link went down while held");
			rc = 1;
		}
	}
	tear_down(&p);
	return rc;
}
