//! Register mode: how long it takes to register `size` bytes for the peer
//! and free them again (`RDS_FREE_MR`, no flags), cycle after cycle for
//! `--duration`. The registration is `RDS_GET_MR` where the implementation
//! has it (rrds) and, where it has not (in-tree RDS/IB on FRWR devices,
//! rxe and siw), `RDS_CMSG_RDMA_MAP` in a 1-byte message to the peer on a
//! connection that is up, upstream's only way there. The registering socket
//! is the receiver's (`--peer-addr`, in `--peer-netns`); the sender's socket
//! takes the mapping messages. Latencies are per cycle; the rate is cycles
//! per second.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rrds::RdsSocket;

use super::context;
use super::in_netns;
use super::in_tasks;
use super::is_transient;
use super::latency;
use super::latency::Measured;
use super::open_peer_socket;
use super::open_socket;
use super::rdma::Registered;
use super::rdma::MAPPED;
use super::rdma::MESSAGE;
use super::rdma::PAGE;
use super::run_pair;
use super::Config;
use super::Kind;
use super::Sample;
use super::SLICE;

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
    let mut memory = vec![0u8; size + PAGE];
    let skip = memory.as_ptr().align_offset(PAGE);
    let region = &mut memory[skip..skip + size];
    // siw connects the registration QP from the registering task's namespace.
    let mut measure = || cycles(cfg, &rx, peer, region, &stop);
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

/// Registers and frees `region` on `rx` for `--duration`, timing each cycle.
fn cycles(
    cfg: &Config,
    rx: &RdsSocket,
    peer: SocketAddr,
    region: &mut [u8],
    stop: &AtomicBool,
) -> io::Result<Measured> {
    let registered = Registered::probe(cfg, rx, peer)?;
    let mut measured = Measured {
        rtt_ns: Vec::new(),
        secs: 0.0,
        errors: 0,
    };
    let start = Instant::now();
    while start.elapsed() < cfg.duration && !stop.load(Ordering::Relaxed) {
        let began = Instant::now();
        if registered == Registered::Map {
            match rx.send_to_mapped(MAPPED, peer, region, 0) {
                Ok(mapped) => drop(mapped),
                // The peer's receive queue is full: not part of a cycle.
                Err(err) if is_transient(&err) => {
                    rx.wait_writable(SLICE)?;
                    continue;
                }
                Err(err) => return Err(context(err, "RDS_CMSG_RDMA_MAP")),
            }
        } else {
            drop(
                rx.register_memory(region, 0)
                    .map_err(|err| context(err, "RDS_GET_MR"))?,
            );
        }
        measured.rtt_ns.push(began.elapsed().as_nanos() as u64);
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
