// SPDX-License-Identifier: GPL-2.0

//! Processes (thread groups) as registrants: a counted `struct pid` for
//! identity, and a watch that fires when the thread group exits; and the
//! calling task's credentials.

use core::ptr::NonNull;
use kernel::{
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
    types::Opaque, //
};

use super::bindings;

/// A reference to the thread-group `struct pid` of a process.
///
/// Identity never outlives the reference: a held `struct pid` is not reused
/// for another process, unlike a numeric pid.
///
/// # Invariants
///
/// `self.0` holds a reference on the `struct pid` (taken by `get_pid`).
pub(crate) struct ProcessRef(NonNull<bindings::pid>);

// SAFETY: A `struct pid` reference may be dropped from any thread.
unsafe impl Send for ProcessRef {}
// SAFETY: Shared access only compares the pointer or asks the kernel about the pid
// (`rrds_thread_group_exited`, which takes the RCU read lock itself).
unsafe impl Sync for ProcessRef {}

impl ProcessRef {
    /// The calling process; `ESRCH` if it has no thread-group pid (an exiting task).
    pub(crate) fn current() -> Result<Self> {
        // SAFETY: No preconditions; returns a counted reference (or NULL, which
        // `get_pid` passes through) on current's thread-group pid.
        let pid = unsafe { bindings::rrds_get_current_tgid() };
        // INVARIANT: a non-NULL pid comes with the reference `get_pid` took.
        NonNull::new(pid).map(Self).ok_or(ESRCH)
    }

    /// Whether both refer to the same process.
    pub(crate) fn same(&self, other: &Self) -> bool {
        self.0 == other.0
    }

    /// Whether the thread group has exited (pidfd's test).
    pub(crate) fn exited(&self) -> bool {
        // SAFETY: `self.0` is a counted pid (type invariant).
        unsafe { bindings::rrds_thread_group_exited(self.0.as_ptr()) }
    }

    fn as_raw(&self) -> *mut bindings::pid {
        self.0.as_ptr()
    }
}

impl Drop for ProcessRef {
    fn drop(&mut self) {
        // SAFETY: The reference taken in `current` is ours to put (type invariant).
        unsafe { bindings::put_pid(self.0.as_ptr()) };
    }
}

/// Whether the calling task has `CAP_NET_ADMIN` in the initial user
/// namespace (`capable`, which records a granted use for auditing).
/// Process context.
pub(crate) fn capable_net_admin() -> bool {
    // SAFETY: No preconditions: `capable` checks the calling task's own credentials.
    unsafe { bindings::rrds_capable_net_admin() }
}

/// The effective uid of the calling task, in the initial user namespace.
/// Process context.
pub(crate) fn current_euid() -> u32 {
    // SAFETY: `current_euid` reads the calling task's own credentials, which cannot
    // change under it; no preconditions.
    unsafe { bindings::rrds_current_euid() }
}

/// Whether the calling task should give the CPU up (`need_resched`, or a
/// lazy request: on a `PREEMPT_LAZY` kernel a woken kworker waits for the
/// next tick otherwise): a spinning loop stops there.
pub(crate) fn need_resched() -> bool {
    // SAFETY: Reads the calling task's own flags; no preconditions.
    unsafe { bindings::rrds_need_resched() }
}

/// Tells the CPU a spinning loop goes round (`cpu_relax`).
pub(crate) fn cpu_relax() {
    // SAFETY: No preconditions.
    unsafe { bindings::rrds_cpu_relax() }
}

/// What an [`ExitWatch`] calls, in the exiting task's context with the pid's
/// wait-queue lock held: it must not sleep.
///
/// # Safety
///
/// A watch armed with an `Arc<Self>` ([`ExitWatch::arm`]) is a pinned field
/// of that `Self`, and is disarmed ([`ExitWatch::disarm`]) before the `Self`
/// is freed and before the [`ProcessRef`] it was armed with is dropped.
pub(crate) unsafe trait ExitHandler: Sized + 'static {
    /// The watched process may have exited; confirm with [`ProcessRef::exited`].
    fn process_exited(this: ArcBorrow<'_, Self>);
}

/// A wait-queue entry on a process's exit queue (`pid->wait_pidfd`, which
/// `do_notify_pidfd` wakes when the thread group exits).
///
/// # Invariants
///
/// While `queue` is non-null, `entry` is on that queue, whose `struct pid` is
/// kept alive by the [`ProcessRef`] the watch was armed with, and the
/// [`ExitHandler`] containing the watch is alive and pinned.
#[pin_data(PinnedDrop)]
pub(crate) struct ExitWatch {
    #[pin]
    entry: Opaque<bindings::wait_queue_entry>,
    queue: core::sync::atomic::AtomicPtr<bindings::wait_queue_head>,
}

// SAFETY: The entry is only touched under its wait queue's lock (by the kernel) or
// by `arm`/`disarm`, which the owner serialises.
unsafe impl Send for ExitWatch {}
// SAFETY: See `Send`.
unsafe impl Sync for ExitWatch {}

impl ExitWatch {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            entry <- Opaque::uninit(),
            queue: core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()),
        })
    }

    /// Starts watching `process`; `H::process_exited` runs with `owner` when
    /// it exits. `self` is a field of `owner` (`ExitHandler`'s safety
    /// requirement).
    pub(crate) fn arm<H: ExitHandler>(&self, process: &ProcessRef, owner: &Arc<H>) {
        let owner = Arc::as_ptr(owner);
        let entry = self.entry.get();
        // SAFETY: `entry` is valid and pinned; the wake function finds the owner in
        // `private`.
        unsafe {
            bindings::rrds_init_waitqueue_func_entry(entry, Some(wake::<H>));
            (*entry).private = owner.cast_mut().cast();
        }
        // SAFETY: `process` holds the pid, so its wait queue is valid.
        let queue = unsafe { bindings::rrds_pid_exit_waitqueue(process.as_raw()) };
        self.queue
            .store(queue, core::sync::atomic::Ordering::Release);
        // INVARIANT: armed: the entry is on `queue` until `disarm`; the owner and the
        // process stay alive until then (`ExitHandler`'s safety requirement).
        // SAFETY: `queue` and `entry` are valid, and stay so until `disarm` (as above).
        unsafe { bindings::add_wait_queue(queue, entry) };
    }

    /// Stops watching; once this returns the handler is not running and will
    /// not run. Idempotent.
    pub(crate) fn disarm(&self) {
        let queue = self
            .queue
            .swap(core::ptr::null_mut(), core::sync::atomic::Ordering::AcqRel);
        if !queue.is_null() {
            // SAFETY: Armed (type invariant): the entry is on `queue`, which is alive.
            // Removal takes the queue's lock, so a running wake function has finished.
            unsafe { bindings::remove_wait_queue(queue, self.entry.get()) };
        }
    }
}

#[pinned_drop]
impl PinnedDrop for ExitWatch {
    fn drop(self: Pin<&mut Self>) {
        self.disarm();
    }
}

/// # Safety
///
/// Called by the wait-queue code only, for an entry armed by [`ExitWatch::arm`].
unsafe extern "C" fn wake<H: ExitHandler>(
    entry: *mut bindings::wait_queue_entry,
    _mode: c_uint,
    _flags: c_int,
    _key: *mut c_void,
) -> c_int {
    // SAFETY: `arm` stored the owner, inside its `Arc`, in `private`; the owner stays
    // valid while the entry is on the queue (`ExitHandler`'s safety requirement), and
    // this runs under the queue's lock.
    let owner = unsafe { ArcBorrow::from_raw((*entry).private.cast_const().cast::<H>()) };
    H::process_exited(owner);
    0
}
