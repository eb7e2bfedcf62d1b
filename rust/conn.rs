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

use core::sync::atomic::{
    AtomicBool,
    AtomicUsize,
    Ordering::Relaxed, //
};
use kernel::{
    fmt, new_spinlock,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNode,
        RBTreeNodeReservation, //
    },
    sync::{
        Arc,
        SpinLock, //
    },
    uaccess::UserSliceReader,
};

use crate::{
    cong::{
        self,
        CongMap, //
    },
    ffi::net::NetRef,
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
        self,
        Conn,
        Connections,
        Direction,
        Incarnations,
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

/// Test knob (debugfs `rrds/xmit_hold`): the next transmit attempt the
/// transport refuses waits for another `xmit` call to find it before it
/// looks at the queue again (see `Connection::hold_until_met`).
static XMIT_HOLD: AtomicBool = AtomicBool::new(false);

/// debugfs `rrds/xmit_hold` (write): `1` arms the hold, `0` disarms it.
pub(crate) fn store_xmit_hold(reader: &mut UserSliceReader) -> Result {
    XMIT_HOLD.store(crate::hooks::read_knob(reader)?, Relaxed);
    Ok(())
}

/// debugfs `rrds/xmit_hold` (read): whether the hold is still armed.
pub(crate) fn show_xmit_hold(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_fmt(fmt!("{}\n", u8::from(XMIT_HOLD.load(Relaxed))))
}

/// Pongs a connection holds unacknowledged at most: a peer that pings and
/// never acknowledges cannot make us queue answers without bound (upstream
/// queues every one). Pings past it get no answer, as pings to a congested
/// port get none.
pub(crate) const MAX_QUEUED_PONGS: usize = 64;

impl ConnKey {
    /// The table's order: by namespace, then peer, so that the connections
    /// to one peer are neighbours (counted for `max_conns_per_peer`).
    fn order(&self) -> (NetRef, [u8; 16], [u8; 16], u8, u32) {
        (self.net, self.faddr, self.laddr, self.tos, self.scope)
    }

    /// The first key of `net`'s connections to `faddr`, in table order.
    fn first_to(net: NetRef, faddr: [u8; 16]) -> Self {
        Self {
            net,
            laddr: [0; 16],
            faddr,
            tos: 0,
            scope: 0,
        }
    }
}

impl PartialOrd for ConnKey {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ConnKey {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.order().cmp(&other.order())
    }
}

/// Whoever a queued message is charged to (a socket's send buffer).
pub(crate) trait SendOwner: Send + Sync {
    /// `len` bytes of the owner's are acknowledged or dropped. Process context.
    fn send_completed(&self, len: usize);
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
    #[pin]
    state: SpinLock<ConnState>,
}

/// A connection and the number of its users (sockets that sent on it, and
/// pongs in progress): an idle connection nobody uses is freed, so
/// connections never accumulate (upstream keeps them until unload).
struct ConnEntry {
    conn: Arc<Connection>,
    users: usize,
}

/// Every connection, by key: lookups cost O(log n) however many there are.
#[derive(Default)]
struct ConnTable {
    conns: RBTree<ConnKey, ConnEntry>,
    /// How many connections each namespace has (few namespaces: a list).
    per_net: KVec<(NetRef, usize)>,
    len: usize,
}

impl ConnTable {
    fn find_mut(&mut self, key: &ConnKey) -> Option<&mut ConnEntry> {
        self.conns.get_mut(key)
    }

    fn of_net(&self, net: NetRef) -> usize {
        self.per_net
            .iter()
            .find(|(n, _)| *n == net)
            .map_or(0, |(_, count)| *count)
    }

    /// How many connections `net` has to `faddr`, counting to `limit` at most.
    fn count_to_peer(&mut self, net: NetRef, faddr: [u8; 16], limit: usize) -> usize {
        let mut count = 0;
        let mut cursor = self
            .conns
            .cursor_lower_bound_mut(&ConnKey::first_to(net, faddr));
        while let Some(c) = cursor {
            let key = c.current().0;
            if key.net != net || key.faddr != faddr || count >= limit {
                break;
            }
            count += 1;
            cursor = c.move_next();
        }
        count
    }

    /// Whether `net` may have one more connection to `faddr`
    /// (`max_conns_per_net`, `max_conns_per_peer`): `ENOBUFS` if not.
    fn check_limits(&mut self, net: NetRef, faddr: [u8; 16]) -> Result {
        let per_peer = crate::limits::max_conns_per_peer();
        if self.of_net(net) >= crate::limits::max_conns_per_net()
            || self.count_to_peer(net, faddr, per_peer) >= per_peer
        {
            stats::inc(Stat::ConnLimitRefused);
            return Err(crate::errno::enobufs());
        }
        Ok(())
    }

    fn insert(&mut self, node: RBTreeNode<ConnKey, ConnEntry>, net: NetRef) -> Result {
        match self.per_net.iter_mut().find(|(n, _)| *n == net) {
            Some((_, count)) => *count += 1,
            None => self.per_net.push((net, 1), GFP_KERNEL)?,
        }
        self.conns.insert(node);
        self.len += 1;
        Ok(())
    }

    fn remove(&mut self, key: &ConnKey) -> Option<RBTreeNode<ConnKey, ConnEntry>> {
        let node = self.conns.remove_node(key)?;
        self.len -= 1;
        if let Some(i) = self.per_net.iter().position(|(n, _)| *n == key.net) {
            self.per_net[i].1 -= 1;
            if self.per_net[i].1 == 0 {
                let _ = self.per_net.remove(i);
            }
        }
        Some(node)
    }

    /// The first connection of `net` for which `which` holds, in table order.
    fn first_of(
        &mut self,
        net: NetRef,
        which: &mut impl FnMut(&Connection) -> bool,
    ) -> Option<ConnKey> {
        let mut cursor = self
            .conns
            .cursor_lower_bound_mut(&ConnKey::first_to(net, [0; 16]));
        while let Some(c) = cursor {
            let (key, entry) = c.current();
            if key.net != net {
                return None;
            }
            if which(&entry.conn) {
                return Some(*key);
            }
            cursor = c.move_next();
        }
        None
    }
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    // `None` until the first connection (a tree cannot be built in a constant).
    unsafe(uninit) static CONNS: Mutex<Option<ConnTable>> = None;
}

/// The sequence numbers of an IB connection forgotten because its
/// namespace's last bound socket closed, taken up by the next connection
/// with the same key. The peer may have kept its state (in-tree RDS keeps
/// its connections until unload): it retransmits what it had not seen
/// acknowledged, of which the new connection drops what the old one
/// delivered, and it drops retransmissions numbered below what it has seen,
/// so the new connection numbers its messages on from the old one. It also
/// takes up both incarnations: to an rrds peer it is the old connection, and
/// a peer that lost its own state meanwhile is seen to have restarted.
struct Resume {
    key: ConnKey,
    next_tx_seq: u64,
    next_rx_seq: u64,
    incarnations: Incarnations,
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static RESUME: Mutex<KVec<Resume>> = KVec::new();
}

/// A socket told of its namespace's connections' link changes
/// (`RRDS_CONN_MONITOR`).
pub(crate) trait ConnMonitor: Send + Sync {
    /// The namespace whose connections it hears of.
    fn net(&self) -> NetRef;
    /// The link of the connection `key` changed. Process context, no
    /// connection or path lock held.
    fn link_changed(&self, key: &ConnKey, change: LinkChange);
    /// `n` changes were lost before reaching any monitor (no memory).
    fn changes_lost(&self, n: u32);
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static MONITORS: Mutex<KVec<Arc<dyn ConnMonitor>>> = KVec::new();
}

/// Initialises the connection table. Call once, in module init.
pub(crate) fn init() {
    // SAFETY: Module init calls this exactly once, before any other use of `CONNS`.
    unsafe { CONNS.init() };
    transport::set_connections(&TABLE);
    // SAFETY: As above, for `RESUME`.
    unsafe { RESUME.init() };
    // SAFETY: As above, for `MONITORS`, `PENDING` and `DELIVERING`.
    unsafe {
        MONITORS.init();
        PENDING.init();
        DELIVERING.init();
    }
}

/// Frees the tables' buffers. Call once, at unload, after the last connection.
pub(crate) fn release_tables() {
    let table = CONNS.lock().take();
    drop(table);
    crate::tables::free_table(&mut RESUME.lock());
    crate::tables::free_table(&mut MONITORS.lock());
    PENDING.lock().queue = Fifo::new();
}

/// Link changes not yet delivered to the monitors, and how many were lost
/// for want of room (every monitor is then told it may have missed some).
struct PendingChanges {
    queue: Fifo<(ConnKey, LinkChange)>,
    lost: u32,
}

/// Most link changes waiting for delivery.
const MAX_PENDING_CHANGES: usize = 1024;

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static PENDING: Mutex<PendingChanges> = PendingChanges {
        queue: Fifo::new(),
        lost: 0,
    };
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    // Held while delivering, so that changes reach each monitor in order.
    unsafe(uninit) static DELIVERING: Mutex<()> = ();
}

