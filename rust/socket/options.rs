// SPDX-License-Identifier: GPL-2.0

//! SOL_RDS setsockopt (af_rds.c `rds_setsockopt`) and the option values it
//! reads; XRC target creation, a getsockopt that acts.

use kernel::{
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
    uaccess::UserSlice,
};

use super::{
    memory,
    RdsSock,
    TRANS_COUNT, //
};
use crate::{
    addr, cong, errno,
    ffi::{
        bindings,
        net::{
            ne_u64,
            GetOptResult,
            Sock,
            SockOptValue, //
        },
    },
    transport::ib,
    xrc,
};

/// Reads an `int` option value of at least 4 bytes (upstream's `rds_set_bool`
/// and friends: shorter is `EINVAL`).
pub(super) fn read_int(value: &SockOptValue) -> Result<i32> {
    if value.len() < 4 {
        return Err(EINVAL);
    }
    Ok(i32::from_ne_bytes(value.read::<4>()?))
}

/// One SOL_RDS setsockopt, under the socket lock (af_rds.c `rds_setsockopt`).
pub(super) fn set_option(
    state: ArcBorrow<'_, RdsSock>,
    sk: &Sock,
    name: u32,
    value: SockOptValue,
) -> Result {
    match name {
        bindings::RDS_CANCEL_SENT_TO => cancel_sent_to(&state, value),
        bindings::RDS_GET_MR | bindings::RDS_GET_MR_FOR_DEST => {
            memory::get_mr(&state, name, &value)
        }
        bindings::RDS_FREE_MR => {
            if value.len() != core::mem::size_of::<bindings::rds_free_mr_args>() {
                return Err(EINVAL);
            }
            let raw = value.read::<16>()?;
            let (cookie, flags) = (ne_u64(&raw, 0), ne_u64(&raw, 8));
            // Only a transport that registers memory can free or flush
            // (upstream: EINVAL without `free_mr` / `flush_mrs`).
            let registers = state
                .state
                .lock()
                .transport
                .is_some_and(|t| t.kind() == ib::TRANS_IB);
            if !registers {
                return Err(EINVAL);
            }
            let invalidate = flags & u64::from(bindings::RDS_RDMA_INVALIDATE) != 0;
            state.with_mrs(|mrs| {
                if cookie == 0 {
                    mrs.flush()
                } else {
                    mrs.free(cookie, invalidate)
                }
            })
        }
        bindings::RDS_RECVERR => {
            let v = read_int(&value)?;
            state.state.lock().recverr = v != 0;
            Ok(())
        }
        bindings::RDS_CONG_MONITOR => {
            let on = read_int(&value)? != 0;
            if on {
                cong::add_monitor(Arc::<RdsSock>::from(state))?;
                state.rx.lock().cong_monitor = true;
            } else {
                cong::remove_monitor(&*state);
                let mut rx = state.rx.lock();
                rx.cong_monitor = false;
                rx.cong_mask = 0;
                rx.cong_notify = 0;
            }
            Ok(())
        }
        bindings::SO_RDS_TRANSPORT => {
            // A bound socket already has its transport.
            if state.state.lock().transport.is_some() {
                return Err(errno::eopnotsupp());
            }
            if value.len() != 4 {
                return Err(EINVAL);
            }
            let t = i32::from_ne_bytes(value.read::<4>()?);
            if !(0..TRANS_COUNT).contains(&t) {
                return Err(EINVAL);
            }
            if t != ib::TRANS_IB {
                // TCP (2) is not provided; GAP (1) never is.
                return Err(errno::enoprotoopt());
            }
            state.state.lock().pinned_ib = true;
            Ok(())
        }
        bindings::SO_TIMESTAMP_OLD | bindings::SO_TIMESTAMP_NEW => {
            // Upstream answers a wrong length with EFAULT here.
            if value.len() != 4 {
                return Err(EFAULT);
            }
            let on = i32::from_ne_bytes(value.read::<4>()?) != 0;
            if name == bindings::SO_TIMESTAMP_NEW {
                sk.set_flag(bindings::sock_flags_SOCK_TSTAMP_NEW, true);
            }
            sk.set_flag(bindings::sock_flags_SOCK_RCVTSTAMP, on);
            Ok(())
        }
        bindings::SO_RDS_MSG_RXPATH_LATENCY => {
            if value.len() != core::mem::size_of::<bindings::rds_rx_trace_so>() {
                return Err(EFAULT);
            }
            let raw = value.read::<4>()?;
            let count = raw[0];
            if usize::from(count) > raw.len() - 1 {
                return Err(EFAULT);
            }
            let mut rx = state.rx.lock();
            rx.rx_trace_count = count;
            for i in 0..usize::from(count) {
                if usize::from(raw[1 + i]) >= rx.rx_trace_pos.len() {
                    // Upstream stores the earlier positions, then resets the count.
                    rx.rx_trace_count = 0;
                    return Err(EFAULT);
                }
                rx.rx_trace_pos[i] = raw[1 + i];
            }
            Ok(())
        }
        bindings::RRDS_XRC_REGISTER | bindings::RRDS_XRC_UNREGISTER => {
            let args = read_xrc_qp(&value)?;
            let (device, _) = memory::bound_device(&state).map_err(|e| {
                // Unregistering through a socket whose device is gone: every
                // registration on that device ended with it.
                let device_gone = e != errno::enotconn() && e != errno::eopnotsupp();
                if name == bindings::RRDS_XRC_UNREGISTER && device_gone {
                    ENOENT
                } else {
                    e
                }
            })?;
            if name == bindings::RRDS_XRC_REGISTER {
                xrc::register(Arc::<RdsSock>::from(state), &device, args.qp_num)?;
            } else {
                let registration = xrc::unregister(state.net, &device, args.qp_num)?;
                registration.sink().forget(&registration);
            }
            Ok(())
        }
        bindings::RRDS_XRC_INJECT => {
            if value.len() != core::mem::size_of::<bindings::rrds_xrc_inject>() {
                return Err(EINVAL);
            }
            // SAFETY: No preconditions.
            if !unsafe { bindings::rrds_capable_net_admin() } {
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
            let (device, _) = memory::bound_device(&state)?;
            xrc::inject(state.net, &device, &args)
        }
        _ => Err(errno::enoprotoopt()),
    }
}

/// A `struct rrds_xrc_qp` option value: exactly its size, reserved 0.
pub(super) fn read_xrc_qp(value: &SockOptValue) -> Result<bindings::rrds_xrc_qp> {
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
pub(super) fn xrc_create(
    state: ArcBorrow<'_, RdsSock>,
    value: UserSlice,
    len: usize,
) -> Result<GetOptResult> {
    const LEN: usize = core::mem::size_of::<bindings::rrds_xrc_create>();
    if len != LEN {
        return Err(EINVAL);
    }
    let (device, port) = memory::bound_device(&state)?;
    let registration = xrc::create(Arc::<RdsSock>::from(state), device, port)?;
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

/// `RDS_CANCEL_SENT_TO`: drops this socket's queued messages to an address
/// and port (af_rds.c `rds_cancel_sent_to`; the family field is not checked).
pub(super) fn cancel_sent_to(state: &RdsSock, value: SockOptValue) -> Result {
    if state.endpoint().is_none() {
        return Err(errno::enotconn());
    }
    let (addr, port) = if value.len() >= addr::SOCKADDR_IN6_LEN {
        let raw = value.read::<{ addr::SOCKADDR_IN6_LEN }>()?;
        let mut a = [0u8; 16];
        a.copy_from_slice(&raw[8..24]);
        (a, u16::from_be_bytes([raw[2], raw[3]]))
    } else if value.len() >= addr::SOCKADDR_IN_LEN {
        let raw = value.read::<{ addr::SOCKADDR_IN_LEN }>()?;
        (
            addr::v4_mapped([raw[4], raw[5], raw[6], raw[7]]),
            u16::from_be_bytes([raw[2], raw[3]]),
        )
    } else {
        return Err(EINVAL);
    };
    let conns = {
        let s = state.state.lock();
        let mut v = KVec::new();
        for (_, c) in s.conns.iter().filter(|(k, _)| k.faddr == addr) {
            v.push(c.clone(), GFP_KERNEL)?;
        }
        v
    };
    for conn in conns.iter().filter(|c| c.key.faddr == addr) {
        conn.cancel(Some(state), |h| h.dport == port);
    }
    Ok(())
}
