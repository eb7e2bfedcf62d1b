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

use kernel::{
    impl_has_work, new_condvar, new_mutex, new_spinlock, new_work,
    page::Page,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        ArcBorrow,
        CondVar,
        Mutex,
        MutexGuard,
        SpinLock, //
    },
    task::Task,
    time::msecs_to_jiffies,
    workqueue::{
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
        pages_filled,
        unpack,
        Payload,
        RdmaSges,
        Rings,
        FLAG_CONG_BITMAP,
        FRAME_PAGES,
        RECV_SLOTS,
        SEND_SLOTS, //
    },
    Cm, TAG_ACK, TAG_RECV, TAG_SEND,
};
use crate::{
    addr::Endpoint,
    cong,
    conn::{
        ConnKey,
        Connection, //
    },
    device::{
        self,
        RdmaDevice, //
    },
    ffi::{
        bindings,
        ib_cq::{
            CompletionHandler,
            CompletionQueue,
            Cqe,
            QpRef,
            WorkCompletion, //
        },
        ib_device::Transport as DeviceTransport,
        net::NetRef,
        rdma_cm::{
            CmEvent,
            CmEventKind,
            CmId,
            CmIdRef,
            ConnParam,
            SockAddr, //
        },
        task_work::{
            self,
            run_in_task,
            TaskWork, //
        },
        workqueue,
    },
    incoming::{
        self,
        Direction, //
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
    cm_id: CmId,
    cqs: Option<(CompletionQueue, CompletionQueue)>,
    device: Option<Arc<RdmaDevice>>,
    /// The device's MR fences, which list this link's QP (iWARP): held
    /// until the QP and its CQs are gone.
    fence: Option<Arc<crate::mr::MrDevice>>,
    /// We sent the connect request.
    active: bool,
}

impl Link {
    fn is(&self, id: &CmIdRef) -> bool {
        core::ptr::eq(&*self.cm_id, id)
    }

    fn on_device(&self, raw: *mut bindings::ib_device) -> bool {
        self.cm_id.device() == raw || self.device.as_ref().is_some_and(|d| d.is(raw))
    }

    fn is_iwarp(&self) -> bool {
        self.device
            .as_ref()
            .is_some_and(|d| d.caps().transport == DeviceTransport::Iwarp)
    }
}

/// `task_connect` in debugfs `ib_links`: ticks waited, or `-`.
struct TaskConnectWait(Option<u32>);

impl core::fmt::Display for TaskConnectWait {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        match self.0 {
            Some(ticks) => write!(f, "{}", ticks),
            None => f.write_str("-"),
        }
    }
}

/// Watchdog ticks (seconds) a connector task has to run an iWARP connect
/// handed to it (see `IbPath::check_task_connect`).
const TASK_CONNECT_TICKS: u32 = 5;

/// How long, in watchdog ticks (seconds), an accepted iWARP link waits for
/// the peer's first frame before it sends anyway.
///
/// MPA has a responder receive the initiator's first FPDU before it sends
/// one (RFC 5044; MPA v2's "ready to receive" frame, which siw does not
/// offer, is for initiators that do not send first). siw's initiator mishandles
/// data that arrives before it has moved its socket out of the MPA exchange:
/// each TCP segment queues a CM work item from a pool of four, and the extra
/// items later run its receive path from a work queue without the socket
/// lock, racing the softirq receive path (a KASAN use-after-free in
/// `skb_copy_bits` under `siw_cm_work_handler`), and a close that finds the
/// pool empty is never reported (Documentation/testing.rst). rrds's
/// initiator sends its congestion map as soon as it is up, so the wait
/// normally ends within a round trip.
const IWARP_RESPONDER_WAIT_TICKS: u32 = 2;

/// An iWARP connect to run in a user task of the connection's namespace.
struct IwarpConnect {
    path: Arc<IbPath>,
    /// The id to connect (identity only: it may be gone by then).
    id: usize,
}

impl TaskWork for IwarpConnect {
    fn run(self) {
        let path = self.path;
        // Links are torn down only with `teardown` held: the id stays alive below.
        let teardowns = path.teardown.lock();
        let current = {
            let mut c = path.ctl.lock();
            if c.task_connect.is_some_and(|(id, _, _)| id == self.id) {
                c.task_connect = None;
            }
            !c.dead
                && c.state == State::Connecting
                && c.link
                    .as_ref()
                    .is_some_and(|l| core::ptr::from_ref::<CmIdRef>(&l.cm_id) as usize == self.id)
        };
        if !current {
            return;
        }
        // It may have changed namespace since it sent (`setns`).
        if !user_task_in(&**kernel::current!(), path.key.net) {
            drop(teardowns);
            path.fail_id(self.id, "connecting task left the namespace");
            return;
        }
        // SAFETY: `self.id` is the current link's id, which cannot be destroyed while
        // `teardowns` is held (every teardown takes it).
        let id = unsafe { &*(self.id as *const CmIdRef) };
        let mut buf: PrivateBuf = [0; 56];
        let len = path.private_data(&mut buf);
        // Not under `ctl`: rdma_connect takes the id's handler lock, and the
        // handler may be waiting for `ctl`.
        let result = id.connect_unlocked(&path.conn_param(&buf[..len], id, None));
        drop(teardowns);
        if let Err(e) = result {
            pr_debug!("iWARP connect: {:?}\n", e);
            path.fail_id(self.id, "iWARP connect");
        }
    }

    fn cancel(self) {
        // Retried, from the next task that sends.
        self.path.fail_id(self.id, "connecting task exited");
    }
}

/// A link on its way out, with the rings it fed.
struct Retired {
    link: Link,
    rings: Option<Rings>,
}

