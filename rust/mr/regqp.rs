// SPDX-License-Identifier: GPL-2.0

//! The registration QP: an RC QP owned by rrds that carries every
//! `IB_WR_REG_MR` and `IB_WR_LOCAL_INV` of one device in one namespace, and
//! never data (Documentation/design.rst, "Memory registration").
//!
//! Both drivers rrds runs on refuse work requests on a QP that is not in
//! RTS, and an iWARP QP reaches RTS only through a real connection. So the
//! QP is one end of an rdma_cm connection from the device's own address to
//! itself: a listener on an ephemeral port, an active id that connects to
//! it, and the passive id the listener hands over, whose QP stays idle.
//! The connection is made by the user task that first needs it, because
//! siw opens its TCP sockets in the calling task's namespace.

use core::sync::atomic::{
    AtomicBool,
    Ordering::Relaxed, //
};
use kernel::{
    new_condvar, new_mutex, new_spinlock,
    prelude::*,
    sync::{
        Arc,
        ArcBorrow,
        CondVar,
        Mutex,
        SpinLock, //
    },
    time::msecs_to_jiffies,
};

use crate::{
    addr::Endpoint,
    device::DomainUse,
    ffi::{
        ib_cq::{
            CompletionQueue,
            QpRef, //
        },
        net::NetRef,
        random,
        rdma_cm::{
            CmEvent,
            CmEventKind,
            CmHandler,
            CmId,
            CmIdKey,
            CmIdRef,
            ConnParam,
            QpCaps,
            SockAddr, //
        },
    },
    stats::{
        self,
        Stat, //
    },
    wait::wait_until,
};

/// Outstanding work requests: REG_MR and LOCAL_INV of every socket on the device.
pub(super) const SEND_DEPTH: u32 = 512;
const RESOLVE_TIMEOUT_MS: u32 = 2000;
/// How long the connection to itself may take, under TCG included.
const SETUP_TIMEOUT_MS: u32 = 10_000;
/// How long a device's removal waits for an aborted set-up to end (it is
/// then in a short verbs or rdma_cm call, or in the selftests' listener
/// hold of at most 10 s).
const ABORT_WAIT_MS: u32 = 30_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
enum Phase {
    #[default]
    Resolving,
    RouteResolved,
    Connecting,
    Up,
    Failed,
}

/// The rdma_cm ids and CQs of the connection. Field order is drop order:
/// ids (with their QPs) before the CQs those QPs use.
#[derive(Default)]
struct Link {
    phase: Phase,
    /// The active id, for its handler to recognise it.
    active_id: CmIdKey,
    active: Option<CmId<RegCm>>,
    passive: Option<CmId<RegCm>>,
    listener: Option<CmId<RegCm>>,
    /// The active id's QP once connected, until `shut_down` drains it: a
    /// failure stops posting (`post`) with requests still outstanding,
    /// whose completions must run before the QP and CQ go.
    qp: Option<QpRef>,
    cq: Option<CompletionQueue>,
    passive_cq: Option<CompletionQueue>,
}

/// One registration QP.
///
/// # Invariants
///
/// Events of its ids carry a pointer to the `RegQp` as context; the ids live
/// in `link` and are destroyed (by `shut_down` or drop) before the `RegQp`
/// is freed. `post` is `Some` only while the active QP is in RTS and alive.
#[pin_data]
pub(crate) struct RegQp {
    net: NetRef,
    /// Random, sent as the active side's private data: the listener accepts
    /// only the request that carries it (anyone who can reach the device's
    /// address can reach the ephemeral port while it listens).
    token: [u8; 8],
    #[pin]
    link: Mutex<Link>,
    #[pin]
    changed: CondVar,
    /// The QP to post on; taken (under this lock) before the QP is drained.
    #[pin]
    post: SpinLock<Option<QpRef>>,
    /// `connect` is setting the connection up: its ids, and perhaps its QP,
    /// are the setting-up task's until it ends (`abort_set_up` waits for that).
    setting_up: AtomicBool,
    /// Held for a whole `shut_down`: a second caller (the device's removal
    /// and the set-up's own failure) returns only once the QP is destroyed.
    #[pin]
    shutting_down: Mutex<()>,
    /// The namespace's PD on the device, which the QPs and every MR
    /// registered through them are in. Last: it outlives the QPs.
    domain: DomainUse,
}

