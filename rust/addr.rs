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

    fn v4(&self) -> [u8; 4] {
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
