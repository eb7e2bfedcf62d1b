//! Typed decoders for `RDS_INFO_*` results.
//!
//! [`RdsSocket::info`](crate::RdsSocket::info) returns the raw bytes and the
//! element size the kernel reported; the functions here split them into
//! records and read the fields at the offsets of the packed C structures in
//! [`crate::sys`]. A kernel whose elements are larger than ours (a future,
//! extended structure) still decodes: the extra bytes are skipped.

use core::mem::offset_of;
use core::mem::size_of;
use std::io;
use std::net::Ipv4Addr;
use std::net::SocketAddrV4;
use std::slice::ChunksExact;

use crate::sys;

/// One entry of `RDS_INFO_COUNTERS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The counter's name, for example `conn_reset`.
    pub name: String,
    /// Its value, summed over CPUs.
    pub value: u64,
}

/// One entry of `RDS_INFO_SOCKETS` (sockets bound to IPv4 addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// Splits `buf` into `elem_size`-byte records of at least `min` bytes.
fn records<'a>(
    buf: &'a [u8],
    elem_size: usize,
    min: usize,
    what: &str,
) -> io::Result<ChunksExact<'a, u8>> {
    if elem_size < min || !buf.len().is_multiple_of(elem_size) {
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

/// A NUL-padded C string field.
fn c_string(bytes: &[u8]) -> String {
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
}
