// SPDX-License-Identifier: GPL-2.0

//! RDS socket addresses: IPv4 and IPv6 `sockaddr`s as rrds stores them.
//!
//! Addresses are kept as IPv6, IPv4 as v4-mapped (`::ffff:a.b.c.d`), with the
//! port in host order and the IPv6 scope id: the same key upstream RDS uses.
//! The errno of each rejection matches net/rds (bind.c, af_rds.c, send.c).

use kernel::prelude::*;

use crate::errno;

pub(crate) const AF_INET: u16 = 2;
pub(crate) const AF_INET6: u16 = 10;
pub(crate) const SOCKADDR_IN_LEN: usize = 16;
pub(crate) const SOCKADDR_IN6_LEN: usize = 28;

/// An address and port of an RDS endpoint.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct Endpoint {
    pub(crate) addr: [u8; 16],
    pub(crate) port: u16,
    pub(crate) scope: u32,
}

const V4_MAPPED_PREFIX: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/// `::ffff:a.b.c.d`.
pub(crate) fn v4_mapped(v4: [u8; 4]) -> [u8; 16] {
    let mut addr = [0u8; 16];
    addr[..12].copy_from_slice(&V4_MAPPED_PREFIX);
    addr[12..].copy_from_slice(&v4);
    addr
}

/// Which checks a caller applies: they differ in errnos between the calls.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Bind,
    Connect,
    SendTo,
}

impl Endpoint {
    pub(crate) fn is_unspecified(&self) -> bool {
        self.addr == [0; 16]
    }

    pub(crate) fn is_v4(&self) -> bool {
        self.addr[..12] == V4_MAPPED_PREFIX
    }

    /// The IPv4 address of a v4-mapped endpoint (the last four bytes).
    pub(crate) fn v4(&self) -> [u8; 4] {
        [self.addr[12], self.addr[13], self.addr[14], self.addr[15]]
    }

    /// 127.0.0.0/8 or ::1: the loopback transport's addresses.
    pub(crate) fn is_loopback(&self) -> bool {
        if self.is_v4() {
            self.addr[12] == 127
        } else {
            self.addr == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        }
    }

    /// Parses a sockaddr passed to bind, connect or sendmsg, with upstream's checks.
    pub(crate) fn parse(raw: &[u8], purpose: Purpose) -> Result<Self> {
        // sendmsg checks the length before the family (send.c), bind/connect after it.
        if raw.len() < 2 || (purpose == Purpose::SendTo && raw.len() < SOCKADDR_IN_LEN) {
            return Err(EINVAL);
        }
        let family = u16::from_ne_bytes([raw[0], raw[1]]);
        match family {
            AF_INET => {
                if raw.len() < SOCKADDR_IN_LEN {
                    return Err(EINVAL);
                }
                let port = u16::from_be_bytes([raw[2], raw[3]]);
                let mut addr = [0u8; 16];
                addr[..12].copy_from_slice(&V4_MAPPED_PREFIX);
                addr[12..].copy_from_slice(&raw[4..8]);
                let ep = Self {
                    addr,
                    port,
                    scope: 0,
                };
                let v4 = ep.v4();
                if v4 == [0; 4] {
                    return Err(if purpose == Purpose::Connect {
                        errno::edestaddrreq()
                    } else {
                        EINVAL
                    });
                }
                if v4 == [255; 4] || (v4[0] & 0xf0) == 0xe0 {
                    return Err(EINVAL);
                }
                Ok(ep)
            }
            AF_INET6 => {
                if raw.len() < SOCKADDR_IN6_LEN {
                    return Err(EINVAL);
                }
                let port = u16::from_be_bytes([raw[2], raw[3]]);
                let mut addr = [0u8; 16];
                addr.copy_from_slice(&raw[8..24]);
                let scope = u32::from_ne_bytes([raw[24], raw[25], raw[26], raw[27]]);
                let mut ep = Self {
                    addr,
                    port,
                    scope: 0,
                };
                // connect() reports a non-unicast destination as EPROTOTYPE (af_rds.c).
                let bad = if purpose == Purpose::Connect {
                    errno::eprototype()
                } else {
                    EINVAL
                };
                if ep.is_v4() {
                    let v4 = ep.v4();
                    if v4 == [0; 4] || v4 == [255; 4] || (v4[0] & 0xf0) == 0xe0 {
                        return Err(bad);
                    }
                } else if ep.is_unspecified() || addr[0] == 0xff {
                    return Err(bad);
                } else if addr[0] == 0xfe && (addr[1] & 0xc0) == 0x80 {
                    // Link-local: meaningless without an interface.
                    if scope == 0 {
                        return Err(EINVAL);
                    }
                    ep.scope = scope;
                }
                Ok(ep)
            }
            _ => Err(match purpose {
                Purpose::Connect => errno::eafnosupport(),
                _ => EINVAL,
            }),
        }
    }

    /// Writes the endpoint as a `sockaddr_in` (v4-mapped) or `sockaddr_in6`; returns the length.
    pub(crate) fn write_sockaddr(&self, out: &mut [u8; SOCKADDR_IN6_LEN]) -> usize {
        *out = [0; SOCKADDR_IN6_LEN];
        out[2..4].copy_from_slice(&self.port.to_be_bytes());
        if self.is_v4() {
            out[..2].copy_from_slice(&AF_INET.to_ne_bytes());
            out[4..8].copy_from_slice(&self.v4());
            SOCKADDR_IN_LEN
        } else {
            out[..2].copy_from_slice(&AF_INET6.to_ne_bytes());
            out[8..24].copy_from_slice(&self.addr);
            out[24..28].copy_from_slice(&self.scope.to_ne_bytes());
            SOCKADDR_IN6_LEN
        }
    }
}

