// SPDX-License-Identifier: GPL-2.0

//! The socket end of the receive path: messages queued on a socket
//! ([`crate::incoming`] finds the socket), and recvmsg (`rds_recvmsg`).

use kernel::{
    prelude::*,
    sync::Arc,
    transmute::AsBytes, //
};

use super::{
    bind,
    BusyPoller,
    Incoming,
    RdsSock,
    RecvQueue, //
};
use crate::{
    addr::Endpoint,
    cong, errno,
    ffi::{
        bindings,
        net::{
            MsgHdr,
            NetRef,
            Sock, //
        },
        process, time,
    },
    fifo::Fifo,
    incoming::{
        trace_clock,
        BindTable,
        Direction,
        Path,
        Receiver, //
    },
    message::{
        Extension,
        Header,
        Message, //
    },
    stats::{
        self,
        Stat, //
    },
    wait::wait_until,
};
use kernel::task::MAX_SCHEDULE_TIMEOUT;

/// `struct rds_rdma_notify`: u64 token, s32 status, 4 bytes of padding.
const RDMA_NOTE_LEN: usize = 16;

/// The least a socket's receive queue may hold, in charged bytes, whatever
/// its SO_RCVBUF (see [`queue_limit`]).
const RECV_QUEUE_FLOOR: usize = 4 << 20;

/// How much a socket's receive queue holds at most, in charged bytes
/// ([`crate::message::charge`]): four times SO_RCVBUF's (doubled) value, at
/// least [`RECV_QUEUE_FLOOR`]. Congestion stops senders that honour it at
/// an eighth of that (upstream's threshold, half of SO_RCVBUF's value); what
/// reaches the limit comes from a peer that ignores our congestion map.
fn queue_limit(sk: &Sock) -> usize {
    sk.rcvbuf().saturating_mul(4).max(RECV_QUEUE_FLOOR)
}

impl RdsSock {
    /// Queues an incoming message. Below the queue's limit a message is never
    /// refused for lack of rcvbuf (upstream: the receive buffer only drives
    /// congestion). Process context: the queue grows outside its spinlock.
    ///
    /// Fails with `ENOMEM` if the queue could not grow, and with `ENOBUFS`
    /// for a loopback message past the queue's limit: the message is then
    /// not taken and stays with its sender. A peer's message past the limit
    /// is dropped: its sender ignored the congestion map, and refusing it
    /// would reset the link every socket to that peer shares.
    fn queue_incoming(&self, mut incoming: Incoming, dir: Direction, path: &Path) -> Result {
        let charge = crate::message::charge(incoming.header.len as usize);
        let mut rx = self.rx.lock();
        // The sock as of the last look, which the lock has been held since.
        let sk = loop {
            let Some(skp) = rx.sk else {
                stats::inc(Stat::RecvDropDeadSock);
                return Ok(());
            };
            // SAFETY: `rx.sk` is Some under the lock, held from here until the sock's
            // last use below, so release has not passed the point where it clears it;
            // the sock is valid (`RecvQueue` invariant).
            let sk = unsafe { skp.get() };
            if rx.bytes.saturating_add(charge) > queue_limit(sk) {
                stats::inc(Stat::RecvDropQueueFull);
                return match dir {
                    Direction::Loopback => Err(errno::enobufs()),
                    Direction::FromPeer => Ok(()),
                };
            }
            if rx.messages.has_room() {
                break sk;
            }
            let capacity = (rx.messages.capacity() * 2).max(8);
            drop(rx);
            let slots = Fifo::new_slots(capacity, GFP_KERNEL_ACCOUNT)?;
            rx = self.rx.lock();
            rx.messages.grow_into(slots);
        };
        if sk.flag(bindings::sock_flags_SOCK_RCVTSTAMP) {
            incoming.received_ns = Some(time::real_ns());
        }
        incoming.queued_ns = trace_clock();
        let len = incoming.header.len as usize;
        if rx.messages.push_back(incoming, GFP_ATOMIC).is_err() {
            // Unreachable: there is room.
            return Err(ENOMEM);
        }
        rx.bytes += charge;
        stats::add(Stat::RecvBytesAddedToSock, len as u64);
        stats::inc(Stat::RecvQueued);
        RdsSock::update_congestion(&mut rx, sk);
        let busy_polls = sk.busy_poll_usec() != 0;
        drop(rx);
        if busy_polls {
            self.note_busy_poller(path);
        }
        self.wake_all();
        Ok(())
    }

