// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Memory regions: user memory registered for the peer's RDMA
//! (`RDS_GET_MR` / `RDS_FREE_MR`).
//!
//! A [`MemoryRegion`] owns its buffer (a `Vec<u8>`) for as long as the peer
//! may reach it, and frees the registration with `RDS_RDMA_INVALIDATE`
//! before it lets the memory go: [`MemoryRegion::free`] hands the buffer
//! back only once the kernel has said the key is invalid on the device, and
//! dropping the region does the same and then frees the buffer. When the
//! kernel cannot say so, the buffer is leaked rather than reused while the
//! device may still write it (as [`RdmaInFlight`](crate::RdmaInFlight)
//! does). Nothing in safe code, `mem::forget` included, can give the
//! memory back to the allocator while a peer holding the cookie could
//! write it.
//!
//! A failed registration returns a [`RegisterError`], which carries the
//! buffer back.

use std::fmt;
use std::io;
use std::ops::Range;

use crate::rdma::RdmaFlags;
use crate::socket::RdsSocket;
use crate::sys;

/// The cookie's rkey (its low 32 bits).
pub fn cookie_rkey(cookie: u64) -> u32 {
    cookie as u32
}

/// The cookie's offset of the registered buffer in its first page.
pub fn cookie_offset(cookie: u64) -> u32 {
    (cookie >> 32) as u32
}

/// How an RDMA or atomic operation ended (`rds_rdma_notify.status`, the
/// `RDS_RDMA_*` status values of [`sys`]).
///
/// ```
/// use rrds::RdmaOutcome;
///
/// assert_eq!(RdmaOutcome::from_raw(rrds::sys::RDS_RDMA_DROPPED), RdmaOutcome::Dropped);
/// assert_eq!(RdmaOutcome::from_raw(42), RdmaOutcome::Unknown(42));
/// assert_eq!(RdmaOutcome::Unknown(42).as_raw(), 42);
/// assert!(RdmaOutcome::Success.is_success());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum RdmaOutcome {
    /// `RDS_RDMA_SUCCESS`: done (for a WRITE over iWARP: the data left).
    Success,
    /// `RDS_RDMA_REMOTE_ERROR`: the peer's device refused the key, e.g. a
    /// freed, invalidated or read-only region.
    RemoteError,
    /// `RDS_RDMA_CANCELED`: its message was cancelled first
    /// ([`RdsSocket::cancel_sent_to`]).
    Canceled,
    /// `RDS_RDMA_DROPPED`: the connection failed before the operation
    /// completed; it is not run again.
    Dropped,
    /// `RDS_RDMA_OTHER_ERROR`: any other failure.
    OtherError,
    /// A status this crate does not know.
    Unknown(i32),
}

impl RdmaOutcome {
    /// The outcome a raw `RDS_RDMA_*` status names.
    pub fn from_raw(raw: i32) -> Self {
        match raw {
            sys::RDS_RDMA_SUCCESS => Self::Success,
            sys::RDS_RDMA_REMOTE_ERROR => Self::RemoteError,
            sys::RDS_RDMA_CANCELED => Self::Canceled,
            sys::RDS_RDMA_DROPPED => Self::Dropped,
            sys::RDS_RDMA_OTHER_ERROR => Self::OtherError,
            other => Self::Unknown(other),
        }
    }

    /// The raw `RDS_RDMA_*` status.
    pub fn as_raw(self) -> i32 {
        match self {
            Self::Success => sys::RDS_RDMA_SUCCESS,
            Self::RemoteError => sys::RDS_RDMA_REMOTE_ERROR,
            Self::Canceled => sys::RDS_RDMA_CANCELED,
            Self::Dropped => sys::RDS_RDMA_DROPPED,
            Self::OtherError => sys::RDS_RDMA_OTHER_ERROR,
            Self::Unknown(raw) => raw,
        }
    }

    /// Whether the operation succeeded.
    pub fn is_success(self) -> bool {
        self == Self::Success
    }
}

impl fmt::Display for RdmaOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Success => f.write_str("success"),
            Self::RemoteError => f.write_str("remote error"),
            Self::Canceled => f.write_str("canceled"),
            Self::Dropped => f.write_str("dropped"),
            Self::OtherError => f.write_str("other error"),
            Self::Unknown(raw) => write!(f, "status {raw}"),
        }
    }
}

