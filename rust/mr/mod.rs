// SPDX-License-Identifier: GPL-2.0

//! Memory registration: `RDS_GET_MR` / `RDS_FREE_MR` through the
//! registration QP of the socket's device (Documentation/design.rst,
//! "Memory registration").
//!
//! An MR moves through `Registering` (REG_MR posted) to `Valid`, then
//! `Invalidating` (LOCAL_INV posted) to `Released`, its fast-reg MR back in
//! the device's pool. A REG or INV that fails or is flushed leaves the MR in
//! an unknown state: it becomes `Stale` and is deregistered, never reused.
//! Completions only record the outcome; unmapping, unpinning and pool
//! returns run on the module's workqueue, on iWARP devices after a fence
//! (fence.rs): no READ response may still be sending from the pages.
//!
//! This file holds the MR state machine; each device's MR state is in
//! device_state.rs, the pools of free MRs in pool.rs, a socket's table of
//! MRs in socket.rs, the registration QP in regqp.rs, what its test hooks
//! do in test_hooks.rs.

mod device_state;
mod fence;
mod pool;
mod regqp;
mod socket;
#[cfg(rrds_test_hooks)]
mod test_hooks;

pub(crate) use device_state::{
    device_added,
    device_removed,
    init,
    release_table,
    MrDevice, //
};
use device_state::{
    of,
    DeviceMrs,
    Pooled,
    QpSlot,
    TakenQp,
    Teardown,
    MR_DEVICES, //
};
pub(crate) use fence::{
    qp_added as fence_qp_added,
    qp_removed as fence_qp_removed, //
};
pub(crate) use socket::{
    MrTable,
    Registrar,
    SocketMrs,
    UseOnce, //
};
#[cfg(rrds_test_hooks)]
pub(crate) use test_hooks::{
    fail_regqps,
    show_regqps, //
};

use kernel::{
    impl_has_work, new_mutex, new_work,
    page::PAGE_SIZE,
    prelude::*,
    sync::{
        Arc,
        ArcBorrow,
        CondVar,
        Mutex, //
    },
    time::msecs_to_jiffies,
    workqueue::{
        Work,
        WorkItem, //
    },
};
use pool::{
    class_pages,
    release,
    take_pooled, //
};
pub(crate) use pool::{
    net_exit,
    pool_shape, //
};

use crate::{
    device::{
        DomainUse,
        DomainUser,
        RdmaDevice, //
    },
    ffi::{
        bindings,
        ib_cq::{
            CompletionHandler,
            Cqe,
            WorkCompletion, //
        },
        ib_device::{
            AtomicCap,
            DeviceRef, //
        },
        ib_mr::{
            FastRegMr,
            MappedSg,
            PinnedPage,
            PinnedPages,
            ACCESS_REMOTE_ATOMIC,
            ACCESS_REMOTE_READ,
            ACCESS_REMOTE_WRITE, //
        },
        workqueue,
    },
    limits::MAX_MSG_SIZE,
    stats::{
        self,
        Stat, //
    },
    wait::wait_until,
};
use regqp::RegQp;

/// Pages of the largest MR: a full message plus the partial page of an
/// unaligned start (upstream's limit).
pub(crate) const MAX_PAGES: usize = MAX_MSG_SIZE / PAGE_SIZE + 1;
/// The pool's size classes, in pages (each clamped to the device's limit).
const CLASSES: [usize; 3] = [16, 64, MAX_PAGES];
/// Free MRs kept per class and device.
const POOL_KEEP: usize = 64;
/// How long a REG_MR or LOCAL_INV may take before the caller gives up.
const COMPLETION_TIMEOUT_MS: u32 = 10_000;
/// After a registration QP failed to connect, how long registrations in its
/// namespace fail at once with that error rather than each waiting out a
/// connect of its own (the device's connection manager may be broken: rxe
/// loses its GSI QP to link flaps).
const CONNECT_HOLD_DOWN_MS: i64 = 5_000;

const TAG_REG: u32 = 0;
const TAG_INV: u32 = 1;

/// The cookie of an MR: rkey in the low 32 bits, the offset of the
/// registered range in its first page above (upstream's encoding).
pub(crate) fn make_cookie(rkey: u32, offset: u32) -> u64 {
    u64::from(rkey) | (u64::from(offset) << 32)
}

/// The rkey of a cookie.
pub(crate) fn cookie_key(cookie: u64) -> u32 {
    cookie as u32
}

/// Where an MR is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Registering,
    Valid,
    /// The REG_MR failed: the caller frees it.
    Failed,
    Invalidating,
    Released,
    Stale,
}