/// Displays an address as `a.b.c.d` (IPv4-mapped) or as eight hex groups.
pub(crate) struct AddrDisplay<'a>(pub(crate) &'a [u8; 16]);

impl kernel::fmt::Display for AddrDisplay<'_> {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let a = self.0;
        if a[..12] == V4_MAPPED_PREFIX {
            return write!(f, "{}.{}.{}.{}", a[12], a[13], a[14], a[15]);
        }
        for (i, group) in a.chunks_exact(2).enumerate() {
            let sep = if i == 0 { "" } else { ":" };
            write!(f, "{sep}{:x}", u16::from_be_bytes([group[0], group[1]]))?;
        }
        Ok(())
    }
}

#[kunit_tests(rrds_addr)]
mod tests {
    use super::*;

    fn sockaddr_in(addr: [u8; 4], port: u16) -> [u8; SOCKADDR_IN_LEN] {
        let mut raw = [0u8; SOCKADDR_IN_LEN];
        raw[..2].copy_from_slice(&AF_INET.to_ne_bytes());
        raw[2..4].copy_from_slice(&port.to_be_bytes());
        raw[4..8].copy_from_slice(&addr);
        raw
    }

    fn sockaddr_in6(addr: [u8; 16], scope: u32) -> [u8; SOCKADDR_IN6_LEN] {
        let mut raw = [0u8; SOCKADDR_IN6_LEN];
        raw[..2].copy_from_slice(&AF_INET6.to_ne_bytes());
        raw[2..4].copy_from_slice(&4000u16.to_be_bytes());
        raw[8..24].copy_from_slice(&addr);
        raw[24..28].copy_from_slice(&scope.to_ne_bytes());
        raw
    }

    #[test]
    fn ipv4_parses_as_mapped_and_writes_back() {
        let raw = sockaddr_in([10, 254, 9, 1], 4000);
        let ep = Endpoint::parse(&raw, Purpose::Bind);
        assert!(ep
            .as_ref()
            .is_ok_and(|ep| ep.addr == v4_mapped([10, 254, 9, 1])
                && ep.port == 4000
                && ep.is_v4()
                && !ep.is_loopback()));
        let mut out = [0u8; SOCKADDR_IN6_LEN];
        assert!(ep.is_ok_and(|ep| ep.write_sockaddr(&mut out) == SOCKADDR_IN_LEN));
        assert!(out[..SOCKADDR_IN_LEN] == raw);
    }

    #[test]
    fn ipv4_refusals_have_upstreams_errnos() {
        let any = sockaddr_in([0; 4], 1);
        assert!(Endpoint::parse(&any, Purpose::Bind).err() == Some(EINVAL));
        assert!(Endpoint::parse(&any, Purpose::Connect).err() == Some(errno::edestaddrreq()));
        for bad in [[255; 4], [224, 0, 0, 1], [239, 1, 2, 3]] {
            let raw = sockaddr_in(bad, 1);
            assert!(Endpoint::parse(&raw, Purpose::SendTo).err() == Some(EINVAL));
        }
        // Too short: sendmsg checks the length before the family.
        let raw = sockaddr_in([10, 0, 0, 1], 1);
        assert!(Endpoint::parse(&raw[..4], Purpose::SendTo).err() == Some(EINVAL));
        assert!(Endpoint::parse(&raw[..4], Purpose::Bind).err() == Some(EINVAL));
    }

    #[test]
    fn ipv6_link_local_needs_a_scope_and_keeps_it() {
        let mut link_local = [0u8; 16];
        link_local[0] = 0xfe;
        link_local[1] = 0x80;
        link_local[15] = 1;
        let unscoped = sockaddr_in6(link_local, 0);
        assert!(Endpoint::parse(&unscoped, Purpose::Bind).err() == Some(EINVAL));
        let scoped = sockaddr_in6(link_local, 3);
        assert!(Endpoint::parse(&scoped, Purpose::Bind).is_ok_and(|ep| ep.scope == 3));
        let mut out = [0u8; SOCKADDR_IN6_LEN];
        let ep = Endpoint::parse(&scoped, Purpose::Bind);
        assert!(ep.is_ok_and(|ep| ep.write_sockaddr(&mut out) == SOCKADDR_IN6_LEN));
        assert!(out == scoped);
    }

    #[test]
    fn non_unicast_destinations_and_unknown_families() {
        let mut multicast = [0u8; 16];
        multicast[0] = 0xff;
        let raw = sockaddr_in6(multicast, 0);
        assert!(Endpoint::parse(&raw, Purpose::Connect).err() == Some(errno::eprototype()));
        assert!(Endpoint::parse(&raw, Purpose::Bind).err() == Some(EINVAL));
        let mut loopback = [0u8; 16];
        loopback[15] = 1;
        let raw = sockaddr_in6(loopback, 0);
        assert!(Endpoint::parse(&raw, Purpose::Bind).is_ok_and(|ep| ep.is_loopback()));
        let mut unknown = sockaddr_in([10, 0, 0, 1], 1);
        unknown[..2].copy_from_slice(&1u16.to_ne_bytes());
        assert!(Endpoint::parse(&unknown, Purpose::Connect).err() == Some(errno::eafnosupport()));
        assert!(Endpoint::parse(&unknown, Purpose::Bind).err() == Some(EINVAL));
    }
}
