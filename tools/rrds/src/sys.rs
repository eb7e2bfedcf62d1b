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
pub const RDS_CANCEL_SENT_TO: c_int = 1;
pub const RDS_GET_MR: c_int = 2;
pub const RDS_FREE_MR: c_int = 3;
pub const RDS_RECVERR: c_int = 5;
pub const RDS_CONG_MONITOR: c_int = 6;
pub const RDS_GET_MR_FOR_DEST: c_int = 7;
pub const SO_RDS_TRANSPORT: c_int = 8;
pub const SO_RDS_MSG_RXPATH_LATENCY: c_int = 10;

// Transport numbers of SO_RDS_TRANSPORT.
pub const RDS_TRANS_IB: c_int = 0;
/// Also known as `RDS_TRANS_IWARP`; never registered by any module.
pub const RDS_TRANS_GAP: c_int = 1;
pub const RDS_TRANS_TCP: c_int = 2;
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
pub const RDS_CMSG_RDMA_ARGS: c_int = 1;
pub const RDS_CMSG_RDMA_DEST: c_int = 2;
pub const RDS_CMSG_RDMA_MAP: c_int = 3;
pub const RDS_CMSG_RDMA_STATUS: c_int = 4;
pub const RDS_CMSG_CONG_UPDATE: c_int = 5;
pub const RDS_CMSG_ATOMIC_FADD: c_int = 6;
pub const RDS_CMSG_ATOMIC_CSWP: c_int = 7;
pub const RDS_CMSG_MASKED_ATOMIC_FADD: c_int = 8;
pub const RDS_CMSG_MASKED_ATOMIC_CSWP: c_int = 9;
pub const RDS_CMSG_RXPATH_LATENCY: c_int = 11;
pub const RDS_CMSG_ZCOPY_COOKIE: c_int = 12;
pub const RDS_CMSG_ZCOPY_COMPLETION: c_int = 13;

// RDS_INFO_* getsockopt names. 10002 (flows) is deprecated and never
// registered; 10009 and 10010 are never registered either.
pub const RDS_INFO_FIRST: c_int = 10000;
pub const RDS_INFO_COUNTERS: c_int = 10000;
pub const RDS_INFO_CONNECTIONS: c_int = 10001;
pub const RDS_INFO_SEND_MESSAGES: c_int = 10003;
pub const RDS_INFO_RETRANS_MESSAGES: c_int = 10004;
pub const RDS_INFO_RECV_MESSAGES: c_int = 10005;
pub const RDS_INFO_SOCKETS: c_int = 10006;
pub const RDS_INFO_TCP_SOCKETS: c_int = 10007;
pub const RDS_INFO_IB_CONNECTIONS: c_int = 10008;
pub const RDS_INFO_CONNECTION_STATS: c_int = 10009;
pub const RDS_INFO_IWARP_CONNECTIONS: c_int = 10010;
pub const RDS6_INFO_CONNECTIONS: c_int = 10011;
pub const RDS6_INFO_SEND_MESSAGES: c_int = 10012;
pub const RDS6_INFO_RETRANS_MESSAGES: c_int = 10013;
pub const RDS6_INFO_RECV_MESSAGES: c_int = 10014;
pub const RDS6_INFO_SOCKETS: c_int = 10015;
pub const RDS6_INFO_TCP_SOCKETS: c_int = 10016;
pub const RDS6_INFO_IB_CONNECTIONS: c_int = 10017;
pub const RDS_INFO_LAST: c_int = 10017;

// `rds_info_connection::flags`.
pub const RDS_INFO_CONNECTION_FLAG_SENDING: u8 = 0x01;
pub const RDS_INFO_CONNECTION_FLAG_CONNECTING: u8 = 0x02;
pub const RDS_INFO_CONNECTION_FLAG_CONNECTED: u8 = 0x04;

/// Length of the NUL-padded transport name in `rds_info_connection`.
pub const TRANSNAMSIZ: usize = 16;

// `rds_info_message::flags`. Defined by the header, but no producer sets
// them: upstream and rrds always report 0.
pub const RDS_INFO_MESSAGE_FLAG_ACK: u8 = 0x01;
pub const RDS_INFO_MESSAGE_FLAG_FAST_ACK: u8 = 0x02;

