// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! A safe API over RDS sockets (`PF_RDS`, `<linux/rds.h>`).
//!
//! It works the same against the in-tree `rds` module and against rrds:
//! both implement the one ABI described in [`sys`]. [`RdsSocket`] owns a
//! socket and wraps its system calls; [`info`] decodes `RDS_INFO_*` tables
//! (counters, sockets, connections, queued messages, IB connections).
//!
//! ```no_run
//! use rrds::RdsSocket;
//!
//! # fn main() -> std::io::Result<()> {
//! let a = RdsSocket::new()?;
//! let b = RdsSocket::new()?;
//! a.bind("127.0.0.1:0".parse().unwrap())?;
//! b.bind("127.0.0.1:0".parse().unwrap())?;
//! a.send_to(b"hello", b.local_addr()?)?;
//! let mut buf = [0u8; 16];
//! let (len, from) = b.recv_from(&mut buf)?;
//! assert_eq!((&buf[..len], from), (&b"hello"[..], a.local_addr()?));
//! # Ok(())
//! # }
//! ```
//!
//! Beyond one datagram per call: [`RdsSocket::send_to_vectored`] and
//! [`RdsSocket::recv_msg_vectored`] gather and scatter one datagram over
//! several buffers, and [`RdsSocket::send_batch`] and
//! [`RdsSocket::recv_batch`] move several datagrams per call ([`batch`]).
//!
//! # Async I/O (feature `tokio`)
//!
//! With the `tokio` feature, `AsyncRdsSocket` puts a socket on tokio's
//! reactor (`tokio::io::unix::AsyncFd`): `send_to`, `recv_msg` and the
//! others are `async`, waiting with `readable().await` or
//! `writable().await` and a non-blocking call in `try_io`. The feature is
//! off by default; without it the crate depends on `libc` and `bitflags`
//! only.
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # async fn demo() -> std::io::Result<()> {
//! use rrds::AsyncRdsSocket;
//!
//! let sock = AsyncRdsSocket::bind("127.0.0.1:4000".parse().unwrap())?;
//! let mut buf = [0u8; 9000];
//! loop {
//!     let got = sock.recv_msg(&mut buf).await?;
//!     match got.from {
//!         Some(from) => {
//!             sock.send_to(&buf[..got.len.min(buf.len())], from).await?;
//!         }
//!         None => println!("a notification: {got:?}"),
//!     }
//! }
//! # }
//! ```
//!
//! RDS is not UDP, and two of its ways trip up a readiness-based event
//! loop:
//!
//! - **Congestion is not `POLLOUT`.** A receiver that holds more than half
//!   its receive buffer marks its port congested, and a send to that port
//!   from a non-blocking socket fails with `ENOBUFS` (a blocking one waits
//!   in the kernel), however much send-buffer room there is. Waiting for
//!   writability does not help: in-tree RDS reports `POLLOUT` whenever the
//!   send buffer has room, so the wait returns at once and the send fails
//!   again, in a busy loop; rrds withholds `POLLOUT` from a socket refused
//!   for a port until the port clears, but the wake-up for that comes on
//!   the port's congestion map, a wait queue epoll never hears of (epoll
//!   queues itself only once, when the socket is registered; in-tree's
//!   congestion wake-up, `rds_poll_waitq`, is the same story), so the wait
//!   may last for ever. `AsyncRdsSocket` therefore waits out `ENOBUFS` on
//!   a timer: it tries again after 1 ms, the wait doubling up to 64 ms,
//!   until the send goes (and a wait for writability gives up after
//!   100 ms and tries anyway). A send then goes at most 64 ms after the
//!   port clears, and a send that waits costs about 16 wake-ups a second.
//!   The alternative, `RDS_CONG_MONITOR`, tells of a cleared port with a
//!   notification on the *receive* queue: the sending task would have to
//!   take it from there, taking the datagrams and other notifications in
//!   front of it from the application's receiver (or depend on a receiver
//!   running and handing it over); it names ports modulo 64 only; and it
//!   is a setting of the socket the application may want for itself. A
//!   congested port gives no error however long it stays so: bound a send
//!   with `tokio::time::timeout` where the receiver may never drain.
//! - **Notifications share the receive queue with data.** RDMA outcomes
//!   (`RDS_CMSG_RDMA_STATUS`), congestion updates (`RDS_CONG_MONITOR`),
//!   rrds's connection and XRC events all arrive as 0-byte receives
//!   ([`Received`] with `from: None`), in line with the datagrams, and make
//!   the socket readable like them. A task that waits for one kind takes
//!   whatever comes first: give each socket one receiving task that
//!   looks at every [`Received`] and dispatches, rather than separate
//!   tasks for data and for notifications. [`RdsSocket::recv_from`] (and
//!   the async one) report a notification as an `InvalidData` error, and
//!   it is gone: use `recv_msg` wherever notifications may come. In-tree
//!   RDS also reports the socket readable after any congestion map update
//!   with nothing to read; the receive then says `WouldBlock` and
//!   `AsyncRdsSocket` waits on.
#![warn(missing_docs)]

mod addr;
#[cfg(feature = "tokio")]
mod async_socket;
pub mod batch;
pub mod conn_events;
pub mod info;
pub mod mr;
pub mod rdma;
pub mod rxpath;
mod socket;
pub mod sys;
pub mod xrc;

use std::path::Path;

#[cfg(feature = "tokio")]
pub use async_socket::AsyncRdsSocket;
pub use conn_events::ConnEvent;
pub use conn_events::ConnEventKind;
pub use conn_events::ConnMonitor;
pub use conn_events::DownReason;
pub use info::ConnectionInfo;
pub use info::Counter;
pub use info::IbConnectionInfo;
pub use info::MessageInfo;
pub use info::SocketInfo;
pub use mr::MemoryRegion;
pub use mr::RdmaOutcome;
pub use mr::RdmaStatus;
pub use mr::RegisterError;
pub use rdma::Atomic;
pub use rdma::AtomicInFlight;
pub use rdma::AtomicOp;
pub use rdma::RdmaFlags;
pub use rdma::RdmaInFlight;
pub use rdma::RdmaOp;
pub use rxpath::RxPathLatency;
pub use rxpath::RxPathSpan;
pub use socket::RdsSocket;
pub use socket::Received;
pub use socket::Transport;
pub use xrc::XrcEvent;
pub use xrc::XrcInitiator;
pub use xrc::XrcRegistration;

/// Which RDS implementation is loaded: `"rrds"` if `/sys/module/rrds`
/// exists, else `"rds"` if `/sys/module/rds` does, else `None`.
pub fn loaded_implementation() -> Option<&'static str> {
    loaded_implementation_in(Path::new("/sys/module"))
}

fn loaded_implementation_in(modules: &Path) -> Option<&'static str> {
    ["rrds", "rds"]
        .into_iter()
        .find(|name| modules.join(name).exists())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn implementation_prefers_rrds_then_rds() {
        let dir = std::env::temp_dir().join(format!("rrds-impl-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(loaded_implementation_in(&dir), None);
        fs::create_dir(dir.join("rds")).unwrap();
        assert_eq!(loaded_implementation_in(&dir), Some("rds"));
        fs::create_dir(dir.join("rrds")).unwrap();
        assert_eq!(loaded_implementation_in(&dir), Some("rrds"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
