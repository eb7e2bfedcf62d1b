// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! rrds's XRC target-QP manager (an rrds extension; `Documentation/userspace-api.rst`,
//! "XRC target QPs").
//!
//! A target QP belongs to no process; processes register with it, at most
//! once each, through a socket bound to an address of the target's RDMA
//! device, and the QP lives while any registration does. Its async events
//! reach every registered process on the socket it registered through.
//!
//! ```no_run
//! use rrds::RdsSocket;
//! use std::time::Duration;
//!
//! # fn main() -> std::io::Result<()> {
//! let sock = RdsSocket::new()?;
//! sock.bind("10.254.1.1:0".parse().unwrap())?;
//! let (target, backend) = sock.xrc_create()?;
//! println!("target QP {} ({backend})", target.qp_num());
//! while let Some(event) = sock.recv_xrc_event(Duration::from_secs(10))? {
//!     println!("{event}");
//! }
//! // Dropping `target` unregisters; the last registration destroys the QP.
//! # Ok(())
//! # }
//! ```
//!
//! Against the in-tree `rds` module every call here fails with `ENOPROTOOPT`.

use core::mem::offset_of;
use core::mem::size_of;
use std::fmt;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use libc::socklen_t;

use crate::info;
use crate::sys;
use crate::RdsSocket;

/// How a target QP is implemented on its device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Backend {
    /// An `IB_QPT_XRC_TGT` QP in an XRC domain.
    Xrc,
    /// An RC QP on a shared receive queue: devices without XRC (rxe, siw).
    Emulated,
    /// A backend number this crate does not know.
    Unknown(u32),
}

impl Backend {
    /// The backend an `RRDS_XRC_BACKEND_*` number names.
    pub fn from_raw(raw: u32) -> Self {
        match raw {
            sys::RRDS_XRC_BACKEND_XRC => Self::Xrc,
            sys::RRDS_XRC_BACKEND_EMULATED => Self::Emulated,
            other => Self::Unknown(other),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Xrc => f.write_str("xrc"),
            Self::Emulated => f.write_str("emulated"),
            Self::Unknown(raw) => write!(f, "unknown({raw})"),
        }
    }
}

/// An event type: ib_core's `enum ib_event_type` numbers, plus rrds's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum EventKind {
    /// `IB_EVENT_QP_FATAL`: the QP hit an error it cannot report otherwise.
    QpFatal,
    /// `IB_EVENT_QP_REQ_ERR`: an invalid request reached the QP.
    QpReqErr,
    /// `IB_EVENT_QP_ACCESS_ERR`: a request violated the QP's access rights.
    QpAccessErr,
    /// `IB_EVENT_COMM_EST`: the first message arrived on the QP.
    CommEst,
    /// `IB_EVENT_SQ_DRAINED`: the send queue drained.
    SqDrained,
    /// `IB_EVENT_PATH_MIG`: the QP moved to its alternate path.
    PathMig,
    /// `IB_EVENT_PATH_MIG_ERR`: moving to the alternate path failed.
    PathMigErr,
    /// `IB_EVENT_SRQ_ERR`: the target's shared receive queue failed
    /// (emulated targets).
    SrqErr,
    /// `IB_EVENT_SRQ_LIMIT_REACHED`: fewer than a quarter of the target's
    /// receives are posted (emulated targets): its initiator outpaces it.
    SrqLimitReached,
    /// `IB_EVENT_QP_LAST_WQE_REACHED`: the QP, in the error state, will
    /// take no more receives from its shared queue.
    LastWqeReached,
    /// The target went away under the registration (device removed).
    TargetGone,
    /// An event number this crate does not know.
    Other(u32),
}

/// Event names as `rrds xrc` prints and parses them.
const EVENT_NAMES: [(EventKind, &str); 11] = [
    (EventKind::QpFatal, "qp_fatal"),
    (EventKind::QpReqErr, "qp_req_err"),
    (EventKind::QpAccessErr, "qp_access_err"),
    (EventKind::CommEst, "comm_est"),
    (EventKind::SqDrained, "sq_drained"),
    (EventKind::PathMig, "path_mig"),
    (EventKind::PathMigErr, "path_mig_err"),
    (EventKind::SrqErr, "srq_err"),
    (EventKind::SrqLimitReached, "srq_limit_reached"),
    (EventKind::LastWqeReached, "last_wqe_reached"),
    (EventKind::TargetGone, "target_gone"),
];