/// Length of the GIDs in `rds_info_rdma_connection`.
pub const RDS_IB_GID_LEN: usize = 16;
/// Length of the NUL-padded counter name in `rds_info_counter`.
pub const RDS_INFO_COUNTER_NAME_LEN: usize = 32;

// rrds extensions (`include/uapi/linux/rrds.h`), numbered far outside
// upstream's ranges; the in-tree `rds` answers ENOPROTOOPT to each.
pub const RRDS_OPT_BASE: c_int = 0x5252_0000;
pub const RRDS_XRC_CREATE: c_int = RRDS_OPT_BASE + 1;
pub const RRDS_XRC_REGISTER: c_int = RRDS_OPT_BASE + 2;
pub const RRDS_XRC_UNREGISTER: c_int = RRDS_OPT_BASE + 3;
pub const RRDS_XRC_INJECT: c_int = RRDS_OPT_BASE + 4;
pub const RRDS_INFO_XRC_TARGETS: c_int = RRDS_OPT_BASE + 0x100;
pub const RRDS_CMSG_XRC_EVENT: c_int = RRDS_OPT_BASE + 1;
pub const RRDS_XRC_BACKEND_XRC: u32 = 1;
pub const RRDS_XRC_BACKEND_EMULATED: u32 = 2;
pub const RRDS_XRC_INJECT_QP_ERROR: u32 = 1;
pub const RRDS_XRC_INJECT_EVENT: u32 = 2;
pub const RRDS_XRC_EV_QP_FATAL: u32 = 1;
pub const RRDS_XRC_EV_QP_REQ_ERR: u32 = 2;
pub const RRDS_XRC_EV_QP_ACCESS_ERR: u32 = 3;
pub const RRDS_XRC_EV_COMM_EST: u32 = 4;
pub const RRDS_XRC_EV_SQ_DRAINED: u32 = 5;
pub const RRDS_XRC_EV_PATH_MIG: u32 = 6;
pub const RRDS_XRC_EV_PATH_MIG_ERR: u32 = 7;
pub const RRDS_XRC_EV_QP_LAST_WQE_REACHED: u32 = 16;
pub const RRDS_XRC_EV_TARGET_GONE: u32 = 0x100;
pub const RRDS_XRC_EVENT_SYNTHESIZED: u32 = 0x1;
pub const RRDS_XRC_EVENT_FINAL: u32 = 0x2;
pub const RRDS_XRC_EVENT_OVERFLOW: u32 = 0x4;
pub const RRDS_XRC_EVENT_QUEUE_LEN: usize = 64;
pub const RRDS_CONN_MONITOR: c_int = RRDS_OPT_BASE + 5;
pub const RRDS_CONN_MONITOR_OFF: c_int = 0;
pub const RRDS_CONN_MONITOR_USED: c_int = 1;
pub const RRDS_CONN_MONITOR_ALL: c_int = 2;
pub const RRDS_CMSG_CONN_EVENT: c_int = RRDS_OPT_BASE + 2;
pub const RRDS_CONN_EV_UP: u32 = 1;
pub const RRDS_CONN_EV_DOWN: u32 = 2;
pub const RRDS_CONN_EV_RESET: u32 = 3;
pub const RRDS_CONN_REASON_PEER_CLOSED: u32 = 1;
pub const RRDS_CONN_REASON_LINK_ERROR: u32 = 2;
pub const RRDS_CONN_REASON_DEVICE_REMOVED: u32 = 3;
pub const RRDS_CONN_REASON_IDLE: u32 = 4;
pub const RRDS_CONN_REASON_ADDR_CHANGE: u32 = 5;
pub const RRDS_CONN_EVENT_OVERFLOW: u32 = 0x1;
pub const RRDS_CONN_EVENT_QUEUE_LEN: usize = 64;
/// Length of the NUL-padded device name in `rrds_info_xrc_target`.
pub const RRDS_XRC_DEVICE_NAME_LEN: usize = 64;

/// `struct rrds_xrc_create`: `RRDS_XRC_CREATE`'s getsockopt value (out).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_xrc_create {
    pub qp_num: u32,
    pub backend: u32,
}

/// `struct rrds_xrc_qp`: the value of `RRDS_XRC_REGISTER` / `UNREGISTER`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_xrc_qp {
    pub qp_num: u32,
    pub reserved: u32,
}

