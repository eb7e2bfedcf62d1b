/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * rrds extensions to the RDS socket API of <linux/rds.h>.
 *
 * Everything here is numbered far outside upstream's ranges (options 1..12,
 * RDS_INFO 10000..10017, cmsg types 1..12), so a program can probe for it: the
 * in-tree RDS answers ENOPROTOOPT. See Documentation/userspace-api.rst.
 */
#ifndef _UAPI_LINUX_RRDS_H
#define _UAPI_LINUX_RRDS_H

#include <linux/types.h>

/* "RR": base of every rrds SOL_RDS option, info and cmsg number. */
#define RRDS_OPT_BASE			0x52520000

/*
 * XRC target-QP manager: SOL_RDS options on a socket bound to an address of
 * an RDMA device. The QP is created on that device; QP numbers are looked up
 * among the targets of the socket's network namespace and device.
 */
#define RRDS_XRC_CREATE			(RRDS_OPT_BASE + 1)	/* getsockopt: struct rrds_xrc_create */
#define RRDS_XRC_REGISTER		(RRDS_OPT_BASE + 2)	/* setsockopt: struct rrds_xrc_qp */
#define RRDS_XRC_UNREGISTER		(RRDS_OPT_BASE + 3)	/* setsockopt: struct rrds_xrc_qp */
#define RRDS_XRC_INJECT			(RRDS_OPT_BASE + 4)	/* setsockopt: struct rrds_xrc_inject */

/* getsockopt with RDS_INFO's sizing protocol: struct rrds_info_xrc_target records. */
#define RRDS_INFO_XRC_TARGETS		(RRDS_OPT_BASE + 0x100)

/* SOL_RDS cmsg of a 0-byte recvmsg: struct rrds_xrc_event. */
#define RRDS_CMSG_XRC_EVENT		(RRDS_OPT_BASE + 1)

/* How a target QP is implemented on its device. */
#define RRDS_XRC_BACKEND_XRC		1	/* an IB_QPT_XRC_TGT QP in an XRC domain */
#define RRDS_XRC_BACKEND_EMULATED	2	/* an RC QP on an SRQ (rxe, siw: no XRC) */

struct rrds_xrc_create {
	__u32	qp_num;		/* out */
	__u32	backend;	/* out: RRDS_XRC_BACKEND_* */
};

struct rrds_xrc_qp {
	__u32	qp_num;
	__u32	reserved;	/* 0 */
};

/* RRDS_XRC_INJECT actions (CAP_NET_ADMIN; for tests). */
#define RRDS_XRC_INJECT_QP_ERROR	1	/* move the QP to the error state */
#define RRDS_XRC_INJECT_EVENT		2	/* deliver a synthesized event */

struct rrds_xrc_inject {
	__u32	qp_num;
	__u32	action;		/* RRDS_XRC_INJECT_* */
	__u32	event;		/* RRDS_XRC_INJECT_EVENT: an RRDS_XRC_EV_* value */
	__u32	reserved;	/* 0 */
};

/* Event types: the values of the kernel's enum ib_event_type, plus rrds's own. */
#define RRDS_XRC_EV_QP_FATAL		1
#define RRDS_XRC_EV_QP_REQ_ERR		2
#define RRDS_XRC_EV_QP_ACCESS_ERR	3
#define RRDS_XRC_EV_COMM_EST		4
#define RRDS_XRC_EV_SQ_DRAINED		5
#define RRDS_XRC_EV_PATH_MIG		6
#define RRDS_XRC_EV_PATH_MIG_ERR	7
/* An emulated target's SRQ (its receives) has an error. */
#define RRDS_XRC_EV_SRQ_ERR		14
/*
 * Fewer than a quarter of an emulated target's receives are posted: its
 * initiator sends faster than the target's buffers come back (rrds arms the
 * SRQ's limit again once they have).
 */
#define RRDS_XRC_EV_SRQ_LIMIT_REACHED	15
#define RRDS_XRC_EV_QP_LAST_WQE_REACHED	16
/* The target is gone under the registration (device removed, module unloaded). */
#define RRDS_XRC_EV_TARGET_GONE		0x100

