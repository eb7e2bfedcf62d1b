// SPDX-License-Identifier: GPL-2.0

//! Socket families: `struct proto`, `struct proto_ops`, `struct net_proto_family`
//! and the `struct sock` / `struct msghdr` a family's operations work on.

use core::{
    marker::PhantomData,
    ptr, //
};
use kernel::{
    error::to_result,
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
    types::{
        ForeignOwnable,
        Opaque, //
    },
    uaccess::UserSlice,
};

use super::bindings;

/// The operations of a socket family, implemented by a type whose per-socket
/// state is `Self::State`.
///
/// All operations run in process context and may sleep, unless noted.
pub(crate) trait SocketFamily: Sized + 'static {
    /// The state of one socket; the `struct sock` holds one reference to it.
    type State: Send + Sync;

    /// The family's C tables; `register` makes them known to the kernel.
    fn tables() -> &'static FamilyTables<Self>;

    /// Creates the state of a new socket of `sock_type` and `protocol` in `net`.
    fn create(net: NetRef, sock_type: i32, protocol: i32) -> Result<Arc<Self::State>>;

    /// The socket `sk` now exists for `state` (called once, right after `create`).
    fn attach(state: &Self::State, sk: SockPtr);

    /// The socket could not be made after `create` returned `state` (no
    /// memory for it): neither `attach` nor `release` will be called.
    fn abandon(state: Arc<Self::State>);

    /// The socket is being closed: the last operation on `state` through it.
    fn release(state: Arc<Self::State>, sk: &Sock);

    fn bind(state: ArcBorrow<'_, Self::State>, sk: &Sock, addr: &[u8]) -> Result;
    fn connect(state: &Self::State, sk: &Sock, addr: &[u8]) -> Result;

    /// Writes the local (or, with `peer`, the remote) address; returns its length.
    fn getname(state: &Self::State, sk: &Sock, peer: bool, out: &mut [u8; 28]) -> Result<usize>;

    fn poll(state: &Self::State, sk: &Sock, poll: &PollRequest<'_>) -> u32;
    fn ioctl(state: &Self::State, sk: &Sock, cmd: u32, arg: usize) -> Result<i32>;
    fn setsockopt(
        state: ArcBorrow<'_, Self::State>,
        sk: &Sock,
        level: i32,
        name: i32,
        value: SockOptValue,
    ) -> Result;
    fn getsockopt(
        state: ArcBorrow<'_, Self::State>,
        sk: &Sock,
        level: i32,
        name: i32,
        value: UserSlice,
        len: usize,
    ) -> Result<GetOptResult>;
    fn sendmsg(
        state: ArcBorrow<'_, Self::State>,
        sk: &Sock,
        msg: &mut MsgHdr,
        len: usize,
    ) -> Result<usize>;
    fn recvmsg(
        state: &Self::State,
        sk: &Sock,
        msg: &mut MsgHdr,
        len: usize,
        flags: i32,
    ) -> Result<usize>;
}

/// What `getsockopt` returns: the value of the call and the length written back.
pub(crate) struct GetOptResult {
    pub(crate) ret: i32,
    pub(crate) len: usize,
}

/// A reference to the network namespace a socket lives in, used as a key.
///
/// The socket holds a reference on the namespace, so the pointer stays valid
/// for as long as any of its sockets' state exists.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct NetRef(usize);

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

/// The C tables of a socket family, built at compile time for `T`.
///
/// # Invariants
///
/// `proto`, `ops` and `family` are fully initialised and never written after
/// construction; they live in a `static`, so their addresses never change.
pub(crate) struct FamilyTables<T: SocketFamily> {
    proto: Opaque<bindings::proto>,
    ops: Opaque<bindings::proto_ops>,
    family: Opaque<bindings::net_proto_family>,
    _family: PhantomData<T>,
}

// SAFETY: The tables are immutable after construction (type invariant); the kernel
// only reads them.
unsafe impl<T: SocketFamily> Sync for FamilyTables<T> {}

/// Copies `name` into a NUL-padded `char[32]`, at compile time.
const fn proto_name(name: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < name.len() && i < 31 {
        out[i] = name[i];
        i += 1;
    }
    out
}

impl<T: SocketFamily> FamilyTables<T> {
    /// The tables for family number `family`, named `name`, owned by `module`.
    ///
    /// Every socket holds a reference on `module` through `proto_ops.owner`, so
    /// the module cannot be unloaded while one is open.
    pub(crate) const fn new(family: i32, name: &[u8], module: *mut bindings::module) -> Self {
        // SAFETY: All-zero is a valid value for these plain C structs (null pointers,
        // no callbacks); the fields that matter are set right after.
        let zero_proto: bindings::proto = unsafe { core::mem::zeroed() };
        // SAFETY: As above.
        let zero_ops: bindings::proto_ops = unsafe { core::mem::zeroed() };
        Self {
            proto: Opaque::new(bindings::proto {
                name: proto_name(name),
                owner: module,
                obj_size: core::mem::size_of::<bindings::rrds_sock>() as u32,
                ..zero_proto
            }),
            ops: Opaque::new(bindings::proto_ops {
                family,
                owner: module,
                release: Some(release_callback::<T>),
                bind: Some(bind_callback::<T>),
                connect: Some(connect_callback::<T>),
                socketpair: Some(bindings::sock_no_socketpair),
                accept: Some(bindings::sock_no_accept),
                getname: Some(getname_callback::<T>),
                poll: Some(poll_callback::<T>),
                ioctl: Some(ioctl_callback::<T>),
                listen: Some(bindings::sock_no_listen),
                shutdown: Some(bindings::sock_no_shutdown),
                setsockopt: Some(setsockopt_callback::<T>),
                getsockopt: Some(getsockopt_callback::<T>),
                sendmsg: Some(sendmsg_callback::<T>),
                recvmsg: Some(recvmsg_callback::<T>),
                mmap: Some(bindings::sock_no_mmap),
                ..zero_ops
            }),
            family: Opaque::new(bindings::net_proto_family {
                family,
                create: Some(create_callback::<T>),
                owner: module,
            }),
            _family: PhantomData,
        }
    }

    /// Registers the protocol and the family; both are unregistered when the
    /// returned registration is dropped.
    pub(crate) fn register(&'static self) -> Result<FamilyRegistration<T>> {
        // `proto.obj_size` comes from bindgen's layout: refuse to run if C disagrees.
        // SAFETY: No preconditions.
        let c_size = unsafe { bindings::rrds_sizeof_rrds_sock() };
        if c_size != core::mem::size_of::<bindings::rrds_sock>() {
            pr_err!("struct rrds_sock layout mismatch between C and bindgen\n");
            return Err(EINVAL);
        }
        // SAFETY: `proto` is initialised and lives for `'static` (type invariant).
        to_result(unsafe { bindings::proto_register(self.proto.get(), 1) })?;
        // SAFETY: `family` is initialised and lives for `'static`.
        if let Err(e) = to_result(unsafe { bindings::sock_register(self.family.get()) }) {
            // SAFETY: Registered just above.
            unsafe { bindings::proto_unregister(self.proto.get()) };
            return Err(e);
        }
        // INVARIANT: both are registered.
        Ok(FamilyRegistration { tables: self })
    }
}

/// A registered socket family.
///
/// # Invariants
///
/// `tables.proto` and `tables.family` are registered until `drop`.
pub(crate) struct FamilyRegistration<T: SocketFamily> {
    tables: &'static FamilyTables<T>,
}

impl<T: SocketFamily> Drop for FamilyRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: The family is registered (type invariant). `sock_unregister` waits for
        // concurrent `create` calls; sockets already created pin the module, so none exist
        // when the module's state is dropped.
        unsafe { bindings::sock_unregister((*self.tables.family.get()).family) };
        // SAFETY: Registered (type invariant), and no socket uses it any more.
        unsafe { bindings::proto_unregister(self.tables.proto.get()) };
    }
}

