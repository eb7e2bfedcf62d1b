// SPDX-License-Identifier: GPL-2.0

//! Connections: the ordered, sequenced message stream between a local and a
//! remote address in one network namespace, over one transport.
//!
//! A connection is keyed by (namespace, local address, remote address, TOS,
//! scope), as upstream's `rds_conn_create`. Every message queued on it takes
//! the next sequence number and stays queued until the transport reports it
//! acknowledged: the queue's first `sent` entries are upstream's retransmit
//! list, the rest its send queue. One thread at a time transmits, in sequence
//! order. Connections live until their namespace exits or the module unloads.

mod monitor;
mod table;

use core::sync::atomic::{
    AtomicU64,
    AtomicUsize,
    Ordering::Relaxed, //
};
use kernel::{
    prelude::*,
    sync::{
        aref::ARef,
        Arc,
        SpinLock, //
    },
    task::Task,
};

use crate::{
    cong::{
        self,
        CongMap, //
    },
    fifo::Fifo,
    incoming,
    message::{
        Header,
        Message, //
    },
    stats::{
        self,
        Stat, //
    },
    transport::{
        Conn,
        Direction,
        LinkChange,
        Path,
        Transport,
        Xmit, //
    },
};

pub(crate) use crate::transport::{
    ConnKey,
    ConnSnapshot, //
};
pub(crate) use monitor::{
    add_monitor,
    remove_monitor,
    ConnMonitor, //
};
pub(crate) use table::{
    count,
    for_each,
    forget_net,
    get,
    put, //
};

/// Pongs a connection holds unacknowledged at most: a peer that pings and
/// never acknowledges cannot make us queue answers without bound (upstream
/// queues every one). Pings past it get no answer, as pings to a congested
/// port get none.
pub(crate) const MAX_QUEUED_PONGS: usize = 64;

/// Whoever a queued message is charged to (a socket's send buffer).
pub(crate) trait SendOwner: Send + Sync {
    /// `len` bytes of the owner's are acknowledged or dropped. Process context.
    fn send_completed(&self, len: usize);
    /// The user task that last sent through the owner, if one is known: it
    /// can connect for the owner's queued messages (iWARP).
    fn sender(&self) -> Option<ARef<Task>>;
}

/// A message on a connection's queue.
pub(crate) struct Outgoing {
    pub(crate) header: Header,
    pub(crate) message: Arc<Message>,
    /// The socket charged for it (`None` for pongs): its send buffer is
    /// credited when the message is acknowledged or cancelled.
    pub(crate) owner: Option<Arc<dyn SendOwner>>,
}

impl Outgoing {
    fn is_owned_by(&self, owner: &dyn SendOwner) -> bool {
        self.owner
            .as_ref()
            .is_some_and(|o| core::ptr::addr_eq(&**o, owner))
    }

    /// Returns the send-buffer charge to the owner, or, for a pong, its
    /// place among `conn`'s queued pongs. Process context: the owner's last
    /// reference may go with `self`.
    fn release(self, conn: &Connection) {
        match &self.owner {
            Some(owner) => owner.send_completed(crate::message::charge(self.header.len as usize)),
            None => {
                conn.pongs.fetch_sub(1, Relaxed);
            }
        }
    }
}

/// A connection's queue and sequence state.
///
/// # Invariants
///
/// `sent <= queue.len()`; queue entries are in increasing sequence order.
struct ConnState {
    next_tx_seq: u64,
    next_rx_seq: u64,
    queue: Fifo<Outgoing>,
    /// Entries at the front already handed to the transport (not yet acked).
    sent: usize,
    /// A thread is transmitting (upstream's `RDS_IN_XMIT`).
    transmitting: bool,
    /// Another `xmit` found one running since its last attempt began: the
    /// transport may have become ready meanwhile, so it must try once more
    /// before it stops (upstream's `cp_send_gen` check).
    xmit_again: bool,
}

