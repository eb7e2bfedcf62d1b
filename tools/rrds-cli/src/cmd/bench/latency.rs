// SPDX-License-Identifier: GPL-2.0-only
//! Latency mode: the client (bound to `--addr`) sends a `size`-byte
//! message, the server (bound to `--peer-addr`) echoes it back, the client
//! times the round trip; repeated for `--duration`; `--tasks` such pairs
//! at once. With `--ack-size` the echo (rds-stress's ack) is that many
//! bytes instead: the message's first bytes, then zeros.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use rrds::RdsSocket;

use super::context;
use super::in_tasks;
use super::no_progress;
use super::open_peer_socket;
use super::open_socket;
use super::pattern::Pattern;
use super::run_pair;
use super::summed_rate;
use super::Config;
use super::Flow;
use super::Kind;
use super::Sample;
use super::SLICE;
use crate::cmd::interrupt::interrupted;
use crate::cmd::stats::Recorder;

/// What the client measured (register mode: the registering end, a
/// cycle per "round trip").
pub(super) struct Measured {
    /// The round trips (cycles), in a histogram: bounded memory however
    /// long the run.
    pub(super) rtt: Recorder,
    pub(super) secs: f64,
    pub(super) errors: u64,
}

/// One latency run: `--tasks` client/server pairs at once, their round
/// trips pooled.
pub(super) fn run(cfg: &Config, size: usize, run: u32) -> io::Result<Sample> {
    let tasks = in_tasks(cfg.tasks, || one_pair(cfg, size))?;
    Ok(sample(&tasks, Kind::Latency, size, run))
}

/// The run's sample of `kind` from what each task measured: the tasks'
/// times pooled, their rates summed.
pub(super) fn sample(tasks: &[Measured], kind: Kind, size: usize, run: u32) -> Sample {
    let mut rtt = Recorder::new();
    for m in tasks {
        rtt.merge(&m.rtt);
    }
    let latency = rtt.latency();
    Sample {
        msgs_per_sec: summed_rate(tasks.iter().map(|m| (m.rtt.count() as f64, m.secs))),
        lat_mean_us: latency.map(|l| l.mean_us),
        lat_p50_us: latency.map(|l| l.p50_us),
        lat_p99_us: latency.map(|l| l.p99_us),
        lat_min_us: latency.map(|l| l.min_us),
        lat_p999_us: latency.map(|l| l.p999_us),
        lat_max_us: latency.map(|l| l.max_us),
        distribution: rtt.distribution(),
        errors: tasks.iter().map(|m| m.errors).sum(),
        ..Sample::empty(kind, size, run)
    }
}

/// The largest datagram either end sends or receives.
pub(super) fn largest(cfg: &Config, size: usize) -> usize {
    cfg.ack_size.map_or(size, |ack| ack.max(size))
}

/// The echo of a `size`-byte message: `--ack-size` bytes, else the
/// message's length.
fn ack_len(cfg: &Config, len: usize) -> usize {
    cfg.ack_size.unwrap_or(len)
}

/// One client/server pair, its own two sockets.
fn one_pair(cfg: &Config, size: usize) -> io::Result<Measured> {
    let server = open_peer_socket(cfg, largest(cfg, size))?;
    let client = open_socket(cfg, cfg.addr, largest(cfg, size))?;
    let server_addr = server.local_addr()?;
    let client_addr = client.local_addr()?;
    let stop = AtomicBool::new(false);
    let flow = Flow {
        cfg,
        size,
        stop: &stop,
    };
    let (served, measured) = run_pair(
        &stop,
        || serve(&flow, &server, client_addr),
        || ping_pong(&flow, &client, server_addr),
    );
    // A failed server stops the client early: its error is the cause.
    served?;
    measured
}

