// SPDX-License-Identifier: GPL-2.0

//! sendmsg: checks in upstream's order (send.c `rds_sendmsg`), congestion,
//! send-buffer admission, then the message goes on its connection.

use kernel::{
    prelude::*,
    sync::ArcBorrow, //
};

use super::{
    addr::{
        Endpoint,
        Purpose, //
    },
    RdsSock,
};
use crate::{
    conn::ConnKey,
    errno,
    ffi::{
        bindings,
        net::{
            MsgHdr,
            Sock, //
        },
    },
    message::{
        flags,
        Header,
        Message,
        MAX_MSG_SIZE, //
    },
    stats::{
        self,
        Stat, //
    },
    transport::loopback::LOOPBACK,
    wait::wait_until,
};

/// `CMSG_LEN(sizeof(struct rds_rdma_args))`: shorter RDMA_ARGS are EINVAL.
const RDMA_ARGS_CMSG_LEN: usize = 16 + 56;

/// What the control messages of a send ask for.
#[derive(Default)]
struct SendCmsgs {
    /// An RDMA or atomic operation (or a map/dest/cookie for one).
    rdma: bool,
    zcopy_cookie: bool,
}

/// Checks the control messages as upstream's `rds_rm_size` does: malformed
/// or unknown SOL_RDS ones are EINVAL; other levels are ignored.
fn parse_cmsgs(msg: &MsgHdr) -> Result<SendCmsgs> {
    let mut found = SendCmsgs::default();
    let (mut group_ops, mut group_map) = (false, false);
    for cmsg in msg.cmsgs() {
        let (level, kind, len) = cmsg?;
        if level != bindings::SOL_RDS as i32 {
            continue;
        }
        match kind as u32 {
            bindings::RDS_CMSG_RDMA_ARGS => {
                if len < RDMA_ARGS_CMSG_LEN {
                    return Err(EINVAL);
                }
                group_ops = true;
            }
            bindings::RDS_CMSG_ATOMIC_CSWP
            | bindings::RDS_CMSG_ATOMIC_FADD
            | bindings::RDS_CMSG_MASKED_ATOMIC_CSWP
            | bindings::RDS_CMSG_MASKED_ATOMIC_FADD => group_ops = true,
            bindings::RDS_CMSG_RDMA_DEST | bindings::RDS_CMSG_RDMA_MAP => group_map = true,
            bindings::RDS_CMSG_ZCOPY_COOKIE => {
                found.zcopy_cookie = true;
                group_map = true;
            }
            _ => return Err(EINVAL),
        }
    }
    if group_ops && group_map {
        return Err(EINVAL);
    }
    found.rdma = group_ops || (group_map && !found.zcopy_cookie);
    Ok(found)
}

pub(super) fn sendmsg(
    state: ArcBorrow<'_, RdsSock>,
    sk: &Sock,
    msg: &mut MsgHdr,
    len: usize,
) -> Result<usize> {
    let msg_flags = msg.flags();
    if msg_flags & !(bindings::MSG_DONTWAIT | bindings::MSG_CMSG_COMPAT | bindings::MSG_ZEROCOPY)
        != 0
    {
        return Err(errno::eopnotsupp());
    }
    let nonblock = msg_flags & bindings::MSG_DONTWAIT != 0;
    let named = if msg.name().is_empty() {
        None
    } else {
        Some(Endpoint::parse(msg.name(), Purpose::SendTo)?)
    };
    let (from, to, transport, tos, route) = {
        let s = state.state.lock();
        let from = s.bound.ok_or_else(errno::enotconn)?;
        let to = match named {
            Some(to) => {
                if to.is_v4() != from.is_v4() {
                    return Err(errno::eopnotsupp());
                }
                to
            }
            None => s.peer.ok_or_else(errno::enotconn)?,
        };
        let route = s
            .route
            .as_ref()
            .filter(|c| c.key.faddr == to.addr && c.key.tos == s.tos)
            .cloned();
        (
            from,
            to,
            s.transport.ok_or_else(errno::enotconn)?,
            s.tos,
            route,
        )
    };
    let cmsgs = parse_cmsgs(msg)?;
    if len > MAX_MSG_SIZE || len > sk.sndbuf() / 2 {
        return Err(EMSGSIZE);
    }
    if msg_flags & bindings::MSG_ZEROCOPY != 0 {
        // Zero-copy sends exist only on upstream's TCP transport.
        if sk.flag(bindings::sock_flags_SOCK_ZEROCOPY) {
            return Err(errno::eopnotsupp());
        }
        if !cmsgs.zcopy_cookie {
            return Err(EINVAL);
        }
    }
    let message = Message::from_user(msg, len)?;
    stats::add(Stat::CopyFromUser, len as u64);
    // A message to the socket's own address never leaves the host.
    let transport = if to.addr == from.addr {
        &LOOPBACK
    } else {
        transport
    };
    let conn = match route {
        Some(conn) => conn,
        None => state.route_to(
            ConnKey {
                net: state.net,
                laddr: from.addr,
                faddr: to.addr,
                tos,
                scope: from.scope,
            },
            transport,
        )?,
    };
    if cmsgs.rdma {
        // The loopback transport has no RDMA (upstream: no xmit_rdma/xmit_atomic).
        return Err(errno::eopnotsupp());
    }

    // Congestion of the destination port. rrds bounds a blocking wait with
    // SO_SNDTIMEO, which upstream ignores here (see userspace-api.rst).
    let mut timeo = if nonblock { 0 } else { sk.sndtimeo() };
    let map = &conn.fcong;
    if map.is_congested(to.port) {
        if nonblock {
            let mut rx = state.rx.lock();
            if rx.cong_monitor {
                rx.cong_mask |= 1u64 << (to.port % 64);
            }
        }
        if let Err(e) = map.wait_uncongested(to.port, &mut timeo) {
            let old = state.tx.lock().cong_refused.replace((map.clone(), to.port));
            drop(old);
            return Err(e);
        }
    }

    // Send-buffer admission: accepted while the unacknowledged bytes are below
    // sndbuf (half of SO_SNDBUF's value), even if this message goes past it.
    let sndbuf = sk.sndbuf() / 2;
    let mut header = Header {
        len: len as u32,
        sport: from.port,
        dport: to.port,
        ..Header::default()
    };
    {
        let mut tx = state.tx.lock();
        wait_until(&state.wait, &mut tx, &mut timeo, |t| t.bytes < sndbuf)?;
        tx.bytes += len;
        if tx.bytes >= sndbuf / 2 {
            header.flags |= flags::ACK_REQUIRED;
            stats::inc(Stat::SendAckRequired);
        }
    }
    if let Err(e) = conn.queue(header, message, Some(state.into())) {
        state.send_completed(len);
        return Err(e);
    }
    conn.xmit();
    Ok(len)
}
