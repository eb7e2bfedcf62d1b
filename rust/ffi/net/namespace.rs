// SPDX-License-Identifier: GPL-2.0

//! Network namespaces: `NetRef`, their addresses, `pernet_operations`
//! and per-namespace sysctls.

// The rest of the socket-family glue: mod.rs's imports.
use super::*;

/// A network namespace, used as a key, counting no reference (upstream's
/// `rds_conn_net` counts none either: a counted one held by a connection
/// would keep the namespace from exiting, and the passive count is not
/// exported to modules).
///
/// # Invariants
///
/// The namespace is live while a socket of it exists (each holds a
/// reference), during its pernet callbacks, and always for `init_net`;
/// rrds's state keyed by it is torn down within that (design.rst,
/// "NetRef").
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct NetRef(pub(super) usize);

impl NetRef {
    /// The namespace, for C calls that take a `struct net *` (rdma_cm).
    pub(crate) fn as_ptr(self) -> *mut bindings::net {
        self.0 as *mut bindings::net
    }

    /// The key of a namespace the caller knows to be live.
    pub(crate) fn from_ptr(net: *mut bindings::net) -> Self {
        Self(net as usize)
    }

    /// The initial namespace, which lives as long as the kernel.
    pub(crate) fn init_net() -> Self {
        // SAFETY: Returns the address of the static `init_net`; no other effect.
        Self::from_ptr(unsafe { bindings::rrds_init_net() })
    }
}

/// Most addresses [`addresses`] reports: a namespace with more has the
/// rest left out.
pub(crate) const MAX_ADDRESSES: usize = 1024;

/// The addresses of `net`'s interfaces as IPv6 ones (IPv4 mapped) but
/// host- and link-scoped ones (loopback, fe80::) and tentative IPv6 ones,
/// at most [`MAX_ADDRESSES`]. The caller keeps `net` alive.
pub(crate) fn addresses(net: NetRef) -> Result<KVec<[u8; 16]>> {
    let mut capacity = 16;
    loop {
        let mut out = KVec::with_capacity(capacity, GFP_KERNEL)?;
        let mut found = 0;
        let mut add = |addr: [u8; 16]| {
            found += 1;
            // Counted when there is no room: the next pass makes it.
            let _ = out.push_within_capacity(addr);
        };
        {
            let _rcu = kernel::sync::rcu::read_lock();
            // SAFETY: `net` is live (caller), and the RCU read lock is held across
            // the walk, as for_each_netdev_rcu, in_dev_for_each_ifa_rcu and
            // addrconf's walks of `addr_list` require.
            let mut dev = unsafe { bindings::rrds_first_netdev_rcu(net.as_ptr()) };
            while !dev.is_null() {
                // SAFETY: `dev` is a netdev of `net`, valid under the RCU read lock.
                let mut ifa = unsafe { bindings::rrds_first_ifa_rcu(dev) };
                while !ifa.is_null() {
                    // SAFETY: `ifa` is an address of `dev`, valid under the RCU read lock.
                    let (local, scope) = unsafe { ((*ifa).ifa_local, (*ifa).ifa_scope) };
                    if u32::from(scope) != bindings::rt_scope_t_RT_SCOPE_HOST {
                        add(crate::addr::v4_mapped(local.to_ne_bytes()));
                    }
                    // SAFETY: As above.
                    ifa = unsafe { bindings::rrds_next_ifa_rcu(ifa) };
                }
                // SAFETY: As above.
                let mut ifa6 = unsafe { bindings::rrds_first_ifa6_rcu(dev) };
                while !ifa6.is_null() {
                    // SAFETY: `ifa6` is an IPv6 address of `dev`, valid under the RCU
                    // read lock; `addr` is 16 bytes whatever union view is read.
                    let (addr, scope, flags) =
                        unsafe { ((*ifa6).addr.in6_u.u6_addr8, (*ifa6).scope, (*ifa6).flags) };
                    // Global scope only (0); IFA_HOST, IFA_LINK and IFA_SITE are not.
                    if scope == 0 && flags & bindings::IFA_F_TENTATIVE == 0 {
                        add(addr);
                    }
                    // SAFETY: As above.
                    ifa6 = unsafe { bindings::rrds_next_ifa6_rcu(dev, ifa6) };
                }
                // SAFETY: As above.
                dev = unsafe { bindings::rrds_next_netdev_rcu(dev) };
            }
        }
        if found <= capacity || capacity >= MAX_ADDRESSES {
            return Ok(out);
        }
        capacity = (found + 16).min(MAX_ADDRESSES);
    }
}

/// Work to do when a network namespace comes and goes.
pub(crate) trait NetExit: 'static {
    /// `net` was created (or existed when the operations were registered).
    /// An error fails the namespace's creation (or the registration).
    /// Process context.
    fn init(_net: NetRef) -> Result {
        Ok(())
    }

    /// `net` is exiting: no socket of it is left. Process context.
    fn exit(net: NetRef);
}

