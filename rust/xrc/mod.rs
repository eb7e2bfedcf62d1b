// SPDX-License-Identifier: GPL-2.0

//! The XRC target-QP manager (Documentation/design.rst, "XRC target QPs").
//!
//! A [`Target`] is a QP that belongs to no process. Processes hold
//! [`Registration`]s on it, one per process, each made through a socket; the
//! QP's async events are copied to every registration's preallocated queue
//! and read from its socket. The last registration to end retires the target:
//! its QP is moved to error, drained and destroyed on the module workqueue.
//!
//! Lock order: `TARGETS`, then a target's `resources`, then its `fanout`, then
//! a registration's `ring`. `fanout` and `ring` disable interrupts: the QP
//! event handler takes them in whatever context the driver raises events.

use kernel::{
    impl_has_work, new_mutex, new_work,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        ArcBorrow,
        Completion,
        Mutex, //
    },
    transmute::AsBytes,
    workqueue::{
        Work,
        WorkItem, //
    },
};

use crate::{
    device::{
        DomainUse,
        RdmaDevice, //
    },
    errno,
    ffi::{
        bindings,
        ib_cq::CompletionQueue,
        ib_device::DeviceRef,
        ib_pd::ProtectionDomain,
        ib_qp::{
            OwnedQp,
            QpEventHandler,
            SharedReceiveQueue,
            TargetKind,
            XrcDomain,
            QPS_ERR,
            QPS_INIT,
            QPS_RESET, //
        },
        irq_lock::IrqSpinLock,
        net::NetRef,
        process::{
            self,
            ExitHandler,
            ExitWatch,
            ProcessRef, //
        },
        workqueue,
    },
    new_irq_spinlock,
};

/// Where a registration's events are read: the socket the process
/// registered through (the socket layer's `RdsSock`).
pub(crate) trait EventSink: Send + Sync {
    /// The namespace the socket lives in.
    fn net(&self) -> NetRef;
    /// An event was queued on one of the socket's registrations. Any context.
    fn event_queued(&self);
    /// `n` events were read or dropped.
    fn events_taken(&self, n: usize);
    /// Takes a new registration made through the socket, before it is
    /// attached to its target.
    fn adopt(&self, registration: &Arc<Registration>) -> Result;
    /// Forgets a registration that ended without a final event (its process
    /// exited, or it unregistered); what it queued is dropped.
    fn forget(&self, registration: &Arc<Registration>);
}

/// Events a registration holds before it overflows.
const QUEUE_LEN: usize = bindings::RRDS_XRC_EVENT_QUEUE_LEN as usize;

const EV_LAST_WQE_REACHED: u32 = bindings::RRDS_XRC_EV_QP_LAST_WQE_REACHED;
const EV_TARGET_GONE: u32 = bindings::RRDS_XRC_EV_TARGET_GONE;
const FLAG_SYNTHESIZED: u32 = bindings::RRDS_XRC_EVENT_SYNTHESIZED;
const FLAG_FINAL: u32 = bindings::RRDS_XRC_EVENT_FINAL;
const FLAG_OVERFLOW: u32 = bindings::RRDS_XRC_EVENT_OVERFLOW;

// The uapi event numbers are ib_core's.
const _: () = {
    assert!(bindings::RRDS_XRC_EV_QP_FATAL == bindings::ib_event_type_IB_EVENT_QP_FATAL);
    assert!(bindings::RRDS_XRC_EV_QP_REQ_ERR == bindings::ib_event_type_IB_EVENT_QP_REQ_ERR);
    assert!(bindings::RRDS_XRC_EV_QP_ACCESS_ERR == bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR);
    assert!(bindings::RRDS_XRC_EV_COMM_EST == bindings::ib_event_type_IB_EVENT_COMM_EST);
    assert!(bindings::RRDS_XRC_EV_SQ_DRAINED == bindings::ib_event_type_IB_EVENT_SQ_DRAINED);
    assert!(bindings::RRDS_XRC_EV_PATH_MIG == bindings::ib_event_type_IB_EVENT_PATH_MIG);
    assert!(bindings::RRDS_XRC_EV_PATH_MIG_ERR == bindings::ib_event_type_IB_EVENT_PATH_MIG_ERR);
    assert!(EV_LAST_WQE_REACHED == bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED);
    assert!(core::mem::size_of::<bindings::rrds_xrc_event>() == 16);
    assert!(core::mem::size_of::<bindings::rrds_info_xrc_target>() == 96);
};

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static TARGETS: Mutex<KVec<Arc<Target>>> = KVec::new();
}

