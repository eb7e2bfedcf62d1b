// SPDX-License-Identifier: GPL-2.0

//! The IB transport: RDS over RC QPs set up with rdma_cm, on InfiniBand,
//! RoCE (rxe) and iWARP (siw) alike, in every network namespace.
//!
//! Each connection owns an [`IbPath`] (path.rs): its rdma_cm state machine
//! and current link; ring.rs is the link's data path; listen.rs its
//! listeners. A namespace listens
//! (upstream's ports 18634 for IPv4 and 16385 for IPv6) on each RDMA address
//! an rrds socket is bound to; when the last one closes, the listeners and
//! every IB connection of the namespace go. rdma_cm ids hold a reference on
//! their namespace, so this is also what lets a namespace with idle
//! connections be deleted. The initial namespace, which is never deleted,
//! also listens on each of its RDMA addresses from load to unload, as
//! upstream does on its wildcard: a host answers pings and accepts
//! connections with nothing bound (see [`HostListeners`]).

mod listen;
mod path;
mod proto;
mod ring;

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{
        aref::ARef,
        Arc,
        ArcBorrow,
        CondVar,
        Mutex, //
    },
    task::Task,
    time::msecs_to_jiffies,
};

use listen::{
    close_listeners,
    close_stray_listeners,
    serve_host_addresses,
    HOST_STOPPED, //
};
pub(crate) use listen::{
    device_added,
    device_of,
    is_rdma_address,
    net_get,
    net_put,
    HostListeners, //
};
pub(crate) use path::{
    IbInfo,
    IbPath, //
};

use crate::{
    addr::Endpoint,
    device::RdmaDevice,
    ffi::{
        ib_device::{
            device_of_address,
            AddressDevice,
            DeviceRef, //
        },
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
const RELISTEN_INTERVAL_MS: u32 = 200;

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

    fn xmit(&self, conn: &dyn Conn, resets: u64, header: &Header, message: &Arc<Message>) -> Xmit {
        match conn.path().ib() {
            Some(path) => path.xmit(conn, resets, header, message),
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

// SAFETY: The only context set on the transport's ids is their path
// (`IbPath::connect`, `IbPath::accept`), which outlives its ids (`IbPath`
// invariant); listeners and probes have none.
unsafe impl CmHandler for Cm {
    type Context = IbPath;

    fn connect_request(
        _listener: Option<ArcBorrow<'_, IbPath>>,
        id: CmId<Cm>,
        event: &CmEvent<'_>,
    ) -> core::result::Result<(), CmId<Cm>> {
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

    fn event(path: Option<ArcBorrow<'_, IbPath>>, id: &CmIdRef<Cm>, event: &CmEvent<'_>) {
        let Some(path) = path else {
            // A listener or an address probe: nothing to do.
            stats::inc(Stat::IbCmEventsUnowned);
            pr_debug!("rdma_cm event {} of an id without a path\n", event.number());
            return;
        };
        Arc::<IbPath>::from(path).cm_event(id, event);
    }
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
pub(crate) fn init(m: &crate::ffi::global::ModuleInit) {
    listen::init(m);
    m.init_lock(&ORPHANS);
}

/// Frees the tables' buffers. Call once, at unload, after the last device.
pub(crate) fn release_tables() {
    listen::release();
    crate::tables::free_table(&mut ORPHANS.lock());
}

/// Keeps a killed path whose last links wait for their port (`IbPath::kill`)
/// until the watchdog, the device's removal or `ORPHAN_WAIT_TICKS` tears
/// them down. If the table cannot grow, they go now, at the cost of the
/// port's GSI QP on rxe. So do links on a device whose removal began after
/// `kill` chose to keep them: that removal may already have swept the
/// orphans, and rdma_cm's part of it waits for their ids. Checked under the
/// table's lock, which the sweep holds, after `remove` closed the device.
pub(crate) fn adopt_orphan(path: Arc<IbPath>) {
    let orphan = Orphan {
        path,
        ticks_left: ORPHAN_WAIT_TICKS,
    };
    let refused = {
        let mut table = ORPHANS.lock();
        if !orphan.path.waits_on_open_devices() {
            drop(table);
            orphan.path.tear_down_retired(false);
            return;
        }
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

/// Seconds without a send completing, sends outstanding, before a link is
/// declared dead (the transport's own retries give up after a few seconds).
const STALL_SECONDS: u32 = 8;

/// The watchdog's tick, in milliseconds.
const WATCHDOG_TICK_MS: u32 = 1000;

/// The link watchdog's stop flag, and the wait between its ticks that
/// stopping it cuts short.
#[pin_data]
struct WatchdogClock {
    #[pin]
    stopped: Mutex<bool>,
    #[pin]
    wake: CondVar,
}

/// The link watchdog, a loop on the module's workqueue that waits between
/// ticks in an interruptible sleep: a kernel worker gets no signals, and an
/// uninterruptible one would add 1 to the host's load average for as long
/// as rrds is loaded. Dropping this stops the loop at once (the workqueue's
/// destruction waits for it).
pub(crate) struct Watchdog(Arc<WatchdogClock>);

impl Watchdog {
    pub(crate) fn start() -> Result<Self> {
        let clock = Arc::pin_init(
            pin_init!(WatchdogClock {
                stopped <- new_mutex!(false),
                wake <- new_condvar!("rrds_watchdog"),
            }),
            GFP_KERNEL,
        )?;
        let ticking = clock.clone();
        crate::ffi::workqueue::queue().try_spawn(GFP_KERNEL, move || watch(&ticking))?;
        Ok(Self(clock))
    }
}

impl Drop for Watchdog {
    /// Also waits for the reconnect timers of the (dead) paths to fire:
    /// the workqueue they queue on goes next.
    fn drop(&mut self) {
        *self.0.stopped.lock() = true;
        self.0.wake.notify_all();
        if !path::retries_done() {
            pr_err!("reconnect timers still pending at unload\n");
        }
    }
}

fn watch(clock: &WatchdogClock) {
    loop {
        {
            let mut stopped = clock.stopped.lock();
            if !*stopped {
                let _ = clock
                    .wake
                    .wait_interruptible_timeout(&mut stopped, msecs_to_jiffies(WATCHDOG_TICK_MS));
            }
            if *stopped {
                return;
            }
        }
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