/// Delivers the pending link changes to the monitors of their namespaces.
fn deliver_changes() {
    let _in_order = DELIVERING.lock();
    loop {
        let (change, lost) = {
            let mut pending = PENDING.lock();
            (
                pending.queue.pop_front(),
                core::mem::take(&mut pending.lost),
            )
        };
        let monitors = {
            let all = MONITORS.lock();
            let mut v = KVec::new();
            if v.reserve(all.len(), GFP_KERNEL).is_err() {
                drop(all);
                // Counted, so that the next delivery flags it.
                let mut pending = PENDING.lock();
                pending.lost = pending
                    .lost
                    .saturating_add(lost + u32::from(change.is_some()));
                return;
            }
            for m in all.iter() {
                // Within the capacity just reserved.
                let _ = v.push_within_capacity(m.clone());
            }
            v
        };
        if lost > 0 {
            for m in monitors.iter() {
                m.changes_lost(lost);
            }
        }
        let Some((key, change)) = change else {
            return;
        };
        for m in monitors.iter().filter(|m| m.net() == key.net) {
            m.link_changed(&key, change);
        }
    }
}

/// Adds `sock` to the sockets told of link changes. Process context.
pub(crate) fn add_monitor(sock: Arc<dyn ConnMonitor>) -> Result {
    let mut monitors = MONITORS.lock();
    if monitors.iter().any(|s| core::ptr::addr_eq(&**s, &*sock)) {
        return Ok(());
    }
    monitors.push(sock, GFP_KERNEL)?;
    Ok(())
}

