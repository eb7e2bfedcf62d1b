// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The RDS socket ABI: constants and structures of `<linux/rds.h>`.
//!
//! The values are those of the kernel's `include/uapi/linux/rds.h` (and
//! `AF_RDS` from `include/linux/socket.h`), the ABI the in-tree `rds` module
//! and rrds share. Generic socket constants (`SOL_SOCKET`, `SO_SNDBUF`, ...)
//! come from `libc`. The `rds_info_*` record structures are
//! `__attribute__((packed))` in C, except the two `*_info_rdma_connection`
//! ones, which have natural alignment (and two bytes of padding after `sl`);
//! the tests at the bottom pin their sizes and field offsets (checked
//! against the C header), which the decoders in [`crate::info`] read with
//! `offset_of!`.

#![allow(non_camel_case_types)]

use libc::c_int;

/// Address (and protocol) family of RDS sockets (`include/linux/socket.h`).
pub const AF_RDS: c_int = 21;
/// Protocol family, equal to the address family.
pub const PF_RDS: c_int = AF_RDS;
/// `setsockopt`/`getsockopt` level of the RDS options.
pub const SOL_RDS: c_int = 276;

// SOL_RDS socket options. 4 (the old RDS_BARRIER) and 9 are unused.
/// `RDS_CANCEL_SENT_TO` of `<linux/rds.h>`.
pub const RDS_CANCEL_SENT_TO: c_int = 1;
/// `RDS_GET_MR` of `<linux/rds.h>`.
pub const RDS_GET_MR: c_int = 2;
/// `RDS_FREE_MR` of `<linux/rds.h>`.
pub const RDS_FREE_MR: c_int = 3;
/// `RDS_RECVERR` of `<linux/rds.h>`.
pub const RDS_RECVERR: c_int = 5;
/// `RDS_CONG_MONITOR` of `<linux/rds.h>`.
pub const RDS_CONG_MONITOR: c_int = 6;
/// `RDS_GET_MR_FOR_DEST` of `<linux/rds.h>`.
pub const RDS_GET_MR_FOR_DEST: c_int = 7;
/// `SO_RDS_TRANSPORT` of `<linux/rds.h>`.
pub const SO_RDS_TRANSPORT: c_int = 8;
/// `SO_RDS_MSG_RXPATH_LATENCY` of `<linux/rds.h>`.
pub const SO_RDS_MSG_RXPATH_LATENCY: c_int = 10;

// Transport numbers of SO_RDS_TRANSPORT.
/// `RDS_TRANS_IB` of `<linux/rds.h>`.
pub const RDS_TRANS_IB: c_int = 0;
/// Also known as `RDS_TRANS_IWARP`; never registered by any module.
pub const RDS_TRANS_GAP: c_int = 1;
/// `RDS_TRANS_TCP` of `<linux/rds.h>`.
pub const RDS_TRANS_TCP: c_int = 2;
/// `RDS_TRANS_COUNT` of `<linux/rds.h>`.
pub const RDS_TRANS_COUNT: c_int = 3;
/// Kernel-internal (`net/rds/rds.h`), not in the uapi header: the loopback
/// transport's number, which `SO_RDS_TRANSPORT` reads back for sockets bound
/// to 127.0.0.0/8 or `::1`. It cannot be set.
pub const RDS_TRANS_LOOP: c_int = 3;
/// `~0`: no transport attached (an unbound socket).
pub const RDS_TRANS_NONE: c_int = -1;

/// `SIOCPROTOPRIVATE` of `<linux/sockios.h>`.
pub const SIOCPROTOPRIVATE: libc::c_ulong = 0x89E0;
/// Set the socket's type of service (a 1-byte `rds_tos_t` argument).
pub const SIOCRDSSETTOS: libc::c_ulong = SIOCPROTOPRIVATE;
/// Read the socket's type of service (a 1-byte `rds_tos_t` argument).
pub const SIOCRDSGETTOS: libc::c_ulong = SIOCPROTOPRIVATE + 1;

// Control message types at level SOL_RDS.
/// `RDS_CMSG_RDMA_ARGS` of `<linux/rds.h>`.
pub const RDS_CMSG_RDMA_ARGS: c_int = 1;
/// `RDS_CMSG_RDMA_DEST` of `<linux/rds.h>`.
pub const RDS_CMSG_RDMA_DEST: c_int = 2;
/// `RDS_CMSG_RDMA_MAP` of `<linux/rds.h>`.
pub const RDS_CMSG_RDMA_MAP: c_int = 3;
/// `RDS_CMSG_RDMA_STATUS` of `<linux/rds.h>`.
pub const RDS_CMSG_RDMA_STATUS: c_int = 4;
/// `RDS_CMSG_CONG_UPDATE` of `<linux/rds.h>`.
pub const RDS_CMSG_CONG_UPDATE: c_int = 5;
/// `RDS_CMSG_ATOMIC_FADD` of `<linux/rds.h>`.
pub const RDS_CMSG_ATOMIC_FADD: c_int = 6;
/// `RDS_CMSG_ATOMIC_CSWP` of `<linux/rds.h>`.
pub const RDS_CMSG_ATOMIC_CSWP: c_int = 7;
/// `RDS_CMSG_MASKED_ATOMIC_FADD` of `<linux/rds.h>`.
pub const RDS_CMSG_MASKED_ATOMIC_FADD: c_int = 8;
/// `RDS_CMSG_MASKED_ATOMIC_CSWP` of `<linux/rds.h>`.
pub const RDS_CMSG_MASKED_ATOMIC_CSWP: c_int = 9;
/// `RDS_CMSG_RXPATH_LATENCY` of `<linux/rds.h>`.
pub const RDS_CMSG_RXPATH_LATENCY: c_int = 11;
/// `RDS_CMSG_ZCOPY_COOKIE` of `<linux/rds.h>`.
pub const RDS_CMSG_ZCOPY_COOKIE: c_int = 12;
/// `RDS_CMSG_ZCOPY_COMPLETION` of `<linux/rds.h>`.
pub const RDS_CMSG_ZCOPY_COMPLETION: c_int = 13;

