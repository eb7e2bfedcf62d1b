// SPDX-License-Identifier: GPL-2.0

//! The IB transport's listeners: one per RDMA address a namespace's rrds
//! sockets are bound to, and, from load to unload, one per RDMA address of
//! the initial namespace (`HostListeners`); closed while their device is
//! being removed and made again once a device serves the address.

use kernel::rbtree::{
    Cursor,
    RBTree, //
};

use super::*;

/// Where a listener listens: a local address of a namespace. Ordered by
/// namespace first, so a namespace's listeners are one range of the table.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ListenerKey {
    net: NetRef,
    addr: [u8; 16],
}

impl ListenerKey {
    fn new(net: NetRef, ep: &Endpoint) -> Self {
        Self { net, addr: ep.addr }
    }

    /// No address of `net` orders before this key.
    fn first_of(net: NetRef) -> Self {
        Self { net, addr: [0; 16] }
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint {
            addr: self.addr,
            port: 0,
            scope: 0,
        }
    }
}

/// A listener on one local address of a namespace, and how many rrds
/// sockets are bound to that address. Listening on each bound address
/// rather than the wildcard keeps namespaces apart when RDMA devices are
/// shared between them (an iWARP listener takes the TCP port on every
/// device it covers).
struct Listener {
    bound: usize,
    /// An address of the initial namespace, served whether or not a socket
    /// is bound to it (`serve_host_addresses`).
    host: bool,
    /// `None` while the address has no RDMA device (it was removed): rdma_cm
    /// waits for every id on a device to be destroyed before removing it.
    id: Option<CmId<Cm>>,
    /// The last user task that bound a socket here: siw opens its listening
    /// TCP socket in the calling task's namespace, so a listener re-created
    /// for a namespace other than the workqueue's is made in this task.
    binder: Option<ARef<Task>>,
    /// A `Relisten` is queued on `binder`.
    relisten_queued: bool,
}

/// The listeners, by namespace and address: a bind, a close and the
/// watchdog's tick find theirs without a scan of every namespace's.
type Listeners = RBTree<ListenerKey, Listener>;

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    // `None` until the first listener (`RBTree::new` is not const).
    unsafe(uninit) static LISTENERS: Mutex<Option<Listeners>> = None;
}

/// Whether `net` has a listener.
fn has_listener_in(listeners: &Listeners, net: NetRef) -> bool {
    listeners
        .cursor_lower_bound(&ListenerKey::first_of(net))
        .is_some_and(|c: Cursor<'_, _, _>| c.current().0.net == net)
}

/// Removes the listeners of `net` (of every namespace: `None`) for which
/// `keep` returns false; destroyed under the lock, which listener handlers
/// never take.
fn retain(
    listeners: &mut Listeners,
    net: Option<NetRef>,
    keep: impl FnMut(&ListenerKey, &mut Listener) -> bool,
) {
    let first = net.map(ListenerKey::first_of);
    let within = |key: &ListenerKey| net.is_none_or(|net| key.net == net);
    crate::tables::retain_range(listeners, first.as_ref(), within, keep);
}

/// Initialises the listener tables. Call once, in module init.
pub(super) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&LISTENERS);
    m.init_lock(&NOT_RDMA);
}

/// Frees the listener tables' buffers. Call once, at unload, after the last device.
pub(super) fn release() {
    let listeners = LISTENERS.lock().take();
    drop(listeners);
    crate::tables::free_table(&mut NOT_RDMA.lock().addrs);
}