/// The outcome notification of an RDMA or atomic operation
/// (`RDS_CMSG_RDMA_STATUS`), as [`Received::rdma_statuses`](crate::Received::rdma_statuses)
/// reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RdmaStatus {
    /// The operation's `user_token` ([`RdmaOp::token`](crate::RdmaOp::token)).
    pub token: u64,
    /// How it ended.
    pub status: RdmaOutcome,
}

impl RdmaStatus {
    /// The notification of operation `token` that ended with `status`, as
    /// the kernel would deliver it (for tests of code that handles them).
    pub fn new(token: u64, status: RdmaOutcome) -> Self {
        Self { token, status }
    }

    /// Decodes the data of an `RDS_CMSG_RDMA_STATUS` cmsg (`struct
    /// rds_rdma_notify`); `None` if it is too short.
    pub fn decode(data: &[u8]) -> Option<Self> {
        let token = u64::from_ne_bytes(data.get(..8)?.try_into().ok()?);
        let status = i32::from_ne_bytes(data.get(8..12)?.try_into().ok()?);
        Some(Self {
            token,
            status: RdmaOutcome::from_raw(status),
        })
    }

    /// Whether the operation succeeded.
    pub fn is_success(&self) -> bool {
        self.status.is_success()
    }
}

/// A buffer registered for the peer's RDMA, owned until it is freed.
///
/// The region owns its `Vec<u8>`, so the memory stays allocated, and is
/// used by nothing else, for as long as the registration may be valid. It
/// never makes a `&[u8]` or `&mut [u8]` of that memory while the peer may
/// write it: [`copy_out`](Self::copy_out) copies with raw pointers.
///
/// Freeing always invalidates: [`free`](Self::free) and `Drop` send
/// `RDS_FREE_MR` with `RDS_RDMA_INVALIDATE`, which returns once every
/// region the socket freed is invalid on the device. If that fails (the
/// kernel already dropped the region: an `RDS_RDMA_USE_ONCE` region the
/// peer used, or a socket error), they flush (`RDS_FREE_MR` of cookie 0,
/// which waits for the same). Only then does the buffer go back to the
/// caller ([`free`](Self::free)) or to the allocator (`Drop`); if the flush
/// fails too, the buffer is leaked: the device may still write it.
///
/// `mem::forget` (or a reference cycle) is sound: the buffer is forgotten
/// with the region, so its memory is never freed or reused, and the device
/// can write it for as long as the key stays valid (until the socket is
/// closed) without touching anything else. Only the memory leaks.
#[must_use = "dropping a region frees it at once"]
pub struct MemoryRegion<'a> {
    sock: &'a RdsSocket,
    cookie: u64,
    /// The buffer; `None` only while [`free`](Self::free) runs (then the
    /// buffer is handed back or leaked, and `Drop` has nothing to do).
    buf: Option<Vec<u8>>,
    /// The registered bytes: `len` of them from `start` in `buf`.
    start: usize,
    len: usize,
}

// Not derived: a derived `Debug` would print the buffer through a `&[u8]`
// the device may be writing.
impl fmt::Debug for MemoryRegion<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("cookie", &format_args!("{:#x}", self.cookie))
            .field("start", &self.start)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// A registration that failed, with the buffer it was given.
///
/// The buffer is `None` only where a send that mapped it
/// ([`RdsSocket::send_to_mapped`]) failed after the kernel registered it,
/// and the kernel could not confirm that registration invalid: the buffer
/// is leaked then, as a region's would be.
#[derive(Debug)]
pub struct RegisterError {
    error: io::Error,
    buf: Option<Vec<u8>>,
}

impl RegisterError {
    /// A failure that leaves nothing registered: `buf` goes back.
    fn returning(error: io::Error, buf: Vec<u8>) -> Self {
        Self {
            error,
            buf: Some(buf),
        }
    }

    /// The kernel's error (or `InvalidInput` for a range outside the
    /// buffer).
    pub fn error(&self) -> &io::Error {
        &self.error
    }

    /// The buffer back, unless it had to be leaked.
    pub fn into_buf(self) -> Option<Vec<u8>> {
        self.buf
    }

