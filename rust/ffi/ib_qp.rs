// SPDX-License-Identifier: GPL-2.0

//! Queue pairs rrds creates itself with `ib_create_qp` (not through rdma_cm):
//! the XRC manager's target QPs, their SRQs and XRC domains.

use core::ptr::NonNull;
use kernel::{
    error::{
        from_err_ptr,
        to_result, //
    },
    prelude::*,
    sync::Arc,
};

use super::{
    bindings,
    ib_cq::{
        recv_wr,
        CompletionHandler,
        CompletionQueue,
        Cqe, //
    },
    ib_device::DeviceRef,
    ib_pd::ProtectionDomain,
    rdma_cm::{
        CmHandler,
        CmIdRef, //
    }, //
};

/// IB QP states (`enum ib_qp_state`).
pub(crate) const QPS_RESET: u32 = bindings::ib_qp_state_IB_QPS_RESET;
pub(crate) const QPS_INIT: u32 = bindings::ib_qp_state_IB_QPS_INIT;
pub(crate) const QPS_RTR: u32 = bindings::ib_qp_state_IB_QPS_RTR;
pub(crate) const QPS_RTS: u32 = bindings::ib_qp_state_IB_QPS_RTS;
pub(crate) const QPS_ERR: u32 = bindings::ib_qp_state_IB_QPS_ERR;

/// What the async events of a QP, or of an SRQ, are delivered to.
///
/// Drivers call this in any context, hard interrupts included, possibly on
/// several CPUs at once: it must not sleep.
///
/// # Safety
///
/// Every [`OwnedQp<Self>`], and every [`SharedReceiveQueue`] created with a
/// `Self`, is dropped before that `Self`.
pub(crate) unsafe trait QpEventHandler: Sync + 'static {
    fn qp_event(&self, event: u32);
}

/// A shared receive queue: receives posted on it complete on the CQ of
/// whichever QP on it took them.
///
/// # Invariants
///
/// `self.0` came from `ib_create_srq` and is destroyed only by `drop`, after the
/// QPs on it (its owner's drop order).
pub(crate) struct SharedReceiveQueue(NonNull<bindings::ib_srq>);

// SAFETY: ib_core allows destroying an SRQ from any process-context thread.
unsafe impl Send for SharedReceiveQueue {}
// SAFETY: rrds only passes the pointer to ib_core.
unsafe impl Sync for SharedReceiveQueue {}

impl SharedReceiveQueue {
    /// An SRQ in `pd` whose events (`IB_EVENT_SRQ_LIMIT_REACHED`,
    /// `IB_EVENT_SRQ_ERR`) go to `context`, which outlives it
    /// (`QpEventHandler`'s safety requirement).
    pub(crate) fn create<H: QpEventHandler>(
        pd: &ProtectionDomain,
        max_wr: u32,
        context: &Arc<H>,
    ) -> Result<Self> {
        let mut attr = bindings::ib_srq_init_attr {
            event_handler: Some(event_trampoline::<H>),
            srq_context: Arc::as_ptr(context).cast_mut().cast(),
            attr: bindings::ib_srq_attr {
                max_wr,
                max_sge: 1,
                ..Default::default()
            },
            srq_type: bindings::ib_srq_type_IB_SRQT_BASIC,
            ..Default::default()
        };
        // SAFETY: `pd` is live; `attr` is a valid attribute block ib_core copies;
        // the caller keeps `context` valid.
        let srq = from_err_ptr(unsafe { bindings::rrds_ib_create_srq(pd.as_raw(), &mut attr) })?;
        // INVARIANT: created just above.
        NonNull::new(srq).map(Self).ok_or(ENOMEM)
    }

    /// Arms the SRQ's limit: the driver raises `IB_EVENT_SRQ_LIMIT_REACHED`
    /// once, when fewer than `limit` receives are left posted, and disarms.
    /// Arming an armed SRQ only sets the limit again.
    ///
    /// Errors: the driver's; `EINVAL` if fewer than `limit` are posted now.
    pub(crate) fn arm_limit(&self, limit: u32) -> Result {
        let mut attr = bindings::ib_srq_attr {
            srq_limit: limit,
            ..Default::default()
        };
        // SAFETY: The SRQ is live (type invariant); `attr` is valid for the call.
        to_result(unsafe {
            bindings::ib_modify_srq(
                self.0.as_ptr(),
                &mut attr,
                bindings::ib_srq_attr_mask_IB_SRQ_LIMIT,
            )
        })
    }