/// One connection.
#[pin_data]
pub(crate) struct Connection {
    pub(crate) key: ConnKey,
    pub(crate) transport: &'static dyn Transport,
    /// The congestion map of the remote address (upstream's `c_fcong`).
    pub(crate) fcong: Arc<CongMap>,
    /// The transport's own state of the connection (IB's path).
    pub(crate) path: Path,
    /// Pongs queued and not yet acknowledged (see [`MAX_QUEUED_PONGS`]).
    pongs: AtomicUsize,
    /// Times the transport lost the link ([`Connection::reset_for_retransmit`],
    /// which counts under the queue lock): a message taken from the queue
    /// before a reset must not go out after it, ahead of the retransmissions
    /// (see [`Transport::xmit`]). An atomic, so that the transport's check
    /// costs no lock; the locks that order a reset before the next link's
    /// rings make the count visible there.
    resets: AtomicU64,
    #[pin]
    state: SpinLock<ConnState>,
}

/// Initialises the connection table and the link-change monitors. Call
/// once, in module init.
pub(crate) fn init(m: &crate::ffi::global::ModuleInit) {
    table::init(m);
    monitor::init(m);
}

/// Frees the tables' buffers. Call once, at unload, after the last connection.
pub(crate) fn release_tables() {
    table::release();
    monitor::release();
}

/// What RDS_INFO reports of a queued message.
pub(crate) struct QueuedSnapshot {
    pub(crate) header: Header,
}

impl Connection {
    /// Queues `header`/`message` for `owner` with the next sequence number and
    /// returns the header as queued. The caller transmits with [`Self::xmit`].
    pub(crate) fn queue(
        &self,
        mut header: Header,
        message: Arc<Message>,
        owner: Option<Arc<dyn SendOwner>>,
    ) -> Result<Header> {
        let mut st = self.state.lock();
        // Grow the queue outside the spinlock, so a send never fails for want of
        // an atomic allocation; a failure here uses no sequence number.
        while !st.queue.has_room() {
            let capacity = (st.queue.capacity() * 2).max(8);
            drop(st);
            let slots = Fifo::new_slots(capacity, GFP_KERNEL_ACCOUNT)?;
            st = self.state.lock();
            st.queue.grow_into(slots);
        }
        header.sequence = st.next_tx_seq;
        if owner.is_none() {
            if self.pongs.load(Relaxed) >= MAX_QUEUED_PONGS {
                stats::inc(Stat::SendPongDropped);
                return Err(crate::errno::enobufs());
            }
            self.pongs.fetch_add(1, Relaxed);
        }
        let out = Outgoing {
            header,
            message,
            owner,
        };
        if let Err(out) = st.queue.push_back(out, GFP_ATOMIC) {
            drop(st);
            // Unreachable with room reserved; never drop an owner under the
            // lock. The caller credits the owner's charge.
            if out.owner.is_none() {
                self.pongs.fetch_sub(1, Relaxed);
            }
            drop(out);
            return Err(ENOMEM);
        }
        st.next_tx_seq += 1;
        stats::inc(Stat::SendQueued);
        Ok(header)
    }

    /// Transmits queued messages, in order, unless another thread already is
    /// (it will send ours too). Process context.
    pub(crate) fn xmit(&self) {
        let mut st = self.state.lock();
        if st.transmitting {
            st.xmit_again = true;
            stats::inc(Stat::SendLockContention);
            return;
        }
        st.transmitting = true;
        loop {
            st.xmit_again = false;
            let sent = st.sent;
            let Some(next) = st.queue.get(sent) else {
                break;
            };
            let header = next.header;
            let message = next.message.clone();
            let resets = self.resets.load(Relaxed);
            // It joins the retransmit list before it is handed over, as upstream.
            st.sent += 1;
            drop(st);
            crate::hooks::XMIT_POST_HOLD.pause();
            let taken = self.transport.can_send(self)
                && self.transport.xmit(self, resets, &header, &message) == Xmit::Taken;
            if !taken && crate::hooks::XMIT_HOLD.take() {
                self.hold_until_met();
            }
            st = self.state.lock();
            if !taken {
                // Not (wholly) handed over: back to the send queue, unless a cancel
                // or a reset took it meanwhile.
                let at = st.queue.position(|o| o.header.sequence == header.sequence);
                if at.is_some_and(|i| i + 1 == st.sent) {
                    st.sent -= 1;
                }
                // The transport calls `xmit` when it can take more; if that call
                // came while this attempt ran, it returned at once, and only this
                // thread can send what it would have.
                if st.xmit_again {
                    stats::inc(Stat::SendLockQueueRaced);
                    stats::inc(Stat::SendImmediateRetry);
                    continue;
                }
                // The transport's call resumes it (upstream's delayed send work).
                stats::inc(Stat::SendDelayedRetry);
                break;
            }
        }
        st.transmitting = false;
    }

