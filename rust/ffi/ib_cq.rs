// SPDX-License-Identifier: GPL-2.0

//! `struct ib_cq`, `struct ib_cqe` and posting on a QP: the verbs data path.
//!
//! Most CQs come from `ib_alloc_cq` with `IB_POLL_WORKQUEUE`: ib_core polls
//! them and calls each work request's `ib_cqe::done` from its `ib_comp_wq`, in
//! process context. A link's receive CQ is polled by rrds itself
//! ([`CompletionQueue::alloc_busy_pollable`]): from its own workqueue when the
//! device signals a completion, and from a busy-polling `recvmsg`, one poller
//! at a time, so handlers still see completions in order, in process context.
//! Handlers may take mutexes and allocate, but must not wait on anything that
//! waits for the CQ (its own teardown, for one).

use core::{
    ptr::{
        self,
        NonNull, //
    },
    sync::atomic::{
        AtomicU32,
        Ordering, //
    },
};
use kernel::{
    error::{
        from_err_ptr,
        to_result, //
    },
    new_mutex, new_work,
    page::Page,
    page::PAGE_SIZE,
    prelude::*,
    sync::{
        Arc,
        ArcBorrow,
        Mutex, //
    },
    types::Opaque,
    workqueue::{
        impl_has_work,
        Work,
        WorkItem, //
    },
};

use super::{
    bindings,
    ib_device::DeviceRef,
    ib_mr::PinnedPage,
    page::PageBytes,
    workqueue, //
};

/// What a work request's completion is handed to: a type that lives in an
/// [`Arc`] and holds its [`Cqe`]s as fields.
///
/// # Safety
///
/// Every `Cqe<Self>` is built by [`Cqe::new`] as a field of the `Self` it
/// names, while that `Self` is initialised inside an `Arc<Self>`. Unless
/// `REQUEST_HOLDS_REFERENCE`, the `Self` outlives every request posted with
/// its `Cqe`s (their QPs are drained or destroyed first).
pub(crate) unsafe trait CompletionHandler: Send + Sync + Sized + 'static {
    /// Whether every request posted with the handler's [`Cqe`]s holds a
    /// reference on the handler until it completes (given up after
    /// [`Self::completed`] returns): for a handler nothing else keeps alive
    /// while its requests are outstanding. Such requests must be signalled.
    const REQUEST_HOLDS_REFERENCE: bool = false;

    /// A completion of a work request posted with the handler's [`Cqe`]
    /// tagged `tag`. Runs in process context: on ib_core's completion
    /// workqueue, or for a busy-pollable CQ on rrds's or in a busy-polling
    /// `recvmsg`, one completion of a CQ at a time.
    fn completed(this: ArcBorrow<'_, Self>, tag: u32, wc: &WorkCompletion<'_>);
}

/// A completion callback, embedded in (and pointing back to) its handler `T`.
///
/// # Invariants
///
/// `owner` points to the `T` this `Cqe` is a field of, inside an `Arc<T>`
/// (`CompletionHandler`'s safety requirement). Unless
/// `T::REQUEST_HOLDS_REFERENCE`, that `T` outlives every request posted with
/// this `Cqe`; otherwise each posted request holds a reference on it (taken
/// by [`Cqe::posting`], given up by the completion).
#[repr(C)]
pub(crate) struct Cqe<T: CompletionHandler> {
    raw: Opaque<bindings::ib_cqe>,
    owner: *const T,
    tag: u32,
}

// SAFETY: The `Cqe` only hands out `ArcBorrow<T>`; `T: Sync + Send` makes that
// shareable.
unsafe impl<T: CompletionHandler> Sync for Cqe<T> {}
// SAFETY: See `Sync`.
unsafe impl<T: CompletionHandler> Send for Cqe<T> {}

impl<T: CompletionHandler> Cqe<T> {
    /// A callback for `owner`, the `T` being initialised in its `Arc` with
    /// this `Cqe` as a field (pin-init's `&this`); `tag` tells the owner's
    /// callbacks apart.
    pub(crate) fn new(owner: NonNull<T>, tag: u32) -> Self {
        Self {
            raw: Opaque::new(bindings::ib_cqe {
                done: Some(done_trampoline::<T>),
            }),
            // INVARIANT: `T`'s implementation of `CompletionHandler` guarantees it.
            owner: owner.as_ptr(),
            tag,
        }
    }