// RDS_INFO_* getsockopt names. 10002 (flows) is deprecated and never
// registered; 10009 and 10010 are never registered either.
/// `RDS_INFO_FIRST` of `<linux/rds.h>`.
pub const RDS_INFO_FIRST: c_int = 10000;
/// `RDS_INFO_COUNTERS` of `<linux/rds.h>`.
pub const RDS_INFO_COUNTERS: c_int = 10000;
/// `RDS_INFO_CONNECTIONS` of `<linux/rds.h>`.
pub const RDS_INFO_CONNECTIONS: c_int = 10001;
/// `RDS_INFO_SEND_MESSAGES` of `<linux/rds.h>`.
pub const RDS_INFO_SEND_MESSAGES: c_int = 10003;
/// `RDS_INFO_RETRANS_MESSAGES` of `<linux/rds.h>`.
pub const RDS_INFO_RETRANS_MESSAGES: c_int = 10004;
/// `RDS_INFO_RECV_MESSAGES` of `<linux/rds.h>`.
pub const RDS_INFO_RECV_MESSAGES: c_int = 10005;
/// `RDS_INFO_SOCKETS` of `<linux/rds.h>`.
pub const RDS_INFO_SOCKETS: c_int = 10006;
/// `RDS_INFO_TCP_SOCKETS` of `<linux/rds.h>`.
pub const RDS_INFO_TCP_SOCKETS: c_int = 10007;
/// `RDS_INFO_IB_CONNECTIONS` of `<linux/rds.h>`.
pub const RDS_INFO_IB_CONNECTIONS: c_int = 10008;
/// `RDS_INFO_CONNECTION_STATS` of `<linux/rds.h>`.
pub const RDS_INFO_CONNECTION_STATS: c_int = 10009;
/// `RDS_INFO_IWARP_CONNECTIONS` of `<linux/rds.h>`.
pub const RDS_INFO_IWARP_CONNECTIONS: c_int = 10010;
/// `RDS6_INFO_CONNECTIONS` of `<linux/rds.h>`.
pub const RDS6_INFO_CONNECTIONS: c_int = 10011;
/// `RDS6_INFO_SEND_MESSAGES` of `<linux/rds.h>`.
pub const RDS6_INFO_SEND_MESSAGES: c_int = 10012;
/// `RDS6_INFO_RETRANS_MESSAGES` of `<linux/rds.h>`.
pub const RDS6_INFO_RETRANS_MESSAGES: c_int = 10013;
/// `RDS6_INFO_RECV_MESSAGES` of `<linux/rds.h>`.
pub const RDS6_INFO_RECV_MESSAGES: c_int = 10014;
/// `RDS6_INFO_SOCKETS` of `<linux/rds.h>`.
pub const RDS6_INFO_SOCKETS: c_int = 10015;
/// `RDS6_INFO_TCP_SOCKETS` of `<linux/rds.h>`.
pub const RDS6_INFO_TCP_SOCKETS: c_int = 10016;
/// `RDS6_INFO_IB_CONNECTIONS` of `<linux/rds.h>`.
pub const RDS6_INFO_IB_CONNECTIONS: c_int = 10017;
/// `RDS_INFO_LAST` of `<linux/rds.h>`.
pub const RDS_INFO_LAST: c_int = 10017;

// `rds_info_connection::flags`.
/// `RDS_INFO_CONNECTION_FLAG_SENDING` of `<linux/rds.h>`.
pub const RDS_INFO_CONNECTION_FLAG_SENDING: u8 = 0x01;
/// `RDS_INFO_CONNECTION_FLAG_CONNECTING` of `<linux/rds.h>`.
pub const RDS_INFO_CONNECTION_FLAG_CONNECTING: u8 = 0x02;
/// `RDS_INFO_CONNECTION_FLAG_CONNECTED` of `<linux/rds.h>`.
pub const RDS_INFO_CONNECTION_FLAG_CONNECTED: u8 = 0x04;

/// Length of the NUL-padded transport name in `rds_info_connection`.
pub const TRANSNAMSIZ: usize = 16;

// `rds_info_message::flags`. Defined by the header, but no producer sets
// them: upstream and rrds always report 0.
/// `RDS_INFO_MESSAGE_FLAG_ACK` of `<linux/rds.h>`.
pub const RDS_INFO_MESSAGE_FLAG_ACK: u8 = 0x01;
/// `RDS_INFO_MESSAGE_FLAG_FAST_ACK` of `<linux/rds.h>`.
pub const RDS_INFO_MESSAGE_FLAG_FAST_ACK: u8 = 0x02;

/// Length of the GIDs in `rds_info_rdma_connection`.
pub const RDS_IB_GID_LEN: usize = 16;
/// Length of the NUL-padded counter name in `rds_info_counter`.
pub const RDS_INFO_COUNTER_NAME_LEN: usize = 32;

