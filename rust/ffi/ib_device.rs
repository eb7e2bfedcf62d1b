// SPDX-License-Identifier: GPL-2.0

//! `struct ib_device`: an RDMA device as ib_core hands it to its clients.

use core::ops::RangeInclusive;
use kernel::{
    fmt,
    types::Opaque, //
};

use super::{
    bindings,
    net::NetRef, //
};
use crate::addr::Endpoint;

/// A borrowed RDMA device.
///
/// # Invariants
///
/// `self.0` is a `struct ib_device` registered with ib_core. A `&IbDevice` is only
/// handed out inside ib_core's client callbacks, and ib_core keeps the device
/// registered until the client's `remove` callback for it has returned.
#[repr(transparent)]
pub(crate) struct IbDevice(Opaque<bindings::ib_device>);

/// A registered `ib_device` as the layers above `ffi` hold it: compared
/// for identity, and handed back to the `ffi` wrappers for verbs calls.
///
/// # Invariants
///
/// Points to a registered `ib_device`. Handles come from an [`IbDevice`]
/// (inside ib_client callbacks) or from a live object bound to the device
/// (an rdma_cm id); rrds's ib_client `remove` callback destroys everything
/// it made on the device and drops its record before it returns, so verbs
/// calls through a handle only happen while the device is registered.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceRef(core::ptr::NonNull<bindings::ib_device>);

// SAFETY: The handle is an identity and a pointer ib_core accepts from any thread.
unsafe impl Send for DeviceRef {}
// SAFETY: See `Send`.
unsafe impl Sync for DeviceRef {}

impl DeviceRef {
    /// The handle of the device behind `ptr`; `None` for NULL.
    ///
    /// # Safety
    ///
    /// A non-NULL `ptr` points to a registered `ib_device`.
    pub(super) unsafe fn from_raw(ptr: *mut bindings::ib_device) -> Option<Self> {
        // INVARIANT: registered, by the caller's guarantee.
        core::ptr::NonNull::new(ptr).map(Self)
    }

    /// The pointer, for the `ffi` wrappers' C calls.
    pub(super) fn as_ptr(self) -> *mut bindings::ib_device {
        self.0.as_ptr()
    }

    /// The device's port numbers (see [`IbDevice::ports`]).
    fn ports(self) -> RangeInclusive<u32> {
        let dev = self.as_ptr();
        // SAFETY: `dev` is a registered device (type invariant).
        let (start, end) = unsafe {
            (
                bindings::rrds_rdma_start_port(dev),
                bindings::rrds_rdma_end_port(dev),
            )
        };
        start..=end
    }
}

/// Node type of a device (`enum rdma_node_type`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeType {
    Ca,
    Switch,
    Router,
    Rnic,
    Usnic,
    UsnicUdp,
    Unspecified,
    Unknown(u32),
}

/// The wire protocol a port speaks; RoCE and InfiniBand share the IB transport.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Infiniband,
    Roce,
    Iwarp,
    Other,
}

/// Atomic operation support (`enum ib_atomic_cap`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomicCap {
    None,
    /// Atomic with respect to this device's own operations.
    Hca,
    /// Atomic with respect to the CPU as well.
    Global,
    Unknown(u32),
}

/// What rrds needs to know of a device's capabilities; fixed once it is registered.
#[derive(Clone, Copy)]
pub(crate) struct DeviceCaps {
    pub(crate) node_type: NodeType,
    pub(crate) transport: Transport,
    pub(crate) port_count: u32,
    pub(crate) max_fast_reg_page_list_len: u32,
    pub(crate) atomic: AtomicCap,
    pub(crate) masked_atomic: AtomicCap,
    pub(crate) xrc: bool,
    pub(crate) mem_mgt_extensions: bool,
    pub(crate) max_qp: i32,
    pub(crate) max_qp_wr: i32,
    pub(crate) max_send_sge: i32,
    pub(crate) max_sge_rd: i32,
    pub(crate) max_mr_size: u64,
    /// RDMA READs and atomics a QP may have outstanding as responder and as
    /// initiator.
    pub(crate) max_qp_rd_atom: i32,
    pub(crate) max_qp_init_rd_atom: i32,
    /// A software device (rxe, siw): the CPU copies from MRs' pages in the
    /// driver's threads, after looking the key up.
    pub(crate) software: bool,
}