    pub(super) fn as_raw(&self) -> *mut bindings::ib_cqe {
        self.raw.get()
    }

    /// Runs `post`, which posts one request with this `Cqe`, taking the
    /// request's reference on the owner first if it holds one.
    pub(super) fn posting(&self, signalled: bool, post: impl FnOnce() -> Result) -> Result {
        if !T::REQUEST_HOLDS_REFERENCE {
            return post();
        }
        if !signalled {
            // Its success would never complete: the reference would leak.
            return Err(EINVAL);
        }
        // SAFETY: The owner is alive inside its `Arc` (type invariant): `self` is
        // one of its fields and borrowed.
        let owner: Arc<T> = unsafe { ArcBorrow::from_raw(self.owner) }.into();
        let held = Arc::into_raw(owner);
        let posted = post();
        if posted.is_err() {
            // SAFETY: Taken just above for a request that was not posted.
            drop(unsafe { Arc::from_raw(held) });
        }
        posted
    }
}

/// # Safety
///
/// Called by ib_core only, for a work request posted with a `Cqe<T>`.
unsafe extern "C" fn done_trampoline<T: CompletionHandler>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: ib_core passes a valid completion; `wr_cqe` is the `Cqe<T>` the request
    // was posted with (its `raw` is the first field of a `repr(C)` struct).
    let (wc, cqe) = unsafe { (&*wc, (*wc).__bindgen_anon_1.wr_cqe.cast::<Cqe<T>>()) };
    // SAFETY: By the `Cqe` invariant, `owner` is inside an `Arc` and alive until the
    // request completes (the owner outlives it, or the request holds a reference).
    let (owner, tag) = unsafe { ((*cqe).owner, (*cqe).tag) };
    // SAFETY: As above.
    let this = unsafe { ArcBorrow::from_raw(owner) };
    T::completed(this, tag, &WorkCompletion(wc));
    if T::REQUEST_HOLDS_REFERENCE {
        // SAFETY: The request held a reference, taken by `Cqe::posting` with
        // `Arc::into_raw` of the same pointer; this is its only completion.
        drop(unsafe { Arc::from_raw(owner) });
    }
}

/// One receive request of `sges`, completing to `cqe`, for a QP or an SRQ.
pub(super) fn recv_wr<T: CompletionHandler>(
    cqe: &Cqe<T>,
    sges: &mut [bindings::ib_sge],
) -> bindings::ib_recv_wr {
    bindings::ib_recv_wr {
        next: core::ptr::null_mut(),
        __bindgen_anon_1: bindings::ib_recv_wr__bindgen_ty_1 {
            wr_cqe: cqe.as_raw(),
        },
        sg_list: sges.as_mut_ptr(),
        num_sge: sges.len() as c_int,
    }
}

/// A work completion, borrowed inside a completion callback.
pub(crate) struct WorkCompletion<'a>(&'a bindings::ib_wc);

impl WorkCompletion<'_> {
    pub(crate) fn is_success(&self) -> bool {
        self.0.status == bindings::ib_wc_status_IB_WC_SUCCESS
    }

    pub(crate) fn status(&self) -> u32 {
        self.0.status
    }

    pub(crate) fn byte_len(&self) -> usize {
        self.0.byte_len as usize
    }

    /// The QP the request was posted on.
    pub(crate) fn qp(&self) -> QpKey {
        QpKey(self.0.qp as usize)
    }
}

/// A QP's identity, to tell which QP a completion came from. Compared,
/// never followed: the QP may be gone by then.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpKey(usize);

/// A completion queue.
///
/// # Invariants
///
/// `cq` came from `ib_alloc_cq` (`poller` is `None`) or from `ib_create_cq`
/// with `poller` as its context (`poller` is `Some` and holds `cq` until
/// `drop`), and is freed only by `drop`, after every QP using it is destroyed
/// (its owner's teardown order).
pub(crate) struct CompletionQueue {
    cq: NonNull<bindings::ib_cq>,
    poller: Option<Arc<CqPoller>>,
}

// SAFETY: ib_core allows freeing a CQ from any process-context thread.
unsafe impl Send for CompletionQueue {}
// SAFETY: rrds only passes the pointer to ib_core, which serialises.
unsafe impl Sync for CompletionQueue {}