/// Initialises the target table. Call once, in module init.
pub(crate) fn init() {
    // SAFETY: Module init calls this exactly once, before any other use of `TARGETS`.
    unsafe { TARGETS.init() };
}

/// Frees the table's buffer. Call once, at unload, after the last target.
pub(crate) fn release_table() {
    crate::tables::free_table(&mut TARGETS.lock());
}

/// How targets are implemented on a device.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// `IB_QPT_XRC_TGT` in an XRC domain.
    Xrc,
    /// An RC QP on an SRQ: for devices without XRC (rxe, siw).
    Emulated,
}

impl Backend {
    /// The backend of `device`, fixed when the device is added.
    fn of(device: &RdmaDevice) -> Self {
        if device.caps().xrc {
            Self::Xrc
        } else {
            Self::Emulated
        }
    }

    pub(crate) fn uapi(self) -> u32 {
        match self {
            Self::Xrc => bindings::RRDS_XRC_BACKEND_XRC,
            Self::Emulated => bindings::RRDS_XRC_BACKEND_EMULATED,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Xrc => "xrc",
            Self::Emulated => "emulated",
        }
    }
}

/// The verbs objects of a target. Fields drop in order: the QP before what it uses.
enum Resources {
    Emulated {
        qp: OwnedQp<Target>,
        _srq: SharedReceiveQueue,
        _cq: CompletionQueue,
    },
    Xrc {
        qp: OwnedQp<Target>,
        _xrcd: XrcDomain,
    },
}

impl Resources {
    fn qp(&self) -> &OwnedQp<Target> {
        match self {
            Self::Emulated { qp, .. } | Self::Xrc { qp, .. } => qp,
        }
    }

    /// Modify to error, drain, destroy (by dropping).
    fn shut_down(self) {
        // A QP already in error (or gone bad) refuses nothing here that matters.
        let _ = self.qp().modify_state(QPS_ERR, 0);
        if let Self::Emulated { qp, .. } = &self {
            // No receive is ever posted on the SRQ: only the send queue can hold
            // requests. (ib_drain_qp would wait for LAST_WQE_REACHED, which siw never raises.)
            qp.drain_send_queue();
        }
    }
}

/// Who is registered, and whether the target still accepts registrations.
struct Fanout {
    registrations: KVec<Arc<Registration>>,
    /// Retired: the last registration ended, or the device is going.
    closed: bool,
}

/// A target QP.
///
/// # Invariants
///
/// While `resources` holds the QP, the QP's event context is this target,
/// which stays allocated (the QP is destroyed before the last `Arc` goes:
/// whoever takes `resources` holds an `Arc`).
#[pin_data]
pub(crate) struct Target {
    net: NetRef,
    /// The effective uid of the creator (in the initial user namespace):
    /// only it, or a process with CAP_NET_ADMIN, may register.
    owner_uid: u32,
    device: Arc<RdmaDevice>,
    backend: Backend,
    port: u32,
    qp_num: Atomic<u32>,
    #[pin]
    resources: Mutex<Option<Resources>>,
    /// The creator's namespace's PD on the device, which the QP is in: kept
    /// with `resources`, and dropped by `destroy` after them.
    #[pin]
    domain: Mutex<Option<DomainUse>>,
    /// Held by `destroy` until the QP is gone.
    #[pin]
    destroying: Mutex<()>,
    #[pin]
    fanout: IrqSpinLock<Fanout>,
    /// Events queued, one per registration reached, and events lost to full queues.
    events: Atomic<u64>,
    overflows: Atomic<u64>,
    /// Completed once the QP is destroyed.
    #[pin]
    destroyed: Completion,
    #[pin]
    teardown: Work<Target>,
}