/// A device name: `IB_DEVICE_NAME_MAX` bytes, NUL padded.
#[derive(Clone, Copy)]
pub(crate) struct DeviceName([u8; bindings::IB_DEVICE_NAME_MAX as usize]);

impl IbDevice {
    /// Borrows the device behind `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a registered `struct ib_device` that stays registered for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `IbDevice` is a transparent wrapper of `ib_device`; the caller guarantees
        // the pointer is valid for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// The raw pointer, for the other `ffi` wrappers.
    pub(super) fn as_raw(&self) -> *mut bindings::ib_device {
        self.0.get()
    }

    /// The device's handle, for the layers above (identity and verbs calls).
    pub(crate) fn handle(&self) -> DeviceRef {
        // INVARIANT: `self` is registered (type invariant); `Opaque::get` is never NULL.
        DeviceRef(core::ptr::NonNull::from(&self.0).cast())
    }

    fn raw_ref(&self) -> &bindings::ib_device {
        // SAFETY: By the type invariant the device is registered, hence initialised; the
        // fields rrds reads through this reference (`attrs`, `node_type`, `phys_port_cnt`)
        // are written by the driver before registration and never after.
        unsafe { &*self.as_raw() }
    }

    /// The device's current name.
    ///
    /// ib_core calls every client's `rename` callback after a rename, and calls the
    /// callbacks with the device's registration lock held, so reading the name from
    /// a callback does not race with a rename.
    pub(crate) fn name(&self) -> DeviceName {
        // The kernel's `c_char` is `u8` on every architecture (`-funsigned-char`).
        DeviceName(self.raw_ref().name)
    }

    /// Ports are numbered from 1 on most devices, from 0 on switches.
    pub(crate) fn ports(&self) -> RangeInclusive<u32> {
        self.handle().ports()
    }

    /// The transport of `port`.
    pub(crate) fn port_transport(&self, port: u32) -> Transport {
        let dev = self.as_raw();
        // SAFETY: `dev` is a registered device (type invariant); the callers pass a port
        // from `self.ports()`, which the helpers index by.
        unsafe {
            if bindings::rrds_rdma_protocol_iwarp(dev, port) {
                Transport::Iwarp
            } else if bindings::rrds_rdma_protocol_roce(dev, port) {
                Transport::Roce
            } else if bindings::rrds_rdma_protocol_ib(dev, port) {
                Transport::Infiniband
            } else {
                Transport::Other
            }
        }
    }

    /// The capabilities rrds plans with.
    pub(crate) fn caps(&self) -> DeviceCaps {
        let raw = self.raw_ref();
        let attrs = &raw.attrs;
        let ports = self.ports();
        DeviceCaps {
            node_type: NodeType::from_raw(u32::from(raw.node_type)),
            // All ports of one device speak the same protocol in every driver there is;
            // the first port stands for the device.
            transport: self.port_transport(*ports.start()),
            port_count: ports.end() + 1 - ports.start(),
            max_fast_reg_page_list_len: attrs.max_fast_reg_page_list_len,
            atomic: AtomicCap::from_raw(attrs.atomic_cap),
            masked_atomic: AtomicCap::from_raw(attrs.masked_atomic_cap),
            xrc: has_cap(attrs, bindings::ib_device_cap_flags_IB_DEVICE_XRC),
            mem_mgt_extensions: has_cap(
                attrs,
                bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS,
            ),
            max_qp: attrs.max_qp,
            max_qp_wr: attrs.max_qp_wr,
            max_send_sge: attrs.max_send_sge,
            max_sge_rd: attrs.max_sge_rd,
            max_qp_rd_atom: attrs.max_qp_rd_atom,
            max_qp_init_rd_atom: attrs.max_qp_init_rd_atom,
            max_mr_size: attrs.max_mr_size,
            // SAFETY: The device is registered (type invariant).
            software: unsafe { bindings::rrds_ib_uses_virt_dma(self.as_raw()) },
        }
    }
}

