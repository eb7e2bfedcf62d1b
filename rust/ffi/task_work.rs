// SPDX-License-Identifier: GPL-2.0

//! `task_work_add`: running a callback in the context of a given user task.
//!
//! Some drivers act on behalf of the calling task: siw opens the TCP socket
//! of an iWARP connection in the caller's network namespace, so a connect
//! issued from a kernel worker lands in the initial namespace. rrds runs
//! such calls in a task of the right namespace instead. `TWA_SIGNAL` wakes
//! the task from an interruptible sleep to run the callback promptly.

use core::ptr::addr_of_mut;
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        SpinLock,
    },
    task::Task, //
};

use super::{
    bindings,
    net::NetRef, //
};

/// A callback to run in another task's context.
pub(crate) trait TaskWork: Send + 'static {
    /// Runs in the target task's context (process context, may sleep).
    fn run(self);

    /// Called instead of `run` when the task is exiting: its namespaces are
    /// gone by the time exit runs task work.
    fn cancel(self);
}

#[repr(C)]
struct Node<T: TaskWork> {
    head: bindings::callback_head,
    item: T,
}

/// Queues `item` to run in `task`'s context. The module stays loaded until
/// it has run. Fails if the task is exiting (the item is dropped).
pub(crate) fn run_in_task<T: TaskWork>(task: &Task, item: T) -> Result {
    let node = KBox::new(
        Node {
            head: bindings::callback_head {
                next: core::ptr::null_mut(),
                func: Some(trampoline::<T>),
            },
            item,
        },
        GFP_KERNEL,
    )?;
    // SAFETY: No preconditions; balanced by the put in `trampoline` or below.
    if !unsafe { bindings::rrds_module_get() } {
        return Err(ENODEV);
    }
    let node = KBox::into_raw(node);
    // SAFETY: `task` is a live task (a reference is held by the caller); `node` is a
    // valid, initialised callback head that stays allocated until the callback runs.
    let ret = unsafe {
        bindings::task_work_add(
            task.as_ptr().cast(),
            addr_of_mut!((*node).head),
            bindings::task_work_notify_mode_TWA_SIGNAL,
        )
    };
    if ret != 0 {
        // SAFETY: Not queued, so still ours; allocated by `KBox::into_raw` above.
        drop(unsafe { KBox::from_raw(node) });
        // SAFETY: Balances the get above.
        unsafe { bindings::rrds_module_put() };
        return Err(Error::from_errno(ret));
    }
    Ok(())
}

/// # Safety
///
/// Called by the task-work machinery only, with the head of a `Node<T>`
/// queued by `run_in_task`.
unsafe extern "C" fn trampoline<T: TaskWork>(head: *mut bindings::callback_head) {
    // SAFETY: `head` is the first field of a `repr(C)` `Node<T>` leaked by
    // `run_in_task`; the machinery calls each queued callback once.
    let node = unsafe { KBox::from_raw(head.cast::<Node<T>>()) };
    let Node { item, .. } = KBox::into_inner(node);
    if exiting(&**kernel::current!()) {
        item.cancel();
    } else {
        item.run();
    }
    // SAFETY: Balances the get in `run_in_task`. Only this function's return
    // remains after the put: a window of a few instructions, the same every
    // module callback that drops its own module reference has.
    unsafe { bindings::rrds_module_put() };
}

/// Whether `task` is exiting: task work it runs then runs after its namespaces
/// are gone.
pub(crate) fn exiting(task: &Task) -> bool {
    // SAFETY: `task` is a live task (the caller holds a reference); its flags are
    // only read.
    unsafe { bindings::rrds_task_exiting(task.as_ptr().cast()) }
}

/// Whether `task` is a live user task (it has an mm and is not exiting)
/// whose network namespace is `net`: one that can run task work acting in
/// `net`. Takes the task's lock. Process context.
pub(crate) fn user_task_in(task: &Task, net: NetRef) -> bool {
    // SAFETY: `task` is a live task (the caller holds a reference); its fields are
    // read under its lock. `net` is only compared with the task's namespace pointer
    // (`net_eq`), never dereferenced, so it need not be live.
    unsafe { bindings::rrds_task_user_in_net(task.as_ptr().cast(), net.as_ptr()) }
}

/// A user task of a namespace that task work acting there can run in: the
/// one that last acted through its owner (a path's sends, a socket's).
#[pin_data]
pub(crate) struct TaskSlot {
    #[pin]
    task: SpinLock<Option<ARef<Task>>>,
    /// The address of `task`'s task (0: none), so that the same task acting
    /// again need not take the lock. Written under `task`'s lock.
    addr: Atomic<usize>,
}

impl TaskSlot {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            task <- new_spinlock!(None),
            addr: Atomic::new(0),
        })
    }

    /// Records the current thread's group leader, which normally lives as
    /// long as its process and so its sockets, or the thread itself if the
    /// leader is not a live user task of `net` (a thread may `setns` alone);
    /// kernel threads are not recorded. Costs one atomic load while the same
    /// task acts again. Process context.
    pub(crate) fn note_current(&self, net: NetRef) {
        let task = kernel::current!();
        let leader = task.group_leader();
        let known = self.addr.load(Relaxed);
        if known == task.as_ptr() as usize
            || (known == leader.as_ptr() as usize && !exiting(leader))
        {
            return;
        }
        let chosen: &Task = if user_task_in(leader, net) {
            leader
        } else if user_task_in(task, net) {
            task
        } else {
            return;
        };
        self.set(ARef::from(chosen));
    }

    /// Records `task`.
    pub(crate) fn set(&self, task: ARef<Task>) {
        let mut slot = self.task.lock();
        self.addr.store(task.as_ptr() as usize, Relaxed);
        let old = slot.replace(task);
        drop(slot);
        drop(old);
    }

    /// The recorded task, if any.
    pub(crate) fn get(&self) -> Option<ARef<Task>> {
        self.task.lock().clone()
    }

    /// Forgets the recorded task if its address is still `addr`.
    pub(crate) fn clear_if(&self, addr: usize) {
        let mut slot = self.task.lock();
        let old = if self.addr.load(Relaxed) == addr {
            self.addr.store(0, Relaxed);
            slot.take()
        } else {
            None
        };
        drop(slot);
        drop(old);
    }
}