    /// The error and the buffer.
    pub fn into_parts(self) -> (io::Error, Option<Vec<u8>>) {
        (self.error, self.buf)
    }
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for RegisterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// The error alone; the buffer, which nothing can reach, is freed.
impl From<RegisterError> for io::Error {
    fn from(err: RegisterError) -> Self {
        err.error
    }
}

/// The `InvalidInput` error for a `range` that is not within `len` bytes.
fn check_range(range: &Range<usize>, len: usize) -> io::Result<()> {
    if range.start > range.end || range.end > len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("range {range:?} is not within the {len}-byte buffer"),
        ));
    }
    Ok(())
}

/// The `struct rds_get_mr_args` registering `range` of `buf` with `flags`;
/// the kernel writes the cookie to `cookie`. `range` is within `buf`.
fn get_mr_args(
    buf: &mut Vec<u8>,
    range: &Range<usize>,
    cookie: &mut u64,
    flags: RdmaFlags,
) -> sys::rds_get_mr_args {
    sys::rds_get_mr_args {
        vec: sys::rds_iovec {
            // Not a slice: the Vec's pointer, without a reference to its bytes.
            addr: buf.as_mut_ptr().wrapping_add(range.start) as u64,
            bytes: range.len() as u64,
        },
        cookie_addr: cookie as *mut u64 as u64,
        flags: flags.bits(),
    }
}

/// No cookie: an offset in the first page is below 4096, so a real cookie
/// never has all of its high bits set.
const NO_COOKIE: u64 = u64::MAX;

/// Frees `cookie` with `free_mr` (`RdsSocket::free_mr`) so that the device
/// can no longer reach its memory: `RDS_FREE_MR` with
/// `RDS_RDMA_INVALIDATE`, and if that fails, a flush (cookie 0), which
/// waits for every region the socket freed to be invalid. The error is the
/// first call's if both fail.
fn invalidate(
    cookie: u64,
    mut free_mr: impl FnMut(u64, RdmaFlags) -> io::Result<()>,
) -> io::Result<()> {
    free_mr(cookie, RdmaFlags::INVALIDATE)
        .or_else(|err| free_mr(0, RdmaFlags::empty()).map_err(|_| err))
}

/// `buf` back if `invalidated` succeeded; leaked otherwise, since the
/// device may still write it.
fn give_back(buf: Vec<u8>, invalidated: io::Result<()>) -> io::Result<Vec<u8>> {
    match invalidated {
        Ok(()) => Ok(buf),
        Err(err) => {
            std::mem::forget(buf);
            Err(err)
        }
    }
}

impl<'a> MemoryRegion<'a> {
    /// The region the kernel registered over `range` of `buf` as `cookie`.
    fn new(sock: &'a RdsSocket, cookie: u64, buf: Vec<u8>, range: Range<usize>) -> Self {
        Self {
            sock,
            cookie,
            buf: Some(buf),
            start: range.start,
            len: range.len(),
        }
    }
}

impl MemoryRegion<'_> {
    /// The cookie to hand to the peer (`rkey | offset << 32`).
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    /// Registered bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the region's bytes from `offset` into `out`: what the peer's
    /// RDMA has written so far. Bytes the device writes during the copy may
    /// be old or new. `None` if the range is outside the region.
    pub fn copy_out(&self, offset: usize, out: &mut [u8]) -> Option<()> {
        let end = offset.checked_add(out.len())?;
        if end > self.len {
            return None;
        }
        // Not a slice: the Vec's pointer, without a reference to its bytes.
        let base = self.buf.as_ref()?.as_ptr();
        // SAFETY: [start + offset, start + end) lies in the buffer this
        // region owns (the registered range is within it), which no Rust
        // reference covers while the region lives; only the device writes
        // it meanwhile, and `out` is distinct memory.
        unsafe {
            std::ptr::copy_nonoverlapping(
                base.add(self.start + offset),
                out.as_mut_ptr(),
                out.len(),
            );
        }
        Some(())
    }

    /// Frees the registration and hands the buffer back (the whole `Vec`
    /// given to the registration, with what the peer wrote): once
    /// `RDS_FREE_MR` with `RDS_RDMA_INVALIDATE` returned, or, if it failed
    /// (`EINVAL` once the kernel dropped a used `RDS_RDMA_USE_ONCE`
    /// region), once a flush did. If the flush fails too, the buffer is
    /// leaked and the error is `RDS_FREE_MR`'s.
    pub fn free(mut self) -> io::Result<Vec<u8>> {
        let buf = self.buf.take().unwrap_or_default();
        give_back(buf, self.invalidate())
    }

    fn invalidate(&self) -> io::Result<()> {
        invalidate(self.cookie, |cookie, flags| {
            self.sock.free_mr(cookie, flags)
        })
    }
}

