// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Typed decoders for `RDS_INFO_*` results.
//!
//! [`RdsSocket::info`](crate::RdsSocket::info) returns the raw bytes and the
//! element size the kernel reported; the functions here split them into
//! records and read the fields at the offsets of the C structures in
//! [`crate::sys`]. A kernel whose elements are larger than ours (a future,
//! extended structure) still decodes: the extra bytes are skipped.
//!
//! Byte order, as the producers in `net/rds` write them: addresses
//! (`__be32`, `struct in6_addr`) and ports (`__be16`) are in network byte
//! order; every other integer (counters, sequence numbers, lengths, sizes)
//! is in host byte order, including the message `seq` and `len`, which the
//! kernel converts from the big-endian wire header. GIDs are raw bytes.
//!
//! Each `RDS6_` table repeats its IPv4 twin's records with v4-mapped
//! addresses; the `_v6` decoders keep those as IPv6 addresses, and the
//! [`RdsSocket`](crate::RdsSocket) methods drop them for the IPv4 records.

use core::mem::offset_of;
use core::mem::size_of;
use std::io;
use std::net::IpAddr;
use std::net::Ipv4Addr;
use std::net::Ipv6Addr;
use std::net::SocketAddr;
use std::net::SocketAddrV4;
use std::slice::ChunksExact;

use crate::sys;

/// One entry of `RDS_INFO_COUNTERS`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Counter {
    /// The counter's name, for example `conn_reset`.
    pub name: String,
    /// Its value, summed over CPUs.
    pub value: u64,
}

/// One entry of `RDS_INFO_SOCKETS` (sockets bound to IPv4 addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SocketInfo {
    /// Effective send buffer: half the socket's `sk_sndbuf`.
    pub sndbuf: u32,
    /// Bound address and port.
    pub bound: SocketAddrV4,
    /// `connect()`ed address and port (`0.0.0.0:0` if none).
    pub connected: SocketAddrV4,
    /// Effective receive buffer: half the socket's `sk_rcvbuf`.
    pub rcvbuf: u32,
    /// Inode number of the socket.
    pub inode: u64,
}

/// One RDS connection, from `RDS_INFO_CONNECTIONS` or
/// `RDS6_INFO_CONNECTIONS`. A multipath connection is reported once, with
/// its first path's sequence numbers and state (upstream's limitation).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ConnectionInfo {
    /// Local address (`__be32` / `struct in6_addr` on the wire).
    pub laddr: IpAddr,
    /// Peer address (`__be32` / `struct in6_addr` on the wire).
    pub faddr: IpAddr,
    /// Sequence number of the next message to send (host byte order).
    pub next_tx_seq: u64,
    /// Sequence number expected next from the peer (host byte order).
    pub next_rx_seq: u64,
    /// The transport's name: `loopback`, `tcp` or `infiniband`.
    pub transport: String,
    /// `RDS_INFO_CONNECTION_FLAG_SENDING`: a thread is transmitting.
    pub sending: bool,
    /// `RDS_INFO_CONNECTION_FLAG_CONNECTING`: the connection is being set up.
    pub connecting: bool,
    /// `RDS_INFO_CONNECTION_FLAG_CONNECTED`: the connection is up.
    pub connected: bool,
    /// Type of service. `None` for records of `RDS6_INFO_CONNECTIONS`,
    /// whose structure has no such field.
    pub tos: Option<u8>,
}

impl ConnectionInfo {
    /// The flags as rds-info prints them: `s` (sending), `c` (connecting),
    /// `C` (connected), each `-` when unset.
    pub fn flag_letters(&self) -> String {
        [
            (self.sending, 's'),
            (self.connecting, 'c'),
            (self.connected, 'C'),
        ]
        .iter()
        .map(|&(set, letter)| if set { letter } else { '-' })
        .collect()
    }
}

