// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Connection events (`RRDS_CONN_MONITOR`, an rrds extension): a socket that
//! asks hears, as 0-byte receives, of its namespace's connections coming up
//! and going down.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use std::time::Duration;
//! use rrds::{ConnMonitor, RdsSocket};
//!
//! let sock = RdsSocket::new()?;
//! sock.bind("10.0.0.1:0".parse().unwrap())?;
//! sock.set_conn_monitor(ConnMonitor::All)?;
//! while let Some(event) = sock.recv_conn_event(Duration::from_secs(60))? {
//!     println!("{event}"); // "10.0.0.1 -> 10.0.0.2 tos 0: down (peer closed)"
//! }
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::io;
use std::mem::size_of;
use std::net::IpAddr;
use std::net::Ipv6Addr;
use std::time::Duration;

use crate::sys;
use crate::RdsSocket;

/// Which connections a socket hears of (`RRDS_CONN_MONITOR_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum ConnMonitor {
    /// None (and what was queued is dropped).
    Off,
    /// Those this socket has sent on.
    Used,
    /// Every connection of its network namespace.
    All,
}

impl ConnMonitor {
    fn raw(self) -> libc::c_int {
        match self {
            Self::Off => sys::RRDS_CONN_MONITOR_OFF,
            Self::Used => sys::RRDS_CONN_MONITOR_USED,
            Self::All => sys::RRDS_CONN_MONITOR_ALL,
        }
    }

    fn from_raw(raw: libc::c_int) -> Option<Self> {
        match raw {
            sys::RRDS_CONN_MONITOR_OFF => Some(Self::Off),
            sys::RRDS_CONN_MONITOR_USED => Some(Self::Used),
            sys::RRDS_CONN_MONITOR_ALL => Some(Self::All),
            _ => None,
        }
    }
}

/// What happened to a connection's link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum ConnEventKind {
    /// It came up.
    Up,
    /// An up link went, with nothing waiting to be sent.
    Down,
    /// An up link went with messages waiting or unacknowledged: they go
    /// (again) on the next link.
    Reset,
    /// A kind this crate does not know.
    Other(u32),
}

/// Why a link went down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum DownReason {
    /// The peer disconnected, or refused the link.
    PeerClosed,
    /// A completion error, a stalled link, a failed connection step.
    LinkError,
    /// Its RDMA device was removed.
    DeviceRemoved,
    /// It carried nothing for `net.rrds.idle_timeout_secs`.
    Idle,
    /// The local address moved to another device.
    AddrChange,
    /// A reason this crate does not know.
    Other(u32),
}

impl DownReason {
    fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            0 => return None,
            sys::RRDS_CONN_REASON_PEER_CLOSED => Self::PeerClosed,
            sys::RRDS_CONN_REASON_LINK_ERROR => Self::LinkError,
            sys::RRDS_CONN_REASON_DEVICE_REMOVED => Self::DeviceRemoved,
            sys::RRDS_CONN_REASON_IDLE => Self::Idle,
            sys::RRDS_CONN_REASON_ADDR_CHANGE => Self::AddrChange,
            other => Self::Other(other),
        })
    }
}

impl fmt::Display for DownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PeerClosed => f.write_str("peer closed"),
            Self::LinkError => f.write_str("link error"),
            Self::DeviceRemoved => f.write_str("device removed"),
            Self::Idle => f.write_str("idle"),
            Self::AddrChange => f.write_str("address changed"),
            Self::Other(raw) => write!(f, "reason {raw}"),
        }
    }
}

/// One change of a connection's link (`struct rrds_conn_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ConnEvent {
    /// The connection's local address.
    pub local: IpAddr,
    /// Its peer's.
    pub peer: IpAddr,
    /// Its TOS.
    pub tos: u8,
    /// What happened.
    pub kind: ConnEventKind,
    /// Why, for [`ConnEventKind::Down`] and [`ConnEventKind::Reset`].
    pub reason: Option<DownReason>,
    /// Events lost to the socket's full queue just before this one.
    pub lost: u32,
}

/// `::ffff:a.b.c.d` as the IPv4 address, others as they are.
fn address(raw: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(raw);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

impl ConnEvent {
    /// Decodes the data of an `RRDS_CMSG_CONN_EVENT` cmsg.
    pub fn decode(data: &[u8]) -> Option<Self> {
        if data.len() != size_of::<sys::rrds_conn_event>() {
            return None;
        }
        let word = |at: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(data.get(at..at + 4)?.try_into().ok()?))
        };
        let laddr: [u8; 16] = data.get(0..16)?.try_into().ok()?;
        let faddr: [u8; 16] = data.get(16..32)?.try_into().ok()?;
        let flags = word(40)?;
        Some(Self {
            local: address(laddr),
            peer: address(faddr),
            tos: *data.get(48)?,
            kind: match word(32)? {
                sys::RRDS_CONN_EV_UP => ConnEventKind::Up,
                sys::RRDS_CONN_EV_DOWN => ConnEventKind::Down,
                sys::RRDS_CONN_EV_RESET => ConnEventKind::Reset,
                other => ConnEventKind::Other(other),
            },
            reason: DownReason::from_raw(word(36)?),
            lost: if flags & sys::RRDS_CONN_EVENT_OVERFLOW != 0 {
                word(44)?
            } else {
                0
            },
        })
    }
}