// rrds extensions (`include/uapi/linux/rrds.h`), numbered far outside
// upstream's ranges; the in-tree `rds` answers ENOPROTOOPT to each.
/// `RRDS_OPT_BASE` of `<linux/rrds.h>`.
pub const RRDS_OPT_BASE: c_int = 0x5252_0000;
/// `RRDS_XRC_CREATE` of `<linux/rrds.h>`.
pub const RRDS_XRC_CREATE: c_int = RRDS_OPT_BASE + 1;
/// `RRDS_XRC_REGISTER` of `<linux/rrds.h>`.
pub const RRDS_XRC_REGISTER: c_int = RRDS_OPT_BASE + 2;
/// `RRDS_XRC_UNREGISTER` of `<linux/rrds.h>`.
pub const RRDS_XRC_UNREGISTER: c_int = RRDS_OPT_BASE + 3;
/// `RRDS_XRC_INJECT` of `<linux/rrds.h>`.
pub const RRDS_XRC_INJECT: c_int = RRDS_OPT_BASE + 4;
/// `RRDS_INFO_XRC_TARGETS` of `<linux/rrds.h>`.
pub const RRDS_INFO_XRC_TARGETS: c_int = RRDS_OPT_BASE + 0x100;
/// `RRDS_CMSG_XRC_EVENT` of `<linux/rrds.h>`.
pub const RRDS_CMSG_XRC_EVENT: c_int = RRDS_OPT_BASE + 1;
/// `RRDS_XRC_BACKEND_XRC` of `<linux/rrds.h>`.
pub const RRDS_XRC_BACKEND_XRC: u32 = 1;
/// `RRDS_XRC_BACKEND_EMULATED` of `<linux/rrds.h>`.
pub const RRDS_XRC_BACKEND_EMULATED: u32 = 2;
/// `RRDS_XRC_INJECT_QP_ERROR` of `<linux/rrds.h>`.
pub const RRDS_XRC_INJECT_QP_ERROR: u32 = 1;
/// `RRDS_XRC_INJECT_EVENT` of `<linux/rrds.h>`.
pub const RRDS_XRC_INJECT_EVENT: u32 = 2;
/// `RRDS_XRC_EV_QP_FATAL` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_QP_FATAL: u32 = 1;
/// `RRDS_XRC_EV_QP_REQ_ERR` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_QP_REQ_ERR: u32 = 2;
/// `RRDS_XRC_EV_QP_ACCESS_ERR` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_QP_ACCESS_ERR: u32 = 3;
/// `RRDS_XRC_EV_COMM_EST` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_COMM_EST: u32 = 4;
/// `RRDS_XRC_EV_SQ_DRAINED` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_SQ_DRAINED: u32 = 5;
/// `RRDS_XRC_EV_PATH_MIG` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_PATH_MIG: u32 = 6;
/// `RRDS_XRC_EV_PATH_MIG_ERR` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_PATH_MIG_ERR: u32 = 7;
/// `RRDS_XRC_EV_SRQ_ERR` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_SRQ_ERR: u32 = 14;
/// `RRDS_XRC_EV_SRQ_LIMIT_REACHED` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_SRQ_LIMIT_REACHED: u32 = 15;
/// `RRDS_XRC_EV_QP_LAST_WQE_REACHED` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_QP_LAST_WQE_REACHED: u32 = 16;
/// `RRDS_XRC_EV_TARGET_GONE` of `<linux/rrds.h>`.
pub const RRDS_XRC_EV_TARGET_GONE: u32 = 0x100;
/// `RRDS_XRC_EVENT_SYNTHESIZED` of `<linux/rrds.h>`.
pub const RRDS_XRC_EVENT_SYNTHESIZED: u32 = 0x1;
/// `RRDS_XRC_EVENT_FINAL` of `<linux/rrds.h>`.
pub const RRDS_XRC_EVENT_FINAL: u32 = 0x2;
/// `RRDS_XRC_EVENT_OVERFLOW` of `<linux/rrds.h>`.
pub const RRDS_XRC_EVENT_OVERFLOW: u32 = 0x4;
/// `RRDS_XRC_EVENT_QUEUE_LEN` of `<linux/rrds.h>`.
pub const RRDS_XRC_EVENT_QUEUE_LEN: usize = 64;
/// `RRDS_CONN_MONITOR` of `<linux/rrds.h>`.
pub const RRDS_CONN_MONITOR: c_int = RRDS_OPT_BASE + 5;
/// `RRDS_CONN_MONITOR_OFF` of `<linux/rrds.h>`.
pub const RRDS_CONN_MONITOR_OFF: c_int = 0;
/// `RRDS_CONN_MONITOR_USED` of `<linux/rrds.h>`.
pub const RRDS_CONN_MONITOR_USED: c_int = 1;
/// `RRDS_CONN_MONITOR_ALL` of `<linux/rrds.h>`.
pub const RRDS_CONN_MONITOR_ALL: c_int = 2;
/// `RRDS_CMSG_CONN_EVENT` of `<linux/rrds.h>`.
pub const RRDS_CMSG_CONN_EVENT: c_int = RRDS_OPT_BASE + 2;
/// `RRDS_CONN_EV_UP` of `<linux/rrds.h>`.
pub const RRDS_CONN_EV_UP: u32 = 1;
/// `RRDS_CONN_EV_DOWN` of `<linux/rrds.h>`.
pub const RRDS_CONN_EV_DOWN: u32 = 2;
/// `RRDS_CONN_EV_RESET` of `<linux/rrds.h>`.
pub const RRDS_CONN_EV_RESET: u32 = 3;
/// `RRDS_CONN_REASON_PEER_CLOSED` of `<linux/rrds.h>`.
pub const RRDS_CONN_REASON_PEER_CLOSED: u32 = 1;
/// `RRDS_CONN_REASON_LINK_ERROR` of `<linux/rrds.h>`.
pub const RRDS_CONN_REASON_LINK_ERROR: u32 = 2;
/// `RRDS_CONN_REASON_DEVICE_REMOVED` of `<linux/rrds.h>`.
pub const RRDS_CONN_REASON_DEVICE_REMOVED: u32 = 3;
/// `RRDS_CONN_REASON_IDLE` of `<linux/rrds.h>`.
pub const RRDS_CONN_REASON_IDLE: u32 = 4;
/// `RRDS_CONN_REASON_ADDR_CHANGE` of `<linux/rrds.h>`.
pub const RRDS_CONN_REASON_ADDR_CHANGE: u32 = 5;
/// `RRDS_CONN_EVENT_OVERFLOW` of `<linux/rrds.h>`.
pub const RRDS_CONN_EVENT_OVERFLOW: u32 = 0x1;
/// `RRDS_CONN_EVENT_QUEUE_LEN` of `<linux/rrds.h>`.
pub const RRDS_CONN_EVENT_QUEUE_LEN: usize = 64;
/// Length of the NUL-padded device name in `rrds_info_xrc_target`.
pub const RRDS_XRC_DEVICE_NAME_LEN: usize = 64;