    /// Posts one receive into `sges`, completing to `cqe`. The memory the
    /// SGEs name stays mapped until the SRQ is destroyed. Not for handlers
    /// whose requests hold a reference (`EINVAL`): a receive still posted
    /// when the SRQ goes never completes.
    pub(crate) fn post_recv<T: CompletionHandler>(
        &self,
        cqe: &Cqe<T>,
        sges: &mut [bindings::ib_sge],
    ) -> Result {
        if T::REQUEST_HOLDS_REFERENCE {
            return Err(EINVAL);
        }
        let wr = recv_wr(cqe, sges);
        cqe.posting(true, || {
            let mut bad = core::ptr::null();
            // SAFETY: The SRQ is live (type invariant); the request and its SGEs are
            // valid for the call (drivers copy them before returning).
            to_result(unsafe { bindings::rrds_ib_post_srq_recv(self.0.as_ptr(), &wr, &mut bad) })
        })
    }
}

impl Drop for SharedReceiveQueue {
    fn drop(&mut self) {
        // SAFETY: Created by `create`; no QP uses it any more (type invariant).
        unsafe { bindings::rrds_ib_destroy_srq(self.0.as_ptr()) };
    }
}

/// An XRC domain of rrds's own (no inode: not shared with userspace).
///
/// # Invariants
///
/// `self.0` came from `ib_alloc_xrcd_user` and is freed only by `drop`, after
/// its target QPs (its owner's drop order).
pub(crate) struct XrcDomain(NonNull<bindings::ib_xrcd>);

// SAFETY: As for `SharedReceiveQueue`.
unsafe impl Send for XrcDomain {}
// SAFETY: As for `SharedReceiveQueue`.
unsafe impl Sync for XrcDomain {}

impl XrcDomain {
    pub(crate) fn alloc(device: DeviceRef) -> Result<Self> {
        let device = device.as_ptr();
        // SAFETY: `device` is registered (the caller holds its PD, taken away before
        // removal); a kernel XRCD has no inode and no udata.
        let xrcd = from_err_ptr(unsafe {
            bindings::ib_alloc_xrcd_user(device, core::ptr::null_mut(), core::ptr::null_mut())
        })?;
        // INVARIANT: allocated just above.
        NonNull::new(xrcd).map(Self).ok_or(ENOMEM)
    }
}

impl Drop for XrcDomain {
    fn drop(&mut self) {
        // SAFETY: Allocated by `alloc`; its target QPs are gone (type invariant).
        let ret = unsafe { bindings::ib_dealloc_xrcd_user(self.0.as_ptr(), core::ptr::null_mut()) };
        if ret != 0 {
            pr_warn!("XRC domain not freed: {}\n", ret);
        }
    }
}

/// How to create a target QP.
pub(crate) enum TargetKind<'a> {
    /// An RC QP whose receives come from `srq`, completions to `cq`.
    RcOnSrq {
        srq: &'a SharedReceiveQueue,
        cq: &'a CompletionQueue,
    },
    /// An XRC target QP in `xrcd`.
    XrcTarget { xrcd: &'a XrcDomain },
}

/// A QP created with `ib_create_qp`, with its events going to a handler `H`.
///
/// # Invariants
///
/// `self.0` came from `ib_create_qp` with `H`'s trampoline and a context that
/// outlives the QP (`QpEventHandler`'s safety requirement), and is destroyed
/// only by `drop`.
pub(crate) struct OwnedQp<H: QpEventHandler> {
    qp: NonNull<bindings::ib_qp>,
    _handler: core::marker::PhantomData<*const H>,
}

// SAFETY: ib_core allows modifying, querying and destroying a QP from any
// process-context thread; it serialises internally.
unsafe impl<H: QpEventHandler> Send for OwnedQp<H> {}
// SAFETY: See `Send`.
unsafe impl<H: QpEventHandler> Sync for OwnedQp<H> {}

