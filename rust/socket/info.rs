// SPDX-License-Identifier: GPL-2.0

//! `RDS_INFO_*` getsockopt snapshots (net/rds/info.c and its producers),
//! with upstream's record layouts and sizing protocol: too small a buffer
//! gets `ENOSPC` and the length needed in optlen; success returns the size
//! of one record, with optlen set to the bytes written.

use kernel::{
    prelude::*,
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
    fn new(each: usize) -> Self {
        Self {
            bytes: KVVec::new(),
            each,
        }
    }

    fn push(&mut self, record: &[u8]) -> Result {
        self.bytes.extend_from_slice(record, GFP_KERNEL)?;
        Ok(())
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
    let mut r = Records::new(core::mem::size_of::<bindings::rrds_info_xrc_target>());
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
    let mut r = Records::new(40);
    for (name, value) in stats::snapshot() {
        let mut rec = [0u8; 40];
        let n = name.len().min(31);
        rec[..n].copy_from_slice(&name.as_bytes()[..n]);
        rec[32..].copy_from_slice(&value.to_ne_bytes());
        r.push(&rec)?;
    }
    Ok(r)
}

fn connections(net: NetRef, v6: bool) -> Result<Records> {
    let mut r = Records::new(if v6 { 65 } else { 42 });
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
        let mut name = [0u8; 16];
        let t = c.transport.name();
        name[..t.len().min(15)].copy_from_slice(&t[..t.len().min(15)]);
        let mut rec = [0u8; 65];
        rec[0..8].copy_from_slice(&snap.next_tx_seq.to_ne_bytes());
        rec[8..16].copy_from_slice(&snap.next_rx_seq.to_ne_bytes());
        let used = if v6 {
            rec[16..32].copy_from_slice(&c.key.laddr);
            rec[32..48].copy_from_slice(&c.key.faddr);
            rec[48..64].copy_from_slice(&name);
            rec[64] = flags;
            65
        } else {
            rec[16..20].copy_from_slice(&v4(&c.key.laddr));
            rec[20..24].copy_from_slice(&v4(&c.key.faddr));
            rec[24..40].copy_from_slice(&name);
            rec[40] = flags;
            rec[41] = c.key.tos;
            42
        };
        result = r.push(&rec[..used]);
    });
    result.map(|()| r)
}

/// `rds_info_rdma_connection` (68 bytes) / `rds6_info_rdma_connection` (92):
/// addresses and TOS always, the rest only while the connection is up
/// (zeroes otherwise; upstream leaves them unset).
fn ib_connections(net: NetRef, v6: bool) -> Result<Records> {
    let mut r = Records::new(if v6 { 92 } else { 68 });
    let mut result = Ok(());
    conn::for_each(net, |c| {
        if !c.path.has_link() || result.is_err() || (!v6 && !is_v4(&c.key.laddr)) {
            return;
        }
        let mut rec = [0u8; 92];
        let (at, used) = if v6 {
            rec[0..16].copy_from_slice(&c.key.laddr);
            rec[16..32].copy_from_slice(&c.key.faddr);
            (32, 92)
        } else {
            rec[0..4].copy_from_slice(&v4(&c.key.laddr));
            rec[4..8].copy_from_slice(&v4(&c.key.faddr));
            (8, 68)
        };
        // The TOS is the connection's, up or not (as upstream).
        rec[at + 52] = c.key.tos;
        if let Some(i) = c.path.ib_info() {
            rec[at..at + 16].copy_from_slice(&i.src_gid);
            rec[at + 16..at + 32].copy_from_slice(&i.dst_gid);
            rec[at + 32..at + 36].copy_from_slice(&i.max_send_wr.to_ne_bytes());
            rec[at + 36..at + 40].copy_from_slice(&i.max_recv_wr.to_ne_bytes());
            rec[at + 40..at + 44].copy_from_slice(&i.max_send_sge.to_ne_bytes());
            rec[at + 44..at + 48].copy_from_slice(&i.mr_max.to_ne_bytes());
            rec[at + 48..at + 52].copy_from_slice(&i.mr_pages.to_ne_bytes());
            // +52 tos (above), +53 sl, +56 cache_allocs (upstream's page cache: 0).
            rec[at + 53] = i.sl;
        }
        result = r.push(&rec[..used]);
    });
    result.map(|()| r)
}