/// Removes `sock` from them. Process context.
pub(crate) fn remove_monitor(sock: &dyn ConnMonitor) {
    let removed = {
        let mut monitors = MONITORS.lock();
        monitors
            .iter()
            .position(|s| core::ptr::addr_eq(&**s, sock))
            .and_then(|i| monitors.remove(i).ok())
    };
    drop(removed);
}

/// Takes what a forgotten connection with `key` left.
fn take_resume(key: &ConnKey) -> Option<Resume> {
    let mut resume = RESUME.lock();
    let i = resume.iter().position(|r| r.key == *key)?;
    resume.remove(i).ok()
}

/// The connection for `key`, created on first use; the caller is a user
/// until it calls [`put`].
pub(crate) fn get(key: ConnKey, transport: &'static dyn Transport) -> Result<Arc<Connection>> {
    lookup(key, transport, true)
}

/// The connection for `key`, created on first use, without becoming a user
/// (a peer connected to us: the connection lives as long as its namespace
/// has bound sockets, see [`forget_net`]).
pub(crate) fn find_or_create(
    key: ConnKey,
    transport: &'static dyn Transport,
) -> Result<Arc<Connection>> {
    lookup(key, transport, false)
}

/// The connection for `key`, created on first use; `user` makes the caller
/// one of its users.
fn lookup(key: ConnKey, transport: &'static dyn Transport, user: bool) -> Result<Arc<Connection>> {
    let users = usize::from(user);
    if let Some(conn) = find_or_check_limits(&key, users)? {
        return Ok(conn);
    }
    let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
    let (conn, fcong) = new_connection(key, transport)?;
    insert_new(key, node, conn, fcong, users)
}

