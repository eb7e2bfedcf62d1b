// SPDX-License-Identifier: GPL-2.0

//! The IB transport: RDS over RC QPs set up with rdma_cm, on InfiniBand,
//! RoCE (rxe) and iWARP (siw) alike, in every network namespace.
//!
//! Each connection owns an [`IbPath`] (path.rs): its rdma_cm state machine
//! and current link; ring.rs is the link's data path. A namespace listens
//! (upstream's ports 18634 for IPv4 and 16385 for IPv6) on each RDMA address
//! an rrds socket is bound to; when the last one closes, the listeners and
//! every IB connection of the namespace go. rdma_cm ids hold a reference on
//! their namespace, so this is also what lets a namespace with idle
//! connections be deleted. The initial namespace, which is never deleted,
//! also listens on each of its RDMA addresses from load to unload, as
//! upstream does on its wildcard: a host answers pings and accepts
//! connections with nothing bound (see [`HostListeners`]).

mod path;
mod proto;
mod ring;

use kernel::{
    prelude::*,
    sync::{
        aref::ARef,
        Arc,
        ArcBorrow, //
    },
    task::Task,
};

pub(crate) use path::{
    IbInfo,
    IbPath, //
};

use crate::{
    addr::Endpoint,
    device::RdmaDevice,
    ffi::{
        ib_device::DeviceRef,
        net::NetRef,
        rdma_cm::{
            CmEvent,
            CmHandler,
            CmId,
            CmIdRef,
            SockAddr, //
        },
        task_work::{
            run_in_task,
            TaskWork, //
        },
    },
    message::{
        Header,
        Message, //
    },
    stats::{
        self,
        Stat, //
    },
    transport::{
        connections,
        Conn,
        ConnKey,
        Path,
        Transport,
        Xmit, //
    },
};

/// Upstream's `RDS_TRANS_IB`, which `SO_RDS_TRANSPORT` reports.
pub(crate) const TRANS_IB: i32 = 0;

/// Completion tags of a path's work requests.
const TAG_SEND: u32 = 0;
const TAG_RECV: u32 = 1;
const TAG_ACK: u32 = 2;

/// Listen backlog (upstream: 128).
const BACKLOG: i32 = 128;
/// How long a listener whose device went waits for one to serve its
/// address again: 50 tries, 200 ms apart.
const RELISTEN_TRIES: u32 = 50;
const RELISTEN_INTERVAL_MS: i64 = 200;

pub(crate) struct Ib;

pub(crate) static IB: Ib = Ib;

impl Transport for Ib {
    fn name(&self) -> &'static [u8] {
        b"infiniband"
    }

    fn kind(&self) -> i32 {
        TRANS_IB
    }

    fn new_path(&self, key: &ConnKey) -> Result<Path> {
        Ok(Path(Some(IbPath::new(*key)?)))
    }

    fn can_send(&self, conn: &dyn Conn) -> bool {
        conn.path().ib().is_some_and(|p| p.ready())
    }

    fn xmit(&self, conn: &dyn Conn, header: &Header, message: &Arc<Message>) -> Xmit {
        match conn.path().ib() {
            Some(path) => path.xmit(header, message),
            None => Xmit::Blocked,
        }
    }
}

/// Every connection of the core's table (none before module init).
fn all_connections() -> KVec<Arc<dyn Conn>> {
    connections().map_or_else(KVec::new, |c| c.snapshot())
}

/// Forgets `net`'s IB connections: it has no listener left.
fn forget_links(net: NetRef) {
    if let Some(c) = connections() {
        c.forget_links(net);
    }
}

/// The rdma_cm handler of every rrds id.
pub(crate) struct Cm;

