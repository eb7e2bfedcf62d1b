// SPDX-License-Identifier: GPL-2.0

//! In-band set-up of targets: an rdma_cm listener on `RRDS_XRC_CM_PORT` of
//! every address a target was created through accepts connect requests
//! that name a target onto the target's QP; and the receives an emulated
//! target's SRQ takes, counted.

// The rest of the XRC manager: mod.rs's types and imports.
use super::*;

/// The rdma_cm port targets are connected through (`rrds.h`).
const CM_PORT: u16 = bindings::RRDS_XRC_CM_PORT as u16;
pub(super) const CM_MAGIC: u32 = bindings::RRDS_XRC_CM_MAGIC;
pub(super) const CM_VERSION: u8 = bindings::RRDS_XRC_CM_VERSION as u8;
/// Connect requests a listener queues before rdma_cm refuses more.
const LISTEN_BACKLOG: i32 = 16;
/// Receive buffers (a page each) posted on an emulated target's SRQ.
const RECV_BUFFERS: usize = 16;
/// The SRQ's limit: the device raises `SRQ_LIMIT_REACHED` when fewer than
/// this many receives are left posted.
const SRQ_LIMIT: u32 = RECV_BUFFERS as u32 / 4;
/// The work item id of a target's reaper (`teardown` is 0).
pub(super) const REAP_WORK: u64 = 1;
/// An emulated target's CQ: its receives, and the send queue's drain marker.
pub(super) const RECV_CQ_ENTRIES: u32 = RECV_BUFFERS as u32 + 2;

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static LISTENERS: Mutex<KVec<Arc<Listener>>> = KVec::new();
}

/// Initialises the listener table. Call once, in module init.
pub(super) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&LISTENERS);
}

/// Frees the table's buffer. Call once, at unload, after the last target.
pub(super) fn release_table() {
    crate::tables::free_table(&mut LISTENERS.lock());
}

/// The rdma_cm ids of in-band set-up: listeners and the connections they accept.
pub(crate) struct InbandCm;

/// A listener on one address of one namespace, shared by the targets
/// created through that address.
///
/// # Invariants
///
/// `id`, once set, is taken and dropped by [`release`] under `LISTENERS`
/// while the caller holds an `Arc` of the listener: every id whose context
/// it is (the listening id, the connections it accepted, which targets keep
/// with an `Arc` of the listener) goes before the listener.
#[pin_data]
pub(crate) struct Listener {
    net: NetRef,
    addr: Endpoint,
    /// Targets listening through it; changed under `LISTENERS`.
    users: Atomic<u32>,
    #[pin]
    id: Mutex<Option<CmId<InbandCm>>>,
}

/// A target's use of a listener, given back on drop.
pub(super) struct ListenerUse(Arc<Listener>);

impl Drop for ListenerUse {
    fn drop(&mut self) {
        release(&self.0);
    }
}

/// A target's in-band connection: one initiator at a time.
///
/// # Invariants
///
/// Field order: the connections go before the listener, their context.
#[derive(Default)]
pub(super) struct Inband {
    /// The initiator's connection while it lasts: a connection that ends
    /// moves to `ended` at once.
    conn: Option<CmId<InbandCm>>,
    /// A connection that ended, until the target's reaper destroys it: never
    /// from an `InbandCm` handler, which holds a lock of the class that
    /// destroying an id takes. The next initiator waits for it (busy).
    ended: Option<CmId<InbandCm>>,
    conn_key: CmIdKey,
    pub(super) accepted: u32,
    /// The listener the target is reachable through.
    pub(super) listener: Option<ListenerUse>,
}

impl Inband {
    /// Whether an initiator is connected.
    pub(super) fn is_connected(&self) -> bool {
        self.conn.is_some()
    }
}

impl Target {
    /// Ends the target's in-band state: no more connect requests reach it,
    /// then its connection goes (a disconnect for the initiator), then its
    /// listener, which is the connection's context. Process context, not
    /// from an `InbandCm` handler; before the QP goes.
    pub(super) fn close_inband(&self) {
        let (conn, ended, listener) = {
            let mut inband = self.inband.lock();
            (
                inband.conn.take(),
                inband.ended.take(),
                inband.listener.take(),
            )
        };
        // Outside `inband`: destroying an id waits for its handler, which takes it.
        drop(conn);
        drop(ended);
        drop(listener);
    }

