// SPDX-License-Identifier: GPL-2.0

//! The XRC options: targets (create, register, unregister, inject) and
//! kernel-side initiators (connect, disconnect, and the sends of
//! `RRDS_CMSG_XRC_SEND`), each handing over to the XRC manager.

use kernel::{
    page::Page,
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
    uaccess::UserSlice,
};

use super::{
    memory,
    RdsSock, //
};
use crate::{
    addr::Endpoint,
    errno,
    ffi::{
        bindings,
        net::{
            GetOptResult,
            MsgHdr,
            Sock,
            SockOptValue, //
        },
        process,
    },
    stats::{
        self,
        Stat, //
    },
    xrc,
};

/// `RRDS_XRC_REGISTER`: registers the calling process with the XRC target
/// `qp_num` on the socket's device. EINVAL for a bad `struct rrds_xrc_qp`,
/// then `memory::bound_device`'s errors, then `xrc::register`'s.
pub(super) fn register(state: ArcBorrow<'_, RdsSock>, value: &SockOptValue) -> Result {
    let args = read_xrc_qp(value)?;
    let (device, _) = memory::bound_device(&state)?;
    xrc::register(Arc::<RdsSock>::from(state), &device, args.qp_num)?;
    Ok(())
}

/// `RRDS_XRC_UNREGISTER`: ends the calling process's registration with the
/// XRC target `qp_num`. EINVAL for a bad `struct rrds_xrc_qp`, then ENOTCONN
/// unbound, EOPNOTSUPP on loopback, ENOENT for any other failure to find the
/// device (it is gone), then `xrc::unregister`'s errors.
pub(super) fn unregister(state: &RdsSock, value: &SockOptValue) -> Result {
    let args = read_xrc_qp(value)?;
    let (device, _) = memory::bound_device(state).map_err(|e| {
        // Unregistering through a socket whose device is gone: every
        // registration on that device ended with it.
        let device_gone = e != errno::enotconn() && e != errno::eopnotsupp();
        if device_gone {
            ENOENT
        } else {
            e
        }
    })?;
    let registration = xrc::unregister(state.net, &device, args.qp_num)?;
    registration.sink().forget(&registration);
    Ok(())
}

/// `RRDS_XRC_INJECT`, a test hook: moves an XRC target's QP to error or
/// synthesizes one of its events. EINVAL for a length other than
/// `struct rrds_xrc_inject`, then EPERM without CAP_NET_ADMIN, EFAULT,
/// `memory::bound_device`'s errors, then `xrc::inject`'s.
pub(super) fn inject(state: &RdsSock, value: &SockOptValue) -> Result {
    if value.len() != core::mem::size_of::<bindings::rrds_xrc_inject>() {
        return Err(EINVAL);
    }
    if !process::capable_net_admin() {
        return Err(EPERM);
    }
    let raw = value.read::<16>()?;
    let word = |i: usize| u32::from_ne_bytes([raw[i], raw[i + 1], raw[i + 2], raw[i + 3]]);
    let args = bindings::rrds_xrc_inject {
        qp_num: word(0),
        action: word(4),
        event: word(8),
        reserved: word(12),
    };
    let (device, _) = memory::bound_device(state)?;
    xrc::inject(state.net, &device, &args)
}

/// A `struct rrds_xrc_qp` option value: exactly its size, reserved 0.
fn read_xrc_qp(value: &SockOptValue) -> Result<bindings::rrds_xrc_qp> {
    if value.len() != core::mem::size_of::<bindings::rrds_xrc_qp>() {
        return Err(EINVAL);
    }
    let raw = value.read::<8>()?;
    let args = bindings::rrds_xrc_qp {
        qp_num: u32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]),
        reserved: u32::from_ne_bytes([raw[4], raw[5], raw[6], raw[7]]),
    };
    if args.reserved != 0 {
        return Err(EINVAL);
    }
    Ok(args)
}