/// A `struct sock` of this family.
///
/// # Invariants
///
/// `self.0` is the `sk` of an `rrds_sock` allocated by `create_callback`, alive
/// for the lifetime of the reference.
#[repr(transparent)]
pub(crate) struct Sock(Opaque<bindings::sock>);

impl Sock {
    /// # Safety
    ///
    /// `sk` must be a live sock of this family for `'a`.
    unsafe fn from_raw<'a>(sk: *mut bindings::sock) -> &'a Self {
        // SAFETY: Transparent wrapper; validity is the caller's promise.
        unsafe { &*sk.cast() }
    }

    fn as_raw(&self) -> *mut bindings::sock {
        self.0.get()
    }

    /// Runs `f` with the socket lock held (`lock_sock`), as the kernel's socket
    /// options and ioctls expect to be serialised.
    pub(crate) fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        // SAFETY: `self` is a live sock (type invariant).
        unsafe { bindings::rrds_lock_sock(self.as_raw()) };
        let ret = f();
        // SAFETY: Locked just above.
        unsafe { bindings::release_sock(self.as_raw()) };
        ret
    }

    /// The send buffer size as SO_SNDBUF left it (the kernel doubles the user's value).
    pub(crate) fn sndbuf(&self) -> usize {
        // SAFETY: Live sock (type invariant).
        let v = unsafe { bindings::rrds_sk_sndbuf(self.as_raw()) };
        usize::try_from(v).unwrap_or(0)
    }

    /// SO_RCVTIMEO in jiffies (`MAX_SCHEDULE_TIMEOUT` when unset).
    pub(crate) fn rcvtimeo(&self) -> isize {
        // SAFETY: Live sock (type invariant).
        unsafe { bindings::rrds_sk_rcvtimeo(self.as_raw()) }
    }

    /// SO_SNDTIMEO in jiffies (`MAX_SCHEDULE_TIMEOUT` when unset).
    pub(crate) fn sndtimeo(&self) -> isize {
        // SAFETY: Live sock (type invariant).
        unsafe { bindings::rrds_sk_sndtimeo(self.as_raw()) }
    }

    /// The receive buffer size as SO_RCVBUF left it (doubled).
    pub(crate) fn rcvbuf(&self) -> usize {
        // SAFETY: Live sock (type invariant).
        let v = unsafe { bindings::rrds_sk_rcvbuf(self.as_raw()) };
        usize::try_from(v).unwrap_or(0)
    }

    /// Whether `flag` (a `SOCK_*` of `enum sock_flags`) is set.
    pub(crate) fn flag(&self, flag: u32) -> bool {
        // SAFETY: Live sock (type invariant).
        unsafe { bindings::rrds_sock_flag(self.as_raw(), flag as c_int) }
    }

    /// Sets or clears `flag`.
    pub(crate) fn set_flag(&self, flag: u32, on: bool) {
        // SAFETY: Live sock (type invariant).
        unsafe { bindings::rrds_sock_set_flag(self.as_raw(), flag as c_int, on) }
    }

    /// The inode number of the socket (what RDS_INFO reports as `inum`).
    pub(crate) fn ino(&self) -> u64 {
        // SAFETY: Live sock (type invariant).
        unsafe { bindings::rrds_sock_i_ino(self.as_raw()) }
    }
}