/// Returns the table's connection for `key`, which gains `users` users, or
/// `None` if there is none and the limits allow one more.
///
/// # Errors
///
/// `ENOBUFS` if the limits refuse one more (see [`ConnTable::check_limits`]).
fn find_or_check_limits(key: &ConnKey, users: usize) -> Result<Option<Arc<Connection>>> {
    let mut guard = CONNS.lock();
    let table = guard.get_or_insert_with(ConnTable::default);
    if let Some(e) = table.find_mut(key) {
        e.users += users;
        return Ok(Some(e.conn.clone()));
    }
    // Refused before anything is allocated; checked again, for good, by `insert_new`.
    table.check_limits(key.net, key.faddr)?;
    Ok(None)
}

/// Returns a new connection for `key` over `transport`, not yet in the
/// table, and the use of the peer's congestion map taken for it: the caller
/// ends that use with `cong::put` if the connection is not kept.
///
/// # Errors
///
/// Those of `cong::get` and of the transport's `new_path`; `ENOMEM`.
fn new_connection(
    key: ConnKey,
    transport: &'static dyn Transport,
) -> Result<(Arc<Connection>, Arc<CongMap>)> {
    // A loopback receiver is one of our sockets; an IB peer speaks for itself.
    let side = if transport.kind() == crate::transport::loopback::TRANS_LOOP {
        cong::Side::Local
    } else {
        cong::Side::Remote
    };
    let fcong = cong::get(key.net, key.faddr, side)?;
    let conn_fcong = fcong.clone();
    let path = match transport.new_path(&key) {
        Ok(path) => path,
        Err(e) => {
            cong::put(fcong);
            return Err(e);
        }
    };
    let conn = Arc::pin_init(
        try_pin_init!(Connection {
            key,
            transport,
            fcong: conn_fcong,
            path,
            pongs: AtomicUsize::new(0),
            state <- new_spinlock!(ConnState {
                // The first sequence number is 1 (upstream's `cp_next_tx_seq`).
                next_tx_seq: 1,
                next_rx_seq: 0,
                queue: Fifo::default(),
                sent: 0,
                transmitting: false,
                xmit_again: false,
            }),
        }),
        GFP_KERNEL,
    );
    match conn {
        Ok(c) => Ok((c, fcong)),
        Err(e) => {
            cong::put(fcong);
            Err(e)
        }
    }
}