fn has_cap(attrs: &bindings::ib_device_attr, cap: bindings::ib_device_cap_flags) -> bool {
    // `enum ib_device_cap_flags` is `unsigned long`, the field `u64`: same width on
    // every 64-bit architecture, which is all RDMA drivers support.
    attrs.device_cap_flags & cap as u64 != 0
}

impl NodeType {
    fn from_raw(raw: u32) -> Self {
        match raw {
            bindings::RDMA_NODE_IB_CA => Self::Ca,
            bindings::RDMA_NODE_IB_SWITCH => Self::Switch,
            bindings::RDMA_NODE_IB_ROUTER => Self::Router,
            bindings::RDMA_NODE_RNIC => Self::Rnic,
            bindings::RDMA_NODE_USNIC => Self::Usnic,
            bindings::RDMA_NODE_USNIC_UDP => Self::UsnicUdp,
            bindings::RDMA_NODE_UNSPECIFIED => Self::Unspecified,
            other => Self::Unknown(other),
        }
    }
}

impl AtomicCap {
    fn from_raw(raw: bindings::ib_atomic_cap) -> Self {
        match raw {
            bindings::ib_atomic_cap_IB_ATOMIC_NONE => Self::None,
            bindings::ib_atomic_cap_IB_ATOMIC_HCA => Self::Hca,
            bindings::ib_atomic_cap_IB_ATOMIC_GLOB => Self::Global,
            other => Self::Unknown(other),
        }
    }
}

impl fmt::Display for NodeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ca => f.write_str("ca"),
            Self::Switch => f.write_str("switch"),
            Self::Router => f.write_str("router"),
            Self::Rnic => f.write_str("rnic"),
            Self::Usnic => f.write_str("usnic"),
            Self::UsnicUdp => f.write_str("usnic_udp"),
            Self::Unspecified => f.write_str("unspecified"),
            Self::Unknown(raw) => write!(f, "unknown({raw})"),
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Infiniband => "ib",
            Self::Roce => "roce",
            Self::Iwarp => "iwarp",
            Self::Other => "other",
        })
    }
}

impl fmt::Display for AtomicCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Hca => f.write_str("hca"),
            Self::Global => f.write_str("global"),
            Self::Unknown(raw) => write!(f, "unknown({raw})"),
        }
    }
}