    /// A message came over `path`: recvmsg busy-polls it next (as upstream
    /// sockets record the NAPI id of their last packet).
    fn note_busy_poller(&self, path: &Path) {
        let Some(poller) = path.busy_poller() else {
            return;
        };
        let mut rx = self.rx.lock();
        if rx.busy_poller.as_ref().is_some_and(|p| p.same_as(&poller)) {
            return;
        }
        let old = rx.busy_poller.replace(poller);
        drop(rx);
        drop(old);
    }

    /// Whether recvmsg has something to report: a message or a notification.
    pub(super) fn readable(&self, rx: &RecvQueue) -> bool {
        !rx.messages.is_empty()
            || rx.cong_notify != 0
            || !rx.rdma_notes.is_empty()
            || !rx.conn_events.is_empty()
            || self.xrc_has_events()
    }
}

impl Receiver for RdsSock {
    fn mr_used(&self, rkey: u32) {
        RdsSock::mr_used(self, rkey);
    }

    fn deliver(
        &self,
        header: Header,
        from: Endpoint,
        message: Arc<Message>,
        seen_ns: u64,
        dir: Direction,
        path: &Path,
    ) -> Result {
        self.queue_incoming(
            Incoming {
                header,
                from,
                message,
                received_ns: None,
                seen_ns,
                queued_ns: 0,
            },
            dir,
            path,
        )
    }
}

/// The bind table, as the receive path finds sockets in it.
pub(crate) struct BoundSockets;

impl BindTable for BoundSockets {
    fn find(&self, net: NetRef, to: &Endpoint) -> Option<Arc<dyn Receiver>> {
        bind::find(net, to).map(|sock| -> Arc<dyn Receiver> { sock })
    }
}

/// `struct rds_cmsg_rx_trace` as the cmsg carries it.
fn rx_trace_cmsg(count: u8, pos: [u8; 3], stamps: [u64; 4]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out[0] = count;
    out[1..4].copy_from_slice(&pos);
    for i in 0..usize::from(count).min(3) {
        let p = usize::from(pos[i]).min(2);
        let delta = stamps[p + 1].saturating_sub(stamps[p]);
        out[8 + 8 * i..16 + 8 * i].copy_from_slice(&delta.to_ne_bytes());
    }
    out
}

/// What recvmsg keeps of the message at the head of the receive queue, read
/// under the queue's lock: the message, and the socket's receive options as
/// they were then.
struct Taken {
    header: Header,
    from: Endpoint,
    message: Arc<Message>,
    /// Wall-clock receive time in ns, if SO_TIMESTAMP was on when it arrived.
    received_ns: Option<u64>,
    /// Trace clock readings for `RDS_CMSG_RXPATH_LATENCY`: header seen and
    /// receive started (both when seen), queued, and read (set when reported).
    stamps: [u64; 4],
    /// `SO_RDS_MSG_RXPATH_LATENCY`: how many trace points, and which.
    trace_count: u8,
    trace_pos: [u8; 3],
    /// The bound IPv6 scope id, which IPv6 sources are reported with.
    scope: u32,
}

impl Taken {
    /// The message at the head of `rx`, if there is one.
    fn of_head(rx: &RecvQueue) -> Option<Self> {
        let head = rx.messages.front()?;
        Some(Self {
            header: head.header,
            from: head.from,
            message: head.message.clone(),
            received_ns: head.received_ns,
            stamps: [head.seen_ns, head.seen_ns, head.queued_ns, 0],
            trace_count: rx.rx_trace_count,
            trace_pos: rx.rx_trace_pos,
            scope: rx.bound_scope,
        })
    }
}

