// SPDX-License-Identifier: GPL-2.0

//! The RDS socket family (PF_RDS): sockets, the bind table, send and receive.
//!
//! ABI and errnos follow upstream net/rds (af_rds.c, bind.c, send.c, recv.c);
//! see Documentation/userspace-api.rst for what is implemented and where rrds
//! deliberately differs.

pub(crate) mod bind;
mod info;
mod memory;
mod options;
pub(crate) mod recv;
mod send;

use kernel::{
    new_mutex, new_spinlock,
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
        poll::PollCondVar,
        Arc,
        ArcBorrow,
        Mutex,
        SpinLock, //
    },
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
    // A broken wire encoder must not get as far as a socket.
    crate::message::self_test()?;
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
pub(crate) fn init() {
    bind::init();
    crate::incoming::set_bind_table(&recv::BoundSockets);
    // SAFETY: Module init calls this exactly once, before any other use of `SOCKETS`.
    unsafe { SOCKETS.init() };
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
    /// Woken when a message or notification arrives or send space frees up.
    #[pin]
    wait: PollCondVar,
    /// XRC registrations made through this socket, and those whose target
    /// went away with a final event still to read.
    #[pin]
    xrc: Mutex<KVec<Arc<xrc::Registration>>>,
    /// Events queued on those registrations, for poll and recvmsg.
    xrc_pending: Atomic<u32>,
    /// The MRs registered with `RDS_GET_MR`; taken before `state`, through
    /// [`RdsSock::with_mrs`]. Held across user memory access and device
    /// waits: the receive path never waits for it (`mr_used`).
    #[pin]
    mrs: Mutex<SocketMrs>,
    /// The keys of the USE_ONCE MRs in `mrs`, which the receive path marks used.
    use_once: Arc<mr::UseOnce>,
    /// Creation number, the socket's key in `SOCKETS`.
    id: u64,
}