impl CmHandler for Cm {
    fn connect_request(id: CmId, event: &CmEvent<'_>) -> core::result::Result<(), CmId> {
        let v6 = !id.src_is_v4();
        let Some(peer) = proto::ConnectPrivate::decode(event.private_data(), v6) else {
            id.reject(&1i32.to_ne_bytes());
            return Err(id);
        };
        // The addresses the peer names must be those it connects from and to
        // (upstream takes them on trust): else it could open connections as
        // another host, or for another of the namespace's addresses, without
        // bound. Rejected like an incompatible request.
        if !peer.compatible() || id.addrs() != Some((peer.daddr, peer.saddr)) {
            id.reject(&1i32.to_ne_bytes());
            return Err(id);
        }
        let key = ConnKey {
            net: id.net(),
            laddr: peer.daddr,
            faddr: peer.saddr,
            tos: peer.tos,
            scope: 0,
        };
        let conn = match connections().map(|c| c.find_or_create(key, &IB)) {
            Some(Ok(conn)) => conn,
            _ => {
                id.reject(&1i32.to_ne_bytes());
                return Err(id);
            }
        };
        match conn.path().ib() {
            Some(path) => path.accept(id, &peer, event.rd_atomic()),
            None => {
                id.reject(&1i32.to_ne_bytes());
                Err(id)
            }
        }
    }

    fn event(id: &CmIdRef, event: &CmEvent<'_>) {
        let context = id.context().cast::<IbPath>();
        if context.is_null() {
            // A listener or an address probe: nothing to do.
            stats::inc(Stat::IbCmEventsUnowned);
            pr_debug!("rdma_cm event {} of an id without a path\n", event.number());
            return;
        }
        // SAFETY: A non-null context is the path that owns the id (set by `IbPath`);
        // the path outlives its ids (`IbPath` invariant).
        let path: Arc<IbPath> = unsafe { ArcBorrow::from_raw(context) }.into();
        path.cm_event(id, event);
    }
}

/// A listener on one local address of a namespace, and how many rrds
/// sockets are bound to that address. Listening on each bound address
/// rather than the wildcard keeps namespaces apart when RDMA devices are
/// shared between them (an iWARP listener takes the TCP port on every
/// device it covers).
struct Listener {
    net: NetRef,
    addr: [u8; 16],
    bound: usize,
    /// An address of the initial namespace, served whether or not a socket
    /// is bound to it (`serve_host_addresses`).
    host: bool,
    /// `None` while the address has no RDMA device (it was removed): rdma_cm
    /// waits for every id on a device to be destroyed before removing it.
    id: Option<CmId>,
    /// The last user task that bound a socket here: siw opens its listening
    /// TCP socket in the calling task's namespace, so a listener re-created
    /// for a namespace other than the workqueue's is made in this task.
    binder: Option<ARef<Task>>,
    /// A `Relisten` is queued on `binder`.
    relisten_queued: bool,
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static LISTENERS: Mutex<KVec<Listener>> = KVec::new();
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static ORPHANS: Mutex<KVec<Orphan>> = KVec::new();
}

/// A killed path whose last links wait for their port (`IbPath::kill`).
struct Orphan {
    path: Arc<IbPath>,
    /// Watchdog ticks left before its links go anyway: a port that stays
    /// down (a veth of a deleted namespace) must not keep the ids, and the
    /// namespace they hold, for ever.
    ticks_left: u32,
}

/// How long an orphan waits for its port, in watchdog ticks (seconds).
const ORPHAN_WAIT_TICKS: u32 = 60;

/// Initialises the listener and orphan tables. Call once, in module init.
pub(crate) fn init() {
    // SAFETY: Module init calls this exactly once, before any other use of `LISTENERS`.
    unsafe { LISTENERS.init() };
    // SAFETY: As above, for `ORPHANS`.
    unsafe { ORPHANS.init() };
    // SAFETY: As above, for `NOT_RDMA`.
    unsafe { NOT_RDMA.init() };
}

/// Frees the tables' buffers. Call once, at unload, after the last device.
pub(crate) fn release_tables() {
    crate::tables::free_table(&mut LISTENERS.lock());
    crate::tables::free_table(&mut ORPHANS.lock());
    crate::tables::free_table(&mut NOT_RDMA.lock().addrs);
}

/// Keeps a killed path whose last links wait for their port (`IbPath::kill`)
/// until the watchdog, the device's removal or `ORPHAN_WAIT_TICKS` tears
/// them down. If the table cannot grow, they go now, at the cost of the
/// port's GSI QP on rxe.
pub(crate) fn adopt_orphan(path: Arc<IbPath>) {
    let orphan = Orphan {
        path,
        ticks_left: ORPHAN_WAIT_TICKS,
    };
    let refused = {
        let mut table = ORPHANS.lock();
        match table.reserve(1, GFP_KERNEL) {
            // Within the capacity just reserved: cannot fail.
            Ok(()) => table.push_within_capacity(orphan).err().map(|e| e.0),
            Err(_) => Some(orphan),
        }
    };
    if let Some(orphan) = refused {
        orphan.path.tear_down_retired(false);
    }
}