/// One queued message, from `RDS_INFO_{SEND,RETRANS,RECV}_MESSAGES` or
/// their `RDS6_` twins.
///
/// For the send and retransmit queues, local is the connection's local end
/// (the header's source port); for the receive queue, local is the
/// receiving socket's bound address and the header's destination port,
/// foreign the sender.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MessageInfo {
    /// The header's sequence number (host byte order).
    pub seq: u64,
    /// The header's payload length in bytes (host byte order).
    pub len: u32,
    /// Local address (network byte order on the wire).
    pub laddr: IpAddr,
    /// Foreign address (network byte order on the wire).
    pub faddr: IpAddr,
    /// Local port (`__be16` on the wire).
    pub lport: u16,
    /// Foreign port (`__be16` on the wire).
    pub fport: u16,
    /// `RDS_INFO_MESSAGE_FLAG_*`; always 0 from upstream and rrds.
    pub flags: u8,
    /// Type of service of the message's connection (0 on the receive
    /// queue of rrds).
    pub tos: u8,
}

impl MessageInfo {
    /// The record of a `len`-byte message with sequence number `seq`
    /// between `local` and `foreign`, flags and TOS 0 (for tests of code
    /// that prints records; the kernel's come from
    /// [`RdsSocket::send_messages`](crate::RdsSocket::send_messages) and
    /// its siblings).
    pub fn new(local: SocketAddr, foreign: SocketAddr, seq: u64, len: u32) -> Self {
        Self {
            seq,
            len,
            laddr: local.ip(),
            faddr: foreign.ip(),
            lport: local.port(),
            fport: foreign.port(),
            flags: 0,
            tos: 0,
        }
    }

    /// Local address and port.
    pub fn local(&self) -> SocketAddr {
        SocketAddr::new(self.laddr, self.lport)
    }

    /// Foreign address and port.
    pub fn foreign(&self) -> SocketAddr {
        SocketAddr::new(self.faddr, self.fport)
    }
}

/// One IB connection, from `RDS_INFO_IB_CONNECTIONS` or
/// `RDS6_INFO_IB_CONNECTIONS`. The GIDs and the queue and MR sizes are
/// only filled in while the connection is up (zeroes otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IbConnectionInfo {
    /// Local address (network byte order on the wire).
    pub src_addr: IpAddr,
    /// Peer address (network byte order on the wire).
    pub dst_addr: IpAddr,
    /// Local GID, raw (`union ib_gid`: network byte order). Serialized as
    /// rds-info prints it, in IPv6 notation.
    #[cfg_attr(feature = "serde", serde(serialize_with = "gid_text"))]
    pub src_gid: [u8; sys::RDS_IB_GID_LEN],
    /// Peer GID, raw.
    #[cfg_attr(feature = "serde", serde(serialize_with = "gid_text"))]
    pub dst_gid: [u8; sys::RDS_IB_GID_LEN],
    /// Send ring entries. This and the other counts are in host byte order.
    pub max_send_wr: u32,
    /// Receive ring entries.
    pub max_recv_wr: u32,
    /// The device's maximum scatter/gather entries per send.
    pub max_send_sge: u32,
    /// Most MRs of the device's 1 MiB MR pool (`max_items`); 0 on rrds,
    /// which has no MR pool.
    pub rdma_mr_max: u32,
    /// Pages per MR of that pool (`max_pages`); 0 on rrds.
    pub rdma_mr_size: u32,
    /// Type of service.
    pub tos: u8,
    /// InfiniBand service level.
    pub sl: u8,
    /// KiB of receive fragments held in the connection's refill cache
    /// (upstream's `i_cache_allocs`; 0 on rrds).
    pub cache_allocs: u32,
}

/// A GID as rds-info prints it: in IPv6 notation.
#[cfg(feature = "serde")]
fn gid_text<S: serde::Serializer>(
    gid: &[u8; sys::RDS_IB_GID_LEN],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&Ipv6Addr::from(*gid))
}

/// Splits `buf` into `elem_size`-byte records of at least `min` bytes.
pub(crate) fn records<'a>(
    buf: &'a [u8],
    elem_size: usize,
    min: usize,
    what: &str,
) -> io::Result<ChunksExact<'a, u8>> {
    if elem_size < min || elem_size == 0 || buf.len() % elem_size != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{what}: {} bytes in elements of {elem_size} bytes (expected elements of at least {min})",
                buf.len()
            ),
        ));
    }
    Ok(buf.chunks_exact(elem_size))
}

