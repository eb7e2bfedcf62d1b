// SPDX-License-Identifier: GPL-2.0

//! `RDS_INFO_*` getsockopt snapshots (net/rds/info.c and its producers),
//! with upstream's record layouts and sizing protocol: too small a buffer
//! gets `ENOSPC` and the length needed in optlen; success returns the size
//! of one record, with optlen set to the bytes written.

use core::mem::size_of;
use kernel::{
    prelude::*,
    transmute::AsBytes,
    uaccess::UserSlice, //
};

use super::{
    RdsSock,
    SOCKETS, //
};
use crate::{
    addr::Endpoint,
    conn, errno,
    ffi::{
        bindings,
        net::{
            GetOptResult,
            NetRef, //
        },
    },
    message::Header,
    stats,
    transport::LinkState,
};

const CONN_FLAG_SENDING: u8 = 0x01;
const CONN_FLAG_CONNECTING: u8 = 0x02;
const CONN_FLAG_CONNECTED: u8 = 0x04;
/// Upstream refuses lengths it could not pin (info.c: `INT_MAX - PAGE_SIZE + 1`).
const MAX_LEN: usize = i32::MAX as usize - 4096 + 1;

/// Records of one kind, as they will be copied out.
struct Records {
    bytes: KVVec<u8>,
    each: usize,
}

impl Records {
    /// Records of the uapi struct `T`.
    fn of<T>() -> Self {
        Self {
            bytes: KVVec::new(),
            each: size_of::<T>(),
        }
    }

    fn push(&mut self, record: &[u8]) -> Result {
        self.bytes.extend_from_slice(record, GFP_KERNEL)?;
        Ok(())
    }
}

/// An IPv4-mapped address's IPv4 part, as a `__be32` (its bytes in order).
fn be32(addr: &[u8; 16]) -> u32 {
    u32::from_ne_bytes(v4(addr))
}

fn in6(addr: &[u8; 16]) -> bindings::in6_addr {
    bindings::in6_addr {
        in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: *addr },
    }
}

/// Answers getsockopt(SOL_RDS, `name`) for `name` in the RDS_INFO range.
pub(super) fn get(net: NetRef, name: u32, value: UserSlice, len: usize) -> Result<GetOptResult> {
    if len > MAX_LEN {
        return Err(EINVAL);
    }
    let records = match name {
        bindings::RDS_INFO_COUNTERS => counters()?,
        bindings::RDS_INFO_CONNECTIONS => connections(net, false)?,
        bindings::RDS6_INFO_CONNECTIONS => connections(net, true)?,
        bindings::RDS_INFO_SEND_MESSAGES => conn_messages(net, false, false)?,
        bindings::RDS6_INFO_SEND_MESSAGES => conn_messages(net, false, true)?,
        bindings::RDS_INFO_RETRANS_MESSAGES => conn_messages(net, true, false)?,
        bindings::RDS6_INFO_RETRANS_MESSAGES => conn_messages(net, true, true)?,
        bindings::RDS_INFO_RECV_MESSAGES => recv_messages(net, false)?,
        bindings::RDS6_INFO_RECV_MESSAGES => recv_messages(net, true)?,
        bindings::RDS_INFO_SOCKETS => sockets(net, false)?,
        bindings::RDS6_INFO_SOCKETS => sockets(net, true)?,
        bindings::RDS_INFO_IB_CONNECTIONS => ib_connections(net, false)?,
        bindings::RDS6_INFO_IB_CONNECTIONS => ib_connections(net, true)?,
        bindings::RRDS_INFO_XRC_TARGETS => xrc_targets(net)?,
        // TCP internals (no such transport) and the unused numbers.
        _ => return Err(errno::enoprotoopt()),
    };
    let total = records.bytes.len();
    if total > len {
        return Ok(GetOptResult {
            ret: errno::enospc().to_errno(),
            len: total,
        });
    }
    value.writer().write_slice(&records.bytes)?;
    Ok(GetOptResult {
        ret: records.each as i32,
        len: total,
    })
}

