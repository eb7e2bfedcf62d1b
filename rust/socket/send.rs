// SPDX-License-Identifier: GPL-2.0

//! sendmsg: checks in upstream's order (send.c `rds_sendmsg`), congestion,
//! send-buffer admission, then the message goes on its connection.

use kernel::{
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
};

use super::{
    xrc_options,
    RdsSock, //
};
use crate::{
    addr::{
        Endpoint,
        Purpose, //
    },
    conn::{
        ConnKey,
        Connection,
        SendOwner, //
    },
    errno,
    ffi::{
        bindings,
        ib_device::AtomicCap,
        net::{
            ne_u64,
            MsgHdr,
            Sock, //
        },
    },
    message::{
        charge,
        flags,
        Extension,
        Header,
        Message,
        MAX_MSG_SIZE, //
    },
    mr::{
        self,
        MrRequest, //
    },
    rdma::{
        RdmaOp,
        SinkRegistration,
        ATOMIC_ARGS_LEN, //
    },
    stats::{
        self,
        Stat, //
    },
    transport::{
        loopback::LOOPBACK,
        Transport, //
    },
    wait::wait_until,
};

/// `RDS_FLAG_RDMA_WR_BYTES` / `RDS_FLAG_RDMA_RD_BYTES` (net/rds/rds.h): the
/// direction an `RdmaBytes` extension counts.
const RDMA_WR_BYTES: u8 = 0x01;
const RDMA_RD_BYTES: u8 = 0x02;

/// `sizeof(struct rds_get_mr_args)`: shorter RDMA_MAP arguments are EINVAL.
const GET_MR_ARGS_LEN: usize = 32;

/// `CMSG_LEN(sizeof(struct rds_rdma_args))`: shorter RDMA_ARGS are EINVAL.
const RDMA_ARGS_CMSG_LEN: usize = 16 + 56;

/// What the control messages of a send ask for.
#[derive(Default)]
struct SendCmsgs<'a> {
    /// The `struct rds_rdma_args` of an RDMA operation.
    rdma_args: Option<&'a [u8]>,
    /// The cmsg type and `struct rds_atomic_args` of an atomic operation.
    atomic: Option<(u32, &'a [u8])>,
    /// `RDS_CMSG_RDMA_MAP`: the `struct rds_get_mr_args` of memory to
    /// register and announce to the peer.
    map: Option<[u8; GET_MR_ARGS_LEN]>,
    /// `RDS_CMSG_RDMA_DEST`: the cookie of an MR of the socket to announce.
    dest: Option<u64>,
    zcopy_cookie: bool,
}