    /// The `xmit_hold` test knob: keeps this refused attempt open, up to
    /// 10 s, until another `xmit` call has found it (as the transport's,
    /// when a link comes up or a completion frees the ring, may).
    fn hold_until_met(&self) {
        crate::wait::poll_until(10_000, || self.state.lock().xmit_again);
    }

    /// A message arrived on this connection: the receive path checks it,
    /// answers pings and queues it on its socket ([`incoming::arrived`]).
    /// Process context.
    pub(crate) fn arrived(&self, dir: Direction, header: Header, message: Arc<Message>) -> Result {
        incoming::arrived(self, dir, header, message)
    }

    /// The peer's congestion map arrived (a message of `FLAG_CONG_BITMAP`):
    /// the bits of its ports, which our senders to it check. Process context.
    pub(crate) fn peer_cong_map(&self, message: &Message) -> Result {
        // Every map a peer sends is an update (upstream's `rds_cong_map_updated`).
        stats::inc(Stat::CongUpdateReceived);
        if self.fcong.apply_message(message)? {
            cong::notify_monitors(self.key.net);
        }
        Ok(())
    }

    /// Our congestion map of the local address as a message, if the address
    /// has one: a new link sends it first, as upstream does. Process context.
    pub(crate) fn local_cong_message(&self) -> Option<Arc<Message>> {
        cong::find(self.key.net, &self.key.laddr, cong::Side::Local)?
            .to_message()
            .ok()
    }

    /// The transport has delivered everything up to `seq`: release those
    /// messages. Process context.
    /// Also after a reset (the peer's connect data acknowledges what it got
    /// before the link went): messages handed to a link are then flagged
    /// RETRANSMITTED.
    pub(crate) fn drop_acked(&self, seq: u64) {
        loop {
            let acked = {
                let mut st = self.state.lock();
                match st.queue.front() {
                    Some(out)
                        if out.header.sequence <= seq
                            && (st.sent > 0
                                || out.header.flags & crate::message::flags::RETRANSMITTED
                                    != 0) =>
                    {
                        st.sent = st.sent.saturating_sub(1);
                        st.queue.pop_front()
                    }
                    _ => None,
                }
            };
            let Some(out) = acked else {
                break;
            };
            stats::inc(Stat::SendDropAcked);
            out.release(self);
        }
    }

    /// Releases a message that was handed over but never sent to the peer (a
    /// silent RDMA operation's, once the operation completed): no ack will
    /// come for it. Process context.
    pub(crate) fn release_unsent(&self, message: &Arc<Message>) {
        if let Some(out) = self.remove_first(|out| Arc::ptr_eq(&out.message, message)) {
            stats::inc(Stat::SendDropAcked);
            out.release(self);
        }
    }

    /// Removes the messages of `owner` (every owner if `None`) for which
    /// `matches` holds, sent or not, releasing their charge. Process context.
    pub(crate) fn cancel(
        &self,
        owner: Option<&dyn SendOwner>,
        mut matches: impl FnMut(&Header) -> bool,
    ) {
        while let Some(out) = self
            .remove_first(|out| owner.is_none_or(|o| out.is_owned_by(o)) && matches(&out.header))
        {
            if let Some(op) = out.message.rdma() {
                op.canceled();
            }
            out.release(self);
        }
    }

    /// Takes the first queued message that `matches` out of the queue
    /// (handed over or not). Released by the caller, outside the lock.
    fn remove_first(&self, matches: impl FnMut(&Outgoing) -> bool) -> Option<Outgoing> {
        let mut st = self.state.lock();
        let i = st.queue.position(matches)?;
        if i < st.sent {
            st.sent -= 1;
        }
        st.queue.remove(i)
    }

