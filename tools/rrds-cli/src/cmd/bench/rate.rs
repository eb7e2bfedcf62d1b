// SPDX-License-Identifier: GPL-2.0-only
//! Rate mode: one sender (bound to `--addr`) streams `size`-byte messages
//! to one receiver (bound to `--peer-addr`), which counts them over
//! `--duration`; `--tasks` such pairs at once, their rates summed.
//!
//! Flow control is end to end, so the receive queue stays bounded even where
//! RDS itself does not bound it (loopback receivers never become congested,
//! so a sender would otherwise fill memory): the sender keeps at most
//! `--depth` messages beyond the receiver's last credit, and the receiver
//! sends a credit (8 bytes: the number of messages received so far, little
//! endian) every `depth / 4` messages. A credit that could not go out is
//! retried with the next message or when the receiver goes idle. No credit
//! goes out for fewer messages: a sender whose window is full has `depth`
//! messages on the way, so one is always due, and a credit per idle spell
//! would add a message per data message at low rates (the IB benchmark's
//! 8 KiB runs) that perftest, the ceiling, does not send.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use rrds::RdsSocket;

use super::context;
use super::in_tasks;
use super::is_transient;
use super::no_progress;
use super::open_peer_socket;
use super::open_socket;
use super::pattern::Pattern;
use super::run_pair;
use super::Config;
use super::Counted;
use super::Flow;
use super::Kind;
use super::Sample;
use super::SLICE;
use crate::cmd::interrupt::interrupted;

/// One rate run: `--tasks` sender/receiver pairs at once.
pub(super) fn run(cfg: &Config, size: usize, run: u32) -> io::Result<Sample> {
    let tasks = in_tasks(cfg.tasks, || one_pair(cfg, size))?;
    Ok(Counted::sample(&tasks, Kind::Rate, size, run))
}

/// One sender/receiver pair, its own two sockets.
fn one_pair(cfg: &Config, size: usize) -> io::Result<Counted> {
    let rx = open_peer_socket(cfg, size)?;
    let tx = open_socket(cfg, cfg.addr, size)?;
    let rx_addr = rx.local_addr()?;
    let tx_addr = tx.local_addr()?;
    let stop = AtomicBool::new(false);
    let flow = Flow {
        cfg,
        size,
        stop: &stop,
    };
    let (sent, counted) = run_pair(
        &stop,
        || send(&flow, &tx, rx_addr),
        || receive(&flow, &rx, tx_addr),
    );
    // A failed sender stops the receiver early: its error is the cause.
    sent?;
    counted
}

/// Sends until stopped; returns the number of messages sent.
pub(super) fn send(flow: &Flow, tx: &RdsSocket, receiver: SocketAddr) -> io::Result<u64> {
    let pattern = Pattern::new(flow.cfg.seed, flow.size);
    let mut buf = vec![0u8; flow.size];
    pattern.fill(0, &mut buf);
    let mut sent: u64 = 0;
    let mut acked: u64 = 0;
    let mut last_progress = Instant::now();
    let mut credit = [0u8; 8];
    while !flow.stopped() {
        if sent - acked >= flow.cfg.depth {
            // Window full: take a queued credit, or wait for one.
            match tx.recv_from(&mut credit) {
                Ok((8, from)) if from == receiver => {
                    let granted = u64::from_le_bytes(credit).min(sent);
                    if granted > acked {
                        acked = granted;
                        last_progress = Instant::now();
                    }
                }
                Ok(_) => {}
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    let idle = last_progress.elapsed();
                    if idle >= flow.cfg.timeout {
                        return Err(no_progress(format!(
                            "sender: no credit from the receiver for {:?} with {} messages \
                             outstanding (lost message?)",
                            flow.cfg.timeout,
                            sent - acked
                        )));
                    }
                    tx.wait_readable(SLICE.min(flow.cfg.timeout - idle))?;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(context(err, "sender: recvmsg")),
            }
            continue;
        }
        if flow.cfg.verify {
            pattern.fill(sent, &mut buf);
        }
        if !flow.send(tx, &buf, receiver, "sender")? {
            break;
        }
        sent += 1;
        if let Some(meter) = &flow.cfg.meter {
            meter.count(1, flow.size as u64);
        }
        last_progress = Instant::now();
    }
    Ok(sent)
}

