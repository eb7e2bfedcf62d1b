// SPDX-License-Identifier: GPL-2.0

//! The module's own workqueue: connection set-up and teardown run there, and
//! destroying it at unload waits for every queued item.

use core::sync::atomic::{
    AtomicPtr,
    Ordering, //
};
use kernel::{
    prelude::*,
    workqueue::{
        self,
        Queue, //
    },
};

use super::bindings;

/// The queue, published for [`queue`] while the module is loaded.
static QUEUE: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());

/// The module's workqueue; destroyed (after draining) on drop.
///
/// # Invariants
///
/// `QUEUE` points to the allocated queue from `alloc` until `drop`.
pub(crate) struct OwnedQueue(());

impl OwnedQueue {
    /// Allocates the queue and publishes it. Once, in module init.
    pub(crate) fn alloc() -> Result<Self> {
        // SAFETY: No preconditions.
        let wq = unsafe { bindings::rrds_alloc_workqueue() };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: published here, cleared in drop.
        QUEUE.store(wq, Ordering::Release);
        Ok(Self(()))
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        let wq = QUEUE.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !wq.is_null() {
            // SAFETY: Allocated by `alloc`; destroy_workqueue drains pending items first.
            unsafe { bindings::destroy_workqueue(wq) };
        }
    }
}

/// The module's workqueue, or the system's unbound one if it is gone (which
/// only teardown paths can observe, after every user was stopped).
pub(crate) fn queue() -> &'static Queue {
    let wq = QUEUE.load(Ordering::Acquire);
    if wq.is_null() {
        return workqueue::system_unbound();
    }
    // SAFETY: The queue stays allocated until `OwnedQueue` is dropped at module exit,
    // after everything that enqueues on it has stopped.
    unsafe { Queue::from_raw(wq.cast()) }
}