/// Moves a retired link to error, waits for its flushes, and frees it.
/// Process context, no path lock held, never from the link's own handlers.
fn tear_down(retired: Retired) {
    let Retired { link, rings } = retired;
    link.cm_id.disconnect();
    // SAFETY: The QP, if any, lives until `link` drops below.
    if let Some(qp) = unsafe { QpRef::from_raw(link.cm_id.qp()) } {
        if let Some(fence) = &link.fence {
            // Stopped sending READ responses before MR fences stop waiting for
            // it, and taken off their list before the drain (no marker after).
            let _ = qp.force_error();
            crate::mr::fence_qp_removed(fence, qp);
        }
        qp.drain();
    }
    drop(rings);
    drop(link);
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
    task_connect: Option<(usize, usize, u32)>,
    /// An accepted iWARP link established and waiting for the peer's first
    /// frame before sending (`IWARP_RESPONDER_WAIT_TICKS`): the watchdog
    /// ticks it has waited.
    responder_waiting: Option<u32>,
    /// Current reconnect window (0: next attempt at once).
    backoff_ms: u32,
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
    conn: SpinLock<Option<Arc<Connection>>>,
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
    #[pin]
    wake: CondVar,
    /// Whom iWARP connects run in (see `note_connector`, `ffi/task_work.rs`).
    #[pin]
    connector: SpinLock<Option<ARef<Task>>>,
    /// The address of `connector`'s task (0: none), so that a send by the
    /// same task need not take the lock. Written under `connector`'s lock.
    connector_addr: Atomic<usize>,
    send_cqe: Cqe<IbPath>,
    recv_cqe: Cqe<IbPath>,
    ack_cqe: Cqe<IbPath>,
    /// This connection state's incarnation, sent in the private data: random,
    /// never 0, so a peer that sees it change knows we lost our sequence state.
    /// Set only before the path is bound to its connection (a resumed
    /// connection takes its forgotten one's), read when connecting.
    incarnation: Atomic<u32>,
}

/// The incarnations a connection forgotten with its namespace's last socket
/// leaves for the next one with its key (see `conn::Resume`).
#[derive(Clone, Copy)]
pub(crate) struct Incarnations {
    /// Ours (never 0): resumed with our sequence numbers, so the peer sees
    /// no restart.
    own: u32,
    /// The peer's on the last link (0: none seen).
    peer: u32,
}