impl EventKind {
    /// The kind an `RRDS_XRC_EV_*` number names.
    pub fn from_raw(raw: u32) -> Self {
        match raw {
            sys::RRDS_XRC_EV_QP_FATAL => Self::QpFatal,
            sys::RRDS_XRC_EV_QP_REQ_ERR => Self::QpReqErr,
            sys::RRDS_XRC_EV_QP_ACCESS_ERR => Self::QpAccessErr,
            sys::RRDS_XRC_EV_COMM_EST => Self::CommEst,
            sys::RRDS_XRC_EV_SQ_DRAINED => Self::SqDrained,
            sys::RRDS_XRC_EV_PATH_MIG => Self::PathMig,
            sys::RRDS_XRC_EV_PATH_MIG_ERR => Self::PathMigErr,
            sys::RRDS_XRC_EV_SRQ_ERR => Self::SrqErr,
            sys::RRDS_XRC_EV_SRQ_LIMIT_REACHED => Self::SrqLimitReached,
            sys::RRDS_XRC_EV_QP_LAST_WQE_REACHED => Self::LastWqeReached,
            sys::RRDS_XRC_EV_TARGET_GONE => Self::TargetGone,
            other => Self::Other(other),
        }
    }

    /// The `RRDS_XRC_EV_*` number.
    pub fn as_raw(self) -> u32 {
        match self {
            Self::QpFatal => sys::RRDS_XRC_EV_QP_FATAL,
            Self::QpReqErr => sys::RRDS_XRC_EV_QP_REQ_ERR,
            Self::QpAccessErr => sys::RRDS_XRC_EV_QP_ACCESS_ERR,
            Self::CommEst => sys::RRDS_XRC_EV_COMM_EST,
            Self::SqDrained => sys::RRDS_XRC_EV_SQ_DRAINED,
            Self::PathMig => sys::RRDS_XRC_EV_PATH_MIG,
            Self::PathMigErr => sys::RRDS_XRC_EV_PATH_MIG_ERR,
            Self::SrqErr => sys::RRDS_XRC_EV_SRQ_ERR,
            Self::SrqLimitReached => sys::RRDS_XRC_EV_SRQ_LIMIT_REACHED,
            Self::LastWqeReached => sys::RRDS_XRC_EV_QP_LAST_WQE_REACHED,
            Self::TargetGone => sys::RRDS_XRC_EV_TARGET_GONE,
            Self::Other(raw) => raw,
        }
    }

    /// The kind named `name` (as [`fmt::Display`] prints it).
    pub fn from_name(name: &str) -> Option<Self> {
        EVENT_NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(kind, _)| *kind)
    }

    /// Every named kind's name.
    pub fn names() -> impl Iterator<Item = &'static str> {
        EVENT_NAMES.iter().map(|(_, n)| *n)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match EVENT_NAMES.iter().find(|(kind, _)| kind == self) {
            Some((_, name)) => f.write_str(name),
            None => write!(f, "event({})", self.as_raw()),
        }
    }
}

/// One event of a target QP, as a registration received it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct XrcEvent {
    /// The target QP's number.
    pub qp_num: u32,
    /// What happened.
    pub kind: EventKind,
    /// Made by rrds, not raised by the driver.
    pub synthesized: bool,
    /// The registration has ended (the target is gone).
    pub last: bool,
    /// Events lost to a full queue just after this one.
    pub lost: u32,
}

impl XrcEvent {
    /// Decodes the data of an `RRDS_CMSG_XRC_EVENT` cmsg.
    pub fn decode(data: &[u8]) -> Option<Self> {
        let word = |i: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(
                data.get(i * 4..i * 4 + 4)?.try_into().ok()?,
            ))
        };
        if data.len() != size_of::<sys::rrds_xrc_event>() {
            return None;
        }
        let flags = word(2)?;
        Some(Self {
            qp_num: word(0)?,
            kind: EventKind::from_raw(word(1)?),
            synthesized: flags & sys::RRDS_XRC_EVENT_SYNTHESIZED != 0,
            last: flags & sys::RRDS_XRC_EVENT_FINAL != 0,
            lost: if flags & sys::RRDS_XRC_EVENT_OVERFLOW != 0 {
                word(3)?
            } else {
                0
            },
        })
    }
}

impl fmt::Display for XrcEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "qp_num={} event={}", self.qp_num, self.kind)?;
        if self.synthesized {
            f.write_str(" synthesized")?;
        }
        if self.last {
            f.write_str(" final")?;
        }
        if self.lost != 0 {
            write!(f, " lost={}", self.lost)?;
        }
        Ok(())
    }
}