impl_has_work! {
    impl HasWork<Self> for Target { self.teardown }
}

impl WorkItem for Target {
    type Pointer = Arc<Target>;

    fn run(this: Arc<Target>) {
        this.destroy();
        TARGETS.lock().retain(|t| !Arc::ptr_eq(t, &this));
    }
}

impl QpEventHandler for Target {
    fn qp_event(&self, event: u32) {
        self.fan_out(event, 0);
    }
}

impl Target {
    /// A new target of `owner_uid` in `net` on `device`, with no QP yet and
    /// nobody registered.
    ///
    /// Returns the target, or `ENOMEM`.
    fn new(
        net: NetRef,
        owner_uid: u32,
        device: Arc<RdmaDevice>,
        backend: Backend,
        port: u32,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                net,
                owner_uid,
                device,
                backend,
                port,
                qp_num: Atomic::new(0),
                resources <- new_mutex!(None),
                domain <- new_mutex!(None),
                destroying <- new_mutex!(()),
                fanout <- new_irq_spinlock!(Fanout {
                    registrations: KVec::new(),
                    closed: false,
                }),
                events: Atomic::new(0),
                overflows: Atomic::new(0),
                destroyed <- Completion::new(),
                teardown <- new_work!("rrds_xrc_teardown"),
            }),
            GFP_KERNEL,
        )
    }

    /// Creates the target's QP in `pd` (that of `domain`) with what its
    /// backend needs (a CQ and an SRQ, or an XRC domain), moves it to INIT on
    /// the target's port and keeps it in `resources`, taking `domain` with it.
    ///
    /// Errors: those of creating the verbs objects or of the transition; what
    /// was created is destroyed before returning, and nothing is kept.
    fn create_qp(
        self: &Arc<Self>,
        pd: &ProtectionDomain,
        domain: &mut Option<DomainUse>,
    ) -> Result {
        let raw = self.device.handle();
        let context = Arc::as_ptr(self);
        let resources = match self.backend {
            Backend::Emulated => {
                let cq = CompletionQueue::alloc(raw, 4)?;
                let srq = SharedReceiveQueue::create(pd, 1)?;
                // SAFETY: The target outlives its QP (type invariant of `Target`): the QP
                // is kept in `resources` or dropped here, under the caller's `Arc`.
                let qp = unsafe {
                    OwnedQp::create(pd, TargetKind::RcOnSrq { srq: &srq, cq: &cq }, context)?
                };
                Resources::Emulated {
                    qp,
                    _srq: srq,
                    _cq: cq,
                }
            }
            Backend::Xrc => {
                let xrcd = XrcDomain::alloc(raw)?;
                // SAFETY: As above.
                let qp =
                    unsafe { OwnedQp::create(pd, TargetKind::XrcTarget { xrcd: &xrcd }, context)? };
                Resources::Xrc { qp, _xrcd: xrcd }
            }
        };
        resources.qp().modify_state(QPS_INIT, self.port)?;
        self.qp_num.store(resources.qp().qp_num(), Relaxed);
        *self.resources.lock() = Some(resources);
        // Taken, not dropped: the caller holds the domains' lock.
        *self.domain.lock() = domain.take();
        Ok(())
    }

    /// Attaches the creator's `registration`, alone in `first`, and lists the
    /// target in the table, where `register` finds it; under the PD lock (see
    /// `create`).
    ///
    /// Errors: `EDQUOT` or `ENOSPC` if the limits of [`check_limits`] were
    /// reached meanwhile, or `ENOMEM`; the registration is detached then.
    fn publish(
        self: &Arc<Self>,
        first: KVec<Arc<Registration>>,
        registration: &Arc<Registration>,
    ) -> Result {
        self.fanout.lock().registrations = first;
        watch_exit(registration);
        let mut targets = TARGETS.lock();
        let pushed = check_limits(&targets, self.net, self.owner_uid)
            .and_then(|()| Ok(targets.push(self.clone(), GFP_KERNEL)?));
        if let Err(e) = pushed {
            drop(targets);
            registration.detach();
            return Err(e);
        }
        Ok(())
    }

    pub(crate) fn qp_num(&self) -> u32 {
        self.qp_num.load(Relaxed)
    }

    pub(crate) fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether the driver raises LAST_WQE_REACHED when the QP enters error:
    /// every transport but iWARP, whose verbs define no such event.
    fn raises_last_wqe(&self) -> bool {
        self.device.caps().transport != crate::ffi::ib_device::Transport::Iwarp
    }

    /// Queues `event` on every registration (any context).
    fn fan_out(&self, event: u32, flags: u32) {
        let fanout = self.fanout.lock();
        for registration in fanout.registrations.iter() {
            if registration.push(self.qp_num(), event, flags) {
                self.events.add(1, Relaxed);
            } else {
                self.overflows.add(1, Relaxed);
            }
        }
    }

    /// Destroys the QP (once; later calls wait for the first to finish).
    fn destroy(&self) {
        // Serialized by `destroying`, and shut down outside `resources`' lock:
        // freeing the CQ waits for CQ completion work, which takes connection
        // locks, and those are held while `resources` is taken (getsockopt under
        // the PD lock; a lockdep report, 2026-11-26). Nothing holds another lock
        // while taking `destroying`.
        let _destroying = self.destroying.lock();
        let resources = self.resources.lock().take();
        if let Some(r) = resources {
            r.shut_down();
        }
        let domain = self.domain.lock().take();
        drop(domain);
        self.destroyed.complete_all();
    }

    /// The last registration ended: nobody finds the target any more, and its
    /// QP goes on the workqueue.
    fn retire(self: Arc<Self>) {
        let _ = workqueue::queue().enqueue(self);
    }
}