impl RegQp {
    /// A registration QP in `domain` (of `net`), to be connected with
    /// [`Self::connect`].
    pub(super) fn new(net: NetRef, domain: DomainUse) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                net,
                domain,
                token: random::u64().to_ne_bytes(),
                link <- new_mutex!(Link::default()),
                changed <- new_condvar!("rrds_regqp"),
                post <- new_spinlock!(None),
                setting_up: AtomicBool::new(true),
                shutting_down <- new_mutex!(()),
            }),
            GFP_KERNEL,
        )
    }

    /// Connects the QP through its local address `addr`; shuts it down if
    /// that fails. Process context, in a task of its namespace, once.
    pub(super) fn connect(self: &Arc<Self>, addr: &Endpoint) -> Result {
        // The set-up's ids and QP are destroyed (or kept in `link`) when
        // `establish` returns, before `abort_set_up` may let the PD go.
        let established = self.establish(addr);
        {
            let _link = self.link.lock();
            self.setting_up.store(false, Relaxed);
        }
        self.changed.notify_all();
        if established.is_err() {
            self.shut_down();
        }
        established
    }

    /// The device is being removed while this QP is being set up: fails the
    /// set-up and waits (at most [`ABORT_WAIT_MS`]) until it has ended, so
    /// that nothing of it is left in the PD; the caller then shuts the QP
    /// down. Process context (the device's `remove`).
    pub(super) fn abort_set_up(&self) {
        self.set_phase(Phase::Failed);
        if !crate::wait::poll_until(ABORT_WAIT_MS, || !self.setting_up.load(Relaxed)) {
            pr_warn!("a registration QP's set-up outlived its device's removal\n");
        }
    }

    fn establish(self: &Arc<Self>, addr: &Endpoint) -> Result {
        // Ours until connected; dropped here (ids before the CQ) on failure.
        let mut own = Link::default();
        let listener = CmId::<RegCm>::create(self.net, Some(self))?;
        let mut raw = [0u8; 28];
        let len = Endpoint { port: 0, ..*addr }.write_sockaddr(&mut raw);
        let src = SockAddr::new(&raw[..len]);
        listener.bind(&src)?;
        listener.listen(1)?;
        let port = listener.src_port();
        own.listener = Some(listener);

        let active = CmId::<RegCm>::create(self.net, Some(self))?;
        self.link.lock().active_id = active.key();
        let len = Endpoint { port, ..*addr }.write_sockaddr(&mut raw);
        let active = own.active.insert(active);
        active.resolve_addr(&src, &SockAddr::new(&raw[..len]), RESOLVE_TIMEOUT_MS)?;
        self.wait_for(Phase::RouteResolved)?;

        let cq = own.cq.insert(CompletionQueue::alloc(
            self.domain.device().handle(),
            SEND_DEPTH + 2,
        )?);
        self.domain
            .with_pd(|pd| active.create_qp(pd, cq, cq, qp_caps(SEND_DEPTH)))?;
        // The selftests' hold: the listener open and the QP made.
        crate::hooks::REGQP_LISTEN_HOLD.pause_showing(port.into());
        {
            let mut link = self.link.lock();
            // Aborted meanwhile: the device is being removed.
            if link.phase == Phase::Failed {
                return Err(crate::errno::econnrefused());
            }
            link.phase = Phase::Connecting;
        }
        active.connect_unlocked(&conn_param(&self.token))?;
        self.wait_for(Phase::Up)?;

        // SAFETY: The QP of the active id, live until `shut_down` destroys the id,
        // after taking it back from `post` and `link.qp`.
        let qp = unsafe { QpRef::from_raw(active.qp()) }.ok_or_else(crate::errno::enotconn)?;
        let mut link = self.link.lock();
        link.active = own.active.take();
        link.qp = Some(qp);
        link.cq = own.cq.take();
        drop(link);
        *self.post.lock() = Some(qp);
        // Connected: nothing more to accept. Destroyed outside `link`
        // (destroying an id waits for its running handler, which takes it).
        drop(own);
        Ok(())
    }

    /// Waits (uninterruptibly bounded) until the connection reaches `phase`.
    fn wait_for(&self, phase: Phase) -> Result {
        let mut timeo = msecs_to_jiffies(SETUP_TIMEOUT_MS) as isize;
        let mut link = self.link.lock();
        let reached = wait_until(&self.changed, &mut link, &mut timeo, |l| {
            l.phase == phase || l.phase == Phase::Failed
        });
        match reached {
            Ok(()) if link.phase == phase => Ok(()),
            Ok(()) => Err(crate::errno::econnrefused()),
            Err(e) => {
                link.phase = Phase::Failed;
                Err(e)
            }
        }
    }

    fn set_phase(&self, phase: Phase) {
        let mut link = self.link.lock();
        // Failure is final: a late event does not revive the connection.
        if link.phase != Phase::Failed {
            link.phase = phase;
        }
        drop(link);
        if phase == Phase::Failed {
            // No new work requests; `shut_down` drains what was posted.
            *self.post.lock() = None;
        }
        self.changed.notify_all();
    }

    /// The PD this QP and the MRs registered through it are in.
    pub(super) fn domain(&self) -> &DomainUse {
        &self.domain
    }

    /// Whether work requests can still be posted.
    pub(super) fn is_up(&self) -> bool {
        self.post.lock().is_some()
    }

    /// Runs `post` on the QP while it is up; ENOTCONN once it failed.
    pub(super) fn with_qp<R>(&self, post: impl FnOnce(&QpRef) -> Result<R>) -> Result<R> {
        let guard = self.post.lock();
        let qp = guard.as_ref().ok_or_else(crate::errno::enotconn)?;
        let result = post(qp);
        if result.is_err() {
            drop(guard);
            self.set_phase(Phase::Failed);
        }
        result
    }

    /// Moves the QP to the error state, as a device fault would (debugfs
    /// `rrds/regqp_fail`). Nothing notices until a request completes
    /// flushed: then the QP counts as failed and is re-created on next use.
    #[cfg(rrds_test_hooks)]
    pub(super) fn force_error(&self) -> Result {
        // `link` keeps `shut_down` from taking (and destroying) the QP meanwhile.
        let _link = self.link.lock();
        let qp = *self.post.lock();
        qp.map_or(Ok(()), |qp| qp.force_error())
    }

    /// The QP failed (a flushed or failed completion).
    pub(super) fn failed(&self) {
        self.set_phase(Phase::Failed);
    }

    /// Stops posting, flushes every outstanding request (their completions
    /// run first) and destroys the connection. Process context; not from
    /// this QP's completion or event handlers.
    pub(super) fn shut_down(&self) {
        let _one_at_a_time = self.shutting_down.lock();
        // Under `link`: `force_error` uses the QP only while `post` has it.
        let qp = {
            let mut link = self.link.lock();
            *self.post.lock() = None;
            link.qp.take()
        };
        // Whenever the QP was up, also after a failure stopped posting: its
        // outstanding requests hold MRs, released by their completions.
        if let Some(qp) = qp {
            qp.drain();
        }
        let link = {
            let mut l = self.link.lock();
            l.phase = Phase::Failed;
            core::mem::take(&mut *l)
        };
        self.changed.notify_all();
        // Outside `link`: destroying an id waits for its running handler.
        drop(link);
    }
}