/// `RRDS_XRC_CONNECT` of `<linux/rrds.h>`.
pub const RRDS_XRC_CONNECT: c_int = RRDS_OPT_BASE + 6;
/// `RRDS_XRC_DISCONNECT` of `<linux/rrds.h>`.
pub const RRDS_XRC_DISCONNECT: c_int = RRDS_OPT_BASE + 7;
/// `RRDS_CMSG_XRC_SEND` of `<linux/rrds.h>`.
pub const RRDS_CMSG_XRC_SEND: c_int = RRDS_OPT_BASE + 3;
/// `RRDS_XRC_SEND_MAX` of `<linux/rrds.h>`.
pub const RRDS_XRC_SEND_MAX: usize = 4096;

/// `struct rrds_xrc_remote`: a target by address and QP number, the value
/// of `RRDS_XRC_CONNECT` / `DISCONNECT` and of an `RRDS_CMSG_XRC_SEND` cmsg.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_xrc_remote {
    /// `addr` of `struct rrds_xrc_remote` (IPv4 as `::ffff:a.b.c.d`).
    pub addr: [u8; 16],
    /// `qp_num` of `struct rrds_xrc_remote`.
    pub qp_num: u32,
    /// `reserved` of `struct rrds_xrc_remote`.
    pub reserved: u32,
}

/// `struct rrds_xrc_create`: `RRDS_XRC_CREATE`'s getsockopt value (out).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_xrc_create {
    /// `qp_num` of `struct rrds_xrc_create`.
    pub qp_num: u32,
    /// `backend` of `struct rrds_xrc_create`.
    pub backend: u32,
}

/// `struct rrds_xrc_qp`: the value of `RRDS_XRC_REGISTER` / `UNREGISTER`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_xrc_qp {
    /// `qp_num` of `struct rrds_xrc_qp`.
    pub qp_num: u32,
    /// `reserved` of `struct rrds_xrc_qp`.
    pub reserved: u32,
}

/// `struct rrds_xrc_inject`: the value of `RRDS_XRC_INJECT`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_xrc_inject {
    /// `qp_num` of `struct rrds_xrc_inject`.
    pub qp_num: u32,
    /// `action` of `struct rrds_xrc_inject`.
    pub action: u32,
    /// `event` of `struct rrds_xrc_inject`.
    pub event: u32,
    /// `reserved` of `struct rrds_xrc_inject`.
    pub reserved: u32,
}

/// `struct rrds_xrc_event`: the data of an `RRDS_CMSG_XRC_EVENT` cmsg.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_xrc_event {
    /// `qp_num` of `struct rrds_xrc_event`.
    pub qp_num: u32,
    /// `event` of `struct rrds_xrc_event`.
    pub event: u32,
    /// `flags` of `struct rrds_xrc_event`.
    pub flags: u32,
    /// `lost` of `struct rrds_xrc_event`.
    pub lost: u32,
}

/// `struct rrds_conn_event`: the data of an `RRDS_CMSG_CONN_EVENT` cmsg.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_conn_event {
    /// `laddr` of `struct rrds_conn_event`.
    pub laddr: [u8; 16],
    /// `faddr` of `struct rrds_conn_event`.
    pub faddr: [u8; 16],
    /// `event` of `struct rrds_conn_event`.
    pub event: u32,
    /// `reason` of `struct rrds_conn_event`.
    pub reason: u32,
    /// `flags` of `struct rrds_conn_event`.
    pub flags: u32,
    /// `lost` of `struct rrds_conn_event`.
    pub lost: u32,
    /// `tos` of `struct rrds_conn_event`.
    pub tos: u8,
    /// `pad` of `struct rrds_conn_event`.
    pub pad: [u8; 7],
}

/// `struct rrds_info_xrc_target`: one `RRDS_INFO_XRC_TARGETS` record.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rrds_info_xrc_target {
    /// `qp_num` of `struct rrds_info_xrc_target`.
    pub qp_num: u32,
    /// `backend` of `struct rrds_info_xrc_target`.
    pub backend: u32,
    /// `qp_state` of `struct rrds_info_xrc_target`.
    pub qp_state: u32,
    /// `registrations` of `struct rrds_info_xrc_target`.
    pub registrations: u32,
    /// `events` of `struct rrds_info_xrc_target`.
    pub events: u64,
    /// `overflows` of `struct rrds_info_xrc_target`.
    pub overflows: u64,
    /// `device` of `struct rrds_info_xrc_target`.
    pub device: [u8; RRDS_XRC_DEVICE_NAME_LEN],
    /// `bytes_received` of `struct rrds_info_xrc_target`.
    pub bytes_received: u64,
    /// `connections` of `struct rrds_info_xrc_target`.
    pub connections: u32,
    /// `accepted` of `struct rrds_info_xrc_target`.
    pub accepted: u32,
}