impl DeviceName {
    /// The name without its NUL padding.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        &self.0[..len]
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.as_bytes() {
            // Device names are printable ASCII (ib_core's name check); be safe anyway.
            let c = if b.is_ascii_graphic() { b as char } else { '?' };
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// A device found from a netdev, with the reference `ib_device_get_by_netdev`
/// took: ib_core's unregistration waits for it before any client's `remove`.
///
/// # Invariants
///
/// `device` is a registered `ib_device` on which this value owns one
/// reference; `port` is a port of it.
pub(crate) struct HeldDevice {
    device: DeviceRef,
    port: u32,
}

impl HeldDevice {
    /// The device's handle (rrds's device table is keyed by it).
    pub(crate) fn handle(&self) -> DeviceRef {
        self.device
    }

    /// The port whose netdev has the address.
    pub(crate) fn port(&self) -> u32 {
        self.port
    }
}

impl Drop for HeldDevice {
    fn drop(&mut self) {
        // SAFETY: The reference is this value's (type invariant), put once, here.
        unsafe { bindings::ib_device_put(self.device.as_ptr()) };
    }
}

/// Where a local address leads, as `rdma_bind_addr` would find it.
pub(crate) enum AddressDevice {
    /// No interface of the namespace has the address.
    NotLocal,
    /// The address is a loopback one, or its interface's device is not
    /// accessible from the namespace: no RDMA device serves it.
    NoDevice,
    /// The device (held) and port of the address's interface.
    Device(HeldDevice),
    /// An interface with no device of its own and no VLAN's real device
    /// (a plain NIC, a bond, a macvlan): only rdma_cm's own GID lookup can
    /// tell.
    Unknown,
}

/// The RDMA device of `addr` (its port ignored) in `net`, found from the
/// interface that has the address: `ib_device_get_by_netdev` on it, or on a
/// VLAN's real device (whose GID table holds the VLAN's addresses, as rxe's
/// does). An `rdma_bind_addr` probe finds the same device by scanning every
/// device's GID table under rdma_cm's global mutex, which device addition and
/// namespace exit also need. The caller keeps `net` alive.
pub(crate) fn device_of_address(net: NetRef, addr: &Endpoint) -> AddressDevice {
    if addr.is_loopback() {
        return AddressDevice::NoDevice;
    }
    let _rcu = kernel::sync::rcu::read_lock();
    let netdev = if addr.is_v4() {
        let v4 = u32::from_ne_bytes(addr.v4());
        // SAFETY: `net` is live (caller); with `devref` false the netdev is valid
        // only under the RCU read lock, held until the end of this function.
        unsafe { bindings::__ip_dev_find(net.as_ptr(), v4, false) }
    } else {
        let in6 = bindings::in6_addr {
            in6_u: bindings::in6_addr__bindgen_ty_1 {
                u6_addr8: addr.addr,
            },
        };
        // A scoped (link-local) address is looked for on its interface only.
        let scope_netdev = if addr.scope != 0 {
            let Ok(index) = i32::try_from(addr.scope) else {
                return AddressDevice::NotLocal;
            };
            // SAFETY: `net` is live (caller); the netdev is valid under the RCU read
            // lock, held until the end of this function.
            let netdev = unsafe { bindings::dev_get_by_index_rcu(net.as_ptr(), index) };
            if netdev.is_null() {
                return AddressDevice::NotLocal;
            }
            netdev
        } else {
            core::ptr::null_mut()
        };
        // SAFETY: `net` is live (caller), `in6` outlives the call, and the netdev is
        // NULL (any interface) or valid under the RCU read lock; so is the result,
        // and the lock is held until the end of this function.
        unsafe { bindings::ipv6_dev_find(net.as_ptr(), &in6, scope_netdev) }
    };
    if netdev.is_null() {
        return AddressDevice::NotLocal;
    }
    // SAFETY: `netdev` is valid under the RCU read lock (above).
    let real = unsafe { bindings::rrds_rdma_vlan_dev_real_dev(netdev) };
    for candidate in [netdev, real] {
        if candidate.is_null() {
            continue;
        }
        // SAFETY: `candidate` is a netdev valid under the RCU read lock (a VLAN's real
        // device lives as long as the VLAN).
        let device = unsafe {
            bindings::ib_device_get_by_netdev(
                candidate,
                bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
            )
        };
        // SAFETY: A non-NULL result is a registered device, held by the reference the
        // call took.
        let Some(device) = (unsafe { DeviceRef::from_raw(device) }) else {
            continue;
        };
        // SAFETY: `device` is registered and held; `net` is live.
        let accessible = unsafe { bindings::rdma_dev_access_netns(device.as_ptr(), net.as_ptr()) };
        // INVARIANT: the reference is the one `ib_device_get_by_netdev` took;
        // the port is checked below or is the first one.
        let held = HeldDevice {
            device,
            port: port_of(device, candidate),
        };
        if !accessible {
            return AddressDevice::NoDevice;
        }
        return AddressDevice::Device(held);
    }
    AddressDevice::Unknown
}

/// The port of `device` whose netdev is `netdev`, or its first port.
fn port_of(device: DeviceRef, netdev: *mut bindings::net_device) -> u32 {
    let dev = device.as_ptr();
    let mut ports = device.ports();
    let first = *ports.start();
    ports
        .find(|&port| {
            // SAFETY: `dev` is registered and `port` one of its ports; the netdev comes
            // back with a reference of its own, put at once (only its identity is used).
            let port_netdev = unsafe { bindings::ib_device_get_netdev(dev, port) };
            if port_netdev.is_null() {
                return false;
            }
            // SAFETY: The reference `ib_device_get_netdev` took.
            unsafe { bindings::rrds_dev_put(port_netdev) };
            port_netdev == netdev
        })
        .unwrap_or(first)
}
