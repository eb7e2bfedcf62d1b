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

#![warn(missing_docs)]

mod addr;
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
