// SPDX-License-Identifier: GPL-2.0

//! The RDMA devices rrds knows of: one record per device ib_core hands us.
//!
//! Records are created by the `ib_client` `add` callback and dropped by
//! `remove` (the crate root's `DeviceClient`, which also tells the layers
//! above). A record holds what every layer shares: the device's identity,
//! capabilities, name and protection domains. The layers above keep their
//! own per-device state (memory registration's `MrDevice`), keyed by the
//! record.
//!
//! Each network namespace gets its own protection domain on a device
//! ([`RdmaDevice::domain`]): an rkey handed out in one namespace names
//! nothing a QP of another namespace can reach, even where both use the
//! same device (a VLAN of its netdev moved to another namespace).

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
        net::NetRef,
    },
};

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the ib_client (the only
    // other user) is registered.
    unsafe(uninit) static DEVICES: Mutex<KVec<Arc<RdmaDevice>>> = KVec::new();
}

/// Initialises the device table. Call once, in module init, before registering the client.
pub(crate) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&DEVICES);
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
    /// The device's protection domains, one per namespace that uses it;
    /// closed by `remove`, so no holder of the record can keep one past the
    /// device.
    #[pin]
    domains: Mutex<Domains>,
}

/// The protection domain of one namespace on a device, and its users.
struct Domain {
    /// Names the domain for its users ([`DomainUse`]), never reused.
    id: u64,
    /// `None` once the namespace has gone: its last users hold the domain,
    /// and a new namespace at the same address gets a domain of its own.
    net: Option<NetRef>,
    pd: ProtectionDomain,
    /// Its users by kind (to name what outlives a device's removal).
    by_user: [u32; DomainUser::ALL.len()],
}

/// What holds a [`DomainUse`]: named in the warning when a device is removed
/// while its domains still have users.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum DomainUser {
    /// A connection's link: its QP and CQs.
    Link,
    /// A memory-registration QP.
    RegQp,
    /// A fast-registration MR, pooled or live.
    Mr,
    /// A data QP on the READ-response fence list (iWARP).
    FenceQp,
    /// A fence's marker key.
    FenceKey,
    /// An XRC target QP.
    XrcTarget,
    /// A kernel-side XRC initiator's QP.
    XrcInitiator,
}

impl DomainUser {
    const ALL: [DomainUser; 7] = [
        DomainUser::Link,
        DomainUser::RegQp,
        DomainUser::Mr,
        DomainUser::FenceQp,
        DomainUser::FenceKey,
        DomainUser::XrcTarget,
        DomainUser::XrcInitiator,
    ];
}

impl Domain {
    fn users(&self) -> u32 {
        self.by_user.iter().sum()
    }

    fn add_user(&mut self, user: DomainUser) {
        self.by_user[user as usize] += 1;
    }

    /// Takes one use by `user` away; returns whether none is left.
    fn remove_user(&mut self, user: DomainUser) -> bool {
        self.by_user[user as usize] -= 1;
        self.users() == 0
    }
}

/// A device's protection domains.
#[derive(Default)]
struct Domains {
    list: KVec<Domain>,
    next_id: u64,
    /// `remove` has begun: no domain is made or handed out any more.
    closed: bool,
}

impl RdmaDevice {
    fn new(ib_device: &IbDevice) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                device: ib_device.handle(),
                caps: ib_device.caps(),
                name <- kernel::new_mutex!(ib_device.name()),
                domains <- kernel::new_mutex!(Domains::default()),
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

    /// The device, for verbs calls made while one of its PDs is held
    /// ([`DomainUse::with_pd`]): `remove` closes the domains before the device goes.
    pub(crate) fn handle(&self) -> DeviceRef {
        self.device
    }

    /// Whether this is the record of `device`.
    pub(crate) fn is(&self, device: DeviceRef) -> bool {
        self.device == device
    }

    /// Whether the device is still there (`remove` has not begun).
    pub(crate) fn is_present(&self) -> bool {
        !self.domains.lock().closed
    }

    /// A new `user` of `net`'s protection domain on this device, allocating
    /// the domain for the namespace's first; ENODEV once the device is
    /// being removed. The caller keeps `net` alive.
    pub(crate) fn domain(self: &Arc<Self>, net: NetRef, user: DomainUser) -> Result<DomainUse> {
        let mut domains = self.domains.lock();
        if domains.closed {
            return Err(ENODEV);
        }
        let id = match domains.list.iter_mut().find(|d| d.net == Some(net)) {
            Some(domain) => {
                domain.add_user(user);
                domain.id
            }
            None => {
                let id = domains.next_id;
                let mut domain = Domain {
                    id,
                    net: Some(net),
                    pd: ProtectionDomain::alloc(self.device)?,
                    by_user: [0; DomainUser::ALL.len()],
                };
                domain.add_user(user);
                domains.list.push(domain, GFP_KERNEL)?;
                domains.next_id += 1;
                id
            }
        };
        Ok(DomainUse {
            device: self.clone(),
            id,
            user,
        })
    }
}