/// The `struct sock` of a socket, as its state keeps it.
///
/// # Invariants
///
/// `self.0` is the sock of a socket of this family; it is valid until the
/// socket's `release` returns.
#[derive(Clone, Copy)]
pub(crate) struct SockPtr(*mut bindings::sock);

// SAFETY: A sock may be used from any thread; validity is handled by `get`'s callers.
unsafe impl Send for SockPtr {}
// SAFETY: As above.
unsafe impl Sync for SockPtr {}

impl SockPtr {
    /// # Safety
    ///
    /// The socket's `release` must not have returned, and must not return
    /// while the result is used (hold a lock `release` takes after the state
    /// stops handing out this pointer).
    pub(crate) unsafe fn get<'a>(self) -> &'a Sock {
        // SAFETY: Valid per the caller's promise and the type invariant.
        unsafe { Sock::from_raw(self.0) }
    }
}

/// A `struct msghdr` of a sendmsg or recvmsg call.
///
/// # Invariants
///
/// `self.0` is valid for the duration of the call it was passed to.
pub(crate) struct MsgHdr(*mut bindings::msghdr);

impl MsgHdr {
    /// The destination given with sendto/sendmsg, as raw sockaddr bytes (empty if none).
    pub(crate) fn name(&self) -> &[u8] {
        // SAFETY: Valid msghdr (type invariant). For sendmsg the kernel copied the name
        // into kernel memory of `msg_namelen` bytes.
        unsafe {
            let m = &*self.0;
            let len = usize::try_from(m.msg_namelen).unwrap_or(0);
            if m.msg_name.is_null() || len == 0 {
                &[]
            } else {
                core::slice::from_raw_parts(m.msg_name.cast::<u8>(), len)
            }
        }
    }

