// SPDX-License-Identifier: GPL-2.0

//! SOL_RDS setsockopt (af_rds.c `rds_setsockopt`) and the option values it
//! reads. The XRC options are in `xrc_options`.

use kernel::{
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
};

use super::{
    memory,
    xrc_options,
    RdsSock,
    TRANS_COUNT, //
};
use crate::{
    addr, cong, conn, errno,
    ffi::{
        bindings,
        net::{
            ne_u64,
            Sock,
            SockOptValue, //
        },
    },
    fifo::Fifo,
    transport::ib,
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
        bindings::RDS_FREE_MR => free_mr(&state, &value),
        bindings::RDS_RECVERR => set_recverr(&state, &value),
        bindings::RDS_CONG_MONITOR => set_cong_monitor(state, &value),
        bindings::RRDS_CONN_MONITOR => set_conn_monitor(state, &value),
        bindings::SO_RDS_TRANSPORT => set_transport(&state, &value),
        bindings::SO_TIMESTAMP_OLD | bindings::SO_TIMESTAMP_NEW => {
            set_rcv_timestamp(sk, name, &value)
        }
        bindings::SO_RDS_MSG_RXPATH_LATENCY => set_rxpath_latency(&state, &value),
        bindings::RRDS_XRC_REGISTER => xrc_options::register(state, &value),
        bindings::RRDS_XRC_UNREGISTER => xrc_options::unregister(&state, &value),
        bindings::RRDS_XRC_INJECT => xrc_options::inject(&state, &value),
        bindings::RRDS_XRC_CONNECT => xrc_options::connect(&state, &value),
        bindings::RRDS_XRC_DISCONNECT => xrc_options::disconnect(&state, &value),
        _ => Err(errno::enoprotoopt()),
    }
}

/// `RDS_FREE_MR`: frees the MR of a cookie, or with cookie 0 waits for the
/// socket's freed MRs to be invalid and releases the device's pooled ones
/// (rdma.c `rds_free_mr`). In order: EINVAL for a length other than
/// `struct rds_free_mr_args`, EFAULT, EINVAL on a socket with no
/// memory-registering transport (unbound or loopback), then the MR table's
/// errors (EINVAL for an unknown cookie, ETIMEDOUT).
fn free_mr(state: &RdsSock, value: &SockOptValue) -> Result {
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

/// `RDS_RECVERR`: whether failed RDMA and atomic operations are reported to
/// the sender even without `RDS_RDMA_NOTIFY_ME`, stored as a boolean.
/// EINVAL below 4 bytes, EFAULT.
fn set_recverr(state: &RdsSock, value: &SockOptValue) -> Result {
    let v = read_int(value)?;
    state.state.lock().recverr = v != 0;
    Ok(())
}

/// `RRDS_CONN_MONITOR`: `RRDS_CONN_MONITOR_*`. On (USED or ALL) makes room
/// for `RRDS_CONN_EVENT_QUEUE_LEN` events and joins the connections'
/// monitors; OFF leaves them and drops what is queued. EINVAL below 4 bytes
/// or for another value, EFAULT; ENOMEM turning it on.
fn set_conn_monitor(state: ArcBorrow<'_, RdsSock>, value: &SockOptValue) -> Result {
    let mode = u32::try_from(read_int(value)?)
        .ok()
        .filter(|m| *m <= bindings::RRDS_CONN_MONITOR_ALL)
        .ok_or(EINVAL)?;
    if mode == bindings::RRDS_CONN_MONITOR_OFF {
        conn::remove_monitor(&*state);
        let dropped = {
            let mut rx = state.rx.lock();
            rx.conn_monitor = mode;
            rx.conn_events_lost = 0;
            core::mem::take(&mut rx.conn_events)
        };
        drop(dropped);
        return Ok(());
    }
    let len = bindings::RRDS_CONN_EVENT_QUEUE_LEN as usize;
    let slots = if state.rx.lock().conn_events.capacity() < len {
        Some(Fifo::new_slots(len, GFP_KERNEL_ACCOUNT)?)
    } else {
        None
    };
    conn::add_monitor(Arc::<RdsSock>::from(state))?;
    let mut rx = state.rx.lock();
    if let Some(slots) = slots {
        if rx.conn_events.capacity() < len {
            rx.conn_events.grow_into(slots);
        }
    }
    rx.conn_monitor = mode;
    Ok(())
}

/// `RDS_CONG_MONITOR`: a boolean. On joins the sockets told when a congested
/// port clears; off leaves them and forgets recorded and pending ports.
/// EINVAL below 4 bytes, EFAULT; ENOMEM joining.
fn set_cong_monitor(state: ArcBorrow<'_, RdsSock>, value: &SockOptValue) -> Result {
    let on = read_int(value)? != 0;
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

/// `SO_RDS_TRANSPORT`: pins an unbound socket to the IB transport. Checked
/// in upstream's order: EOPNOTSUPP once a transport is attached, EINVAL for
/// a length other than 4, EFAULT, EINVAL for a value outside the transport
/// numbers, ENOPROTOOPT for a transport rrds does not provide.
fn set_transport(state: &RdsSock, value: &SockOptValue) -> Result {
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

/// `SO_TIMESTAMP_OLD` / `SO_TIMESTAMP_NEW` at level SOL_RDS: the value turns
/// receive timestamps on or off; `_NEW` also selects the 64-bit layout,
/// which nothing here clears (af_rds.c `rds_enable_recvtstamp`). EFAULT for
/// a length other than 4, and on the copy.
fn set_rcv_timestamp(sk: &Sock, name: u32, value: &SockOptValue) -> Result {
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

/// `SO_RDS_MSG_RXPATH_LATENCY`: the receive-path trace points reported with
/// each message (af_rds.c `rds_recv_track_latency`). EFAULT for a length
/// other than `struct rds_rx_trace_so`, on the copy, for more points than
/// the socket keeps, and for a point out of range.
fn set_rxpath_latency(state: &RdsSock, value: &SockOptValue) -> Result {
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