// Flags of `rds_get_mr_args`, `rds_free_mr_args` and `rds_rdma_args`.
/// `RDS_RDMA_READWRITE` of `<linux/rds.h>`.
pub const RDS_RDMA_READWRITE: u64 = 0x0001;
/// `RDS_RDMA_FENCE` of `<linux/rds.h>`.
pub const RDS_RDMA_FENCE: u64 = 0x0002;
/// `RDS_RDMA_INVALIDATE` of `<linux/rds.h>`.
pub const RDS_RDMA_INVALIDATE: u64 = 0x0004;
/// `RDS_RDMA_USE_ONCE` of `<linux/rds.h>`.
pub const RDS_RDMA_USE_ONCE: u64 = 0x0008;
/// `RDS_RDMA_DONTWAIT` of `<linux/rds.h>`.
pub const RDS_RDMA_DONTWAIT: u64 = 0x0010;
/// `RDS_RDMA_NOTIFY_ME` of `<linux/rds.h>`.
pub const RDS_RDMA_NOTIFY_ME: u64 = 0x0020;
/// `RDS_RDMA_SILENT` of `<linux/rds.h>`.
pub const RDS_RDMA_SILENT: u64 = 0x0040;
/// rrds extension (`<linux/rrds.h>`): the region grants the peer RDMA READ
/// only. In-tree RDS ignores the bit.
pub const RRDS_RDMA_READ_ONLY: u64 = 1 << 32;

// Outcomes of RDMA and atomic operations (`rds_rdma_notify.status`).
/// `RDS_RDMA_SUCCESS` of `<linux/rds.h>`.
pub const RDS_RDMA_SUCCESS: i32 = 0;
/// `RDS_RDMA_REMOTE_ERROR` of `<linux/rds.h>`.
pub const RDS_RDMA_REMOTE_ERROR: i32 = 1;
/// `RDS_RDMA_CANCELED` of `<linux/rds.h>`.
pub const RDS_RDMA_CANCELED: i32 = 2;
/// `RDS_RDMA_DROPPED` of `<linux/rds.h>`.
pub const RDS_RDMA_DROPPED: i32 = 3;
/// `RDS_RDMA_OTHER_ERROR` of `<linux/rds.h>`.
pub const RDS_RDMA_OTHER_ERROR: i32 = 4;

/// `struct rds_rdma_notify`: the data of an `RDS_CMSG_RDMA_STATUS` cmsg.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_rdma_notify {
    /// `user_token` of `struct rds_rdma_notify`.
    pub user_token: u64,
    /// `status` of `struct rds_rdma_notify`.
    pub status: i32,
}

/// `struct rds_iovec`: a user buffer (address, length).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_iovec {
    /// `addr` of `struct rds_iovec`.
    pub addr: u64,
    /// `bytes` of `struct rds_iovec`.
    pub bytes: u64,
}

/// `struct rds_get_mr_args`: the value of `RDS_GET_MR`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_get_mr_args {
    /// `vec` of `struct rds_get_mr_args`.
    pub vec: rds_iovec,
    /// `cookie_addr` of `struct rds_get_mr_args`.
    pub cookie_addr: u64,
    /// `flags` of `struct rds_get_mr_args`.
    pub flags: u64,
}

/// `struct rds_rdma_args`: the data of an `RDS_CMSG_RDMA_ARGS` cmsg.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_rdma_args {
    /// `cookie` of `struct rds_rdma_args`.
    pub cookie: u64,
    /// `remote_vec` of `struct rds_rdma_args`.
    pub remote_vec: rds_iovec,
    /// `local_vec_addr` of `struct rds_rdma_args`.
    pub local_vec_addr: u64,
    /// `nr_local` of `struct rds_rdma_args`.
    pub nr_local: u64,
    /// `flags` of `struct rds_rdma_args`.
    pub flags: u64,
    /// `user_token` of `struct rds_rdma_args`.
    pub user_token: u64,
}

/// `struct rds_atomic_args`: the data of the `RDS_CMSG_*ATOMIC_*` cmsgs.
/// `operands` is the C union: `{compare, swap, compare_mask, swap_mask}`
/// for the compare-and-swap forms, `{add, nocarry_mask}` for fetch-and-add.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_atomic_args {
    /// `cookie` of `struct rds_atomic_args`.
    pub cookie: u64,
    /// `local_addr` of `struct rds_atomic_args`.
    pub local_addr: u64,
    /// `remote_addr` of `struct rds_atomic_args`.
    pub remote_addr: u64,
    /// `operands` of `struct rds_atomic_args`.
    pub operands: [u64; 4],
    /// `flags` of `struct rds_atomic_args`.
    pub flags: u64,
    /// `user_token` of `struct rds_atomic_args`.
    pub user_token: u64,
}

/// `struct rds_free_mr_args`: the value of `RDS_FREE_MR`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_free_mr_args {
    /// `cookie` of `struct rds_free_mr_args`.
    pub cookie: u64,
    /// `flags` of `struct rds_free_mr_args`.
    pub flags: u64,
}

/// Largest message `sendmsg` accepts (`RDS_MAX_MSG_SIZE`, `net/rds/rds.h`).
pub const RDS_MAX_MSG_SIZE: usize = 1 << 20;

/// One RDS_INFO_COUNTERS entry (40 bytes). `value` is in host byte order.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds_info_counter {
    /// `name` of `struct rds_info_counter`.
    pub name: [u8; RDS_INFO_COUNTER_NAME_LEN],
    /// `value` of `struct rds_info_counter`.
    pub value: u64,
}