    /// Destroys the connection that ended (the reaper's work).
    pub(super) fn reap_ended(&self) {
        let ended = self.inband.lock().ended.take();
        drop(ended);
    }
}

/// The listener on `addr` (port [`CM_PORT`]) in `net`, made if there is
/// none yet.
///
/// Errors: those of creating, binding (`EADDRINUSE` if something else
/// listens there, `EADDRNOTAVAIL`) and listening, or `ENOMEM`.
pub(super) fn listen(net: NetRef, addr: &Endpoint) -> Result<ListenerUse> {
    let addr = Endpoint {
        port: CM_PORT,
        ..*addr
    };
    let mut listeners = LISTENERS.lock();
    if let Some(found) = listeners.iter().find(|l| l.net == net && l.addr == addr) {
        found.users.add(1, Relaxed);
        return Ok(ListenerUse(found.clone()));
    }
    let listener = Arc::pin_init(
        try_pin_init!(Listener {
            net,
            addr,
            users: Atomic::new(1),
            id <- new_mutex!(None),
        }),
        GFP_KERNEL,
    )?;
    // Dropped here on failure: a listening id's context outlives it.
    let id = CmId::<InbandCm>::create(net, Some(&listener))?;
    let mut raw = [0u8; 28];
    let len = addr.write_sockaddr(&mut raw);
    id.bind(&SockAddr::new(&raw[..len]))?;
    id.listen(LISTEN_BACKLOG)?;
    listeners.push(listener.clone(), GFP_KERNEL)?;
    *listener.id.lock() = Some(id);
    Ok(ListenerUse(listener))
}

/// A target stops listening through `listener`; the last one closes it.
/// Process context, not from an `InbandCm` handler.
fn release(listener: &Arc<Listener>) {
    let mut listeners = LISTENERS.lock();
    if listener.users.fetch_sub(1, Relaxed) != 1 {
        return;
    }
    listeners.retain(|l| !Arc::ptr_eq(l, listener));
    // Under the table, so a new listener on the address finds it free.
    // The handlers never take `LISTENERS`.
    let id = listener.id.lock().take();
    drop(id);
}

/// The QP number a connect request names, if it is one of this version.
fn requested_qp(private: &[u8]) -> Option<u32> {
    let field = |at: usize| -> Option<[u8; 4]> { private.get(at..at + 4)?.try_into().ok() };
    let magic = u32::from_be_bytes(field(0)?);
    let head = field(4)?;
    (magic == CM_MAGIC && head == [CM_VERSION, 0, 0, 0]).then_some(())?;
    Some(u32::from_be_bytes(field(8)?))
}

/// The reject private data for `reason`.
fn reject_private(reason: u32) -> [u8; 8] {
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&CM_MAGIC.to_be_bytes());
    out[4..].copy_from_slice(&reason.to_be_bytes());
    out
}

/// Accepts the connect request on `id` onto the target it names, or gives
/// `id` back with the reason to refuse it.
fn accept(
    listener: &Arc<Listener>,
    id: CmId<InbandCm>,
    private: &[u8],
) -> core::result::Result<(), (CmId<InbandCm>, u32)> {
    let Some(qp_num) = requested_qp(private) else {
        return Err((id, bindings::RRDS_XRC_REJECT_MALFORMED));
    };
    let target = id.device().and_then(|device| {
        TARGETS
            .lock()
            .iter()
            .find(|t| {
                t.net == listener.net
                    && t.device.is(device)
                    && t.qp_num() == qp_num
                    && !t.fanout.lock().closed
            })
            .cloned()
    });
    let Some(target) = target else {
        return Err((id, bindings::RRDS_XRC_REJECT_NO_TARGET));
    };
    let mut inband = target.inband.lock();
    // Reachable through the address it was created through only.
    if !inband
        .listener
        .as_ref()
        .is_some_and(|l| Arc::ptr_eq(&l.0, listener))
    {
        return Err((id, bindings::RRDS_XRC_REJECT_NO_TARGET));
    }
    if inband.is_connected() || inband.ended.is_some() {
        return Err((id, bindings::RRDS_XRC_REJECT_BUSY));
    }
    let param = ConnParam {
        qp_num,
        srq: target.backend == Backend::Emulated,
        rnr_retry_count: 7,
        ..Default::default()
    };
    if target
        .ready_for(&id)
        .and_then(|()| id.accept(&param))
        .is_err()
    {
        return Err((id, bindings::RRDS_XRC_REJECT_FAILED));
    }
    inband.conn_key = id.key();
    inband.accepted = inband.accepted.saturating_add(1);
    inband.conn = Some(id);
    Ok(())
}