/// The events of one registration, oldest first.
struct EventRing {
    slots: [bindings::rrds_xrc_event; QUEUE_LEN],
    head: usize,
    len: usize,
}

/// One process's registration with a target, made through one socket.
///
/// # Invariants
///
/// The exit watch is armed with this registration as its owner while the
/// registration is in its target's `fanout` list; `detach` disarms it.
#[pin_data]
pub(crate) struct Registration {
    target: Arc<Target>,
    process: ProcessRef,
    /// The socket events are read from; the socket's release detaches this.
    sink: Arc<dyn EventSink>,
    #[pin]
    ring: IrqSpinLock<EventRing>,
    #[pin]
    exit_watch: ExitWatch,
    /// Checks, in process context, that the watched process really exited.
    #[pin]
    reap: Work<Registration>,
}

impl_has_work! {
    impl HasWork<Self> for Registration { self.reap }
}

impl WorkItem for Registration {
    type Pointer = Arc<Registration>;

    fn run(this: Arc<Registration>) {
        if this.process.exited() && this.detach() {
            // Nobody is left to read what was queued.
            this.sink.forget(&this);
        }
    }
}

impl ExitHandler for Registration {
    fn process_exited(&self) {
        // SAFETY: The watch is armed only while the registration is in its target's
        // list, which holds an `Arc`; disarming waits for this callback to return.
        let this: ArcBorrow<'_, Registration> =
            unsafe { ArcBorrow::from_raw(core::ptr::from_ref(self)) };
        let _ = workqueue::queue().enqueue(Arc::<Registration>::from(this));
    }
}

impl Registration {
    fn new(target: Arc<Target>, sink: Arc<dyn EventSink>) -> Result<Arc<Self>> {
        let process = ProcessRef::current()?;
        Arc::pin_init(
            pin_init!(Self {
                target,
                process,
                sink,
                ring <- new_irq_spinlock!(EventRing {
                    slots: [bindings::rrds_xrc_event::default(); QUEUE_LEN],
                    head: 0,
                    len: 0,
                }),
                exit_watch <- ExitWatch::new(),
                reap <- new_work!("rrds_xrc_reap"),
            }),
            GFP_KERNEL,
        )
    }