impl Drop for MemoryRegion<'_> {
    /// Frees the registration as [`free`](Self::free) does, then the
    /// buffer; leaks the buffer if the kernel could not invalidate it.
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            // Nothing to report to: the buffer leaks if this failed.
            let _ = give_back(buf, self.invalidate());
        }
    }
}

impl RdsSocket {
    /// Registers all of `buf` for the peer's RDMA READ and WRITE
    /// (`RDS_GET_MR`) with `flags` (`RDS_RDMA_USE_ONCE`, ...); the region
    /// owns `buf` until it is freed. The socket must be bound to an RDMA
    /// address (`ENOTCONN` unbound, `EOPNOTSUPP` on loopback). On failure
    /// nothing is registered and the error carries `buf` back.
    ///
    /// ```no_run
    /// # fn main() -> std::io::Result<()> {
    /// use rrds::{RdmaFlags, RdsSocket};
    ///
    /// let sock = RdsSocket::new()?;
    /// sock.bind("10.0.0.2:4001".parse().unwrap())?; // an RDMA device's address
    /// let region = match sock.register_memory(vec![0u8; 65536], RdmaFlags::empty()) {
    ///     Ok(region) => region,
    ///     Err(failed) => {
    ///         let (error, _buf) = failed.into_parts(); // the buffer comes back
    ///         return Err(error);
    ///     }
    /// };
    /// // The peer needs the cookie for its RDMA: send it over.
    /// sock.send_to(&region.cookie().to_le_bytes(), "10.0.0.1:4000".parse().unwrap())?;
    /// // ... once the peer said it wrote:
    /// let mut head = [0u8; 16];
    /// region.copy_out(0, &mut head).expect("within the region");
    /// let buf = region.free()?; // invalid on the device before it comes back
    /// # let _ = buf;
    /// # Ok(())
    /// # }
    /// ```
    pub fn register_memory(
        &self,
        buf: Vec<u8>,
        flags: RdmaFlags,
    ) -> Result<MemoryRegion<'_>, RegisterError> {
        let all = 0..buf.len();
        self.register_memory_range(buf, all, flags)
    }

    /// Registers `range` of `buf`, as [`register_memory`](Self::register_memory)
    /// does all of it: for a region at a chosen place in its pages, e.g.
    /// page-aligned in a buffer a page larger than the region. The region
    /// owns all of `buf`; offsets ([`copy_out`](MemoryRegion::copy_out),
    /// the peer's) count from `range.start`. A `range` outside `buf` is
    /// `InvalidInput`.
    pub fn register_memory_range(
        &self,
        mut buf: Vec<u8>,
        range: Range<usize>,
        flags: RdmaFlags,
    ) -> Result<MemoryRegion<'_>, RegisterError> {
        if let Err(error) = check_range(&range, buf.len()) {
            return Err(RegisterError::returning(error, buf));
        }
        let mut cookie = 0u64;
        let args = get_mr_args(&mut buf, &range, &mut cookie, flags);
        match self.setsockopt_value(sys::SOL_RDS, sys::RDS_GET_MR, &args) {
            Ok(()) => Ok(MemoryRegion::new(self, cookie, buf, range)),
            // A failed RDS_GET_MR leaves nothing registered.
            Err(error) => Err(RegisterError::returning(error, buf)),
        }
    }

    /// Registers `buf` as [`register_memory`](Self::register_memory) does
    /// and sends its cookie with `data` to `addr` in the same call
    /// (`RDS_CMSG_RDMA_MAP`): the peer finds it in
    /// [`Received::rdma_dest`](crate::socket::Received::rdma_dest).
    ///
    /// If the send fails, no region is left: one the kernel registered
    /// before the send failed is freed with `RDS_RDMA_INVALIDATE` (rrds has
    /// freed it already; then a flush waits for its invalidation) before
    /// the error carries `buf` back. If that cannot be confirmed, `buf` is
    /// leaked (the error's buffer is `None`).
    pub fn send_to_mapped(
        &self,
        data: &[u8],
        addr: std::net::SocketAddr,
        buf: Vec<u8>,
        flags: RdmaFlags,
    ) -> Result<MemoryRegion<'_>, RegisterError> {
        let all = 0..buf.len();
        self.send_to_mapped_range(data, addr, buf, all, flags)
    }

    /// Maps `range` of `buf` in a send, as [`send_to_mapped`](Self::send_to_mapped)
    /// does all of it; `range` as for
    /// [`register_memory_range`](Self::register_memory_range).
    pub fn send_to_mapped_range(
        &self,
        data: &[u8],
        addr: std::net::SocketAddr,
        mut buf: Vec<u8>,
        range: Range<usize>,
        flags: RdmaFlags,
    ) -> Result<MemoryRegion<'_>, RegisterError> {
        if let Err(error) = check_range(&range, buf.len()) {
            return Err(RegisterError::returning(error, buf));
        }
        let mut cookie = NO_COOKIE;
        let args = get_mr_args(&mut buf, &range, &mut cookie, flags);
        let error = match self.send_to_cmsg(data, addr, sys::RDS_CMSG_RDMA_MAP, &args) {
            Ok(_) => return Ok(MemoryRegion::new(self, cookie, buf, range)),
            Err(error) => error,
        };
        // The kernel writes the cookie once it registered the memory: the
        // send failed after that (rrds frees the region then, in-tree RDS
        // keeps it), so it is freed here and waited for.
        let buf = if cookie == NO_COOKIE {
            Some(buf)
        } else {
            let invalidated = invalidate(cookie, |cookie, flags| self.free_mr(cookie, flags));
            give_back(buf, invalidated).ok()
        };
        Err(RegisterError { error, buf })
    }

    /// Sends `data` to `addr` with the cookie of `region`, one of this
    /// socket's (`RDS_CMSG_RDMA_DEST`; `EINVAL` if the kernel does not
    /// know it).
    pub fn send_to_with_region(
        &self,
        data: &[u8],
        addr: std::net::SocketAddr,
        region: &MemoryRegion<'_>,
    ) -> io::Result<usize> {
        self.send_to_cmsg(data, addr, sys::RDS_CMSG_RDMA_DEST, &region.cookie)
    }

    /// `RDS_FREE_MR` of a raw cookie; cookie 0 flushes (waits for every
    /// freed region's invalidation and releases the device's unused MRs).
    pub fn free_mr(&self, cookie: u64, flags: RdmaFlags) -> io::Result<()> {
        let args = sys::rds_free_mr_args {
            cookie,
            flags: flags.bits(),
        };
        self.setsockopt_value(sys::SOL_RDS, sys::RDS_FREE_MR, &args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdma_status_decodes_token_and_status() {
        let mut data = [0u8; 16];
        data[..8].copy_from_slice(&7u64.to_ne_bytes());
        data[8..12].copy_from_slice(&sys::RDS_RDMA_DROPPED.to_ne_bytes());
        let s = RdmaStatus::decode(&data).unwrap();
        assert_eq!((s.token, s.status), (7, RdmaOutcome::Dropped));
        assert!(!s.is_success());
        assert_eq!(RdmaStatus::decode(&data[..11]), None);
        data[8..12].copy_from_slice(&99i32.to_ne_bytes());
        let s = RdmaStatus::decode(&data).unwrap();
        assert_eq!(s, RdmaStatus::new(7, RdmaOutcome::Unknown(99)));
        assert_eq!(s.status.to_string(), "status 99");
    }

    #[test]
    fn rdma_outcomes_round_trip() {
        let known = [
            (sys::RDS_RDMA_SUCCESS, RdmaOutcome::Success),
            (sys::RDS_RDMA_REMOTE_ERROR, RdmaOutcome::RemoteError),
            (sys::RDS_RDMA_CANCELED, RdmaOutcome::Canceled),
            (sys::RDS_RDMA_DROPPED, RdmaOutcome::Dropped),
            (sys::RDS_RDMA_OTHER_ERROR, RdmaOutcome::OtherError),
        ];
        for (raw, outcome) in known {
            assert_eq!(RdmaOutcome::from_raw(raw), outcome);
            assert_eq!(outcome.as_raw(), raw);
            assert_eq!(outcome.is_success(), raw == sys::RDS_RDMA_SUCCESS);
        }
        for raw in [-1, 5, i32::MAX] {
            assert_eq!(RdmaOutcome::from_raw(raw), RdmaOutcome::Unknown(raw));
            assert_eq!(RdmaOutcome::from_raw(raw).as_raw(), raw);
            assert!(!RdmaOutcome::from_raw(raw).is_success());
        }
        assert_eq!(RdmaOutcome::RemoteError.to_string(), "remote error");
    }

    #[test]
    fn cookie_splits_into_rkey_and_offset() {
        let cookie = 0x0000_0123_89ab_cdefu64;
        assert_eq!(cookie_rkey(cookie), 0x89ab_cdef);
        assert_eq!(cookie_offset(cookie), 0x123);
    }

    /// The `RDS_FREE_MR` calls `invalidate` makes, each answered by `answer`.
    fn free_calls(answers: &[Option<i32>]) -> (io::Result<()>, Vec<(u64, RdmaFlags)>) {
        let mut calls = Vec::new();
        let outcome = invalidate(0x1234, |cookie, flags| {
            calls.push((cookie, flags));
            match answers.get(calls.len() - 1).copied().flatten() {
                None => Ok(()),
                Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            }
        });
        (outcome, calls)
    }

    #[test]
    fn freeing_invalidates_then_flushes_if_that_fails() {
        let inv = (0x1234, RdmaFlags::INVALIDATE);
        let (outcome, calls) = free_calls(&[None]);
        assert!(outcome.is_ok());
        assert_eq!(calls, [inv]);
        // A USE_ONCE region the kernel already dropped: the flush waits.
        let (outcome, calls) = free_calls(&[Some(libc::EINVAL), None]);
        assert!(outcome.is_ok());
        assert_eq!(calls, [inv, (0, RdmaFlags::empty())]);
        let (outcome, calls) = free_calls(&[Some(libc::EINVAL), Some(libc::ETIMEDOUT)]);
        assert_eq!(
            outcome.err().and_then(|e| e.raw_os_error()),
            Some(libc::EINVAL)
        );
        assert_eq!(calls, [inv, (0, RdmaFlags::empty())]);
    }

    #[test]
    fn the_buffer_comes_back_only_once_invalid() {
        assert_eq!(
            give_back(vec![1, 2, 3], Ok(())).expect("invalid"),
            [1, 2, 3]
        );
        // Leaked: 3 bytes of this test's memory.
        let err = give_back(vec![4, 5, 6], Err(io::Error::from_raw_os_error(libc::EIO)));
        assert_eq!(err.err().and_then(|e| e.raw_os_error()), Some(libc::EIO));
    }

    #[test]
    fn ranges_must_lie_in_the_buffer() {
        assert!(check_range(&(0..0), 0).is_ok());
        assert!(check_range(&(5..4101), 8192).is_ok());
        assert!(check_range(&(0..8192), 8192).is_ok());
        let err = check_range(&(4097..8193), 8192).expect_err("past the end");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = 9..3;
        assert!(check_range(&backwards, 8192).is_err());
    }

    #[test]
    fn the_sentinel_is_never_a_cookie() {
        // A cookie's offset is within its first page.
        assert!(cookie_offset(NO_COOKIE) as usize >= 4096);
    }

    #[test]
    fn a_failed_registration_carries_the_buffer_back() {
        let failed =
            RegisterError::returning(io::Error::from_raw_os_error(libc::ENOTCONN), vec![7; 4]);
        assert_eq!(failed.error().raw_os_error(), Some(libc::ENOTCONN));
        assert_eq!(
            failed.to_string(),
            io::Error::from_raw_os_error(libc::ENOTCONN).to_string()
        );
        let (error, buf) = failed.into_parts();
        assert_eq!(buf, Some(vec![7; 4]));
        let failed = RegisterError { error, buf: None };
        assert_eq!(io::Error::from(failed).raw_os_error(), Some(libc::ENOTCONN));
    }

    #[test]
    fn get_mr_args_describe_the_range() {
        let mut buf = vec![0u8; 64];
        let mut cookie = 0u64;
        let base = buf.as_ptr() as u64;
        let args = get_mr_args(&mut buf, &(5..21), &mut cookie, RdmaFlags::USE_ONCE);
        assert_eq!((args.vec.addr, args.vec.bytes), (base + 5, 16));
        assert_eq!(args.cookie_addr, &cookie as *const u64 as u64);
        assert_eq!(args.flags, sys::RDS_RDMA_USE_ONCE);
    }
}