impl RdsSock {
    /// Runs `f` on the socket's MR table, locked, then frees the USE_ONCE
    /// MRs the receive path marked used meanwhile. Process context.
    fn with_mrs<R>(&self, f: impl FnOnce(&mut SocketMrs) -> R) -> R {
        let mut mrs = self.mrs.lock();
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

impl SocketFamily for RdsFamily {
    type State = RdsSock;

    fn tables() -> &'static FamilyTables<Self> {
        &TABLES
    }

    fn create(net: NetRef, sock_type: i32, protocol: i32) -> Result<Arc<RdsSock>> {
        if sock_type != bindings::sock_type_SOCK_SEQPACKET as i32 || protocol != 0 {
            return Err(errno::esocktnosupport());
        }
        let mrs = SocketMrs::new()?;
        let use_once = mrs.use_once();
        let id = {
            let mut guard = SOCKETS.lock();
            let table = guard.get_or_insert_with(|| SocketTable {
                sockets: RBTree::new(),
                next_id: 0,
            });
            table.next_id += 1;
            table.next_id
        };
        let sock = Arc::pin_init(
            try_pin_init!(RdsSock {
                net,
                state <- new_mutex!(SockState::default()),
                rx <- new_spinlock!(RecvQueue::default()),
                tx <- new_spinlock!(TxState::default()),
                wait <- kernel::new_poll_condvar!("rrds_sock_wait"),
                xrc <- new_mutex!(KVec::new()),
                xrc_pending: Atomic::new(0),
                mrs <- new_mutex!(mrs),
                use_once,
                id,
            }),
            GFP_KERNEL,
        )?;
        let node = RBTreeNode::new(id, sock.clone(), GFP_KERNEL)?;
        let old = SOCKETS
            .lock()
            .get_or_insert_with(|| SocketTable {
                sockets: RBTree::new(),
                next_id: 0,
            })
            .sockets
            .insert(node);
        // Unreachable: numbers are never reused.
        drop(old);
        Ok(sock)
    }

    fn abandon(state: Arc<RdsSock>) {
        forget_socket(&state);
    }

    fn attach(state: &RdsSock, sk: SockPtr) {
        // INVARIANT: `sk` is the socket's sock, valid until release clears it.
        state.rx.lock().sk = Some(sk);
    }

    fn release(state: Arc<RdsSock>, _sk: &Sock) {
        forget_socket(&state);
        cong::remove_monitor(&*state);
        conn::remove_monitor(&*state);
        // XRC registrations made through the socket end with it.
        let registrations = core::mem::take(&mut *state.xrc.lock());
        for r in registrations.iter() {
            r.detach();
            r.discard();
        }
        drop(registrations);
        // Every MR is freed and invalidated; the last socket of the namespace
        // on a device takes its registration QP down.
        state.with_mrs(|mrs| mrs.release());
        let refused = state.tx.lock().cong_refused.take();
        drop(refused);
        let (bound, conns, route, ib_net) = {
            let mut s = state.state.lock();
            (
                s.bound.take(),
                core::mem::take(&mut s.conns),
                s.route.take(),
                core::mem::take(&mut s.ib_net),
            )
        };
        drop(route);
        // Unbind: no new deliveries after this.
        if let Some(ep) = bound {
            bind::remove(state.net, &ep);
        }
        // Messages still queued for sending are dropped, as upstream's rds_release does.
        for (_, conn) in conns.iter() {
            conn.cancel(Some(&*state), |_| true);
        }
        let mut conns = conns;
        while let Some(key) = conns.cursor_front().map(|c| *c.current().0) {
            let Some(conn) = conns.remove(&key) else {
                break;
            };
            conn::put(conn);
        }
        if let (true, Some(ep)) = (ib_net, bound) {
            ib::net_put(state.net, &ep);
        }
        let (queued, map, cleared) = {
            let mut rx = state.rx.lock();
            // INVARIANT: from here on nothing reaches the sock through the state.
            rx.sk = None;
            let cleared = core::mem::take(&mut rx.congested);
            if cleared {
                if let Some((map, port)) = &rx.map {
                    map.set_congested(*port, false);
                }
            }
            (core::mem::take(&mut rx.messages), rx.map.take(), cleared)
        };
        // Only a port that was congested has anything to tell monitors.
        if cleared {
            cong::local_port_cleared(state.net);
        }
        if let Some((map, _)) = map {
            cong::put(map);
        }
        drop(queued);
        // The state's last reference usually goes here, and with it the
        // socket's poll wait queue, whose drop waits an RCU grace period for
        // epoll to let go (`PollCondVar`): on the module's workqueue, where
        // the waits of many closes overlap, not in close(2) (65,534 closes
        // in a row took one grace period each).
        let _ = crate::ffi::workqueue::queue().try_spawn(GFP_KERNEL, move || drop(state));
    }

    fn bind(state: ArcBorrow<'_, RdsSock>, _sk: &Sock, raw: &[u8]) -> Result {
        let mut ep = Endpoint::parse(raw, Purpose::Bind)?;
        let mut s = state.state.lock();
        if s.bound.is_some() {
            return Err(EINVAL);
        }
        // Loopback addresses use the loopback transport, unless IB is pinned
        // (then, as upstream, an address IB cannot serve is ENOPROTOOPT).
        let use_ib = s.pinned_ib || !ep.is_loopback();
        if use_ib && !ib::is_rdma_address(state.net, &ep)? {
            return Err(if s.pinned_ib {
                errno::enoprotoopt()
            } else {
                errno::eaddrnotavail()
            });
        }
        let map = cong::get(state.net, ep.addr, cong::Side::Local)?;
        ep.port = match bind::add(state, ep) {
            Ok(port) => port,
            Err(e) => {
                cong::put(map);
                return Err(e);
            }
        };
        if use_ib {
            if let Err(e) = ib::net_get(state.net, &ep) {
                bind::remove(state.net, &ep);
                cong::put(map);
                return Err(e);
            }
            s.ib_net = true;
            s.transport = Some(&ib::IB);
        } else {
            s.transport = Some(&LOOPBACK);
        }
        s.bound = Some(ep);
        let mut rx = state.rx.lock();
        rx.map = Some((map, ep.port));
        rx.bound_scope = ep.scope;
        Ok(())
    }

    fn connect(state: &RdsSock, _sk: &Sock, raw: &[u8]) -> Result {
        let ep = Endpoint::parse(raw, Purpose::Connect)?;
        state.state.lock().peer = Some(ep);
        Ok(())
    }

    fn getname(state: &RdsSock, _sk: &Sock, peer: bool, out: &mut [u8; 28]) -> Result<usize> {
        let s = state.state.lock();
        if peer {
            return Ok(s.peer.ok_or_else(errno::enotconn)?.write_sockaddr(out));
        }
        Ok(match (s.bound, s.peer) {
            (Some(ep), _) => ep.write_sockaddr(out),
            // Unbound: an all-zero address of the peer's family, as upstream.
            (None, Some(peer)) => {
                let len = peer.write_sockaddr(out);
                out[2..].fill(0);
                len
            }
            (None, None) => {
                *out = [0; 28];
                16
            }
        })
    }

    fn poll(state: &RdsSock, sk: &Sock, req: &PollRequest<'_>) -> u32 {
        req.wait_on(&state.wait);
        let mut mask = 0;
        {
            let rx = state.rx.lock();
            if !rx.messages.is_empty()
                || rx.cong_notify != 0
                || !rx.rdma_notes.is_empty()
                || !rx.conn_events.is_empty()
                || state.xrc_has_events()
            {
                mask |= poll_bits::IN | poll_bits::RDNORM;
            }
        }
        // A socket refused for congestion also waits for the port to clear.
        // Queued on the map's wait queue with no lock held: epoll's queueing
        // callback allocates, and may sleep.
        let refused = state.tx.lock().cong_refused.clone();
        let mut refused_clear = match &refused {
            Some((map, port)) => {
                req.wait_on(map.wait_queue());
                !map.is_congested(*port)
            }
            None => true,
        };
        let mut tx = state.tx.lock();
        // A send refused for another port meanwhile: not cleared yet.
        let same = match (&tx.cong_refused, &refused) {
            (Some((now, p)), Some((then, q))) => Arc::ptr_eq(now, then) && p == q,
            (now, _) => now.is_none(),
        };
        refused_clear &= same;
        let cleared = if refused_clear {
            tx.cong_refused.take()
        } else {
            None
        };
        if tx.bytes >= sk.sndbuf() / 2 {
            tx.space_wanted = true;
        } else if refused_clear {
            mask |= poll_bits::OUT | poll_bits::WRNORM;
        }
        drop(tx);
        drop(cleared);
        drop(refused);
        mask
    }

    fn ioctl(state: &RdsSock, _sk: &Sock, cmd: u32, arg: usize) -> Result<i32> {
        match cmd {
            bindings::SIOCRDSGETTOS => {
                let tos = state.state.lock().tos;
                UserSlice::new(UserPtr::from_addr(arg), 1)
                    .writer()
                    .write(&tos)?;
                Ok(0)
            }
            bindings::SIOCRDSSETTOS => {
                let mut tos = 0u8;
                UserSlice::new(UserPtr::from_addr(arg), 1)
                    .reader()
                    .read_slice(core::slice::from_mut(&mut tos))?;
                let mut s = state.state.lock();
                // Only IB maps a TOS (1:1, as upstream); loopback and unbound
                // sockets answer ENOIOCTLCMD (ENOTTY to the caller), as upstream.
                if s.transport.is_none_or(|t| t.kind() != ib::TRANS_IB) {
                    return Err(ENOIOCTLCMD);
                }
                // Once set, or once the socket has sent, the TOS is fixed.
                if s.tos != 0 || s.route.is_some() {
                    return Err(EINVAL);
                }
                s.tos = tos;
                Ok(0)
            }
            _ => Err(ENOIOCTLCMD),
        }
    }

    fn setsockopt(
        state: ArcBorrow<'_, RdsSock>,
        sk: &Sock,
        level: i32,
        name: i32,
        value: SockOptValue,
    ) -> Result {
        if level != SOL_RDS {
            return Err(errno::enoprotoopt());
        }
        sk.locked(|| options::set_option(state, sk, name as u32, value))
    }

    fn getsockopt(
        state: ArcBorrow<'_, RdsSock>,
        _sk: &Sock,
        level: i32,
        name: i32,
        value: UserSlice,
        len: usize,
    ) -> Result<GetOptResult> {
        if level != SOL_RDS {
            return Err(errno::enoprotoopt());
        }
        let name = name as u32;
        if (bindings::RDS_INFO_FIRST..=bindings::RDS_INFO_LAST).contains(&name) {
            return info::get(state.net, name, value, len);
        }
        match name {
            bindings::RRDS_XRC_CREATE => return options::xrc_create(state, value, len),
            bindings::RRDS_INFO_XRC_TARGETS => return info::get(state.net, name, value, len),
            _ => {}
        }
        let v: i32 = match name {
            bindings::RDS_RECVERR => i32::from(state.state.lock().recverr),
            bindings::RRDS_CONN_MONITOR => state.rx.lock().conn_monitor as i32,
            bindings::SO_RDS_TRANSPORT => state
                .state
                .lock()
                .transport
                .map_or(TRANS_NONE, |t| t.kind()),
            _ => return Err(errno::enoprotoopt()),
        };
        if len < 4 {
            return Err(EINVAL);
        }
        value.writer().write(&v)?;
        Ok(GetOptResult { ret: 0, len: 4 })
    }

    fn sendmsg(
        state: ArcBorrow<'_, RdsSock>,
        sk: &Sock,
        msg: &mut MsgHdr,
        len: usize,
    ) -> Result<usize> {
        send::sendmsg(state, sk, msg, len)
    }

    fn recvmsg(
        state: &RdsSock,
        sk: &Sock,
        msg: &mut MsgHdr,
        len: usize,
        flags: i32,
    ) -> Result<usize> {
        recv::recvmsg(state, sk, msg, len, flags as u32)
    }
}

impl conn::SendOwner for RdsSock {
    /// `len` bytes of this socket's are acknowledged or dropped: its send
    /// buffer has room for them again.
    fn send_completed(&self, len: usize) {
        let mut tx = self.tx.lock();
        let was = tx.bytes;
        tx.bytes = tx.bytes.saturating_sub(len);
        if was != 0 && tx.bytes == 0 {
            crate::stats::inc(crate::stats::Stat::SendQueueEmpty);
        }
        let wake = core::mem::take(&mut tx.space_wanted);
        drop(tx);
        if wake {
            self.wait.notify_all();
        }
    }
}

impl crate::rdma::RdmaStatusSink for RdsSock {
    /// Queues the note for recvmsg. Lost only if no memory can be had for
    /// the queue, which is counted.
    fn rdma_status(&self, token: u64, status: i32) {
        let queued = self
            .rx
            .lock()
            .rdma_notes
            .push_back((token, status), GFP_ATOMIC);
        if queued.is_err() {
            crate::stats::inc(crate::stats::Stat::RdmaNotifyLost);
        }
        self.wait.notify_all();
    }
}

impl cong::CongMonitor for RdsSock {
    fn net(&self) -> NetRef {
        self.net
    }

