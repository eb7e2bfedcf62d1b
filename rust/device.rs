// SPDX-License-Identifier: GPL-2.0

//! The RDMA devices rrds knows of: one record per device ib_core hands us.
//!
//! Records are created by the `ib_client` `add` callback and dropped by
//! `remove` (the crate root's `DeviceClient`, which also tells the layers
//! above). A record holds what every layer shares: the device's identity,
//! capabilities, name and PD. The layers above keep their own per-device
//! state (memory registration's `MrDevice`), keyed by the record.

use kernel::{
    fmt,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
};

use crate::{
    errno,
    ffi::{
        ib_device::{
            DeviceCaps,
            DeviceName,
            DeviceRef,
            IbDevice,
            Transport, //
        },
        ib_pd::ProtectionDomain,
    },
};

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the ib_client (the only
    // other user) is registered.
    unsafe(uninit) static DEVICES: Mutex<KVec<Arc<RdmaDevice>>> = KVec::new();
}

/// Initialises the device table. Call once, in module init, before registering the client.
pub(crate) fn init() {
    // SAFETY: Module init calls this exactly once, before any other use of `DEVICES`.
    unsafe { DEVICES.init() };
}

/// Frees the table's buffer. Call once, at unload, after the client is unregistered.
pub(crate) fn release_table() {
    crate::tables::free_table(&mut DEVICES.lock());
}

/// One RDMA device as rrds sees it.
///
/// # Invariants
///
/// `device` is registered while the record is in `DEVICES`: the `ib_client`
/// `remove` callback takes the record out before it returns.
#[pin_data]
pub(crate) struct RdmaDevice {
    device: DeviceRef,
    caps: DeviceCaps,
    /// Kept in step with ib_core's renames by the `rename` callback.
    #[pin]
    name: Mutex<DeviceName>,
    /// The device's protection domain; taken out and freed in `remove`, so no
    /// holder of the record can keep it past the device.
    #[pin]
    pd: Mutex<Option<ProtectionDomain>>,
}

impl RdmaDevice {
    fn new(ib_device: &IbDevice, domain: ProtectionDomain) -> Result<Arc<Self>> {
        // `try_pin_init!` binds each field name as a local: keep the arguments' names apart.
        Arc::pin_init(
            try_pin_init!(Self {
                device: ib_device.handle(),
                caps: ib_device.caps(),
                name <- kernel::new_mutex!(ib_device.name()),
                pd <- kernel::new_mutex!(Some(domain)),
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn caps(&self) -> &DeviceCaps {
        &self.caps
    }

    pub(crate) fn name(&self) -> DeviceName {
        *self.name.lock()
    }

    /// The device, for verbs calls made while its PD is held (`with_pd`):
    /// `remove` takes the PD before the device goes.
    pub(crate) fn handle(&self) -> DeviceRef {
        self.device
    }

    /// Whether this is the record of `device`.
    pub(crate) fn is(&self, device: DeviceRef) -> bool {
        self.device == device
    }

    /// Whether the device is still there (its PD not yet taken by `remove`).
    pub(crate) fn is_present(&self) -> bool {
        self.pd.lock().is_some()
    }

    /// Runs `f` with the device's PD, while the device is not being removed
    /// (`remove` takes the PD under this lock); ENODEV once it is.
    pub(crate) fn with_pd<R>(&self, f: impl FnOnce(&ProtectionDomain) -> Result<R>) -> Result<R> {
        match self.pd.lock().as_ref() {
            Some(pd) => f(pd),
            None => Err(ENODEV),
        }
    }
}

/// The record of `device`, if rrds serves it.
pub(crate) fn find(device: DeviceRef) -> Option<Arc<RdmaDevice>> {
    DEVICES.lock().iter().find(|d| d.is(device)).cloned()
}

/// Whether `device` is one rrds has (its `add` ran, its `remove` has not).
pub(crate) fn is_known(device: DeviceRef) -> bool {
    DEVICES.lock().iter().any(|d| d.is(device))
}

/// Adds `device` to the table (the `ib_client` `add` callback's first step)
/// and returns its record; EOPNOTSUPP for a device rdma_cm cannot connect over.
pub(crate) fn add(device: &IbDevice) -> Result<Arc<RdmaDevice>> {
    let caps = device.caps();
    if caps.transport == Transport::Other {
        // Neither IB, RoCE nor iWARP: rdma_cm cannot connect over it.
        pr_info!("ignoring {}: no IB, RoCE or iWARP port\n", device.name());
        return Err(errno::eopnotsupp());
    }
    let record = RdmaDevice::new(device, ProtectionDomain::alloc(device)?)?;
    DEVICES.lock().push(record.clone(), GFP_KERNEL)?;
    pr_info!(
        "device {} added: {} {}, fast-reg pages {}, atomics {}, xrc {}\n",
        device.name(),
        caps.node_type,
        caps.transport,
        caps.max_fast_reg_page_list_len,
        caps.atomic,
        if caps.xrc { "yes" } else { "no" },
    );
    Ok(record)
}

/// A device being removed: its record, if rrds had one, and its PD, taken
/// so that no new QP can be created on it.
pub(crate) struct Retiring {
    record: Option<Arc<RdmaDevice>>,
    pd: Option<ProtectionDomain>,
}

impl Retiring {
    pub(crate) fn record(&self) -> Option<&Arc<RdmaDevice>> {
        self.record.as_ref()
    }
}

/// The `ib_client` `remove` callback's first step: from here on no QP can be
/// created on `device`. The device's users go next, then [`forget`].
pub(crate) fn retire(device: &IbDevice) -> Retiring {
    let record = find(device.handle());
    let pd = record.as_ref().and_then(|r| r.pd.lock().take());
    Retiring { record, pd }
}

/// The last step of removal, once nothing uses `device`: frees its PD and
/// takes its record out of the table.
pub(crate) fn forget(device: &IbDevice, retiring: Retiring) {
    let Retiring { record, pd } = retiring;
    drop(pd);
    let mut devices = DEVICES.lock();
    // INVARIANT: the record leaves the table before ib_core lets the device go.
    devices.retain(|d| !d.is(device.handle()));
    drop(devices);
    drop(record);
    pr_info!("device {} removed\n", device.name());
}

/// Follows ib_core's rename of `device`.
pub(crate) fn rename(device: &IbDevice) {
    let devices = DEVICES.lock();
    if let Some(record) = devices.iter().find(|d| d.is(device.handle())) {
        *record.name.lock() = device.name();
    }
}

/// Writes the device table, one line per device under a header: the format of
/// debugfs `rrds/devices` (Documentation/admin-guide.rst).
pub(crate) fn show(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_fmt(fmt!(
        "name node_type transport ports max_fast_reg_page_list_len atomic masked_atomic \
         xrc mem_mgt_ext max_qp max_qp_wr max_send_sge max_sge_rd max_mr_size\n"
    ))?;
    for device in DEVICES.lock().iter() {
        let c = device.caps();
        f.write_fmt(fmt!(
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {:#x}\n",
            device.name(),
            c.node_type,
            c.transport,
            c.port_count,
            c.max_fast_reg_page_list_len,
            c.atomic,
            c.masked_atomic,
            yes_no(c.xrc),
            yes_no(c.mem_mgt_extensions),
            c.max_qp,
            c.max_qp_wr,
            c.max_send_sge,
            c.max_sge_rd,
            c.max_mr_size,
        ))?;
    }
    Ok(())
}

fn yes_no(value: bool) -> &'static str {
    if value {
        "yes"
    } else {
        "no"
    }
}