/// Sends the sender a credit for `received` messages if one is due (`every`
/// messages since the last one that went out, `credited`), and records it.
/// A credit that could not go out now stays due: the receiver tries again
/// with its next message or when it goes idle.
fn credit_if_due(
    rx: &RdsSocket,
    sender: SocketAddr,
    received: u64,
    credited: &mut u64,
    every: u64,
) -> io::Result<()> {
    if received - *credited < every {
        return Ok(());
    }
    match rx.send_to(&received.to_le_bytes(), sender) {
        Ok(_) => {
            *credited = received;
            Ok(())
        }
        Err(err) if is_transient(&err) => Ok(()),
        Err(err) => Err(context(err, "receiver: sending a credit")),
    }
}

/// What the receivers' loop learns from one message: the bytes it counts
/// and the errors found in it (short, truncated, out of order, corrupt).
pub(super) struct Taken {
    pub(super) bytes: u64,
    pub(super) errors: u64,
}

/// The receivers' loop: receives into `buf` for `--duration` from the
/// first message on, hands each message from `sender` to `take` (with its
/// length, which may exceed the buffer's), and sends credits as they fall
/// due. Stops early when `stopped()` (the sender failed; run() reports its
/// error) and at Ctrl-C (the count so far stands); fails once no `unit` has
/// come for `--timeout`.
pub(super) fn receive_loop(
    cfg: &Config,
    stopped: impl Fn() -> bool,
    rx: &RdsSocket,
    sender: SocketAddr,
    buf: &mut [u8],
    unit: &str,
    mut take: impl FnMut(&[u8], usize) -> Taken,
) -> io::Result<Counted> {
    let credit_every = (cfg.depth / 4).max(1);
    let mut counted = Counted {
        msgs: 0,
        bytes: 0,
        secs: 0.0,
        errors: 0,
    };
    let mut credited: u64 = 0;
    let mut start: Option<Instant> = None;
    let mut last_progress = Instant::now();
    while !stopped() {
        let now = Instant::now();
        if interrupted() || start.is_some_and(|start| now - start >= cfg.duration) {
            break;
        }
        match rx.recv_from(buf) {
            Ok((len, from)) if from == sender => {
                let now = Instant::now();
                start.get_or_insert(now);
                last_progress = now;
                let taken = take(&buf[..len.min(buf.len())], len);
                counted.errors += taken.errors;
                counted.msgs += 1;
                counted.bytes += taken.bytes;
                credit_if_due(rx, sender, counted.msgs, &mut credited, credit_every)?;
            }
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                credit_if_due(rx, sender, counted.msgs, &mut credited, credit_every)?;
                let idle = now - last_progress;
                if idle >= cfg.timeout {
                    return Err(no_progress(format!(
                        "receiver: no {unit} for {:?} after {} {unit}s (lost message?)",
                        cfg.timeout, counted.msgs
                    )));
                }
                let mut wait = SLICE.min(cfg.timeout - idle);
                // No end until Ctrl-C: --duration 0 is Duration::MAX.
                if let Some(end) = start.and_then(|start| start.checked_add(cfg.duration)) {
                    wait = wait.min(end.saturating_duration_since(now));
                }
                rx.wait_readable(wait)?;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(context(err, "receiver: recvmsg")),
        }
    }
    counted.secs = start.map_or(0.0, |start| start.elapsed().as_secs_f64());
    Ok(counted)
}

/// Receives for `duration` from the first message on.
pub(super) fn receive(flow: &Flow, rx: &RdsSocket, sender: SocketAddr) -> io::Result<Counted> {
    let cfg = flow.cfg;
    let pattern = cfg.verify.then(|| Pattern::new(cfg.seed, flow.size));
    let mut buf = vec![0u8; flow.size];
    // Sequence number of the next message, for --verify.
    let mut expected: u64 = 0;
    receive_loop(
        cfg,
        || flow.stopped(),
        rx,
        sender,
        &mut buf,
        "message",
        |payload, len| {
            let mut errors = 0;
            if len != flow.size {
                // Truncated (longer than size) or short.
                errors += 1;
            } else if let Some(pattern) = &pattern {
                // One lost or reordered message is one error: carry on from the
                // sequence number it carries.
                if let Some(seq) = pattern.sequence(payload) {
                    errors += u64::from(seq != expected);
                    expected = seq;
                }
                errors += u64::from(!pattern.matches(expected, payload));
            }
            expected = expected.wrapping_add(1);
            Taken {
                bytes: len as u64,
                errors,
            }
        },
    )
}