/// The verbs objects of an MR. Field order: the key goes before the
/// mapping, and both before the PD.
struct Hw {
    /// `None` once deregistered ahead of a fence (`drop_key_unless_released`).
    mr: Option<FastRegMr>,
    sg: MappedSg,
    domain: DomainUse,
}

struct MrInner {
    state: State,
    hw: Option<Hw>,
    /// Unpinned after `hw` is unmapped.
    pages: Option<Pinned>,
    qp: Option<Arc<RegQp>>,
    /// The registering caller gave up waiting: the completion releases it.
    abandoned: bool,
}

/// Pinned user pages (of an MR or an RDMA operation), counted in the
/// statistics while pinned.
pub(crate) struct Pinned(PinnedPages);

impl Pinned {
    /// Pins `count` pages from the page-aligned `start`, for the device to
    /// write as well when `writable`. Process context.
    pub(crate) fn pin(start: u64, count: usize, writable: bool) -> Result<Self> {
        let pages = PinnedPages::pin(start, count, writable)?;
        stats::add(Stat::MrPagesPinned, count as u64);
        Ok(Self(pages))
    }

    /// Page `i`, pinned while `self` lives.
    pub(crate) fn page(&self, i: usize) -> Option<PinnedPage<'_>> {
        self.0.page(i)
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        stats::add(Stat::MrPagesUnpinned, self.0.count() as u64);
    }
}

/// Pages of a new MR and their mapping; fields drop in order (unmap, then unpin).
struct Mapping {
    sg: MappedSg,
    pages: Pinned,
}

/// What a socket waits on: REG_MR completions and its MRs' invalidations.
#[pin_data]
pub(crate) struct Owner {
    /// MRs freed by the socket and not yet invalid and released.
    #[pin]
    pending: Mutex<u32>,
    #[pin]
    changed: CondVar,
}

/// One registered MR.
///
/// # Invariants
///
/// While a work request posted with `reg_cqe` or `inv_cqe` is outstanding,
/// one strong reference is held for it (`REQUEST_HOLDS_REFERENCE`: taken
/// at post, given up after the completion).
#[pin_data]
pub(crate) struct Mr {
    device: Arc<MrDevice>,
    owner: Arc<Owner>,
    serial: u64,
    rkey: u32,
    offset: u32,
    use_once: bool,
    invalidate: bool,
    #[pin]
    inner: Mutex<MrInner>,
    reg_cqe: Cqe<Mr>,
    inv_cqe: Cqe<Mr>,
    #[pin]
    work: Work<Mr>,
}

impl_has_work! {
    impl HasWork<Self> for Mr { self.work }
}

/// What `RDS_GET_MR` asks for.
pub(crate) struct MrRequest {
    pub(crate) addr: u64,
    pub(crate) bytes: u64,
    pub(crate) flags: u64,
}

/// What an MR is registered for.
#[derive(Clone, Copy)]
enum Access {
    /// `RDS_GET_MR` with these `RDS_RDMA_*` flags: the peer reads, writes
    /// and (where the device can) runs atomics on it; only reads with
    /// `RRDS_RDMA_READ_ONLY`.
    Peer(u64),
    /// The local sink of an iWARP RDMA READ: written by the READ responses.
    ReadSink,
}

/// An MR over the local sink of one RDMA READ, held by the operation.
/// Dropping it posts its LOCAL_INV, which may sleep: process context only.
pub(crate) struct Sink {
    mr: Arc<Mr>,
}

impl Sink {
    /// The key a work request names the sink with (an FRWR MR's lkey is its rkey).
    pub(crate) fn lkey(&self) -> u32 {
        self.mr.rkey
    }

    /// Whether the sink is registered on `device`, whose QPs may use it.
    pub(crate) fn is_on(&self, device: DeviceRef) -> bool {
        self.mr.device.device.is(device)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        Mr::free(&self.mr);
    }
}

/// Pages spanned by `bytes` from `addr`, as upstream's `__rds_rdma_map`
/// checks them: EINVAL for an empty, wrapping or over-4-GiB range,
/// EMSGSIZE past a message's worth.
pub(crate) fn pages_in(addr: u64, bytes: u64) -> Result<usize> {
    if bytes == 0 || bytes > u64::from(u32::MAX) {
        return Err(EINVAL);
    }
    let end = addr.checked_add(bytes).ok_or(EINVAL)?;
    let page = PAGE_SIZE as u64;
    let end = end.checked_add(page - 1).ok_or(EINVAL)? / page;
    let pages = (end - addr / page) as usize;
    if pages > MAX_PAGES {
        return Err(EMSGSIZE);
    }
    Ok(pages)
}