/// `RRDS_XRC_CREATE`: a new target on the socket's device, the caller registered.
pub(super) fn create(
    state: ArcBorrow<'_, RdsSock>,
    value: UserSlice,
    len: usize,
) -> Result<GetOptResult> {
    const LEN: usize = core::mem::size_of::<bindings::rrds_xrc_create>();
    if len != LEN {
        return Err(EINVAL);
    }
    let (device, port) = memory::bound_device(&state)?;
    let addr = state.state.lock().bound.ok_or_else(errno::enotconn)?;
    let registration = xrc::create(Arc::<RdsSock>::from(state), device, port, &addr)?;
    let target = registration.target();
    let (qp_num, backend) = (target.qp_num(), target.backend());
    let mut out = [0u8; LEN];
    out[..4].copy_from_slice(&qp_num.to_ne_bytes());
    out[4..].copy_from_slice(&backend.uapi().to_ne_bytes());
    if let Err(e) = value.writer().write_slice(&out) {
        if registration.detach() {
            xrc::EventSink::forget(&*state, &registration);
        }
        return Err(e);
    }
    Ok(GetOptResult { ret: 0, len: LEN })
}

/// A `struct rrds_xrc_remote`: the target's address (IPv4 mapped) and QP
/// number, reserved 0. EINVAL otherwise, or for an unspecified address.
fn parse_remote(raw: &[u8]) -> Result<([u8; 16], u32)> {
    if raw.len() != core::mem::size_of::<bindings::rrds_xrc_remote>() {
        return Err(EINVAL);
    }
    let word = |i: usize| u32::from_ne_bytes([raw[i], raw[i + 1], raw[i + 2], raw[i + 3]]);
    let mut addr = [0u8; 16];
    addr.copy_from_slice(&raw[..16]);
    if word(20) != 0 || addr == [0; 16] {
        return Err(EINVAL);
    }
    Ok((addr, word(16)))
}

fn read_remote(value: &SockOptValue) -> Result<([u8; 16], u32)> {
    if value.len() != core::mem::size_of::<bindings::rrds_xrc_remote>() {
        return Err(EINVAL);
    }
    parse_remote(&value.read::<24>()?)
}

/// `RRDS_XRC_CONNECT`: connects a kernel-side initiator of the socket to a
/// target. In order: EINVAL for a bad `struct rrds_xrc_remote`, EFAULT,
/// `memory::bound_device`'s errors, EOPNOTSUPP across address families,
/// EISCONN if one of the socket's initiators is connected to that target,
/// ENOBUFS past `xrc::MAX_INITIATORS_PER_SOCKET`, then `xrc::connect`'s.
/// An initiator of the socket to the same target that has ended is
/// replaced.
pub(super) fn connect(state: &RdsSock, value: &SockOptValue) -> Result {
    let (addr, qp_num) = read_remote(value)?;
    let (device, _) = memory::bound_device(state)?;
    let local = state.state.lock().bound.ok_or_else(errno::enotconn)?;
    let remote = Endpoint {
        addr,
        port: 0,
        scope: local.scope,
    };
    if remote.is_v4() != local.is_v4() {
        return Err(errno::eopnotsupp());
    }
    let replaced = {
        let mut initiators = state.xrc_initiators.lock();
        match initiators.iter().position(|i| i.names(&addr, qp_num)) {
            Some(i) => {
                if initiators.get(i).is_some_and(|i| !i.has_ended()) {
                    return Err(errno::eisconn());
                }
                Some(initiators.remove(i)?)
            }
            None if initiators.len() >= xrc::MAX_INITIATORS_PER_SOCKET => {
                return Err(errno::enobufs());
            }
            None => None,
        }
    };
    if let Some(old) = replaced {
        old.shut_down(errno::enotconn());
    }
    // Room first: once connected, nothing may fail but the connection.
    state.xrc_initiators.lock().reserve(1, GFP_KERNEL)?;
    let initiator = xrc::connect(state.net, &device, &local, &remote, qp_num).map_err(|e| {
        // Not restarted: the target may have seen the attempt, and would
        // refuse a second one as busy until it has let the first go.
        if e == ERESTARTSYS {
            EINTR
        } else {
            e
        }
    })?;
    // Setsockopt runs under the socket lock: no other connect took the room.
    let mut initiators = state.xrc_initiators.lock();
    if let Err(e) = initiators.push(initiator.clone(), GFP_KERNEL) {
        drop(initiators);
        initiator.shut_down(errno::enotconn());
        return Err(e.into());
    }
    Ok(())
}

