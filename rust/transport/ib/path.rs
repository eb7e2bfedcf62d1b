// SPDX-License-Identifier: GPL-2.0

//! One connection's IB path: the rdma_cm state machine, the current link
//! (cm_id, QP, CQs, rings) and its replacement after a failure.
//!
//! Contexts: rdma_cm events, completions (ib_core's workqueue) and the
//! path's work item all run in process context. The control state is a
//! mutex; the rings a spinlock, taken inside it. Links are torn down
//! (disconnect, drain, destroy) only from the work item or `kill`, never
//! from a handler of the link itself and never under either lock.
//!
//! Lock order: `ctl` -> `rings` -> the connection's queue lock.
//!
//! This file holds the path's state, its links and their teardown, and its
//! work item; `IbPath`'s other methods are in path/: cm.rs (building,
//! connecting, accepting, rdma_cm events), datapath.rs (sends, receives,
//! completions), watchdog.rs (the tick, iWARP task connects) and show.rs
//! (RDS_INFO, debugfs).

mod cm;
mod datapath;
mod show;
mod teardown;
mod watchdog;

use teardown::Retired;

use kernel::{
    impl_has_delayed_work, impl_has_work, new_delayed_work, new_mutex, new_spinlock, new_work,
    page::Page,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        ArcBorrow,
        Mutex,
        MutexGuard,
        SpinLock, //
    },
    task::Task,
    time::{
        msecs_to_jiffies,
        Instant,
        Monotonic, //
    },
    workqueue::{
        DelayedWork,
        Work,
        WorkItem, //
    },
};

use super::{
    proto::{
        ConnectPrivate,
        PrivateBuf,
        FEATURE_LARGE_FRAMES,
        FEATURE_PACKED,
        PORT_V4,
        PORT_V6, //
    },
    ring::{
        initial_receives,
        pages_filled,
        unpack,
        Payload,
        RdmaSges,
        Rings,
        SendDone,
        FLAG_CONG_BITMAP,
        FRAME_PAGES,
        RECV_SLOTS,
        SEND_SLOTS, //
    },
    Cm, TAG_ACK, TAG_RECV, TAG_SEND,
};
use crate::{
    addr::Endpoint,
    device::{
        self,
        DomainUse,
        DomainUser,
        RdmaDevice, //
    },
    ffi::{
        ib_cq::{
            CompletionHandler,
            CompletionQueue,
            CqPoller,
            Cqe,
            QpKey,
            QpRef,
            WorkCompletion, //
        },
        ib_device::{
            DeviceRef,
            Transport as DeviceTransport, //
        },
        page::PageBytes,
        random,
        rdma_cm::{
            CmEvent,
            CmEventKind,
            CmId,
            CmIdKey,
            CmIdRef,
            ConnParam,
            QpCaps,
            SockAddr, //
        },
        task_work::{
            self,
            run_in_task,
            TaskSlot,
            TaskWork, //
        },
        workqueue,
    },
    message::{
        flags,
        Assembly,
        Header,
        Message, //
    },
    stats::{
        self,
        Stat, //
    },
    transport::Conn,
    transport::ConnKey,
    transport::Direction,
    transport::DownReason,
    transport::Incarnations,
    transport::LinkChange,
    transport::Xmit,
};

/// rdma_cm address resolution timeout. Upstream waits 5 s, but ib_core
/// retries an unresolved neighbour only at the deadline when no neighbour
/// event wakes it (the ARP reply can come before the request is queued, as
/// with veth peers in other namespaces): a short timeout and a reconnect,
/// which finds the neighbour resolved, bring the first connection up in
/// about 0.3 s instead of 1 s (`make demo`'s first ping missed its 1 s).
const ADDR_TIMEOUT_MS: u32 = 250;
/// rdma_cm route resolution timeout (upstream: 5 s).
const ROUTE_TIMEOUT_MS: u32 = 5000;
/// Longest reconnect backoff window (upstream: 1 s).
const MAX_BACKOFF_MS: u32 = 1000;

