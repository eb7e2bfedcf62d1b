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

mod namespace;
mod sock;

pub(crate) use namespace::*;
pub(crate) use sock::*;

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
    // INVARIANT: `table` is the poll call's own.
    let req = unsafe {
        PollRequest {
            file: kernel::fs::File::from_raw_file(file.cast()),
            table: table.cast(),
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
