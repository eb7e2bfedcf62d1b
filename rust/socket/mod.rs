// SPDX-License-Identifier: GPL-2.0

//! The RDS socket family (PF_RDS): sockets, the bind table, send and receive.
//!
//! ABI and errnos follow upstream net/rds (af_rds.c, bind.c, send.c, recv.c);
//! see Documentation/userspace-api.rst for what is implemented and where rrds
//! deliberately differs.

pub(crate) mod bind;
mod info;
mod memory;
mod ops;
mod options;
pub(crate) mod recv;
mod send;
mod sinks;
mod xrc_options;

use kernel::{
    new_mutex, new_spinlock,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNode,
        RBTreeNodeReservation, //
    },
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
        SpinLock, //
    },
    task::Task,
    uaccess::UserSlice,
};

use crate::{
    addr::{
        Endpoint,
        Purpose, //
    },
    cong::{
        self,
        CongMap, //
    },
    conn::{
        self,
        ConnKey,
        Connection, //
    },
    errno,
    ffi::{
        bindings,
        net::{
            FamilyRegistration,
            FamilyTables,
            GetOptResult,
            MsgHdr,
            NetExit,
            NetRef,
            PollRequest,
            Sock,
            SockOptValue,
            SockPtr,
            SocketFamily, //
        },
        poll::PollQueue,
        task_work::TaskSlot,
    },
    fifo::Fifo,
    message::{
        Header,
        Message, //
    },
    mr::{
        self,
        SocketMrs, //
    },
    transport::{
        ib,
        loopback::LOOPBACK,
        BusyPoller,
        LinkChange,
        Transport, //
    },
    xrc,
};

const SOL_RDS: i32 = bindings::SOL_RDS as i32;
/// `RDS_TRANS_NONE` as getsockopt reports it.
const TRANS_NONE: i32 = -1;
/// `SO_RDS_TRANSPORT` values a socket may ask for: IB, GAP, TCP.
const TRANS_COUNT: i32 = 3;

/// `EPOLL*` bits (uapi/linux/eventpoll.h; bindgen cannot read their `__force` casts).
mod poll_bits {
    pub(super) const IN: u32 = 0x0001;
    pub(super) const OUT: u32 = 0x0004;
    pub(super) const RDNORM: u32 = 0x0040;
    pub(super) const WRNORM: u32 = 0x0100;
}

/// The PF_RDS family.
pub(crate) struct RdsFamily;

static TABLES: FamilyTables<RdsFamily> = FamilyTables::new(
    bindings::PF_RDS as i32,
    b"RDS",
    crate::THIS_MODULE.as_ptr().cast(),
);

/// Registers PF_RDS; fails with `EEXIST` if another RDS (the in-tree `rds`) holds it.
pub(crate) fn register() -> Result<FamilyRegistration<RdsFamily>> {
    TABLES.register().inspect_err(|e| {
        if *e == EEXIST {
            pr_err!("PF_RDS is already registered: unload the in-tree rds module first\n");
        }
    })
}

/// Every socket, by creation number (`RDS_INFO_SOCKETS` lists them in
/// creation order): adding and removing one costs O(log n) however many
/// there are.
pub(super) struct SocketTable {
    sockets: RBTree<u64, Arc<RdsSock>>,
    next_id: u64,
}

impl SocketTable {
    /// Every socket, oldest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<RdsSock>> {
        self.sockets.iter().map(|(_, s)| s)
    }
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    // `None` until the first socket (a tree cannot be built in a constant).
    unsafe(uninit) static SOCKETS: Mutex<Option<SocketTable>> = None;
}

/// Initialises the socket tables. Call once, in module init.
pub(crate) fn init(m: &crate::ffi::global::ModuleInit) {
    bind::init(m);
    crate::incoming::set_bind_table(&recv::BoundSockets);
    m.init_lock(&SOCKETS);
}

/// Frees the socket tables' buffers. Call once, at unload, after the last socket.
pub(crate) fn release_tables() {
    bind::release_table();
    let table = SOCKETS.lock().take();
    drop(table);
}

/// A message waiting in a receive queue.
struct Incoming {
    header: Header,
    from: Endpoint,
    message: Arc<Message>,
    /// Wall-clock receive time in ns, if SO_TIMESTAMP was on when it arrived.
    received_ns: Option<u64>,
    /// Trace clock when the header was seen and when it was queued.
    seen_ns: u64,
    queued_ns: u64,
}

/// What the socket lock (`state`) protects.
#[derive(Default)]
struct SockState {
    bound: Option<Endpoint>,
    /// The default destination set by `connect()`.
    peer: Option<Endpoint>,
    recverr: bool,
    /// Type of service of the socket's connections (`SIOCRDSSETTOS`).
    tos: u8,
    /// Chosen at bind.
    transport: Option<&'static dyn Transport>,
    /// `SO_RDS_TRANSPORT` pinned IB before bind.
    pinned_ib: bool,
    /// Bound to an RDMA address: the namespace listens while this holds
    /// (`transport::ib::net_get`).
    ib_net: bool,
    /// Every connection this socket has queued messages on, by key.
    conns: RBTree<ConnKey, Arc<Connection>>,
    /// The connection of the last send (upstream's `rs_conn`), reused while
    /// the destination address and TOS stay the same.
    route: Option<Arc<Connection>>,
    /// The RDMA device and port of the bound address, resolved on first XRC
    /// or MR use (an rdma_cm bind costs milliseconds) and again once it is removed.
    rdma_device: Option<(Arc<crate::device::RdmaDevice>, u32)>,
}

