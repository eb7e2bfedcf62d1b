// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! RDMA operations carried by a datagram (`RDS_CMSG_RDMA_ARGS`): a WRITE of
//! local memory into the peer's region, or a READ of it into local memory,
//! done before the peer receives the datagram.
//!
//! The operation owns its local buffer until its outcome arrives (an
//! `RDS_CMSG_RDMA_STATUS` notification, asked for with
//! `RDS_RDMA_NOTIFY_ME`): the kernel reads (WRITE) or fills (READ) it after
//! `sendmsg` returns. [`RdmaInFlight::finish`] hands the buffer back with
//! the outcome. A handle dropped before that leaks its buffer rather than
//! let the memory be reused while the device may still write it.
//!
//! Atomics (`RDS_CMSG_ATOMIC_*`) work the same way on 8 bytes of the
//! peer's region: [`AtomicInFlight::finish`] gives the value it held
//! before. Devices without atomics (siw), and forms a device lacks (masked
//! ones on rxe), fail the send with `EOPNOTSUPP` before anything is posted.

use std::io;
use std::net::SocketAddr;
use std::os::raw::c_int;

use crate::mr::RdmaStatus;
use crate::socket::RdsSocket;
use crate::sys;

bitflags::bitflags! {
    /// `RDS_RDMA_*` flags of memory registration ([`RdsSocket::register_memory`],
    /// [`RdsSocket::send_to_mapped`]), of [`RdsSocket::free_mr`] and of
    /// operations ([`RdmaOp::flags`], [`AtomicOp::flags`]). The raw bits
    /// are the `RDS_RDMA_*` constants of [`sys`].
    ///
    /// ```
    /// use rrds::RdmaFlags;
    ///
    /// let flags = RdmaFlags::USE_ONCE | RdmaFlags::READ_ONLY;
    /// assert_eq!(flags.bits(), rrds::sys::RDS_RDMA_USE_ONCE | rrds::sys::RRDS_RDMA_READ_ONLY);
    /// assert!(flags.contains(RdmaFlags::USE_ONCE));
    /// // Bits this crate has no name for are kept, not dropped.
    /// assert_eq!(RdmaFlags::from_bits_retain(1 << 40).bits(), 1 << 40);
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct RdmaFlags: u64 {
        /// `RDS_RDMA_READWRITE`: an operation writes the peer's memory (set
        /// by [`RdsSocket::send_rdma`] for [`Direction::Write`]);
        /// accepted and ignored by registration.
        const READWRITE = sys::RDS_RDMA_READWRITE;
        /// `RDS_RDMA_FENCE`: the operation waits for earlier ones to finish.
        const FENCE = sys::RDS_RDMA_FENCE;
        /// `RDS_RDMA_INVALIDATE`: freeing waits until the key is invalid
        /// on the device (the crate always frees so).
        const INVALIDATE = sys::RDS_RDMA_INVALIDATE;
        /// `RDS_RDMA_USE_ONCE`: the region is freed as soon as the message
        /// of a peer's operation on it arrives.
        const USE_ONCE = sys::RDS_RDMA_USE_ONCE;
        /// `RDS_RDMA_DONTWAIT`: do not wait for a free MR.
        const DONTWAIT = sys::RDS_RDMA_DONTWAIT;
        /// `RDS_RDMA_NOTIFY_ME`: queue the outcome on the sending socket
        /// (always set by [`RdsSocket::send_rdma`] and
        /// [`RdsSocket::send_atomic`]).
        const NOTIFY_ME = sys::RDS_RDMA_NOTIFY_ME;
        /// `RDS_RDMA_SILENT`: no message for the peer, only the operation.
        const SILENT = sys::RDS_RDMA_SILENT;
        /// `RRDS_RDMA_READ_ONLY` (rrds extension; in-tree RDS ignores it):
        /// the region grants the peer RDMA READ only.
        const READ_ONLY = sys::RRDS_RDMA_READ_ONLY;
    }
}

/// What an [`RdmaOp`] does with the peer's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Local buffer into the peer's region (`RDS_RDMA_READWRITE`).
    Write,
    /// The peer's region into the local buffer.
    Read,
}

/// One RDMA operation on a peer's region, named by the cookie the peer
/// handed over (its `RDS_GET_MR` or an `RDS_CMSG_RDMA_DEST`).
#[derive(Debug)]
pub struct RdmaOp {
    /// A WRITE into the peer's region or a READ of it.
    pub direction: Direction,
    /// The peer's cookie.
    pub cookie: u64,
    /// Where in the peer's region the operation starts.
    pub remote_offset: u64,
    /// The local memory: its whole length is moved.
    pub buf: Vec<u8>,
    /// Handed back in the outcome notification.
    pub token: u64,
    /// Extra flags: [`RdmaFlags::FENCE`], [`RdmaFlags::SILENT`]
    /// (`NOTIFY_ME` is set for you, and `READWRITE` follows `direction`).
    pub flags: RdmaFlags,
}