impl CompletionQueue {
    /// A CQ of `entries` on `device`, polled from ib_core's workqueue.
    pub(crate) fn alloc(device: DeviceRef, entries: u32) -> Result<Self> {
        let device = device.as_ptr();
        // SAFETY: `device` is a registered device (the caller holds an rdma_cm id bound
        // to it, or is inside its ib_client callbacks).
        let cq = unsafe {
            bindings::rrds_ib_alloc_cq(
                device,
                core::ptr::null_mut(),
                entries as c_int,
                bindings::ib_poll_context_IB_POLL_WORKQUEUE,
            )
        };
        let cq = from_err_ptr(cq)?;
        // INVARIANT: allocated just above.
        let cq = NonNull::new(cq).ok_or(ENOMEM)?;
        Ok(Self { cq, poller: None })
    }

    /// A CQ of `entries` on `device` that rrds polls: from its CQ workqueue
    /// when the device signals a completion, and through
    /// [`CqPoller::spin`].
    pub(crate) fn alloc_busy_pollable(device: DeviceRef, entries: u32) -> Result<Self> {
        let poller = Arc::pin_init(
            pin_init!(CqPoller {
                cq <- new_mutex!(None, "rrds_cq_poll"),
                spinners: AtomicU32::new(0),
                work <- new_work!("rrds_cq_poll"),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `device` is registered (as in `alloc`); the context is the poller,
        // which `Self` keeps alive until the CQ is destroyed (`drop`), so the
        // handler can always borrow it.
        let cq = unsafe {
            bindings::rrds_ib_create_cq(
                device.as_ptr(),
                Some(cq_event_trampoline),
                Arc::as_ptr(&poller).cast_mut().cast(),
                entries as c_int,
            )
        };
        let cq = NonNull::new(from_err_ptr(cq)?).ok_or(ENOMEM)?;
        // Nobody else can hold the lock yet, so a try takes it, and unlike a
        // lock adds no order against the caller's locks for lockdep (a link is
        // built under its path's lock, which completion handlers take).
        match poller.cq.try_lock() {
            Some(mut slot) => *slot = Some(RawCq(cq)),
            None => {
                // SAFETY: Created just above, used by no QP yet.
                unsafe { bindings::ib_destroy_cq_user(cq.as_ptr(), ptr::null_mut()) };
                return Err(EBUSY);
            }
        }
        // SAFETY: A live CQ: armed for its first completion.
        unsafe { bindings::rrds_ib_req_notify_cq(cq.as_ptr()) };
        // INVARIANT: created just above with `poller` as its context; the poller
        // holds it.
        Ok(Self {
            cq,
            poller: Some(poller),
        })
    }

    /// What busy-polls this CQ, if rrds polls it.
    pub(crate) fn poller(&self) -> Option<&Arc<CqPoller>> {
        self.poller.as_ref()
    }

    pub(super) fn as_raw(&self) -> *mut bindings::ib_cq {
        self.cq.as_ptr()
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        match &self.poller {
            // SAFETY: Allocated by `alloc`; every QP on it is gone (type invariant).
            None => unsafe { bindings::ib_free_cq(self.cq.as_ptr()) },
            Some(poller) => {
                // Later polls find nothing. Tried first: a CQ dropped before its QP
                // ever ran (a failed build, under its path's lock) has no other
                // poller, and a try adds no lock order for lockdep. A live link's
                // is dropped with no lock held, and waits for a poll in progress.
                match poller.cq.try_lock() {
                    Some(mut cq) => drop(cq.take()),
                    None => drop(poller.cq.lock().take()),
                }
                // SAFETY: Created by `alloc_busy_pollable`; every QP on it is gone
                // (type invariant) and no poller can reach it any more.
                let ret =
                    unsafe { bindings::ib_destroy_cq_user(self.cq.as_ptr(), ptr::null_mut()) };
                if ret != 0 {
                    pr_warn!("CQ not destroyed: {}\n", ret);
                }
            }
        }
    }
}

/// The CQ pointer a [`CqPoller`] polls.
struct RawCq(NonNull<bindings::ib_cq>);

// SAFETY: ib_core allows polling a CQ from any thread; `CqPoller` serialises.
unsafe impl Send for RawCq {}

impl RawCq {
    /// Hands up to `budget` completions to their handlers; how many. Called
    /// with the poller's lock held, which makes the caller the only poller.
    fn process(&self, budget: c_int) -> c_int {
        // SAFETY: A live CQ (`CqPoller` invariant: it is taken out before the CQ is
        // destroyed), polled by the holder of the poller's lock only.
        unsafe { bindings::ib_process_cq_direct(self.0.as_ptr(), budget) }
    }

    /// Arms the CQ for its next completion; whether completions came in
    /// before it was armed (they raise no event). Lock held, as `process`.
    fn arm(&self) -> bool {
        // SAFETY: As in `process`.
        unsafe { bindings::rrds_ib_req_notify_cq(self.0.as_ptr()) > 0 }
    }
}

/// Completions one poll of a busy-pollable CQ hands to their handlers at
/// most, before the work item lets others run or a busy poll looks again.
const POLL_BUDGET: c_int = 64;

/// Polls a CQ that rrds polls itself ([`CompletionQueue::alloc_busy_pollable`]),
/// one poller at a time: the CQ's work item, queued when the device signals a
/// completion, or a busy-polling task ([`Self::spin`]).
///
/// While a task spins, the device's completion events do not queue the work
/// item, which would race the spinning task for the completion and, on the
/// CPU the device completed on, usually win: they are noted
/// (`SPIN_EVENT_MISSED`), and the last spinner to stop queues the work item
/// then, which re-arms the CQ (as NAPI's busy polling holds off a device's
/// interrupts).
///
/// # Invariants
///
/// `cq` holds the CQ while its [`CompletionQueue`] lives, and is taken
/// (under the lock) before the CQ is destroyed. `spinners` counts the live
/// [`CqSpin`]s in units of `SPINNER`, plus `SPIN_EVENT_MISSED` while an
/// event came during a spin and the work item was not queued for it.
#[pin_data]
pub(crate) struct CqPoller {
    #[pin]
    cq: Mutex<Option<RawCq>>,
    spinners: AtomicU32,
    #[pin]
    work: Work<CqPoller>,
}

/// One spinning task in [`CqPoller::spinners`].
const SPINNER: u32 = 2;
/// A completion event came while tasks were spinning.
const SPIN_EVENT_MISSED: u32 = 1;

impl_has_work! {
    impl HasWork<Self> for CqPoller { self.work }
}

impl CqPoller {
    /// Starts a busy poll: until the returned spin is dropped, completion
    /// events leave the CQ to it. Process context.
    pub(crate) fn spin(self: &Arc<Self>) -> CqSpin {
        self.spinners.fetch_add(SPINNER, Ordering::AcqRel);
        // INVARIANT: counted just above, uncounted by its drop.
        CqSpin(self.clone())
    }

    /// The device signalled a completion: queue the work item, unless a
    /// task spins on the CQ (then the last one to stop queues it). Any
    /// context.
    fn event(self: Arc<Self>) {
        let mut seen = self.spinners.load(Ordering::Acquire);
        while seen >= SPINNER {
            match self.spinners.compare_exchange(
                seen,
                seen | SPIN_EVENT_MISSED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => seen = now,
            }
        }
        // Already queued: that run polls what this event announced.
        let _ = workqueue::cq_queue().enqueue(self);
    }
}

/// A task busy-polling a [`CqPoller`]'s CQ (from [`CqPoller::spin`]).
///
/// # Invariants
///
/// Counted once in its poller's `spinners` while it lives.
pub(crate) struct CqSpin(Arc<CqPoller>);

impl CqSpin {
    /// Hands up to `budget` completions to their handlers, unless another
    /// poller is at it; how many. Process context, no lock held that a
    /// completion handler takes.
    pub(crate) fn poll(&self, budget: u32) -> usize {
        let Some(cq) = self.0.cq.try_lock() else {
            return 0;
        };
        cq.as_ref()
            .map_or(0, |raw| raw.process(budget as c_int).max(0) as usize)
    }
}

impl Drop for CqSpin {
    fn drop(&mut self) {
        let poller = &self.0;
        let before = poller.spinners.fetch_sub(SPINNER, Ordering::AcqRel);
        // The last spinner takes over the events it held off: the work item
        // polls what is left and re-arms the CQ.
        if before == SPINNER | SPIN_EVENT_MISSED
            && poller
                .spinners
                .compare_exchange(SPIN_EVENT_MISSED, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let _ = workqueue::cq_queue().enqueue(poller.clone());
        }
    }
}

impl WorkItem for CqPoller {
    type Pointer = Arc<CqPoller>;

    /// The device signalled a completion: hands what the CQ holds to the
    /// handlers, then arms it again, or comes back if more is there.
    fn run(this: Arc<CqPoller>) {
        let again = {
            let cq = this.cq.lock();
            let Some(raw) = cq.as_ref() else {
                return;
            };
            raw.process(POLL_BUDGET) >= POLL_BUDGET || raw.arm()
        };
        if again {
            let _ = workqueue::cq_queue().enqueue(this);
        }
    }
}

/// # Safety
///
/// Called by the device's driver only, for a CQ made by
/// [`CompletionQueue::alloc_busy_pollable`], whose context is its poller.
unsafe extern "C" fn cq_event_trampoline(_cq: *mut bindings::ib_cq, context: *mut c_void) {
    // SAFETY: The context is the poller inside its `Arc`, which the CQ's
    // `CompletionQueue` keeps alive until the CQ is destroyed, after which the
    // driver calls no more.
    let poller: Arc<CqPoller> =
        unsafe { ArcBorrow::<CqPoller>::from_raw(context.cast_const().cast()) }.into();
    poller.event();
}

/// A page mapped for DMA by one device, owning the page.
///
/// # Invariants
///
/// Field order: the mapping is dropped (unmapped) before the page is freed.
pub(crate) struct DmaPage {
    mapping: DmaMapping,
    page: Page,
}

/// Which way data moves through a mapping.
#[derive(Clone, Copy)]
pub(crate) enum DmaDirection {
    /// The device reads (sends).
    ToDevice,
    /// The device writes (receives).
    FromDevice,
}

impl DmaDirection {
    fn raw(self) -> bindings::dma_data_direction {
        match self {
            DmaDirection::ToDevice => bindings::dma_data_direction_DMA_TO_DEVICE,
            DmaDirection::FromDevice => bindings::dma_data_direction_DMA_FROM_DEVICE,
        }
    }
}

impl DmaPage {
    /// Maps `page` for `direction` on `device`.
    pub(crate) fn map(device: DeviceRef, page: Page, direction: DmaDirection) -> Result<Self> {
        let mapping = DmaMapping::map(device, &page, direction)?;
        Ok(Self { mapping, page })
    }

    pub(crate) fn addr(&self) -> u64 {
        self.mapping.addr
    }

    /// Copies `src` into the page at `offset`; `EINVAL` (nothing copied) if
    /// it would run past the end of the page. The device sees the bytes after
    /// [`Self::sync_for_device`].
    ///
    /// # Safety
    ///
    /// The device does not access `offset..offset + src.len()` during the
    /// call: no request posted with those bytes is outstanding.
    pub(crate) unsafe fn write_slice(&mut self, offset: usize, src: &[u8]) -> Result {
        self.page.write_slice(offset, src)
    }

    /// Fills `dst` from the page at `offset`; `EINVAL` (nothing copied) if it
    /// would run past the end of the page. What the device wrote is there
    /// after [`Self::sync_for_cpu`].
    ///
    /// # Safety
    ///
    /// The device does not write `offset..offset + dst.len()` during the
    /// call: the receive that filled those bytes has completed, and no other
    /// posted receive uses them.
    pub(crate) unsafe fn read_slice(&self, offset: usize, dst: &mut [u8]) -> Result {
        self.page.read_slice(offset, dst)
    }

    /// Makes the device's writes visible to the CPU.
    pub(crate) fn sync_for_cpu(&self, len: usize) {
        let m = &self.mapping;
        // SAFETY: The mapping is live (`DmaMapping` invariant).
        unsafe { bindings::rrds_ib_dma_sync_single_for_cpu(m.device, m.addr, len, m.direction) };
    }

    /// Makes the CPU's writes visible to the device.
    pub(crate) fn sync_for_device(&self, len: usize) {
        let m = &self.mapping;
        // SAFETY: The mapping is live (`DmaMapping` invariant).
        unsafe { bindings::rrds_ib_dma_sync_single_for_device(m.device, m.addr, len, m.direction) };
    }

    /// Unmaps and returns the page.
    pub(crate) fn unmap(self) -> Page {
        let Self { mapping, page } = self;
        drop(mapping);
        page
    }
}

/// A mapping of a page someone else owns (a message's payload, kept alive
/// beside the mapping until it is dropped).
///
/// # Invariants
///
/// `addr` maps the page for `direction` on `device` until `drop`.
pub(crate) struct DmaMapping {
    addr: u64,
    len: usize,
    device: *mut bindings::ib_device,
    direction: bindings::dma_data_direction,
}

// SAFETY: A DMA mapping may be used and released from any thread.
unsafe impl Send for DmaMapping {}
// SAFETY: Shared references only read the address.
unsafe impl Sync for DmaMapping {}

impl DmaMapping {
    /// Maps `page` on `device`; the caller keeps the page alive until the
    /// mapping is dropped.
    pub(crate) fn map(device: DeviceRef, page: &Page, direction: DmaDirection) -> Result<Self> {
        let device = device.as_ptr();
        let direction = direction.raw();
        // SAFETY: `device` is registered and `page` is a valid page.
        let addr = unsafe {
            bindings::rrds_ib_dma_map_page(device, page.as_ptr().cast(), 0, PAGE_SIZE, direction)
        };
        // SAFETY: `addr` was just returned by a mapping on `device`.
        if unsafe { bindings::rrds_ib_dma_mapping_error(device, addr) } != 0 {
            return Err(ENOMEM);
        }
        // INVARIANT: mapped just above.
        Ok(Self {
            addr,
            len: PAGE_SIZE,
            device,
            direction,
        })
    }

    /// Maps `len` bytes at `offset` of a page the caller keeps pinned (user
    /// memory of an RDMA operation) until the mapping is dropped. Any context.
    ///
    /// # Safety
    ///
    /// `page` must stay pinned while the mapping exists, beyond its borrow.
    pub(crate) unsafe fn map_pinned(
        device: DeviceRef,
        page: PinnedPage<'_>,
        offset: usize,
        len: usize,
        direction: DmaDirection,
    ) -> Result<Self> {
        let device = device.as_ptr();
        let direction = direction.raw();
        // SAFETY: `device` is registered; `page` is pinned (type invariant) as long as
        // the mapping exists (the caller's guarantee).
        let addr = unsafe {
            bindings::rrds_ib_dma_map_page(device, page.as_ptr(), offset as c_ulong, len, direction)
        };
        // SAFETY: `addr` was just returned by a mapping on `device`.
        if unsafe { bindings::rrds_ib_dma_mapping_error(device, addr) } != 0 {
            return Err(ENOMEM);
        }
        // INVARIANT: mapped just above.
        Ok(Self {
            addr,
            len,
            device,
            direction,
        })
    }

    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for DmaMapping {
    fn drop(&mut self) {
        // SAFETY: The mapping is live (type invariant) and ends here.
        unsafe {
            bindings::rrds_ib_dma_unmap_page(self.device, self.addr, self.len, self.direction)
        };
    }
}

/// A scatter/gather element of a work request.
pub(crate) fn sge(addr: u64, length: usize, lkey: u32) -> bindings::ib_sge {
    bindings::ib_sge {
        addr,
        length: length as u32,
        lkey,
    }
}

/// A QP to post on: the one an rdma_cm id created.
///
/// # Invariants
///
/// `self.0` is a live QP whose send and receive CQs are [`CompletionQueue`]s
/// (each polled by ib_core or by its [`CqPoller`]'s work item when the
/// device signals); it lives while the holder's rdma_cm id does.
#[derive(Clone, Copy)]
pub(crate) struct QpRef(NonNull<bindings::ib_qp>);

// SAFETY: Posting is thread-safe in ib_core drivers.
unsafe impl Send for QpRef {}
// SAFETY: See `Send`.
unsafe impl Sync for QpRef {}

impl QpRef {
    /// # Safety
    ///
    /// `qp` must be live for as long as the returned value is used.
    pub(crate) unsafe fn from_raw(qp: *mut bindings::ib_qp) -> Option<Self> {
        NonNull::new(qp).map(Self)
    }

    pub(super) fn as_raw(&self) -> *mut bindings::ib_qp {
        self.0.as_ptr()
    }

    pub(crate) fn key(&self) -> QpKey {
        QpKey(self.0.as_ptr() as usize)
    }

    /// The QP's number, as `rdma resource` shows it (`lqpn`).
    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: A live QP (type invariant); `qp_num` is fixed at creation.
        unsafe { (*self.0.as_ptr()).qp_num }
    }

    /// Posts one signalled SEND of `sges`, completing to `cqe`; `solicited`
    /// raises a solicited event at the receiver (upstream peers only look at
    /// their receive CQ on those).
    pub(crate) fn post_send<T: CompletionHandler>(
        &self,
        cqe: &Cqe<T>,
        sges: &mut [bindings::ib_sge],
        solicited: bool,
    ) -> Result {
        self.post_send_fenced(cqe, sges, solicited, false, true)
    }

    /// As `post_send`; with `fence`, the SEND waits for earlier RDMA READs
    /// of the QP to complete (`IB_SEND_FENCE`). Without `signalled` it
    /// completes silently when it succeeds, a failure or flush is still
    /// reported (the QP signals requested completions only).
    pub(crate) fn post_send_fenced<T: CompletionHandler>(
        &self,
        cqe: &Cqe<T>,
        sges: &mut [bindings::ib_sge],
        solicited: bool,
        fence: bool,
        signalled: bool,
    ) -> Result {
        let mut flags = 0;
        if signalled {
            flags |= bindings::ib_send_flags_IB_SEND_SIGNALED;
        }
        if solicited {
            flags |= bindings::ib_send_flags_IB_SEND_SOLICITED;
        }
        if fence {
            flags |= bindings::ib_send_flags_IB_SEND_FENCE;
        }
        let wr = bindings::ib_send_wr {
            next: core::ptr::null_mut(),
            __bindgen_anon_1: bindings::ib_send_wr__bindgen_ty_1 {
                wr_cqe: cqe.as_raw(),
            },
            sg_list: sges.as_mut_ptr(),
            num_sge: sges.len() as c_int,
            opcode: bindings::ib_wr_opcode_IB_WR_SEND,
            send_flags: flags as c_int,
            ..Default::default()
        };
        cqe.posting(signalled, || {
            let mut bad = core::ptr::null();
            // SAFETY: The QP is live (type invariant); the request and its SGEs are
            // valid for the call (drivers copy them before returning).
            to_result(unsafe { bindings::rrds_ib_post_send(self.0.as_ptr(), &wr, &mut bad) })
        })
    }

    /// Posts one receive of `sges`, completing to `cqe`.
    pub(crate) fn post_recv<T: CompletionHandler>(
        &self,
        cqe: &Cqe<T>,
        sges: &mut [bindings::ib_sge],
    ) -> Result {
        let wr = recv_wr(cqe, sges);
        // A receive always completes.
        cqe.posting(true, || {
            let mut bad = core::ptr::null();
            // SAFETY: As in `post_send_fenced`.
            to_result(unsafe { bindings::rrds_ib_post_recv(self.0.as_ptr(), &wr, &mut bad) })
        })
    }

    /// Moves the QP to the error state (fault injection): every outstanding
    /// and later request completes flushed. Process context.
    pub(crate) fn force_error(&self) -> Result {
        let mut attr = bindings::ib_qp_attr {
            qp_state: bindings::ib_qp_state_IB_QPS_ERR,
            ..Default::default()
        };
        // SAFETY: The QP is live (type invariant); `attr` is valid for the call.
        to_result(unsafe {
            bindings::ib_modify_qp(
                self.0.as_ptr(),
                &mut attr,
                bindings::ib_qp_attr_mask_IB_QP_STATE as c_int,
            )
        })
    }

    /// The QP's state as the driver reports it (`ib_query_qp`).
    pub(crate) fn state(&self) -> Result<u32> {
        let mut attr = bindings::ib_qp_attr::default();
        let mut init = bindings::ib_qp_init_attr::default();
        // SAFETY: The QP is live (type invariant); both blocks are valid for the call.
        to_result(unsafe {
            bindings::ib_query_qp(
                self.0.as_ptr(),
                &mut attr,
                bindings::ib_qp_attr_mask_IB_QP_STATE as c_int,
                &mut init,
            )
        })?;
        Ok(attr.qp_state)
    }

    /// Moves the QP to error and waits until every posted request has completed
    /// (flushed). Process context, never from this QP's completion handlers.
    pub(crate) fn drain(&self) {
        // SAFETY: The QP is live and its CQs are polled without the caller (type
        // invariant).
        unsafe { bindings::ib_drain_qp(self.0.as_ptr()) };
    }
}
