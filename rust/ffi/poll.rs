// SPDX-License-Identifier: GPL-2.0

//! A wait queue for poll and epoll that is freed an RCU grace period after
//! its owner lets go, as the kernel frees a socket's `socket_wq`.
//!
//! The kernel crate's `PollCondVar` waits for that grace period in its drop
//! (`synchronize_rcu`): one per closed socket, which made closing 65,534
//! sockets take minutes under TCG. Here the drop only tells epoll the queue
//! is going (`POLLFREE`) and hands the memory to `kvfree_call_rcu`.

use core::ptr::NonNull;
use kernel::{
    bindings,
    prelude::*,
    sync::LockClassKey, //
};

use super::net::PollRequest;

/// The allocation: the wait queue head, and the RCU head that frees it.
#[repr(C)]
struct Queue {
    head: bindings::wait_queue_head,
    rcu: bindings::callback_head,
}

/// A poll wait queue whose memory outlives it by a grace period.
///
/// # Invariants
///
/// `queue` points to a `Queue` allocated with `KBox`, whose head is
/// initialised; this value owns it until drop hands it to RCU.
pub(crate) struct PollQueue {
    queue: NonNull<Queue>,
}

// SAFETY: The wait queue head has its own spinlock; nothing else is shared.
unsafe impl Send for PollQueue {}
// SAFETY: As above: every operation goes through the head's spinlock.
unsafe impl Sync for PollQueue {}

impl PollQueue {
    /// An empty queue; `name` and `key` are its spinlock's, for lockdep.
    pub(crate) fn new(name: &'static CStr, key: Pin<&'static LockClassKey>) -> Result<Self> {
        // SAFETY: Both fields are plain C structs for which all zeroes is a valid
        // (not yet initialised) value.
        let queue: Queue = unsafe { core::mem::zeroed() };
        let queue = KBox::into_raw(KBox::new(queue, GFP_KERNEL)?);
        // SAFETY: `queue` is a valid allocation; `name` and `key` are static.
        unsafe {
            bindings::__init_waitqueue_head(
                &raw mut (*queue).head,
                name.as_char_ptr(),
                key.as_ptr(),
            )
        };
        // INVARIANT: allocated with `KBox`, head initialised just above.
        Ok(Self {
            // SAFETY: `KBox::into_raw` never returns null.
            queue: unsafe { NonNull::new_unchecked(queue) },
        })
    }

    fn head(&self) -> *mut bindings::wait_queue_head {
        // SAFETY: By the type invariant `queue` is valid while `self` lives.
        unsafe { &raw mut (*self.queue.as_ptr()).head }
    }

    /// Registers this queue with a poll call. The caller looks at its state
    /// afterwards: the barrier orders that after the registration, pairing
    /// with the one in [`Self::wake_all`] (the kernel's `sock_poll_wait`).
    pub(crate) fn wait_on(&self, req: &PollRequest<'_>) {
        // SAFETY: The file and table are valid for the poll call; the head is
        // valid until drop, which wakes poll entries with POLLFREE and keeps the
        // memory for a grace period, as epoll requires.
        unsafe { bindings::poll_wait(req.file.as_ptr(), self.head(), req.table) };
        kernel::sync::barrier::smp_mb();
    }

    /// Wakes every poller; costs only a barrier when there is none, which is
    /// the common case on the receive path. The caller changed the state the
    /// pollers look at before calling.
    pub(crate) fn wake_all(&self) {
        // SAFETY: The head is initialised and valid while `self` lives; the
        // generated binding's `wait_queue_head` is the same C type.
        if !unsafe { crate::ffi::bindings::rrds_wq_has_sleeper(self.head().cast()) } {
            return;
        }
        // SAFETY: The head is initialised and valid while `self` lives.
        unsafe {
            bindings::__wake_up(self.head(), bindings::TASK_NORMAL, 0, core::ptr::null_mut())
        };
    }
}

impl Drop for PollQueue {
    fn drop(&mut self) {
        let queue = self.queue.as_ptr();
        // SAFETY: The head is valid: pollers unhook themselves under RCU.
        unsafe { bindings::__wake_up_pollfree(self.head()) };
        // SAFETY: `queue` came from `KBox` (kmalloc) and is not used again here;
        // RCU readers (epoll's removal of its entry) finish before it is freed.
        unsafe { bindings::kvfree_call_rcu(&raw mut (*queue).rcu, queue.cast()) };
    }
}