    /// Sets the source address of a received message, if the caller asked for it.
    pub(crate) fn set_name(&mut self, addr: &[u8]) {
        // SAFETY: Valid msghdr; for recvmsg `msg_name`, when not null, points to a
        // `sockaddr_storage` (128 bytes), larger than any address written here.
        unsafe {
            let m = &mut *self.0;
            if !m.msg_name.is_null() && addr.len() <= 128 {
                ptr::copy_nonoverlapping(addr.as_ptr(), m.msg_name.cast::<u8>(), addr.len());
                m.msg_namelen = addr.len() as i32;
            }
        }
    }

    /// Copies the next `len` bytes (at most a page) of the caller's iovecs
    /// into the start of `page`.
    pub(crate) fn copy_page_from_user(&mut self, page: &mut Page, len: usize) -> Result {
        if len > PAGE_SIZE {
            return Err(EINVAL);
        }
        // SAFETY: Valid msghdr (type invariant); `page` is a live page of PAGE_SIZE bytes,
        // borrowed mutably (nothing else touches it), and `len <= PAGE_SIZE`. The kernel
        // crate's `struct page` is the same C type.
        let copied = unsafe {
            bindings::copy_page_from_iter(page.as_ptr().cast(), 0, len, &raw mut (*self.0).msg_iter)
        };
        if copied != len {
            return Err(EFAULT);
        }
        Ok(())
    }

    /// Copies the first `len` bytes (at most a page) of `page` to the caller's iovecs.
    pub(crate) fn copy_page_to_user(&mut self, page: &Page, len: usize) -> Result {
        if len > PAGE_SIZE {
            return Err(EINVAL);
        }
        // SAFETY: Valid msghdr (type invariant); `page` is a live page of PAGE_SIZE bytes
        // and `len <= PAGE_SIZE`. The kernel crate's `struct page` is the same C type.
        let copied = unsafe {
            bindings::copy_page_to_iter(page.as_ptr().cast(), 0, len, &raw mut (*self.0).msg_iter)
        };
        if copied != len {
            return Err(EFAULT);
        }
        Ok(())
    }

    /// How many more bytes the caller's iovecs take.
    pub(crate) fn data_left(&mut self) -> usize {
        // SAFETY: Valid msghdr (type invariant).
        unsafe { bindings::rrds_msg_data_left(self.0) }
    }

    /// Rewinds the caller's iovecs to where [`Self::data_left`] returned
    /// `left` (upstream's `iov_iter_revert` when recvmsg copied a message
    /// another reader then took).
    pub(crate) fn rewind_to(&mut self, left: usize) {
        let now = self.data_left();
        if left > now {
            // SAFETY: Valid msghdr; the iterator advanced by `left - now` bytes since
            // it had `left` left, so it can go back that far.
            unsafe { bindings::iov_iter_revert(&raw mut (*self.0).msg_iter, left - now) };
        }
    }

    /// The flags of a sendmsg call.
    pub(crate) fn flags(&self) -> u32 {
        // SAFETY: Valid msghdr.
        unsafe { (*self.0).msg_flags }
    }