fn xrc_targets(net: NetRef) -> Result<Records> {
    let mut r = Records::of::<bindings::rrds_info_xrc_target>();
    crate::xrc::info(net, &mut r.bytes)?;
    Ok(r)
}

fn v4(addr: &[u8; 16]) -> [u8; 4] {
    [addr[12], addr[13], addr[14], addr[15]]
}

fn is_v4(addr: &[u8; 16]) -> bool {
    Endpoint {
        addr: *addr,
        ..Endpoint::default()
    }
    .is_v4()
}

fn counters() -> Result<Records> {
    let mut r = Records::of::<bindings::rds_info_counter>();
    for (name, value) in stats::snapshot() {
        let mut rec = bindings::rds_info_counter {
            value,
            ..Default::default()
        };
        // NUL-terminated within the 32 bytes.
        let n = name.len().min(rec.name.len() - 1);
        rec.name[..n].copy_from_slice(&name.as_bytes()[..n]);
        r.push(rec.as_bytes())?;
    }
    Ok(r)
}

fn connections(net: NetRef, v6: bool) -> Result<Records> {
    let mut r = if v6 {
        Records::of::<bindings::rds6_info_connection>()
    } else {
        Records::of::<bindings::rds_info_connection>()
    };
    let mut result = Ok(());
    conn::for_each(net, |c| {
        if result.is_err() || (!v6 && !is_v4(&c.key.laddr)) {
            return;
        }
        let snap = c.snapshot();
        // Loopback connections are always up.
        let mut flags = match c.path.link_state() {
            LinkState::Down => 0,
            LinkState::Connecting => CONN_FLAG_CONNECTING,
            LinkState::Up => CONN_FLAG_CONNECTED,
        };
        if snap.transmitting {
            flags |= CONN_FLAG_SENDING;
        }
        // NUL-terminated within the 16 bytes.
        let mut transport = [0u8; 16];
        let t = c.transport.name();
        let n = t.len().min(transport.len() - 1);
        transport[..n].copy_from_slice(&t[..n]);
        result = if v6 {
            let rec = bindings::rds6_info_connection {
                next_tx_seq: snap.next_tx_seq,
                next_rx_seq: snap.next_rx_seq,
                laddr: in6(&c.key.laddr),
                faddr: in6(&c.key.faddr),
                transport,
                flags,
            };
            r.push(rec.as_bytes())
        } else {
            let rec = bindings::rds_info_connection {
                next_tx_seq: snap.next_tx_seq,
                next_rx_seq: snap.next_rx_seq,
                laddr: be32(&c.key.laddr),
                faddr: be32(&c.key.faddr),
                transport,
                flags,
                tos: c.key.tos,
            };
            r.push(rec.as_bytes())
        };
    });
    result.map(|()| r)
}

/// Offsets in `rds_info_rdma_connection` from `src_gid`, where the
/// fields after the two addresses start: the same in the IPv6 record.
mod ib_record {
    use crate::ffi::bindings::{
        rds6_info_rdma_connection as V6,
        rds_info_rdma_connection as V4, //
    };
    use core::mem::offset_of;

    const GIDS: usize = offset_of!(V4, src_gid);
    pub(super) const SRC_GID: usize = 0;
    pub(super) const DST_GID: usize = offset_of!(V4, dst_gid) - GIDS;
    pub(super) const MAX_SEND_WR: usize = offset_of!(V4, max_send_wr) - GIDS;
    pub(super) const MAX_RECV_WR: usize = offset_of!(V4, max_recv_wr) - GIDS;
    pub(super) const MAX_SEND_SGE: usize = offset_of!(V4, max_send_sge) - GIDS;
    pub(super) const MR_MAX: usize = offset_of!(V4, rdma_mr_max) - GIDS;
    pub(super) const MR_SIZE: usize = offset_of!(V4, rdma_mr_size) - GIDS;
    pub(super) const TOS: usize = offset_of!(V4, tos) - GIDS;
    pub(super) const SL: usize = offset_of!(V4, sl) - GIDS;
    pub(super) const V4_GIDS: usize = GIDS;
    pub(super) const V6_GIDS: usize = offset_of!(V6, src_gid);
    // Upstream's sizes, and the IPv6 record's tail laid out as the IPv4 one's.
    const _: () = assert!(size_of::<V4>() == 68 && size_of::<V6>() == 92);
    const _: () = assert!(offset_of!(V6, sl) - V6_GIDS == SL);
}