impl_has_work! {
    impl HasWork<Self> for IbPath { self.work }
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
                    peer_request: ConnectPrivate::default(),
                    peer_incarnation: 0,
                    link_events: 0,
                    last_link_event: 0,
                    other_events: 0,
                    task_connect: None,
                    responder_waiting: None,
                    trail: 0,
                }),
                rings <- new_spinlock!(None),
                generation <- new_spinlock!(0),
                rx <- new_mutex!(RxAssembly {
                    generation: 0,
                    pending: None,
                }),
                teardown <- new_mutex!(()),
                work <- new_work!("rrds_ib_path"),
                wake <- new_condvar!("rrds_ib_backoff"),
                connector <- new_spinlock!(None),
                connector_addr: Atomic::new(0),
                send_cqe: Cqe::new(this, TAG_SEND),
                recv_cqe: Cqe::new(this, TAG_RECV),
                ack_cqe: Cqe::new(this, TAG_ACK),
                incarnation: Atomic::new(random_incarnation()),
            }),
            GFP_KERNEL,
        )
    }

    /// Ties the path to its connection (once, when the connection is created).
    pub(crate) fn bind(&self, conn: Arc<Connection>) {
        let old = self.conn.lock().replace(conn);
        drop(old);
    }

    fn conn(&self) -> Option<Arc<Connection>> {
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
        let _ = workqueue::queue().enqueue(self.clone());
    }

    /// Whether sends can be posted; if the path is down, starts connecting.
    pub(crate) fn ready(self: &Arc<Self>) -> bool {
        self.note_connector();
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

    /// Records who iWARP connects run in (see `connect_from_task`): the
    /// sending thread's group leader, which normally lives as long as its
    /// process and so its sockets, or the thread itself if the leader is not
    /// a live task of the connection's namespace (a thread may `setns` alone);
    /// kernel threads cannot connect iWARP. Every send counts, not only one
    /// that finds the link down: the side that was connected to may have sent
    /// only while the link was up, and it must reconnect to get what the link
    /// lost across.
    fn note_connector(&self) {
        let task = kernel::current!();
        let leader = task.group_leader();
        let known = self.connector_addr.load(Relaxed);
        if known == task.as_ptr() as usize
            || (known == leader.as_ptr() as usize && !task_work::exiting(leader))
        {
            return;
        }
        let net = self.key.net;
        let chosen: &Task = if user_task_in(leader, net) {
            leader
        } else if user_task_in(task, net) {
            task
        } else {
            return;
        };
        let mut connector = self.connector.lock();
        let old = connector.replace(ARef::from(chosen));
        self.connector_addr.store(chosen.as_ptr() as usize, Relaxed);
        drop(connector);
        drop(old);
    }

    /// Posts what it can of a message (see `Transport::xmit`).
    pub(crate) fn xmit(&self, header: &Header, message: &Arc<Message>) -> Xmit {
        let mut guard = self.rings.lock();
        let Some(rings) = Option::as_mut(&mut *guard) else {
            return Xmit::Blocked;
        };
        if rings.xmit(self, header, message) {
            Xmit::Taken
        } else {
            rings.blocked = true;
            Xmit::Blocked
        }
    }

    /// The connection left its table: tear everything down, for good.
    /// Process context. Returns whether links remain whose port is down:
    /// destroying their ids now would send a disconnect request the port
    /// cannot carry (see `tear_down_retiring`), so the caller keeps the path
    /// as an orphan until `tear_down_retired` or device removal takes them.
    pub(crate) fn kill(&self) -> bool {
        let current = {
            let mut c = self.ctl.lock();
            c.dead = true;
            c.state = State::Down;
            c.link.take().map(|link| Retired {
                link,
                rings: self.rings.lock().take(),
            })
        };
        self.wake.notify_all();
        if let Some(r) = current {
            // Room was reserved with the link (`Control::retiring`); bound first, so
            // that `ctl` is not held while an overflow is torn down.
            let overflow = self.ctl.lock().retiring.push_within_capacity(r).err();
            if let Some(full) = overflow {
                self.tear_down_now(full.0);
            }
        }
        let waiting = self.tear_down_retired(true);
        let conn = self.conn.lock().take();
        drop(conn);
        waiting
    }

    /// Tears down the retired links (with `wait_for_port`, those whose port
    /// is up only); returns whether any still wait. Process context, for a
    /// killed path (an orphan, see `kill`).
    pub(crate) fn tear_down_retired(&self, wait_for_port: bool) -> bool {
        let _teardowns = self.teardown.lock();
        let (_, deferred) = self.tear_down_retiring(wait_for_port);
        deferred > 0
    }

    /// The device `raw` is going away: tear the link down now if it uses it,
    /// and wait for teardowns in progress (the PD goes next). Messages that
    /// wait reconnect, over another device if the route allows.
    pub(crate) fn device_removed(self: &Arc<Self>, raw: *mut bindings::ib_device) {
        let overflow = {
            let mut c = self.ctl.lock();
            if c.link.as_ref().is_some_and(|l| l.on_device(raw)) {
                self.retire_locked(&mut c)
            } else {
                None
            }
        };
        let teardowns = self.teardown.lock();
        if let Some(r) = overflow {
            tear_down(r);
        }
        // The device goes: nothing waits for its port.
        self.tear_down_retiring(false);
        drop(teardowns);
        self.enqueue();
    }

    /// Tears down every retired link, keeping the list's room (see
    /// `Control::retiring`). The caller holds `teardown`, not `ctl`.
    ///
    /// With `defer_while_port_down`, a link whose port is down (on a device
    /// rrds still has) stays on the list (at its front) for a later pass: destroying a connected id sends
    /// a DREQ, and rxe moves the port's GSI QP to the error state for good
    /// when a send fails while its netdev is down, after which no connection
    /// can be made on that device. Returns whether anything was torn down,
    /// and how many links were deferred.
    fn tear_down_retiring(&self, defer_while_port_down: bool) -> (bool, usize) {
        let mut any = false;
        let mut deferred = 0;
        loop {
            let next = {
                let mut c = self.ctl.lock();
                if c.retiring.len() > deferred {
                    c.retiring.pop()
                } else {
                    None
                }
            };
            let Some(r) = next else {
                return (any, deferred);
            };
            // A device rrds no longer has will not bring its port back, and its
            // removal waits for the id (a link made while it was being removed).
            if defer_while_port_down
                && r.link.cm_id.port_down()
                && crate::device::is_known(r.link.cm_id.device())
            {
                let mut c = self.ctl.lock();
                // It was just taken out, so there is room, unless a link retired
                // meanwhile took it: then it goes now.
                match c.retiring.push_within_capacity(r) {
                    Ok(()) => {
                        let last = c.retiring.len() - 1;
                        c.retiring.swap(deferred, last);
                        deferred += 1;
                        continue;
                    }
                    Err(full) => {
                        drop(c);
                        any = true;
                        tear_down(full.0);
                        continue;
                    }
                }
            }
            any = true;
            tear_down(r);
        }
    }

    /// Takes the current link and rings out, onto the retiring list, and puts
    /// everything sent but unacknowledged back for retransmission. Returns the
    /// link if the list had no room, which its invariant rules out: the
    /// caller then tears it down once it has dropped `ctl`.
    fn retire_locked(&self, c: &mut Control) -> Option<Retired> {
        let link = c.link.take()?;
        let rings = self.rings.lock().take();
        c.state = State::Down;
        c.responder_waiting = None;
        if let Some(conn) = self.conn() {
            // A message `kick` posted after `xmit` gave it back is not in the
            // connection's sent count, but the peer may have it too.
            conn.reset_for_retransmit(rings.as_ref().and_then(Rings::handed_over));
            c.connect_wanted |= conn.has_queued();
        }
        stats::inc(Stat::ConnReset);
        c.retiring
            .push_within_capacity(Retired { link, rings })
            .err()
            .map(|e| e.0)
    }

    /// The link of `id` failed (or the peer left): retire it and let the work
    /// item tear it down and reconnect if messages wait.
    fn fail(self: &Arc<Self>, id: Option<&CmIdRef>, why: &str) {
        let mut c = self.ctl.lock();
        let matches = match (&c.link, id) {
            (Some(link), Some(id)) => link.is(id),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !matches {
            c.step(Trail::FailIgnored);
            return;
        }
        c.step(Trail::Failed);
        pr_debug!("connection down: {}\n", why);
        let overflow = self.retire_locked(&mut c);
        drop(c);
        if let Some(r) = overflow {
            self.tear_down_now(r);
        }
        self.enqueue();
    }

    /// Tears `r` down here and now (no path lock held by the caller).
    fn tear_down_now(&self, r: Retired) {
        let _teardowns = self.teardown.lock();
        tear_down(r);
    }

    /// Applies the peer's connect data to the connection (no path lock
    /// held): if it `restarted`, what was handed to its earlier incarnation
    /// went with that incarnation's sockets, so it is dropped (as upstream
    /// does when a peer's generation number changes) rather than delivered to
    /// a new socket; otherwise what it acknowledged in `ack_seq` is dropped
    /// before retransmission.
    fn peer_connected(&self, restarted: bool, ack_seq: u64) {
        if let Some(conn) = self.conn() {
            if restarted {
                conn.peer_restarted();
            } else {
                conn.drop_acked(ack_seq);
            }
        }
    }

    /// What RDS_INFO_IB_CONNECTIONS reports of an up connection: `None`
    /// while it is not up (upstream then reports only the addresses).
    pub(crate) fn info(&self) -> Option<IbInfo> {
        let c = self.ctl.lock();
        if c.state != State::Up {
            return None;
        }
        let link = c.link.as_ref()?;
        let (src_gid, dst_gid) = link.cm_id.gids();
        Some(IbInfo {
            src_gid,
            dst_gid,
            sl: link.cm_id.service_level(),
            max_send_wr: SEND_SLOTS as u32 + 1,
            max_recv_wr: RECV_SLOTS as u32,
            max_send_sge: link
                .device
                .as_ref()
                .map_or(0, |d| u32::try_from(d.caps().max_send_sge).unwrap_or(0)),
        })
    }

    /// debugfs `rrds/ib_links`: the control state and ring counters.
    pub(crate) fn show(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let c = self.ctl.lock();
        let state = match c.state {
            State::Down => "down",
            State::Connecting => "connecting",
            State::Up => "up",
        };
        write!(
            f,
            " state {} side {} ctx {} retiring {} backoff_ms {} cm_events {} last {} other {} trail {:#x} task_connect {}",
            state,
            match &c.link {
                Some(l) if l.active => "active",
                Some(_) => "passive",
                None => "-",
            },
            // Whether the live link's events reach this path.
            match c.link.as_ref().map(|l| l.cm_id.context()) {
                Some(ctx) if core::ptr::eq(ctx, core::ptr::from_ref(self).cast()) => "ok",
                Some(ctx) if ctx.is_null() => "null",
                Some(_) => "other",
                None => "-",
            },
            c.retiring.len(),
            c.backoff_ms,
            c.link_events,
            c.last_link_event,
            c.other_events,
            c.trail,
            // Seconds an iWARP connect has waited for its task to run it (-: none).
            TaskConnectWait(c.task_connect.map(|(_, _, waited)| waited)),
        )?;
        match Option::as_ref(&*self.rings.lock()) {
            Some(rings) => rings.show(f),
            None => Ok(()),
        }
    }

    /// A watchdog tick (once a second): a link whose sends make no progress
    /// for `ticks` is reset, in case a device loses an RC connection without
    /// a completion or an event.
    pub(crate) fn watchdog_tick(self: &Arc<Self>, ticks: u32) {
        self.check_task_connect();
        self.check_responder_wait();
        // A pack whose post failed (no memory) and that no completion retried.
        let (stalled, ack_failed, blocked) =
            Option::as_mut(&mut *self.rings.lock()).map_or((false, false, false), |r| {
                r.post_pack(self);
                let stalled = r.watchdog_tick() >= ticks;
                // The ack the tick may have asked for.
                let ack_failed = r.send_ack(self).is_err();
                // Sends wait: for credits or a slot (harmless to retry), or
                // after a post that failed for want of memory, which nothing
                // retries if no completion is to come.
                (stalled, ack_failed, core::mem::take(&mut r.blocked))
            });
        if stalled {
            self.fail(None, "no send progress");
        } else if ack_failed {
            self.fail(None, "explicit ack not posted");
        } else if blocked {
            if let Some(conn) = self.conn() {
                self.resume(&conn);
            }
        }
        // Retired links deferred while their port is down (`tear_down_retiring`).
        if !self.ctl.lock().retiring.is_empty() {
            self.enqueue();
        }
    }

    /// An accepted iWARP link whose peer has sent nothing within
    /// `IWARP_RESPONDER_WAIT_TICKS` of its establishment starts sending.
    fn check_responder_wait(self: &Arc<Self>) {
        let mut c = self.ctl.lock();
        let Some(waited) = c.responder_waiting.as_mut() else {
            return;
        };
        *waited += 1;
        if *waited < IWARP_RESPONDER_WAIT_TICKS || c.state != State::Connecting {
            return;
        }
        c.step(Trail::ResponderWaitOver);
        let peer = c.peer_request;
        self.link_up(c, peer);
    }

    /// An iWARP connect its task has not run within `TASK_CONNECT_TICKS`
    /// (the task is stopped, or stuck in the kernel) fails, and the task
    /// stops being the connector: the next attempt runs in the next task
    /// that sends, instead of everyone's connection waiting for that one.
    fn check_task_connect(self: &Arc<Self>) {
        let overdue = {
            let mut c = self.ctl.lock();
            match c.task_connect.as_mut() {
                Some((id, task, waited)) => {
                    *waited += 1;
                    let overdue = (*id, *task);
                    if *waited >= TASK_CONNECT_TICKS {
                        c.task_connect = None;
                        Some(overdue)
                    } else {
                        None
                    }
                }
                None => None,
            }
        };
        let Some((id, task)) = overdue else {
            return;
        };
        stats::inc(Stat::IbTaskConnectsOverdue);
        // Unless another task sent meanwhile and is the connector already.
        let old = {
            let mut connector = self.connector.lock();
            if self.connector_addr.load(Relaxed) == task {
                self.connector_addr.store(0, Relaxed);
                connector.take()
            } else {
                None
            }
        };
        drop(old);
        self.fail_id(id, "connecting task did not run its connect");
    }

    /// Hands the connect of `id` to the connector task (iWARP); returns
    /// the task's address.
    fn connect_from_task(self: &Arc<Self>, id: &CmIdRef) -> Result<usize> {
        let task = self
            .connector
            .lock()
            .clone()
            .ok_or_else(crate::errno::enotconn)?;
        let address = task.as_ptr() as usize;
        run_in_task(
            &task,
            IwarpConnect {
                path: self.clone(),
                id: core::ptr::from_ref(id) as usize,
            },
        )?;
        Ok(address)
    }

    /// Like `fail`, for an id known by address only.
    fn fail_id(self: &Arc<Self>, id: usize, why: &str) {
        let matches = self
            .ctl
            .lock()
            .link
            .as_ref()
            .is_some_and(|l| core::ptr::from_ref::<CmIdRef>(&l.cm_id) as usize == id);
        if matches {
            self.fail(None, why);
        }
    }

    /// The link whose QP is `qp` failed (a completion error).
    fn fail_qp(self: &Arc<Self>, qp: *mut bindings::ib_qp) {
        let mine = self
            .rings
            .lock()
            .as_ref()
            .is_some_and(|r| r.qp.as_raw() == qp);
        if mine {
            self.fail(None, "completion error");
        }
    }

    /// Creates the CQs, QP and rings of `link` and posts every receive.
    fn build(&self, link: &mut Link) -> Result {
        let raw = link.cm_id.device();
        let device = device::find(raw).ok_or(ENODEV)?;
        let send_cq = CompletionQueue::alloc(raw, (SEND_SLOTS + 3) as u32)?;
        let recv_cq = CompletionQueue::alloc(raw, (RECV_SLOTS + 1) as u32)?;
        let rdma_sges = RdmaSges::for_device(device.caps());
        let mut attr = bindings::ib_qp_init_attr {
            send_cq: send_cq.as_raw(),
            recv_cq: recv_cq.as_raw(),
            cap: bindings::ib_qp_cap {
                // Data slots, the ack, an MR fence marker and the drain marker.
                max_send_wr: (SEND_SLOTS + 3) as u32,
                max_recv_wr: (RECV_SLOTS + 1) as u32,
                max_send_sge: rdma_sges.qp_send_sges(),
                // A header and `FRAME_PAGES` pages.
                max_recv_sge: 1 + FRAME_PAGES as u32,
                ..Default::default()
            },
            sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_REQ_WR,
            qp_type: bindings::ib_qp_type_IB_QPT_RC,
            ..Default::default()
        };
        let lkey = device.with_pd(|pd| {
            link.cm_id.create_qp(pd, &mut attr)?;
            Ok(pd.local_dma_lkey())
        })?;
        link.cqs = Some((send_cq, recv_cq));
        link.device = Some(device);
        // SAFETY: The QP was just created on `id`, which `link` owns; the rings are
        // dropped before the link (teardown order).
        let qp = unsafe { QpRef::from_raw(link.cm_id.qp()) }.ok_or(ENOMEM)?;
        let mut rings = Rings::new(qp, raw, lkey, rdma_sges)?;
        *self.generation.lock() += 1;
        rings.post_all_receives(self)?;
        *self.rings.lock() = Some(rings);
        if let Some(device) = &link.device {
            // Before the peer can send READs: MR fences wait for the QP (iWARP).
            link.fence = crate::mr::fence_qp_added(device, qp)?;
        }
        Ok(())
    }

    fn private_data(&self, buf: &mut PrivateBuf) -> usize {
        // What we received in order so far: the peer drops it before retransmitting.
        let ack_seq = self
            .conn()
            .map_or(0, |c| c.snapshot().next_rx_seq.saturating_sub(1));
        let p = ConnectPrivate::new(
            self.key.laddr,
            self.key.faddr,
            self.key.tos,
            ack_seq,
            RECV_SLOTS as u32,
            self.incarnation.load(Relaxed),
            FEATURE_PACKED | FEATURE_LARGE_FRAMES,
        );
        p.encode(buf)
    }

    /// The parameters of a connect (`request`: None) or of the accept of a
    /// request offering `(responder_resources, initiator_depth)`: as many
    /// RDMA READs and atomics at a time as the device of `id` allows, up to
    /// [`RD_ATOMIC_MAX`], and on accept no more than the peer offered (as
    /// upstream's `rds_ib_cm_fill_conn_param`).
    fn conn_param<'a>(
        &self,
        private: &'a [u8],
        id: &CmIdRef,
        request: Option<(u8, u8)>,
    ) -> ConnParam<'a> {
        let clamp = |n: i32| n.clamp(1, i32::from(RD_ATOMIC_MAX)) as u8;
        let (mut responder, mut initiator) = device::find(id.device()).map_or((1, 1), |d| {
            (
                clamp(d.caps().max_qp_rd_atom),
                clamp(d.caps().max_qp_init_rd_atom),
            )
        });
        if let Some((their_responder, their_initiator)) = request {
            responder = responder.min(their_initiator);
            initiator = initiator.min(their_responder);
        }
        ConnParam {
            private_data: private,
            responder_resources: responder,
            initiator_depth: initiator,
            retry_count: RETRY_COUNT,
            rnr_retry_count: RNR_RETRY_COUNT,
            flow_control: 0,
        }
    }

    /// Starts an active connect. Called by the work item with `ctl` held.
    ///
    /// An id whose address resolution failed is handed back with the error:
    /// the caller destroys it after unlocking `ctl`, which handlers take under
    /// rdma_cm's handler mutex (`rdma_destroy_id` takes that mutex).
    fn connect_locked(
        self: &Arc<Self>,
        c: &mut Control,
    ) -> core::result::Result<(), (Error, Option<CmId>)> {
        // Room to retire the link (`Control::retiring`).
        c.retiring
            .reserve(1, GFP_KERNEL)
            .map_err(|e| (e.into(), None))?;
        let id =
            CmId::create::<Cm>(self.key.net, Arc::as_ptr(self).cast()).map_err(|e| (e, None))?;
        let v4 = Endpoint {
            addr: self.key.laddr,
            ..Endpoint::default()
        }
        .is_v4();
        let port = if v4 { PORT_V4 } else { PORT_V6 };
        let src = sockaddr(self.key.laddr, 0, self.key.scope);
        let dst = sockaddr(self.key.faddr, port, self.key.scope);
        if let Err(e) = id.resolve_addr(&src, &dst, ADDR_TIMEOUT_MS) {
            return Err((e, Some(id)));
        }
        c.link = Some(Link {
            cm_id: id,
            cqs: None,
            device: None,
            fence: None,
            active: true,
        });
        c.state = State::Connecting;
        (c.link_events, c.last_link_event) = (0, 0);
        c.step(Trail::Connecting);
        Ok(())
    }

    /// A peer asks to connect (passive side, in the listener's handler).
    /// Keeps `id` or gives it back to be rejected and destroyed.
    pub(super) fn accept(
        self: &Arc<Self>,
        id: CmId,
        peer: &ConnectPrivate,
        rd_atomic: (u8, u8),
    ) -> core::result::Result<(), CmId> {
        let mut c = self.ctl.lock();
        if c.dead {
            id.reject(&REJECT_RETRY);
            return Err(id);
        }
        match c.state {
            State::Up => {
                // The peer lost the link we still think is up: drop ours; it retries.
                c.step(Trail::RefusedUp);
                let overflow = self.retire_locked(&mut c);
                drop(c);
                if let Some(r) = overflow {
                    self.tear_down_now(r);
                }
                self.enqueue();
                id.reject(&REJECT_RETRY);
                return Err(id);
            }
            State::Connecting => {
                let ours_active = c.link.as_ref().is_some_and(|l| l.active);
                // Simultaneous connects: the side with the higher address gives up its
                // own attempt, so exactly one connection is made (upstream rejects
                // both and relies on random backoff).
                if ours_active && self.key.laddr < self.key.faddr {
                    c.step(Trail::RefusedRace);
                    id.reject(&REJECT_RETRY);
                    return Err(id);
                }
                // A passive attempt still connecting was abandoned by the peer, which
                // sends a new request only once its earlier one failed (ib_cm absorbs
                // retransmitted ones): replace it. Rejecting would refuse the peer for
                // as long as the stale attempt lasts, which is forever when its RTU was
                // lost (rxe raises no COMM_EST to establish it otherwise).
                if let Some(r) = self.retire_locked(&mut c) {
                    // Our own attempt: its handler does not wait for `ctl` while we
                    // are in the listener's handler of another id.
                    drop(c);
                    self.tear_down_now(r);
                    c = self.ctl.lock();
                }
                c.connect_wanted = false;
            }
            State::Down => {}
        }
        // Room to retire the link we make (`Control::retiring`).
        if c.retiring.reserve(1, GFP_KERNEL).is_err() {
            id.reject(&REJECT_RETRY);
            return Err(id);
        }
        id.set_context(Arc::as_ptr(self).cast());
        let mut link = Link {
            cm_id: id,
            cqs: None,
            device: None,
            fence: None,
            active: false,
        };
        let mut buf: PrivateBuf = [0; 56];
        let len = self.private_data(&mut buf);
        let built = self.build(&mut link).and_then(|()| {
            link.cm_id
                .accept(&self.conn_param(&buf[..len], &link.cm_id, Some(rd_atomic)))
        });
        c.peer_request = *peer;
        c.link = Some(link);
        c.state = State::Connecting;
        (c.link_events, c.last_link_event) = (0, 0);
        c.step(Trail::Accepted);
        let mut overflow = None;
        if built.is_err() {
            if let Some(link) = &c.link {
                link.cm_id.reject(&REJECT_RETRY);
            }
            overflow = self.retire_locked(&mut c);
        }
        drop(c);
        if let Some(r) = overflow {
            self.tear_down_now(r);
        }
        self.enqueue();
        Ok(())
    }

    /// An rdma_cm event of one of this path's ids.
    pub(super) fn cm_event(self: &Arc<Self>, id: &CmIdRef, event: &CmEvent<'_>) {
        {
            let mut c = self.ctl.lock();
            let live_link = c.link.as_ref().is_some_and(|l| l.is(id));
            if live_link {
                // Diagnostics counters: they wrap rather than overflow.
                c.link_events = c.link_events.wrapping_add(1);
                c.last_link_event = event.number();
            } else {
                c.other_events = c.other_events.wrapping_add(1);
            }
            c.step_event(event.number(), live_link);
        }
        match event.kind() {
            CmEventKind::AddrResolved => {
                let c = self.ctl.lock();
                if !c.link.as_ref().is_some_and(|l| l.is(id)) {
                    return;
                }
                // The connection's TOS becomes the traffic class (RoCE), the
                // service level (IB) or the TCP TOS (iWARP), as upstream.
                id.set_service_type(self.key.tos);
                if id.resolve_route(ROUTE_TIMEOUT_MS).is_err() {
                    drop(c);
                    self.fail(Some(id), "route resolution");
                }
            }
            CmEventKind::RouteResolved => {
                let mut c = self.ctl.lock();
                let Some(mut link) = c.link.take_if(|l| l.is(id)) else {
                    return;
                };
                let mut buf: PrivateBuf = [0; 56];
                let len = self.private_data(&mut buf);
                let result = self.build(&mut link).and_then(|()| {
                    if link.is_iwarp() {
                        // siw opens its TCP socket in the calling task's namespace.
                        let task = self.connect_from_task(id)?;
                        c.task_connect = Some((core::ptr::from_ref(id) as usize, task, 0));
                        Ok(())
                    } else {
                        id.connect(&self.conn_param(&buf[..len], id, None))
                    }
                });
                c.link = Some(link);
                if let Err(e) = result {
                    drop(c);
                    pr_debug!("connect: {:?}\n", e);
                    self.fail(Some(id), "connect");
                }
            }
            CmEventKind::Established => {
                let mut c = self.ctl.lock();
                let Some(active) = c.link.as_ref().filter(|l| l.is(id)).map(|l| l.active) else {
                    return;
                };
                if c.state == State::Up {
                    // Established already by its first receive (`receive_before_established`).
                    return;
                }
                if !active && c.link.as_ref().is_some_and(Link::is_iwarp) {
                    // The responder speaks second: its first receive, or the
                    // watchdog, starts it (`IWARP_RESPONDER_WAIT_TICKS`).
                    c.responder_waiting = Some(0);
                    c.step(Trail::ResponderWaits);
                    return;
                }
                let peer = if active {
                    let v6 = !Endpoint {
                        addr: self.key.laddr,
                        ..Endpoint::default()
                    }
                    .is_v4();
                    ConnectPrivate::decode(event.private_data(), v6)
                        .filter(|p| p.major != 0)
                        .unwrap_or_default()
                } else {
                    c.peer_request
                };
                self.link_up(c, peer);
            }
            CmEventKind::Failed
            | CmEventKind::Disconnected
            | CmEventKind::DeviceRemoval
            | CmEventKind::AddrChange => {
                pr_debug!(
                    "rdma_cm event {} status {}\n",
                    event.number(),
                    event.status()
                );
                self.fail(Some(id), "rdma_cm event");
            }
            _ => {}
        }
    }

    /// The live link is established, `peer` what the peer's connect data
    /// said: start the rings, retransmit what the peer lacks, send.
    fn link_up(self: &Arc<Self>, mut c: MutexGuard<'_, Control>, peer: ConnectPrivate) {
        if let Some(rings) = Option::as_mut(&mut *self.rings.lock()) {
            rings.start(
                peer.credit,
                peer.features & FEATURE_PACKED != 0,
                peer.features & FEATURE_LARGE_FRAMES != 0,
            );
        }
        c.state = State::Up;
        c.responder_waiting = None;
        c.backoff_ms = 0;
        c.connect_wanted = false;
        let restarted = peer_restarted(&mut c, &peer);
        drop(c);
        self.peer_connected(restarted, peer.ack_seq);
        if let Some(conn) = self.conn() {
            // Our congestion map first, as upstream does on a new connection.
            if let Some(map) = cong::find(conn.key.net, &conn.key.laddr, cong::Side::Local) {
                if let Ok(wire) = cong_message(&map) {
                    self.send_cong_map(wire);
                }
            }
            conn.xmit();
        }
    }

    /// A receive completed on a link not yet started: the peer sends, so it
    /// holds the connection established. A passive link whose `ESTABLISHED`
    /// has not come (the RTU is late or lost, and rxe raises no `COMM_EST`
    /// for upstream's answer) is established here, or it would not send
    /// until then. An accepted iWARP link waiting for the peer's first frame
    /// (`IWARP_RESPONDER_WAIT_TICKS`) starts here too.
    ///
    /// The IB CM is not told (`rdma_notify`): it would move to established
    /// and cancel the REP it retransmits only later, from its work queue, and
    /// a disconnect in between replaces the REP as the id's message without
    /// cancelling it. Destroying the id then waits for the REP's every retry
    /// (tens of seconds), holding up the path's teardown and reconnect. Left
    /// waiting, the CM completes on the RTU, which a REP retransmission asks
    /// the peer for again, or a teardown cancels the REP and rejects.
    fn receive_before_established(self: &Arc<Self>) {
        let mut c = self.ctl.lock();
        if c.state != State::Connecting || c.link.as_ref().is_none_or(|l| l.active) {
            return;
        }
        c.step(Trail::UpByReceive);
        // An iWARP responder waiting for this frame had its event.
        if c.responder_waiting.is_none() {
            stats::inc(Stat::IbEstablishedByReceive);
        }
        let peer = c.peer_request;
        self.link_up(c, peer);
    }

    /// A frame of a message arrived: add it to the message being reassembled
    /// and hand the message on once whole.
    fn receive_frame(
        &self,
        conn: &Connection,
        generation: u64,
        header: Header,
        payload: Payload,
    ) -> Result {
        let complete = {
            let mut rx = self.rx.lock();
            if rx.generation != generation {
                rx.generation = generation;
                rx.pending = None;
            }
            let (first, mut assembly) = match rx.pending.take() {
                Some((first, assembly)) => {
                    if (first.sequence, first.len, first.sport, first.dport)
                        != (header.sequence, header.len, header.sport, header.dport)
                    {
                        return Err(EINVAL);
                    }
                    (first, assembly)
                }
                None => (header, Assembly::new(header.len as usize)?),
            };
            let mut pages = payload.into_iter().flatten().peekable();
            // Only a 0-length message comes without payload.
            if pages.peek().is_none() && assembly.missing() > 0 {
                return Err(EINVAL);
            }
            for (page, bytes) in pages {
                assembly.push(page, bytes)?;
            }
            if assembly.missing() > 0 {
                rx.pending = Some((first, assembly));
                return Ok(());
            }
            (first, assembly.finish()?)
        };
        let (header, message) = complete;
        if header.flags == FLAG_CONG_BITMAP {
            // The peer's congestion map: the bits of its ports, which our senders
            // to it check (upstream ignores a map of the wrong size too).
            if message.len() == cong::WIRE_BYTES {
                let mut wire = KVec::with_capacity(cong::WIRE_BYTES, GFP_KERNEL)?;
                wire.resize(cong::WIRE_BYTES, 0, GFP_KERNEL)?;
                message.copy_to_kernel(&mut wire)?;
                let wire: &[u8; cong::WIRE_BYTES] =
                    wire.as_slice().try_into().map_err(|_| EINVAL)?;
                if conn.fcong.apply_wire(wire) {
                    cong::notify_monitors(conn.key.net);
                }
            }
            return Ok(());
        }
        // Acknowledged only once taken: one the socket could not queue fails
        // the link, and the peer retransmits it.
        incoming::arrived(conn, Direction::FromPeer, header, message)?;
        if let Some(rings) = Option::as_mut(&mut *self.rings.lock()) {
            rings.message_received(header.sequence, header.flags & flags::ACK_REQUIRED != 0);
        }
        Ok(())
    }

    /// A packed frame of `bytes` bytes of records in `page` arrived: each of
    /// its messages is received as a frame of its own, in order.
    fn receive_packed(
        &self,
        conn: &Connection,
        generation: u64,
        page: Page,
        bytes: usize,
    ) -> Result {
        let mut records = KVec::with_capacity(bytes, GFP_KERNEL)?;
        records.resize(bytes, 0, GFP_KERNEL)?;
        // SAFETY: `records` is valid for writes of `bytes`, at most a page
        // (`Rings::receive_completed`); the receive completed, so nothing else
        // touches the page.
        unsafe { page.read_raw(records.as_mut_ptr(), 0, bytes)? };
        drop(page);
        for (header, payload) in unpack(&records).ok_or(EINVAL)? {
            let mut pages: Payload = [None, None];
            if !payload.is_empty() {
                let page = Page::alloc_page(GFP_KERNEL)?;
                // SAFETY: `payload` is valid for reads of its length, at most a page
                // (`unpack`); the page is new and ours alone.
                unsafe { page.write_raw(payload.as_ptr(), 0, payload.len())? };
                pages[0] = Some((page, payload.len()));
            }
            stats::inc(Stat::IbRxPackedMessages);
            self.receive_frame(conn, generation, header, pages)?;
        }
        Ok(())
    }

    /// Sends `map` (our congestion map in wire form) to the peer, before the
    /// next message. Dropped if the link is not up: a new link sends it.
    pub(crate) fn send_cong_map(&self, map: Arc<Message>) {
        let old = {
            let mut guard = self.rings.lock();
            let Some(r) = Option::as_mut(&mut *guard).filter(|r| r.up) else {
                return;
            };
            let old = r.cong_pending.replace(map);
            if !r.kick(self) {
                r.blocked = true;
            }
            old
        };
        drop(old);
    }

    /// Sends resumed after a completion or a credit update: what the rings
    /// had begun, then the connection's queue.
    fn resume(&self, conn: &Connection) {
        {
            let mut guard = self.rings.lock();
            if let Some(r) = Option::as_mut(&mut *guard) {
                if !r.kick(self) {
                    r.blocked = true;
                    return;
                }
            }
        }
        conn.xmit();
    }

    fn send_completed(self: &Arc<Self>, wc: &WorkCompletion<'_>) {
        let (done, blocked) = {
            let mut guard = self.rings.lock();
            match Option::as_mut(&mut *guard) {
                Some(r) if r.qp.as_raw() == wc.qp() => {
                    let done = r.send_completed(wc.is_success());
                    // What was packed while this send was outstanding goes now.
                    if wc.is_success() {
                        r.post_pack(self);
                    }
                    (done, core::mem::take(&mut r.blocked))
                }
                _ => (None, false),
            }
        };
        if let Some((message, Some(last))) = &done {
            if let Some(op) = message.rdma() {
                op.completed(wc.status(), *last);
                if *last && wc.is_success() && op.sends_nothing(message.len()) {
                    // No header went, so no ack will release it.
                    if let Some(conn) = self.conn() {
                        conn.release_unsent(message);
                    }
                }
            }
        }
        drop(done);
        if !wc.is_success() {
            // A flush of the live link's QP is a failure too: rxe moves a QP
            // to error on its own when its netdev goes down and flushes every
            // request, the failed one included, with no other event.
            pr_debug!("send completion status {}\n", wc.status());
            self.fail_qp(wc.qp());
            return;
        }
        if blocked {
            if let Some(conn) = self.conn() {
                self.resume(&conn);
            }
        }
    }

    fn recv_completed(self: &Arc<Self>, wc: &WorkCompletion<'_>) {
        if !wc.is_success() {
            if let Some(r) = Option::as_mut(&mut *self.rings.lock()) {
                if r.qp.as_raw() == wc.qp() {
                    r.receive_failed();
                }
            }
            // Flushed or failed: the link is gone if it is the live one
            // (see `send_completed`).
            pr_debug!("receive completion status {}\n", wc.status());
            self.fail_qp(wc.qp());
            return;
        }
        // The pages that replace those the frame filled, allocated before
        // taking the lock (a packed frame fills one page).
        let filled = pages_filled(wc.byte_len());
        let mut fresh: [Option<Page>; FRAME_PAGES] = [None, None];
        for page in fresh.iter_mut().take(filled) {
            *page = Page::alloc_page(GFP_KERNEL).ok();
        }
        let (received, generation, not_started) = {
            let mut guard = self.rings.lock();
            let Some(r) = Option::as_mut(&mut *guard).filter(|r| r.qp.as_raw() == wc.qp()) else {
                return;
            };
            let not_started = !r.up;
            let received = r.receive_completed(self, wc.byte_len(), fresh);
            (received, *self.generation.lock(), not_started)
        };
        if not_started {
            self.receive_before_established();
        }
        let Some(conn) = self.conn() else {
            return;
        };
        if let Some(seq) = received.acked {
            conn.drop_acked(seq);
        }
        let mut error = received.error;
        if let Some((header, payload)) = received.frame {
            if self
                .receive_frame(&conn, generation, header, payload)
                .is_err()
            {
                error = true;
            }
        }
        if let Some((page, bytes)) = received.packed {
            if self.receive_packed(&conn, generation, page, bytes).is_err() {
                error = true;
            }
        }
        if error {
            self.fail_qp(wc.qp());
            return;
        }
        let blocked = {
            let mut guard = self.rings.lock();
            match Option::as_mut(&mut *guard) {
                Some(r) => {
                    // A pack waiting for credits carries the ack too.
                    if received.credits_added {
                        r.post_pack(self);
                    }
                    if r.send_ack(self).is_err() {
                        error = true;
                    }
                    received.credits_added && core::mem::take(&mut r.blocked)
                }
                None => false,
            }
        };
        if error {
            self.fail_qp(wc.qp());
        } else if blocked {
            self.resume(&conn);
        }
    }

    fn ack_completed(self: &Arc<Self>, wc: &WorkCompletion<'_>) {
        // Flushes included (see `send_completed`).
        let mut error = !wc.is_success();
        {
            let mut guard = self.rings.lock();
            if let Some(r) = Option::as_mut(&mut *guard).filter(|r| r.qp.as_raw() == wc.qp()) {
                r.ack_completed(wc.is_success());
                if wc.is_success() && r.send_ack(self).is_err() {
                    error = true;
                }
            }
        }
        if error {
            self.fail_qp(wc.qp());
        }
    }
}