/// Tears down the orphans' links whose port is up again or whose wait is
/// over (`removed`: a device is going, and with it every orphan's links,
/// as `IbPath::device_removed` does a live path's retired ones) and forgets
/// orphans left with none. The table stays locked throughout, so that a
/// device's removal never misses an orphan the watchdog is looking at.
/// Process context.
fn reap_orphans(removed: Option<DeviceRef>) {
    ORPHANS.lock().retain(|orphan| match removed {
        Some(device) => {
            orphan.path.device_removed(device);
            false
        }
        None if orphan.ticks_left == 0 => orphan.path.tear_down_retired(false),
        None => {
            orphan.ticks_left -= 1;
            orphan.path.tear_down_retired(true)
        }
    });
}

fn listen(net: NetRef, ep: &Endpoint) -> Result<CmId> {
    let id = CmId::create::<Cm>(net, core::ptr::null())?;
    let port = if ep.is_v4() {
        proto::PORT_V4
    } else {
        proto::PORT_V6
    };
    let mut raw = [0u8; 28];
    let len = Endpoint { port, ..*ep }.write_sockaddr(&mut raw);
    id.bind(&SockAddr::new(&raw[..len]))?;
    id.listen(BACKLOG)?;
    Ok(id)
}

/// A socket of `net` is bound to the RDMA address `ep`: listen on it if it
/// is the first. Process context.
pub(crate) fn net_get(net: NetRef, ep: &Endpoint) -> Result {
    let binder = ARef::from(&**kernel::current!());
    let mut listeners = LISTENERS.lock();
    if let Some(l) = listeners
        .iter_mut()
        .find(|l| l.net == net && l.addr == ep.addr)
    {
        if l.id.is_none() {
            // Its device went: try again, from the namespace's own task.
            l.id = listen(net, ep).ok();
        }
        l.bound += 1;
        l.binder = Some(binder);
        return Ok(());
    }
    let id = listen(net, ep)?;
    listeners.push(
        Listener {
            net,
            addr: ep.addr,
            bound: 1,
            host: false,
            id: Some(id),
            binder: Some(binder),
            relisten_queued: false,
        },
        GFP_KERNEL,
    )?;
    Ok(())
}

/// Ends a [`net_get`]. The last socket on an address closes its listener;
/// the last in the namespace takes every IB connection of it down too.
/// Process context.
pub(crate) fn net_put(net: NetRef, ep: &Endpoint) {
    let last_in_net = {
        let mut listeners = LISTENERS.lock();
        let Some(i) = listeners
            .iter()
            .position(|l| l.net == net && l.addr == ep.addr)
        else {
            return;
        };
        listeners[i].bound -= 1;
        if listeners[i].bound > 0 || listeners[i].host {
            return;
        }
        // Destroyed (waiting for its handler) before the sweep below, so no
        // connection of the namespace is created after it; and under the lock,
        // or a bind to the address meanwhile would find no listener and fail to
        // listen on the port this one still holds (EADDRINUSE). Listener
        // handlers never take the table lock.
        drop(listeners.remove(i));
        !listeners.iter().any(|l| l.net == net)
    };
    if last_in_net {
        forget_links(net);
    }
}

/// Set at unload (by [`HostListeners`]): the watchdog serves no more
/// addresses of the initial namespace.
static HOST_STOPPED: kernel::sync::atomic::Atomic<bool> = kernel::sync::atomic::Atomic::new(false);

/// Bumped when a device is added: an address of the initial namespace found
/// not to be an RDMA address may have become one.
static DEVICE_GENERATION: kernel::sync::atomic::Atomic<u32> = kernel::sync::atomic::Atomic::new(0);