/// An operation the kernel has taken; it owns the local buffer until its
/// outcome arrives.
#[derive(Debug)]
#[must_use = "dropping an operation in flight leaks its buffer"]
pub struct RdmaInFlight {
    token: u64,
    buf: Option<Vec<u8>>,
}

impl RdmaInFlight {
    /// The operation's token, as its outcome notification carries it.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Takes the outcome `status` (one of [`Received::rdma_statuses`](crate::Received::rdma_statuses))
    /// and returns the buffer: filled by the peer's bytes after a successful
    /// READ. `Err(self)` if the status is another operation's.
    pub fn finish(mut self, status: &RdmaStatus) -> Result<Vec<u8>, Self> {
        if status.token != self.token {
            return Err(self);
        }
        Ok(self.buf.take().unwrap_or_default())
    }
}

impl Drop for RdmaInFlight {
    fn drop(&mut self) {
        // The device may still read or write it: never give the memory back.
        if let Some(buf) = self.buf.take() {
            std::mem::forget(buf);
        }
    }
}

/// The `rds_rdma_args.flags` of an operation: the caller's `extra`, with
/// `NOTIFY_ME` (the buffer is handed back only with the outcome) and, for a
/// WRITE, `READWRITE`.
fn rdma_args_flags(direction: Direction, extra: RdmaFlags) -> RdmaFlags {
    let mut flags = extra | RdmaFlags::NOTIFY_ME;
    match direction {
        Direction::Write => flags |= RdmaFlags::READWRITE,
        // A READ that asked for READWRITE would write the peer's memory.
        Direction::Read => flags.remove(RdmaFlags::READWRITE),
    }
    flags
}

impl RdsSocket {
    /// Sends `data` to `addr` carrying `op`; the peer receives `data` once
    /// the operation is done. The outcome arrives on this socket as a
    /// notification with `op.token`. Errors are the kernel's: `EINVAL` for
    /// an empty buffer or a remote range shorter than it, `EOPNOTSUPP` over
    /// loopback, ...
    ///
    /// ```no_run
    /// # fn main() -> std::io::Result<()> {
    /// use std::net::SocketAddr;
    /// use rrds::rdma::Direction;
    /// use rrds::{RdmaFlags, RdmaOp, RdsSocket};
    ///
    /// let sock = RdsSocket::new()?;
    /// sock.bind("10.0.0.1:4000".parse().unwrap())?;
    /// let peer: SocketAddr = "10.0.0.2:4001".parse().unwrap();
    /// let cookie = 0x1234; // from the peer's MemoryRegion::cookie()
    /// let op = RdmaOp {
    ///     direction: Direction::Write,
    ///     cookie,
    ///     remote_offset: 0,
    ///     buf: b"written by RDMA".to_vec(),
    ///     token: 1,
    ///     flags: RdmaFlags::empty(),
    /// };
    /// let in_flight = sock.send_rdma(b"done", peer, op)?;
    /// // The outcome arrives on this socket, as a notification.
    /// let status = loop {
    ///     let got = sock.recv_msg(&mut [])?;
    ///     let mine = got.rdma_statuses.into_iter().find(|s| s.token == in_flight.token());
    ///     if let Some(status) = mine {
    ///         break status;
    ///     }
    /// };
    /// let buf = in_flight.finish(&status).expect("its own outcome");
    /// println!("{}: {} bytes back", status.status, buf.len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn send_rdma(&self, data: &[u8], addr: SocketAddr, op: RdmaOp) -> io::Result<RdmaInFlight> {
        let mut buf = op.buf;
        let local = sys::rds_iovec {
            addr: buf.as_mut_ptr() as u64,
            bytes: buf.len() as u64,
        };
        let flags = rdma_args_flags(op.direction, op.flags);
        let args = sys::rds_rdma_args {
            cookie: op.cookie,
            remote_vec: sys::rds_iovec {
                addr: op.remote_offset,
                bytes: buf.len() as u64,
            },
            local_vec_addr: &local as *const sys::rds_iovec as u64,
            nr_local: 1,
            flags: flags.bits(),
            user_token: op.token,
        };
        // The kernel copies the iovec (and pins the buffer) during the call.
        self.send_to_cmsg(data, addr, sys::RDS_CMSG_RDMA_ARGS, &args)?;
        Ok(RdmaInFlight {
            token: op.token,
            buf: Some(buf),
        })
    }
}