/// recvmsg (`rds_recvmsg`): reports a pending notification, or reads the
/// message at the head of the receive queue with its control messages and
/// source address. Returns the bytes copied, or with `MSG_TRUNC` the
/// message's whole length.
pub(super) fn recvmsg(
    state: &RdsSock,
    sk: &Sock,
    msg: &mut MsgHdr,
    len: usize,
    flags: u32,
) -> Result<usize> {
    if flags & bindings::MSG_OOB != 0 {
        return Ok(0);
    }
    if flags & bindings::MSG_ERRQUEUE != 0 {
        // RDS never queues anything on the error queue.
        return Err(EAGAIN);
    }
    let peek = flags & bindings::MSG_PEEK != 0;
    let Some(taken) = take_next(state, sk, msg, len, peek, recv_timeout(sk, flags))? else {
        // A notification went out instead, as a control message.
        return Ok(0);
    };
    let total = taken.message.len();
    let copied = total.min(len);
    if copied < total {
        msg.set_truncated();
    }
    // Control messages in upstream's `rds_cmsg_recv` order.
    put_rdma_dest(msg, &taken.header)?;
    put_timestamp(sk, msg, taken.received_ns)?;
    put_rx_trace(msg, &taken)?;
    set_source_name(msg, &taken);
    Ok(if flags & bindings::MSG_TRUNC != 0 {
        total
    } else {
        copied
    })
}

/// How long recvmsg may wait, in jiffies: not at all with `MSG_DONTWAIT`,
/// else the socket's SO_RCVTIMEO.
fn recv_timeout(sk: &Sock, flags: u32) -> isize {
    if flags & bindings::MSG_DONTWAIT != 0 {
        0
    } else {
        sk.rcvtimeo()
    }
}

/// Waits up to `timeo` for something to read, then reads it: a pending
/// notification goes out as a control message (`Ok(None)`); otherwise the
/// message at the queue's head is copied into `msg` (at most `len` bytes)
/// and, unless `peek`, dequeued. Looks again when another reader wins a race.
fn take_next(
    state: &RdsSock,
    sk: &Sock,
    msg: &mut MsgHdr,
    len: usize,
    peek: bool,
    mut timeo: isize,
) -> Result<Option<Taken>> {
    let mut busy_polled = false;
    loop {
        let mut rx = state.rx.lock();
        if !busy_polled && !state.readable(&rx) {
            busy_polled = true;
            if let Some(poller) = rx.busy_poller.clone() {
                drop(rx);
                busy_poll(state, sk, &poller, timeo);
                continue;
            }
        }
        wait_until(&state.wait, &mut rx, &mut timeo, |r| state.readable(r))?;
        if let Some(note) = take_notification(state, &mut rx, msg, peek) {
            drop(rx);
            if report_notification(state, msg, note, peek)? {
                return Ok(None);
            }
            continue;
        }
        let Some(taken) = Taken::of_head(&rx) else {
            continue;
        };
        drop(rx);
        // Copy first, dequeue after: a fault leaves the message queued (upstream).
        let left = msg.data_left();
        let copied = taken.message.len().min(len);
        taken.message.copy_to_user(msg, copied)?;
        stats::add(Stat::CopyToUser, copied as u64);
        if peek || dequeue_head(state, sk, &taken.message) {
            return Ok(Some(taken));
        }
        // Another reader took it first: look again (upstream's deliver
        // race), into the caller's buffer from where this copy began.
        msg.rewind_to(left);
        stats::inc(Stat::RecvDeliverRaced);
    }
}

/// Receive completions one busy poll hands on at most before it looks
/// whether they brought something to read.
const BUSY_POLL_BUDGET: u32 = 8;

/// `SO_BUSY_POLL`: polls the receive CQ the socket's last message came
/// through until something is readable, for up to the socket's busy-poll
/// time and at most `timeo` jiffies (its `SO_RCVTIMEO`; once if 0: a
/// non-blocking read), or until a signal comes or the CPU is wanted
/// elsewhere. What the poll completes is delivered as the
/// completion's work item would have, without waiting for it to be
/// scheduled and for this task to be woken.
fn busy_poll(state: &RdsSock, sk: &Sock, poller: &BusyPoller, timeo: isize) {
    let mut usec = sk.busy_poll_usec();
    if usec == 0 {
        return;
    }
    let once = timeo == 0;
    if timeo != MAX_SCHEDULE_TIMEOUT {
        usec = usec.min(time::jiffies_to_usecs(timeo.max(0) as c_ulong));
    }
    stats::inc(Stat::RecvBusyPolls);
    let end = time::monotonic_ns().saturating_add(u64::from(usec) * 1000);
    let spin = poller.spin();
    loop {
        let polled = spin.poll(BUSY_POLL_BUDGET);
        if polled > 0 {
            stats::add(Stat::RecvBusyPolled, polled as u64);
        }
        if once
            || state.readable(&state.rx.lock())
            || time::monotonic_ns() >= end
            || kernel::current!().signal_pending()
            || process::need_resched()
        {
            return;
        }
        process::cpu_relax();
    }
}