/* struct rrds_xrc_event flags */
#define RRDS_XRC_EVENT_SYNTHESIZED	0x1	/* made by rrds, not raised by the driver */
#define RRDS_XRC_EVENT_FINAL		0x2	/* the registration has ended */
#define RRDS_XRC_EVENT_OVERFLOW		0x4	/* events were lost before this one */

struct rrds_xrc_event {
	__u32	qp_num;
	__u32	event;		/* RRDS_XRC_EV_* */
	__u32	flags;		/* RRDS_XRC_EVENT_* */
	__u32	lost;		/* events lost to a full queue just before this one */
};

/* Events a registration holds before it overflows. */
#define RRDS_XRC_EVENT_QUEUE_LEN	64

struct rrds_info_xrc_target {
	__u32	qp_num;
	__u32	backend;	/* RRDS_XRC_BACKEND_* */
	__u32	qp_state;	/* IB QP state: 0 reset, 1 init, 2 rtr, 3 rts, 4 sqd, 5 sqe, 6 error */
	__u32	registrations;	/* processes registered */
	__u64	events;		/* events delivered, one per registration reached */
	__u64	overflows;	/* events lost to full queues */
	__u8	device[64];	/* NUL terminated */
	__u64	bytes_received;	/* payload received on the target's SRQ (emulated) */
	__u32	connections;	/* initiators connected now */
	__u32	accepted;	/* initiators accepted since the target was created */
};

/*
 * In-band set-up: rrds listens on RRDS_XRC_CM_PORT (rdma_cm, RDMA_PS_TCP) of
 * every address a target was created through, for connect requests whose
 * private data is a struct rrds_xrc_connect_private naming a target of that
 * namespace and device. It accepts them onto the target's QP, which it moves
 * to RTR (an emulated target, an RC QP, takes one initiator at a time), with
 * the target's QP number in the reply and its SRQ flag set; it refuses the
 * others (a consumer-defined reject carrying struct rrds_xrc_reject_private).
 * Multi-byte fields are big-endian.
 */
#define RRDS_XRC_CM_PORT		18636
#define RRDS_XRC_CM_MAGIC		0x52525843	/* "RRXC" */
#define RRDS_XRC_CM_VERSION		1

struct rrds_xrc_connect_private {
	__be32	magic;		/* RRDS_XRC_CM_MAGIC */
	__u8	version;	/* RRDS_XRC_CM_VERSION */
	__u8	reserved[3];	/* 0 */
	__be32	qp_num;		/* the target's */
};

/* struct rrds_xrc_reject_private reason */
#define RRDS_XRC_REJECT_MALFORMED	1	/* not a connect request of this version */
#define RRDS_XRC_REJECT_NO_TARGET	2	/* no such target on this address */
#define RRDS_XRC_REJECT_BUSY		3	/* the emulated target has its initiator */
#define RRDS_XRC_REJECT_FAILED		4	/* the target QP could not be made ready */

struct rrds_xrc_reject_private {
	__be32	magic;		/* RRDS_XRC_CM_MAGIC */
	__be32	reason;		/* RRDS_XRC_REJECT_* */
};

/*
 * Kernel-side initiators: setsockopt(SOL_RDS, RRDS_XRC_CONNECT, struct
 * rrds_xrc_remote) on a socket bound to an address of an RDMA device
 * connects a QP owned by the socket (an RC QP, which is what an emulated
 * target accepts) to the target `qp_num` at `addr`, port RRDS_XRC_CM_PORT,
 * and returns once it is connected or refused (the reject reasons become
 * ECONNREFUSED, EBUSY, EPROTO and EIO). A sendmsg carrying a SOL_RDS
 * RRDS_CMSG_XRC_SEND cmsg (struct rrds_xrc_remote) then sends its payload,
 * at most RRDS_XRC_SEND_MAX bytes, to that target, returning once the
 * target has it. RRDS_XRC_DISCONNECT ends the connection; closing the
 * socket ends all of them.
 */
