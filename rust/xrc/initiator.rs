// SPDX-License-Identifier: GPL-2.0

//! Kernel-side initiators (`RRDS_XRC_CONNECT`): an RC QP owned by a socket,
//! connected in band to a target (of this host or another), that sends the
//! socket's `RRDS_CMSG_XRC_SEND` messages to the target's SRQ.
//!
//! The connection is made by the task that asks, as a registration QP's is
//! (siw opens its TCP socket in the calling task's namespace). One send is
//! in flight at a time; a blocking send returns once it has completed, that
//! is once the target's receive holds it.

// The rest of the XRC manager: mod.rs's types and imports.
use super::*;
use core::sync::atomic::{
    AtomicBool,
    Ordering, //
};

/// Address and route resolution, each.
const RESOLVE_TIMEOUT_MS: u32 = 2000;
/// How long resolving and connecting may take together, under TCG included.
const SETUP_TIMEOUT_MS: u32 = 20_000;
/// How long a device's removal waits for a set-up it aborted to end (the
/// task is then in a short verbs or rdma_cm call).
const ABORT_WAIT_MS: u32 = 30_000;
/// Initiators one socket may hold (`ENOBUFS` past them).
pub(crate) const MAX_PER_SOCKET: usize = 16;
/// The largest message: an emulated target's receive buffer.
pub(crate) const SEND_MAX: usize = bindings::RRDS_XRC_SEND_MAX as usize;

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static INITIATORS: Mutex<KVec<Arc<Initiator>>> = KVec::new();
}

/// Initialises the initiator table. Call once, in module init.
pub(super) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&INITIATORS);
}

/// Frees the table's buffer. Call once, at unload, after the last socket.
pub(super) fn release_table() {
    crate::tables::free_table(&mut INITIATORS.lock());
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Resolving,
    RouteResolved,
    Connecting,
    Up,
    /// For good, with what later sends fail with.
    Ended(Error),
}

/// The connection, once up. Field order is drop order: the id (with its
/// QP) before the CQ, and both before the page of a send in flight.
struct Conn {
    phase: Phase,
    id: Option<CmId<InitiatorCm>>,
    cq: Option<CompletionQueue>,
    /// The page of the send in flight, until its completion.
    in_flight: Option<DmaPage>,
    /// The PD's local DMA key, for the sends' pages.
    lkey: u32,
    /// Sends posted and completed; whether the last completion succeeded.
    posted: u64,
    completed: u64,
    last_ok: bool,
}

/// An initiator's verbs objects while it is set up. Field order is drop
/// order: the id (with its QP) before the CQ.
struct SetUp {
    id: CmId<InitiatorCm>,
    cq: Option<CompletionQueue>,
}

/// A kernel-side initiator.
///
/// # Invariants
///
/// Events of its id carry a pointer to the `Initiator` as context; the id
/// lives in `conn` (or, while being set up, in the setting-up task) and is
/// destroyed before the `Initiator` is freed: `shut_down` runs before the
/// last `Arc` held by a socket or the table goes.
#[pin_data]
pub(crate) struct Initiator {
    net: NetRef,
    /// The effective uid of the process that connected it: counted against
    /// `xrc_max_initiators_per_user`.
    owner_uid: u32,
    /// The target's address (port `RRDS_XRC_CM_PORT`) and QP number.
    remote: Endpoint,
    qp_num: u32,
    #[pin]
    conn: Mutex<Conn>,
    #[pin]
    changed: CondVar,
    /// `connect` is setting the connection up: its id is the task's until
    /// then (`abort_set_up` waits for that).
    setting_up: AtomicBool,
    /// Held for a whole `shut_down`.
    #[pin]
    shutting_down: Mutex<()>,
    cqe: Cqe<Initiator>,
    /// The namespace's PD on the device, which the QP is in. Last: it
    /// outlives the QP.
    domain: DomainUse,
}

