/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interop test (scripts/interop): two VMs joined by a virtio NIC, the
 * in-tree RDS/IB in one (interop_peer), rrds in the other (interop_check),
 * both over rxe. The rrds side drives; every request is one RDS message
 * starting with a struct interop_cmd, and the peer answers each one. The
 * peer also echoes whatever reaches its IPv6 socket ([INTEROP_PEER_IP6]:
 * INTEROP_PORT) back to its sender.
 */
#ifndef RRDS_INTEROP_H
#define RRDS_INTEROP_H

#include <stdint.h>

#define INTEROP_PEER_IP	"10.99.0.1"	/* in-tree RDS */
#define INTEROP_RRDS_IP	"10.99.0.2"	/* rrds */
#define INTEROP_PEER_IP6	"fd00:99::1"	/* the same hosts over IPv6 */
#define INTEROP_RRDS_IP6	"fd00:99::2"
#define INTEROP_PORT	4000
/* The largest message or RDMA either side moves. */
#define INTEROP_MAX	(1u << 20)

enum interop_op {
	OP_HELLO = 'H',		/* peer -> rrds, sent once at start */
	OP_ECHO = 'E',		/* -> the same message back */
	OP_STREAM = 'S',	/* -> @count messages OP_STREAMED, seeds @seed.. */
	OP_STREAMED = 's',
	OP_PING = 'P',		/* the peer pings rrds -> OP_RESULT, @count 1 on a pong */
	/*
	 * -> OP_MAPPED with RDS_CMSG_RDMA_MAP of @len pattern(@seed) bytes at
	 * page offset @count, flags RDS_RDMA_READWRITE | @cookie (USE_ONCE)
	 */
	OP_MAP = 'M',
	OP_MAPPED = 'm',
	/*
	 * the mapped memory (page offset @count) holds pattern(@seed)? ->
	 * OP_RESULT, @status what RDS_FREE_MR of its cookie returned (0 or -errno)
	 */
	OP_CHECK = 'C',
	/*
	 * The peer READs @len of @cookie -> OP_READ_DONE, OP_RESULT (@seed 1 if
	 * in-tree notified the READ done before all of its data had landed)
	 */
	OP_READ = 'R',
	OP_READ_DONE = 'r',	/* the message of the READ's sendmsg */
	OP_WRITE = 'W',		/* the peer WRITEs pattern(@seed) to @cookie -> OP_WRITTEN, OP_RESULT */
	OP_WRITTEN = 'w',	/* the message of the WRITE's sendmsg */
	OP_FLOW_CONTROL = 'F',	/* net.rds.ib.flow_control := @count (new connections) -> OP_RESULT */
	OP_NOTE = 'N',		/* nothing: the message of an RDMA sendmsg of the rrds side */
	/* from a socket on INTEROP_PORT + 1 with TOS @count, OP_TOS_SENT -> OP_RESULT */
	OP_TOS_SEND = 'T',
	OP_TOS_SENT = 't',
	/* -> OP_RESULT, @count: bit n set for each connection to rrds with TOS n (< 64) */
	OP_CONNS = 'Q',
	OP_RESULT = 'x',	/* @status: RDMA status or -errno; @count: mismatch offset + 1, or 0 */
};

struct interop_cmd {
	uint8_t op;
	uint8_t pad[3];
	int32_t status;
	uint64_t seed;
	uint64_t len;
	uint64_t cookie;
	uint64_t count;
};

#endif /* RRDS_INTEROP_H */
