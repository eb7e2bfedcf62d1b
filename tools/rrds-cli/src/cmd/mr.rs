// SPDX-License-Identifier: GPL-2.0-only
//! `rrds mr`: register and free memory regions (`RDS_GET_MR` /
//! `RDS_FREE_MR`) through a socket bound to an RDMA address, timing each
//! call. Every free waits for the invalidation (`RDS_RDMA_INVALIDATE`), as
//! the crate's regions always do; `--invalidate` is accepted and changes
//! nothing. Against in-tree RDS on an FRWR device (rxe, siw) the first
//! registration fails with its `EOPNOTSUPP`.

use std::io;
use std::io::Write;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::time::Instant;

use clap::value_parser;
use clap::Args;
use rrds::RdmaFlags;

use super::context;
use super::json::write_record;
use super::new_socket;
use super::stats::Latency;
use super::stats::Recorder;
use serde_json::json;

#[derive(Args, Debug)]
pub struct MrArgs {
    /// Registrations (each followed by its free).
    #[arg(short = 'c', long, default_value_t = 1000, value_parser = value_parser!(u32).range(1..))]
    pub count: u32,
    /// Bytes per registration (at most 1 MiB).
    #[arg(short = 's', long, default_value_t = 4096, value_parser = value_parser!(u64).range(1..=1 << 20))]
    pub bytes: u64,
    /// Accepted for scripts that pass it: every free is RDS_FREE_MR with
    /// RDS_RDMA_INVALIDATE and waits for the invalidation.
    #[arg(long)]
    pub invalidate: bool,
    /// JSON Lines: a `meta` record, then an `mr_summary` record.
    #[arg(long)]
    pub json: bool,
    /// Local RDMA address to bind.
    #[arg(value_name = "LOCAL_ADDR")]
    pub local: IpAddr,
}

/// Runs the registrations; `Ok(true)` when all of them succeeded.
pub fn run(args: &MrArgs) -> io::Result<bool> {
    let sock = new_socket()?;
    sock.bind(SocketAddr::new(args.local, 0))
        .map_err(|e| context(e, format!("bind {}", args.local)))?;
    // The region owns the buffer while registered; freeing hands it back.
    let mut buf = vec![0u8; args.bytes as usize];
    let (mut get_rec, mut free_rec) = (Recorder::new(), Recorder::new());
    let mut keys = std::collections::HashSet::new();
    for i in 0..args.count {
        let start = Instant::now();
        let region = sock
            .register_memory(buf, RdmaFlags::empty())
            .map_err(|e| context(e.into(), format!("RDS_GET_MR #{}", i + 1)))?;
        get_rec.record(start.elapsed());
        keys.insert(rrds::mr::cookie_rkey(region.cookie()));
        let start = Instant::now();
        buf = region
            .free()
            .map_err(|e| context(e, format!("RDS_FREE_MR #{}", i + 1)))?;
        free_rec.record(start.elapsed());
    }
    let (get, free) = (get_rec.latency(), free_rec.latency());
    let mut out = io::stdout().lock();
    match (get, free, args.json) {
        (Some(g), Some(f), true) => {
            let us = |l: &Latency| {
                json!({"mean": l.mean_us, "p50": l.p50_us, "p99": l.p99_us,
                       "min": l.min_us, "p999": l.p999_us, "max": l.max_us})
            };
            let summary = json!({
                "count": args.count,
                "bytes": args.bytes,
                "invalidate": true,
                "distinct_keys": keys.len(),
                "get_mr_us": us(&g),
                "free_mr_us": us(&f),
            });
            write_record(&mut out, "mr_summary", &summary)?;
        }
        (Some(g), Some(f), false) => {
            writeln!(
                out,
                "{} registrations of {} bytes on {}, {} distinct keys",
                args.count,
                args.bytes,
                args.local,
                keys.len()
            )?;
            writeln!(
                out,
                "RDS_GET_MR  us: mean {:.1} p50 {:.1} p99 {:.1} min {:.1} p99.9 {:.1} max {:.1}",
                g.mean_us, g.p50_us, g.p99_us, g.min_us, g.p999_us, g.max_us
            )?;
            writeln!(
                out,
                "RDS_FREE_MR us: mean {:.1} p50 {:.1} p99 {:.1} min {:.1} p99.9 {:.1} max {:.1} \
                 (invalidate)",
                f.mean_us, f.p50_us, f.p99_us, f.min_us, f.p999_us, f.max_us
            )?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}
