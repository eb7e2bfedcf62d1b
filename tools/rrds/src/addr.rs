// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Socket addresses in the kernel's format, built and read as bytes.
//!
//! RDS takes and returns `sockaddr_in` (16 bytes) for IPv4 and
//! `sockaddr_in6` (28 bytes) for IPv6. Encoding them byte by byte at the
//! offsets of the C structures keeps this module free of `unsafe`; the tests
//! check those offsets against `libc`'s definitions.

use std::io;
use std::net::Ipv4Addr;
use std::net::Ipv6Addr;
use std::net::SocketAddr;
use std::net::SocketAddrV4;
use std::net::SocketAddrV6;

/// `sizeof(struct sockaddr_in)`.
pub(crate) const SOCKADDR_IN_LEN: usize = 16;
/// `sizeof(struct sockaddr_in6)`.
pub(crate) const SOCKADDR_IN6_LEN: usize = 28;
/// Room for any address the kernel hands back (`sizeof(struct sockaddr_storage)`).
const CAPACITY: usize = 128;

// Field offsets shared by sockaddr_in and sockaddr_in6.
const FAMILY: usize = 0;
const PORT: usize = 2;
// sockaddr_in.
const IN_ADDR: usize = 4;
// sockaddr_in6.
const IN6_FLOWINFO: usize = 4;
const IN6_ADDR: usize = 8;
const IN6_SCOPE_ID: usize = 24;

/// A socket address as the kernel reads and writes it.
///
/// The buffer is aligned like `sockaddr_storage`, so a pointer to it may be
/// handed to the kernel as a `struct sockaddr *`.
#[repr(C, align(8))]
#[derive(Clone)]
pub(crate) struct RawAddr {
    bytes: [u8; CAPACITY],
    len: libc::socklen_t,
}

impl RawAddr {
    /// An empty buffer for the kernel to fill (recvmsg, getsockname).
    pub(crate) fn empty() -> Self {
        Self {
            bytes: [0; CAPACITY],
            // CAPACITY (128) fits in socklen_t.
            len: CAPACITY as libc::socklen_t,
        }
    }

    /// Encodes `addr` as a `sockaddr_in` or `sockaddr_in6`.
    ///
    /// The IPv6 scope id and flow info are kept as given (the flow info is
    /// stored unswapped, as `std` does).
    pub(crate) fn from_socket_addr(addr: &SocketAddr) -> Self {
        let mut raw = Self::empty();
        match addr {
            SocketAddr::V4(v4) => {
                raw.put_family(libc::AF_INET);
                raw.bytes[PORT..PORT + 2].copy_from_slice(&v4.port().to_be_bytes());
                raw.bytes[IN_ADDR..IN_ADDR + 4].copy_from_slice(&v4.ip().octets());
                raw.len = SOCKADDR_IN_LEN as libc::socklen_t;
            }
            SocketAddr::V6(v6) => {
                raw.put_family(libc::AF_INET6);
                raw.bytes[PORT..PORT + 2].copy_from_slice(&v6.port().to_be_bytes());
                raw.bytes[IN6_FLOWINFO..IN6_FLOWINFO + 4]
                    .copy_from_slice(&v6.flowinfo().to_ne_bytes());
                raw.bytes[IN6_ADDR..IN6_ADDR + 16].copy_from_slice(&v6.ip().octets());
                raw.bytes[IN6_SCOPE_ID..IN6_SCOPE_ID + 4]
                    .copy_from_slice(&v6.scope_id().to_ne_bytes());
                raw.len = SOCKADDR_IN6_LEN as libc::socklen_t;
            }
        }
        raw
    }

    fn put_family(&mut self, family: libc::c_int) {
        // AF_INET and AF_INET6 fit in sa_family_t (u16).
        let family = family as libc::sa_family_t;
        self.bytes[FAMILY..FAMILY + 2].copy_from_slice(&family.to_ne_bytes());
    }

    /// The family field.
    fn family(&self) -> libc::c_int {
        libc::c_int::from(u16::from_ne_bytes([
            self.bytes[FAMILY],
            self.bytes[FAMILY + 1],
        ]))
    }