/// `struct rrds_xrc_inject`: the value of `RRDS_XRC_INJECT`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_xrc_inject {
    pub qp_num: u32,
    pub action: u32,
    pub event: u32,
    pub reserved: u32,
}

/// `struct rrds_xrc_event`: the data of an `RRDS_CMSG_XRC_EVENT` cmsg.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_xrc_event {
    pub qp_num: u32,
    pub event: u32,
    pub flags: u32,
    pub lost: u32,
}

/// `struct rrds_conn_event`: the data of an `RRDS_CMSG_CONN_EVENT` cmsg.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rrds_conn_event {
    pub laddr: [u8; 16],
    pub faddr: [u8; 16],
    pub event: u32,
    pub reason: u32,
    pub flags: u32,
    pub lost: u32,
    pub tos: u8,
    pub pad: [u8; 7],
}

/// `struct rrds_info_xrc_target`: one `RRDS_INFO_XRC_TARGETS` record.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rrds_info_xrc_target {
    pub qp_num: u32,
    pub backend: u32,
    pub qp_state: u32,
    pub registrations: u32,
    pub events: u64,
    pub overflows: u64,
    pub device: [u8; RRDS_XRC_DEVICE_NAME_LEN],
}

// Flags of `rds_get_mr_args`, `rds_free_mr_args` and `rds_rdma_args`.
pub const RDS_RDMA_READWRITE: u64 = 0x0001;
pub const RDS_RDMA_FENCE: u64 = 0x0002;
pub const RDS_RDMA_INVALIDATE: u64 = 0x0004;
pub const RDS_RDMA_USE_ONCE: u64 = 0x0008;
pub const RDS_RDMA_DONTWAIT: u64 = 0x0010;
pub const RDS_RDMA_NOTIFY_ME: u64 = 0x0020;
pub const RDS_RDMA_SILENT: u64 = 0x0040;
/// rrds extension (`<linux/rrds.h>`): the region grants the peer RDMA READ
/// only. In-tree RDS ignores the bit.
pub const RRDS_RDMA_READ_ONLY: u64 = 1 << 32;

// Outcomes of RDMA and atomic operations (`rds_rdma_notify.status`).
pub const RDS_RDMA_SUCCESS: i32 = 0;
pub const RDS_RDMA_REMOTE_ERROR: i32 = 1;
pub const RDS_RDMA_CANCELED: i32 = 2;
pub const RDS_RDMA_DROPPED: i32 = 3;
pub const RDS_RDMA_OTHER_ERROR: i32 = 4;

/// `struct rds_rdma_notify`: the data of an `RDS_CMSG_RDMA_STATUS` cmsg.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_rdma_notify {
    pub user_token: u64,
    pub status: i32,
}

/// `struct rds_iovec`: a user buffer (address, length).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_iovec {
    pub addr: u64,
    pub bytes: u64,
}

/// `struct rds_get_mr_args`: the value of `RDS_GET_MR`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_get_mr_args {
    pub vec: rds_iovec,
    pub cookie_addr: u64,
    pub flags: u64,
}

/// `struct rds_rdma_args`: the data of an `RDS_CMSG_RDMA_ARGS` cmsg.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_rdma_args {
    pub cookie: u64,
    pub remote_vec: rds_iovec,
    pub local_vec_addr: u64,
    pub nr_local: u64,
    pub flags: u64,
    pub user_token: u64,
}

/// `struct rds_atomic_args`: the data of the `RDS_CMSG_*ATOMIC_*` cmsgs.
/// `operands` is the C union: `{compare, swap, compare_mask, swap_mask}`
/// for the compare-and-swap forms, `{add, nocarry_mask}` for fetch-and-add.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_atomic_args {
    pub cookie: u64,
    pub local_addr: u64,
    pub remote_addr: u64,
    pub operands: [u64; 4],
    pub flags: u64,
    pub user_token: u64,
}

/// `struct rds_free_mr_args`: the value of `RDS_FREE_MR`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rds_free_mr_args {
    pub cookie: u64,
    pub flags: u64,
}

/// Largest message `sendmsg` accepts (`RDS_MAX_MSG_SIZE`, `net/rds/rds.h`).
pub const RDS_MAX_MSG_SIZE: usize = 1 << 20;

