// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Prints this network namespace's RDS connections coming up and going
//! down (`RRDS_CONN_MONITOR`, rrds only: the in-tree module answers
//! `ENOPROTOOPT`), as `rrds watch` does.
//!
//!     cargo run --example watch_connections -- [SECONDS]

use std::io;
use std::time::Duration;
use std::time::Instant;

use rrds::{ConnMonitor, RdsSocket};

fn main() -> io::Result<()> {
    let seconds: u64 = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, format!("{err}")))?,
        None => 60,
    };
    let sock = RdsSocket::new()?;
    sock.set_conn_monitor(ConnMonitor::All)?;
    let until = Instant::now() + Duration::from_secs(seconds);
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        let Some(event) = sock.recv_conn_event(left)? else {
            continue;
        };
        // "10.0.0.1 -> 10.0.0.2 tos 0: down (idle)", with events lost before it.
        println!("{event}");
    }
    Ok(())
}