impl Mr {
    /// Registers `sg` (over `pages`) through `qp` and waits for the REG_MR.
    fn register(
        mrs: &Arc<MrDevice>,
        owner: &Arc<Owner>,
        qp: Arc<RegQp>,
        mapping: Mapping,
        offset: usize,
        access: Access,
    ) -> Result<Arc<Mr>> {
        let mr = Self::prepare(mrs, owner, &qp, mapping, offset, access)?;
        if let Err(e) = mr.post_registration(&qp, access) {
            mr.inner.lock().state = State::Failed;
            fence::release_after_fence(mr);
            return Err(e);
        }
        mr.wait_registered(owner, &qp)
    }

    /// A pooled or new fast-registration MR mapped to `mapping` under a new
    /// key, listed live on the device in the `Registering` state.
    fn prepare(
        mrs: &Arc<MrDevice>,
        owner: &Arc<Owner>,
        qp: &Arc<RegQp>,
        mapping: Mapping,
        offset: usize,
        access: Access,
    ) -> Result<Arc<Mr>> {
        let device = &mrs.device;
        let count = mapping.pages.0.count();
        let mut d = mrs.state.lock();
        if d.gone {
            return Err(ENODEV);
        }
        // In the registration QP's PD: REG_MR and the peer's QPs need it.
        let (Pooled { mut fast, domain }, hit) = match take_pooled(&mut d, count, qp.domain()) {
            Some(pooled) => (pooled, true),
            None => {
                let domain = qp.domain().share(DomainUser::Mr);
                let fast = domain.with_pd(|pd| FastRegMr::alloc(pd, class_pages(device, count)))?;
                (Pooled { fast, domain }, false)
            }
        };
        fence::reserve(&mut d)?;
        stats::inc(if hit {
            Stat::MrPoolHit
        } else {
            Stat::MrPoolMiss
        });
        fast.next_key();
        fast.map(&mapping.sg, offset as u64)?;
        let serial = d.next_serial;
        d.next_serial += 1;
        let rkey = fast.rkey();
        let flags = match access {
            Access::Peer(flags) => flags as u32,
            Access::ReadSink => 0,
        };
        let registered_on = qp.clone();
        let mr = Arc::pin_init(
            try_pin_init!(&this in Mr {
                device: mrs.clone(),
                owner: owner.clone(),
                serial,
                rkey,
                offset: offset as u32,
                use_once: flags & bindings::RDS_RDMA_USE_ONCE != 0,
                invalidate: flags & bindings::RDS_RDMA_INVALIDATE != 0,
                inner <- new_mutex!(MrInner {
                    state: State::Registering,
                    hw: Some(Hw { mr: Some(fast), sg: mapping.sg, domain }),
                    pages: Some(mapping.pages),
                    qp: Some(registered_on),
                    abandoned: false,
                }),
                reg_cqe: Cqe::new(this, TAG_REG),
                inv_cqe: Cqe::new(this, TAG_INV),
                work <- new_work!("rrds_mr_release"),
            }),
            GFP_KERNEL,
        )?;
        d.live.push(mr.clone(), GFP_KERNEL)?;
        Ok(mr)
    }

    /// Posts the REG_MR on `qp`, granting the access `access` asks for.
    /// ENODEV if the device was removed since `prepare`.
    fn post_registration(self: &Arc<Self>, qp: &RegQp, access: Access) -> Result {
        let inner = self.inner.lock();
        let Some(fast) = inner.hw.as_ref().and_then(|hw| hw.mr.as_ref()) else {
            // Removed with the device in the meantime.
            return Err(ENODEV);
        };
        let access = match access {
            Access::Peer(flags) if flags & bindings::RRDS_RDMA_READ_ONLY != 0 => ACCESS_REMOTE_READ,
            Access::Peer(_) => {
                // Atomics where the device has them (siw has none).
                let mut access = ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE;
                if self.device.device.caps().atomic != AtomicCap::None {
                    access |= ACCESS_REMOTE_ATOMIC;
                }
                access
            }
            Access::ReadSink => ACCESS_REMOTE_WRITE,
        };
        qp.with_qp(|q| q.post_reg_mr(&self.reg_cqe, fast, access))
    }