/// Checks the control messages as upstream's `rds_rm_size` does: malformed
/// or unknown SOL_RDS ones are EINVAL; other levels are ignored.
fn parse_cmsgs<'a>(msg: &'a MsgHdr) -> Result<SendCmsgs<'a>> {
    let mut found = SendCmsgs::default();
    let (mut group_ops, mut group_map) = (false, false);
    for cmsg in msg.cmsgs() {
        let (level, kind, len, data) = cmsg?;
        if level != bindings::SOL_RDS as i32 {
            continue;
        }
        match kind as u32 {
            bindings::RDS_CMSG_RDMA_ARGS => {
                if len < RDMA_ARGS_CMSG_LEN {
                    return Err(EINVAL);
                }
                // One operation per message.
                if found.rdma_args.is_some() || found.atomic.is_some() {
                    return Err(EINVAL);
                }
                found.rdma_args = Some(data);
                group_ops = true;
            }
            bindings::RDS_CMSG_ATOMIC_CSWP
            | bindings::RDS_CMSG_ATOMIC_FADD
            | bindings::RDS_CMSG_MASKED_ATOMIC_CSWP
            | bindings::RDS_CMSG_MASKED_ATOMIC_FADD => {
                if data.len() < ATOMIC_ARGS_LEN
                    || found.rdma_args.is_some()
                    || found.atomic.is_some()
                {
                    return Err(EINVAL);
                }
                found.atomic = Some((kind as u32, data));
                group_ops = true;
            }
            // One cookie per message (upstream: `rm->m_rdma_cookie != 0`).
            bindings::RDS_CMSG_RDMA_DEST => {
                if data.len() < 8 || found.map.is_some() || found.dest.is_some() {
                    return Err(EINVAL);
                }
                found.dest = Some(ne_u64(data, 0));
                group_map = true;
            }
            bindings::RDS_CMSG_RDMA_MAP => {
                if data.len() < GET_MR_ARGS_LEN || found.map.is_some() || found.dest.is_some() {
                    return Err(EINVAL);
                }
                let mut args = [0u8; GET_MR_ARGS_LEN];
                args.copy_from_slice(&data[..GET_MR_ARGS_LEN]);
                found.map = Some(args);
                group_map = true;
            }
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
    Ok(found)
}

pub(super) fn sendmsg(
    state: ArcBorrow<'_, RdsSock>,
    sk: &Sock,
    msg: &mut MsgHdr,
    len: usize,
) -> Result<usize> {
    let msg_flags = msg.flags();
    // MSG_BATCH is sendmmsg's "more of the batch follow", on every message but
    // the last: nothing to do for datagrams sent one by one. Upstream refuses
    // it, so sendmmsg of more than one message fails there.
    let allowed = bindings::MSG_DONTWAIT
        | bindings::MSG_CMSG_COMPAT
        | bindings::MSG_ZEROCOPY
        | bindings::MSG_BATCH;
    if msg_flags & !allowed != 0 {
        return Err(errno::eopnotsupp());
    }
    let nonblock = msg_flags & bindings::MSG_DONTWAIT != 0;
    if let Some(target) = xrc_options::send_target(msg)? {
        if msg_flags & bindings::MSG_ZEROCOPY != 0 {
            return Err(errno::eopnotsupp());
        }
        return xrc_options::send(&state, sk, msg, len, target, nonblock);
    }
    let named = if msg.name().is_empty() {
        None
    } else {
        Some(Endpoint::parse(msg.name(), Purpose::SendTo)?)
    };
    let mut dest = Destination::of(&state, named)?;
    let cmsgs = parse_cmsgs(msg)?;
    let (map_args, dest_cookie, zcopy_cookie) = (cmsgs.map, cmsgs.dest, cmsgs.zcopy_cookie);
    // Checked and pinned before the transport is known, as upstream's
    // `rds_cmsg_send` does: bad arguments are reported first.
    let rdma = rdma_op(state, &cmsgs, dest.recverr, nonblock)?;
    if len > MAX_MSG_SIZE || len > sk.sndbuf() / 2 {
        return Err(EMSGSIZE);
    }
    if msg_flags & bindings::MSG_ZEROCOPY != 0 {
        // Zero-copy sends exist only on upstream's TCP transport.
        if sk.flag(bindings::sock_flags_SOCK_ZEROCOPY) {
            return Err(errno::eopnotsupp());
        }
        if !zcopy_cookie {
            return Err(EINVAL);
        }
    }
    let message = Message::from_user(msg, len, rdma)?;
    stats::add(Stat::CopyFromUser, len as u64);
    let conn = dest.connection(&state)?;
    let cookie = announced_cookie(&state, map_args, dest_cookie)?;
    if message.rdma().is_some() && conn.transport.kind() != crate::transport::ib::TRANS_IB {
        // The loopback transport has no RDMA (upstream: no xmit_rdma/xmit_atomic).
        return Err(errno::eopnotsupp());
    }
    // SO_SNDTIMEO bounds both waits, together.
    let mut timeo = if nonblock { 0 } else { sk.sndtimeo() };
    wait_uncongested(&state, &conn, dest.to.port, nonblock, &mut timeo)?;
    let mut header = Header {
        len: len as u32,
        sport: dest.from.port,
        dport: dest.to.port,
        ..Header::default()
    };
    add_rdma_extensions(&mut header, &message, cookie.as_ref());
    admit(&state, sk.sndbuf() / 2, len, &mut timeo, &mut header)?;
    state.last_sender.note_current(state.net);
    if let Err(e) = conn.queue(header, message, Some(Arc::<RdsSock>::from(state))) {
        state.send_completed(charge(len));
        return Err(e);
    }
    conn.xmit();
    if let Some(c) = cookie {
        c.keep();
    }
    Ok(len)
}

/// Where a send goes, as the socket's state says under its lock.
struct Destination {
    from: Endpoint,
    to: Endpoint,
    transport: &'static dyn Transport,
    tos: u8,
    /// The socket's last connection, if it still goes to `to` with `tos`.
    route: Option<Arc<Connection>>,
    recverr: bool,
}

impl Destination {
    /// The destination of a send to `named`, or to the connected peer:
    /// ENOTCONN unbound or unconnected, EOPNOTSUPP across families.
    fn of(state: &RdsSock, named: Option<Endpoint>) -> Result<Self> {
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
        Ok(Self {
            from,
            to,
            transport: s.transport.ok_or_else(errno::enotconn)?,
            tos: s.tos,
            route,
            recverr: s.recverr,
        })
    }

    /// The connection the message goes on, made if needed.
    fn connection(&mut self, state: &RdsSock) -> Result<Arc<Connection>> {
        if let Some(conn) = self.route.take() {
            return Ok(conn);
        }
        // A message to the socket's own address never leaves the host.
        let transport = if self.to.addr == self.from.addr {
            &LOOPBACK
        } else {
            self.transport
        };
        state.route_to(
            ConnKey {
                net: state.net,
                laddr: self.from.addr,
                faddr: self.to.addr,
                tos: self.tos,
                scope: self.from.scope,
            },
            transport,
        )
    }
}

/// The RDMA or atomic operation the control messages ask for, checked and
/// its memory pinned.
fn rdma_op(
    state: ArcBorrow<'_, RdsSock>,
    cmsgs: &SendCmsgs<'_>,
    recverr: bool,
    nonblock: bool,
) -> Result<Option<KBox<RdmaOp>>> {
    // Boxed here: a plain send moves a pointer, not a whole `Option<RdmaOp>`,
    // through sendmsg's steps (about 1 % of the 64 B rate under icount).
    let op = match (cmsgs.rdma_args, cmsgs.atomic) {
        (Some(args), _) => {
            // iWARP: a READ's local memory is registered (`read_sink_device`).
            let sink_device = super::memory::read_sink_device(&state);
            let mut register;
            let sinks = match &sink_device {
                Some(on) => {
                    register = |start: u64, bytes: u64| {
                        super::memory::register_read_sink(&state, on, start, bytes, nonblock)
                    };
                    Some(SinkRegistration {
                        max_pages: (on.0.caps().max_fast_reg_page_list_len as usize)
                            .min(mr::MAX_PAGES),
                        register: &mut register,
                    })
                }
                None => None,
            };
            RdmaOp::from_args(args, Arc::<RdsSock>::from(state), recverr, sinks)?
        }
        (None, Some((kind, args))) => {
            // Plain atomics where the device has them; never posted where it has not.
            let caps = *super::memory::bound_device(&state)?.0.caps();
            let can = (
                caps.atomic != AtomicCap::None,
                caps.masked_atomic != AtomicCap::None,
            );
            RdmaOp::from_atomic(kind, args, Arc::<RdsSock>::from(state), recverr, can)?
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(KBox::new(op, GFP_KERNEL_ACCOUNT)?))
}

/// The cookie announced to the peer (`RDS_EXTHDR_RDMA_DEST`); an MR the
/// send registers is freed again if the send fails (upstream's
/// `allocated_mr`). EINVAL for a cookie of no MR of the socket.
fn announced_cookie<'a>(
    state: &'a RdsSock,
    map_args: Option<[u8; GET_MR_ARGS_LEN]>,
    dest: Option<u64>,
) -> Result<Option<MappedCookie<'a>>> {
    match (map_args, dest) {
        (Some(args), _) => Ok(Some(MappedCookie::map(state, &args)?)),
        (None, Some(cookie)) => {
            if !state.with_mrs(|mrs| mrs.contains(mr::cookie_key(cookie))) {
                return Err(EINVAL);
            }
            Ok(Some(MappedCookie {
                cookie,
                state: None,
            }))
        }
        (None, None) => Ok(None),
    }
}

