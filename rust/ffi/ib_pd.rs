// SPDX-License-Identifier: GPL-2.0

//! `struct ib_pd`: the protection domains rrds allocates on each device.
//!
//! One PD per namespace and device holds everything rrds registers or
//! creates there for that namespace (`device.rs`).

use core::ptr::{
    self,
    NonNull, //
};
use kernel::{
    error::from_err_ptr,
    prelude::*, //
};

use super::{
    bindings,
    ib_device::DeviceRef, //
};

/// A kernel protection domain.
///
/// # Invariants
///
/// `self.0` was returned by `__ib_alloc_pd` and is deallocated only by `drop`;
/// its device stays registered until then (the owner drops it in the
/// ib_client `remove` callback at the latest).
pub(crate) struct ProtectionDomain(NonNull<bindings::ib_pd>);

// SAFETY: ib_core's PD calls may be made from any thread.
unsafe impl Send for ProtectionDomain {}
// SAFETY: rrds only reads through shared references; ib_core serialises the rest.
unsafe impl Sync for ProtectionDomain {}

impl ProtectionDomain {
    /// Allocates a PD on `device`, charged to "rrds" in `rdma resource show pd`.
    pub(crate) fn alloc(device: DeviceRef) -> Result<Self> {
        // SAFETY: `device` is registered (DeviceRef invariant); the caller name is a
        // static NUL-terminated string, which ib_core keeps a pointer to.
        let pd = unsafe { bindings::__ib_alloc_pd(device.as_ptr(), 0, c"rrds".as_char_ptr()) };
        let pd = from_err_ptr(pd)?;
        // INVARIANT: allocated just above.
        NonNull::new(pd).map(Self).ok_or(ENOMEM)
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_pd {
        self.0.as_ptr()
    }

    /// The lkey that covers all of kernel memory, for SGEs of DMA-mapped pages.
    pub(crate) fn local_dma_lkey(&self) -> u32 {
        // SAFETY: The PD is live (type invariant); the field is fixed at allocation.
        unsafe { (*self.0.as_ptr()).local_dma_lkey }
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: Allocated by `alloc`, not yet deallocated, and nothing rrds still holds
        // uses it (objects on a PD are dropped before it). A kernel PD has no udata.
        let ret = unsafe { bindings::ib_dealloc_pd_user(self.0.as_ptr(), ptr::null_mut()) };
        if ret != 0 {
            pr_warn!("deallocating a protection domain failed: {}\n", ret);
        }
    }
}