/// `rds_info_rdma_connection` / `rds6_info_rdma_connection`: addresses and
/// TOS always, the rest only while the connection is up (zeroes otherwise;
/// upstream leaves them unset). Both have padding before `cache_allocs`,
/// so they are written field by field into zeroed bytes, at the structs'
/// own offsets; `cache_allocs` (upstream's page cache) stays 0.
fn ib_connections(net: NetRef, v6: bool) -> Result<Records> {
    use ib_record::*;
    let mut r = if v6 {
        Records::of::<bindings::rds6_info_rdma_connection>()
    } else {
        Records::of::<bindings::rds_info_rdma_connection>()
    };
    let mut result = Ok(());
    conn::for_each(net, |c| {
        if !c.path.has_link() || result.is_err() || (!v6 && !is_v4(&c.key.laddr)) {
            return;
        }
        let mut rec = [0u8; size_of::<bindings::rds6_info_rdma_connection>()];
        let at = if v6 {
            rec[0..16].copy_from_slice(&c.key.laddr);
            rec[16..32].copy_from_slice(&c.key.faddr);
            V6_GIDS
        } else {
            rec[0..4].copy_from_slice(&v4(&c.key.laddr));
            rec[4..8].copy_from_slice(&v4(&c.key.faddr));
            V4_GIDS
        };
        let mut put = |offset: usize, bytes: &[u8]| {
            rec[at + offset..at + offset + bytes.len()].copy_from_slice(bytes);
        };
        // The TOS is the connection's, up or not (as upstream).
        put(TOS, &[c.key.tos]);
        if let Some(i) = c.path.ib_info() {
            put(SRC_GID, &i.src_gid);
            put(DST_GID, &i.dst_gid);
            put(MAX_SEND_WR, &i.max_send_wr.to_ne_bytes());
            put(MAX_RECV_WR, &i.max_recv_wr.to_ne_bytes());
            put(MAX_SEND_SGE, &i.max_send_sge.to_ne_bytes());
            put(MR_MAX, &i.mr_max.to_ne_bytes());
            put(MR_SIZE, &i.mr_pages.to_ne_bytes());
            put(SL, &[i.sl]);
        }
        result = r.push(&rec[..r.each]);
    });
    result.map(|()| r)
}

/// An `rds_info_message` or `rds6_info_message`.
enum MessageRecord {
    V4(bindings::rds_info_message),
    V6(bindings::rds6_info_message),
}

impl MessageRecord {
    fn new(
        v6: bool,
        header: &Header,
        laddr: &[u8; 16],
        faddr: &[u8; 16],
        lport: u16,
        fport: u16,
        tos: u8,
    ) -> Self {
        if v6 {
            Self::V6(bindings::rds6_info_message {
                seq: header.sequence,
                len: header.len,
                laddr: in6(laddr),
                faddr: in6(faddr),
                lport: lport.to_be(),
                fport: fport.to_be(),
                // Always 0 upstream.
                flags: 0,
                tos,
            })
        } else {
            Self::V4(bindings::rds_info_message {
                seq: header.sequence,
                len: header.len,
                laddr: be32(laddr),
                faddr: be32(faddr),
                lport: lport.to_be(),
                fport: fport.to_be(),
                flags: 0,
                tos,
            })
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Self::V4(rec) => rec.as_bytes(),
            Self::V6(rec) => rec.as_bytes(),
        }
    }
}

fn message_records(v6: bool) -> Records {
    if v6 {
        Records::of::<bindings::rds6_info_message>()
    } else {
        Records::of::<bindings::rds_info_message>()
    }
}