/// What the send side's spinlock protects.
#[derive(Default)]
struct TxState {
    /// Bytes of queued messages not yet acknowledged by the transport.
    bytes: usize,
    /// The destination port a send was refused for (congestion): poll reports
    /// POLLOUT only once it clears.
    cong_refused: Option<(Arc<CongMap>, u16)>,
    /// A sender or a poll for POLLOUT found no room since the last wake-up
    /// (TCP's `SOCK_NOSPACE`): only then does an acknowledgement wake the
    /// socket's waiters, so a receiver blocked in poll or recvmsg is not woken
    /// by the ack its message's sender piggybacks on it.
    space_wanted: bool,
}

/// The receive queue, its accounting and the socket's congestion state.
///
/// # Invariants
///
/// `sk` is `Some` from `attach` until `release` clears it; while it is, the
/// sock is valid (release clears it under this lock before the sock goes).
#[derive(Default)]
struct RecvQueue {
    sk: Option<SockPtr>,
    messages: Fifo<Incoming>,
    bytes: usize,
    /// The bound port's bit in `map` is set.
    congested: bool,
    /// The congestion map of the bound address, and the bound port.
    map: Option<(Arc<CongMap>, u16)>,
    /// `RDS_CONG_MONITOR`: ports (mod 64) refused, and refused ports reported
    /// as possibly uncongested but not yet read.
    cong_monitor: bool,
    cong_mask: u64,
    cong_notify: u64,
    /// `SO_RDS_MSG_RXPATH_LATENCY`: how many trace points, and which.
    rx_trace_count: u8,
    rx_trace_pos: [u8; 3],
    /// The bound IPv6 scope id, which IPv6 sources are reported with.
    bound_scope: u32,
    /// RDMA operation outcomes to report (`RDS_CMSG_RDMA_STATUS`): token, status.
    rdma_notes: Fifo<(u64, i32)>,
    /// `RRDS_CONN_MONITOR`: the mode, the link changes to report (room for
    /// `RRDS_CONN_EVENT_QUEUE_LEN`, made when the mode is set) and those
    /// lost to a full queue since the last one queued.
    conn_monitor: u32,
    conn_events: Fifo<bindings::rrds_conn_event>,
    conn_events_lost: u32,
    /// What the last message from a peer came through, which recvmsg polls
    /// while `SO_BUSY_POLL` is set (kept only then).
    busy_poller: Option<BusyPoller>,
}

/// One RDS socket.
///
/// Lock order: `SOCKETS` before `state` before `rx`/`tx`; `cong` monitors
/// before `rx`; `rx` before a congestion map's bits. `rx` and `tx` are
/// spinlocks because transports complete in atomic context.
#[pin_data]
pub(crate) struct RdsSock {
    net: NetRef,
    #[pin]
    state: Mutex<SockState>,
    #[pin]
    rx: SpinLock<RecvQueue>,
    #[pin]
    tx: SpinLock<TxState>,
    /// Blocked senders and receivers; woken with `poll` by [`RdsSock::wake_all`]
    /// when a message or notification arrives or send space frees up.
    #[pin]
    wait: CondVar,
    /// Poll and epoll: freed a grace period after the socket, so that a close
    /// never waits for one.
    poll: PollQueue,
    /// XRC registrations made through this socket, and those whose target
    /// went away with a final event still to read.
    #[pin]
    xrc: Mutex<KVec<Arc<xrc::Registration>>>,
    /// Events queued on those registrations, for poll and recvmsg.
    xrc_pending: Atomic<u32>,
    /// Kernel-side XRC initiators connected through this socket
    /// (`RRDS_XRC_CONNECT`), at most `xrc::MAX_INITIATORS_PER_SOCKET`.
    #[pin]
    xrc_initiators: Mutex<KVec<Arc<xrc::Initiator>>>,
    /// The MRs registered with `RDS_GET_MR`; taken before `state`, through
    /// [`RdsSock::with_mrs`]. Held while a registration connects its QP and
    /// while `RDS_FREE_MR` waits for invalidations (never across a REG_MR
    /// or a cookie write): the receive path never waits for it (`mr_used`).
    #[pin]
    mrs: Mutex<SocketMrs>,
    /// The keys of the USE_ONCE MRs in `mrs`, which the receive path marks used.
    use_once: Arc<mr::UseOnce>,
    /// The user task that last sent through the socket: one that can
    /// connect for its queued messages over iWARP when the task that last
    /// sent on their connection has gone (`conn::SendOwner::sender`).
    #[pin]
    last_sender: TaskSlot,
    /// Creation number, the socket's key in `SOCKETS`.
    id: u64,
}