/// How long a path whose device was removed waits before it connects
/// again. rrds's `remove` callback runs before rdma_cm's (ib_core removes
/// clients in reverse order of registration), so a connect made at once
/// still resolves to the departing device, and fails when rdma_cm's removal
/// reaches the new id (`CmId::resolve_addr` binds first so that this is a
/// failure, not a WARN). rdma_cm's removal follows ours within
/// microseconds.
const REMOVAL_PAUSE_MS: u32 = 200;
/// Transport retries before a send fails (upstream uses 1; lossy links need more).
const RETRY_COUNT: u8 = 7;
/// Receiver-not-ready retries: 7 is "forever" (upstream too).
const RNR_RETRY_COUNT: u8 = 7;
/// Most RDMA READs and atomics outstanding each way on a connection: an RDMA
/// op is one READ per page, so one at a time would serialise them.
const RD_ATOMIC_MAX: u8 = 16;
/// What a refused connect request carries: a host-order int 1, which tells
/// an upstream peer to back off and retry.
const REJECT_RETRY: [u8; 4] = 1i32.to_ne_bytes();

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Down,
    Connecting,
    Up,
}

/// One incarnation of the connection: an rdma_cm id and what hangs off it.
/// Fields drop in order: the id (and its QP) before the CQs the QP uses.
struct Link {
    cm_id: CmId<Cm>,
    cqs: Option<(CompletionQueue, CompletionQueue)>,
    /// The namespace's protection domain on the QP's device, which the QP is in.
    domain: Option<DomainUse>,
    /// The device's MR fences, which list this link's QP (iWARP): held
    /// until the QP and its CQs are gone.
    fence: Option<Arc<crate::mr::MrDevice>>,
    /// We sent the connect request.
    active: bool,
}

impl Link {
    fn is(&self, id: &CmIdRef<Cm>) -> bool {
        core::ptr::eq(&*self.cm_id, id)
    }

    /// The device the QP was built on.
    fn device(&self) -> Option<&Arc<RdmaDevice>> {
        self.domain.as_ref().map(DomainUse::device)
    }

    fn on_device(&self, device: DeviceRef) -> bool {
        self.cm_id.device() == Some(device) || self.device().is_some_and(|d| d.is(device))
    }

    fn is_iwarp(&self) -> bool {
        self.device()
            .is_some_and(|d| d.caps().transport == DeviceTransport::Iwarp)
    }
}

/// The control state.
struct Control {
    state: State,
    link: Option<Link>,
    /// Links waiting to be torn down. Has room for one more while `link` is
    /// set (reserved when the link is made), so retiring a link never
    /// allocates, and never fails in a handler that cannot tear it down.
    retiring: KVec<Retired>,
    /// Messages wait: connect when down.
    connect_wanted: bool,
    /// The connection left its table: never connect again.
    dead: bool,
    /// An iWARP connect handed to the connector task (`connect_from_task`),
    /// not yet run: the id, the task's address, and the watchdog ticks it
    /// has waited.
    task_connect: Option<(CmIdKey, usize, u32)>,
    /// An accepted iWARP link established and waiting for the peer's first
    /// frame before sending (`IWARP_RESPONDER_WAIT_TICKS`): the watchdog
    /// ticks it has waited.
    responder_waiting: Option<u32>,
    /// Current reconnect window (0: next attempt at once).
    backoff_ms: u32,
    /// When the next connect attempt is due (`CLOCK_MONOTONIC`
    /// nanoseconds), while `IbPath::retry` waits for it.
    retry_at_ns: Option<u64>,
    /// When a device removal left the path without a link: a connect
    /// sooner than `REMOVAL_PAUSE_MS` after it waits for the rest.
    removed_at: Option<Instant<Monotonic>>,
    /// The peer's connect request (passive side), applied when established.
    peer_request: ConnectPrivate,
    /// The peer's incarnation on the last link (0: none seen).
    peer_incarnation: u32,
    /// For diagnosis (debugfs `ib_links`): rdma_cm events of the live link's
    /// id, the last one's number, and events of ids that were not the live
    /// link's.
    link_events: u32,
    last_link_event: u32,
    other_events: u32,
    /// For diagnosis: the path's last ten steps, six bits each (`Trail`).
    trail: u64,
    /// Watchdog ticks the up link has carried nothing, and the connection's
    /// sequence numbers when it last did (`check_idle`).
    idle_ticks: u32,
    idle_mark: (u64, u64),
    /// Links of this path taken down idle (debugfs `ib_links`).
    idle_reaped: u32,
}