/// One `RRDS_INFO_XRC_TARGETS` record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TargetInfo {
    /// The target QP's number.
    pub qp_num: u32,
    /// Its RDMA device's name.
    pub device: String,
    /// How it is implemented.
    pub backend: Backend,
    /// IB QP state: 0 reset, 1 init, 2 rtr, 3 rts, 4 sqd, 5 sqe, 6 error.
    pub qp_state: u32,
    /// Processes registered with it.
    pub registrations: u32,
    /// Events queued to its registrations so far.
    pub events: u64,
    /// Events lost to full queues so far.
    pub overflows: u64,
    /// Payload bytes received from initiators (emulated targets), 0 from a
    /// module without in-band set-up.
    pub bytes_received: u64,
    /// Initiators connected now.
    pub connections: u32,
    /// Initiators accepted since the target was created.
    pub accepted: u32,
}

impl TargetInfo {
    /// The QP state's name.
    pub fn state_name(&self) -> &'static str {
        match self.qp_state {
            0 => "reset",
            1 => "init",
            2 => "rtr",
            3 => "rts",
            4 => "sqd",
            5 => "sqe",
            6 => "error",
            _ => "unknown",
        }
    }
}

/// Decodes `RRDS_INFO_XRC_TARGETS` records.
pub fn decode_targets(buf: &[u8], elem_size: usize) -> io::Result<Vec<TargetInfo>> {
    type T = sys::rrds_info_xrc_target;
    let device = offset_of!(T, device);
    // Records end at the device name before in-band set-up: read as 0.
    let inband = elem_size >= size_of::<T>();
    let u32_if = |r: &[u8], at: usize| if inband { info::u32_at(r, at) } else { 0 };
    Ok(info::records(
        buf,
        elem_size,
        offset_of!(T, bytes_received),
        "RRDS_INFO_XRC_TARGETS",
    )?
    .map(|r| TargetInfo {
        bytes_received: if inband {
            info::u64_at(r, offset_of!(T, bytes_received))
        } else {
            0
        },
        connections: u32_if(r, offset_of!(T, connections)),
        accepted: u32_if(r, offset_of!(T, accepted)),
        qp_num: info::u32_at(r, offset_of!(T, qp_num)),
        backend: Backend::from_raw(info::u32_at(r, offset_of!(T, backend))),
        qp_state: info::u32_at(r, offset_of!(T, qp_state)),
        registrations: info::u32_at(r, offset_of!(T, registrations)),
        events: info::u64_at(r, offset_of!(T, events)),
        overflows: info::u64_at(r, offset_of!(T, overflows)),
        device: info::c_string(&r[device..device + sys::RRDS_XRC_DEVICE_NAME_LEN]),
    })
    .collect())
}

/// What [`RdsSocket::xrc_inject`] does (needs `CAP_NET_ADMIN`; for tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// Move the QP to the error state: the driver raises LAST_WQE_REACHED
    /// (rrds does, marked synthesized, on iWARP devices, which raise nothing).
    QpError,
    /// Deliver this event, marked synthesized.
    Event(EventKind),
}

/// The calling process's registration with a target QP, made through a
/// socket; dropping it unregisters (the last registration destroys the QP).
#[derive(Debug)]
pub struct XrcRegistration<'a> {
    sock: &'a RdsSocket,
    qp_num: u32,
    active: bool,
}

impl XrcRegistration<'_> {
    /// The target QP's number.
    pub fn qp_num(&self) -> u32 {
        self.qp_num
    }

    /// Unregisters now, reporting the error `drop` would ignore (`ENOENT`
    /// once the target is gone).
    pub fn unregister(mut self) -> io::Result<()> {
        self.active = false;
        self.sock.xrc_qp_op(sys::RRDS_XRC_UNREGISTER, self.qp_num)
    }

    /// Keeps the registration past this value: it ends with the socket or
    /// the process.
    pub fn keep(mut self) -> u32 {
        self.active = false;
        self.qp_num
    }
}

impl Drop for XrcRegistration<'_> {
    fn drop(&mut self) {
        if self.active {
            // ENOENT (the target went away first) is the only expected failure.
            let _ = self.sock.xrc_qp_op(sys::RRDS_XRC_UNREGISTER, self.qp_num);
        }
    }
}

/// A kernel-side initiator of the socket, connected in band to a target
/// (`RRDS_XRC_CONNECT`); dropping it disconnects.
#[derive(Debug)]
pub struct XrcInitiator<'a> {
    sock: &'a RdsSocket,
    remote: sys::rrds_xrc_remote,
    active: bool,
}