/// The initial namespace's addresses last found not to be RDMA addresses,
/// the device generation they were probed at and the scans since: probed
/// again once a device is added, or after [`NOT_RDMA_SCANS`] (a device's
/// address can take a moment to reach its GID table after the device is
/// added).
struct NotRdma {
    addrs: KVec<[u8; 16]>,
    generation: u32,
    scans: u32,
}

/// Scans (seconds) an address found not to be an RDMA address is left alone.
const NOT_RDMA_SCANS: u32 = 10;

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the watchdog starts.
    unsafe(uninit) static NOT_RDMA: Mutex<NotRdma> = NotRdma {
        addrs: KVec::new(),
        generation: 0,
        scans: 0,
    };
}

/// Listens on every RDMA address of the initial namespace, and stops
/// serving those that went (the watchdog's tick: a new address is served
/// within about a second). Process context.
fn serve_host_addresses() {
    let net = NetRef::init_net();
    let Ok(addrs) = crate::ffi::net::addresses(net) else {
        return;
    };
    // Addresses gone: their listeners go unless a socket is bound there.
    let none_left = {
        let mut listeners = LISTENERS.lock();
        let had = listeners.iter().any(|l| l.net == net);
        for l in listeners
            .iter_mut()
            .filter(|l| l.host && !addrs.contains(&l.addr))
        {
            l.host = false;
        }
        listeners.retain(|l| l.net != net || l.host || l.bound > 0);
        had && !listeners.iter().any(|l| l.net == net)
    };
    if none_left {
        forget_links(net);
    }
    let generation = DEVICE_GENERATION.load(kernel::sync::atomic::Relaxed);
    {
        let mut not_rdma = NOT_RDMA.lock();
        not_rdma.scans += 1;
        if not_rdma.generation != generation || not_rdma.scans >= NOT_RDMA_SCANS {
            not_rdma.addrs.clear();
            not_rdma.generation = generation;
            not_rdma.scans = 0;
        }
    }
    for addr in addrs.iter() {
        let served = LISTENERS
            .lock()
            .iter()
            .any(|l| l.net == net && l.addr == *addr && l.host && l.id.is_some());
        if served || NOT_RDMA.lock().addrs.contains(addr) {
            continue;
        }
        let ep = Endpoint {
            addr: *addr,
            port: 0,
            scope: 0,
        };
        match is_rdma_address(net, &ep) {
            Ok(true) => {}
            Ok(false) => {
                let mut not_rdma = NOT_RDMA.lock();
                if not_rdma.addrs.len() < crate::ffi::net::MAX_ADDRESSES {
                    let _ = not_rdma.addrs.push(*addr, GFP_KERNEL);
                }
                continue;
            }
            Err(_) => continue,
        }
        let mut listeners = LISTENERS.lock();
        // Under the lock: `HostListeners::drop` takes it after setting the flag.
        if HOST_STOPPED.load(kernel::sync::atomic::Relaxed) {
            return;
        }
        if let Some(l) = listeners
            .iter_mut()
            .find(|l| l.net == net && l.addr == *addr)
        {
            l.host = true;
            if l.id.is_none() {
                l.id = listen(net, &ep).ok();
            }
            continue;
        }
        // Tried again next tick if the port is taken or memory short.
        let Ok(id) = listen(net, &ep) else {
            continue;
        };
        let _ = listeners.push(
            Listener {
                net,
                addr: *addr,
                bound: 0,
                host: true,
                id: Some(id),
                binder: None,
                relisten_queued: false,
            },
            GFP_KERNEL,
        );
    }
}

/// The initial namespace's listeners from load to unload: dropping this
/// (before the namespaces' cleanup at unload) stops serving its addresses
/// and closes the listeners no socket uses.
pub(crate) struct HostListeners(());

impl HostListeners {
    pub(crate) fn start() -> Self {
        HOST_STOPPED.store(false, kernel::sync::atomic::Relaxed);
        Self(())
    }
}

impl Drop for HostListeners {
    fn drop(&mut self) {
        let mut listeners = LISTENERS.lock();
        HOST_STOPPED.store(true, kernel::sync::atomic::Relaxed);
        for l in listeners.iter_mut() {
            l.host = false;
        }
        // Destroyed under the lock: listener handlers never take it.
        listeners.retain(|l| l.bound > 0);
    }
}

