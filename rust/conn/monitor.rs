// SPDX-License-Identifier: GPL-2.0

//! Link changes to the sockets that monitor their namespace's connections
//! (`RRDS_CONN_MONITOR`): queued in order, bounded, delivered from a work
//! item.

use kernel::{prelude::*, sync::Arc};

use super::{
    ConnKey,
    Connection, //
};
use crate::{ffi::net::NetRef, fifo::Fifo, transport::LinkChange};

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

/// Initialises the monitors' tables. Call once, in module init.
pub(super) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&MONITORS);
    m.init_lock(&PENDING);
    m.init_lock(&DELIVERING);
}

/// Frees the monitors' tables. Call once, at unload.
pub(super) fn release() {
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

impl Connection {
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
}