fn conn_param(private_data: &[u8]) -> ConnParam<'_> {
    ConnParam {
        private_data,
        responder_resources: 0,
        initiator_depth: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    }
}

fn qp_caps(send_depth: u32) -> QpCaps {
    QpCaps {
        send_wr: send_depth,
        // ib_drain_qp posts one receive.
        recv_wr: 1,
        send_sge: 1,
        recv_sge: 1,
    }
}

/// The rdma_cm handler of registration-QP ids.
struct RegCm;

// SAFETY: The only context set on registration-QP ids is their `RegQp`
// (`RegQp::establish`), which outlives its ids (type invariant).
unsafe impl CmHandler for RegCm {
    type Context = RegQp;

    fn connect_request(
        owner: Option<ArcBorrow<'_, RegQp>>,
        id: CmId<RegCm>,
        event: &CmEvent<'_>,
    ) -> core::result::Result<(), CmId<RegCm>> {
        let Some(owner) = owner else {
            return Err(id);
        };
        // Only our own active id knows the token (IB pads private data).
        if !event.private_data().starts_with(&owner.token) {
            stats::inc(Stat::MrQpForeignConnects);
            return Err(id);
        }
        let mut link = owner.link.lock();
        if link.passive.is_some() || link.phase != Phase::Connecting {
            return Err(id);
        }
        let Ok(cq) = CompletionQueue::alloc(owner.domain.device().handle(), 2) else {
            return Err(id);
        };
        let accepted = owner
            .domain
            .with_pd(|pd| id.create_qp(pd, &cq, &cq, qp_caps(1)))
            .and_then(|()| id.accept(&conn_param(&[])));
        if accepted.is_err() {
            // rdma_cm destroys the id (and its QP) when we hand it back; the CQ after.
            drop(link);
            owner.set_phase(Phase::Failed);
            return Err(id);
        }
        link.passive = Some(id);
        link.passive_cq = Some(cq);
        Ok(())
    }

    fn event(owner: Option<ArcBorrow<'_, RegQp>>, id: &CmIdRef<RegCm>, event: &CmEvent<'_>) {
        let Some(owner) = owner else {
            return;
        };
        let is_active = owner.link.lock().active_id == id.key();
        match event.kind() {
            CmEventKind::AddrResolved if is_active => {
                if id.resolve_route(RESOLVE_TIMEOUT_MS).is_err() {
                    owner.set_phase(Phase::Failed);
                }
            }
            CmEventKind::RouteResolved if is_active => owner.set_phase(Phase::RouteResolved),
            CmEventKind::Established if is_active => owner.set_phase(Phase::Up),
            CmEventKind::Established | CmEventKind::TimewaitExit | CmEventKind::Other(_) => {}
            _ => {
                pr_debug!("registration QP: event {}\n", event.number());
                owner.set_phase(Phase::Failed);
            }
        }
    }
}