/// Whether `addr` is an address of an RDMA device in `net` (upstream's
/// `rds_ib_laddr_check`, without its refusal of iWARP). Fails only for want
/// of memory: any other failure to bind the probe means it is not.
pub(crate) fn is_rdma_address(net: NetRef, addr: &Endpoint) -> Result<bool> {
    match bound_probe(net, addr) {
        Ok(id) => Ok(id.device().is_some()),
        Err(e) if e == ENOMEM => Err(e),
        Err(_) => Ok(false),
    }
}

/// The RDMA device and port of the local address `addr` in `net`.
pub(crate) fn device_of(net: NetRef, addr: &Endpoint) -> Result<(Arc<RdmaDevice>, u32)> {
    let id = bound_probe(net, addr)?;
    let device = id.device().and_then(crate::device::find).ok_or(ENODEV)?;
    Ok((device, id.port()))
}

/// An rdma_cm id bound to `addr` (any port) in `net`: rdma_cm resolves the
/// address to its device and port.
fn bound_probe(net: NetRef, addr: &Endpoint) -> Result<CmId> {
    let id = CmId::create::<Cm>(net, core::ptr::null())?;
    let mut raw = [0u8; 28];
    let len = Endpoint { port: 0, ..*addr }.write_sockaddr(&mut raw);
    id.bind(&SockAddr::new(&raw[..len]))?;
    Ok(id)
}

/// Seconds without a send completing, sends outstanding, before a link is
/// declared dead (the transport's own retries give up after a few seconds).
const STALL_SECONDS: u32 = 8;

static WATCHDOG_STOP: kernel::sync::atomic::Atomic<bool> = kernel::sync::atomic::Atomic::new(false);

/// The link watchdog, a loop on the module's workqueue; dropping this stops
/// it (the workqueue's destruction then waits at most a tick for it).
pub(crate) struct Watchdog(());

impl Watchdog {
    pub(crate) fn start() -> Result<Self> {
        WATCHDOG_STOP.store(false, kernel::sync::atomic::Relaxed);
        crate::ffi::workqueue::queue().try_spawn(GFP_KERNEL, watch)?;
        Ok(Self(()))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        WATCHDOG_STOP.store(true, kernel::sync::atomic::Relaxed);
    }
}

fn watch() {
    while !WATCHDOG_STOP.load(kernel::sync::atomic::Relaxed) {
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1000));
        for c in all_connections() {
            if let Some(path) = c.path().ib() {
                path.watchdog_tick(STALL_SECONDS);
            } else if c.has_unsent() && c.transport().can_send(&*c) {
                // Loopback: a message the receiver could not take (full, or no memory).
                c.xmit();
            }
        }
        reap_orphans(None);
        close_stray_listeners();
        if !HOST_STOPPED.load(kernel::sync::atomic::Relaxed) {
            serve_host_addresses();
        }
    }
}

/// Closes listeners bound to a device rrds no longer has. `device_removed`
/// closes those it finds, but a listener made while the device was being
/// removed (`relisten`, or a bind, after rrds's `remove` callback and before
/// rdma_cm's own) is bound to it too: rdma_cm only reports
/// `DEVICE_REMOVAL` to it and then waits, holding `ib_unregister_device`,
/// until the id is destroyed. Called by the watchdog, so such a removal
/// waits at most a tick. A listener bound to a device whose `add` callback
/// has not run yet may go too: `relisten` makes it again after that `add`.
fn close_stray_listeners() {
    let closed = close_listeners(|id| {
        id.device()
            .is_some_and(|device| !crate::device::is_known(device))
    });
    stats::add(Stat::IbStrayListenersClosed, closed as u64);
}

/// debugfs `rrds/ib_links`: one line per IB connection, for diagnosis
/// (Documentation/admin-guide.rst).
pub(crate) fn show_links(f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    use crate::addr::AddrDisplay;
    for c in all_connections() {
        let Some(path) = c.path().ib() else {
            continue;
        };
        let s = c.snapshot();
        f.write_fmt(fmt!(
            "{} -> {} tos {} tx_seq {} rx_seq {} queued {} sent {}",
            AddrDisplay(&c.key().laddr),
            AddrDisplay(&c.key().faddr),
            c.key().tos,
            s.next_tx_seq,
            s.next_rx_seq,
            s.queued,
            s.sent,
        ))?;
        path.show(f)?;
        writeln!(f)?;
    }
    Ok(())
}