    /// `RDS_CONG_MONITOR`: reports every port this socket was refused for.
    fn cong_notify_all_refused(&self) {
        let mut rx = self.rx.lock();
        if rx.cong_mask == 0 {
            return;
        }
        rx.cong_notify |= rx.cong_mask;
        rx.cong_mask = 0;
        drop(rx);
        self.wait.notify_all();
    }
}

impl conn::ConnMonitor for RdsSock {
    fn net(&self) -> NetRef {
        self.net
    }

    /// Queues the change as an `rrds_conn_event` if the socket asked for
    /// it: all of the namespace's, or those of connections it sent on.
    fn link_changed(&self, key: &ConnKey, change: LinkChange) {
        let mode = self.rx.lock().conn_monitor;
        if mode == bindings::RRDS_CONN_MONITOR_OFF
            || (mode == bindings::RRDS_CONN_MONITOR_USED
                && self.state.lock().conns.get(key).is_none())
        {
            return;
        }
        let (event, reason) = match change {
            LinkChange::Up => (bindings::RRDS_CONN_EV_UP, 0),
            LinkChange::Down { reason, retransmit } => (
                if retransmit {
                    bindings::RRDS_CONN_EV_RESET
                } else {
                    bindings::RRDS_CONN_EV_DOWN
                },
                reason as u32,
            ),
        };
        let mut record = bindings::rrds_conn_event {
            laddr: key.laddr,
            faddr: key.faddr,
            event,
            reason,
            flags: 0,
            lost: 0,
            tos: key.tos,
            pad: [0; 7],
        };
        let mut rx = self.rx.lock();
        if rx.conn_monitor == bindings::RRDS_CONN_MONITOR_OFF {
            return;
        }
        if rx.conn_events.len() >= bindings::RRDS_CONN_EVENT_QUEUE_LEN as usize
            || !rx.conn_events.has_room()
        {
            rx.conn_events_lost = rx.conn_events_lost.saturating_add(1);
            crate::stats::inc(crate::stats::Stat::ConnEventsLost);
            return;
        }
        record.lost = core::mem::take(&mut rx.conn_events_lost);
        if record.lost > 0 {
            record.flags |= bindings::RRDS_CONN_EVENT_OVERFLOW;
        }
        // There is room: nothing is allocated.
        let _ = rx.conn_events.push_back(record, GFP_ATOMIC);
        drop(rx);
        self.wait.notify_all();
    }

    fn changes_lost(&self, n: u32) {
        let mut rx = self.rx.lock();
        if rx.conn_monitor != bindings::RRDS_CONN_MONITOR_OFF {
            rx.conn_events_lost = rx.conn_events_lost.saturating_add(n);
        }
    }
}

impl xrc::EventSink for RdsSock {
    fn net(&self) -> NetRef {
        self.net
    }

    fn event_queued(&self) {
        self.xrc_pending.add(1, Relaxed);
        self.wait.notify_all();
    }

    fn events_taken(&self, n: usize) {
        self.xrc_pending.fetch_sub(n as u32, Relaxed);
    }

    fn adopt(&self, registration: &Arc<xrc::Registration>) -> Result {
        self.xrc.lock().push(registration.clone(), GFP_KERNEL)?;
        Ok(())
    }

    fn forget(&self, registration: &Arc<xrc::Registration>) {
        // Empty first: the pending count never covers a registration that
        // recvmsg cannot find on the list.
        registration.discard();
        let gone = {
            let mut list = self.xrc.lock();
            list.iter()
                .position(|r| Arc::ptr_eq(r, registration))
                .and_then(|i| list.remove(i).ok())
        };
        drop(gone);
    }
}