/// Echoes every message from `client` until stopped: the message, or its
/// first `--ack-size` bytes (followed by zeros if it is shorter).
pub(super) fn serve(flow: &Flow, sock: &RdsSocket, client: SocketAddr) -> io::Result<()> {
    let mut buf = vec![0u8; largest(flow.cfg, flow.size)];
    while !flow.stopped() {
        // Only the message's bytes are received into: past them stays 0.
        match sock.recv_from(&mut buf[..flow.size]) {
            Ok((len, from)) if from == client => {
                let len = ack_len(flow.cfg, len.min(flow.size));
                if !flow.send(sock, &buf[..len], client, "server")? {
                    break;
                }
            }
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                sock.wait_readable(SLICE)?;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(context(err, "server: recvmsg")),
        }
    }
    Ok(())
}

/// Sends `out` and waits for the echo in `back`; returns its full length.
fn round_trip(
    flow: &Flow,
    sock: &RdsSocket,
    server: SocketAddr,
    out: &[u8],
    back: &mut [u8],
) -> io::Result<usize> {
    let stopped = || io::Error::other("client: the server stopped");
    if !flow.send(sock, out, server, "client")? {
        return Err(stopped());
    }
    let deadline = Instant::now() + flow.cfg.timeout;
    loop {
        match sock.recv_from(back) {
            Ok((len, from)) if from == server => return Ok(len),
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                if flow.stopped() {
                    return Err(stopped());
                }
                let now = Instant::now();
                if now >= deadline {
                    return Err(no_progress(format!(
                        "client: no echo from the server within {:?} (lost message?)",
                        flow.cfg.timeout
                    )));
                }
                sock.wait_readable(SLICE.min(deadline - now))?;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(context(err, "client: recvmsg")),
        }
    }
}

/// Times round trips for `duration`, or until Ctrl-C.
pub(super) fn ping_pong(flow: &Flow, sock: &RdsSocket, server: SocketAddr) -> io::Result<Measured> {
    let cfg = flow.cfg;
    let pattern = Pattern::new(cfg.seed, flow.size);
    let mut out = vec![0u8; flow.size];
    let ack = ack_len(cfg, flow.size);
    // recv_from gives the full length: a longer echo shows as one.
    let mut back = vec![0u8; largest(cfg, flow.size)];
    pattern.fill(0, &mut out);
    // Untimed warm-up: the first message on a new connection waits for the
    // connection to come up.
    round_trip(flow, sock, server, &out, &mut back)?;
    let mut measured = Measured {
        rtt: Recorder::new(),
        secs: 0.0,
        errors: 0,
    };
    let start = Instant::now();
    let mut seq: u64 = 1;
    while start.elapsed() < cfg.duration && !interrupted() {
        if cfg.verify {
            pattern.fill(seq, &mut out);
        }
        let sent_at = Instant::now();
        let len = round_trip(flow, sock, server, &out, &mut back)?;
        let rtt = sent_at.elapsed();
        measured.rtt.record(rtt);
        if let Some(meter) = &cfg.meter {
            meter.time(rtt);
        }
        if len != ack || (cfg.verify && !is_echo(&out, &back[..ack])) {
            measured.errors += 1;
        }
        seq += 1;
    }
    measured.secs = start.elapsed().as_secs_f64();
    Ok(measured)
}

/// Whether `echo` is the echo of `sent`: its first bytes, then zeros.
fn is_echo(sent: &[u8], echo: &[u8]) -> bool {
    let common = sent.len().min(echo.len());
    echo[..common] == sent[..common] && echo[common..].iter().all(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_is_the_message_cut_or_padded() {
        let sent = [1u8, 2, 3, 4];
        assert!(is_echo(&sent, &sent));
        assert!(is_echo(&sent, &[1, 2]));
        assert!(is_echo(&sent, &[]));
        assert!(is_echo(&sent, &[1, 2, 3, 4, 0, 0]));
        assert!(!is_echo(&sent, &[1, 2, 3, 5]));
        assert!(!is_echo(&sent, &[1, 2, 3, 4, 0, 7]));
        assert!(!is_echo(&sent, &[2]));
    }
}