/// The congestion map of local address `laddr` in `net` changed: send it,
/// as `message` builds it, to the peer of every IB connection from that
/// address. Built once, and only if a connection needs it. Process context
/// (the map's work item).
pub(crate) fn cong_changed(
    net: NetRef,
    laddr: &[u8; 16],
    mut message: impl FnMut() -> Result<Arc<Message>>,
) {
    let mut wire = None;
    for c in all_connections() {
        let Some(path) = c.path().ib() else {
            continue;
        };
        if c.key().net != net || c.key().laddr != *laddr {
            continue;
        }
        if wire.is_none() {
            wire = message().ok();
        }
        if let Some(w) = &wire {
            path.send_cong_map(w.clone());
        }
    }
}

/// The device `raw` is being removed: connections over it go down first,
/// and listeners on it are closed (rdma_cm cannot remove a device while an
/// id uses it); they listen again once an RDMA device serves the address.
/// Process context (the ib_client `remove` callback).
pub(crate) fn device_removed(device: DeviceRef) {
    for c in all_connections() {
        if let Some(path) = c.path().ib() {
            path.device_removed(device);
        }
    }
    reap_orphans(Some(device));
    close_listeners(|id| id.device() == Some(device));
}

/// Closes the listeners whose id `doomed` picks (they listen again once
/// `relisten` finds a device for their address); returns how many.
fn close_listeners(doomed: impl Fn(&CmId) -> bool) -> usize {
    let mut closed = KVec::new();
    let mut count = 0;
    {
        let mut listeners = LISTENERS.lock();
        for l in listeners.iter_mut() {
            if l.id.as_ref().is_some_and(&doomed) {
                if let Some(id) = l.id.take() {
                    count += 1;
                    // Destroyed below, outside the lock; if the list cannot grow, push
                    // destroys it here, which is safe too (listener handlers never take
                    // the table lock).
                    let _ = closed.push(id, GFP_KERNEL);
                }
            }
        }
    }
    drop(closed);
    count
}

/// A device appeared: addresses whose listener was closed may be served
/// again. Its addresses show up asynchronously (rxe fills its GID table from
/// netdev events), so this retries for a while from the workqueue.
pub(crate) fn device_added() {
    DEVICE_GENERATION.fetch_add(1, kernel::sync::atomic::Relaxed);
    let _ = crate::ffi::workqueue::queue().try_spawn(GFP_KERNEL, relisten);
}

fn relisten() {
    for _ in 0..RELISTEN_TRIES {
        let mut missing = false;
        for l in LISTENERS.lock().iter_mut().filter(|l| l.id.is_none()) {
            let ep = Endpoint {
                addr: l.addr,
                port: 0,
                scope: 0,
            };
            match listen(l.net, &ep) {
                Ok(id) => l.id = Some(id),
                Err(_) => {
                    missing = true;
                    // siw: the address exists only in the listener's namespace.
                    if let Some(task) = l.binder.as_ref().filter(|_| !l.relisten_queued) {
                        l.relisten_queued = run_in_task(task, Relisten { net: l.net, ep }).is_ok();
                    }
                }
            }
        }
        if !missing {
            return;
        }
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(RELISTEN_INTERVAL_MS));
    }
}

/// A listener re-created in a task of its namespace (see `Listener::binder`).
struct Relisten {
    net: NetRef,
    ep: Endpoint,
}

impl TaskWork for Relisten {
    fn run(self) {
        let mut listeners = LISTENERS.lock();
        if let Some(l) = listeners
            .iter_mut()
            .find(|l| l.net == self.net && l.addr == self.ep.addr)
        {
            l.relisten_queued = false;
            if l.id.is_none() {
                l.id = listen(self.net, &self.ep).ok();
            }
        }
    }

    fn cancel(self) {
        // The next bind in the namespace listens again (`net_get`).
        if let Some(l) = LISTENERS
            .lock()
            .iter_mut()
            .find(|l| l.net == self.net && l.addr == self.ep.addr)
        {
            l.relisten_queued = false;
        }
    }
}