#define RRDS_XRC_CONNECT		(RRDS_OPT_BASE + 6)	/* setsockopt: struct rrds_xrc_remote */
#define RRDS_XRC_DISCONNECT		(RRDS_OPT_BASE + 7)	/* setsockopt: struct rrds_xrc_remote */
#define RRDS_CMSG_XRC_SEND		(RRDS_OPT_BASE + 3)	/* sendmsg: struct rrds_xrc_remote */
#define RRDS_XRC_SEND_MAX		4096	/* an emulated target's receive buffer */

struct rrds_xrc_remote {
	__u8	addr[16];	/* the target's address; IPv4 as ::ffff:a.b.c.d */
	__u32	qp_num;		/* the target's */
	__u32	reserved;	/* 0 */
};

/*
 * Connection events: setsockopt(SOL_RDS, RRDS_CONN_MONITOR, int) with one of
 * the values below makes the socket receive, as 0-byte recvmsg notifications
 * with an RRDS_CMSG_CONN_EVENT cmsg (struct rrds_conn_event), the state
 * changes of its namespace's connections: those it has sent on (USED), or
 * all of them (ALL). 0 stops them and drops what is queued. getsockopt
 * returns the value set.
 */
#define RRDS_CONN_MONITOR		(RRDS_OPT_BASE + 5)	/* int: RRDS_CONN_MONITOR_* */
#define RRDS_CONN_MONITOR_OFF		0
#define RRDS_CONN_MONITOR_USED		1
#define RRDS_CONN_MONITOR_ALL		2

/* SOL_RDS cmsg of a 0-byte recvmsg: struct rrds_conn_event. */
#define RRDS_CMSG_CONN_EVENT		(RRDS_OPT_BASE + 2)

/* struct rrds_conn_event event */
#define RRDS_CONN_EV_UP			1	/* the link came up */
#define RRDS_CONN_EV_DOWN		2	/* the link went, nothing to resend */
#define RRDS_CONN_EV_RESET		3	/* the link went; unacknowledged messages are sent again */

/* struct rrds_conn_event reason (DOWN and RESET) */
#define RRDS_CONN_REASON_PEER_CLOSED	1	/* the peer disconnected or refused */
#define RRDS_CONN_REASON_LINK_ERROR	2	/* a completion error, a stalled link, a failed connect */
#define RRDS_CONN_REASON_DEVICE_REMOVED	3	/* its RDMA device went */
#define RRDS_CONN_REASON_IDLE		4	/* idle for net.rrds.idle_timeout_secs */
#define RRDS_CONN_REASON_ADDR_CHANGE	5	/* the local address moved to another device */

/* struct rrds_conn_event flags */
#define RRDS_CONN_EVENT_OVERFLOW	0x1	/* events were lost before this one */

struct rrds_conn_event {
	__u8	laddr[16];	/* IPv4 as ::ffff:a.b.c.d */
	__u8	faddr[16];
	__u32	event;		/* RRDS_CONN_EV_* */
	__u32	reason;		/* RRDS_CONN_REASON_*, 0 for UP */
	__u32	flags;		/* RRDS_CONN_EVENT_* */
	__u32	lost;		/* events lost to a full queue just before this one */
	__u8	tos;
	__u8	pad[7];
};

/* Events a monitoring socket holds before it overflows. */
#define RRDS_CONN_EVENT_QUEUE_LEN	64

/*
 * Memory registration: a flag of struct rds_get_mr_args.flags (RDS_GET_MR,
 * RDS_GET_MR_FOR_DEST, RDS_CMSG_RDMA_MAP), above upstream's RDS_RDMA_* bits.
 * The peer may only read the region: its RDMA WRITEs and atomics to the
 * cookie are refused by the device (a remote access error), the memory
 * unchanged. In-tree RDS ignores the bit and registers the region writable.
 */
#define RRDS_RDMA_READ_ONLY		(1ULL << 32)

#endif /* _UAPI_LINUX_RRDS_H */