    /// Decodes the address the kernel wrote.
    ///
    /// `AF_UNSPEC` (what getsockname reports for an unbound socket) decodes
    /// as `0.0.0.0:0`, the way an unbound UDP socket reads back in `std`.
    pub(crate) fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        let len = self.len as usize;
        let invalid = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("kernel returned a malformed {what} address ({len} bytes)"),
            )
        };
        if len < 2 {
            return Err(invalid("short"));
        }
        let port = u16::from_be_bytes([self.bytes[PORT], self.bytes[PORT + 1]]);
        match self.family() {
            libc::AF_UNSPEC => Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))),
            libc::AF_INET if len >= SOCKADDR_IN_LEN => {
                let mut ip = [0u8; 4];
                ip.copy_from_slice(&self.bytes[IN_ADDR..IN_ADDR + 4]);
                Ok(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port)))
            }
            libc::AF_INET => Err(invalid("IPv4")),
            libc::AF_INET6 if len >= SOCKADDR_IN6_LEN => {
                let mut ip = [0u8; 16];
                ip.copy_from_slice(&self.bytes[IN6_ADDR..IN6_ADDR + 16]);
                let word = |at: usize| {
                    u32::from_ne_bytes([
                        self.bytes[at],
                        self.bytes[at + 1],
                        self.bytes[at + 2],
                        self.bytes[at + 3],
                    ])
                };
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(ip),
                    port,
                    word(IN6_FLOWINFO),
                    word(IN6_SCOPE_ID),
                )))
            }
            libc::AF_INET6 => Err(invalid("IPv6")),
            family => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("kernel returned an address of unexpected family {family}"),
            )),
        }
    }

    /// Pointer for the kernel to read from.
    pub(crate) fn as_ptr(&self) -> *const libc::sockaddr {
        self.bytes.as_ptr().cast()
    }

    /// Pointer for the kernel to write to.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        self.bytes.as_mut_ptr().cast()
    }

    /// Length of the encoded address, or the capacity before the kernel
    /// writes one.
    pub(crate) fn len(&self) -> libc::socklen_t {
        self.len
    }

    /// The length field, for the kernel to update.
    pub(crate) fn len_mut(&mut self) -> &mut libc::socklen_t {
        &mut self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;
    use core::mem::size_of;

    fn round_trip(addr: SocketAddr) -> SocketAddr {
        RawAddr::from_socket_addr(&addr)
            .to_socket_addr()
            .expect("decodes")
    }

    #[test]
    fn offsets_match_libc() {
        assert_eq!(size_of::<libc::sockaddr_in>(), SOCKADDR_IN_LEN);
        assert_eq!(size_of::<libc::sockaddr_in6>(), SOCKADDR_IN6_LEN);
        assert_eq!(size_of::<libc::sockaddr_storage>(), CAPACITY);
        assert_eq!(offset_of!(libc::sockaddr_in, sin_family), FAMILY);
        assert_eq!(offset_of!(libc::sockaddr_in, sin_port), PORT);
        assert_eq!(offset_of!(libc::sockaddr_in, sin_addr), IN_ADDR);
        assert_eq!(offset_of!(libc::sockaddr_in6, sin6_family), FAMILY);
        assert_eq!(offset_of!(libc::sockaddr_in6, sin6_port), PORT);
        assert_eq!(offset_of!(libc::sockaddr_in6, sin6_flowinfo), IN6_FLOWINFO);
        assert_eq!(offset_of!(libc::sockaddr_in6, sin6_addr), IN6_ADDR);
        assert_eq!(offset_of!(libc::sockaddr_in6, sin6_scope_id), IN6_SCOPE_ID);
    }

    #[test]
    fn ipv4_encodes_as_16_byte_sockaddr_in() {
        let raw = RawAddr::from_socket_addr(&"127.0.0.1:18634".parse().unwrap());
        assert_eq!(raw.len(), 16);
        let family = (libc::AF_INET as u16).to_ne_bytes();
        assert_eq!(
            &raw.bytes[..16],
            &[family[0], family[1], 0x48, 0xca, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn ipv6_encodes_as_28_byte_sockaddr_in6_with_scope() {
        let addr: SocketAddr = SocketAddrV6::new("fe80::1".parse().unwrap(), 2, 0, 7).into();
        let raw = RawAddr::from_socket_addr(&addr);
        assert_eq!(raw.len(), 28);
        assert_eq!(raw.family(), libc::AF_INET6);
        assert_eq!(&raw.bytes[PORT..PORT + 2], &[0, 2]);
        assert_eq!(raw.bytes[IN6_ADDR], 0xfe);
        assert_eq!(raw.bytes[IN6_ADDR + 1], 0x80);
        assert_eq!(raw.bytes[IN6_ADDR + 15], 1);
        assert_eq!(
            &raw.bytes[IN6_SCOPE_ID..IN6_SCOPE_ID + 4],
            &7u32.to_ne_bytes()
        );
    }

    #[test]
    fn ipv4_round_trips() {
        for text in ["127.0.0.1:0", "10.1.2.3:65535", "192.168.0.1:2"] {
            let addr: SocketAddr = text.parse().unwrap();
            assert_eq!(round_trip(addr), addr);
        }
    }

    #[test]
    fn ipv6_round_trips_keeping_scope_id() {
        let link_local: SocketAddr =
            SocketAddrV6::new("fe80::abcd".parse().unwrap(), 4000, 0, 3).into();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:5".parse().unwrap();
        let loopback: SocketAddr = "[::1]:65000".parse().unwrap();
        for addr in [link_local, mapped, loopback] {
            assert_eq!(round_trip(addr), addr);
        }
        assert!(matches!(round_trip(link_local), SocketAddr::V6(v6) if v6.scope_id() == 3));
    }

    #[test]
    fn unspec_decodes_as_unspecified_ipv4() {
        let mut raw = RawAddr::empty();
        *raw.len_mut() = 16;
        assert_eq!(
            raw.to_socket_addr().unwrap(),
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
        );
    }

    #[test]
    fn truncated_addresses_are_rejected() {
        let mut raw = RawAddr::from_socket_addr(&"[::1]:9".parse().unwrap());
        *raw.len_mut() = 24;
        assert_eq!(
            raw.to_socket_addr().unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        *raw.len_mut() = 1;
        assert_eq!(
            raw.to_socket_addr().unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    fn unknown_family_is_rejected() {
        let mut raw = RawAddr::from_socket_addr(&"127.0.0.1:9".parse().unwrap());
        raw.put_family(libc::AF_UNIX);
        assert!(raw.to_socket_addr().is_err());
    }
}