/// A busy poll for poll() and select() (`net.core.busy_poll`), as recvmsg
/// spins, if the socket busy-polls (`SO_BUSY_POLL`) and has nothing to
/// read. They call again while their own busy-poll time lasts.
pub(super) fn busy_poll_for_poll(state: &RdsSock, sk: &Sock) {
    let poller = {
        let rx = state.rx.lock();
        if state.readable(&rx) {
            return;
        }
        rx.busy_poller.clone()
    };
    if let Some(poller) = poller {
        // poll() bounds its own wait; the spin is bounded by SO_BUSY_POLL.
        busy_poll(state, sk, &poller, MAX_SCHEDULE_TIMEOUT);
    }
}

/// A notification recvmsg reports instead of a message.
enum Notification {
    /// An RDMA outcome that does not fit in the caller's control buffer.
    NoRoom,
    /// An RDMA outcome (`RDS_CMSG_RDMA_STATUS`): token, status.
    RdmaStatus(u64, i32),
    /// Ports (mod 64) possibly uncongested (`RDS_CMSG_CONG_UPDATE`).
    CongUpdate(u64),
    /// XRC events are pending, taken from their registrations once the
    /// receive queue's lock is dropped.
    XrcEvent,
    /// A connection's link changed (`RRDS_CMSG_CONN_EVENT`).
    ConnEvent(bindings::rrds_conn_event),
}

/// The notification to report, if any, taken off the receive queue (`rx`,
/// locked) unless `peek`.
fn take_notification(
    state: &RdsSock,
    rx: &mut RecvQueue,
    msg: &MsgHdr,
    peek: bool,
) -> Option<Notification> {
    // RDMA outcomes first, as upstream's `rds_notify_queue_get`.
    if let Some(&(token, status)) = rx.rdma_notes.front() {
        if !msg.cmsg_fits(RDMA_NOTE_LEN) {
            // No room for it: it stays queued, as upstream's.
            return Some(Notification::NoRoom);
        }
        if !peek {
            rx.rdma_notes.pop_front();
        }
        return Some(Notification::RdmaStatus(token, status));
    }
    if rx.cong_notify != 0 {
        let notify = core::mem::take(&mut rx.cong_notify);
        return Some(Notification::CongUpdate(notify));
    }
    if let Some(&event) = rx.conn_events.front() {
        if !msg.cmsg_fits(core::mem::size_of::<bindings::rrds_conn_event>()) {
            // No room for it: it stays queued.
            return Some(Notification::NoRoom);
        }
        if !peek {
            rx.conn_events.pop_front();
        }
        return Some(Notification::ConnEvent(event));
    }
    if state.xrc_has_events() {
        return Some(Notification::XrcEvent);
    }
    None
}

/// Reports `notification` to the caller as a control message, without the
/// receive queue's lock. Returns false if another reader took the XRC event
/// first.
fn report_notification(
    state: &RdsSock,
    msg: &mut MsgHdr,
    notification: Notification,
    peek: bool,
) -> Result<bool> {
    match notification {
        Notification::NoRoom => msg.set_control_truncated(),
        Notification::RdmaStatus(token, status) => {
            let mut note = [0u8; RDMA_NOTE_LEN];
            note[..8].copy_from_slice(&token.to_ne_bytes());
            note[8..12].copy_from_slice(&status.to_ne_bytes());
            msg.put_cmsg(bindings::SOL_RDS, bindings::RDS_CMSG_RDMA_STATUS, &note)?;
        }
        Notification::CongUpdate(notify) => msg.put_cmsg(
            bindings::SOL_RDS,
            bindings::RDS_CMSG_CONG_UPDATE,
            &notify.to_ne_bytes(),
        )?,
        Notification::ConnEvent(event) => msg.put_cmsg(
            bindings::SOL_RDS,
            bindings::RRDS_CMSG_CONN_EVENT,
            event.as_bytes(),
        )?,
        Notification::XrcEvent => {
            // Another reader may have taken it: look again.
            let Some(event) = state.xrc_take_event(peek) else {
                return Ok(false);
            };
            msg.put_cmsg(
                bindings::SOL_RDS,
                bindings::RRDS_CMSG_XRC_EVENT,
                event.as_bytes(),
            )?;
        }
    }
    Ok(true)
}