impl fmt::Display for ConnEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {} tos {}: ", self.local, self.peer, self.tos)?;
        match self.kind {
            ConnEventKind::Up => f.write_str("up")?,
            ConnEventKind::Down => f.write_str("down")?,
            ConnEventKind::Reset => f.write_str("reset")?,
            ConnEventKind::Other(raw) => write!(f, "event {raw}")?,
        }
        if let Some(reason) = self.reason {
            write!(f, " ({reason})")?;
        }
        if self.lost != 0 {
            write!(f, ", {} events lost before it", self.lost)?;
        }
        Ok(())
    }
}

impl RdsSocket {
    /// Sets `RRDS_CONN_MONITOR`: which connections of the namespace this
    /// socket hears of. The in-tree RDS module refuses it (`ENOPROTOOPT`).
    pub fn set_conn_monitor(&self, mode: ConnMonitor) -> io::Result<()> {
        self.setsockopt_int(sys::SOL_RDS, sys::RRDS_CONN_MONITOR, mode.raw())
    }

    /// `RRDS_CONN_MONITOR` as set.
    pub fn conn_monitor(&self) -> io::Result<ConnMonitor> {
        let raw = self.getsockopt_int(sys::SOL_RDS, sys::RRDS_CONN_MONITOR)?;
        ConnMonitor::from_raw(raw).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "unknown RRDS_CONN_MONITOR mode")
        })
    }

    /// Waits up to `timeout` for a connection event; `None` on timeout. A
    /// datagram or another notification that comes first is consumed and
    /// reported as `InvalidData` (read with [`RdsSocket::recv_msg`] where both
    /// can arrive: it reports events too).
    pub fn recv_conn_event(&self, timeout: Duration) -> io::Result<Option<ConnEvent>> {
        self.recv_notification(timeout, "a connection event", |r| r.conn_event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(event: u32, reason: u32, flags: u32, lost: u32) -> Vec<u8> {
        let mut out = vec![0u8; 56];
        out[10] = 0xff;
        out[11] = 0xff;
        out[12..16].copy_from_slice(&[10, 0, 0, 1]);
        out[26] = 0xff;
        out[27] = 0xff;
        out[28..32].copy_from_slice(&[10, 0, 0, 2]);
        out[32..36].copy_from_slice(&event.to_ne_bytes());
        out[36..40].copy_from_slice(&reason.to_ne_bytes());
        out[40..44].copy_from_slice(&flags.to_ne_bytes());
        out[44..48].copy_from_slice(&lost.to_ne_bytes());
        out[48] = 3;
        out
    }

    #[test]
    fn decodes_events() {
        let up = ConnEvent::decode(&record(1, 0, 0, 0)).unwrap();
        assert_eq!(up.kind, ConnEventKind::Up);
        assert_eq!(up.reason, None);
        assert_eq!(up.local, "10.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(up.peer, "10.0.0.2".parse::<IpAddr>().unwrap());
        assert_eq!(up.tos, 3);
        assert_eq!(up.to_string(), "10.0.0.1 -> 10.0.0.2 tos 3: up");
        let down = ConnEvent::decode(&record(3, 4, 1, 7)).unwrap();
        assert_eq!(down.kind, ConnEventKind::Reset);
        assert_eq!(down.reason, Some(DownReason::Idle));
        assert_eq!(down.lost, 7);
        assert_eq!(
            down.to_string(),
            "10.0.0.1 -> 10.0.0.2 tos 3: reset (idle), 7 events lost before it"
        );
        // `lost` counts only with the overflow flag.
        assert_eq!(ConnEvent::decode(&record(2, 1, 0, 7)).unwrap().lost, 0);
        assert!(ConnEvent::decode(&record(1, 0, 0, 0)[..55]).is_none());
    }

    #[cfg(feature = "serde")]
    #[test]
    fn events_serialize_with_snake_case_names() {
        let down = ConnEvent::decode(&record(3, 4, 1, 7)).unwrap();
        assert_eq!(
            serde_json::to_string(&down).unwrap(),
            r#"{"local":"10.0.0.1","peer":"10.0.0.2","tos":3,"kind":"reset","reason":"idle","lost":7}"#
        );
        let up = ConnEvent::decode(&record(1, 0, 0, 0)).unwrap();
        assert_eq!(
            serde_json::to_value(up).unwrap()["reason"],
            serde_json::Value::Null
        );
        let odd = ConnEvent::decode(&record(9, 42, 0, 0)).unwrap();
        let odd = serde_json::to_value(odd).unwrap();
        assert_eq!(odd["kind"], serde_json::json!({"other": 9}));
        assert_eq!(odd["reason"], serde_json::json!({"other": 42}));
    }
}
