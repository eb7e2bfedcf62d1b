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

use std::io;
use std::net::SocketAddr;

use crate::mr::RdmaStatus;
use crate::socket::RdsSocket;
use crate::sys;

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
    pub direction: Direction,
    /// The peer's cookie.
    pub cookie: u64,
    /// Where in the peer's region the operation starts.
    pub remote_offset: u64,
    /// The local memory: its whole length is moved.
    pub buf: Vec<u8>,
    /// Handed back in the outcome notification.
    pub token: u64,
    /// Extra `RDS_RDMA_*` flags: `FENCE`, `SILENT` (`READWRITE` and
    /// `NOTIFY_ME` are set for you).
    pub flags: u64,
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

    /// Takes the outcome `status` (from [`Received::rdma_status`](crate::Received))
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

impl RdsSocket {
    /// Sends `data` to `addr` carrying `op`; the peer receives `data` once
    /// the operation is done. The outcome arrives on this socket as a
    /// notification with `op.token`. Errors are the kernel's: `EINVAL` for
    /// an empty buffer or a remote range shorter than it, `EOPNOTSUPP` over
    /// loopback, ...
    pub fn send_rdma(&self, data: &[u8], addr: SocketAddr, op: RdmaOp) -> io::Result<RdmaInFlight> {
        let mut buf = op.buf;
        let local = sys::rds_iovec {
            addr: buf.as_mut_ptr() as u64,
            bytes: buf.len() as u64,
        };
        let mut flags = op.flags | sys::RDS_RDMA_NOTIFY_ME;
        if op.direction == Direction::Write {
            flags |= sys::RDS_RDMA_READWRITE;
        }
        let args = sys::rds_rdma_args {
            cookie: op.cookie,
            remote_vec: sys::rds_iovec {
                addr: op.remote_offset,
                bytes: buf.len() as u64,
            },
            local_vec_addr: &local as *const sys::rds_iovec as u64,
            nr_local: 1,
            flags,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_takes_only_its_own_outcome() {
        let op = RdmaInFlight {
            token: 7,
            buf: Some(vec![1, 2, 3]),
        };
        let other = RdmaStatus {
            token: 8,
            status: sys::RDS_RDMA_SUCCESS,
        };
        let op = op.finish(&other).expect_err("another token");
        let mine = RdmaStatus {
            token: 7,
            status: sys::RDS_RDMA_REMOTE_ERROR,
        };
        assert_eq!(op.finish(&mine).expect("its token"), vec![1, 2, 3]);
    }
}
