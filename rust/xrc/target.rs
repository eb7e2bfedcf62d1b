// SPDX-License-Identifier: GPL-2.0

//! A target QP: its verbs objects, who is registered with it, its QP
//! events fanned out to every registration, and its retirement.

// The rest of the XRC manager: mod.rs's types and imports.
use super::*;

/// The verbs objects of a target. Fields drop in order: the QP before what
/// it uses, the CQ (whose completions use the receiver) before the receiver.
pub(super) enum Resources {
    Emulated {
        qp: OwnedQp<Target>,
        _cq: CompletionQueue,
        receiver: Arc<Receiver>,
    },
    Xrc {
        qp: OwnedQp<Target>,
        _xrcd: XrcDomain,
    },
}

impl Resources {
    pub(super) fn qp(&self) -> &OwnedQp<Target> {
        match self {
            Self::Emulated { qp, .. } | Self::Xrc { qp, .. } => qp,
        }
    }

    /// Modify to error, drain, destroy (by dropping).
    pub(super) fn shut_down(self) {
        // A QP already in error (or gone bad) refuses nothing here that matters.
        let _ = self.qp().modify_state(QPS_ERR, 0);
        if let Self::Emulated { qp, .. } = &self {
            // Receives are the SRQ's, which goes after the QP, discarding what
            // is still posted: only the send queue can hold the QP's requests.
            // (ib_drain_qp would wait for LAST_WQE_REACHED, which siw never raises.)
            qp.drain_send_queue();
        }
    }

    /// Payload bytes the target received (emulated targets; 0 otherwise).
    pub(super) fn bytes_received(&self) -> u64 {
        match self {
            Self::Emulated { receiver, .. } => receiver.bytes(),
            Self::Xrc { .. } => 0,
        }
    }
}

/// Who is registered, and whether the target still accepts registrations.
pub(super) struct Fanout {
    pub(super) registrations: KVec<Arc<Registration>>,
    /// Retired: the last registration ended, or the device is going.
    pub(super) closed: bool,
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
    pub(super) net: NetRef,
    /// The effective uid of the creator (in the initial user namespace):
    /// only it, or a process with CAP_NET_ADMIN, may register.
    pub(super) owner_uid: u32,
    pub(super) device: Arc<RdmaDevice>,
    pub(super) backend: Backend,
    pub(super) port: u32,
    pub(super) qp_num: Atomic<u32>,
    #[pin]
    pub(super) resources: Mutex<Option<Resources>>,
    /// The creator's namespace's PD on the device, which the QP is in: kept
    /// with `resources`, and dropped by `destroy` after them.
    #[pin]
    pub(super) domain: Mutex<Option<DomainUse>>,
    /// Held by `destroy` until the QP is gone.
    #[pin]
    pub(super) destroying: Mutex<()>,
    /// The initiator connected in band, and the listener it came through.
    #[pin]
    pub(super) inband: Mutex<Inband>,
    #[pin]
    pub(super) fanout: IrqSpinLock<Fanout>,
    /// Events queued, one per registration reached, and events lost to full queues.
    pub(super) events: Atomic<u64>,
    pub(super) overflows: Atomic<u64>,
    /// Completed once the QP is destroyed.
    #[pin]
    pub(super) destroyed: Completion,
    #[pin]
    pub(super) teardown: Work<Target>,
    /// Destroys an in-band connection that ended (not from its handler).
    #[pin]
    reaper: Work<Target, REAP_WORK>,
}

impl_has_work! {
    impl HasWork<Self> for Target { self.teardown }
    impl HasWork<Self, REAP_WORK> for Target { self.reaper }
}

impl WorkItem<REAP_WORK> for Target {
    type Pointer = Arc<Target>;

    fn run(this: Arc<Target>) {
        this.reap_ended();
    }
}

impl WorkItem for Target {
    type Pointer = Arc<Target>;

    fn run(this: Arc<Target>) {
        this.destroy();
        TARGETS.lock().retain(|t| !Arc::ptr_eq(t, &this));
    }
}

// SAFETY: A target's QP lives in its `resources` (or is dropped in `create_qp`
// under the caller's `Arc`), so it goes before the target.
unsafe impl QpEventHandler for Target {
    fn qp_event(&self, event: u32) {
        self.fan_out(event, 0);
    }
}

impl Target {
    /// A new target of `owner_uid` in `net` on `device`, with no QP yet and
    /// nobody registered.
    ///
    /// Returns the target, or `ENOMEM`.
    pub(super) fn new(
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
                inband <- new_mutex!(Inband::default()),
                fanout <- new_irq_spinlock!(Fanout {
                    registrations: KVec::new(),
                    closed: false,
                }),
                events: Atomic::new(0),
                overflows: Atomic::new(0),
                destroyed <- Completion::new(),
                teardown <- new_work!("rrds_xrc_teardown"),
                reaper <- new_work!("rrds_xrc_reaper"),
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
    pub(super) fn create_qp(
        self: &Arc<Self>,
        pd: &ProtectionDomain,
        domain: &mut Option<DomainUse>,
    ) -> Result {
        let raw = self.device.handle();
        let resources = match self.backend {
            Backend::Emulated => {
                let cq = CompletionQueue::alloc(raw, RECV_CQ_ENTRIES)?;
                let receiver = Receiver::new(raw, pd, self)?;
                let kind = TargetKind::RcOnSrq {
                    srq: receiver.srq(),
                    cq: &cq,
                };
                let qp = OwnedQp::create(pd, kind, self)?;
                Resources::Emulated {
                    qp,
                    _cq: cq,
                    receiver,
                }
            }
            Backend::Xrc => {
                let xrcd = XrcDomain::alloc(raw)?;
                let qp = OwnedQp::create(pd, TargetKind::XrcTarget { xrcd: &xrcd }, self)?;
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
    pub(super) fn publish(
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
    pub(super) fn raises_last_wqe(&self) -> bool {
        self.device.caps().transport != crate::ffi::ib_device::Transport::Iwarp
    }

    /// Queues `event` on every registration (any context).
    pub(super) fn fan_out(&self, event: u32, flags: u32) {
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
    pub(super) fn destroy(&self) {
        // Serialized by `destroying`, and shut down outside `resources`' lock:
        // freeing the CQ waits for CQ completion work, which takes connection
        // locks, and those are held while `resources` is taken (getsockopt under
        // the PD lock; a lockdep report, 2026-11-26). Nothing holds another lock
        // while taking `destroying`.
        let _destroying = self.destroying.lock();
        // The initiator disconnected, and no new one accepted, first.
        self.close_inband();
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
    pub(super) fn retire(self: Arc<Self>) {
        let _ = workqueue::queue().enqueue::<Arc<Self>, 0>(self);
    }
}