/// Waits while the destination port is congested. rrds bounds a blocking
/// wait with SO_SNDTIMEO, which upstream ignores here (see
/// userspace-api.rst).
fn wait_uncongested(
    state: &RdsSock,
    conn: &Connection,
    port: u16,
    nonblock: bool,
    timeo: &mut isize,
) -> Result {
    let map = &conn.fcong;
    if !map.is_congested(port) {
        return Ok(());
    }
    if nonblock {
        let mut rx = state.rx.lock();
        if rx.cong_monitor {
            rx.cong_mask |= 1u64 << (port % 64);
        }
    }
    if let Err(e) = map.wait_uncongested(port, timeo) {
        let old = state.tx.lock().cong_refused.replace((map.clone(), port));
        drop(old);
        return Err(e);
    }
    Ok(())
}

/// The extension headers of the message's RDMA: what upstream's IB
/// transport adds (the key, on which the receiver frees a USE_ONCE MR, and
/// the byte count, for its statistics) and the announced cookie.
fn add_rdma_extensions(header: &mut Header, message: &Message, cookie: Option<&MappedCookie<'_>>) {
    if let Some(op) = message.rdma().filter(|op| op.atomic().is_none()) {
        header.add_extension(Extension::Rdma { rkey: op.rkey() });
        header.add_extension(Extension::RdmaBytes {
            bytes: op.bytes() as u32,
            rflags: if op.is_write() {
                RDMA_WR_BYTES
            } else {
                RDMA_RD_BYTES
            },
        });
        stats::inc(Stat::SendRdma);
        stats::add(Stat::SendRdmaBytes, op.bytes() as u64);
    }
    if let Some(c) = cookie {
        header.add_extension(Extension::RdmaDest {
            rkey: mr::cookie_key(c.cookie),
            offset: (c.cookie >> 32) as u32,
        });
    }
}