impl<H: QpEventHandler> OwnedQp<H> {
    /// Creates a QP of `kind` whose events go to `context`, which outlives
    /// it (`QpEventHandler`'s safety requirement).
    pub(crate) fn create(
        pd: &ProtectionDomain,
        kind: TargetKind<'_>,
        context: &Arc<H>,
    ) -> Result<Self> {
        let mut attr = bindings::ib_qp_init_attr {
            event_handler: Some(event_trampoline::<H>),
            qp_context: Arc::as_ptr(context).cast_mut().cast(),
            sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_REQ_WR,
            ..Default::default()
        };
        match kind {
            TargetKind::RcOnSrq { srq, cq } => {
                attr.qp_type = bindings::ib_qp_type_IB_QPT_RC;
                attr.send_cq = cq.as_raw();
                attr.recv_cq = cq.as_raw();
                attr.srq = srq.0.as_ptr();
                // Room for the drain marker only: rrds never sends on a target.
                attr.cap.max_send_wr = 1;
                attr.cap.max_send_sge = 1;
            }
            TargetKind::XrcTarget { xrcd } => {
                attr.qp_type = bindings::ib_qp_type_IB_QPT_XRC_TGT;
                attr.xrcd = xrcd.0.as_ptr();
            }
        }
        // SAFETY: `pd` is live; `attr` is valid and its CQ, SRQ and XRCD outlive the QP
        // (the owner drops them after it); the caller keeps `context` valid.
        let qp = from_err_ptr(unsafe { bindings::rrds_ib_create_qp(pd.as_raw(), &mut attr) })?;
        // INVARIANT: created just above with `H`'s trampoline.
        NonNull::new(qp)
            .map(|qp| Self {
                qp,
                _handler: core::marker::PhantomData,
            })
            .ok_or(ENOMEM)
    }

    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: A live QP (type invariant); `qp_num` is fixed at creation.
        unsafe { (*self.qp.as_ptr()).qp_num }
    }

    /// Moves the QP to `state`; to INIT with port `port` and remote read/write access.
    pub(crate) fn modify_state(&self, state: u32, port: u32) -> Result {
        let mut attr = bindings::ib_qp_attr {
            qp_state: state,
            ..Default::default()
        };
        let mut mask = bindings::ib_qp_attr_mask_IB_QP_STATE;
        if state == QPS_INIT {
            attr.port_num = port;
            attr.pkey_index = 0;
            attr.qp_access_flags = (bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
                | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ)
                as c_int;
            mask |= bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX
                | bindings::ib_qp_attr_mask_IB_QP_PORT
                | bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
        }
        // SAFETY: A live QP (type invariant); `attr` is valid for the call.
        to_result(unsafe { bindings::ib_modify_qp(self.qp.as_ptr(), &mut attr, mask as c_int) })
    }

    /// Moves the QP to `state` with the attributes rdma_cm gives for the
    /// connection of `id` (a connect request the QP is accepted for).
    pub(crate) fn modify_for<C: CmHandler>(&self, id: &CmIdRef<C>, state: u32) -> Result {
        let (mut attr, mask) = id.qp_attr(state)?;
        // SAFETY: A live QP (type invariant); `attr` is valid for the call.
        to_result(unsafe { bindings::ib_modify_qp(self.qp.as_ptr(), &mut attr, mask) })
    }

    /// The QP's state as the driver reports it.
    pub(crate) fn query_state(&self) -> Result<u32> {
        let mut attr = bindings::ib_qp_attr::default();
        let mut init = bindings::ib_qp_init_attr::default();
        // SAFETY: A live QP (type invariant); both blocks are valid for the call.
        to_result(unsafe {
            bindings::ib_query_qp(
                self.qp.as_ptr(),
                &mut attr,
                bindings::ib_qp_attr_mask_IB_QP_STATE as c_int,
                &mut init,
            )
        })?;
        Ok(attr.qp_state)
    }

    /// Waits until every posted send has completed, after moving the QP to
    /// error. Only for QPs with a send queue and an ib_core-polled CQ.
    pub(crate) fn drain_send_queue(&self) {
        // SAFETY: A live QP (type invariant) with a send CQ from `ib_alloc_cq`.
        unsafe { bindings::ib_drain_sq(self.qp.as_ptr()) };
    }
}

impl<H: QpEventHandler> Drop for OwnedQp<H> {
    fn drop(&mut self) {
        // SAFETY: Created by `create`, destroyed only here (type invariant). Once this
        // returns the driver calls the event handler no more.
        let ret = unsafe { bindings::rrds_ib_destroy_qp(self.qp.as_ptr()) };
        if ret != 0 {
            pr_warn!("target QP not destroyed: {}\n", ret);
        }
    }
}

/// # Safety
///
/// Called by ib_core only, for a QP created by [`OwnedQp::create`] with `H`
/// or an SRQ created by [`SharedReceiveQueue::create`] with `H`.
unsafe extern "C" fn event_trampoline<H: QpEventHandler>(
    event: *mut bindings::ib_event,
    context: *mut c_void,
) {
    // SAFETY: ib_core passes a valid event and the context given at creation, which
    // outlives the QP (`QpEventHandler`'s safety requirement).
    let (event, handler) = unsafe { ((*event).event, &*context.cast::<H>()) };
    handler.qp_event(event);
}
