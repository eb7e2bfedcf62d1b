// SPDX-License-Identifier: GPL-2.0

//! What a socket family's operations work on: `struct sock`, `struct
//! msghdr`, socket option values and poll requests.

// The rest of the socket-family glue: mod.rs's imports.
use super::*;

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
    pub(super) unsafe fn from_raw<'a>(sk: *mut bindings::sock) -> &'a Self {
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

    /// SO_BUSY_POLL in microseconds: how long a receive may spin on the
    /// device before it sleeps (0: never; `net.core.busy_read` by default).
    pub(crate) fn busy_poll_usec(&self) -> u32 {
        // SAFETY: Live sock (type invariant).
        unsafe { bindings::rrds_sk_busy_poll_usec(self.as_raw()) }
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
pub(crate) struct SockPtr(pub(super) *mut bindings::sock);

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
pub(crate) struct MsgHdr(pub(super) *mut bindings::msghdr);

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
    pub(super) ptr: bindings::sockptr_t,
    pub(super) len: usize,
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
///
/// # Invariants
///
/// `table` is the poll call's table, valid (or null) for the call, which
/// outlives this value.
pub(crate) struct PollRequest<'a> {
    pub(in crate::ffi) file: &'a kernel::fs::File,
    pub(in crate::ffi) table: *mut kernel::bindings::poll_table,
}

impl PollRequest<'_> {
    /// Whether poll() or select() busy-loops on the socket this call
    /// (`POLL_BUSY_LOOP`: `net.core.busy_poll` is set), calling again until
    /// something is ready or that time is up.
    pub(crate) fn busy_loop(&self) -> bool {
        // SAFETY: By the type invariant the table is the poll call's (or null, which
        // `poll_requested_events` takes), live while `self` is.
        unsafe { bindings::rrds_poll_busy_loop(self.table.cast()) }
    }

    /// Registers the wait queue `cv` with the poll table.
    pub(crate) fn wait_on(&self, cv: &kernel::sync::poll::PollCondVar) {
        // SAFETY: By the type invariant the table is the poll call's, live while
        // `self` is.
        let table = unsafe { kernel::sync::poll::PollTable::from_raw(self.table) };
        table.register_wait(self.file, cv);
    }
}
