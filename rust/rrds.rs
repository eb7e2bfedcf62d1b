// SPDX-License-Identifier: GPL-2.0

//! rrds: Reliable Datagram Sockets over RDMA.
//!
//! An out-of-tree implementation of the RDS socket family (PF_RDS) with an
//! RDMA transport that drives ib_core directly. See `Documentation/design.rst`
//! for the layering: socket -> message -> conn -> transport, with the memory
//! registration engine and the XRC manager as services beside them.

mod addr;
mod cong;
mod conn;
mod device;
mod errno;
mod ffi;
mod fifo;
mod hooks;
mod incoming;
mod knobs;
mod limits;
mod message;
mod mr;
mod rdma;
mod socket;
mod stats;
mod tables;
mod transport;
mod wait;
mod xrc;

use kernel::{
    debugfs,
    prelude::*, //
};

use crate::ffi::{
    ib_client::{
        IbClientOps,
        IbClientRegistration, //
    },
    ib_device::IbDevice,
};

static PERNET: ffi::net::PernetOps<socket::NetCleanup> = ffi::net::PernetOps::new();

module! {
    type: Rrds,
    name: "rrds",
    authors: ["The rrds developers"],
    description: "Reliable Datagram Sockets over RDMA (Rust)",
    license: "GPL",
    params: {
        xrc_max_targets_per_user: u32 {
            default: 64,
            description: "Live XRC target QPs one user (euid) may create, all namespaces together",
        },
        xrc_max_targets_per_net: u32 {
            default: 256,
            description: "Live XRC target QPs per network namespace",
        },
        xrc_max_initiators_per_user: u32 {
            default: 64,
            description: "Kernel-side XRC initiators one user (euid) may connect, all namespaces together",
        },
        max_conns_per_net: u32 {
            default: 8192,
            description: "Connections per network namespace, IB and loopback",
        },
        idle_timeout_secs: u32 {
            default: 300,
            description: "Seconds an IB connection may carry nothing, with nothing queued or unacknowledged, before its link goes (the next send brings it back); 0: never",
        },
        max_conns_per_peer: u32 {
            default: 32,
            description: "Connections per network namespace to one peer address (all TOS and local addresses)",
        },
        ib_recv_ring_start: u32 {
            default: 32,
            description: "Receive buffers (8 KiB each) an IB link posts at set-up, 16 to 256; the ring doubles, up to 256, each time the peer fills it within a second, and is whole from the start towards a peer without flow control",
        },
        ib_ack_timeout: u32 {
            default: 0,
            description: "IB links' RC ACK timeout, as the exponent N of 4.096 us x 2^N (20: 4.3 s) before an unacknowledged request is sent again; 0: rdma_cm's default (RoCE: 17, 0.5 s)",
        },
    },
}

/// The module's state: everything registered at load and torn down at unload.
///
/// Fields drop in declaration order: the `ib_client` goes first (ib_core calls
/// `remove` for every device), then the debugfs files that show the devices.
#[pin_data]
struct Rrds {
    /// Goes first: no socket can exist once it is dropped (sockets pin the module).
    _family: ffi::net::FamilyRegistration<socket::RdsFamily>,
    /// Before the namespaces' cleanup: no connection of the initial
    /// namespace is accepted after it.
    _host_listeners: transport::ib::HostListeners,
    /// Unregistering runs the namespace cleanup for every namespace: the
    /// connections and congestion maps go with it.
    _pernet: ffi::net::PernetRegistration<socket::NetCleanup>,
    #[pin]
    ib_client: IbClientRegistration<DeviceClient>,
    #[pin]
    devices_file: debugfs::File<()>,
    #[pin]
    objects_file: debugfs::File<()>,
    /// The test hooks' files (none without `RRDS_TEST_HOOKS=1`).
    #[pin]
    hook_files: hooks::Files,
    #[pin]
    ib_links_file: debugfs::File<()>,
    #[pin]
    xrc_targets_file: debugfs::File<()>,
    _debugfs: debugfs::Dir,
    /// Stopped before the workqueue it runs on is destroyed.
    _watchdog: transport::ib::Watchdog,
    /// Destroying it waits for every connection work item.
    _workqueue: ffi::workqueue::OwnedQueue,
    /// Last, when nothing uses the global tables any more.
    _tables: GlobalTables,
}