/// One user of a namespace's protection domain on a device: the domain
/// lives while it has users (and the device is not removed).
///
/// Whoever creates verbs objects on the domain keeps one until they are
/// destroyed, and drops it in process context (the last may free the PD).
pub(crate) struct DomainUse {
    device: Arc<RdmaDevice>,
    id: u64,
    user: DomainUser,
}

impl DomainUse {
    pub(crate) fn device(&self) -> &Arc<RdmaDevice> {
        &self.device
    }

    /// Whether `other` uses the same domain: objects of one may be used
    /// with objects of the other (an MR with a QP).
    pub(crate) fn same_as(&self, other: &DomainUse) -> bool {
        self.id == other.id && Arc::ptr_eq(&self.device, &other.device)
    }

    /// Whether the domain's namespace is still there.
    pub(crate) fn is_current(&self) -> bool {
        self.device
            .domains
            .lock()
            .list
            .iter()
            .any(|d| d.id == self.id && d.net.is_some())
    }

    /// Another user of the same domain, a `user`.
    pub(crate) fn share(&self, user: DomainUser) -> DomainUse {
        if let Some(d) = self
            .device
            .domains
            .lock()
            .list
            .iter_mut()
            .find(|d| d.id == self.id)
        {
            d.add_user(user);
        }
        DomainUse {
            device: self.device.clone(),
            id: self.id,
            user,
        }
    }

    /// Runs `f` with the PD, while the device is not being removed (`remove`
    /// closes the domains under this lock); ENODEV once it is.
    pub(crate) fn with_pd<R>(&self, f: impl FnOnce(&ProtectionDomain) -> Result<R>) -> Result<R> {
        let domains = self.device.domains.lock();
        match domains.list.iter().find(|d| d.id == self.id) {
            Some(domain) if !domains.closed => f(&domain.pd),
            _ => Err(ENODEV),
        }
    }
}

impl Drop for DomainUse {
    fn drop(&mut self) {
        let mut domains = self.device.domains.lock();
        let Some(i) = domains.list.iter().position(|d| d.id == self.id) else {
            // Freed by `forget` with the device.
            return;
        };
        if domains.list[i].remove_user(self.user) {
            // Deallocated here, under the lock `with_pd` users hold.
            let _ = domains.list.remove(i);
        }
    }
}

/// The namespace `net` is going: its domains on every device keep their
/// remaining users but are no longer handed out, so that a namespace made
/// later at the same address gets domains of its own.
pub(crate) fn net_exit(net: NetRef) {
    for device in DEVICES.lock().iter() {
        for domain in device.domains.lock().list.iter_mut() {
            if domain.net == Some(net) {
                domain.net = None;
            }
        }
    }
}

/// How many protection domains `device` has (debugfs `rrds/devices`).
fn domain_count(device: &RdmaDevice) -> usize {
    device.domains.lock().list.len()
}

/// The record of `device`, if rrds serves it.
pub(crate) fn find(device: DeviceRef) -> Option<Arc<RdmaDevice>> {
    DEVICES.lock().iter().find(|d| d.is(device)).cloned()
}

/// Whether `device` is one rrds has (its `add` ran, its `remove` has not).
pub(crate) fn is_known(device: DeviceRef) -> bool {
    DEVICES.lock().iter().any(|d| d.is(device))
}

/// Whether `device` is one rrds has and its `remove` has not begun: a link
/// on it may wait for its port to come back.
pub(crate) fn is_open(device: DeviceRef) -> bool {
    find(device).is_some_and(|d| d.is_present())
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
    let record = RdmaDevice::new(device)?;
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

/// A device being removed: its record, if rrds had one, with its domains
/// closed so that no new QP can be created on it.
pub(crate) struct Retiring {
    record: Option<Arc<RdmaDevice>>,
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
    if let Some(r) = &record {
        r.domains.lock().closed = true;
    }
    Retiring { record }
}

/// The last step of removal, once nothing uses `device`: frees its PDs and
/// takes its record out of the table.
pub(crate) fn forget(device: &IbDevice, retiring: Retiring) {
    let Retiring { record } = retiring;
    if let Some(r) = &record {
        let domains = core::mem::take(&mut r.domains.lock().list);
        for d in domains.iter().filter(|d| d.users() > 0) {
            pr_warn!(
                "{}: a protection domain still had {} users\n",
                device.name(),
                d.users()
            );
            for (user, count) in DomainUser::ALL.iter().zip(d.by_user) {
                if count > 0 {
                    pr_warn!("{}:   {:?}: {}\n", device.name(), user, count);
                }
            }
        }
        drop(domains);
    }
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
         xrc mem_mgt_ext max_qp max_qp_wr max_send_sge max_sge_rd max_mr_size pds\n"
    ))?;
    for device in DEVICES.lock().iter() {
        let c = device.caps();
        f.write_fmt(fmt!(
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {:#x} {}\n",
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
            domain_count(device),
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