/// Puts `conn`, new for `key`, in the table with `users` users in the slot
/// `node` reserves, and binds its path. `fcong` is the congestion map use
/// [`new_connection`] took: it is ended here unless `conn` is kept.
///
/// Returns `conn`, or the connection another thread put there meanwhile
/// (which gains the `users`).
///
/// # Errors
///
/// `ENOBUFS` if the limits now refuse `conn` (see [`ConnTable::check_limits`]);
/// `ENOMEM`.
fn insert_new(
    key: ConnKey,
    node: RBTreeNodeReservation<ConnKey, ConnEntry>,
    conn: Arc<Connection>,
    fcong: Arc<CongMap>,
    users: usize,
) -> Result<Arc<Connection>> {
    let mut guard = CONNS.lock();
    let table = guard.get_or_insert_with(ConnTable::default);
    // Another thread may have created it meanwhile: use that one.
    if let Some(e) = table.find_mut(&key) {
        e.users += users;
        let existing = e.conn.clone();
        drop(guard);
        cong::put(fcong);
        return Ok(existing);
    }
    let inserted = table.check_limits(key.net, key.faddr).and_then(|()| {
        table.insert(
            node.into_node(
                key,
                ConnEntry {
                    conn: conn.clone(),
                    users,
                },
            ),
            key.net,
        )
    });
    if let Err(e) = inserted {
        drop(guard);
        cong::put(fcong);
        return Err(e);
    }
    // Not yet visible to anyone else but through the table, whose lock we hold.
    take_up_resume(&key, &conn);
    // Under the table lock, so `forget_net` cannot kill the path before it is bound.
    conn.path.bind(conn.clone());
    drop(guard);
    Ok(conn)
}

/// Gives `conn`, new for `key`, the sequence numbers and incarnations a
/// forgotten connection with the same key left (see [`Resume`]), if one did.
/// Called under the table lock, before `conn` is visible but through it.
fn take_up_resume(key: &ConnKey, conn: &Connection) {
    if let Some(r) = take_resume(key) {
        {
            let mut st = conn.state.lock();
            st.next_tx_seq = r.next_tx_seq;
            st.next_rx_seq = r.next_rx_seq;
        }
        conn.path.resume(r.incarnations);
    }
}

/// Ends a use of `conn` begun by [`get`]. The last user of an idle
/// connection frees it. Process context.
pub(crate) fn put(conn: Arc<Connection>) {
    let removed = {
        let mut guard = CONNS.lock();
        let Some(table) = guard.as_mut() else {
            return;
        };
        match table.find_mut(&conn.key) {
            Some(e) if Arc::ptr_eq(&e.conn, &conn) => {
                e.users = e.users.saturating_sub(1);
                // IB connections stay while their namespace has bound sockets.
                if e.users == 0 && !conn.path.has_link() && conn.is_idle() {
                    table.remove(&conn.key)
                } else {
                    None
                }
            }
            _ => None,
        }
    };
    if let Some(node) = removed {
        let (_, entry) = node.to_key_value();
        cong::put(entry.conn.fcong.clone());
    }
}

/// Forgets every connection of `net` for which `which` holds (the namespace
/// is exiting, or its last bound socket closed): IB paths are torn down, and
/// what is still queued is dropped. With `resume`, the sequence numbers of
/// each IB connection are kept for the next connection to the same peer
/// (see `Resume`); without, those of `net` are dropped too. Process context.
pub(crate) fn forget_net(net: NetRef, mut which: impl FnMut(&Connection) -> bool, resume: bool) {
    if !resume {
        let mut kept = RESUME.lock();
        kept.retain(|r| r.key.net != net);
    }
    loop {
        let entry = {
            let mut guard = CONNS.lock();
            let Some(table) = guard.as_mut() else {
                break;
            };
            table
                .first_of(net, &mut which)
                .and_then(|key| table.remove(&key))
        };
        let Some(node) = entry else {
            break;
        };
        let (_, e) = node.to_key_value();
        if let Some(incarnations) = e.conn.path.forget() {
            if resume {
                e.conn.keep_sequences(incarnations);
            }
        }
        e.conn.cancel(None, |_| true);
        cong::put(e.conn.fcong.clone());
    }
}

/// Calls `f` on every connection of `net`, by peer address.
pub(crate) fn for_each(net: NetRef, mut f: impl FnMut(&Connection)) {
    if let Some(table) = CONNS.lock().as_ref() {
        for (_, e) in table.conns.iter().filter(|(k, _)| k.net == net) {
            f(&e.conn);
        }
    }
}