/// Connects an initiator of `net` from `local` (an address of `device`) to
/// the target `qp_num` at `remote`, for the calling process. Process context,
/// in a task of `net`.
///
/// Errors: `EDQUOT` past `xrc_max_initiators_per_user`, `ENODEV` if the
/// device is going, `ECONNREFUSED` (no such target, or nothing rrds listens
/// there), `EBUSY` (the target has its initiator), `EPROTO`, `EIO` (the
/// target could not take it), `ETIMEDOUT` or `EHOSTUNREACH` (no answer, no
/// route), `ERESTARTSYS` on a signal, or `ENOMEM`.
pub(crate) fn connect(
    net: NetRef,
    device: &Arc<RdmaDevice>,
    local: &Endpoint,
    remote: &Endpoint,
    qp_num: u32,
) -> Result<Arc<Initiator>> {
    let owner_uid = process::current_euid();
    let domain = device.domain(net, DomainUser::XrcInitiator)?;
    let initiator = Arc::pin_init(
        try_pin_init!(&this in Initiator {
            net,
            owner_uid,
            remote: Endpoint {
                port: bindings::RRDS_XRC_CM_PORT as u16,
                ..*remote
            },
            qp_num,
            conn <- new_mutex!(Conn {
                phase: Phase::Resolving,
                id: None,
                cq: None,
                in_flight: None,
                lkey: 0,
                posted: 0,
                completed: 0,
                last_ok: true,
            }),
            changed <- new_condvar!("rrds_xrc_initiator"),
            setting_up: AtomicBool::new(true),
            shutting_down <- new_mutex!(()),
            cqe: Cqe::new(this, 0),
            domain,
        }),
        GFP_KERNEL,
    )?;
    {
        let mut table = INITIATORS.lock();
        let of_user = table.iter().filter(|i| i.owner_uid == owner_uid).count();
        if of_user as u64 >= crate::limits::xrc_max_initiators_per_user() {
            return Err(errno::edquot());
        }
        table.push(initiator.clone(), GFP_KERNEL)?;
    }
    let established = initiator.establish(local);
    {
        let _conn = initiator.conn.lock();
        initiator.setting_up.store(false, Ordering::Relaxed);
    }
    initiator.changed.notify_all();
    if let Err(e) = established {
        initiator.shut_down(e);
        return Err(e);
    }
    Ok(initiator)
}

impl Initiator {
    /// Resolves, creates the QP and connects; on success the id and CQ are
    /// in `conn`, on failure they are dropped here (`SetUp`'s order).
    fn establish(self: &Arc<Self>, local: &Endpoint) -> Result {
        let mut parts = SetUp {
            id: CmId::<InitiatorCm>::create(self.net, Some(self))?,
            cq: None,
        };
        let id = &parts.id;
        let mut raw = [0u8; 28];
        let len = Endpoint { port: 0, ..*local }.write_sockaddr(&mut raw);
        let src = SockAddr::new(&raw[..len]);
        let len = self.remote.write_sockaddr(&mut raw);
        let mut timeo = msecs_to_jiffies(SETUP_TIMEOUT_MS) as isize;
        id.resolve_addr(&src, &SockAddr::new(&raw[..len]), RESOLVE_TIMEOUT_MS)?;
        self.wait_for(Phase::RouteResolved, &mut timeo)?;

        if !id.device().is_some_and(|d| self.domain.device().is(d)) {
            // The route leaves through another device than the socket's.
            return Err(errno::eaddrnotavail());
        }
        let cq = parts.cq.insert(CompletionQueue::alloc(
            self.domain.device().handle(),
            SEND_DEPTH + 1,
        )?);
        let lkey = self.domain.with_pd(|pd| {
            id.create_qp(pd, cq, cq, qp_caps())?;
            Ok(pd.local_dma_lkey())
        })?;
        {
            let mut conn = self.conn.lock();
            // Aborted meanwhile: the device is being removed.
            if let Phase::Ended(e) = conn.phase {
                return Err(e);
            }
            conn.phase = Phase::Connecting;
        }
        let private = connect_private(self.qp_num);
        let param = ConnParam {
            private_data: &private,
            retry_count: 7,
            // Wait for the target's receives as long as it takes: the
            // target reposts each buffer as soon as it has counted it.
            rnr_retry_count: 7,
            ..Default::default()
        };
        id.connect_unlocked(&param)?;
        self.wait_for(Phase::Up, &mut timeo)?;
        let mut conn = self.conn.lock();
        if let Phase::Ended(e) = conn.phase {
            return Err(e);
        }
        conn.id = Some(parts.id);
        conn.cq = parts.cq;
        conn.lkey = lkey;
        Ok(())
    }

    /// Waits until the set-up reaches `phase` or ends; interruptible, and
    /// bounded by `timeo` (jiffies left, updated).
    fn wait_for(&self, phase: Phase, timeo: &mut isize) -> Result {
        let mut conn = self.conn.lock();
        let reached = wait_until(&self.changed, &mut conn, timeo, |c| {
            c.phase == phase || matches!(c.phase, Phase::Ended(_))
        });
        match (reached, conn.phase) {
            (Ok(()), Phase::Ended(e)) => Err(e),
            (Ok(()), _) => Ok(()),
            (Err(e), _) => {
                conn.phase = Phase::Ended(e);
                Err(e)
            }
        }
    }