/// `map` as a congestion-map message (8 KiB). Process context.
pub(super) fn cong_message(map: &cong::CongMap) -> Result<Arc<Message>> {
    let mut wire = KVec::with_capacity(cong::WIRE_BYTES, GFP_KERNEL)?;
    wire.resize(cong::WIRE_BYTES, 0, GFP_KERNEL)?;
    let buf: &mut [u8; cong::WIRE_BYTES] = wire.as_mut_slice().try_into().map_err(|_| EINVAL)?;
    map.to_wire(buf);
    Message::from_kernel(&wire)
}

/// A sockaddr for rdma_cm from a 16-byte address.
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
    // SAFETY: `get_random_u32` has no preconditions.
    let r = unsafe { bindings::get_random_u32() };
    r.max(1)
}

fn sockaddr(addr: [u8; 16], port: u16, scope: u32) -> SockAddr {
    let mut raw = [0u8; 28];
    let ep = Endpoint { addr, port, scope };
    let len = ep.write_sockaddr(&mut raw);
    SockAddr::new(&raw[..len])
}

impl CompletionHandler for IbPath {
    fn completed(&self, tag: u32, wc: &WorkCompletion<'_>) {
        // SAFETY: `self` is the contents of an `Arc` (paths are only created by
        // `IbPath::new`), alive for the duration of the call (type invariant).
        let this: Arc<Self> = unsafe { ArcBorrow::from_raw(self) }.into();
        match tag {
            TAG_SEND => this.send_completed(wc),
            TAG_RECV => this.recv_completed(wc),
            _ => this.ack_completed(wc),
        }
    }
}

/// Whether `task` is a live user task in `net` (it can run iWARP connects).
/// `net` must be a namespace with live sockets.
fn user_task_in(task: &Task, net: NetRef) -> bool {
    // SAFETY: `task` is a live task (a reference is held by the caller); `net` is
    // live (the caller's sockets hold it) and only compared.
    unsafe { bindings::rrds_task_user_in_net(task.as_ptr().cast(), net.as_ptr()) }
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
            if c.backoff_ms > 0 {
                // SAFETY: No preconditions.
                let delay = unsafe { bindings::get_random_u32() } % c.backoff_ms;
                let _ = this
                    .wake
                    .wait_interruptible_timeout(&mut c, msecs_to_jiffies(delay.max(1)));
                if c.dead || c.state != State::Down {
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