/// One RDS_INFO_CONNECTIONS entry (42 bytes). Sequence numbers are in host
/// byte order, addresses in network byte order.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds_info_connection {
    /// `next_tx_seq` of `struct rds_info_connection`.
    pub next_tx_seq: u64,
    /// `next_rx_seq` of `struct rds_info_connection`.
    pub next_rx_seq: u64,
    /// `laddr` of `struct rds_info_connection`.
    pub laddr: [u8; 4],
    /// `faddr` of `struct rds_info_connection`.
    pub faddr: [u8; 4],
    /// `transport` of `struct rds_info_connection`.
    pub transport: [u8; TRANSNAMSIZ],
    /// `flags` of `struct rds_info_connection`.
    pub flags: u8,
    /// `tos` of `struct rds_info_connection`.
    pub tos: u8,
}

/// One RDS_INFO_{SEND,RETRANS,RECV}_MESSAGES entry (26 bytes). `seq` and
/// `len` are in host byte order, addresses and ports in network byte order.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds_info_message {
    /// `seq` of `struct rds_info_message`.
    pub seq: u64,
    /// `len` of `struct rds_info_message`.
    pub len: u32,
    /// `laddr` of `struct rds_info_message`.
    pub laddr: [u8; 4],
    /// `faddr` of `struct rds_info_message`.
    pub faddr: [u8; 4],
    /// `lport` of `struct rds_info_message`.
    pub lport: [u8; 2],
    /// `fport` of `struct rds_info_message`.
    pub fport: [u8; 2],
    /// `flags` of `struct rds_info_message`.
    pub flags: u8,
    /// `tos` of `struct rds_info_message`.
    pub tos: u8,
}

/// One RDS6_INFO_CONNECTIONS entry (65 bytes): `rds_info_connection` with
/// IPv6 addresses (`struct in6_addr`, network byte order) and no `tos`. The
/// table lists every connection, IPv4 ones with v4-mapped addresses.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds6_info_connection {
    /// `next_tx_seq` of `struct rds6_info_connection`.
    pub next_tx_seq: u64,
    /// `next_rx_seq` of `struct rds6_info_connection`.
    pub next_rx_seq: u64,
    /// `laddr` of `struct rds6_info_connection`.
    pub laddr: [u8; 16],
    /// `faddr` of `struct rds6_info_connection`.
    pub faddr: [u8; 16],
    /// `transport` of `struct rds6_info_connection`.
    pub transport: [u8; TRANSNAMSIZ],
    /// `flags` of `struct rds6_info_connection`.
    pub flags: u8,
}

/// One RDS6_INFO_{SEND,RETRANS,RECV}_MESSAGES entry (50 bytes):
/// `rds_info_message` with IPv6 addresses.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds6_info_message {
    /// `seq` of `struct rds6_info_message`.
    pub seq: u64,
    /// `len` of `struct rds6_info_message`.
    pub len: u32,
    /// `laddr` of `struct rds6_info_message`.
    pub laddr: [u8; 16],
    /// `faddr` of `struct rds6_info_message`.
    pub faddr: [u8; 16],
    /// `lport` of `struct rds6_info_message`.
    pub lport: [u8; 2],
    /// `fport` of `struct rds6_info_message`.
    pub fport: [u8; 2],
    /// `flags` of `struct rds6_info_message`.
    pub flags: u8,
    /// `tos` of `struct rds6_info_message`.
    pub tos: u8,
}

/// One RDS_INFO_IB_CONNECTIONS entry (68 bytes). Not packed in C: two bytes
/// of padding follow `sl`. Addresses are in network byte order, GIDs are raw
/// (`union ib_gid`), the counts in host byte order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rds_info_rdma_connection {
    /// `src_addr` of `struct rds_info_rdma_connection`.
    pub src_addr: [u8; 4],
    /// `dst_addr` of `struct rds_info_rdma_connection`.
    pub dst_addr: [u8; 4],
    /// `src_gid` of `struct rds_info_rdma_connection`.
    pub src_gid: [u8; RDS_IB_GID_LEN],
    /// `dst_gid` of `struct rds_info_rdma_connection`.
    pub dst_gid: [u8; RDS_IB_GID_LEN],
    /// `max_send_wr` of `struct rds_info_rdma_connection`.
    pub max_send_wr: u32,
    /// `max_recv_wr` of `struct rds_info_rdma_connection`.
    pub max_recv_wr: u32,
    /// `max_send_sge` of `struct rds_info_rdma_connection`.
    pub max_send_sge: u32,
    /// `rdma_mr_max` of `struct rds_info_rdma_connection`.
    pub rdma_mr_max: u32,
    /// `rdma_mr_size` of `struct rds_info_rdma_connection`.
    pub rdma_mr_size: u32,
    /// `tos` of `struct rds_info_rdma_connection`.
    pub tos: u8,
    /// `sl` of `struct rds_info_rdma_connection`.
    pub sl: u8,
    /// `cache_allocs` of `struct rds_info_rdma_connection`.
    pub cache_allocs: u32,
}

