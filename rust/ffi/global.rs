// SPDX-License-Identifier: GPL-2.0

//! The crate's global locks (`kernel::sync::global_lock!` statics) are
//! initialised in module init, before anything that could take one is
//! registered: [`ModuleInit`] is the proof that this is that moment.

use core::marker::PhantomData;

use kernel::sync::{
    GlobalLock,
    GlobalLockBackend, //
};

/// Module init is running, and nothing that takes a global lock of the
/// crate (the ib_client, the pernet operations, the socket family, the
/// workqueue and watchdog) is registered or started yet.
///
/// # Invariants
///
/// Only module init makes one, once, before it registers any of those, and
/// drops it before it does; each module's `init` it is passed to runs once.
pub(crate) struct ModuleInit {
    /// Neither `Send` nor `Sync`: it stays in module init's task.
    _not_send: PhantomData<*mut ()>,
}

impl ModuleInit {
    /// # Safety
    ///
    /// Called once, by module init, before it registers or starts anything
    /// that may take a global lock of the crate; the result is dropped
    /// before that, and handed to each module's `init` once.
    pub(crate) unsafe fn begin() -> Self {
        // INVARIANT: The caller's promise.
        Self {
            _not_send: PhantomData,
        }
    }

    /// Initialises `lock`, once: each module's `init` names each of its
    /// global locks once.
    pub(crate) fn init_lock<B: GlobalLockBackend>(&self, lock: &'static GlobalLock<B>) {
        // SAFETY: By the type invariant nothing can use `lock` yet, and the
        // one `init` call of its module initialises it once.
        unsafe { lock.init() };
    }
}