    /// Queues an event; false if the queue was full (the newest queued event
    /// then carries the loss).
    fn push(&self, qp_num: u32, event: u32, flags: u32) -> bool {
        let mut ring = self.ring.lock();
        if ring.len == QUEUE_LEN {
            let newest = (ring.head + QUEUE_LEN - 1) % QUEUE_LEN;
            let slot = &mut ring.slots[newest];
            slot.flags |= FLAG_OVERFLOW;
            slot.lost = slot.lost.saturating_add(1);
            return false;
        }
        let tail = (ring.head + ring.len) % QUEUE_LEN;
        ring.slots[tail] = bindings::rrds_xrc_event {
            qp_num,
            event,
            flags,
            lost: 0,
        };
        ring.len += 1;
        self.sink.event_queued();
        drop(ring);
        true
    }

    /// The oldest event, removed unless `peek`.
    pub(crate) fn pop(&self, peek: bool) -> Option<bindings::rrds_xrc_event> {
        let mut ring = self.ring.lock();
        if ring.len == 0 {
            return None;
        }
        let event = ring.slots[ring.head];
        if !peek {
            ring.head = (ring.head + 1) % QUEUE_LEN;
            ring.len -= 1;
            self.sink.events_taken(1);
        }
        Some(event)
    }

    /// Drops every queued event.
    pub(crate) fn discard(&self) {
        let mut ring = self.ring.lock();
        let n = core::mem::take(&mut ring.len);
        self.sink.events_taken(n);
    }

    /// Ends the registration at its target; retires the target if it was the
    /// last. False if it had already ended.
    pub(crate) fn detach(self: &Arc<Self>) -> bool {
        let target = &self.target;
        let mut fanout = target.fanout.lock();
        let Some(i) = fanout
            .registrations
            .iter()
            .position(|r| Arc::ptr_eq(r, self))
        else {
            return false;
        };
        let ours = fanout.registrations.remove(i).ok();
        let last = fanout.registrations.is_empty() && !fanout.closed;
        if last {
            fanout.closed = true;
        }
        drop(fanout);
        // Not the last reference: the caller holds one.
        drop(ours);
        self.exit_watch.disarm();
        if last {
            target.clone().retire();
        }
        true
    }

    pub(crate) fn target(&self) -> &Arc<Target> {
        &self.target
    }

    /// The socket the registration delivers to.
    pub(crate) fn sink(&self) -> &dyn EventSink {
        &*self.sink
    }
}

/// Arms the exit watch of a registration just added to its target's list.
fn watch_exit(registration: &Arc<Registration>) {
    // SAFETY: The registration is pinned in its `Arc` and in its target's list, which
    // keeps it alive until `detach` disarms the watch; `process` lives as long.
    unsafe {
        registration
            .exit_watch
            .arm::<Registration>(&registration.process, Arc::as_ptr(registration))
    };
}

/// Whether `uid` may create another target in `net`: at most
/// `xrc_max_targets_per_user` live targets per user (all namespaces; the
/// device's QPs are the host's) and `xrc_max_targets_per_net` per
/// namespace. `EDQUOT` for the user's limit, `ENOSPC` for the namespace's.
fn check_limits(targets: &KVec<Arc<Target>>, net: NetRef, uid: u32) -> Result {
    let live = targets.iter().filter(|t| !t.fanout.lock().closed);
    let (mut of_user, mut of_net) = (0u64, 0u64);
    for t in live {
        of_user += u64::from(t.owner_uid == uid);
        of_net += u64::from(t.net == net);
    }
    if of_user >= crate::limits::xrc_max_targets_per_user() {
        return Err(errno::edquot());
    }
    if of_net >= crate::limits::xrc_max_targets_per_net() {
        return Err(errno::enospc());
    }
    Ok(())
}

/// The target with `qp_num` on `device` in `net`, unless retired.
fn find(net: NetRef, device: &RdmaDevice, qp_num: u32) -> Result<Arc<Target>> {
    TARGETS
        .lock()
        .iter()
        .find(|t| {
            t.net == net
                && core::ptr::eq(&*t.device, device)
                && t.qp_num() == qp_num
                && !t.fanout.lock().closed
        })
        .cloned()
        .ok_or(ENOENT)
}