impl XrcInitiator<'_> {
    /// Sends `buf` (at most [`sys::RRDS_XRC_SEND_MAX`] bytes) to the target.
    /// On a blocking socket it returns once the target's receive holds the
    /// message; on a non-blocking one once it is posted (`WouldBlock` while
    /// the one before is in flight).
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock
            .send_cmsg(buf, None, sys::RRDS_CMSG_XRC_SEND, &self.remote)
    }

    /// Disconnects now, reporting the error `drop` would ignore.
    pub fn disconnect(mut self) -> io::Result<()> {
        self.active = false;
        self.sock
            .setsockopt_value(sys::SOL_RDS, sys::RRDS_XRC_DISCONNECT, &self.remote)
    }
}

impl Drop for XrcInitiator<'_> {
    fn drop(&mut self) {
        if self.active {
            // Nothing to report: the socket's close would disconnect it too.
            let _ =
                self.sock
                    .setsockopt_value(sys::SOL_RDS, sys::RRDS_XRC_DISCONNECT, &self.remote);
        }
    }
}

/// `addr` as `struct rrds_xrc_remote` carries it (IPv4 mapped).
fn rds_addr(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

impl RdsSocket {
    fn xrc_qp_op(&self, op: libc::c_int, qp_num: u32) -> io::Result<()> {
        let value = sys::rrds_xrc_qp {
            qp_num,
            reserved: 0,
        };
        self.setsockopt_value(sys::SOL_RDS, op, &value)
    }

    /// Creates a target QP on the RDMA device of the socket's bound address
    /// and registers the calling process with it.
    pub fn xrc_create(&self) -> io::Result<(XrcRegistration<'_>, Backend)> {
        let mut value = sys::rrds_xrc_create::default();
        let mut len = size_of::<sys::rrds_xrc_create>() as socklen_t;
        // SAFETY: value is valid for writes of len bytes and lives across the
        // call; the kernel writes at most len bytes.
        let ret = unsafe {
            libc::getsockopt(
                self.as_raw_fd(),
                sys::SOL_RDS,
                sys::RRDS_XRC_CREATE,
                (&mut value as *mut sys::rrds_xrc_create).cast(),
                &mut len,
            )
        };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((
            XrcRegistration {
                sock: self,
                qp_num: value.qp_num,
                active: true,
            },
            Backend::from_raw(value.backend),
        ))
    }

    /// Registers the calling process with target `qp_num` (`EALREADY` if it
    /// is, through any socket).
    pub fn xrc_register(&self, qp_num: u32) -> io::Result<XrcRegistration<'_>> {
        self.xrc_qp_op(sys::RRDS_XRC_REGISTER, qp_num)?;
        Ok(XrcRegistration {
            sock: self,
            qp_num,
            active: true,
        })
    }

    /// Ends the calling process's registration with `qp_num`, wherever it was
    /// made (for registrations kept with [`XrcRegistration::keep`]).
    pub fn xrc_unregister(&self, qp_num: u32) -> io::Result<()> {
        self.xrc_qp_op(sys::RRDS_XRC_UNREGISTER, qp_num)
    }

    /// Test hook: drive target `qp_num` into error, or synthesize an event.
    pub fn xrc_inject(&self, qp_num: u32, what: Inject) -> io::Result<()> {
        let (action, event) = match what {
            Inject::QpError => (sys::RRDS_XRC_INJECT_QP_ERROR, 0),
            Inject::Event(kind) => (sys::RRDS_XRC_INJECT_EVENT, kind.as_raw()),
        };
        let value = sys::rrds_xrc_inject {
            qp_num,
            action,
            event,
            reserved: 0,
        };
        self.setsockopt_value(sys::SOL_RDS, sys::RRDS_XRC_INJECT, &value)
    }

    /// Connects a kernel-side initiator of this socket (bound to an address
    /// of an RDMA device) to target `qp_num` at `target`; returns once the
    /// target accepted it. Refusals: `ECONNREFUSED` (no such target),
    /// `EBUSY` (it has its initiator), `EIO` (it could not take one).
    pub fn xrc_connect(&self, target: IpAddr, qp_num: u32) -> io::Result<XrcInitiator<'_>> {
        let remote = sys::rrds_xrc_remote {
            addr: rds_addr(target),
            qp_num,
            reserved: 0,
        };
        self.setsockopt_value(sys::SOL_RDS, sys::RRDS_XRC_CONNECT, &remote)?;
        Ok(XrcInitiator {
            sock: self,
            remote,
            active: true,
        })
    }

    /// `RRDS_INFO_XRC_TARGETS`: the live targets of this network namespace.
    pub fn xrc_targets(&self) -> io::Result<Vec<TargetInfo>> {
        let (buf, elem_size) = self.info(sys::RRDS_INFO_XRC_TARGETS)?;
        decode_targets(&buf, elem_size)
    }

    /// Waits up to `timeout` for an XRC event of a registration made through
    /// this socket; `None` on timeout. A datagram or another notification that
    /// comes first is consumed and reported as `InvalidData` (read with
    /// [`RdsSocket::recv_msg`] where both can arrive: it reports events too).
    pub fn recv_xrc_event(&self, timeout: Duration) -> io::Result<Option<XrcEvent>> {
        self.recv_notification(timeout, "an XRC event", |r| r.xrc_event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_addresses_are_v4_mapped() {
        let v4 = rds_addr("10.254.1.1".parse().unwrap());
        assert_eq!(
            v4,
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 254, 1, 1]
        );
        let v6 = rds_addr("fd00::2".parse().unwrap());
        assert_eq!(v6[..2], [0xfd, 0]);
        assert_eq!(v6[15], 2);
        assert_eq!(size_of::<sys::rrds_xrc_remote>(), 24);
    }

    fn event_bytes(qp: u32, event: u32, flags: u32, lost: u32) -> Vec<u8> {
        [qp, event, flags, lost]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect()
    }

    #[test]
    fn events_decode() {
        let e = XrcEvent::decode(&event_bytes(17, 16, 0, 0)).unwrap();
        assert_eq!(e.kind, EventKind::LastWqeReached);
        assert!(!e.synthesized && !e.last && e.lost == 0);
        assert_eq!(e.to_string(), "qp_num=17 event=last_wqe_reached");
        let e = XrcEvent::decode(&event_bytes(17, 15, 0, 0)).unwrap();
        assert_eq!(e.kind, EventKind::SrqLimitReached);
        assert_eq!(e.to_string(), "qp_num=17 event=srq_limit_reached");
        let e = XrcEvent::decode(&event_bytes(17, 0x100, 3, 0)).unwrap();
        assert_eq!(e.kind, EventKind::TargetGone);
        assert!(e.synthesized && e.last);
        assert_eq!(
            e.to_string(),
            "qp_num=17 event=target_gone synthesized final"
        );
        let e = XrcEvent::decode(&event_bytes(9, 4, 5, 6)).unwrap();
        assert_eq!(e.lost, 6);
        // Wrong sizes are refused.
        assert!(XrcEvent::decode(&event_bytes(9, 4, 5, 6)[..12]).is_none());
        assert_eq!(
            XrcEvent::decode(&event_bytes(1, 99, 0, 0)).unwrap().kind,
            EventKind::Other(99)
        );
    }

    #[test]
    fn event_names_round_trip() {
        for name in EventKind::names() {
            let kind = EventKind::from_name(name).unwrap();
            assert_eq!(kind.to_string(), name);
            assert_eq!(EventKind::from_raw(kind.as_raw()), kind);
        }
        assert_eq!(EventKind::from_name("nope"), None);
        assert_eq!(EventKind::Other(42).to_string(), "event(42)");
    }

    #[test]
    fn target_records_decode() {
        let mut rec = vec![0u8; 112];
        rec[0..4].copy_from_slice(&21u32.to_ne_bytes());
        rec[4..8].copy_from_slice(&2u32.to_ne_bytes());
        rec[8..12].copy_from_slice(&1u32.to_ne_bytes());
        rec[12..16].copy_from_slice(&3u32.to_ne_bytes());
        rec[16..24].copy_from_slice(&18u64.to_ne_bytes());
        rec[24..32].copy_from_slice(&6u64.to_ne_bytes());
        rec[32..37].copy_from_slice(b"rxe_a");
        rec[96..104].copy_from_slice(&4096u64.to_ne_bytes());
        rec[104..108].copy_from_slice(&1u32.to_ne_bytes());
        rec[108..112].copy_from_slice(&2u32.to_ne_bytes());
        let t = decode_targets(&rec, 112).unwrap();
        assert_eq!(
            t,
            vec![TargetInfo {
                qp_num: 21,
                device: "rxe_a".into(),
                backend: Backend::Emulated,
                qp_state: 1,
                registrations: 3,
                events: 18,
                overflows: 6,
                bytes_received: 4096,
                connections: 1,
                accepted: 2,
            }]
        );
        assert_eq!(t[0].state_name(), "init");
        // A module's records without the in-band fields.
        let old = decode_targets(&rec[..96], 96).unwrap();
        assert_eq!((old[0].bytes_received, old[0].accepted), (0, 0));
        assert_eq!(old[0].events, 18);
        assert!(decode_targets(&rec[..95], 95).is_err());
        assert!(decode_targets(&rec, 48).is_err());
        assert!(decode_targets(&[], 96).unwrap().is_empty());
    }
}