fn listen(net: NetRef, ep: &Endpoint) -> Result<CmId<Cm>> {
    let id = CmId::<Cm>::create(net, None)?;
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
    let key = ListenerKey::new(net, ep);
    let mut guard = LISTENERS.lock();
    let listeners = guard.get_or_insert_with(RBTree::new);
    if let Some(l) = listeners.get_mut(&key) {
        if l.id.is_none() {
            // Its device went: try again, from the namespace's own task.
            l.id = listen(net, ep).ok();
        }
        l.bound += 1;
        l.binder = Some(binder);
        return Ok(());
    }
    let id = listen(net, ep)?;
    listeners.try_create_and_insert(
        key,
        Listener {
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
    let key = ListenerKey::new(net, ep);
    let last_in_net = {
        let mut guard = LISTENERS.lock();
        let Some(listeners) = guard.as_mut() else {
            return;
        };
        let Some(l) = listeners.get_mut(&key) else {
            return;
        };
        l.bound -= 1;
        if l.bound > 0 || l.host {
            return;
        }
        // Destroyed (waiting for its handler) before the sweep below, so no
        // connection of the namespace is created after it; and under the lock,
        // or a bind to the address meanwhile would find no listener and fail to
        // listen on the port this one still holds (EADDRINUSE). Listener
        // handlers never take the table lock.
        drop(listeners.remove(&key));
        !has_listener_in(listeners, net)
    };
    if last_in_net {
        forget_links(net);
    }
}

/// Set at unload (by [`HostListeners`]): the watchdog serves no more
/// addresses of the initial namespace.
pub(super) static HOST_STOPPED: kernel::sync::atomic::Atomic<bool> =
    kernel::sync::atomic::Atomic::new(false);

/// Bumped when a device is added: an address of the initial namespace found
/// not to be an RDMA address may have become one.
static DEVICE_GENERATION: kernel::sync::atomic::Atomic<u32> = kernel::sync::atomic::Atomic::new(0);

/// The initial namespace's addresses last found not to be RDMA addresses,
/// the device generation they were probed at and the scans since: probed
/// again once a device is added, or after [`NOT_RDMA_SCANS`] (a device's
/// address can take a moment to reach its GID table after the device is
/// added).
struct NotRdma {
    /// Sorted, for a binary search per address and tick.
    addrs: KVec<[u8; 16]>,
    generation: u32,
    scans: u32,
}

impl NotRdma {
    /// Adds `addr`, in order, if there is room.
    fn remember(&mut self, addr: [u8; 16]) {
        if let Err(at) = self.addrs.binary_search(&addr) {
            if self.addrs.len() < crate::ffi::net::MAX_ADDRESSES
                && self.addrs.reserve(1, GFP_KERNEL).is_ok()
            {
                let _ = self.addrs.insert_within_capacity(at, addr);
            }
        }
    }
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
pub(super) fn serve_host_addresses() {
    let net = NetRef::init_net();
    let Ok(mut addrs) = crate::ffi::net::addresses(net) else {
        return;
    };
    crate::tables::sort(&mut addrs);
    // Addresses gone: their listeners go unless a socket is bound there.
    let none_left = {
        let mut guard = LISTENERS.lock();
        let listeners = guard.get_or_insert_with(RBTree::new);
        let had = has_listener_in(listeners, net);
        retain(listeners, Some(net), |key, l| {
            l.host &= addrs.binary_search(&key.addr).is_ok();
            l.host || l.bound > 0
        });
        had && !has_listener_in(listeners, net)
    };
    if none_left {
        forget_links(net);
    }
    forget_not_rdma_when_due();
    for addr in addrs.iter() {
        let key = ListenerKey { net, addr: *addr };
        let served = LISTENERS
            .lock()
            .as_ref()
            .and_then(|listeners| listeners.get(&key))
            .is_some_and(|l| l.host && l.id.is_some());
        if served || NOT_RDMA.lock().addrs.binary_search(addr).is_ok() {
            continue;
        }
        let ep = key.endpoint();
        match is_rdma_address(net, &ep) {
            Ok(true) => {}
            Ok(false) => {
                NOT_RDMA.lock().remember(*addr);
                continue;
            }
            Err(_) => continue,
        }
        if !serve_host_address(net, &ep) {
            return;
        }
    }
}

/// Forgets the addresses found not to be RDMA addresses once a device was
/// added since, or after [`NOT_RDMA_SCANS`] scans.
fn forget_not_rdma_when_due() {
    let generation = DEVICE_GENERATION.load(kernel::sync::atomic::Relaxed);
    let mut not_rdma = NOT_RDMA.lock();
    not_rdma.scans += 1;
    if not_rdma.generation != generation || not_rdma.scans >= NOT_RDMA_SCANS {
        not_rdma.addrs.clear();
        not_rdma.generation = generation;
        not_rdma.scans = 0;
    }
}

/// Listens on `ep`, an RDMA address of the initial namespace `net`, as a
/// host address. Returns `false` if host listeners have stopped (unload).
fn serve_host_address(net: NetRef, ep: &Endpoint) -> bool {
    let key = ListenerKey::new(net, ep);
    let mut guard = LISTENERS.lock();
    // Under the lock: `HostListeners::drop` takes it after setting the flag.
    if HOST_STOPPED.load(kernel::sync::atomic::Relaxed) {
        return false;
    }
    let listeners = guard.get_or_insert_with(RBTree::new);
    if let Some(l) = listeners.get_mut(&key) {
        l.host = true;
        if l.id.is_none() {
            l.id = listen(net, ep).ok();
        }
        return true;
    }
    // Tried again next tick if the port is taken or memory short.
    let Ok(id) = listen(net, ep) else {
        return true;
    };
    let _ = listeners.try_create_and_insert(
        key,
        Listener {
            bound: 0,
            host: true,
            id: Some(id),
            binder: None,
            relisten_queued: false,
        },
        GFP_KERNEL,
    );
    true
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
        let mut guard = LISTENERS.lock();
        HOST_STOPPED.store(true, kernel::sync::atomic::Relaxed);
        if let Some(listeners) = guard.as_mut() {
            retain(listeners, None, |_, l| {
                l.host = false;
                l.bound > 0
            });
        }
    }
}

/// Whether `addr` is an address of an RDMA device in `net` (upstream's
/// `rds_ib_laddr_check`, without its refusal of iWARP). Fails only for want
/// of memory: any other failure to bind the probe means it is not.
pub(crate) fn is_rdma_address(net: NetRef, addr: &Endpoint) -> Result<bool> {
    match device_of_address(net, addr) {
        AddressDevice::Device(_) => Ok(true),
        AddressDevice::NotLocal | AddressDevice::NoDevice => Ok(false),
        AddressDevice::Unknown => match bound_probe(net, addr) {
            Ok(id) => Ok(id.device().is_some()),
            Err(e) if e == ENOMEM => Err(e),
            Err(_) => Ok(false),
        },
    }
}

/// The RDMA device and port of the local address `addr` in `net`, with
/// `rdma_bind_addr`'s errors: `EADDRNOTAVAIL` for an address no interface
/// of `net` has, `ENODEV` for one no device rrds has serves.
pub(crate) fn device_of(net: NetRef, addr: &Endpoint) -> Result<(Arc<RdmaDevice>, u32)> {
    match device_of_address(net, addr) {
        AddressDevice::Device(held) => {
            let device = crate::device::find(held.handle()).ok_or(ENODEV)?;
            Ok((device, held.port()))
        }
        AddressDevice::NotLocal => Err(crate::errno::eaddrnotavail()),
        AddressDevice::NoDevice => Err(ENODEV),
        AddressDevice::Unknown => {
            let id = bound_probe(net, addr)?;
            let device = id.device().and_then(crate::device::find).ok_or(ENODEV)?;
            Ok((device, id.port()))
        }
    }
}

/// An rdma_cm id bound to `addr` (any port) in `net`: rdma_cm resolves the
/// address to its device and port, scanning every device under its global
/// mutex. Only for the addresses `device_of_address` cannot place.
fn bound_probe(net: NetRef, addr: &Endpoint) -> Result<CmId<Cm>> {
    stats::inc(Stat::IbAddressProbes);
    let id = CmId::<Cm>::create(net, None)?;
    let mut raw = [0u8; 28];
    let len = Endpoint { port: 0, ..*addr }.write_sockaddr(&mut raw);
    id.bind(&SockAddr::new(&raw[..len]))?;
    Ok(id)
}

/// Closes listeners bound to a device rrds no longer has. `device_removed`
/// closes those it finds, but a listener made while the device was being
/// removed (`relisten`, or a bind, after rrds's `remove` callback and before
/// rdma_cm's own) is bound to it too: rdma_cm only reports
/// `DEVICE_REMOVAL` to it and then waits, holding `ib_unregister_device`,
/// until the id is destroyed. Called by the watchdog, so such a removal
/// waits at most a tick. A listener bound to a device whose `add` callback
/// has not run yet may go too: `relisten` makes it again after that `add`.
pub(super) fn close_stray_listeners() {
    let closed = close_listeners(|id| {
        id.device()
            .is_some_and(|device| !crate::device::is_known(device))
    });
    stats::add(Stat::IbStrayListenersClosed, closed as u64);
}

/// Closes the listeners whose id `doomed` picks (they listen again once
/// `relisten` finds a device for their address); returns how many.
pub(super) fn close_listeners(doomed: impl Fn(&CmId<Cm>) -> bool) -> usize {
    let mut closed = KVec::new();
    let mut count = 0;
    {
        let mut guard = LISTENERS.lock();
        for l in guard
            .iter_mut()
            .flat_map(|listeners| listeners.values_mut())
        {
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
        let mut guard = LISTENERS.lock();
        let missing_ids = guard
            .iter_mut()
            .flat_map(|listeners| listeners.iter_mut())
            .filter(|(_, l)| l.id.is_none());
        for (key, l) in missing_ids {
            let ep = key.endpoint();
            match listen(key.net, &ep) {
                Ok(id) => l.id = Some(id),
                Err(_) => {
                    missing = true;
                    // siw: the address exists only in the listener's namespace.
                    if let Some(task) = l.binder.as_ref().filter(|_| !l.relisten_queued) {
                        let work = Relisten { net: key.net, ep };
                        l.relisten_queued = run_in_task(task, work).is_ok();
                    }
                }
            }
        }
        drop(guard);
        if !missing {
            return;
        }
        crate::ffi::time::idle_sleep_ms(RELISTEN_INTERVAL_MS);
    }
}

/// A listener re-created in a task of its namespace (see `Listener::binder`).
struct Relisten {
    net: NetRef,
    ep: Endpoint,
}

impl TaskWork for Relisten {
    fn run(self) {
        let key = ListenerKey::new(self.net, &self.ep);
        let mut guard = LISTENERS.lock();
        if let Some(l) = guard.as_mut().and_then(|listeners| listeners.get_mut(&key)) {
            l.relisten_queued = false;
            if l.id.is_none() {
                l.id = listen(self.net, &self.ep).ok();
            }
        }
    }

    fn cancel(self) {
        // The next bind in the namespace listens again (`net_get`).
        let key = ListenerKey::new(self.net, &self.ep);
        if let Some(l) = LISTENERS
            .lock()
            .as_mut()
            .and_then(|listeners| listeners.get_mut(&key))
        {
            l.relisten_queued = false;
        }
    }
}