/// A `struct pernet_operations` whose `exit` calls `T::exit`.
///
/// # Invariants
///
/// Lives in a `static`; only the kernel writes it (its list head), between
/// `register` and the registration's drop.
pub(crate) struct PernetOps<T: NetExit> {
    ops: Opaque<bindings::pernet_operations>,
    _exit: PhantomData<T>,
}

// SAFETY: The kernel serialises its writes (pernet_ops_rwsem); rrds never touches the struct.
unsafe impl<T: NetExit> Sync for PernetOps<T> {}

impl<T: NetExit> PernetOps<T> {
    pub(crate) const fn new() -> Self {
        // SAFETY: All-zero is a valid `pernet_operations` (no callbacks, empty fields).
        let zero: bindings::pernet_operations = unsafe { core::mem::zeroed() };
        Self {
            ops: Opaque::new(bindings::pernet_operations {
                init: Some(net_init_callback::<T>),
                exit: Some(net_exit_callback::<T>),
                ..zero
            }),
            _exit: PhantomData,
        }
    }

    /// Registers the operations; `T::exit` then runs for every namespace that
    /// exits, and for all remaining ones when the registration is dropped.
    pub(crate) fn register(&'static self) -> Result<PernetRegistration<T>> {
        // SAFETY: `ops` is initialised and `'static` (type invariant).
        to_result(unsafe { bindings::register_pernet_subsys(self.ops.get()) })?;
        // INVARIANT: registered just above.
        Ok(PernetRegistration { ops: self })
    }
}

/// Registered pernet operations.
///
/// # Invariants
///
/// `ops` is registered until `drop`.
pub(crate) struct PernetRegistration<T: NetExit> {
    ops: &'static PernetOps<T>,
}

impl<T: NetExit> Drop for PernetRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: Registered (type invariant); this calls `exit` for every namespace.
        unsafe { bindings::unregister_pernet_subsys(self.ops.ops.get()) };
    }
}

/// # Safety
///
/// Called by the namespace code only, with a namespace being set up.
unsafe extern "C" fn net_init_callback<T: NetExit>(net: *mut bindings::net) -> c_int {
    match T::init(NetRef(net as usize)) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the namespace code only, with a namespace that is exiting.
unsafe extern "C" fn net_exit_callback<T: NetExit>(net: *mut bindings::net) {
    T::exit(NetRef(net as usize));
}

/// One unsigned-int sysctl of a namespace, `/proc/sys/<path>/<name>`
/// (`proc_douintvec`, mode 0644: writable by the namespace's
/// CAP_NET_ADMIN), registered until dropped.
///
/// # Invariants
///
/// `header` is the registration of `table`, whose one entry's `data` is
/// `value`; both live in this box until `drop` unregisters them.
pub(crate) struct NetUintSysctl {
    value: Opaque<c_uint>,
    table: Opaque<[bindings::ctl_table; 1]>,
    header: *mut bindings::ctl_table_header,
}

// SAFETY: `value` is read with a volatile load and written only by the proc
// handler; the header is used only to unregister.
unsafe impl Send for NetUintSysctl {}
// SAFETY: As above.
unsafe impl Sync for NetUintSysctl {}

impl NetUintSysctl {
    /// Registers `/proc/sys/<path>/<name>` in `net`, starting at `initial`.
    pub(crate) fn register(
        net: NetRef,
        path: &'static CStr,
        name: &'static CStr,
        initial: u32,
    ) -> Result<Pin<KBox<Self>>> {
        // SAFETY: All-zero is a valid `ctl_table` (no handler, no data).
        let zero: bindings::ctl_table = unsafe { core::mem::zeroed() };
        let mut this = KBox::new(
            Self {
                value: Opaque::new(initial),
                table: Opaque::new([zero]),
                header: ptr::null_mut(),
            },
            GFP_KERNEL,
        )?;
        let entry = bindings::ctl_table {
            procname: name.as_char_ptr(),
            data: this.value.get().cast(),
            maxlen: core::mem::size_of::<c_uint>() as c_int,
            mode: 0o644,
            proc_handler: Some(bindings::proc_douintvec),
            ..zero
        };
        // SAFETY: The box is not shared yet; `table` is valid for writes.
        unsafe { this.table.get().cast::<bindings::ctl_table>().write(entry) };
        // SAFETY: `net` is live (the caller's pernet init); `path` and the table
        // live as long as the registration (the box outlives it, see `drop`).
        let header = unsafe {
            bindings::register_net_sysctl_sz(
                net.as_ptr(),
                path.as_char_ptr(),
                this.table.get().cast(),
                1,
            )
        };
        if header.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: `header` registers `table`, whose data is `value`.
        this.header = header;
        Ok(KBox::into_pin(this))
    }

    /// The value now.
    pub(crate) fn get(&self) -> u32 {
        // SAFETY: `value` is valid; a racing write by the proc handler is a
        // whole aligned u32, and either value is fine to read.
        unsafe { ptr::read_volatile(self.value.get()) }
    }
}

impl Drop for NetUintSysctl {
    fn drop(&mut self) {
        // SAFETY: Registered in `register` (type invariant); after this no
        // handler runs on `table` or `value`.
        unsafe { bindings::unregister_net_sysctl_table(self.header) };
    }
}