/// An `rds_info_message` / `rds6_info_message`.
fn message_record(
    v6: bool,
    header: &Header,
    laddr: &[u8; 16],
    faddr: &[u8; 16],
    lport: u16,
    fport: u16,
    tos: u8,
) -> ([u8; 50], usize) {
    let mut rec = [0u8; 50];
    rec[0..8].copy_from_slice(&header.sequence.to_ne_bytes());
    rec[8..12].copy_from_slice(&header.len.to_ne_bytes());
    let at = if v6 {
        rec[12..28].copy_from_slice(laddr);
        rec[28..44].copy_from_slice(faddr);
        44
    } else {
        rec[12..16].copy_from_slice(&v4(laddr));
        rec[16..20].copy_from_slice(&v4(faddr));
        20
    };
    rec[at..at + 2].copy_from_slice(&lport.to_be_bytes());
    rec[at + 2..at + 4].copy_from_slice(&fport.to_be_bytes());
    // at + 4: flags, always 0 upstream.
    rec[at + 5] = tos;
    (rec, at + 6)
}

fn conn_messages(net: NetRef, sent: bool, v6: bool) -> Result<Records> {
    let mut r = Records::new(if v6 { 50 } else { 26 });
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
                let rec = message_record(
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
        for (rec, used) in records.iter() {
            if result.is_ok() {
                result = r.push(&rec[..*used]);
            }
        }
    });
    result.map(|()| r)
}

fn recv_messages(net: NetRef, v6: bool) -> Result<Records> {
    let mut r = Records::new(if v6 { 50 } else { 26 });
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
                let rec = message_record(
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
        for (rec, used) in records.iter() {
            r.push(&rec[..*used])?;
        }
    }
    Ok(r)
}

fn socket_record(sock: &RdsSock, v6: bool) -> Option<([u8; 52], usize)> {
    let (bound, peer) = {
        let s = sock.state.lock();
        (s.bound, s.peer)
    };
    if !v6 && !bound.is_some_and(|b| b.is_v4()) {
        // RDS_INFO_SOCKETS lists only sockets bound to IPv4 addresses (upstream).
        return None;
    }
    let (sndbuf, rcvbuf, ino) = {
        let rx = sock.rx.lock();
        let skp = rx.sk?;
        // SAFETY: `rx.sk` is Some under the lock: release has not cleared it, so
        // the sock is valid (`RecvQueue` invariant).
        let sk = unsafe { skp.get() };
        (sk.sndbuf() / 2, sk.rcvbuf() / 2, sk.ino())
    };
    let bound = bound.unwrap_or_default();
    let peer = peer.unwrap_or_default();
    let mut rec = [0u8; 52];
    rec[0..4].copy_from_slice(&(sndbuf as u32).to_ne_bytes());
    let at = if v6 {
        rec[4..20].copy_from_slice(&bound.addr);
        rec[20..36].copy_from_slice(&peer.addr);
        36
    } else {
        rec[4..8].copy_from_slice(&v4(&bound.addr));
        rec[8..12].copy_from_slice(&v4(&peer.addr));
        12
    };
    rec[at..at + 2].copy_from_slice(&bound.port.to_be_bytes());
    rec[at + 2..at + 4].copy_from_slice(&peer.port.to_be_bytes());
    rec[at + 4..at + 8].copy_from_slice(&(rcvbuf as u32).to_ne_bytes());
    rec[at + 8..at + 16].copy_from_slice(&ino.to_ne_bytes());
    Some((rec, at + 16))
}

fn sockets(net: NetRef, v6: bool) -> Result<Records> {
    let mut r = Records::new(if v6 { 52 } else { 28 });
    for sock in SOCKETS
        .lock()
        .iter()
        .flat_map(|t| t.iter())
        .filter(|s| s.net == net)
    {
        if let Some((rec, used)) = socket_record(sock, v6) {
            r.push(&rec[..used])?;
        }
    }
    Ok(r)
}