/// Creates a target on `device` (port `port`) and registers the calling
/// process through `sink`. Returns the registration.
pub(crate) fn create(
    sink: Arc<dyn EventSink>,
    device: Arc<RdmaDevice>,
    port: u32,
) -> Result<Arc<Registration>> {
    let backend = Backend::of(&device);
    let net = sink.net();
    let owner_uid = process::current_euid();
    // Refused before any device resource is spent; checked again, for
    // good, when the target joins the table.
    check_limits(&TARGETS.lock(), net, owner_uid)?;
    let domain = device.domain(net)?;
    let target = Target::new(net, owner_uid, device.clone(), backend, port)?;
    let registration = Registration::new(target.clone(), sink)?;
    // On the socket before any event can reach it (see `register`).
    registration.sink.adopt(&registration)?;
    let mut first = KVec::with_capacity(1, GFP_KERNEL)?;
    first.push(registration.clone(), GFP_KERNEL)?;
    // Under the PD lock: device removal (which closes the PDs first) either
    // finds the target in the table or keeps it from being created.
    let mut kept = Some(domain.share());
    domain
        .with_pd(|pd| {
            target.create_qp(pd, &mut kept)?;
            target.publish(first, &registration)
        })
        .inspect_err(|_| {
            // Not in the table: destroy whatever was built, here.
            target.fanout.lock().closed = true;
            registration.exit_watch.disarm();
            target.destroy();
            registration.sink.forget(&registration);
        })?;
    Ok(registration)
}

/// Registers the calling process with the target `qp_num`.
pub(crate) fn register(
    sink: Arc<dyn EventSink>,
    device: &RdmaDevice,
    qp_num: u32,
) -> Result<Arc<Registration>> {
    let target = find(sink.net(), device, qp_num)?;
    // Another user's target is not ours to keep alive or to listen to.
    if target.owner_uid != process::current_euid() && !process::capable_net_admin() {
        return Err(EPERM);
    }
    let registration = Registration::new(target.clone(), sink)?;
    // On the socket before any event can reach it: what poll and recvmsg
    // count is always there to read.
    registration.sink.adopt(&registration)?;
    let attached = (|| {
        let mut fanout = target.fanout.lock();
        if fanout.closed {
            return Err(ENOENT);
        }
        if fanout
            .registrations
            .iter()
            .any(|r| r.process.same(&registration.process))
        {
            return Err(errno::ealready());
        }
        fanout
            .registrations
            .push(registration.clone(), GFP_ATOMIC)?;
        watch_exit(&registration);
        Ok(())
    })();
    if let Err(e) = attached {
        registration.sink.forget(&registration);
        return Err(e);
    }
    Ok(registration)
}

/// Ends the calling process's registration with the target `qp_num`, and
/// waits for the target's QP to be destroyed if it was the last.
pub(crate) fn unregister(
    net: NetRef,
    device: &RdmaDevice,
    qp_num: u32,
) -> Result<Arc<Registration>> {
    let target = find(net, device, qp_num)?;
    let me = ProcessRef::current()?;
    let registration = target
        .fanout
        .lock()
        .registrations
        .iter()
        .find(|r| r.process.same(&me))
        .cloned()
        .ok_or(ENOENT)?;
    if !registration.detach() {
        return Err(ENOENT);
    }
    if target.fanout.lock().closed {
        target.destroyed.wait_for_completion();
    }
    Ok(registration)
}