/// What an [`AtomicOp`] does to the peer's 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Atomic {
    /// Adds `add` (`RDS_CMSG_ATOMIC_FADD`).
    FetchAdd {
        /// What is added.
        add: u64,
    },
    /// Writes `swap` if the value is `compare` (`RDS_CMSG_ATOMIC_CSWP`).
    CompareSwap {
        /// The value expected.
        compare: u64,
        /// The value written if it was there.
        swap: u64,
    },
    /// Adds `add` with no carry out of the bits set in `nocarry_mask`
    /// (`RDS_CMSG_MASKED_ATOMIC_FADD`).
    MaskedFetchAdd {
        /// What is added.
        add: u64,
        /// Bits no carry crosses out of: the field boundaries.
        nocarry_mask: u64,
    },
    /// Compares the bits of `compare_mask`; if equal, writes the bits of
    /// `swap_mask` from `swap` (`RDS_CMSG_MASKED_ATOMIC_CSWP`).
    MaskedCompareSwap {
        /// The value expected, in the bits of `compare_mask`.
        compare: u64,
        /// The value written, in the bits of `swap_mask`.
        swap: u64,
        /// The bits compared.
        compare_mask: u64,
        /// The bits written.
        swap_mask: u64,
    },
}

impl Atomic {
    fn cmsg_type(&self) -> c_int {
        match self {
            Atomic::FetchAdd { .. } => sys::RDS_CMSG_ATOMIC_FADD,
            Atomic::CompareSwap { .. } => sys::RDS_CMSG_ATOMIC_CSWP,
            Atomic::MaskedFetchAdd { .. } => sys::RDS_CMSG_MASKED_ATOMIC_FADD,
            Atomic::MaskedCompareSwap { .. } => sys::RDS_CMSG_MASKED_ATOMIC_CSWP,
        }
    }

    /// The C union `rds_atomic_args` carries the operands in.
    fn operands(&self) -> [u64; 4] {
        match *self {
            Atomic::FetchAdd { add } => [add, 0, 0, 0],
            Atomic::CompareSwap { compare, swap } => [compare, swap, 0, 0],
            Atomic::MaskedFetchAdd { add, nocarry_mask } => [add, nocarry_mask, 0, 0],
            Atomic::MaskedCompareSwap {
                compare,
                swap,
                compare_mask,
                swap_mask,
            } => [compare, swap, compare_mask, swap_mask],
        }
    }
}

/// One atomic operation on 8 bytes of a peer's region, named by its cookie.
#[derive(Clone, Copy, Debug)]
pub struct AtomicOp {
    /// The operation and its operands.
    pub atomic: Atomic,
    /// The peer's cookie.
    pub cookie: u64,
    /// Where in the peer's region the 8 bytes are: a multiple of 8.
    pub remote_offset: u64,
    /// Handed back in the outcome notification.
    pub token: u64,
    /// Extra flags, e.g. [`RdmaFlags::SILENT`] (`NOTIFY_ME` is set for you).
    pub flags: RdmaFlags,
}

/// An atomic the kernel has taken; it owns the 8 bytes the old value lands
/// in until its outcome arrives.
#[derive(Debug)]
#[must_use = "dropping an atomic in flight leaks its result word"]
pub struct AtomicInFlight {
    token: u64,
    old: Option<Box<u64>>,
}

impl AtomicInFlight {
    /// The operation's token, as its outcome notification carries it.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Takes the outcome `status`: `Some` value the peer's 8 bytes held
    /// before the operation if it succeeded, `None` if it failed.
    /// `Err(self)` if the status is another operation's.
    pub fn finish(mut self, status: &RdmaStatus) -> Result<Option<u64>, Self> {
        if status.token != self.token {
            return Err(self);
        }
        let old = self.old.take().unwrap_or_default();
        // The device wrote the word behind the compiler's back.
        // SAFETY: `old` is a live, aligned `u64` this handle owns.
        let value = unsafe { std::ptr::read_volatile(&*old) };
        Ok(status.is_success().then_some(value))
    }
}

impl Drop for AtomicInFlight {
    fn drop(&mut self) {
        // The device may still write it: never give the memory back.
        if let Some(old) = self.old.take() {
            Box::leak(old);
        }
    }
}