/// One RDS_INFO_COUNTERS entry (40 bytes). `value` is in host byte order.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds_info_counter {
    pub name: [u8; RDS_INFO_COUNTER_NAME_LEN],
    pub value: u64,
}

/// One RDS_INFO_CONNECTIONS entry (42 bytes). Sequence numbers are in host
/// byte order, addresses in network byte order.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds_info_connection {
    pub next_tx_seq: u64,
    pub next_rx_seq: u64,
    pub laddr: [u8; 4],
    pub faddr: [u8; 4],
    pub transport: [u8; TRANSNAMSIZ],
    pub flags: u8,
    pub tos: u8,
}

/// One RDS_INFO_{SEND,RETRANS,RECV}_MESSAGES entry (26 bytes). `seq` and
/// `len` are in host byte order, addresses and ports in network byte order.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds_info_message {
    pub seq: u64,
    pub len: u32,
    pub laddr: [u8; 4],
    pub faddr: [u8; 4],
    pub lport: [u8; 2],
    pub fport: [u8; 2],
    pub flags: u8,
    pub tos: u8,
}

/// One RDS6_INFO_CONNECTIONS entry (65 bytes): `rds_info_connection` with
/// IPv6 addresses (`struct in6_addr`, network byte order) and no `tos`. The
/// table lists every connection, IPv4 ones with v4-mapped addresses.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds6_info_connection {
    pub next_tx_seq: u64,
    pub next_rx_seq: u64,
    pub laddr: [u8; 16],
    pub faddr: [u8; 16],
    pub transport: [u8; TRANSNAMSIZ],
    pub flags: u8,
}

/// One RDS6_INFO_{SEND,RETRANS,RECV}_MESSAGES entry (50 bytes):
/// `rds_info_message` with IPv6 addresses.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds6_info_message {
    pub seq: u64,
    pub len: u32,
    pub laddr: [u8; 16],
    pub faddr: [u8; 16],
    pub lport: [u8; 2],
    pub fport: [u8; 2],
    pub flags: u8,
    pub tos: u8,
}

/// One RDS_INFO_IB_CONNECTIONS entry (68 bytes). Not packed in C: two bytes
/// of padding follow `sl`. Addresses are in network byte order, GIDs are raw
/// (`union ib_gid`), the counts in host byte order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rds_info_rdma_connection {
    pub src_addr: [u8; 4],
    pub dst_addr: [u8; 4],
    pub src_gid: [u8; RDS_IB_GID_LEN],
    pub dst_gid: [u8; RDS_IB_GID_LEN],
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub rdma_mr_max: u32,
    pub rdma_mr_size: u32,
    pub tos: u8,
    pub sl: u8,
    pub cache_allocs: u32,
}

/// One RDS6_INFO_IB_CONNECTIONS entry (92 bytes): `rds_info_rdma_connection`
/// with IPv6 addresses. `struct in6_addr` is 4-aligned in C; the `u32`
/// fields give this structure the same alignment, so the offsets agree.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rds6_info_rdma_connection {
    pub src_addr: [u8; 16],
    pub dst_addr: [u8; 16],
    pub src_gid: [u8; RDS_IB_GID_LEN],
    pub dst_gid: [u8; RDS_IB_GID_LEN],
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub rdma_mr_max: u32,
    pub rdma_mr_size: u32,
    pub tos: u8,
    pub sl: u8,
    pub cache_allocs: u32,
}

/// One RDS_INFO_SOCKETS entry (28 bytes). `sndbuf`, `rcvbuf` (the effective,
/// halved values) and `inum` are in host byte order, addresses and ports in
/// network byte order.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds_info_socket {
    pub sndbuf: u32,
    pub bound_addr: [u8; 4],
    pub connected_addr: [u8; 4],
    pub bound_port: [u8; 2],
    pub connected_port: [u8; 2],
    pub rcvbuf: u32,
    pub inum: u64,
}

/// One RDS6_INFO_SOCKETS entry (52 bytes): `rds_info_socket` with IPv6
/// addresses.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug)]
pub struct rds6_info_socket {
    pub sndbuf: u32,
    pub bound_addr: [u8; 16],
    pub connected_addr: [u8; 16],
    pub bound_port: [u8; 2],
    pub connected_port: [u8; 2],
    pub rcvbuf: u32,
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
        assert_eq!(size_of::<rrds_info_xrc_target>(), 96);
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