    /// The control messages of a sendmsg call, as `(level, type, cmsg_len,
    /// data)`; a malformed one (upstream's `CMSG_OK` failing) is `EINVAL` and
    /// ends the walk.
    pub(crate) fn cmsgs(&self) -> impl Iterator<Item = Result<(i32, i32, usize, &[u8])>> + '_ {
        const HDR: usize = core::mem::size_of::<bindings::cmsghdr>();
        // SAFETY: Valid msghdr (type invariant). For sendmsg, the socket layer copied
        // the control buffer into kernel memory of `msg_controllen` bytes, and cleared
        // `msg_control_is_user`; a caller that did not is refused below.
        let (base, size, user) = unsafe {
            let m = &*self.0;
            let base = m.__bindgen_anon_1.msg_control.cast::<u8>().cast_const();
            let size = if base.is_null() { 0 } else { m.msg_controllen };
            (base, size, m.msg_control_is_user())
        };
        let mut at = 0usize;
        let mut done = false;
        core::iter::from_fn(move || {
            if done || at.checked_add(HDR)? > size {
                return None;
            }
            if user {
                // A user-space control buffer cannot be read as kernel memory.
                done = true;
                return Some(Err(EINVAL));
            }
            // SAFETY: `at + HDR <= size`: the header lies inside the kernel buffer;
            // `read_unaligned` needs no alignment.
            let hdr = unsafe { base.add(at).cast::<bindings::cmsghdr>().read_unaligned() };
            let len = hdr.cmsg_len;
            if len < HDR || len > size - at {
                done = true;
                return Some(Err(EINVAL));
            }
            // SAFETY: `at + len <= size`, inside the kernel buffer, which lives as
            // long as the msghdr borrowed by `self`.
            let data = unsafe { core::slice::from_raw_parts(base.add(at + HDR), len - HDR) };
            at += (len + 7) & !7;
            Some(Ok((hdr.cmsg_level, hdr.cmsg_type, len, data)))
        })
    }

    /// Appends a control message (`put_cmsg`): `MSG_CTRUNC` if it does not
    /// fit, `EFAULT` if the control buffer is bad.
    pub(crate) fn put_cmsg(&mut self, level: u32, kind: u32, data: &[u8]) -> Result {
        let len = c_int::try_from(data.len())?;
        // SAFETY: Valid msghdr of a recvmsg call; `put_cmsg` reads `len` bytes of `data`.
        to_result(unsafe {
            bindings::put_cmsg(
                self.0,
                level as c_int,
                kind as c_int,
                len,
                data.as_ptr().cast_mut().cast(),
            )
        })
    }

    /// Whether a control message of `len` data bytes fits in what is left of
    /// a recvmsg caller's control buffer (`CMSG_SPACE(len)` bytes).
    pub(crate) fn cmsg_fits(&self, len: usize) -> bool {
        const HDR: usize = core::mem::size_of::<bindings::cmsghdr>();
        let space = HDR + len.next_multiple_of(core::mem::size_of::<usize>());
        // SAFETY: Valid msghdr (type invariant).
        let room = unsafe { (*self.0).msg_controllen };
        room >= space
    }

    /// Adds `MSG_CTRUNC` to the flags reported to the caller.
    pub(crate) fn set_control_truncated(&mut self) {
        // SAFETY: Valid msghdr.
        unsafe { (*self.0).msg_flags |= bindings::MSG_CTRUNC };
    }

    /// Adds `MSG_TRUNC` to the flags reported to the caller.
    pub(crate) fn set_truncated(&mut self) {
        // SAFETY: Valid msghdr.
        unsafe { (*self.0).msg_flags |= bindings::MSG_TRUNC };
    }
}

/// The native-endian `u64` at byte `at` of a uapi struct copied in from the
/// caller (the caller checked the struct's length).
pub(crate) fn ne_u64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(b)
}

/// The value of a setsockopt call, in user or kernel memory (`sockptr_t`).
pub(crate) struct SockOptValue {
    ptr: bindings::sockptr_t,
    len: usize,
}

impl SockOptValue {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Reads the first `N` bytes of the value (the caller checked the length).
    pub(crate) fn read<const N: usize>(&self) -> Result<[u8; N]> {
        if self.len < N {
            return Err(EINVAL);
        }
        let mut out = [0u8; N];
        // SAFETY: `out` is writable for `N` bytes; `ptr` is the caller's sockptr.
        let failed =
            unsafe { bindings::rrds_copy_from_sockptr(out.as_mut_ptr().cast(), self.ptr, N) };
        if failed != 0 {
            return Err(EFAULT);
        }
        Ok(out)
    }
}

/// A poll call: the file and the poll table to register waits with.
pub(crate) struct PollRequest<'a> {
    file: &'a kernel::fs::File,
    table: kernel::sync::poll::PollTable<'a>,
}

impl PollRequest<'_> {
    /// Registers the wait queue `cv` with the poll table.
    pub(crate) fn wait_on(&self, cv: &kernel::sync::poll::PollCondVar) {
        self.table.register_wait(self.file, cv);
    }
}

fn sock_state<T: SocketFamily>(sk: *mut bindings::sock) -> *mut *mut c_void {
    // SAFETY: Every sock of this family is the first field of an `rrds_sock` (allocated
    // with `proto.obj_size = sizeof(struct rrds_sock)`).
    unsafe { &raw mut (*sk.cast::<bindings::rrds_sock>()).state }
}