/// `N` bytes of `rec` at `off`. Callers only pass offsets inside the
/// structure whose size [`records`] checked.
fn field<const N: usize>(rec: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&rec[off..off + N]);
    out
}

/// An IPv4 address field (`__be32`: the bytes in network order).
fn ipv4(rec: &[u8], off: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(field::<4>(rec, off)))
}

/// A `struct in6_addr` field. v4-mapped addresses stay IPv6.
fn ipv6(rec: &[u8], off: usize) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(field::<16>(rec, off)))
}

/// A `__be16` port field.
fn port(rec: &[u8], off: usize) -> u16 {
    u16::from_be_bytes(field(rec, off))
}

/// A host-order `__u32` field.
pub(crate) fn u32_at(rec: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(field(rec, off))
}

/// A host-order `__u64` field.
pub(crate) fn u64_at(rec: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(field(rec, off))
}

/// A NUL-padded C string field.
pub(crate) fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Decodes an `RDS_INFO_COUNTERS` result.
pub fn decode_counters(buf: &[u8], elem_size: usize) -> io::Result<Vec<Counter>> {
    type C = sys::rds_info_counter;
    let name = offset_of!(C, name);
    let value = offset_of!(C, value);
    Ok(
        records(buf, elem_size, size_of::<C>(), "RDS_INFO_COUNTERS")?
            .map(|rec| Counter {
                name: c_string(&rec[name..name + sys::RDS_INFO_COUNTER_NAME_LEN]),
                value: u64::from_ne_bytes(field(rec, value)),
            })
            .collect(),
    )
}

/// Decodes an `RDS_INFO_SOCKETS` result.
pub fn decode_sockets(buf: &[u8], elem_size: usize) -> io::Result<Vec<SocketInfo>> {
    type S = sys::rds_info_socket;
    let addr = |rec: &[u8], ip: usize, port: usize| {
        SocketAddrV4::new(
            Ipv4Addr::from(field::<4>(rec, ip)),
            u16::from_be_bytes(field(rec, port)),
        )
    };
    Ok(records(buf, elem_size, size_of::<S>(), "RDS_INFO_SOCKETS")?
        .map(|rec| SocketInfo {
            sndbuf: u32::from_ne_bytes(field(rec, offset_of!(S, sndbuf))),
            bound: addr(rec, offset_of!(S, bound_addr), offset_of!(S, bound_port)),
            connected: addr(
                rec,
                offset_of!(S, connected_addr),
                offset_of!(S, connected_port),
            ),
            rcvbuf: u32::from_ne_bytes(field(rec, offset_of!(S, rcvbuf))),
            inode: u64::from_ne_bytes(field(rec, offset_of!(S, inum))),
        })
        .collect())
}

/// Decodes a connection record of layout `$t`, addresses read by `$addr`
/// and type of service by `$tos` (the IPv6 structure has none).
macro_rules! connection {
    ($rec:expr, $t:ty, $addr:ident, $tos:expr) => {{
        let rec: &[u8] = $rec;
        let transport = offset_of!($t, transport);
        let flags = rec[offset_of!($t, flags)];
        ConnectionInfo {
            laddr: $addr(rec, offset_of!($t, laddr)),
            faddr: $addr(rec, offset_of!($t, faddr)),
            next_tx_seq: u64_at(rec, offset_of!($t, next_tx_seq)),
            next_rx_seq: u64_at(rec, offset_of!($t, next_rx_seq)),
            transport: c_string(&rec[transport..transport + sys::TRANSNAMSIZ]),
            sending: flags & sys::RDS_INFO_CONNECTION_FLAG_SENDING != 0,
            connecting: flags & sys::RDS_INFO_CONNECTION_FLAG_CONNECTING != 0,
            connected: flags & sys::RDS_INFO_CONNECTION_FLAG_CONNECTED != 0,
            tos: $tos(rec),
        }
    }};
}