    /// The transport lost the link: everything handed over but not
    /// acknowledged goes back to the send queue, flagged RETRANSMITTED
    /// (upstream's `rds_send_path_reset`), to be sent again in order.
    /// `also` is a message the transport posted (some of) while it was not
    /// counted as handed over (upstream has no such window).
    pub(crate) fn reset_for_retransmit(&self, also: Option<u64>) {
        self.drop_posted_rdma();
        let mut st = self.state.lock();
        let sent = st.sent;
        for i in 0..st.queue.len() {
            let Some(out) = st.queue.get_mut(i) else {
                break;
            };
            if i < sent || also == Some(out.header.sequence) {
                out.header.flags |= crate::message::flags::RETRANSMITTED;
            } else if also.is_none_or(|seq| out.header.sequence > seq) {
                // Sequences increase along the queue: nothing further matches.
                break;
            }
        }
        st.sent = 0;
        self.resets.fetch_add(1, Relaxed);
    }

    /// The link failed: a message whose RDMA operation was posted (on that
    /// link, or an earlier one) is not sent again, since its data must not
    /// arrive without the RDMA having run. It is dropped whole and the op
    /// reported `RDS_RDMA_DROPPED` if it had no outcome yet, as upstream's
    /// `rds_send_xmit` does with retransmitted RDMA messages.
    fn drop_posted_rdma(&self) {
        while let Some(out) =
            self.remove_first(|out| out.message.rdma().is_some_and(|op| op.was_posted()))
        {
            if let Some(op) = out.message.rdma() {
                op.dropped();
            }
            out.release(self);
        }
    }

    /// The peer lost its connection state (rrds was reloaded there, or its
    /// namespace went; a connection resumed after its namespace's last
    /// socket closed keeps its incarnation, see `Resume`) and connected
    /// again: drop what was handed to its earlier incarnation, whose sockets
    /// are gone, and accept its sequence numbers afresh. Messages never
    /// handed over stay queued.
    pub(crate) fn peer_restarted(&self) {
        // Entries before `from` are known not to be flagged; each is released
        // outside the lock (its owner's last reference may go with it).
        let mut from = 0;
        loop {
            let removed = {
                let mut st = self.state.lock();
                st.next_rx_seq = 0;
                let flagged =
                    |out: &Outgoing| out.header.flags & crate::message::flags::RETRANSMITTED != 0;
                let at = (from..st.queue.len()).find(|&i| st.queue.get(i).is_some_and(flagged));
                match at {
                    Some(i) => {
                        if i < st.sent {
                            st.sent -= 1;
                        }
                        from = i;
                        st.queue.remove(i)
                    }
                    None => None,
                }
            };
            match removed {
                Some(out) => {
                    stats::inc(Stat::IbPeerRestartDrops);
                    // Its operation did not run on a link that failed (that one
                    // went with the reset): one taken from the queue while the
                    // link failed, and not posted, still waits for its outcome.
                    if let Some(op) = out.message.rdma() {
                        op.dropped();
                    }
                    out.release(self);
                }
                None => break,
            }
        }
    }

    /// The next sequence numbers to send and to receive: unchanged while
    /// the connection carries nothing (the IB idle watch).
    pub(crate) fn sequences(&self) -> (u64, u64) {
        let st = self.state.lock();
        (st.next_tx_seq, st.next_rx_seq)
    }

    /// Whether anything waits to be sent or acknowledged.
    pub(crate) fn has_queued(&self) -> bool {
        !self.state.lock().queue.is_empty()
    }

    /// Nothing is queued or being transmitted.
    fn is_idle(&self) -> bool {
        let st = self.state.lock();
        st.queue.is_empty() && !st.transmitting
    }

    /// Receive-side sequence filter (upstream's `rds_recv_incoming` step 1):
    /// false if the message is an old retransmission to drop. A message let
    /// through counts as received only once the receive path has taken it
    /// ([`Self::received_sequence`]): one it could not queue comes again.
    /// A connection's receives are serialized (its link's completion
    /// context, or the loopback sender holding `transmitting`), so nothing
    /// comes between the two.
    pub(crate) fn wants_sequence(&self, header: &Header) -> bool {
        let st = self.state.lock();
        if header.sequence < st.next_rx_seq
            && header.flags & crate::message::flags::RETRANSMITTED != 0
        {
            stats::inc(Stat::RecvDropOldSeq);
            return false;
        }
        true
    }

