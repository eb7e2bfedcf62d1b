//! Memory regions: user memory registered for the peer's RDMA
//! (`RDS_GET_MR` / `RDS_FREE_MR`).
//!
//! A [`MemoryRegion`] borrows its buffer mutably for as long as it is
//! registered, so the buffer can be neither freed nor moved while the peer
//! may still reach it; dropping the region frees it.

use std::io;
use std::marker::PhantomData;

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

/// The outcome of an RDMA or atomic operation (`RDS_CMSG_RDMA_STATUS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdmaStatus {
    /// The operation's `user_token`.
    pub token: u64,
    /// `RDS_RDMA_SUCCESS`, `RDS_RDMA_REMOTE_ERROR`, `RDS_RDMA_CANCELED`,
    /// `RDS_RDMA_DROPPED` or `RDS_RDMA_OTHER_ERROR` (see [`sys`]).
    pub status: i32,
}

impl RdmaStatus {
    /// Decodes the data of an `RDS_CMSG_RDMA_STATUS` cmsg.
    pub fn decode(data: &[u8]) -> Option<Self> {
        let token = u64::from_ne_bytes(data.get(..8)?.try_into().ok()?);
        let status = i32::from_ne_bytes(data.get(8..12)?.try_into().ok()?);
        Some(Self { token, status })
    }

    pub fn is_success(&self) -> bool {
        self.status == sys::RDS_RDMA_SUCCESS
    }
}

/// A registered buffer; dropping it frees the registration.
#[derive(Debug)]
pub struct MemoryRegion<'a> {
    sock: &'a RdsSocket,
    cookie: u64,
    active: bool,
    /// The registered buffer (address and length), borrowed for `'a`.
    addr: usize,
    len: usize,
    _buf: PhantomData<&'a mut [u8]>,
}

/// The `struct rds_get_mr_args` registering `buf` with `flags`; the kernel
/// writes the cookie to `cookie`.
fn get_mr_args(buf: &mut [u8], cookie: &mut u64, flags: u64) -> sys::rds_get_mr_args {
    sys::rds_get_mr_args {
        vec: sys::rds_iovec {
            addr: buf.as_mut_ptr() as u64,
            bytes: buf.len() as u64,
        },
        cookie_addr: cookie as *mut u64 as u64,
        flags,
    }
}

impl<'a> MemoryRegion<'a> {
    /// The region the kernel registered over `buf` as `cookie`.
    fn new(sock: &'a RdsSocket, cookie: u64, buf: &'a mut [u8]) -> Self {
        Self {
            sock,
            cookie,
            active: true,
            addr: buf.as_mut_ptr() as usize,
            len: buf.len(),
            _buf: PhantomData,
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
        // SAFETY: [addr + offset, addr + end) lies in the buffer this region
        // borrows mutably for its whole life, so no Rust reference aliases
        // it; only the device writes it meanwhile, and `out` is distinct.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.addr + offset) as *const u8,
                out.as_mut_ptr(),
                out.len(),
            );
        }
        Some(())
    }

    /// Frees the registration now; with `invalidate`
    /// (`RDS_RDMA_INVALIDATE`), returns once every region the socket freed
    /// is invalid on the device.
    pub fn free(mut self, invalidate: bool) -> io::Result<()> {
        self.active = false;
        let flags = if invalidate {
            sys::RDS_RDMA_INVALIDATE
        } else {
            0
        };
        self.sock.free_mr(self.cookie, flags)
    }
}

impl Drop for MemoryRegion<'_> {
    fn drop(&mut self) {
        if self.active {
            // Nothing to report to: a failure means the socket already lost it.
            let _ = self.sock.free_mr(self.cookie, 0);
        }
    }
}

impl RdsSocket {
    /// Registers `buf` for the peer's RDMA READ and WRITE (`RDS_GET_MR`)
    /// with `flags` (`RDS_RDMA_USE_ONCE`, `RDS_RDMA_INVALIDATE`, ...). The
    /// socket must be bound to an RDMA address (`ENOTCONN` unbound,
    /// `EOPNOTSUPP` on loopback).
    pub fn register_memory<'a>(
        &'a self,
        buf: &'a mut [u8],
        flags: u64,
    ) -> io::Result<MemoryRegion<'a>> {
        let mut cookie = 0u64;
        let args = get_mr_args(buf, &mut cookie, flags);
        self.setsockopt_value(sys::SOL_RDS, sys::RDS_GET_MR, &args)?;
        Ok(MemoryRegion::new(self, cookie, buf))
    }

    /// Registers `buf` as [`register_memory`](Self::register_memory) does
    /// and sends its cookie with `data` to `addr` in the same call
    /// (`RDS_CMSG_RDMA_MAP`): the peer finds it in
    /// [`Received::rdma_dest`](crate::socket::Received::rdma_dest). If the
    /// send fails, nothing stays registered.
    pub fn send_to_mapped<'a>(
        &'a self,
        data: &[u8],
        addr: std::net::SocketAddr,
        buf: &'a mut [u8],
        flags: u64,
    ) -> io::Result<MemoryRegion<'a>> {
        let mut cookie = 0u64;
        let args = get_mr_args(buf, &mut cookie, flags);
        self.send_to_cmsg(data, addr, sys::RDS_CMSG_RDMA_MAP, &args)?;
        Ok(MemoryRegion::new(self, cookie, buf))
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
    pub fn free_mr(&self, cookie: u64, flags: u64) -> io::Result<()> {
        let args = sys::rds_free_mr_args { cookie, flags };
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
        assert_eq!((s.token, s.status), (7, sys::RDS_RDMA_DROPPED));
        assert!(!s.is_success());
        assert_eq!(RdmaStatus::decode(&data[..11]), None);
    }

    #[test]
    fn cookie_splits_into_rkey_and_offset() {
        let cookie = 0x0000_0123_89ab_cdefu64;
        assert_eq!(cookie_rkey(cookie), 0x89ab_cdef);
        assert_eq!(cookie_offset(cookie), 0x123);
    }
}