/// `RRDS_XRC_DISCONNECT`: ends the socket's initiator to a target (a
/// disconnect for the target). EINVAL for a bad `struct rrds_xrc_remote`,
/// EFAULT, ENOENT if the socket has none to it.
pub(super) fn disconnect(state: &RdsSock, value: &SockOptValue) -> Result {
    let (addr, qp_num) = read_remote(value)?;
    let initiator = {
        let mut initiators = state.xrc_initiators.lock();
        let i = initiators
            .iter()
            .position(|i| i.names(&addr, qp_num))
            .ok_or(ENOENT)?;
        initiators.remove(i)?
    };
    initiator.shut_down(errno::enotconn());
    Ok(())
}

/// The target a send's `RRDS_CMSG_XRC_SEND` names, if it has one: then it
/// may carry no other SOL_RDS cmsg and no destination (EINVAL). A malformed
/// control block is left to the usual send, which reports it in upstream's
/// order.
pub(super) fn send_target(msg: &MsgHdr) -> Result<Option<([u8; 16], u32)>> {
    let (mut target, mut others) = (None, false);
    for cmsg in msg.cmsgs() {
        let Ok((level, kind, _, data)) = cmsg else {
            return Ok(None);
        };
        if level != bindings::SOL_RDS as i32 {
            continue;
        }
        if kind as u32 != bindings::RRDS_CMSG_XRC_SEND {
            others = true;
            continue;
        }
        if target.is_some() {
            return Err(EINVAL);
        }
        target = Some(parse_remote(data)?);
    }
    if target.is_some() && (others || !msg.name().is_empty()) {
        return Err(EINVAL);
    }
    Ok(target)
}

/// A send through the socket's initiator to `target`: EMSGSIZE past
/// `xrc::SEND_MAX`, ENOTCONN if the socket has none to it, ENOMEM, EFAULT,
/// then `Initiator::send`'s errors. Waits as a blocking send does, bounded
/// by `SO_SNDTIMEO`.
pub(super) fn send(
    state: &RdsSock,
    sk: &Sock,
    msg: &mut MsgHdr,
    len: usize,
    target: ([u8; 16], u32),
    nonblock: bool,
) -> Result<usize> {
    if len > xrc::SEND_MAX {
        return Err(EMSGSIZE);
    }
    let initiator = state
        .xrc_initiators
        .lock()
        .iter()
        .find(|i| i.names(&target.0, target.1))
        .cloned()
        .ok_or_else(errno::enotconn)?;
    // Charged to the sender's memory cgroup, as a message's pages are.
    let mut page = Page::alloc_page(GFP_KERNEL_ACCOUNT)?;
    msg.copy_page_from_user(&mut page, len)?;
    stats::add(Stat::CopyFromUser, len as u64);
    let mut timeo = if nonblock { 0 } else { sk.sndtimeo() };
    initiator.send(page, len, &mut timeo)?;
    Ok(len)
}

/// The socket is closing: each of its initiators disconnects.
pub(super) fn release_initiators(state: &RdsSock) {
    let initiators = core::mem::take(&mut *state.xrc_initiators.lock());
    for initiator in initiators.iter() {
        initiator.shut_down(errno::enotconn());
    }
}