    /// Moves to `phase` unless the connection has ended (for good).
    fn advance(&self, phase: Phase) {
        let mut conn = self.conn.lock();
        if !matches!(conn.phase, Phase::Ended(_)) {
            conn.phase = phase;
        }
        drop(conn);
        self.changed.notify_all();
    }

    /// Whether the initiator connects to `qp_num` at `addr`.
    pub(crate) fn names(&self, addr: &[u8; 16], qp_num: u32) -> bool {
        self.remote.addr == *addr && self.qp_num == qp_num
    }

    /// Whether the connection has ended (refused, disconnected, failed).
    pub(crate) fn has_ended(&self) -> bool {
        matches!(self.conn.lock().phase, Phase::Ended(_))
    }

    /// Sends the first `len` bytes of `page` (at most [`SEND_MAX`]) to the
    /// target. Waits, within `timeo` jiffies, for the send before it to
    /// complete, and unless `timeo` is 0 (non-blocking) for this one too.
    ///
    /// Errors: `EMSGSIZE`; what ended the connection (`ECONNRESET` when the
    /// target's side disconnected, `ENODEV` when the device went, `EIO`
    /// after a failed send, `ENOTCONN` after `RRDS_XRC_DISCONNECT`); `EIO`
    /// if this send failed; `EAGAIN` or `ETIMEDOUT` before posting; and,
    /// once posted, `ETIMEDOUT` or `EINTR` with the message perhaps still
    /// delivered (the next send waits for it).
    pub(crate) fn send(&self, page: Page, len: usize, timeo: &mut isize) -> Result {
        if len > SEND_MAX {
            return Err(EMSGSIZE);
        }
        let mut conn = self.conn.lock();
        wait_until(&self.changed, &mut conn, timeo, |c| {
            c.in_flight.is_none() || c.phase != Phase::Up
        })?;
        if let Phase::Ended(e) = conn.phase {
            return Err(e);
        }
        // Mapped while up only: the device stays registered until `shut_down`
        // (which ends the phase under this lock) has run.
        let page = DmaPage::map(self.domain.device().handle(), page, DmaDirection::ToDevice)?;
        let mut sges = [sge(page.addr(), len, conn.lkey)];
        conn.id
            .as_ref()
            .ok_or_else(errno::enotconn)?
            .post_send(&self.cqe, &mut sges)?;
        conn.in_flight = Some(page);
        conn.posted += 1;
        let ticket = conn.posted;
        if *timeo == 0 {
            return Ok(());
        }
        match wait_until(&self.changed, &mut conn, timeo, |c| c.completed >= ticket) {
            // Posted: restarting the call would send the message twice.
            Err(e) if e == ERESTARTSYS => Err(EINTR),
            Err(e) => Err(e),
            Ok(()) if conn.completed == ticket && !conn.last_ok => Err(EIO),
            Ok(()) => Ok(()),
        }
    }

    /// Ends the connection for good with `why` (what later sends fail
    /// with): a disconnect for the target, whose QP goes to error; the QP
    /// drained (a send in flight completes flushed) and destroyed, then the
    /// CQ. Process context, not from the initiator's handlers.
    pub(crate) fn shut_down(&self, why: Error) {
        let _one_at_a_time = self.shutting_down.lock();
        let id = {
            let mut conn = self.conn.lock();
            if !matches!(conn.phase, Phase::Ended(_)) {
                conn.phase = Phase::Ended(why);
            }
            conn.id.take()
        };
        self.changed.notify_all();
        if let Some(id) = &id {
            id.disconnect();
            // Not under `conn`: the flushed completion takes it.
            id.drain_qp();
        }
        drop(id);
        let (cq, page) = {
            let mut conn = self.conn.lock();
            (conn.cq.take(), conn.in_flight.take())
        };
        drop(cq);
        drop(page);
        INITIATORS.lock().retain(|i| !core::ptr::eq(&**i, self));
    }

    /// The device is being removed while this initiator is being set up:
    /// fails the set-up and waits (at most [`ABORT_WAIT_MS`]) until it has
    /// ended, so that nothing of it is left in the PD. Process context.
    fn abort_set_up(&self) {
        {
            let mut conn = self.conn.lock();
            if !matches!(conn.phase, Phase::Ended(_)) {
                conn.phase = Phase::Ended(ENODEV);
            }
        }
        self.changed.notify_all();
        if !crate::wait::poll_until(ABORT_WAIT_MS, || !self.setting_up.load(Ordering::Relaxed)) {
            pr_warn!("an XRC initiator's set-up outlived its device's removal\n");
        }
    }
}