/// Decodes a message record of layout `$t`, addresses read by `$addr`.
macro_rules! message {
    ($rec:expr, $t:ty, $addr:ident) => {{
        let rec: &[u8] = $rec;
        MessageInfo {
            seq: u64_at(rec, offset_of!($t, seq)),
            len: u32_at(rec, offset_of!($t, len)),
            laddr: $addr(rec, offset_of!($t, laddr)),
            faddr: $addr(rec, offset_of!($t, faddr)),
            lport: port(rec, offset_of!($t, lport)),
            fport: port(rec, offset_of!($t, fport)),
            flags: rec[offset_of!($t, flags)],
            tos: rec[offset_of!($t, tos)],
        }
    }};
}

/// Decodes an IB connection record of layout `$t`, addresses read by
/// `$addr`.
macro_rules! ib_connection {
    ($rec:expr, $t:ty, $addr:ident) => {{
        let rec: &[u8] = $rec;
        IbConnectionInfo {
            src_addr: $addr(rec, offset_of!($t, src_addr)),
            dst_addr: $addr(rec, offset_of!($t, dst_addr)),
            src_gid: field(rec, offset_of!($t, src_gid)),
            dst_gid: field(rec, offset_of!($t, dst_gid)),
            max_send_wr: u32_at(rec, offset_of!($t, max_send_wr)),
            max_recv_wr: u32_at(rec, offset_of!($t, max_recv_wr)),
            max_send_sge: u32_at(rec, offset_of!($t, max_send_sge)),
            rdma_mr_max: u32_at(rec, offset_of!($t, rdma_mr_max)),
            rdma_mr_size: u32_at(rec, offset_of!($t, rdma_mr_size)),
            tos: rec[offset_of!($t, tos)],
            sl: rec[offset_of!($t, sl)],
            cache_allocs: u32_at(rec, offset_of!($t, cache_allocs)),
        }
    }};
}

/// Decodes an `RDS_INFO_CONNECTIONS` result: the IPv4 connections.
pub fn decode_connections(buf: &[u8], elem_size: usize) -> io::Result<Vec<ConnectionInfo>> {
    type C = sys::rds_info_connection;
    let tos = |rec: &[u8]| Some(rec[offset_of!(C, tos)]);
    Ok(
        records(buf, elem_size, size_of::<C>(), "RDS_INFO_CONNECTIONS")?
            .map(|rec| connection!(rec, C, ipv4, tos))
            .collect(),
    )
}

/// Decodes an `RDS6_INFO_CONNECTIONS` result: every connection, IPv4 ones
/// with v4-mapped IPv6 addresses, all with `tos` `None`.
pub fn decode_connections_v6(buf: &[u8], elem_size: usize) -> io::Result<Vec<ConnectionInfo>> {
    type C = sys::rds6_info_connection;
    let tos = |_: &[u8]| None;
    Ok(
        records(buf, elem_size, size_of::<C>(), "RDS6_INFO_CONNECTIONS")?
            .map(|rec| connection!(rec, C, ipv6, tos))
            .collect(),
    )
}

/// Decodes an `RDS_INFO_{SEND,RETRANS,RECV}_MESSAGES` result: the messages
/// of IPv4 connections (receive queue: of sockets bound to IPv4 addresses).
pub fn decode_messages(buf: &[u8], elem_size: usize) -> io::Result<Vec<MessageInfo>> {
    type M = sys::rds_info_message;
    Ok(
        records(buf, elem_size, size_of::<M>(), "RDS_INFO_*_MESSAGES")?
            .map(|rec| message!(rec, M, ipv4))
            .collect(),
    )
}

/// Decodes an `RDS6_INFO_{SEND,RETRANS,RECV}_MESSAGES` result: every
/// message, those of IPv4 connections and sockets with v4-mapped addresses.
pub fn decode_messages_v6(buf: &[u8], elem_size: usize) -> io::Result<Vec<MessageInfo>> {
    type M = sys::rds6_info_message;
    Ok(
        records(buf, elem_size, size_of::<M>(), "RDS6_INFO_*_MESSAGES")?
            .map(|rec| message!(rec, M, ipv6))
            .collect(),
    )
}

