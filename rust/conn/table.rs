// SPDX-License-Identifier: GPL-2.0

//! The connection table: every connection by key, with the limits on how
//! many a namespace and a peer may have, users counted, and the sequence
//! state a forgotten IB connection leaves for the next one with its key.

use core::sync::atomic::{
    AtomicU64,
    AtomicUsize, //
};
use kernel::{
    new_spinlock,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNode,
        RBTreeNodeReservation, //
    },
    sync::Arc,
};

use super::{
    ConnKey,
    ConnState,
    Connection, //
};
use crate::{
    cong::{
        self,
        CongMap, //
    },
    ffi::net::NetRef,
    fifo::Fifo,
    stats::{
        self,
        Stat, //
    },
    transport::{
        self,
        Conn,
        Connections,
        Incarnations,
        Transport, //
    },
};

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
    next_tx_seq: u64,
    next_rx_seq: u64,
    incarnations: Incarnations,
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    // By connection key; `None` until the first (see `CONNS`).
    unsafe(uninit) static RESUME: Mutex<Option<RBTree<ConnKey, Resume>>> = None;
}

/// Initialises the table and plugs it into the transports. Call once, in
/// module init.
pub(super) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&CONNS);
    transport::set_connections(&TABLE);
    m.init_lock(&RESUME);
}

/// Frees the table's buffers. Call once, at unload, after the last connection.
pub(super) fn release() {
    let table = CONNS.lock().take();
    drop(table);
    let kept = RESUME.lock().take();
    drop(kept);
}

/// Takes what a forgotten connection with `key` left.
fn take_resume(key: &ConnKey) -> Option<Resume> {
    RESUME.lock().as_mut()?.remove(key)
}

/// Drops what `net`'s forgotten connections left (it is exiting).
fn forget_resumes(net: NetRef) {
    let mut guard = RESUME.lock();
    let Some(kept) = guard.as_mut() else {
        return;
    };
    let first = ConnKey::first_to(net, [0; 16]);
    crate::tables::retain_range(kept, Some(&first), |k| k.net == net, |_, _| false);
}

/// The connection for `key`, created on first use; the caller is a user
/// until it calls [`put`].
pub(crate) fn get(key: ConnKey, transport: &'static dyn Transport) -> Result<Arc<Connection>> {
    lookup(key, transport, true)
}

/// The connection for `key`, created on first use, without becoming a user
/// (a peer connected to us: the connection lives as long as its namespace
/// has bound sockets, see [`forget_net`]).
fn find_or_create(key: ConnKey, transport: &'static dyn Transport) -> Result<Arc<Connection>> {
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
            resets: AtomicU64::new(0),
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
        forget_resumes(net);
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
#[cfg(rrds_test_hooks)]
fn xmit_all() {
    let conns = snapshot();
    // Outside the table lock: transmitting may answer pings, which looks it up.
    for c in conns.iter() {
        c.xmit();
    }
}

/// Every connection, for walks that may sleep (the table lock is not held).
#[cfg(rrds_test_hooks)]
fn snapshot() -> KVec<Arc<Connection>> {
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

    #[cfg(rrds_test_hooks)]
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

impl Connection {
    /// Records the sequence numbers and incarnations for the next connection
    /// with this key (see `Resume`) of an IB connection; on allocation
    /// failure they are lost, and the next connection is a restart.
    fn keep_sequences(&self, incarnations: Incarnations) {
        let (next_tx_seq, next_rx_seq) = {
            let st = self.state.lock();
            (st.next_tx_seq, st.next_rx_seq)
        };
        // Replaces what an earlier connection with the key left.
        let _ = RESUME
            .lock()
            .get_or_insert_with(RBTree::new)
            .try_create_and_insert(
                self.key,
                Resume {
                    next_tx_seq,
                    next_rx_seq,
                    incarnations,
                },
                GFP_KERNEL,
            );
    }
}
