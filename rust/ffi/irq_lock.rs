// SPDX-License-Identifier: GPL-2.0

//! A spinlock that also disables interrupts (`spin_lock_irqsave`), for state
//! shared with handlers that ib_core drivers call in any context, hard
//! interrupts included (QP async events). The kernel crate of 7.2 has none.

use kernel::sync::lock::{
    Backend,
    Lock, //
};

use super::bindings;

/// A [`Lock`] that disables local interrupts while held.
pub(crate) type IrqSpinLock<T> = Lock<T, IrqSpinLockBackend>;

/// Creates an [`IrqSpinLock`] initialiser with a lock class of its own.
#[macro_export]
macro_rules! new_irq_spinlock {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::ffi::irq_lock::IrqSpinLock::new(
            $inner,
            kernel::optional_name!($($name)?),
            kernel::static_lock_class!(),
        )
    };
}

/// The backend of [`IrqSpinLock`]: the saved interrupt flags are the guard's state.
pub(crate) struct IrqSpinLockBackend;

// SAFETY: `lock` leaves the spinlock held with interrupts off until `unlock` restores
// the flags `lock` saved; only one owner can hold a spinlock at a time.
unsafe impl Backend for IrqSpinLockBackend {
    type State = bindings::spinlock_t;
    type GuardState = usize;

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: The caller passes a pointer valid for writes and a name and key that live
        // forever; the kernel crate's and rrds's `lock_class_key` are the same C type.
        unsafe { bindings::rrds_spin_lock_init(ptr, name, key.cast()) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The caller guarantees `init` ran on `ptr`.
        unsafe { bindings::rrds_spin_lock_irqsave(ptr) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        let mut flags = 0;
        // SAFETY: The caller guarantees `init` ran on `ptr`; `flags` is a valid out pointer.
        unsafe { bindings::rrds_spin_trylock_irqsave(ptr, &mut flags) }.then_some(flags)
    }

    unsafe fn unlock(ptr: *mut Self::State, flags: &Self::GuardState) {
        // SAFETY: The caller owns the lock; `flags` are the ones its `lock` saved.
        unsafe { bindings::rrds_spin_unlock_irqrestore(ptr, *flags) }
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: The caller guarantees `init` ran on `ptr`.
        unsafe { bindings::rrds_spin_assert_is_held(ptr) }
    }
}