/// Frees the buffers of the global tables (statics, which are never dropped)
/// at unload; they would leak otherwise.
struct GlobalTables;

impl Drop for GlobalTables {
    fn drop(&mut self) {
        socket::release_tables();
        cong::release_tables();
        conn::release_tables();
        transport::ib::release_tables();
        xrc::release_table();
        mr::release_table();
        knobs::release_table();
        device::release_table();
    }
}

/// The `ib_client` operations of rrds: keep the device table in step with
/// ib_core and tell the layers that keep per-device state.
struct DeviceClient;

impl IbClientOps for DeviceClient {
    fn add(device: &IbDevice) -> Result {
        let record = device::add(device)?;
        if let Err(e) = mr::device_added(&record) {
            // ib_core calls no `remove` for a device whose `add` failed.
            device::forget(device, device::retire(device));
            return Err(e);
        }
        transport::ib::device_added();
        Ok(())
    }

    fn remove(device: &IbDevice) {
        let retiring = device::retire(device);
        // Connections over the device go down (and may reconnect elsewhere) before
        // the PD their QPs hang off is freed.
        transport::ib::device_removed(device.handle());
        hooks::DEVICE_REMOVE_HOLD.pause();
        // Registered processes get a final event; the target QPs go before the PD.
        xrc::device_removed(device.handle());
        // Registration QPs and every MR go before the PD they live in.
        if let Some(record) = retiring.record() {
            mr::device_removed(record);
        }
        device::forget(device, retiring);
    }

    fn rename(device: &IbDevice) {
        device::rename(device);
    }
}

/// debugfs `rrds/objects`: how many shared objects exist, so tests can
/// check that nothing accumulates.
fn show_objects(f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    f.write_fmt(fmt!(
        "connections {}\ncongestion_maps {}\nxrc_targets {}\nxrc_initiators {}\n",
        conn::count(),
        cong::count(),
        xrc::count(),
        xrc::initiator_count()
    ))
}

/// The test hooks' files, with what they do in the layers that own them.
#[cfg(rrds_test_hooks)]
fn hook_files(dir: &debugfs::Dir) -> impl PinInit<hooks::Files, Error> + '_ {
    hooks::Files::new(
        dir,
        hooks::Actions {
            release_loopback: transport::loopback::send_held,
            fail_regqps: mr::fail_regqps,
            show_regqps: mr::show_regqps,
        },
    )
}

#[cfg(not(rrds_test_hooks))]
fn hook_files(_dir: &debugfs::Dir) -> hooks::Files {
    hooks::Files
}

impl kernel::InPlaceModule for Rrds {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        {
            // SAFETY: This is module init, and nothing that takes a global lock is
            // registered or started yet: `m` goes before the first below.
            let m = unsafe { ffi::global::ModuleInit::begin() };
            device::init(&m);
            knobs::init(&m);
            mr::init(&m);
            socket::init(&m);
            conn::init(&m);
            cong::init(&m);
            transport::ib::init(&m);
            xrc::init(&m);
        }
        let dir = debugfs::Dir::new(c"rrds");
        try_pin_init!(Self {
            // Before anything can grow a table: a load that fails further on
            // drops what it set up in reverse, so this goes last then too.
            _tables: GlobalTables,
            // Next: the ib_client's callbacks already queue work on it.
            _workqueue: ffi::workqueue::OwnedQueue::alloc()?,
            _watchdog: transport::ib::Watchdog::start()?,
            _host_listeners: transport::ib::HostListeners::start(),
            _pernet: PERNET.register()?,
            _family: socket::register()?,
            devices_file <- dir.read_callback_file(c"devices", (), &|(): &(), f| device::show(f)),
            objects_file <- dir.read_callback_file(c"objects", (), &|(): &(), f| show_objects(f)),
            ib_links_file <- dir.read_callback_file(c"ib_links", (), &|(): &(), f| {
                transport::ib::show_links(f)
            }),
            xrc_targets_file <- dir.read_callback_file(c"xrc_targets", (), &|(): &(), f| {
                xrc::show(f)
            }),
            hook_files <- hook_files(&dir),
            ib_client <- IbClientRegistration::register(c"rrds"),
            _debugfs: dir,
        })
    }
}