// SAFETY: Every context is a `Listener`, which outlives its ids (`Listener`'s
// invariant).
unsafe impl CmHandler for InbandCm {
    type Context = Listener;

    fn connect_request(
        context: Option<ArcBorrow<'_, Listener>>,
        id: CmId<Self>,
        event: &CmEvent<'_>,
    ) -> core::result::Result<(), CmId<Self>> {
        let Some(listener) = context else {
            return Err(id);
        };
        let listener: Arc<Listener> = listener.into();
        accept(&listener, id, event.private_data()).map_err(|(id, reason)| {
            pr_debug!("xrc: connect request refused ({})\n", reason);
            id.reject(&reject_private(reason));
            id
        })
    }

    fn event(_context: Option<ArcBorrow<'_, Listener>>, id: &CmIdRef<Self>, event: &CmEvent<'_>) {
        match event.kind() {
            CmEventKind::Disconnected | CmEventKind::Failed | CmEventKind::DeviceRemoval => {
                let key = id.key();
                let found = TARGETS
                    .lock()
                    .iter()
                    .find(|t| t.inband.lock().conn_key == key)
                    .cloned();
                if let Some(target) = found {
                    target.initiator_left(id);
                }
            }
            _ => {}
        }
    }
}

impl Target {
    /// Moves the QP to RTR for the connection of `id`, from INIT (after an
    /// earlier connection, from error through RESET and INIT).
    ///
    /// Errors: those of the transitions, or `EINVAL` if the QP is past RTR
    /// after them (siw takes a QP in error nowhere, and says nothing; it
    /// also ignores RTR, leaving the QP in INIT for its accept): then the
    /// request is refused before the accept, which would fail in the driver
    /// after rdma_cm has committed to it.
    fn ready_for(&self, id: &CmIdRef<InbandCm>) -> Result {
        let resources = self.resources.lock();
        let qp = resources.as_ref().ok_or(ENOENT)?.qp();
        if qp.query_state()? != QPS_INIT {
            qp.modify_state(QPS_RESET, 0)?;
            qp.modify_state(QPS_INIT, self.port)?;
        }
        qp.modify_for(id, QPS_RTR)?;
        match qp.query_state()? {
            QPS_INIT | QPS_RTR => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// The initiator of the connection `id` left (or it failed): the QP goes
    /// to error, where the device raises what it raises (LAST_WQE_REACHED on
    /// an SRQ QP, except on iWARP), and the target takes the next initiator.
    fn initiator_left(self: Arc<Self>, id: &CmIdRef<InbandCm>) {
        let mut inband = self.inband.lock();
        if inband.conn_key != id.key() || !inband.is_connected() {
            return;
        }
        // Moved, not destroyed: this runs in its handler.
        inband.ended = inband.conn.take();
        drop(inband);
        id.disconnect();
        if let Some(r) = self.resources.lock().as_ref() {
            // A QP already in error refuses nothing here that matters.
            let _ = r.qp().modify_state(QPS_ERR, 0);
        }
        // Already queued: that run reaps it.
        let _ = workqueue::queue().enqueue::<Arc<Target>, REAP_WORK>(self);
    }
}

/// The receives posted on an emulated target's SRQ, and what they took.
///
/// The SRQ's limit is armed at [`SRQ_LIMIT`] once its receives are posted,
/// and armed again each time as many receives as it takes to reach it have
/// completed: the driver disarms it when it raises the event, and arming an
/// armed SRQ changes nothing.
///
/// # Invariants
///
/// Field order: the SRQ is destroyed (discarding what is still posted)
/// before the buffers are unmapped; the QPs on the SRQ and their CQ go
/// before the receiver (`Resources`' field order). The SRQ's events go to
/// the target, which owns the receiver.
#[pin_data]
pub(super) struct Receiver {
    srq: SharedReceiveQueue,
    buffers: KVec<DmaPage>,
    lkey: u32,
    cqes: [Cqe<Receiver>; RECV_BUFFERS],
    bytes: Atomic<u64>,
    /// Receives posted and not completed.
    posted: Atomic<u32>,
    /// Receives completed since the limit was last armed.
    since_armed: Atomic<u32>,
    /// Buffers `XRC_REPOST_HOLD` kept from being posted again (a bit each).
    held: Atomic<u32>,
}

impl Receiver {
    /// An SRQ in `pd` with [`RECV_BUFFERS`] page-sized receives posted and its
    /// limit armed; its events go to `target`.
    pub(super) fn new(
        device: DeviceRef,
        pd: &ProtectionDomain,
        target: &Arc<Target>,
    ) -> Result<Arc<Self>> {
        let srq = SharedReceiveQueue::create(pd, RECV_BUFFERS as u32, target)?;
        let mut buffers = KVec::with_capacity(RECV_BUFFERS, GFP_KERNEL)?;
        for _ in 0..RECV_BUFFERS {
            let page = Page::alloc_page(GFP_KERNEL)?;
            buffers.push(
                DmaPage::map(device, page, DmaDirection::FromDevice)?,
                GFP_KERNEL,
            )?;
        }
        let receiver = Arc::pin_init(
            try_pin_init!(&this in Self {
                srq,
                buffers,
                lkey: pd.local_dma_lkey(),
                cqes: core::array::from_fn(|i| Cqe::new(this, i as u32)),
                bytes: Atomic::new(0),
                posted: Atomic::new(0),
                since_armed: Atomic::new(0),
                held: Atomic::new(0),
            }),
            GFP_KERNEL,
        )?;
        for i in 0..RECV_BUFFERS {
            receiver.post(i)?;
        }
        receiver.srq.arm_limit(SRQ_LIMIT)?;
        Ok(receiver)
    }

    /// The SRQ the target's QP receives from.
    pub(super) fn srq(&self) -> &SharedReceiveQueue {
        &self.srq
    }

    /// Payload bytes received so far.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    fn post(&self, i: usize) -> Result {
        let (Some(buffer), Some(cqe)) = (self.buffers.get(i), self.cqes.get(i)) else {
            return Err(EINVAL);
        };
        let mut sge = [sge(buffer.addr(), PAGE_SIZE, self.lkey)];
        self.srq.post_recv(cqe, &mut sge)?;
        self.posted.add(1, Relaxed);
        Ok(())
    }

    /// Gives buffer `tag` back to the SRQ (with those the test hook kept,
    /// unless it still holds), then arms the limit again if it may have fired.
    fn repost(&self, tag: u32) {
        // Completions of the target's CQ run one at a time: `held` has no
        // other writer meanwhile.
        let held = self.held.load(Relaxed) | 1 << tag;
        if crate::hooks::XRC_REPOST_HOLD.is_set() {
            self.held.store(held, Relaxed);
            return;
        }
        self.held.store(0, Relaxed);
        for i in (0..RECV_BUFFERS).filter(|i| held & 1 << i != 0) {
            if self.post(i).is_err() {
                pr_debug!("xrc: a target's receive could not be posted again\n");
            }
        }
        // The event needs this many completions since the last arming; arming
        // needs at least the limit posted (EINVAL otherwise: the next
        // completion tries again).
        if self.since_armed.load(Relaxed) > RECV_BUFFERS as u32 - SRQ_LIMIT
            && self.posted.load(Relaxed) >= SRQ_LIMIT
            && self.srq.arm_limit(SRQ_LIMIT).is_ok()
        {
            self.since_armed.store(0, Relaxed);
        }
    }
}

// SAFETY: Every `Cqe<Receiver>` is a field of a `Receiver` initialised in its
// `Arc` (`new`), which outlives its requests (`Receiver`'s invariant).
unsafe impl CompletionHandler for Receiver {
    fn completed(this: ArcBorrow<'_, Self>, tag: u32, wc: &WorkCompletion<'_>) {
        // A failed receive (too long a message: the QP reports the error as
        // an event) gives its buffer back too, else the SRQ would run dry.
        if wc.is_success() {
            this.bytes.add(wc.byte_len() as u64, Relaxed);
        }
        this.posted.fetch_sub(1, Relaxed);
        this.since_armed.add(1, Relaxed);
        this.repost(tag);
    }
}