/// Transmits what is queued on every connection (a transport can send
/// again). Process context.
pub(crate) fn xmit_all() {
    let conns = snapshot();
    // Outside the table lock: transmitting may answer pings, which looks it up.
    for c in conns.iter() {
        c.xmit();
    }
}

/// Every connection, for walks that may sleep (the table lock is not held).
pub(crate) fn snapshot() -> KVec<Arc<Connection>> {
    snapshot_as(Arc::clone)
}

/// What `each` makes of every connection (the table lock is held while it runs).
fn snapshot_as<T>(mut each: impl FnMut(&Arc<Connection>) -> T) -> KVec<T> {
    let guard = CONNS.lock();
    let mut v = KVec::new();
    let Some(table) = guard.as_ref() else {
        return v;
    };
    if v.reserve(table.len, GFP_KERNEL).is_err() {
        return v;
    }
    for (_, e) in table.conns.iter() {
        if v.push(each(&e.conn), GFP_KERNEL).is_err() {
            break;
        }
    }
    v
}

/// The connection table as transports reach it ([`transport::connections`]).
struct Table;

static TABLE: Table = Table;

impl Connections for Table {
    fn find_or_create(
        &self,
        key: ConnKey,
        transport: &'static dyn Transport,
    ) -> Result<Arc<dyn Conn>> {
        Ok(find_or_create(key, transport)?)
    }

    fn forget_links(&self, net: NetRef) {
        forget_net(net, |c| c.path.has_link(), true);
    }

    fn xmit_all(&self) {
        xmit_all();
    }

    fn snapshot(&self) -> KVec<Arc<dyn Conn>> {
        snapshot_as(|c| -> Arc<dyn Conn> { c.clone() })
    }
}

/// How many connections exist (debugfs, tests).
pub(crate) fn count() -> usize {
    CONNS.lock().as_ref().map_or(0, |t| t.len)
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
            // It joins the retransmit list before it is handed over, as upstream.
            st.sent += 1;
            drop(st);
            let taken = self.transport.can_send(self)
                && self.transport.xmit(self, &header, &message) == Xmit::Taken;
            if !taken && XMIT_HOLD.swap(false, Relaxed) {
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
        for _ in 0..1000 {
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(10));
            if self.state.lock().xmit_again {
                return;
            }
        }
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
                    out.release(self);
                }
                None => break,
            }
        }
    }

    /// Records the sequence numbers and incarnations for the next connection
    /// with this key (see `Resume`) of an IB connection; on allocation
    /// failure they are lost, and the next connection is a restart.
    fn keep_sequences(&self, incarnations: Incarnations) {
        let (next_tx_seq, next_rx_seq) = {
            let st = self.state.lock();
            (st.next_tx_seq, st.next_rx_seq)
        };
        let mut kept = RESUME.lock();
        kept.retain(|r| r.key != self.key);
        let _ = kept.push(
            Resume {
                key: self.key,
                next_tx_seq,
                next_rx_seq,
                incarnations,
            },
            GFP_KERNEL,
        );
    }

    /// The connection's link changed: every socket of its namespace that
    /// monitors connections hears of it, in order, from a work item (the
    /// caller may hold its path's lock; sockets take theirs). Process
    /// context.
    pub(crate) fn link_changed(&self, change: LinkChange) {
        if MONITORS.lock().is_empty() {
            return;
        }
        {
            let mut pending = PENDING.lock();
            if pending.queue.len() >= MAX_PENDING_CHANGES
                || pending
                    .queue
                    .push_back((self.key, change), GFP_KERNEL)
                    .is_err()
            {
                pending.lost = pending.lost.saturating_add(1);
            }
        }
        // A failed spawn leaves the change for the next one's.
        let _ = crate::ffi::workqueue::queue().try_spawn(GFP_KERNEL, deliver_changes);
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

    fn snapshot(&self) -> ConnSnapshot {
        Connection::snapshot(self)
    }
}