/// `device` is going away: every initiator on it is shut down (its sends
/// then fail with `ENODEV`) before this returns.
pub(super) fn device_removed(device: DeviceRef) {
    loop {
        let found = INITIATORS
            .lock()
            .iter()
            .find(|i| i.domain.device().is(device))
            .cloned();
        let Some(initiator) = found else {
            break;
        };
        if initiator.setting_up.load(Ordering::Relaxed) {
            initiator.abort_set_up();
        }
        // Also takes it out of the table.
        initiator.shut_down(ENODEV);
    }
}

/// Initiators in the table (debugfs `rrds/objects`).
pub(super) fn count() -> usize {
    INITIATORS.lock().len()
}

/// Send queue depth: one message, and the drain's marker.
const SEND_DEPTH: u32 = 2;

fn qp_caps() -> QpCaps {
    QpCaps {
        send_wr: SEND_DEPTH,
        // ib_drain_qp posts one receive.
        recv_wr: 1,
        send_sge: 1,
        recv_sge: 1,
    }
}

/// The connect request's private data naming target `qp_num`.
fn connect_private(qp_num: u32) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[..4].copy_from_slice(&CM_MAGIC.to_be_bytes());
    out[4] = CM_VERSION;
    out[8..].copy_from_slice(&qp_num.to_be_bytes());
    out
}

/// What a failed set-up returns: for a refusal by rrds, its reason's errno.
fn set_up_error(event: &CmEvent<'_>) -> Error {
    if !event.is_reject() {
        return if event.status() == ETIMEDOUT.to_errno() {
            ETIMEDOUT
        } else {
            errno::ehostunreach()
        };
    }
    let private = event.private_data();
    let field = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(
            private.get(at..at + 4)?.try_into().ok()?,
        ))
    };
    if field(0) != Some(CM_MAGIC) {
        // Nobody listening, or not rrds.
        return errno::econnrefused();
    }
    match field(4) {
        Some(bindings::RRDS_XRC_REJECT_BUSY) => EBUSY,
        Some(bindings::RRDS_XRC_REJECT_MALFORMED) => errno::eproto(),
        Some(bindings::RRDS_XRC_REJECT_FAILED) => EIO,
        _ => errno::econnrefused(),
    }
}

/// The rdma_cm handler of initiator ids.
pub(crate) struct InitiatorCm;

// SAFETY: The only context set on initiator ids is their `Initiator`
// (`establish`), which outlives its id (type invariant).
unsafe impl CmHandler for InitiatorCm {
    type Context = Initiator;

    fn connect_request(
        _context: Option<ArcBorrow<'_, Initiator>>,
        id: CmId<Self>,
        _event: &CmEvent<'_>,
    ) -> core::result::Result<(), CmId<Self>> {
        // Initiator ids never listen.
        Err(id)
    }

    fn event(context: Option<ArcBorrow<'_, Initiator>>, id: &CmIdRef<Self>, event: &CmEvent<'_>) {
        let Some(this) = context else {
            return;
        };
        match event.kind() {
            CmEventKind::AddrResolved => {
                if id.resolve_route(RESOLVE_TIMEOUT_MS).is_err() {
                    this.advance(Phase::Ended(errno::ehostunreach()));
                }
            }
            CmEventKind::RouteResolved => this.advance(Phase::RouteResolved),
            CmEventKind::Established => this.advance(Phase::Up),
            CmEventKind::Failed => this.advance(Phase::Ended(set_up_error(event))),
            CmEventKind::Disconnected => {
                // Completes the target's disconnect (the reply it waits for).
                id.disconnect();
                this.advance(Phase::Ended(errno::econnreset()));
            }
            // rrds's own removal shuts initiators down before rdma_cm's.
            CmEventKind::DeviceRemoval => this.advance(Phase::Ended(ENODEV)),
            CmEventKind::ConnectRequest
            | CmEventKind::AddrChange
            | CmEventKind::TimewaitExit
            | CmEventKind::Other(_) => {}
        }
    }
}

// SAFETY: The one `Cqe<Initiator>` is a field of an `Initiator` initialised in
// its `Arc` (`connect`), which outlives its requests: `shut_down` drains the QP
// before the last `Arc` goes (type invariant).
unsafe impl CompletionHandler for Initiator {
    fn completed(this: ArcBorrow<'_, Self>, _tag: u32, wc: &WorkCompletion<'_>) {
        let mut conn = this.conn.lock();
        conn.in_flight = None;
        conn.completed += 1;
        conn.last_ok = wc.is_success();
        if !conn.last_ok && conn.phase == Phase::Up {
            conn.phase = Phase::Ended(EIO);
        }
        drop(conn);
        this.changed.notify_all();
    }
}