/// Dequeues the message at the head of the receive queue if it is still
/// `message`, and gives back its charge. Returns false if another reader
/// dequeued it first.
fn dequeue_head(state: &RdsSock, sk: &Sock, message: &Arc<Message>) -> bool {
    let mut rx = state.rx.lock();
    let still_head = rx
        .messages
        .front()
        .is_some_and(|h| Arc::ptr_eq(&h.message, message));
    if !still_head {
        return false;
    }
    let total = message.len();
    let gone = rx.messages.pop_front();
    rx.bytes = rx.bytes.saturating_sub(crate::message::charge(total));
    stats::add(Stat::RecvBytesFreedFromSock, total as u64);
    let cleared = RdsSock::update_congestion(&mut rx, sk);
    drop(rx);
    drop(gone);
    if cleared {
        cong::local_port_cleared(state.net);
    }
    stats::inc(Stat::RecvDelivered);
    true
}

/// `RDS_CMSG_RDMA_DEST`: the peer announced an MR of its own.
fn put_rdma_dest(msg: &mut MsgHdr, header: &Header) -> Result {
    if let Some((rkey, offset)) = header.extensions().find_map(|e| match e {
        Extension::RdmaDest { rkey, offset } => Some((rkey, offset)),
        _ => None,
    }) {
        let cookie = crate::mr::make_cookie(rkey, offset);
        msg.put_cmsg(
            bindings::SOL_RDS,
            bindings::RDS_CMSG_RDMA_DEST,
            &cookie.to_ne_bytes(),
        )?;
    }
    Ok(())
}

/// SO_TIMESTAMP: when the message arrived, if the option was on then and
/// still is.
fn put_timestamp(sk: &Sock, msg: &mut MsgHdr, received_ns: Option<u64>) -> Result {
    if let Some(ns) = received_ns {
        if sk.flag(bindings::sock_flags_SOCK_RCVTSTAMP) {
            let (sec, usec) = (ns / 1_000_000_000, (ns % 1_000_000_000) / 1000);
            let mut tv = [0u8; 16];
            tv[..8].copy_from_slice(&sec.to_ne_bytes());
            tv[8..].copy_from_slice(&usec.to_ne_bytes());
            let kind = if sk.flag(bindings::sock_flags_SOCK_TSTAMP_NEW) {
                bindings::SO_TIMESTAMP_NEW
            } else {
                bindings::SO_TIMESTAMP_OLD
            };
            msg.put_cmsg(bindings::SOL_SOCKET, kind, &tv)?;
        }
    }
    Ok(())
}

/// `RDS_CMSG_RXPATH_LATENCY`, if the socket traces the receive path: the
/// trace points' deltas, up to now.
fn put_rx_trace(msg: &mut MsgHdr, taken: &Taken) -> Result {
    if taken.trace_count != 0 {
        let mut stamps = taken.stamps;
        stamps[3] = trace_clock();
        msg.put_cmsg(
            bindings::SOL_RDS,
            bindings::RDS_CMSG_RXPATH_LATENCY,
            &rx_trace_cmsg(taken.trace_count, taken.trace_pos, stamps),
        )?;
    }
    Ok(())
}

/// Tells the caller where the message came from (`msg_name`).
fn set_source_name(msg: &mut MsgHdr, taken: &Taken) {
    // The source port is the one the header carries (a pong comes from port 0);
    // an IPv6 source gets the receiver's scope id, as upstream.
    let from = Endpoint {
        port: taken.header.sport,
        scope: if taken.from.is_v4() { 0 } else { taken.scope },
        ..taken.from
    };
    let mut name = [0u8; 28];
    let name_len = from.write_sockaddr(&mut name);
    msg.set_name(&name[..name_len]);
}