impl RdsSock {
    /// Wakes blocked senders and receivers, and pollers.
    fn wake_all(&self) {
        self.wait.notify_all();
        self.poll.wake_all();
    }

    /// Runs `f` on the socket's MR table, locked, then frees the USE_ONCE
    /// MRs the receive path marked used meanwhile. Process context.
    fn with_mrs<R>(&self, f: impl FnOnce(&mut SocketMrs) -> R) -> R {
        self.run_on_mrs(self.mrs.lock(), f)
    }

    /// As [`Self::with_mrs`] if the table is free now; `None` if another
    /// call holds it (for seconds at most: a registration QP's connect, an
    /// invalidation wait).
    fn try_with_mrs<R>(&self, f: impl FnOnce(&mut SocketMrs) -> R) -> Option<R> {
        Some(self.run_on_mrs(self.mrs.try_lock()?, f))
    }

    fn run_on_mrs<'a, R>(
        &'a self,
        mut mrs: kernel::sync::MutexGuard<'a, SocketMrs>,
        f: impl FnOnce(&mut SocketMrs) -> R,
    ) -> R {
        let result = f(&mut mrs);
        self.unlock_mrs(mrs);
        result
    }

    /// Frees the MRs marked used and unlocks; takes the lock again for a key
    /// marked used meanwhile by a receive that found it held, unless someone
    /// else holds it now (their unlock frees it).
    fn unlock_mrs<'a>(&'a self, mut mrs: kernel::sync::MutexGuard<'a, SocketMrs>) {
        loop {
            mrs.free_used();
            drop(mrs);
            if !self.use_once.has_used() {
                return;
            }
            match self.mrs.try_lock() {
                Some(again) => mrs = again,
                None => return,
            }
        }
    }

    /// The receive path: the peer's RDMA to our MR `rkey` is done (RC
    /// ordering), so a USE_ONCE MR goes. Never waits for the MR table's
    /// lock: if it is held, its holder frees the MR when it unlocks.
    pub(crate) fn mr_used(&self, rkey: u32) {
        if !self.use_once.mark_used(rkey) {
            return;
        }
        if let Some(mrs) = self.mrs.try_lock() {
            self.unlock_mrs(mrs);
        }
    }

    fn endpoint(&self) -> Option<Endpoint> {
        self.state.lock().bound
    }

    pub(super) fn xrc_has_events(&self) -> bool {
        self.xrc_pending.load(Relaxed) != 0
    }

    /// The oldest XRC event of the first registration that has one.
    pub(super) fn xrc_take_event(&self, peek: bool) -> Option<bindings::rrds_xrc_event> {
        self.xrc.lock().iter().find_map(|r| r.pop(peek))
    }

    /// Sets the bound port's congestion bit from the queue's size (upstream's
    /// `rds_recv_rcvbuf_delta`): congested above half of SO_RCVBUF's value,
    /// clear again below a quarter. Returns true if it cleared.
    fn update_congestion(rx: &mut RecvQueue, sk: &Sock) -> bool {
        let Some((map, port)) = &rx.map else {
            return false;
        };
        let rcvbuf = sk.rcvbuf() / 2;
        if !rx.congested && rx.bytes > rcvbuf {
            rx.congested = true;
            map.set_congested(*port, true);
        } else if rx.congested && rx.bytes < rcvbuf / 2 {
            rx.congested = false;
            map.set_congested(*port, false);
            return true;
        }
        false
    }

    /// The connection to send to `faddr` with the socket's TOS on: the cached
    /// route, one the socket already uses, or a new use of the connection.
    fn route_to(&self, key: ConnKey, transport: &'static dyn Transport) -> Result<Arc<Connection>> {
        {
            let mut s = self.state.lock();
            if let Some(conn) = s.conns.get(&key).cloned() {
                let old = s.route.replace(conn.clone());
                drop(s);
                drop(old);
                return Ok(conn);
            }
        }
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let conn = conn::get(key, transport)?;
        let mut s = self.state.lock();
        if let Some(old) = s.conns.insert(node.into_node(key, conn.clone())) {
            // Another send of this socket added it meanwhile: one use is enough.
            drop(s);
            conn::put(old.to_key_value().1);
            s = self.state.lock();
        }
        let old = s.route.replace(conn.clone());
        drop(s);
        drop(old);
        Ok(conn)
    }
}

/// Takes `state` off the socket list.
fn forget_socket(state: &Arc<RdsSock>) {
    let removed = SOCKETS
        .lock()
        .as_mut()
        .and_then(|t| t.sockets.remove_node(&state.id));
    // Our own reference: the caller still holds one, so this one is not the last.
    drop(removed);
}

/// Namespace teardown: connections and congestion maps of a namespace go with it.
pub(crate) struct NetCleanup;

impl NetExit for NetCleanup {
    fn init(net: NetRef) -> Result {
        crate::knobs::net_init(net)
    }

    fn exit(net: NetRef) {
        conn::forget_net(net, |_| true, false);
        cong::forget_net(net);
        crate::knobs::net_exit(net);
        // Its PDs go with their last users; the MR pools' free MRs are not users.
        crate::device::net_exit(net);
        crate::mr::net_exit();
    }
}