/// A step of a path's trail (debugfs `ib_links`) other than an rdma_cm
/// event (`Control::step_event`).
#[derive(Clone, Copy)]
enum Trail {
    Accepted = 32,
    RefusedUp = 33,
    RefusedRace = 34,
    Connecting = 35,
    UpByReceive = 36,
    Failed = 37,
    FailIgnored = 38,
    ResponderWaits = 39,
    ResponderWaitOver = 40,
    IdleReaped = 41,
}

impl Control {
    fn push_step(&mut self, code: u64) {
        self.trail = (self.trail << 6) | (code & 0x3f);
    }

    fn step(&mut self, step: Trail) {
        self.push_step(step as u64);
    }

    /// An rdma_cm event: its number for the live link's id, 16 + its number
    /// for another id.
    fn step_event(&mut self, number: u32, live_link: bool) {
        let base = if live_link { 0 } else { 16 };
        self.push_step(base + u64::from(number & 0xf));
    }
}

/// Reassembly of the message being received.
struct RxAssembly {
    /// Which rings the partial message came from.
    generation: u64,
    pending: Option<(Header, Assembly)>,
}

/// An up connection's RDS_INFO_IB_CONNECTIONS fields.
pub(crate) struct IbInfo {
    pub(crate) src_gid: [u8; 16],
    pub(crate) dst_gid: [u8; 16],
    pub(crate) sl: u8,
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    /// The MR pool of the link's device: how many of its largest MRs it
    /// keeps, and their pages (upstream reports its 1 MiB pool's).
    pub(crate) mr_max: u32,
    pub(crate) mr_pages: u32,
}

/// The IB state of one connection.
///
/// # Invariants
///
/// Every rdma_cm id whose context points to this path is owned by `ctl` (its
/// link or the retiring list) or by a teardown holding an `Arc` to the path;
/// ids and QPs are destroyed before the path is dropped, so the context and
/// the `Cqe` owner pointers stay valid while any event or completion can run.
#[pin_data]
pub(crate) struct IbPath {
    key: ConnKey,
    /// The connection; cleared by `kill`, which breaks the reference cycle.
    #[pin]
    conn: SpinLock<Option<Arc<dyn Conn>>>,
    #[pin]
    ctl: Mutex<Control>,
    #[pin]
    rings: SpinLock<Option<Rings>>,
    /// Bumped for every new set of rings (tells reassembly state apart).
    #[pin]
    generation: SpinLock<u64>,
    #[pin]
    rx: Mutex<RxAssembly>,
    /// Held while a work item tears links down, so device removal can wait
    /// for links it did not take itself.
    #[pin]
    teardown: Mutex<()>,
    #[pin]
    work: Work<IbPath>,
    /// The next connect attempt, after the reconnect backoff (or the pause
    /// after a device removal): a timer, not a worker asleep, so a thousand
    /// paths waiting to reconnect hold no worker.
    #[pin]
    retry: DelayedWork<IbPath, RETRY_WORK>,
    /// Whom iWARP connects run in: the task that last sent (see
    /// `connect_from_task`, `ffi/task_work.rs`).
    #[pin]
    connector: TaskSlot,
    send_cqe: Cqe<IbPath>,
    recv_cqe: Cqe<IbPath>,
    ack_cqe: Cqe<IbPath>,
    /// This connection state's incarnation, sent in the private data: random,
    /// never 0, so a peer that sees it change knows we lost our sequence state.
    /// Set only before the path is bound to its connection (a resumed
    /// connection takes its forgotten one's), read when connecting.
    incarnation: Atomic<u32>,
}

impl_has_work! {
    impl HasWork<Self> for IbPath { self.work }
}

/// The id of `IbPath::retry` among the path's work items.
const RETRY_WORK: u64 = 1;

impl_has_delayed_work! {
    impl HasDelayedWork<Self, RETRY_WORK> for IbPath { self.retry }
}