impl RdsSocket {
    /// Sends `data` to `addr` carrying the atomic `op`; the peer receives
    /// `data` once the operation is done, and the outcome arrives on this
    /// socket as a notification with `op.token`. Errors are the kernel's:
    /// `EOPNOTSUPP` where the device lacks the form, `EINVAL` for an
    /// unknown cookie, ...
    pub fn send_atomic(
        &self,
        data: &[u8],
        addr: SocketAddr,
        op: AtomicOp,
    ) -> io::Result<AtomicInFlight> {
        let mut old = Box::new(0u64);
        let args = sys::rds_atomic_args {
            cookie: op.cookie,
            local_addr: std::ptr::addr_of_mut!(*old) as u64,
            remote_addr: op.remote_offset,
            operands: op.atomic.operands(),
            flags: (op.flags | RdmaFlags::NOTIFY_ME).bits(),
            user_token: op.token,
        };
        // The kernel pins the result word during the call.
        self.send_to_cmsg(data, addr, op.atomic.cmsg_type(), &args)?;
        Ok(AtomicInFlight {
            token: op.token,
            old: Some(old),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::RdmaOutcome;

    #[test]
    fn finish_takes_only_its_own_outcome() {
        let op = RdmaInFlight {
            token: 7,
            buf: Some(vec![1, 2, 3]),
        };
        let other = RdmaStatus::new(8, RdmaOutcome::Success);
        let op = op.finish(&other).expect_err("another token");
        let mine = RdmaStatus::new(7, RdmaOutcome::RemoteError);
        assert_eq!(op.finish(&mine).expect("its token"), vec![1, 2, 3]);
    }

    #[test]
    fn operations_always_ask_for_their_outcome() {
        let read = rdma_args_flags(Direction::Read, RdmaFlags::FENCE | RdmaFlags::READWRITE);
        assert_eq!(read, RdmaFlags::FENCE | RdmaFlags::NOTIFY_ME);
        let write = rdma_args_flags(Direction::Write, RdmaFlags::SILENT);
        assert_eq!(
            write.bits(),
            sys::RDS_RDMA_SILENT | sys::RDS_RDMA_NOTIFY_ME | sys::RDS_RDMA_READWRITE
        );
    }

    #[test]
    fn flags_are_the_raw_bits() {
        let named = [
            (RdmaFlags::READWRITE, sys::RDS_RDMA_READWRITE),
            (RdmaFlags::FENCE, sys::RDS_RDMA_FENCE),
            (RdmaFlags::INVALIDATE, sys::RDS_RDMA_INVALIDATE),
            (RdmaFlags::USE_ONCE, sys::RDS_RDMA_USE_ONCE),
            (RdmaFlags::DONTWAIT, sys::RDS_RDMA_DONTWAIT),
            (RdmaFlags::NOTIFY_ME, sys::RDS_RDMA_NOTIFY_ME),
            (RdmaFlags::SILENT, sys::RDS_RDMA_SILENT),
            (RdmaFlags::READ_ONLY, sys::RRDS_RDMA_READ_ONLY),
        ];
        for (flag, raw) in named {
            assert_eq!(flag.bits(), raw);
            assert_eq!(RdmaFlags::from_bits(raw), Some(flag));
        }
        assert_eq!(RdmaFlags::all().bits(), 0x1_0000_007f);
        assert_eq!(RdmaFlags::default(), RdmaFlags::empty());
        assert_eq!(RdmaFlags::from_bits(1 << 7), None);
        assert_eq!(RdmaFlags::from_bits_retain(1 << 7).bits(), 1 << 7);
        assert_eq!(
            RdmaFlags::from_bits_truncate(0xff),
            RdmaFlags::from_bits(0x7f).unwrap()
        );
    }

    #[test]
    fn atomics_fill_the_c_union() {
        let cswp = Atomic::MaskedCompareSwap {
            compare: 1,
            swap: 2,
            compare_mask: 3,
            swap_mask: 4,
        };
        assert_eq!(cswp.operands(), [1, 2, 3, 4]);
        assert_eq!(cswp.cmsg_type(), sys::RDS_CMSG_MASKED_ATOMIC_CSWP);
        let fadd = Atomic::MaskedFetchAdd {
            add: 5,
            nocarry_mask: 6,
        };
        assert_eq!(fadd.operands(), [5, 6, 0, 0]);
        assert_eq!(fadd.cmsg_type(), sys::RDS_CMSG_MASKED_ATOMIC_FADD);
        assert_eq!(Atomic::FetchAdd { add: 7 }.operands(), [7, 0, 0, 0]);
        assert_eq!(
            Atomic::CompareSwap {
                compare: 8,
                swap: 9
            }
            .cmsg_type(),
            sys::RDS_CMSG_ATOMIC_CSWP
        );
    }

    #[test]
    fn atomic_finish_gives_the_old_value_on_success_only() {
        let done = |status| {
            let op = AtomicInFlight {
                token: 3,
                old: Some(Box::new(41)),
            };
            op.finish(&RdmaStatus::new(3, status)).expect("its token")
        };
        assert_eq!(done(RdmaOutcome::Success), Some(41));
        assert_eq!(done(RdmaOutcome::RemoteError), None);
    }
}