fn conn_messages(net: NetRef, sent: bool, v6: bool) -> Result<Records> {
    let mut r = message_records(v6);
    let mut result = Ok(());
    conn::for_each(net, |c| {
        if !v6 && !is_v4(&c.key.laddr) {
            return;
        }
        let mut records = KVVec::new();
        let mut collected: Result = Ok(());
        // Under the connection's spinlock: atomic allocations only.
        c.for_each_queued(sent, |q| {
            if collected.is_ok() {
                let rec = MessageRecord::new(
                    v6,
                    &q.header,
                    &c.key.laddr,
                    &c.key.faddr,
                    q.header.sport,
                    q.header.dport,
                    c.key.tos,
                );
                collected = records.push(rec, GFP_ATOMIC).map_err(Error::from);
            }
        });
        result = result.and(collected);
        for rec in records.iter() {
            if result.is_ok() {
                result = r.push(rec.as_bytes());
            }
        }
    });
    result.map(|()| r)
}

fn recv_messages(net: NetRef, v6: bool) -> Result<Records> {
    let mut r = message_records(v6);
    for sock in SOCKETS
        .lock()
        .iter()
        .flat_map(|t| t.iter())
        .filter(|s| s.net == net)
    {
        let Some(bound) = sock.endpoint() else {
            continue;
        };
        if !v6 && !bound.is_v4() {
            continue;
        }
        let records = {
            let mut recs = KVVec::new();
            let rx = sock.rx.lock();
            recs.reserve(rx.messages.len(), GFP_ATOMIC)?;
            for m in rx.messages.iter() {
                let rec = MessageRecord::new(
                    v6,
                    &m.header,
                    &bound.addr,
                    &m.from.addr,
                    m.header.dport,
                    m.header.sport,
                    0,
                );
                recs.push(rec, GFP_ATOMIC)?;
            }
            recs
        };
        for rec in records.iter() {
            r.push(rec.as_bytes())?;
        }
    }
    Ok(r)
}

/// An `rds_info_socket` or `rds6_info_socket`.
enum SocketRecord {
    V4(bindings::rds_info_socket),
    V6(bindings::rds6_info_socket),
}

impl SocketRecord {
    fn as_bytes(&self) -> &[u8] {
        match self {
            Self::V4(rec) => rec.as_bytes(),
            Self::V6(rec) => rec.as_bytes(),
        }
    }
}

fn socket_record(sock: &RdsSock, v6: bool) -> Option<SocketRecord> {
    let (bound, peer) = {
        let s = sock.state.lock();
        (s.bound, s.peer)
    };
    if !v6 && !bound.is_some_and(|b| b.is_v4()) {
        // RDS_INFO_SOCKETS lists only sockets bound to IPv4 addresses (upstream).
        return None;
    }
    let (sndbuf, rcvbuf, inum) = {
        let rx = sock.rx.lock();
        let skp = rx.sk?;
        // SAFETY: `rx.sk` is Some under the lock: release has not cleared it, so
        // the sock is valid (`RecvQueue` invariant).
        let sk = unsafe { skp.get() };
        ((sk.sndbuf() / 2) as u32, (sk.rcvbuf() / 2) as u32, sk.ino())
    };
    let bound = bound.unwrap_or_default();
    let peer = peer.unwrap_or_default();
    Some(if v6 {
        SocketRecord::V6(bindings::rds6_info_socket {
            sndbuf,
            bound_addr: in6(&bound.addr),
            connected_addr: in6(&peer.addr),
            bound_port: bound.port.to_be(),
            connected_port: peer.port.to_be(),
            rcvbuf,
            inum,
        })
    } else {
        SocketRecord::V4(bindings::rds_info_socket {
            sndbuf,
            bound_addr: be32(&bound.addr),
            connected_addr: be32(&peer.addr),
            bound_port: bound.port.to_be(),
            connected_port: peer.port.to_be(),
            rcvbuf,
            inum,
        })
    })
}

fn sockets(net: NetRef, v6: bool) -> Result<Records> {
    let mut r = if v6 {
        Records::of::<bindings::rds6_info_socket>()
    } else {
        Records::of::<bindings::rds_info_socket>()
    };
    for sock in SOCKETS
        .lock()
        .iter()
        .flat_map(|t| t.iter())
        .filter(|s| s.net == net)
    {
        if let Some(rec) = socket_record(sock, v6) {
            r.push(rec.as_bytes())?;
        }
    }
    Ok(r)
}