/// One RDS6_INFO_IB_CONNECTIONS entry (92 bytes): `rds_info_rdma_connection`
/// with IPv6 addresses. `struct in6_addr` is 4-aligned in C; the `u32`
/// fields give this structure the same alignment, so the offsets agree.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rds6_info_rdma_connection {
    /// `src_addr` of `struct rds6_info_rdma_connection`.
    pub src_addr: [u8; 16],
    /// `dst_addr` of `struct rds6_info_rdma_connection`.
    pub dst_addr: [u8; 16],
    /// `src_gid` of `struct rds6_info_rdma_connection`.
    pub src_gid: [u8; RDS_IB_GID_LEN],
    /// `dst_gid` of `struct rds6_info_rdma_connection`.
    pub dst_gid: [u8; RDS_IB_GID_LEN],
    /// `max_send_wr` of `struct rds6_info_rdma_connection`.
    pub max_send_wr: u32,
    /// `max_recv_wr` of `struct rds6_info_rdma_connection`.
    pub max_recv_wr: u32,
    /// `max_send_sge` of `struct rds6_info_rdma_connection`.
    pub max_send_sge: u32,
    /// `rdma_mr_max` of `struct rds6_info_rdma_connection`.
    pub rdma_mr_max: u32,
    /// `rdma_mr_size` of `struct rds6_info_rdma_connection`.
    pub rdma_mr_size: u32,
    /// `tos` of `struct rds6_info_rdma_connection`.
    pub tos: u8,
    /// `sl` of `struct rds6_info_rdma_connection`.
    pub sl: u8,
    /// `cache_allocs` of `struct rds6_info_rdma_connection`.
    pub cache_allocs: u32,
}

/// One RDS_INFO_SOCKETS entry (28 bytes). `sndbuf`, `rcvbuf` (the effective,
/// halved values) and `inum` are in host byte order, addresses and ports in
/// network byte order.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds_info_socket {
    /// `sndbuf` of `struct rds_info_socket`.
    pub sndbuf: u32,
    /// `bound_addr` of `struct rds_info_socket`.
    pub bound_addr: [u8; 4],
    /// `connected_addr` of `struct rds_info_socket`.
    pub connected_addr: [u8; 4],
    /// `bound_port` of `struct rds_info_socket`.
    pub bound_port: [u8; 2],
    /// `connected_port` of `struct rds_info_socket`.
    pub connected_port: [u8; 2],
    /// `rcvbuf` of `struct rds_info_socket`.
    pub rcvbuf: u32,
    /// `inum` of `struct rds_info_socket`.
    pub inum: u64,
}

