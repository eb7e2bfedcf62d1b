// SPDX-License-Identifier: GPL-2.0-only
//! Register mode: how long it takes to register `size` bytes for the peer
//! and free them again, cycle after cycle for `--duration`. The free is
//! `RDS_FREE_MR` with `RDS_RDMA_INVALIDATE`, as the crate's regions always
//! free, so a cycle includes the invalidation. The registration is
//! `RDS_GET_MR` where the implementation has it (rrds) and, where it has
//! not (in-tree RDS/IB on FRWR devices, rxe and siw), `RDS_CMSG_RDMA_MAP`
//! in a 1-byte message to the peer on a connection that is up, upstream's
//! only way there. The registering socket is the receiver's
//! (`--peer-addr`, in `--peer-netns`); the sender's socket takes the
//! mapping messages. Latencies are per cycle; the rate is cycles per
//! second.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rrds::RdmaFlags;
use rrds::RdsSocket;

use super::context;
use super::in_netns;
use super::in_tasks;
use super::is_transient;
use super::latency;
use super::latency::Measured;
use super::open_peer_socket;
use super::open_socket;
use super::rdma::page_aligned;
use super::rdma::Registered;
use super::rdma::MAPPED;
use super::rdma::MESSAGE;
use super::run_pair;
use super::Config;
use super::Kind;
use super::Sample;
use super::SLICE;
use crate::cmd::interrupt::interrupted;
use crate::cmd::stats::Recorder;

/// One register run: `--tasks` socket pairs at once, their cycles pooled.
pub(super) fn run(cfg: &Config, size: usize, run: u32) -> io::Result<Sample> {
    let tasks = in_tasks(cfg.tasks, || one_pair(cfg, size))?;
    Ok(latency::sample(&tasks, Kind::Register, size, run))
}

/// One registering socket and the peer socket its mapping messages go to.
fn one_pair(cfg: &Config, size: usize) -> io::Result<Measured> {
    let rx = open_peer_socket(cfg, MESSAGE)?;
    let tx = open_socket(cfg, cfg.addr, MESSAGE)?;
    let peer = tx.local_addr()?;
    let stop = AtomicBool::new(false);
    // siw connects the registration QP from the registering task's namespace.
    let measure = || cycles(cfg, &rx, peer, size, &stop);
    let (drained, measured) = run_pair(
        &stop,
        || discard(&tx, &stop),
        || match &cfg.peer_netns {
            Some(netns) => in_netns(netns, measure),
            None => measure(),
        },
    );
    drained?;
    measured
}

/// Registers and frees `size` page-aligned bytes on `rx` for
/// `--duration`, timing each cycle. The region owns its buffer while
/// registered, and the free (with `RDS_RDMA_INVALIDATE`) hands it back for
/// the next cycle; a page larger than `size`, it holds the region on a page
/// boundary (siw registers at most 256 pages: an unaligned 1 MiB is 257).
fn cycles(
    cfg: &Config,
    rx: &RdsSocket,
    peer: SocketAddr,
    size: usize,
    stop: &AtomicBool,
) -> io::Result<Measured> {
    let registered = Registered::probe(cfg, rx, peer)?;
    let mut measured = Measured {
        rtt: Recorder::new(),
        secs: 0.0,
        errors: 0,
    };
    let mut memory = None;
    let start = Instant::now();
    while start.elapsed() < cfg.duration && !stop.load(Ordering::Relaxed) && !interrupted() {
        // Allocated outside the cycle's time, and only again if a failed
        // map could not hand the buffer back.
        let (buf, range) = match memory.take() {
            Some(kept) => kept,
            None => page_aligned(size),
        };
        let began = Instant::now();
        let region = if registered == Registered::Map {
            match rx.send_to_mapped_range(MAPPED, peer, buf, range.clone(), RdmaFlags::empty()) {
                Ok(mapped) => mapped,
                // The peer's receive queue is full: not part of a cycle.
                Err(err) if is_transient(err.error()) => {
                    memory = err.into_buf().map(|buf| (buf, range));
                    rx.wait_writable(SLICE)?;
                    continue;
                }
                Err(err) => return Err(context(err.into(), "RDS_CMSG_RDMA_MAP")),
            }
        } else {
            rx.register_memory_range(buf, range.clone(), RdmaFlags::empty())
                .map_err(|err| context(err.into(), "RDS_GET_MR"))?
        };
        let buf = region.free().map_err(|err| context(err, "RDS_FREE_MR"))?;
        memory = Some((buf, range));
        let cycle = began.elapsed();
        measured.rtt.record(cycle);
        if let Some(meter) = &cfg.meter {
            meter.time(cycle);
        }
    }
    measured.secs = start.elapsed().as_secs_f64();
    Ok(measured)
}

/// Takes the mapping messages off `tx` until the cycles stop.
fn discard(tx: &RdsSocket, stop: &AtomicBool) -> io::Result<()> {
    let mut buf = [0u8; 16];
    while !stop.load(Ordering::Relaxed) {
        match tx.recv_from(&mut buf) {
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                tx.wait_readable(SLICE)?;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(context(err, "peer: recvmsg")),
        }
    }
    Ok(())
}