/// Retries whose timer has not fired yet: each holds its path, and the
/// module's workqueue may be destroyed only once none is left (`retries_done`).
static RETRIES_PENDING: Atomic<u32> = Atomic::new(0);

/// Waits until no reconnect timer is pending, at most a backoff and a
/// removal pause. Module exit, after every path is dead.
pub(crate) fn retries_done() -> bool {
    crate::wait::poll_until(2 * (MAX_BACKOFF_MS + REMOVAL_PAUSE_MS), || {
        RETRIES_PENDING.load(Relaxed) == 0
    })
}

impl IbPath {
    pub(crate) fn new(key: ConnKey) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(&this in Self {
                key,
                conn <- new_spinlock!(None),
                ctl <- new_mutex!(Control {
                    state: State::Down,
                    link: None,
                    retiring: KVec::new(),
                    connect_wanted: false,
                    dead: false,
                    backoff_ms: 0,
                    retry_at_ns: None,
                    removed_at: None,
                    peer_request: ConnectPrivate::default(),
                    peer_incarnation: 0,
                    link_events: 0,
                    last_link_event: 0,
                    other_events: 0,
                    task_connect: None,
                    responder_waiting: None,
                    trail: 0,
                    idle_ticks: 0,
                    idle_mark: (0, 0),
                    idle_reaped: 0,
                }),
                rings <- new_spinlock!(None),
                generation <- new_spinlock!(0),
                rx <- new_mutex!(RxAssembly {
                    generation: 0,
                    pending: None,
                }),
                teardown <- new_mutex!(()),
                work <- new_work!("rrds_ib_path"),
                retry <- new_delayed_work!("rrds_ib_path_retry"),
                connector <- TaskSlot::new(),
                send_cqe: Cqe::new(this, TAG_SEND),
                recv_cqe: Cqe::new(this, TAG_RECV),
                ack_cqe: Cqe::new(this, TAG_ACK),
                incarnation: Atomic::new(random_incarnation()),
            }),
            GFP_KERNEL,
        )
    }

    /// Ties the path to its connection (once, when the connection is created).
    pub(crate) fn bind(&self, conn: Arc<dyn Conn>) {
        let old = self.conn.lock().replace(conn);
        drop(old);
    }

    fn conn(&self) -> Option<Arc<dyn Conn>> {
        self.conn.lock().clone()
    }

    /// Ours and the peer's incarnation, for the next connection with this key.
    pub(crate) fn incarnations(&self) -> Incarnations {
        Incarnations {
            own: self.incarnation.load(Relaxed),
            peer: self.ctl.lock().peer_incarnation,
        }
    }

    /// Takes up the incarnations of a forgotten connection with this key,
    /// before the path is bound (so before any link): together with its
    /// sequence numbers this is the old connection, so neither side takes the
    /// other for restarted, while a peer that lost its own state since sends
    /// a new incarnation and is.
    pub(crate) fn resume_incarnations(&self, inc: Incarnations) {
        self.incarnation.store(inc.own, Relaxed);
        self.ctl.lock().peer_incarnation = inc.peer;
    }

    pub(super) fn cqe(&self, tag: u32) -> &Cqe<IbPath> {
        match tag {
            TAG_RECV => &self.recv_cqe,
            TAG_ACK => &self.ack_cqe,
            _ => &self.send_cqe,
        }
    }

    fn enqueue(self: &Arc<Self>) {
        // Already queued: it will see the new state.
        let _ = workqueue::queue().enqueue::<_, 0>(self.clone());
    }

    /// Runs the path's work again in `ms` milliseconds. With `ctl` held and
    /// the path not dead, so that no retry is set after `kill`.
    fn retry_after(self: &Arc<Self>, ms: u32) {
        RETRIES_PENDING.fetch_add(1, Relaxed);
        let queued =
            workqueue::queue().enqueue_delayed::<_, RETRY_WORK>(self.clone(), msecs_to_jiffies(ms));
        if queued.is_err() {
            // Already pending: its run comes back here and re-arms if early.
            RETRIES_PENDING.fetch_sub(1, Relaxed);
        }
    }

    /// Whether sends can be posted; if the path is down, starts connecting.
    pub(crate) fn ready(self: &Arc<Self>) -> bool {
        self.connector.note_current(self.key.net);
        if self.rings.lock().as_ref().is_some_and(|r| r.up) {
            return true;
        }
        let mut c = self.ctl.lock();
        if !c.dead && c.state == State::Down && !c.connect_wanted {
            c.connect_wanted = true;
            drop(c);
            self.enqueue();
        }
        false
    }
}

