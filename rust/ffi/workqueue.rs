// SPDX-License-Identifier: GPL-2.0

//! The module's own workqueues: connection set-up and teardown run on one,
//! the polling of the CQs rrds polls itself on the other (a teardown waits
//! for that polling), and destroying them at unload waits for every queued
//! item.

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

/// The CQ polling queue, published for [`cq_queue`] while the module is loaded.
static CQ_QUEUE: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());

/// The module's workqueues; destroyed (after draining) on drop.
///
/// # Invariants
///
/// `QUEUE` and `CQ_QUEUE` point to the queues allocated by `alloc` until
/// `drop`.
pub(crate) struct OwnedQueue(());

impl OwnedQueue {
    /// Allocates the queues and publishes them. Once, in module init.
    pub(crate) fn alloc() -> Result<Self> {
        // SAFETY: No preconditions.
        let wq = unsafe { bindings::rrds_alloc_workqueue() };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: published here, cleared in drop.
        QUEUE.store(wq, Ordering::Release);
        let owned = Self(());
        // SAFETY: No preconditions.
        let cq_wq = unsafe { bindings::rrds_alloc_cq_workqueue() };
        if cq_wq.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: published here, cleared in drop.
        CQ_QUEUE.store(cq_wq, Ordering::Release);
        Ok(owned)
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // Connection work first: its teardowns wait for CQ polling.
        for published in [&QUEUE, &CQ_QUEUE] {
            let wq = published.swap(core::ptr::null_mut(), Ordering::AcqRel);
            if !wq.is_null() {
                // SAFETY: Allocated by `alloc`; destroy_workqueue drains pending items first.
                unsafe { bindings::destroy_workqueue(wq) };
            }
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

/// The queue that polls the CQs rrds polls itself, or the system's high
/// priority one if it is gone (teardown paths only, as for [`queue`]).
pub(crate) fn cq_queue() -> &'static Queue {
    let wq = CQ_QUEUE.load(Ordering::Acquire);
    if wq.is_null() {
        return workqueue::system_highpri();
    }
    // SAFETY: As in `queue`.
    unsafe { Queue::from_raw(wq.cast()) }
}
