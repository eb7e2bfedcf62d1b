// SPDX-License-Identifier: GPL-2.0

//! The bind table: which socket owns (namespace, address, port, scope).
//!
//! A red-black tree ordered so that the ports of one (namespace, address,
//! scope) are neighbours: a lookup costs O(log n) however many sockets are
//! bound, and `bind(port 0)` finds a free port by walking the taken ones
//! after a random start instead of testing every candidate against every
//! bound socket.

use kernel::{
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNode,
        RBTreeNodeReservation, //
    },
    sync::{
        Arc,
        ArcBorrow, //
    },
};

use super::RdsSock;
use crate::{
    addr::Endpoint,
    errno,
    ffi::{
        net::NetRef,
        random, //
    },
};

/// Where a socket is bound. Ordered by namespace, address and scope, then
/// port, so that one address's ports are consecutive in the tree.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct BoundKey {
    net: NetRef,
    addr: [u8; 16],
    scope: u32,
    port: u16,
}

impl BoundKey {
    fn new(net: NetRef, ep: &Endpoint) -> Self {
        Self {
            net,
            addr: ep.addr,
            scope: ep.scope,
            port: ep.port,
        }
    }

    fn with_port(self, port: u16) -> Self {
        Self { port, ..self }
    }
}

type Table = RBTree<BoundKey, Arc<RdsSock>>;

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    // A spinlock: every received message looks its socket up here, and the IB
    // transport's receive path runs in atomic context. `None` until the first
    // bind (a tree cannot be built in a constant).
    unsafe(uninit) static BOUND: SpinLock<Option<Table>> = None;
}

/// Initialises the table. Call once, in module init, before registering PF_RDS.
pub(crate) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&BOUND);
}

/// Frees the table. Call once, at unload, after the last socket.
pub(crate) fn release_table() {
    let table = BOUND.lock().take();
    drop(table);
}

/// Port 1 is reserved (upstream's `RDS_FLAG_PROBE_PORT`); 0 asks for a free one.
const PROBE_PORT: u16 = 1;
/// The lowest port `bind(port 0)` hands out.
const FIRST_FREE_PORT: u16 = 2;

/// The first port in `from..=to` that no socket holds at `key`'s address:
/// O(log n) to find `from`, then one step per taken port after it.
fn first_free(table: &mut Table, key: BoundKey, from: u16, to: u16) -> Option<u16> {
    let mut want = from;
    let mut cursor = table.cursor_lower_bound_mut(&key.with_port(from));
    while let Some(c) = cursor {
        let taken = *c.current().0;
        if taken.with_port(0) != key.with_port(0) || taken.port != want {
            break;
        }
        if want == to {
            return None;
        }
        want += 1;
        cursor = c.move_next();
    }
    Some(want)
}

/// Binds `sock` to `ep`; a port of 0 picks a free port. Returns the port.
pub(crate) fn add(sock: ArcBorrow<'_, RdsSock>, ep: Endpoint) -> Result<u16> {
    if ep.port == PROBE_PORT {
        return Err(EINVAL);
    }
    let me: Arc<RdsSock> = sock.into();
    // Allocated before the spinlock is taken.
    let reservation = RBTreeNodeReservation::new(GFP_KERNEL)?;
    let key = BoundKey::new(sock.net, &ep);
    let mut guard = BOUND.lock();
    let table = guard.get_or_insert_with(RBTree::new);
    let port = match ep.port {
        0 => {
            // Start at a random port so that sockets do not all get the same one.
            let start = random::u16().max(FIRST_FREE_PORT);
            first_free(table, key, start, u16::MAX)
                .or_else(|| first_free(table, key, FIRST_FREE_PORT, start))
                .ok_or_else(errno::eaddrinuse)?
        }
        _ if table.get(&key).is_some() => return Err(errno::eaddrinuse()),
        p => p,
    };
    table.insert(reservation.into_node(key.with_port(port), me));
    Ok(port)
}

/// Unbinds `ep` in `net`.
pub(crate) fn remove(net: NetRef, ep: &Endpoint) {
    let removed: Option<RBTreeNode<BoundKey, Arc<RdsSock>>> = BOUND
        .lock()
        .as_mut()
        .and_then(|table| table.remove_node(&BoundKey::new(net, ep)));
    // Outside the spinlock: a socket reference may sleep when it goes.
    drop(removed);
}

/// The socket bound to `ep` in `net`, if any (the whole key, scope id
/// included, as upstream's `rds_find_bound`).
pub(crate) fn find(net: NetRef, ep: &Endpoint) -> Option<Arc<RdsSock>> {
    BOUND
        .lock()
        .as_ref()
        .and_then(|table| table.get(&BoundKey::new(net, ep)))
        .cloned()
}