/// Records the incarnation in the peer's connect data: whether it differs
/// from the one of the previous link (the peer lost its connection state).
/// 0 (an upstream peer) is never a change.
fn peer_restarted(c: &mut Control, peer: &ConnectPrivate) -> bool {
    if peer.incarnation == 0 {
        return false;
    }
    let changed = c.peer_incarnation != 0 && c.peer_incarnation != peer.incarnation;
    c.peer_incarnation = peer.incarnation;
    if changed {
        stats::inc(Stat::IbPeerRestarts);
    }
    changed
}

/// A random, non-zero incarnation number.
fn random_incarnation() -> u32 {
    random::u32().max(1)
}

/// A sockaddr for rdma_cm from a 16-byte address.
fn sockaddr(addr: [u8; 16], port: u16, scope: u32) -> SockAddr {
    let mut raw = [0u8; 28];
    let ep = Endpoint { addr, port, scope };
    let len = ep.write_sockaddr(&mut raw);
    SockAddr::new(&raw[..len])
}

impl WorkItem<RETRY_WORK> for IbPath {
    type Pointer = Arc<IbPath>;

    /// A reconnect attempt is due: the path's work makes it.
    fn run(this: Arc<IbPath>) {
        RETRIES_PENDING.fetch_sub(1, Relaxed);
        if !this.ctl.lock().dead {
            this.enqueue();
        }
    }
}

impl WorkItem for IbPath {
    type Pointer = Arc<IbPath>;

    /// Tears retired links down, then (re)connects after the backoff if
    /// messages wait. Process context, on the module's workqueue.
    fn run(this: Arc<IbPath>) {
        loop {
            let teardowns = this.teardown.lock();
            let (any, deferred) = this.tear_down_retiring(true);
            drop(teardowns);
            let mut c = this.ctl.lock();
            if c.dead {
                return;
            }
            // Links retired meanwhile go first; deferred ones wait for their
            // port (the watchdog queues this work again while any wait).
            if any || c.retiring.len() > deferred {
                continue;
            }
            if c.state != State::Down || !c.connect_wanted {
                return;
            }
            if let Some(due) = c.retry_at_ns {
                let now = crate::ffi::time::monotonic_ns();
                if due > now {
                    // Woken early: a retry timer stays armed for when it is
                    // due (a stale one, which fired early, does not).
                    let left_ms = (due - now).div_ceil(1_000_000);
                    this.retry_after(u32::try_from(left_ms).unwrap_or(MAX_BACKOFF_MS));
                    return;
                }
                c.retry_at_ns = None;
            } else {
                let mut wait_ms = 0;
                if let Some(removed) = c.removed_at.take() {
                    let left = i64::from(REMOVAL_PAUSE_MS) - removed.elapsed().as_millis();
                    wait_ms += left.max(0) as u32;
                }
                if c.backoff_ms > 0 {
                    wait_ms += (random::u32() % c.backoff_ms).max(1);
                }
                if wait_ms > 0 {
                    c.retry_at_ns =
                        Some(crate::ffi::time::monotonic_ns() + u64::from(wait_ms) * 1_000_000);
                    // Under `ctl`, alive: `kill` comes after, so `retries_done` sees it.
                    this.retry_after(wait_ms);
                    return;
                }
            }
            c.backoff_ms = (c.backoff_ms * 2).clamp(1, MAX_BACKOFF_MS);
            c.connect_wanted = false;
            if let Err((e, id)) = this.connect_locked(&mut c) {
                pr_debug!("connect: {:?}\n", e);
                c.connect_wanted = true;
                drop(c);
                drop(id);
                // Try again after the (grown) backoff.
                continue;
            }
            return;
        }
    }
}
