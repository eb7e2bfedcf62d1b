// SPDX-License-Identifier: GPL-2.0

//! Each device's MR state: its registration QPs, free MRs, live MRs and
//! fences, added and removed with the device.

use kernel::{
    impl_has_work, new_mutex, new_work,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
    time::{
        Instant,
        Monotonic, //
    },
    workqueue::Work,
};

use super::{
    fence,
    regqp::RegQp,
    Mr,
    State,
    CLASSES, //
};
use crate::{
    device::{
        DomainUse,
        RdmaDevice, //
    },
    ffi::{ib_cq::Cqe, ib_mr::FastRegMr, net::NetRef},
    stats::{
        self,
        Stat, //
    },
};

/// A registration QP in one namespace, and how many sockets use it.
pub(super) struct QpSlot {
    pub(super) net: NetRef,
    pub(super) users: usize,
    pub(super) qp: Option<Arc<RegQp>>,
    /// The last connect's failure, and when: within `CONNECT_HOLD_DOWN_MS`
    /// registrations fail with it at once.
    pub(super) connect_failed: Option<(Error, Instant<Monotonic>)>,
}

/// A free fast-registration MR, and the PD (of one namespace) it is in.
/// Field order is drop order: the MR before its PD.
pub(super) struct Pooled {
    pub(super) fast: FastRegMr,
    pub(super) domain: DomainUse,
}

/// The MR state of one device, in its record.
#[derive(Default)]
pub(crate) struct DeviceMrs {
    /// Free MRs by size class, of every namespace's PD on the device.
    pub(super) pool: [KVec<Pooled>; CLASSES.len()],
    pub(super) qps: KVec<QpSlot>,
    /// Registration QPs being set up (`RegQp::connect`), not yet in `qps`:
    /// their QPs are in a PD of the device too.
    pub(super) connecting: KVec<Arc<RegQp>>,
    /// Every MR holding verbs objects of the device, by serial number.
    pub(super) live: KVec<Arc<Mr>>,
    pub(super) next_serial: u64,
    /// Verbs objects of the device that tasks took off the books and are
    /// destroying outside the lock ([`Teardown`]): registration QPs taken
    /// out of `qps` or `connecting`, MRs taken out of `live`. The device's
    /// removal waits for them before the PD they are in goes.
    pub(super) teardowns: usize,
    /// The device is being removed: nothing goes back to the pool.
    pub(super) gone: bool,
    /// MRs waiting for no READ response to send from their pages (iWARP).
    pub(super) fence: fence::TxFence,
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the ib_client (whose
    // callbacks add and remove records) is registered.
    pub(super) unsafe(uninit) static MR_DEVICES: Mutex<KVec<Arc<MrDevice>>> = KVec::new();
}

/// Initialises the table of devices' MR state. Call once, in module init.
pub(crate) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&MR_DEVICES);
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
    pub(super) device: Arc<RdmaDevice>,
    #[pin]
    pub(super) state: Mutex<DeviceMrs>,
    /// Completions of READ-response fence markers (fence.rs).
    pub(super) fence_cqe: Cqe<MrDevice>,
    /// Releases MRs after a fence round and starts the next one.
    #[pin]
    pub(super) fence_work: Work<MrDevice>,
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
pub(super) fn of(device: &RdmaDevice) -> Result<Arc<MrDevice>> {
    MR_DEVICES
        .lock()
        .iter()
        .find(|m| core::ptr::eq(&*m.device, device))
        .cloned()
        .ok_or(ENODEV)
}

/// A task destroying verbs objects of the device that it took off the
/// device's books, once it has dropped the device lock: while it lives the
/// device's removal waits, as it does for what it finds on the books.
/// Dropped without the device lock held.
pub(super) struct Teardown<'a> {
    device: &'a MrDevice,
}

impl<'a> Teardown<'a> {
    /// Begins a teardown on `device`, whose lock the caller holds (`d`).
    pub(super) fn begin(device: &'a MrDevice, d: &mut DeviceMrs) -> Self {
        d.teardowns += 1;
        Self { device }
    }
}

impl Drop for Teardown<'_> {
    fn drop(&mut self) {
        self.device.state.lock().teardowns -= 1;
    }
}

/// A registration QP its task took off the device's books, to shut down
/// once it has dropped the device lock.
pub(super) struct TakenQp<'a> {
    qp: Arc<RegQp>,
    /// Ends after the shut-down (fields drop after `drop`).
    _teardown: Teardown<'a>,
}

impl<'a> TakenQp<'a> {
    /// Takes `qp` off `device`'s books, which the caller has locked (`d`).
    pub(super) fn new(device: &'a MrDevice, d: &mut DeviceMrs, qp: Arc<RegQp>) -> Self {
        Self {
            qp,
            _teardown: Teardown::begin(device, d),
        }
    }

    /// Shuts the QP down. Not with the device lock held (its handlers take it).
    pub(super) fn shut_down(self) {
        drop(self);
    }
}

impl Drop for TakenQp<'_> {
    fn drop(&mut self) {
        crate::hooks::REGQP_SHUT_DOWN_HOLD.pause();
        self.qp.shut_down();
    }
}

/// How long a device's removal waits for tasks destroying objects they
/// took off its books (each only drains, deregisters and destroys).
const TEARDOWN_WAIT_MS: u32 = 30_000;

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
    let (qps, connecting) = {
        let mut d = device.state.lock();
        d.gone = true;
        (
            core::mem::take(&mut d.qps),
            core::mem::take(&mut d.connecting),
        )
    };
    // A QP being set up is its task's until the set-up ends: fail it, wait
    // for that, then shut it down, all before the PD it is in goes.
    for qp in connecting.iter() {
        qp.abort_set_up();
        qp.shut_down();
    }
    for slot in qps.iter() {
        if let Some(qp) = &slot.qp {
            qp.shut_down();
        }
    }
    wait_for_teardowns(&device);
    let mut d = device.state.lock();
    for mr in d.live.iter() {
        let mut inner = mr.inner.lock();
        if inner.hw.take().is_some() {
            inner.state = State::Stale;
            stats::inc(Stat::MrStale);
        }
        // Shut down already; a stale MR has no use for it, and it holds a
        // use of the PD that goes next.
        inner.qp = None;
    }
    for class in d.pool.iter_mut() {
        class.clear();
    }
    fence::device_removed(&mut d);
}

/// Waits (at most [`TEARDOWN_WAIT_MS`]) until no task is destroying objects
/// it took off `device`'s books.
fn wait_for_teardowns(device: &MrDevice) {
    if !crate::wait::poll_until(TEARDOWN_WAIT_MS, || device.state.lock().teardowns == 0) {
        pr_warn!("a registration QP's or MR's teardown outlived its device's removal\n");
    }
}