/// Decodes an `RDS_INFO_IB_CONNECTIONS` result: the IPv4 IB connections.
pub fn decode_ib_connections(buf: &[u8], elem_size: usize) -> io::Result<Vec<IbConnectionInfo>> {
    type R = sys::rds_info_rdma_connection;
    Ok(
        records(buf, elem_size, size_of::<R>(), "RDS_INFO_IB_CONNECTIONS")?
            .map(|rec| ib_connection!(rec, R, ipv4))
            .collect(),
    )
}

/// Decodes an `RDS6_INFO_IB_CONNECTIONS` result: every IB connection, IPv4
/// ones with v4-mapped addresses.
pub fn decode_ib_connections_v6(buf: &[u8], elem_size: usize) -> io::Result<Vec<IbConnectionInfo>> {
    type R = sys::rds6_info_rdma_connection;
    Ok(
        records(buf, elem_size, size_of::<R>(), "RDS6_INFO_IB_CONNECTIONS")?
            .map(|rec| ib_connection!(rec, R, ipv6))
            .collect(),
    )
}

/// Merges an IPv4 table with its `RDS6_` twin: the IPv4 records, then the
/// IPv6 records whose local address is not v4-mapped. The `RDS6_` tables
/// list IPv4 connections (and messages, and sockets bound to IPv4
/// addresses) again, with v4-mapped addresses; the IPv4 record is kept
/// because it is the complete one (`rds6_info_connection` has no `tos`).
/// Upstream and rrds both call a connection IPv4 exactly when its local
/// address is v4-mapped, so this drops each duplicate and nothing else.
/// The two reads are not one snapshot: what appears between them may be
/// missing, as if it had appeared just after.
pub(crate) fn merge_v4_v6<T>(v4: Vec<T>, v6: Vec<T>, local: impl Fn(&T) -> IpAddr) -> Vec<T> {
    let mut all = v4;
    all.extend(v6.into_iter().filter(|rec| match local(rec) {
        IpAddr::V6(addr) => addr.to_ipv4_mapped().is_none(),
        IpAddr::V4(_) => false,
    }));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter_record(name: &str, value: u64) -> Vec<u8> {
        let mut rec = vec![0u8; 32];
        rec[..name.len()].copy_from_slice(name.as_bytes());
        rec.extend_from_slice(&value.to_ne_bytes());
        rec
    }

    #[test]
    fn counters_decode_name_and_value() {
        let mut buf = counter_record("conn_reset", 3);
        buf.extend(counter_record("recv_drop_bad_checksum", u64::MAX));
        let counters = decode_counters(&buf, 40).unwrap();
        assert_eq!(
            counters,
            vec![
                Counter {
                    name: "conn_reset".into(),
                    value: 3
                },
                Counter {
                    name: "recv_drop_bad_checksum".into(),
                    value: u64::MAX
                },
            ]
        );
    }

    #[test]
    fn counter_name_of_32_bytes_has_no_terminator() {
        let name = "abcdefghijklmnopqrstuvwxyz012345";
        let counters = decode_counters(&counter_record(name, 1), 40).unwrap();
        assert_eq!(counters[0].name, name);
    }

    #[test]
    fn empty_result_decodes_to_nothing() {
        assert!(decode_counters(&[], 40).unwrap().is_empty());
        assert!(decode_sockets(&[], 28).unwrap().is_empty());
    }

    #[test]
    fn sockets_decode_network_order_addresses() {
        let mut rec = Vec::new();
        rec.extend_from_slice(&106496u32.to_ne_bytes());
        rec.extend_from_slice(&[127, 0, 0, 1]);
        rec.extend_from_slice(&[127, 0, 0, 2]);
        rec.extend_from_slice(&4000u16.to_be_bytes());
        rec.extend_from_slice(&5000u16.to_be_bytes());
        rec.extend_from_slice(&53248u32.to_ne_bytes());
        rec.extend_from_slice(&12345u64.to_ne_bytes());
        assert_eq!(rec.len(), 28);
        let sockets = decode_sockets(&rec, 28).unwrap();
        assert_eq!(
            sockets,
            vec![SocketInfo {
                sndbuf: 106496,
                bound: "127.0.0.1:4000".parse().unwrap(),
                connected: "127.0.0.2:5000".parse().unwrap(),
                rcvbuf: 53248,
                inode: 12345,
            }]
        );
    }

    #[test]
    fn larger_elements_skip_the_extra_bytes() {
        let mut buf = counter_record("a", 1);
        buf.extend_from_slice(&[0xff; 8]);
        buf.extend(counter_record("b", 2));
        buf.extend_from_slice(&[0xff; 8]);
        let counters = decode_counters(&buf, 48).unwrap();
        assert_eq!(counters.len(), 2);
        assert_eq!(counters[1].name, "b");
        assert_eq!(counters[1].value, 2);
    }

    #[test]
    fn short_elements_are_rejected() {
        let err = decode_sockets(&[0; 26], 26).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn partial_element_is_rejected() {
        assert!(decode_counters(&[0; 60], 40).is_err());
    }

    /// Each decoder with the C structure's size: number of records decoded.
    type Decoder = fn(&[u8], usize) -> io::Result<usize>;
    const DECODERS: [(&str, usize, Decoder); 6] = [
        ("connections", 42, |b, e| {
            decode_connections(b, e).map(|v| v.len())
        }),
        ("connections_v6", 65, |b, e| {
            decode_connections_v6(b, e).map(|v| v.len())
        }),
        ("messages", 26, |b, e| {
            decode_messages(b, e).map(|v| v.len())
        }),
        ("messages_v6", 50, |b, e| {
            decode_messages_v6(b, e).map(|v| v.len())
        }),
        ("ib_connections", 68, |b, e| {
            decode_ib_connections(b, e).map(|v| v.len())
        }),
        ("ib_connections_v6", 92, |b, e| {
            decode_ib_connections_v6(b, e).map(|v| v.len())
        }),
    ];

    #[test]
    fn new_decoders_check_the_element_size() {
        for (what, size, decode) in DECODERS {
            assert_eq!(decode(&[], size).unwrap(), 0, "{what}: empty");
            assert_eq!(decode(&vec![0; 3 * size], size).unwrap(), 3, "{what}");
            // A smaller element than the structure: an older or foreign ABI.
            let err = decode(&vec![0; 2 * (size - 1)], size - 1).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{what}: short");
            assert!(decode(&[0; 8], 0).is_err(), "{what}: zero size");
            // Truncated: not a whole number of elements.
            assert!(decode(&vec![0; 2 * size - 1], size).is_err(), "{what}");
            assert!(decode(&vec![0; size + 1], size).is_err(), "{what}");
            // A larger element (an extended structure) decodes.
            assert_eq!(decode(&vec![0; 2 * (size + 6)], size + 6).unwrap(), 2);
        }
    }

    fn connection_record(tx: u64, rx: u64, laddr: &[u8], faddr: &[u8], name: &str) -> Vec<u8> {
        let mut rec = Vec::new();
        rec.extend_from_slice(&tx.to_ne_bytes());
        rec.extend_from_slice(&rx.to_ne_bytes());
        rec.extend_from_slice(laddr);
        rec.extend_from_slice(faddr);
        let mut transport = [0u8; 16];
        transport[..name.len()].copy_from_slice(name.as_bytes());
        rec.extend_from_slice(&transport);
        rec
    }

    #[test]
    fn connections_decode_addresses_flags_and_tos() {
        let mut rec = connection_record(7, 1 << 40, &[10, 0, 0, 1], &[10, 0, 0, 2], "infiniband");
        rec.push(sys::RDS_INFO_CONNECTION_FLAG_SENDING | sys::RDS_INFO_CONNECTION_FLAG_CONNECTED);
        rec.push(3);
        assert_eq!(rec.len(), 42);
        let conns = decode_connections(&rec, 42).unwrap();
        let want = ConnectionInfo {
            laddr: "10.0.0.1".parse().unwrap(),
            faddr: "10.0.0.2".parse().unwrap(),
            next_tx_seq: 7,
            next_rx_seq: 1 << 40,
            transport: "infiniband".into(),
            sending: true,
            connecting: false,
            connected: true,
            tos: Some(3),
        };
        assert_eq!(conns, vec![want]);
        assert_eq!(conns[0].flag_letters(), "s-C");
    }

    #[test]
    fn connections_v6_have_no_tos_and_keep_mapped_addresses() {
        let local: Ipv6Addr = "fd00::1".parse().unwrap();
        let mapped: Ipv6Addr = "::ffff:127.0.0.1".parse().unwrap();
        let mut buf = connection_record(1, 2, &local.octets(), &local.octets(), "loopback");
        buf.push(sys::RDS_INFO_CONNECTION_FLAG_CONNECTING);
        // A 16-byte transport name has no terminator.
        buf.extend(connection_record(
            3,
            4,
            &mapped.octets(),
            &mapped.octets(),
            "abcdefghijklmnop",
        ));
        buf.push(0);
        assert_eq!(buf.len(), 2 * 65);
        let conns = decode_connections_v6(&buf, 65).unwrap();
        assert_eq!(conns.len(), 2);
        assert_eq!(conns[0].laddr, IpAddr::V6(local));
        assert_eq!((conns[0].next_tx_seq, conns[0].next_rx_seq), (1, 2));
        assert_eq!(conns[0].transport, "loopback");
        assert!(conns[0].connecting && !conns[0].sending && !conns[0].connected);
        assert_eq!(conns[0].flag_letters(), "-c-");
        assert_eq!(conns[0].tos, None);
        assert_eq!(conns[1].faddr, IpAddr::V6(mapped));
        assert_eq!(conns[1].transport, "abcdefghijklmnop");
        assert_eq!(conns[1].flag_letters(), "---");
    }

    fn message_tail(lport: u16, fport: u16, flags: u8, tos: u8) -> Vec<u8> {
        let mut tail = Vec::new();
        tail.extend_from_slice(&lport.to_be_bytes());
        tail.extend_from_slice(&fport.to_be_bytes());
        tail.push(flags);
        tail.push(tos);
        tail
    }

    #[test]
    fn messages_decode_host_order_counts_and_network_order_ports() {
        let mut rec = Vec::new();
        rec.extend_from_slice(&0x0102_0304_0506_0708u64.to_ne_bytes());
        rec.extend_from_slice(&8192u32.to_ne_bytes());
        rec.extend_from_slice(&[127, 0, 0, 1]);
        rec.extend_from_slice(&[127, 0, 0, 2]);
        rec.extend(message_tail(4000, 0x1234, 0, 5));
        assert_eq!(rec.len(), 26);
        let msgs = decode_messages(&rec, 26).unwrap();
        let want = MessageInfo {
            seq: 0x0102_0304_0506_0708,
            len: 8192,
            laddr: "127.0.0.1".parse().unwrap(),
            faddr: "127.0.0.2".parse().unwrap(),
            lport: 4000,
            fport: 0x1234,
            flags: 0,
            tos: 5,
        };
        assert_eq!(msgs, vec![want]);
        assert_eq!(msgs[0].local(), "127.0.0.1:4000".parse().unwrap());
        assert_eq!(msgs[0].foreign(), "127.0.0.2:4660".parse().unwrap());
    }

    #[test]
    fn messages_v6_decode() {
        let laddr: Ipv6Addr = "::1".parse().unwrap();
        let faddr: Ipv6Addr = "fe80::2".parse().unwrap();
        let mut rec = Vec::new();
        rec.extend_from_slice(&9u64.to_ne_bytes());
        rec.extend_from_slice(&0u32.to_ne_bytes());
        rec.extend_from_slice(&laddr.octets());
        rec.extend_from_slice(&faddr.octets());
        rec.extend(message_tail(1, 65535, sys::RDS_INFO_MESSAGE_FLAG_ACK, 0));
        assert_eq!(rec.len(), 50);
        // Twice, in elements with 6 extra bytes.
        let mut buf = rec.clone();
        buf.extend_from_slice(&[0xee; 6]);
        buf.extend(rec);
        buf.extend_from_slice(&[0xee; 6]);
        let msgs = decode_messages_v6(&buf, 56).unwrap();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0], msgs[1]);
        assert_eq!(msgs[1].seq, 9);
        assert_eq!(msgs[1].local(), "[::1]:1".parse().unwrap());
        assert_eq!(msgs[1].foreign(), "[fe80::2]:65535".parse().unwrap());
        assert_eq!((msgs[1].flags, msgs[1].tos), (1, 0));
    }

    /// An IB connection record: addresses, then the 60-byte tail shared by
    /// both layouts, with 0xee in the padding after `sl`.
    fn ib_record(src: &[u8], dst: &[u8]) -> Vec<u8> {
        let mut rec = Vec::new();
        rec.extend_from_slice(src);
        rec.extend_from_slice(dst);
        rec.extend_from_slice(&[0xfe; 16]);
        rec.extend_from_slice(&[0xab; 16]);
        for value in [256u32, 1024, 4, 8192, 257] {
            rec.extend_from_slice(&value.to_ne_bytes());
        }
        rec.extend_from_slice(&[2, 7, 0xee, 0xee]);
        rec.extend_from_slice(&99u32.to_ne_bytes());
        rec
    }

    fn want_ib(src: &str, dst: &str) -> IbConnectionInfo {
        IbConnectionInfo {
            src_addr: src.parse().unwrap(),
            dst_addr: dst.parse().unwrap(),
            src_gid: [0xfe; 16],
            dst_gid: [0xab; 16],
            max_send_wr: 256,
            max_recv_wr: 1024,
            max_send_sge: 4,
            rdma_mr_max: 8192,
            rdma_mr_size: 257,
            tos: 2,
            sl: 7,
            cache_allocs: 99,
        }
    }

    #[test]
    fn ib_connections_skip_the_padding() {
        let rec = ib_record(&[10, 254, 9, 1], &[10, 254, 9, 2]);
        assert_eq!(rec.len(), 68);
        assert_eq!(
            decode_ib_connections(&rec, 68).unwrap(),
            vec![want_ib("10.254.9.1", "10.254.9.2")]
        );
    }

    #[cfg(feature = "serde")]
    #[test]
    fn ib_connection_serializes_gids_as_rds_info_prints_them() {
        let json = serde_json::to_value(want_ib("10.254.9.1", "fd00::2")).unwrap();
        assert_eq!(json["src_addr"], "10.254.9.1");
        assert_eq!(json["dst_addr"], "fd00::2");
        assert_eq!(json["src_gid"], "fefe:fefe:fefe:fefe:fefe:fefe:fefe:fefe");
        assert_eq!(json["max_recv_wr"], 1024);
        assert_eq!(json["cache_allocs"], 99);
    }

    #[test]
    fn ib_connections_v6_decode() {
        let src: Ipv6Addr = "fd00::1".parse().unwrap();
        let dst: Ipv6Addr = "fd00::2".parse().unwrap();
        let rec = ib_record(&src.octets(), &dst.octets());
        assert_eq!(rec.len(), 92);
        assert_eq!(
            decode_ib_connections_v6(&rec, 92).unwrap(),
            vec![want_ib("fd00::1", "fd00::2")]
        );
    }

    #[test]
    fn merge_prefers_the_ipv4_records() {
        let v4 = vec![want_ib("10.0.0.1", "10.0.0.2")];
        let v6 = vec![
            want_ib("::ffff:10.0.0.1", "::ffff:10.0.0.2"),
            want_ib("fd00::1", "fd00::2"),
            want_ib("::1", "::1"),
        ];
        let merged = merge_v4_v6(v4, v6, |c| c.src_addr);
        let src: Vec<String> = merged.iter().map(|c| c.src_addr.to_string()).collect();
        assert_eq!(src, ["10.0.0.1", "fd00::1", "::1"]);
        // No IPv6 table (a kernel without IPv6): the IPv4 records alone.
        let merged = merge_v4_v6(vec![want_ib("10.0.0.1", "10.0.0.2")], Vec::new(), |c| {
            c.src_addr
        });
        assert_eq!(merged.len(), 1);
    }
}