    /// The receive path took the message of `header`: queued it, answered it
    /// or dropped it for good.
    pub(crate) fn received_sequence(&self, header: &Header) {
        // The peer's number: wraps as upstream's does, never panics.
        self.state.lock().next_rx_seq = header.sequence.wrapping_add(1);
    }

    /// Whether messages wait to be handed to the transport.
    pub(crate) fn has_unsent(&self) -> bool {
        let st = self.state.lock();
        st.sent < st.queue.len()
    }

    pub(crate) fn snapshot(&self) -> ConnSnapshot {
        let st = self.state.lock();
        ConnSnapshot {
            next_tx_seq: st.next_tx_seq,
            next_rx_seq: st.next_rx_seq,
            transmitting: st.transmitting,
            queued: st.queue.len(),
            sent: st.sent,
        }
    }

    /// Calls `f` on each queued message: the retransmit list if `sent`, else
    /// the messages not yet handed to the transport. `f` runs under a spinlock.
    pub(crate) fn for_each_queued(&self, sent: bool, mut f: impl FnMut(QueuedSnapshot)) {
        let st = self.state.lock();
        let range = if sent {
            0..st.sent
        } else {
            st.sent..st.queue.len()
        };
        for i in range {
            if let Some(out) = st.queue.get(i) {
                f(QueuedSnapshot { header: out.header });
            }
        }
    }
}

impl Conn for Connection {
    fn key(&self) -> &ConnKey {
        &self.key
    }

    fn transport(&self) -> &'static dyn Transport {
        self.transport
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn xmit(&self) {
        Connection::xmit(self)
    }

    fn arrived(&self, dir: Direction, header: Header, message: Arc<Message>) -> Result {
        Connection::arrived(self, dir, header, message)
    }

    fn peer_cong_map(&self, message: &Message) -> Result {
        Connection::peer_cong_map(self, message)
    }

    fn local_cong_message(&self) -> Option<Arc<Message>> {
        Connection::local_cong_message(self)
    }

    fn drop_acked(&self, seq: u64) {
        Connection::drop_acked(self, seq)
    }

    fn release_unsent(&self, message: &Arc<Message>) {
        Connection::release_unsent(self, message)
    }

    fn reset_for_retransmit(&self, also: Option<u64>) {
        Connection::reset_for_retransmit(self, also)
    }

    fn resets(&self) -> u64 {
        self.resets.load(Relaxed)
    }

    fn peer_restarted(&self) {
        Connection::peer_restarted(self)
    }

    fn link_changed(&self, change: LinkChange) {
        Connection::link_changed(self, change)
    }

    fn sequences(&self) -> (u64, u64) {
        Connection::sequences(self)
    }

    fn has_queued(&self) -> bool {
        Connection::has_queued(self)
    }

    fn has_unsent(&self) -> bool {
        Connection::has_unsent(self)
    }

    /// The senders of the first few owners are taken under the lock and
    /// checked outside it (`usable` may take the task's lock).
    fn queued_sender(&self, usable: &dyn Fn(&Task) -> bool) -> Option<ARef<Task>> {
        let mut found: [Option<ARef<Task>>; 4] = Default::default();
        let mut n = 0;
        let st = self.state.lock();
        let mut last: Option<&Arc<dyn SendOwner>> = None;
        for owner in st.queue.iter().filter_map(|out| out.owner.as_ref()) {
            let Some(slot) = found.get_mut(n) else {
                break;
            };
            if last.is_some_and(|last| Arc::ptr_eq(last, owner)) {
                continue;
            }
            last = Some(owner);
            *slot = owner.sender();
            n += usize::from(slot.is_some());
        }
        drop(st);
        found.into_iter().flatten().find(|task| usable(task))
    }

    fn snapshot(&self) -> ConnSnapshot {
        Connection::snapshot(self)
    }
}
