// SPDX-License-Identifier: GPL-2.0-only
//! `rrds watch`: connection events (`RRDS_CONN_MONITOR`) as they come.

use std::io;
use std::io::Write;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::time::Duration;
use std::time::Instant;

use clap::Args;
use rrds::ConnMonitor;

use super::context;
use super::json::write_record;
use super::new_socket;

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Bind to this address (port 0), so that the socket can send and its
    /// namespace keeps listening there; by default it stays unbound.
    #[arg(short = 'I', long = "local", value_name = "LOCAL_ADDR")]
    pub local: Option<IpAddr>,
    /// Stop after this many events (default: no limit).
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Stop after this many seconds (default: no limit).
    #[arg(short = 'd', long)]
    pub duration: Option<u64>,
    /// JSON Lines: a `meta` record, then a `conn_event` record per event.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &WatchArgs) -> io::Result<bool> {
    let sock = new_socket()?;
    if let Some(local) = args.local {
        sock.bind(SocketAddr::new(local, 0))
            .map_err(|err| context(err, format_args!("bind {local}")))?;
    }
    sock.set_conn_monitor(ConnMonitor::All).map_err(|err| {
        if err.raw_os_error() == Some(libc::ENOPROTOOPT) {
            context(err, "setsockopt(RRDS_CONN_MONITOR): not rrds (the in-tree rds has no connection events)")
        } else {
            context(err, "setsockopt(RRDS_CONN_MONITOR)")
        }
    })?;
    let mut out = io::stdout().lock();
    if !args.json {
        writeln!(out, "watching the connections of this network namespace")?;
    }
    out.flush()?;
    let end = args
        .duration
        .map(|s| Instant::now() + Duration::from_secs(s));
    let mut seen = 0u64;
    while args.count.is_none_or(|c| seen < c) {
        let left = match end {
            Some(end) => match end.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left,
                _ => break,
            },
            None => Duration::from_secs(3600),
        };
        if let Some(event) = sock.recv_conn_event(left.min(Duration::from_secs(1)))? {
            if args.json {
                write_record(&mut out, "conn_event", &event)?;
            } else {
                writeln!(out, "{event}")?;
            }
            out.flush()?;
            seen += 1;
        }
    }
    Ok(true)
}
