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

mod fence;
mod regqp;

pub(crate) use fence::{
    qp_added as fence_qp_added,
    qp_removed as fence_qp_removed, //
};

use kernel::{
    fmt, impl_has_work, new_condvar, new_mutex, new_spinlock, new_work,
    page::PAGE_SIZE,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNode,
        RBTreeNodeReservation, //
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        CondVar,
        Mutex,
        SpinLock, //
    },
    time::{
        msecs_to_jiffies,
        Instant,
        Monotonic, //
    },
    uaccess::UserSliceReader,
    workqueue::{
        Work,
        WorkItem, //
    },
};

use crate::{
    addr::Endpoint,
    device::RdmaDevice,
    ffi::{
        bindings,
        ib_cq::{
            CompletionHandler,
            Cqe,
            WorkCompletion, //
        },
        ib_device::AtomicCap,
        ib_mr::{
            FastRegMr,
            MappedSg,
            PinnedPages,
            SgDirection,
            ACCESS_REMOTE_ATOMIC,
            ACCESS_REMOTE_READ,
            ACCESS_REMOTE_WRITE, //
        },
        net::NetRef,
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

/// The next registration-QP connect fails with `ETIMEDOUT`, as one whose
/// connection manager is gone would (debugfs `rrds/regqp_connect_fail`).
static FAIL_NEXT_CONNECT: Atomic<bool> = Atomic::new(false);

/// The next registration QP holds its listener open before connecting to
/// it, until this is cleared or [`LISTEN_HOLD_MAX_MS`] pass (debugfs
/// `rrds/regqp_listen_hold`), so that a test can connect to it first.
static LISTEN_HOLD: Atomic<bool> = Atomic::new(false);
/// The port of the listener being held, 0 when none is.
static HELD_PORT: Atomic<u32> = Atomic::new(0);
const LISTEN_HOLD_MAX_MS: u32 = 10_000;

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

/// A registration QP in one namespace, and how many sockets use it.
struct QpSlot {
    net: NetRef,
    users: usize,
    qp: Option<Arc<RegQp>>,
    /// The last connect's failure, and when: within `CONNECT_HOLD_DOWN_MS`
    /// registrations fail with it at once.
    connect_failed: Option<(Error, Instant<Monotonic>)>,
}

/// The MR state of one device, in its record.
#[derive(Default)]
pub(crate) struct DeviceMrs {
    pool: [KVec<FastRegMr>; CLASSES.len()],
    qps: KVec<QpSlot>,
    /// Every MR holding verbs objects of the device, by serial number.
    live: KVec<Arc<Mr>>,
    next_serial: u64,
    /// The device is being removed: nothing goes back to the pool.
    gone: bool,
    /// MRs waiting for no READ response to send from their pages (iWARP).
    fence: fence::TxFence,
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the ib_client (whose
    // callbacks add and remove records) is registered.
    unsafe(uninit) static MR_DEVICES: Mutex<KVec<Arc<MrDevice>>> = KVec::new();
}

/// Initialises the table of devices' MR state. Call once, in module init.
pub(crate) fn init() {
    // SAFETY: Module init calls this exactly once, before any other use of `MR_DEVICES`.
    unsafe { MR_DEVICES.init() };
}

/// Frees the table's buffer. Call once, at unload, after the client is unregistered.
pub(crate) fn release_table() {
    crate::tables::free_table(&mut MR_DEVICES.lock());
}

/// The memory-registration state of one device: its registration QPs, MR
/// pool, live MRs and READ-response fences.
///
/// # Invariants
///
/// Only exists inside an `Arc` ([`device_added`]). A link whose QP is on the
/// fence list holds one until its QP and CQs are gone, so a marker's
/// completion finds the record alive.
#[pin_data]
pub(crate) struct MrDevice {
    device: Arc<RdmaDevice>,
    #[pin]
    state: Mutex<DeviceMrs>,
    /// Completions of READ-response fence markers (fence.rs).
    fence_cqe: Cqe<MrDevice>,
    /// Releases MRs after a fence round and starts the next one.
    #[pin]
    fence_work: Work<MrDevice>,
}

impl_has_work! {
    impl HasWork<Self> for MrDevice { self.fence_work }
}

/// A device was added: its MR state starts empty.
pub(crate) fn device_added(device: &Arc<RdmaDevice>) -> Result {
    let record = Arc::pin_init(
        try_pin_init!(&this in MrDevice {
            device: device.clone(),
            state <- new_mutex!(DeviceMrs::default()),
            fence_cqe: Cqe::new(this, 0),
            fence_work <- new_work!("rrds_mr_fence"),
        }),
        GFP_KERNEL,
    )?;
    MR_DEVICES.lock().push(record, GFP_KERNEL)?;
    Ok(())
}

/// The MR state of `device`; ENODEV once the device is being removed.
fn of(device: &RdmaDevice) -> Result<Arc<MrDevice>> {
    MR_DEVICES
        .lock()
        .iter()
        .find(|m| core::ptr::eq(&*m.device, device))
        .cloned()
        .ok_or(ENODEV)
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

/// The verbs objects of an MR. Field order: the key goes before the mapping.
struct Hw {
    /// `None` once deregistered ahead of a fence (`drop_key_unless_released`).
    mr: Option<FastRegMr>,
    sg: MappedSg,
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
    pub(crate) fn page(&self, i: usize) -> Option<*mut bindings::page> {
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
/// one strong reference is held for it (leaked at post, taken back by the
/// completion).
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
    pub(crate) fn is_on(&self, device: *mut bindings::ib_device) -> bool {
        self.mr.device.device.as_raw() == device
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        Mr::free(&self.mr);
    }
}

/// The keys of a socket's `RDS_RDMA_USE_ONCE` MRs, live and used.
///
/// The receive path learns that a peer's RDMA to one of them is done (the
/// RDMA extension of its message) and must not wait for [`SocketMrs`]'s
/// lock, which is held across user memory access and device waits: it only
/// moves the key from `live` to `used` here, under a spinlock, and whoever
/// holds the `SocketMrs` lock next frees the MR ([`SocketMrs::free_used`]).
/// Nothing is allocated on the receive path: the node moves between trees.
#[derive(Default)]
struct UseOnceKeys {
    live: RBTree<u32, ()>,
    used: RBTree<u32, ()>,
}

/// See [`UseOnceKeys`].
#[pin_data]
pub(crate) struct UseOnce {
    #[pin]
    keys: SpinLock<UseOnceKeys>,
}

impl UseOnce {
    /// The receive path: the peer's RDMA to `rkey` completed. Returns
    /// whether a USE_ONCE MR now waits to be freed. Any context.
    pub(crate) fn mark_used(&self, rkey: u32) -> bool {
        let mut keys = self.keys.lock();
        if let Some(node) = keys.live.remove_node(&rkey) {
            keys.used.insert(node);
        }
        !keys.used.is_empty()
    }

    /// Whether a used key waits for [`SocketMrs::free_used`].
    pub(crate) fn has_used(&self) -> bool {
        !self.keys.lock().used.is_empty()
    }

    fn take_used(&self) -> Option<u32> {
        let mut keys = self.keys.lock();
        let key = *keys.used.cursor_front()?.current().0;
        let node = keys.used.remove_node(&key);
        drop(keys);
        drop(node);
        Some(key)
    }

    /// `rkey`'s MR is gone: forget it, live or used.
    fn forget(&self, rkey: u32) {
        let mut keys = self.keys.lock();
        let nodes = (keys.live.remove_node(&rkey), keys.used.remove_node(&rkey));
        drop(keys);
        drop(nodes);
    }

    fn add(&self, node: RBTreeNode<u32, ()>) {
        let old = self.keys.lock().live.insert(node);
        drop(old);
    }
}

/// The MRs of one socket, by rkey, and the registration QP they use.
pub(crate) struct SocketMrs {
    owner: Arc<Owner>,
    keys: RBTree<u32, Arc<Mr>>,
    /// The keys of `keys`'s USE_ONCE MRs, shared with the receive path.
    use_once: Arc<UseOnce>,
    /// The device and namespace whose registration QP this socket holds a use of.
    user: Option<(Arc<MrDevice>, NetRef)>,
}

impl SocketMrs {
    pub(crate) fn new() -> Result<Self> {
        let owner = Arc::pin_init(
            pin_init!(Owner {
                pending <- new_mutex!(0),
                changed <- new_condvar!("rrds_mr_owner"),
            }),
            GFP_KERNEL,
        )?;
        let use_once = Arc::pin_init(
            pin_init!(UseOnce {
                keys <- new_spinlock!(UseOnceKeys::default()),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self {
            owner,
            keys: RBTree::new(),
            use_once,
            user: None,
        })
    }

    /// The USE_ONCE keys, for the receive path to mark used without this lock.
    pub(crate) fn use_once(&self) -> Arc<UseOnce> {
        self.use_once.clone()
    }

    /// Frees the USE_ONCE MRs the receive path marked used.
    pub(crate) fn free_used(&mut self) {
        while let Some(rkey) = self.use_once.take_used() {
            self.used(rkey);
        }
    }

    /// Takes `rkey`'s MR out of the socket's table.
    fn remove(&mut self, rkey: u32) -> Option<Arc<Mr>> {
        let mr = self.keys.remove(&rkey)?;
        self.use_once.forget(rkey);
        Some(mr)
    }

    /// `RDS_GET_MR`: registers `req` on `device` (the bound address `addr`
    /// of `net` is on it) and returns the cookie, which `publish` hands to
    /// the user before the MR becomes known (upstream's order: if that
    /// fails, the MR is freed again).
    pub(crate) fn get(
        &mut self,
        net: NetRef,
        device: &Arc<RdmaDevice>,
        addr: &Endpoint,
        req: &MrRequest,
        publish: impl FnOnce(u64) -> Result,
    ) -> Result<u64> {
        // Allocated first: once the MR is registered, only a fault in
        // `publish` can fail the call, and its pages stay pinned until the
        // invalidation (and on iWARP the fence round) completes.
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let once_node = if req.flags & u64::from(bindings::RDS_RDMA_USE_ONCE) != 0 {
            Some(RBTreeNodeReservation::new(GFP_KERNEL)?)
        } else {
            None
        };
        let mr = self.register(
            net,
            device,
            addr,
            req.addr,
            req.bytes,
            Access::Peer(req.flags),
        )?;
        let cookie = make_cookie(mr.rkey, mr.offset);
        if let Err(e) = publish(cookie) {
            Mr::free(&mr);
            return Err(e);
        }
        // Keys of live MRs are distinct; a stale one with this key goes.
        let rkey = mr.rkey;
        if let Some(old) = self.remove(rkey) {
            Mr::free(&old);
        }
        self.keys.insert(node.into_node(rkey, mr));
        if let Some(once_node) = once_node {
            self.use_once.add(once_node.into_node(rkey, ()));
        }
        Ok(cookie)
    }

    /// Registers the `start`, `bytes` range of user memory on `device`
    /// through the registration QP, retrying once on a new QP when the one
    /// it was posted on failed meanwhile (a flushed REG_MR is not the
    /// caller's fault).
    fn register(
        &mut self,
        net: NetRef,
        device: &Arc<RdmaDevice>,
        addr: &Endpoint,
        start: u64,
        bytes: u64,
        access: Access,
    ) -> Result<Arc<Mr>> {
        let pages = pages_in(start, bytes)?;
        if pages > device.caps().max_fast_reg_page_list_len as usize {
            return Err(EMSGSIZE);
        }
        let offset = (start as usize) % PAGE_SIZE;
        let mrs = of(device)?;
        let mut retried = false;
        loop {
            let qp = self.registration_qp(net, &mrs, addr)?;
            let pinned = Pinned::pin(start - offset as u64, pages, true)?;
            let sg = MappedSg::map(
                device.as_raw(),
                &pinned.0,
                offset,
                bytes as usize,
                SgDirection::Bidirectional,
            )?;
            let mapping = Mapping { sg, pages: pinned };
            match Mr::register(&mrs, &self.owner, qp.clone(), mapping, offset, access) {
                Err(_) if !retried && !qp.is_up() => retried = true,
                other => return other,
            }
        }
    }

    /// Registers the local sink of an RDMA READ (`start`, `bytes`) on an
    /// iWARP `device`, whose READ responses are placed like WRITEs: only
    /// an STag with remote write access may receive them. The MR is the
    /// operation's, never the user's (no cookie); dropping the `Sink`
    /// invalidates it.
    pub(crate) fn register_sink(
        &mut self,
        net: NetRef,
        device: &Arc<RdmaDevice>,
        addr: &Endpoint,
        start: u64,
        bytes: u64,
    ) -> Result<Sink> {
        let mr = self.register(net, device, addr, start, bytes, Access::ReadSink)?;
        stats::inc(Stat::RdmaReadSinks);
        Ok(Sink { mr })
    }

    /// `RDS_FREE_MR` of `cookie` (non-zero): EINVAL for an unknown one. With
    /// `invalidate` (or an MR registered with `RDS_RDMA_INVALIDATE`), returns
    /// once every MR the socket freed is invalid.
    pub(crate) fn free(&mut self, cookie: u64, invalidate: bool) -> Result {
        let mr = self.remove(cookie_key(cookie)).ok_or(EINVAL)?;
        Mr::free(&mr);
        if invalidate || mr.invalidate {
            self.wait_invalid()?;
        }
        Ok(())
    }

    /// `RDS_FREE_MR` of cookie 0: waits until every MR the socket freed is
    /// invalid, and releases the free MRs pooled on the socket's device.
    pub(crate) fn flush(&mut self) -> Result {
        self.wait_invalid()?;
        if let Some((device, _)) = &self.user {
            let mut d = device.state.lock();
            for class in d.pool.iter_mut() {
                class.clear();
            }
        }
        Ok(())
    }

    /// The peer's RDMA to `rkey` completed (its message arrived): an MR
    /// registered with `RDS_RDMA_USE_ONCE` is freed now, as upstream's
    /// `rds_rdma_unuse`.
    pub(crate) fn used(&mut self, rkey: u32) {
        if self.keys.get(&rkey).is_some_and(|mr| mr.use_once) {
            self.discard(rkey);
        }
    }

    /// Whether the socket has a live MR with `rkey` (`RDS_CMSG_RDMA_DEST`).
    pub(crate) fn contains(&self, rkey: u32) -> bool {
        self.keys.get(&rkey).is_some()
    }

    /// Frees the MR with `rkey`, if any, without waiting for it to be
    /// invalid: a send that registered it failed.
    pub(crate) fn discard(&mut self, rkey: u32) {
        if let Some(mr) = self.remove(rkey) {
            Mr::free(&mr);
        }
    }

    fn wait_invalid(&self) -> Result {
        let mut timeo = msecs_to_jiffies(COMPLETION_TIMEOUT_MS) as isize;
        let mut pending = self.owner.pending.lock();
        wait_until(&self.owner.changed, &mut pending, &mut timeo, |p| *p == 0)
    }

    /// The registration QP of `device` in `net`, connected if needed; the
    /// socket holds a use of it until it closes.
    fn registration_qp(
        &mut self,
        net: NetRef,
        device: &Arc<MrDevice>,
        addr: &Endpoint,
    ) -> Result<Arc<RegQp>> {
        if let Some((used, _)) = &self.user {
            if !Arc::ptr_eq(used, device) {
                // The bound address moved to another device: leave the old one.
                self.leave();
            }
        }
        let joined = self.user.is_some();
        let mut d = device.state.lock();
        if d.gone {
            return Err(ENODEV);
        }
        let i = match d.qps.iter().position(|s| s.net == net) {
            Some(i) => i,
            None => {
                d.qps.push(
                    QpSlot {
                        net,
                        users: 0,
                        qp: None,
                        connect_failed: None,
                    },
                    GFP_KERNEL,
                )?;
                d.qps.len() - 1
            }
        };
        if !joined {
            d.qps[i].users += 1;
            self.user = Some((device.clone(), net));
        }
        if let Some(qp) = d.qps[i].qp.as_ref().filter(|qp| qp.is_up()) {
            return Ok(qp.clone());
        }
        if let Some((e, at)) = d.qps[i].connect_failed {
            if at.elapsed().as_millis() < CONNECT_HOLD_DOWN_MS {
                stats::inc(Stat::MrQpConnectHeldDown);
                return Err(e);
            }
        }
        // Connect (or reconnect after a failure) with the device lock dropped:
        // the connection's handlers take it. Sockets racing here may each
        // connect; the first to finish is kept.
        let failed = d.qps[i].qp.take();
        drop(d);
        if let Some(failed) = failed {
            stats::inc(Stat::MrQpRecreated);
            failed.shut_down();
        }
        let connected = if FAIL_NEXT_CONNECT.xchg(false, Relaxed) {
            Err(ETIMEDOUT)
        } else {
            RegQp::connect(net, device.device.clone(), addr)
        };
        let mut d = device.state.lock();
        let gone = d.gone;
        let slot = d.qps.iter_mut().find(|s| s.net == net);
        let qp = match connected {
            Ok(qp) => qp,
            Err(e) => {
                // A connect cut short by a signal says nothing of the device,
                // and its error is for the interrupted caller alone.
                if let Some(slot) = slot.filter(|_| e != ERESTARTSYS && e != EINTR) {
                    slot.connect_failed = Some((e, Instant::now()));
                }
                return Err(e);
            }
        };
        // One lookup for both outcomes; a QP that has no slot to go to is
        // shut down too.
        let Some(slot) = slot.filter(|_| !gone) else {
            drop(d);
            qp.shut_down();
            return Err(ENODEV);
        };
        slot.connect_failed = None;
        if let Some(other) = slot.qp.as_ref().filter(|q| q.is_up()) {
            let other = other.clone();
            drop(d);
            qp.shut_down();
            return Ok(other);
        }
        let stale = slot.qp.replace(qp.clone());
        drop(d);
        if let Some(stale) = stale {
            stale.shut_down();
        }
        Ok(qp)
    }

    /// Gives up the socket's use of its registration QP; the last user of a
    /// namespace's QP shuts it down.
    fn leave(&mut self) {
        let Some((device, net)) = self.user.take() else {
            return;
        };
        let mut d = device.state.lock();
        let Some(i) = d.qps.iter().position(|s| s.net == net) else {
            return;
        };
        d.qps[i].users -= 1;
        if d.qps[i].users > 0 {
            return;
        }
        let Ok(slot) = d.qps.remove(i) else {
            return;
        };
        drop(d);
        if let Some(qp) = slot.qp {
            qp.shut_down();
        }
    }

    /// The socket closes: frees every MR, waits (bounded) for their
    /// invalidation, then leaves the registration QP.
    pub(crate) fn release(&mut self) {
        while let Some(key) = self.keys.cursor_front().map(|c| *c.current().0) {
            if let Some(mr) = self.remove(key) {
                Mr::free(&mr);
            }
        }
        let _ = self.wait_invalid();
        self.leave();
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
        let device = &mrs.device;
        let count = mapping.pages.0.count();
        let mut d = mrs.state.lock();
        if d.gone {
            return Err(ENODEV);
        }
        let (mut fast, hit) = match take_pooled(&mut d, count) {
            Some(mr) => (mr, true),
            None => (
                device.with_pd(|pd| FastRegMr::alloc(pd, class_pages(device, count)))?,
                false,
            ),
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
                    hw: Some(Hw { mr: Some(fast), sg: mapping.sg }),
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
        drop(d);

        let posted = {
            let inner = mr.inner.lock();
            match inner.hw.as_ref().and_then(|hw| hw.mr.as_ref()) {
                // Removed with the device in the meantime.
                None => Err(ENODEV),
                Some(fast) => {
                    let access = match access {
                        Access::Peer(flags) if flags & bindings::RRDS_RDMA_READ_ONLY != 0 => {
                            ACCESS_REMOTE_READ
                        }
                        Access::Peer(_) => {
                            // Atomics where the device has them (siw has none).
                            let mut access = ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE;
                            if device.caps().atomic != AtomicCap::None {
                                access |= ACCESS_REMOTE_ATOMIC;
                            }
                            access
                        }
                        Access::ReadSink => ACCESS_REMOTE_WRITE,
                    };
                    let raw = Arc::into_raw(mr.clone());
                    let posted = qp.with_qp(|q| q.post_reg_mr(&mr.reg_cqe, fast, access));
                    if posted.is_err() {
                        // SAFETY: Leaked just above for a request that was not posted.
                        drop(unsafe { Arc::from_raw(raw) });
                    }
                    posted
                }
            }
        };
        if let Err(e) = posted {
            mr.inner.lock().state = State::Failed;
            fence::release_after_fence(mr);
            return Err(e);
        }
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
                    let raw = Arc::into_raw(this.clone());
                    let posted = qp.with_qp(|q| q.post_local_inv(&this.inv_cqe, this.rkey));
                    if posted.is_ok() {
                        inner.state = State::Invalidating;
                        return;
                    }
                    // SAFETY: Leaked just above for a request that was not posted.
                    drop(unsafe { Arc::from_raw(raw) });
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

/// A free MR of the pool that fits `pages`, if there is one: the first
/// class that large (`get` refused more pages than the device maps, so the
/// clamped class still holds them).
fn take_pooled(d: &mut DeviceMrs, pages: usize) -> Option<FastRegMr> {
    let class = CLASSES.iter().position(|&c| c >= pages)?;
    d.pool[class].pop()
}

/// The page count MRs of the class holding `pages` are allocated with.
fn class_pages(device: &RdmaDevice, pages: usize) -> u32 {
    let class = CLASSES
        .iter()
        .copied()
        .find(|&c| c >= pages)
        .unwrap_or(MAX_PAGES);
    class.min(device.caps().max_fast_reg_page_list_len as usize) as u32
}

/// Releases a finished MR: unmaps it, returns its fast-reg MR to the pool if
/// it was invalidated cleanly (deregisters it otherwise), unpins the pages
/// and tells the owner. Process context.
///
/// Where a READ response may still copy from the pages after the key is
/// invalid (rxe, `fence::deregisters`), the MR is deregistered first, and a
/// fresh one takes its place in the pool: before the owner is told if the
/// pool is empty, after it otherwise (off the path of the owner's FREE_MR).
fn release(mr: Arc<Mr>) {
    let (state, hw, pages) = {
        let mut d = mr.device.state.lock();
        let taken = {
            let mut inner = mr.inner.lock();
            inner.qp = None;
            (inner.state, inner.hw.take(), inner.pages.take())
        };
        if let Some(i) = d.live.iter().position(|m| m.serial == mr.serial) {
            let _ = d.live.remove(i);
        }
        taken
    };
    // The pool class and size of a fresh MR to add once the owner has been told.
    let mut replace = None;
    if let Some(Hw { mr: fast, sg }) = hw {
        let pages = fast.as_ref().map(FastRegMr::max_pages);
        let class = pages.and_then(|p| CLASSES.iter().position(|&c| c as u32 >= p));
        // A key not invalidated cleanly may still be valid: it is
        // deregistered before its pages are unmapped, never after.
        let fast = if fence::deregisters(&mr.device.device) || state != State::Released {
            // Waits for copies the device has in progress from the pages.
            drop(fast);
            None
        } else {
            fast
        };
        drop(sg);
        if let (Some(c), Some(p), State::Released) = (class, pages, state) {
            match fast {
                Some(fast) => pool_put(&mut mr.device.state.lock(), c, fast),
                // An empty pool is refilled before the owner hears back, so its
                // next GET_MR finds one; a fuller one after, off its path.
                None if mr.device.state.lock().pool[c].is_empty() => refill(&mr.device, c, p),
                None => replace = Some((c, p)),
            }
        }
    }
    if matches!(state, State::Stale | State::Failed) {
        stats::inc(Stat::MrStale);
    }
    drop(pages);
    {
        let mut pending = mr.owner.pending.lock();
        if matches!(state, State::Released | State::Stale) {
            *pending = pending.saturating_sub(1);
        }
        // Under the lock waiters check their condition with: no lost wake-up.
        mr.owner.changed.notify_all();
    }
    if let Some((c, p)) = replace {
        refill(&mr.device, c, p);
    }
}

/// Puts a fresh fast-reg MR of `pages` in `device`'s pool `class`, in place
/// of one deregistered, unless the pool is full or the device is going.
fn refill(device: &MrDevice, class: usize, pages: u32) {
    let mut d = device.state.lock();
    if !d.gone && d.pool[class].len() < POOL_KEEP {
        // Under the lock: `device_removed` cannot free the PD meanwhile.
        if let Ok(fast) = device.device.with_pd(|pd| FastRegMr::alloc(pd, pages)) {
            pool_put(&mut d, class, fast);
        }
    }
}

/// Keeps `fast` in pool `class` unless the pool is full or the device is
/// going; otherwise it is deregistered here, under the lock (it may sleep).
fn pool_put(d: &mut DeviceMrs, class: usize, fast: FastRegMr) {
    if !d.gone && d.pool[class].len() < POOL_KEEP {
        // Nothing to do if the pool cannot grow: the MR is deregistered.
        let _ = d.pool[class].push(fast, GFP_KERNEL);
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

impl CompletionHandler for Mr {
    fn completed(&self, tag: u32, wc: &WorkCompletion<'_>) {
        // SAFETY: The post leaked one reference for this request (type invariant);
        // `self` is that Arc's value.
        let this = unsafe { Arc::from_raw(self) };
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
        let _ = workqueue::queue().enqueue(this);
    }
}

impl WorkItem for Mr {
    type Pointer = Arc<Mr>;

    fn run(this: Arc<Mr>) {
        fence::release_after_fence(this);
    }
}

/// Every device's MR state now.
fn all() -> Result<KVec<Arc<MrDevice>>> {
    let devices = MR_DEVICES.lock();
    let mut out = KVec::with_capacity(devices.len(), GFP_KERNEL)?;
    for d in devices.iter() {
        out.push(d.clone(), GFP_KERNEL)?;
    }
    Ok(out)
}

/// debugfs `rrds/regqp_fail` (write): moves every registration QP to the
/// error state, as a device fault would.
pub(crate) fn store_regqp_fail(reader: &mut UserSliceReader) -> Result {
    // Only "1": there is nothing to switch off.
    if !crate::hooks::read_knob(reader)? {
        return Err(EINVAL);
    }
    for device in all()?.iter() {
        let qps = {
            let d = device.state.lock();
            let mut qps = KVec::with_capacity(d.qps.len(), GFP_KERNEL)?;
            for qp in d.qps.iter().filter_map(|s| s.qp.clone()) {
                qps.push(qp, GFP_KERNEL)?;
            }
            qps
        };
        for qp in qps.iter() {
            qp.force_error()?;
        }
    }
    Ok(())
}

/// debugfs `rrds/regqp_connect_fail` (write): `1` makes the next
/// registration-QP connect fail, `0` takes that back.
pub(crate) fn store_connect_fail(reader: &mut UserSliceReader) -> Result {
    FAIL_NEXT_CONNECT.store(crate::hooks::read_knob(reader)?, Relaxed);
    Ok(())
}

/// Holds a registration QP's listener on `port` open while
/// `rrds/regqp_listen_hold` asks for it (at most [`LISTEN_HOLD_MAX_MS`]),
/// then disarms the knob. In the connecting user task.
fn hold_listener(port: u16) {
    if !LISTEN_HOLD.load(Relaxed) {
        return;
    }
    HELD_PORT.store(u32::from(port), Relaxed);
    let mut waited = 0;
    while LISTEN_HOLD.load(Relaxed) && waited < LISTEN_HOLD_MAX_MS {
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(10));
        waited += 10;
    }
    LISTEN_HOLD.store(false, Relaxed);
    HELD_PORT.store(0, Relaxed);
}

/// debugfs `rrds/regqp_listen_hold` (write): `1` holds the next
/// registration QP's listener open, `0` lets it go on.
pub(crate) fn store_listen_hold(reader: &mut UserSliceReader) -> Result {
    LISTEN_HOLD.store(crate::hooks::read_knob(reader)?, Relaxed);
    Ok(())
}

/// debugfs `rrds/regqp_listen_hold` (read): the knob, and the port of the
/// listener held open (0 while none is).
pub(crate) fn show_listen_hold(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_fmt(fmt!(
        "{} {}\n",
        u8::from(LISTEN_HOLD.load(Relaxed)),
        HELD_PORT.load(Relaxed)
    ))
}

/// debugfs `rrds/regqp_connect_fail` (read): whether the next connect fails.
pub(crate) fn show_connect_fail(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_fmt(fmt!("{}\n", u8::from(FAIL_NEXT_CONNECT.load(Relaxed))))
}

/// debugfs `rrds/regqp_fail` (read): registration QPs that can post, per
/// device and in all.
pub(crate) fn show_regqps(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Ok(devices) = all() else {
        return Ok(());
    };
    for device in devices.iter() {
        let d = device.state.lock();
        let up = d
            .qps
            .iter()
            .filter(|s| s.qp.as_ref().is_some_and(|q| q.is_up()))
            .count();
        f.write_fmt(fmt!("{} {}\n", device.device.name(), up))?;
    }
    Ok(())
}

/// The device is going: shuts down its registration QPs (flushing every
/// outstanding request), then unmaps and deregisters every MR on it. The
/// sockets keep their MRs (stale, pages pinned) until they free them.
pub(crate) fn device_removed(device: &RdmaDevice) {
    let Some(device) = ({
        let mut devices = MR_DEVICES.lock();
        let i = devices
            .iter()
            .position(|m| core::ptr::eq(&*m.device, device));
        i.and_then(|i| devices.remove(i).ok())
    }) else {
        return;
    };
    let qps = {
        let mut d = device.state.lock();
        d.gone = true;
        core::mem::take(&mut d.qps)
    };
    for slot in qps.iter() {
        if let Some(qp) = &slot.qp {
            qp.shut_down();
        }
    }
    let mut d = device.state.lock();
    for mr in d.live.iter() {
        let mut inner = mr.inner.lock();
        if inner.hw.take().is_some() {
            inner.state = State::Stale;
            stats::inc(Stat::MrStale);
        }
    }
    for class in d.pool.iter_mut() {
        class.clear();
    }
    fence::device_removed(&mut d);
}