/// Send-buffer admission: accepted while the unacknowledged bytes are below
/// `sndbuf` (half of SO_SNDBUF's value), even if this message goes past it;
/// past half of it, the message asks the peer for an ack.
fn admit(
    state: &RdsSock,
    sndbuf: usize,
    len: usize,
    timeo: &mut isize,
    header: &mut Header,
) -> Result {
    let mut tx = state.tx.lock();
    if tx.bytes >= sndbuf {
        stats::inc(Stat::SendQueueFull);
    }
    wait_until(&state.wait, &mut tx, timeo, |t| {
        t.space_wanted |= t.bytes >= sndbuf;
        t.bytes < sndbuf
    })?;
    tx.bytes += charge(len);
    if tx.bytes >= sndbuf / 2 {
        header.flags |= flags::ACK_REQUIRED;
    }
    Ok(())
}

/// The cookie a send announces; an MR registered by the send itself
/// (`RDS_CMSG_RDMA_MAP`) is freed again unless the send succeeds.
struct MappedCookie<'a> {
    cookie: u64,
    /// The socket whose MR this send registered.
    state: Option<&'a RdsSock>,
}

impl<'a> MappedCookie<'a> {
    /// `RDS_CMSG_RDMA_MAP`: registers what `args` (a `struct
    /// rds_get_mr_args`) describes, as `RDS_GET_MR` does.
    fn map(state: &'a RdsSock, args: &[u8]) -> Result<Self> {
        let req = MrRequest {
            addr: ne_u64(args, 0),
            bytes: ne_u64(args, 8),
            flags: ne_u64(args, 24),
        };
        let cookie = match super::memory::register_mr(state, &req, ne_u64(args, 16)) {
            // Upstream's answer when the device went meanwhile: try again.
            Err(e) if e == ENODEV => return Err(EAGAIN),
            other => other?,
        };
        Ok(Self {
            cookie,
            state: Some(state),
        })
    }

    /// The send succeeded: the MR stays until freed or used.
    fn keep(mut self) {
        self.state = None;
    }
}

impl Drop for MappedCookie<'_> {
    fn drop(&mut self) {
        if let Some(state) = self.state {
            state.with_mrs(|mrs| mrs.discard(mr::cookie_key(self.cookie)));
        }
    }
}