/// Test hook (`RRDS_XRC_INJECT`): drive the QP into error, or synthesize an event.
pub(crate) fn inject(net: NetRef, device: &RdmaDevice, args: &bindings::rrds_xrc_inject) -> Result {
    if args.reserved != 0 {
        return Err(EINVAL);
    }
    let target = find(net, device, args.qp_num)?;
    match args.action {
        bindings::RRDS_XRC_INJECT_QP_ERROR => {
            let resources = target.resources.lock();
            let qp = resources.as_ref().ok_or(ENOENT)?.qp();
            if target.raises_last_wqe() {
                // Only a transition raises the event: from error, start over.
                if qp.query_state()? == QPS_ERR {
                    qp.modify_state(QPS_RESET, 0)?;
                    qp.modify_state(QPS_INIT, target.port)?;
                }
                qp.modify_state(QPS_ERR, 0)?;
            } else {
                qp.modify_state(QPS_ERR, 0)?;
                drop(resources);
                // iWARP drivers raise nothing for a QP entering error: say what an SRQ
                // QP would, and that rrds said it.
                target.fan_out(EV_LAST_WQE_REACHED, FLAG_SYNTHESIZED);
            }
            Ok(())
        }
        bindings::RRDS_XRC_INJECT_EVENT => {
            let known = matches!(
                args.event,
                bindings::RRDS_XRC_EV_QP_FATAL
                    ..=bindings::RRDS_XRC_EV_PATH_MIG_ERR | EV_LAST_WQE_REACHED
            );
            if !known {
                return Err(EINVAL);
            }
            target.fan_out(args.event, FLAG_SYNTHESIZED);
            Ok(())
        }
        _ => Err(EINVAL),
    }
}

/// `device` is going away: every registration on its targets gets a final
/// event, and the QPs are destroyed before this returns.
pub(crate) fn device_removed(device: DeviceRef) {
    // One at a time, each leaving the table as it goes: nothing to allocate.
    loop {
        let found = TARGETS.lock().iter().find(|t| t.device.is(device)).cloned();
        let Some(target) = found else {
            break;
        };
        let ended = {
            let mut fanout = target.fanout.lock();
            fanout.closed = true;
            core::mem::take(&mut fanout.registrations)
        };
        for registration in ended.iter() {
            registration.exit_watch.disarm();
            registration.push(
                target.qp_num(),
                EV_TARGET_GONE,
                FLAG_SYNTHESIZED | FLAG_FINAL,
            );
        }
        drop(ended);
        target.destroy();
        TARGETS.lock().retain(|t| !Arc::ptr_eq(t, &target));
    }
}

/// `RRDS_INFO_XRC_TARGETS` records of `net`'s live targets.
pub(crate) fn info(net: NetRef, out: &mut KVVec<u8>) -> Result {
    let targets = TARGETS.lock();
    for t in targets.iter().filter(|t| t.net == net) {
        let registrations = {
            let fanout = t.fanout.lock();
            if fanout.closed {
                continue;
            }
            fanout.registrations.len() as u32
        };
        let qp_state = match t.resources.lock().as_ref() {
            Some(r) => r.qp().query_state().unwrap_or(QPS_ERR),
            None => continue,
        };
        let mut record = bindings::rrds_info_xrc_target {
            qp_num: t.qp_num(),
            backend: t.backend.uapi(),
            qp_state,
            registrations,
            events: t.events.load(Relaxed),
            overflows: t.overflows.load(Relaxed),
            ..Default::default()
        };
        let name = t.device.name();
        let name = name.as_bytes();
        let n = name.len().min(record.device.len() - 1);
        record.device[..n].copy_from_slice(&name[..n]);
        out.extend_from_slice(record.as_bytes(), GFP_KERNEL)?;
    }
    Ok(())
}

/// debugfs `rrds/xrc_targets`: one line per target.
pub(crate) fn show(f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    f.write_fmt(fmt!(
        "qp_num device backend closed registrations events overflows\n"
    ))?;
    for t in TARGETS.lock().iter() {
        let (closed, registrations) = {
            let fanout = t.fanout.lock();
            (fanout.closed, fanout.registrations.len())
        };
        f.write_fmt(fmt!(
            "{} {} {} {} {} {} {}\n",
            t.qp_num(),
            t.device.name(),
            t.backend.name(),
            u8::from(closed),
            registrations,
            t.events.load(Relaxed),
            t.overflows.load(Relaxed),
        ))?;
    }
    Ok(())
}

/// How many targets exist, retired ones included (debugfs `rrds/objects`).
pub(crate) fn count() -> usize {
    TARGETS.lock().len()
}