/// One RDS6_INFO_SOCKETS entry (52 bytes): `rds_info_socket` with IPv6
/// addresses.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds6_info_socket {
    /// `sndbuf` of `struct rds6_info_socket`.
    pub sndbuf: u32,
    /// `bound_addr` of `struct rds6_info_socket`.
    pub bound_addr: [u8; 16],
    /// `connected_addr` of `struct rds6_info_socket`.
    pub connected_addr: [u8; 16],
    /// `bound_port` of `struct rds6_info_socket`.
    pub bound_port: [u8; 2],
    /// `connected_port` of `struct rds6_info_socket`.
    pub connected_port: [u8; 2],
    /// `rcvbuf` of `struct rds6_info_socket`.
    pub rcvbuf: u32,
    /// `inum` of `struct rds6_info_socket`.
    pub inum: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;
    use core::mem::size_of;

    #[test]
    fn rds_info_counter_is_40_bytes() {
        assert_eq!(size_of::<rds_info_counter>(), 40);
        assert_eq!(offset_of!(rds_info_counter, value), 32);
    }

    #[test]
    fn rds_info_connection_is_42_bytes() {
        assert_eq!(size_of::<rds_info_connection>(), 42);
        assert_eq!(offset_of!(rds_info_connection, laddr), 16);
        assert_eq!(offset_of!(rds_info_connection, faddr), 20);
        assert_eq!(offset_of!(rds_info_connection, transport), 24);
        assert_eq!(offset_of!(rds_info_connection, flags), 40);
        assert_eq!(offset_of!(rds_info_connection, tos), 41);
    }

    #[test]
    fn rds_info_message_is_26_bytes() {
        assert_eq!(size_of::<rds_info_message>(), 26);
        assert_eq!(offset_of!(rds_info_message, len), 8);
        assert_eq!(offset_of!(rds_info_message, laddr), 12);
        assert_eq!(offset_of!(rds_info_message, faddr), 16);
        assert_eq!(offset_of!(rds_info_message, lport), 20);
        assert_eq!(offset_of!(rds_info_message, fport), 22);
        assert_eq!(offset_of!(rds_info_message, flags), 24);
        assert_eq!(offset_of!(rds_info_message, tos), 25);
    }

    #[test]
    fn rds6_info_connection_is_65_bytes() {
        assert_eq!(size_of::<rds6_info_connection>(), 65);
        assert_eq!(offset_of!(rds6_info_connection, next_rx_seq), 8);
        assert_eq!(offset_of!(rds6_info_connection, laddr), 16);
        assert_eq!(offset_of!(rds6_info_connection, faddr), 32);
        assert_eq!(offset_of!(rds6_info_connection, transport), 48);
        assert_eq!(offset_of!(rds6_info_connection, flags), 64);
    }

    #[test]
    fn rds6_info_message_is_50_bytes() {
        assert_eq!(size_of::<rds6_info_message>(), 50);
        assert_eq!(offset_of!(rds6_info_message, len), 8);
        assert_eq!(offset_of!(rds6_info_message, laddr), 12);
        assert_eq!(offset_of!(rds6_info_message, faddr), 28);
        assert_eq!(offset_of!(rds6_info_message, lport), 44);
        assert_eq!(offset_of!(rds6_info_message, fport), 46);
        assert_eq!(offset_of!(rds6_info_message, flags), 48);
        assert_eq!(offset_of!(rds6_info_message, tos), 49);
    }

    #[test]
    fn rds_info_rdma_connection_is_68_bytes_with_padding() {
        type R = rds_info_rdma_connection;
        assert_eq!(size_of::<R>(), 68);
        assert_eq!(core::mem::align_of::<R>(), 4);
        assert_eq!(offset_of!(R, dst_addr), 4);
        assert_eq!(offset_of!(R, src_gid), 8);
        assert_eq!(offset_of!(R, dst_gid), 24);
        assert_eq!(offset_of!(R, max_send_wr), 40);
        assert_eq!(offset_of!(R, max_recv_wr), 44);
        assert_eq!(offset_of!(R, max_send_sge), 48);
        assert_eq!(offset_of!(R, rdma_mr_max), 52);
        assert_eq!(offset_of!(R, rdma_mr_size), 56);
        assert_eq!(offset_of!(R, tos), 60);
        assert_eq!(offset_of!(R, sl), 61);
        // Not packed: padded to the u32's alignment.
        assert_eq!(offset_of!(R, cache_allocs), 64);
    }

    #[test]
    fn rds6_info_rdma_connection_is_92_bytes_with_padding() {
        type R = rds6_info_rdma_connection;
        assert_eq!(size_of::<R>(), 92);
        assert_eq!(core::mem::align_of::<R>(), 4);
        assert_eq!(offset_of!(R, dst_addr), 16);
        assert_eq!(offset_of!(R, src_gid), 32);
        assert_eq!(offset_of!(R, dst_gid), 48);
        assert_eq!(offset_of!(R, max_send_wr), 64);
        assert_eq!(offset_of!(R, max_recv_wr), 68);
        assert_eq!(offset_of!(R, max_send_sge), 72);
        assert_eq!(offset_of!(R, rdma_mr_max), 76);
        assert_eq!(offset_of!(R, rdma_mr_size), 80);
        assert_eq!(offset_of!(R, tos), 84);
        assert_eq!(offset_of!(R, sl), 85);
        assert_eq!(offset_of!(R, cache_allocs), 88);
    }

    #[test]
    fn rds_info_socket_is_28_bytes() {
        assert_eq!(size_of::<rds_info_socket>(), 28);
        assert_eq!(offset_of!(rds_info_socket, bound_addr), 4);
        assert_eq!(offset_of!(rds_info_socket, connected_addr), 8);
        assert_eq!(offset_of!(rds_info_socket, bound_port), 12);
        assert_eq!(offset_of!(rds_info_socket, connected_port), 14);
        assert_eq!(offset_of!(rds_info_socket, rcvbuf), 16);
        assert_eq!(offset_of!(rds_info_socket, inum), 20);
    }

    #[test]
    fn rds6_info_socket_is_52_bytes() {
        assert_eq!(size_of::<rds6_info_socket>(), 52);
        assert_eq!(offset_of!(rds6_info_socket, bound_port), 36);
        assert_eq!(offset_of!(rds6_info_socket, inum), 44);
    }

    #[test]
    fn rdma_notify_is_16_bytes() {
        assert_eq!(size_of::<rds_rdma_notify>(), 16);
        assert_eq!(offset_of!(rds_rdma_notify, status), 8);
    }

    #[test]
    fn mr_args_match_the_c_layout() {
        assert_eq!(size_of::<rds_iovec>(), 16);
        assert_eq!(size_of::<rds_get_mr_args>(), 32);
        assert_eq!(offset_of!(rds_get_mr_args, cookie_addr), 16);
        assert_eq!(offset_of!(rds_get_mr_args, flags), 24);
        assert_eq!(size_of::<rds_free_mr_args>(), 16);
        assert_eq!(size_of::<rds_rdma_args>(), 56);
        assert_eq!(size_of::<rds_atomic_args>(), 72);
        assert_eq!(core::mem::offset_of!(rds_atomic_args, operands), 24);
        assert_eq!(core::mem::offset_of!(rds_atomic_args, flags), 56);
        assert_eq!(offset_of!(rds_rdma_args, local_vec_addr), 24);
        assert_eq!(offset_of!(rds_rdma_args, user_token), 48);
    }

    #[test]
    fn tos_ioctls_follow_siocprotoprivate() {
        assert_eq!(SIOCRDSSETTOS, 0x89E0);
        assert_eq!(SIOCRDSGETTOS, 0x89E1);
    }

    #[test]
    fn info_range_spans_counters_to_rds6_ib_connections() {
        assert_eq!(RDS_INFO_FIRST, RDS_INFO_COUNTERS);
        assert_eq!(RDS_INFO_LAST, RDS6_INFO_IB_CONNECTIONS);
        assert_eq!(RDS_INFO_SOCKETS, 10006);
    }

    #[test]
    fn rrds_xrc_layouts() {
        assert_eq!(size_of::<rrds_xrc_create>(), 8);
        assert_eq!(size_of::<rrds_xrc_qp>(), 8);
        assert_eq!(size_of::<rrds_xrc_inject>(), 16);
        assert_eq!(offset_of!(rrds_xrc_inject, event), 8);
        assert_eq!(size_of::<rrds_xrc_event>(), 16);
        assert_eq!(size_of::<rrds_conn_event>(), 56);
        assert_eq!(offset_of!(rrds_conn_event, tos), 48);
        assert_eq!(offset_of!(rrds_xrc_event, lost), 12);
        assert_eq!(size_of::<rrds_info_xrc_target>(), 112);
        assert_eq!(offset_of!(rrds_info_xrc_target, bytes_received), 96);
        assert_eq!(offset_of!(rrds_info_xrc_target, events), 16);
        assert_eq!(offset_of!(rrds_info_xrc_target, overflows), 24);
        assert_eq!(offset_of!(rrds_info_xrc_target, device), 32);
        // Far from upstream's options (1..12), RDS_INFO (10000..10017), cmsgs (1..13).
        const _: () = {
            assert!(RRDS_XRC_CREATE > RDS_INFO_LAST);
            assert!(RRDS_CMSG_XRC_EVENT > RDS_CMSG_ZCOPY_COMPLETION);
        };
    }
}