/// Borrows the state of the socket `sock`.
///
/// # Safety
///
/// `sock` must be a socket of family `T` whose `release` has not run.
unsafe fn with_state<T: SocketFamily, R>(
    sock: *mut bindings::socket,
    f: impl FnOnce(ArcBorrow<'_, T::State>, &Sock) -> R,
) -> R {
    // SAFETY: A socket of this family before release has a live `sk` whose `state` was set
    // by `create_callback` from `Arc::into_foreign`.
    unsafe {
        let sk = (*sock).sk;
        let state = <Arc<T::State> as ForeignOwnable>::borrow(*sock_state::<T>(sk));
        f(state, Sock::from_raw(sk))
    }
}

fn errno<T>(r: Result<T>) -> Result<T, c_int> {
    r.map_err(|e| e.to_errno())
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.create`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn create_callback<T: SocketFamily>(
    net: *mut bindings::net,
    sock: *mut bindings::socket,
    protocol: c_int,
    kern: c_int,
) -> c_int {
    let tables = T::tables();
    // SAFETY: `sock` is the new socket the kernel is creating.
    let sock_type = i32::from(unsafe { (*sock).type_ });
    let state = match T::create(NetRef(net as usize), sock_type, protocol) {
        Ok(s) => s,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: `net` is a live namespace; `proto` is registered.
    let sk = unsafe {
        bindings::sk_alloc(
            net,
            tables.family_number(),
            kernel::bindings::GFP_KERNEL,
            tables.proto.get(),
            kern,
        )
    };
    if sk.is_null() {
        T::abandon(state);
        return ENOMEM.to_errno();
    }
    // SAFETY: `sock` and the fresh `sk` are valid; from here on `sock->sk = sk`.
    unsafe {
        (*sock).ops = tables.ops.get();
        // `sk_protocol` stays 0 (zeroed by sk_alloc): the only protocol accepted.
        bindings::sock_init_data(sock, sk);
        T::attach(&state, SockPtr(sk));
        *sock_state::<T>(sk) = state.into_foreign().cast();
    }
    0
}

impl<T: SocketFamily> FamilyTables<T> {
    fn family_number(&self) -> c_int {
        // SAFETY: Immutable after construction (type invariant).
        unsafe { (*self.family.get()).family }
    }
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.release`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn release_callback<T: SocketFamily>(sock: *mut bindings::socket) -> c_int {
    // SAFETY: The kernel calls release once per socket, after which it never calls another op.
    unsafe {
        let sk = (*sock).sk;
        if sk.is_null() {
            return 0;
        }
        let slot = sock_state::<T>(sk);
        let state = <Arc<T::State> as ForeignOwnable>::from_foreign((*slot).cast());
        *slot = ptr::null_mut();
        T::release(state, Sock::from_raw(sk));
        bindings::rrds_sock_orphan(sk);
        (*sock).sk = ptr::null_mut();
        bindings::rrds_sock_put(sk);
    }
    0
}

fn addr_bytes<'a>(addr: *mut bindings::sockaddr_unsized, len: c_int) -> Result<&'a [u8], c_int> {
    let len = usize::try_from(len).map_err(|_| EINVAL.to_errno())?;
    if addr.is_null() || len > 128 {
        return Err(EINVAL.to_errno());
    }
    // SAFETY: The socket layer copied the address into kernel memory of `len` bytes.
    Ok(unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), len) })
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.bind`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn bind_callback<T: SocketFamily>(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr_unsized,
    len: c_int,
) -> c_int {
    let addr = match addr_bytes(addr, len) {
        Ok(a) => a,
        Err(e) => return e,
    };
    // SAFETY: Called on a live socket of this family.
    unsafe { with_state::<T, _>(sock, |s, sk| errno(T::bind(s, sk, addr)).err().unwrap_or(0)) }
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.connect`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn connect_callback<T: SocketFamily>(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr_unsized,
    len: c_int,
    _flags: c_int,
) -> c_int {
    let addr = match addr_bytes(addr, len) {
        Ok(a) => a,
        Err(e) => return e,
    };
    // SAFETY: Called on a live socket of this family.
    unsafe {
        with_state::<T, _>(sock, |s, sk| {
            errno(T::connect(&s, sk, addr)).err().unwrap_or(0)
        })
    }
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.getname`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn getname_callback<T: SocketFamily>(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr,
    peer: c_int,
) -> c_int {
    let mut out = [0u8; 28];
    // SAFETY: Called on a live socket of this family.
    let r = unsafe { with_state::<T, _>(sock, |s, sk| T::getname(&s, sk, peer != 0, &mut out)) };
    match r {
        Ok(len) => {
            // SAFETY: `addr` points to a `sockaddr_storage` (128 bytes); `len <= 28`.
            unsafe { ptr::copy_nonoverlapping(out.as_ptr(), addr.cast::<u8>(), len) };
            len as c_int
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.poll`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn poll_callback<T: SocketFamily>(
    file: *mut bindings::file,
    sock: *mut bindings::socket,
    table: *mut bindings::poll_table_struct,
) -> bindings::__poll_t {
    // SAFETY: The file and poll table are valid for the duration of the poll call; the
    // kernel crate's `file` and `poll_table` are the same C types as ours.
    let req = unsafe {
        PollRequest {
            file: kernel::fs::File::from_raw_file(file.cast()),
            table: kernel::sync::poll::PollTable::from_raw(table.cast()),
        }
    };
    // SAFETY: Called on a live socket of this family.
    unsafe { with_state::<T, _>(sock, |s, sk| T::poll(&s, sk, &req)) }
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.ioctl`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn ioctl_callback<T: SocketFamily>(
    sock: *mut bindings::socket,
    cmd: c_uint,
    arg: c_ulong,
) -> c_int {
    // SAFETY: Called on a live socket of this family.
    unsafe {
        with_state::<T, _>(sock, |s, sk| match T::ioctl(&s, sk, cmd, arg) {
            Ok(v) => v,
            Err(e) => e.to_errno(),
        })
    }
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.setsockopt`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn setsockopt_callback<T: SocketFamily>(
    sock: *mut bindings::socket,
    level: c_int,
    name: c_int,
    value: bindings::sockptr_t,
    len: c_uint,
) -> c_int {
    let value = SockOptValue {
        ptr: value,
        len: len as usize,
    };
    // SAFETY: Called on a live socket of this family.
    unsafe {
        with_state::<T, _>(sock, |s, sk| {
            errno(T::setsockopt(s, sk, level, name, value))
                .err()
                .unwrap_or(0)
        })
    }
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.getsockopt`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn getsockopt_callback<T: SocketFamily>(
    sock: *mut bindings::socket,
    level: c_int,
    name: c_int,
    value: *mut c_char,
    len_ptr: *mut c_int,
) -> c_int {
    let mut len_reader = UserSlice::new(UserPtr::from_ptr(len_ptr.cast()), 4).reader();
    let len = match len_reader.read::<i32>() {
        Ok(l) => l,
        Err(e) => return e.to_errno(),
    };
    let Ok(len) = usize::try_from(len) else {
        return EINVAL.to_errno();
    };
    let value = UserSlice::new(UserPtr::from_ptr(value.cast()), len);
    // SAFETY: Called on a live socket of this family.
    let r =
        unsafe { with_state::<T, _>(sock, |s, sk| T::getsockopt(s, sk, level, name, value, len)) };
    match r {
        Ok(GetOptResult { ret, len }) => {
            let mut w = UserSlice::new(UserPtr::from_ptr(len_ptr.cast()), 4).writer();
            match w.write(&(len as i32)) {
                Ok(()) => ret,
                Err(e) => e.to_errno(),
            }
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.sendmsg`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn sendmsg_callback<T: SocketFamily>(
    sock: *mut bindings::socket,
    msg: *mut bindings::msghdr,
    len: usize,
) -> c_int {
    let mut msg = MsgHdr(msg);
    // SAFETY: Called on a live socket of this family.
    unsafe {
        with_state::<T, _>(sock, |s, sk| match T::sendmsg(s, sk, &mut msg, len) {
            Ok(n) => n as c_int,
            Err(e) => e.to_errno(),
        })
    }
}

/// # Safety
///
/// Called by the socket layer only, with the arguments of `proto_ops.recvmsg`
/// (`net_proto_family.create` for `create`).
unsafe extern "C" fn recvmsg_callback<T: SocketFamily>(
    sock: *mut bindings::socket,
    msg: *mut bindings::msghdr,
    len: usize,
    flags: c_int,
) -> c_int {
    let mut msg = MsgHdr(msg);
    // SAFETY: Called on a live socket of this family.
    unsafe {
        with_state::<T, _>(sock, |s, sk| {
            match T::recvmsg(&s, sk, &mut msg, len, flags) {
                Ok(n) => n as c_int,
                Err(e) => e.to_errno(),
            }
        })
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