    /// Waits for the posted REG_MR to complete: the MR once valid; on a
    /// timeout or signal while it is still registering, the completion
    /// (or the QP's flush) releases it.
    fn wait_registered(self: Arc<Self>, owner: &Owner, qp: &RegQp) -> Result<Arc<Mr>> {
        let mr = self;
        let mut timeo = msecs_to_jiffies(COMPLETION_TIMEOUT_MS) as isize;
        let outcome = {
            let mut pending = owner.pending.lock();
            wait_until(&owner.changed, &mut pending, &mut timeo, |_| {
                mr.inner.lock().state != State::Registering
            })
        };
        let state = {
            // Abandoned under the lock the completion decides under: either it
            // sees the flag and releases the MR, or we see its state.
            let mut inner = mr.inner.lock();
            if outcome.is_err() && inner.state == State::Registering {
                inner.abandoned = true;
            }
            inner.state
        };
        match (outcome, state) {
            // Registered, even if the wait ended for another reason just then.
            (_, State::Valid) => {
                stats::inc(Stat::MrRegistered);
                Ok(mr)
            }
            // Still registering: the completion (or the QP's flush) releases it.
            (Err(e), State::Registering) => {
                if e == ETIMEDOUT {
                    qp.failed();
                }
                Err(e)
            }
            _ => {
                fence::release_after_fence(mr);
                Err(EIO)
            }
        }
    }

    /// Frees the MR: posts its LOCAL_INV, or releases it at once when there
    /// is nothing valid to invalidate or the registration QP is gone (then
    /// deregistration invalidates the key).
    fn free(this: &Arc<Mr>) {
        // Counted before the LOCAL_INV can complete; undone if nothing is posted.
        *this.owner.pending.lock() += 1;
        let mut inner = this.inner.lock();
        match inner.state {
            State::Valid => {
                if let (Some(qp), Some(_)) = (&inner.qp, &inner.hw) {
                    let posted = qp.with_qp(|q| q.post_local_inv(&this.inv_cqe, this.rkey));
                    if posted.is_ok() {
                        inner.state = State::Invalidating;
                        return;
                    }
                }
                inner.state = State::Stale;
            }
            // Its device was removed: only the pages are left.
            State::Stale => {}
            _ => {
                drop(inner);
                let mut pending = this.owner.pending.lock();
                *pending = pending.saturating_sub(1);
                return;
            }
        }
        drop(inner);
        fence::release_after_fence(this.clone());
    }
}

impl Mr {
    /// Deregisters the MR's key now unless a LOCAL_INV invalidated it (then
    /// it goes back to the pool after the fence): a REG or INV that failed
    /// or was flushed, or a LOCAL_INV never posted, may have left it valid.
    fn drop_key_unless_released(&self) {
        let mut inner = self.inner.lock();
        if inner.state == State::Released {
            return;
        }
        let key = inner.hw.as_mut().and_then(|hw| hw.mr.take());
        drop(inner);
        drop(key);
    }
}

// SAFETY: `Mr::new` builds both `Cqe`s in the `Mr` it initialises in an `Arc`;
// each request holds a reference (`REQUEST_HOLDS_REFERENCE`).
unsafe impl CompletionHandler for Mr {
    // Nothing else keeps a freed MR alive until its LOCAL_INV completes.
    const REQUEST_HOLDS_REFERENCE: bool = true;

    fn completed(this: ArcBorrow<'_, Self>, tag: u32, wc: &WorkCompletion<'_>) {
        let ok = wc.is_success();
        if !ok {
            pr_debug!("MR {:#x}: work request status {}\n", this.rkey, wc.status());
            // Before the state says so: a registration that sees `Failed`
            // retries on a new QP only if this one is already down.
            let qp = this.inner.lock().qp.clone();
            if let Some(qp) = qp {
                qp.failed();
            }
        }
        let abandoned = {
            let mut inner = this.inner.lock();
            inner.state = match (tag, ok) {
                // Nobody takes an abandoned registration: deregistration invalidates it.
                (TAG_REG, _) if inner.abandoned => State::Stale,
                (TAG_REG, true) => State::Valid,
                (TAG_REG, false) => State::Failed,
                (_, true) => State::Released,
                (_, false) => State::Stale,
            };
            inner.abandoned
        };
        if tag == TAG_REG && !abandoned {
            // Under the lock the waiter checks the state with: no lost wake-up.
            let _pending = this.owner.pending.lock();
            this.owner.changed.notify_all();
            return;
        }
        if ok && tag == TAG_INV {
            stats::inc(Stat::MrInvalidated);
        }
        // Unpinning may sleep and returns to the pool take locks: leave the CQ's context.
        let _ = workqueue::queue().enqueue(Arc::<Mr>::from(this));
    }
}

impl WorkItem for Mr {
    type Pointer = Arc<Mr>;

    fn run(this: Arc<Mr>) {
        fence::release_after_fence(this);
    }
}
