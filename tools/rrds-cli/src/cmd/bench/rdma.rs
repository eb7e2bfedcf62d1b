// SPDX-License-Identifier: GPL-2.0-only
//! RDMA modes: the sender moves `size` bytes per operation by RDMA WRITE
//! into, or READ from, memory the receiver registered (`RDS_GET_MR`), each
//! operation carried by an 8-byte message (its sequence number, little
//! endian) that the peer receives once the operation is done. The receiver
//! counts the messages over `--duration`; the rate is the operations' bytes.
//!
//! The receiver registers `--depth` regions of `size` bytes, one per slot;
//! operation `seq` uses slot `seq % depth`. Credits, as in rate mode, keep
//! the sender at most `depth` operations ahead of what the receiver has
//! counted, so an operation never reuses a slot before the receiver checked
//! the previous one. The sender owns one local buffer per operation in
//! flight and gets it back with the operation's outcome
//! (`RDS_RDMA_NOTIFY_ME`). With `--verify`, a WRITE's bytes are checked by
//! the receiver in its region, a READ's by the sender in its buffer (the
//! regions hold a known pattern per slot); any outcome but success is an
//! error. Credits go out every `depth / 4` operations only, as in rate mode.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use rrds::rdma::Direction;
use rrds::MemoryRegion;
use rrds::RdmaFlags;
use rrds::RdmaInFlight;
use rrds::RdmaOp;
use rrds::RdsSocket;

use super::context;
use super::in_netns;
use super::in_tasks;
use super::is_transient;
use super::no_progress;
use super::open_peer_socket;
use super::open_socket;
use super::pattern::Pattern;
use super::rate::receive_loop;
use super::rate::Taken;
use super::run_pair;
use super::Config;
use super::Counted;
use super::Kind;
use super::Sample;
use super::SLICE;

pub(super) const PAGE: usize = 4096;
/// The messages carry a sequence number only.
pub(super) const MESSAGE: usize = 8;

/// What both ends share.
pub(super) struct Flow<'a> {
    cfg: &'a Config,
    size: usize,
    direction: Direction,
    pattern: Pattern,
    stop: &'a AtomicBool,
}

impl<'a> Flow<'a> {
    pub(super) fn new(
        cfg: &'a Config,
        size: usize,
        direction: Direction,
        stop: &'a AtomicBool,
    ) -> Self {
        Flow {
            cfg,
            size,
            direction,
            pattern: Pattern::new(cfg.seed, size),
            stop,
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn slots(&self) -> u64 {
        self.cfg.depth
    }

    /// Registers a page-aligned region of `size` bytes per slot on `rx`,
    /// holding the slot's pattern for READs. siw registers at most 256
    /// pages, which an unaligned 1 MiB would exceed, and a `Vec` is not
    /// page-aligned in general (glibc puts its chunk header in front of a
    /// large allocation), so each region owns a buffer a page larger and
    /// registers the aligned `size` bytes in it ([`page_aligned`]). siw
    /// connects the registration QP from the registering task's namespace:
    /// `netns` is the receiver's, if not ours.
    ///
    /// In-tree RDS/IB has no `RDS_GET_MR` on FRWR devices (rxe, siw: ENODEV
    /// or EOPNOTSUPP), only `RDS_CMSG_RDMA_MAP` on a connection that is up,
    /// which registers on that connection's QP. Where GET_MR is ENODEV or
    /// EOPNOTSUPP, the regions are mapped by messages to `sender` instead
    /// (their cookies reach it as `RDS_CMSG_RDMA_DEST`, which
    /// [`drain_mapped`] takes): `Registered::Map`.
    pub(super) fn register<'s>(
        &self,
        rx: &'s RdsSocket,
        netns: Option<&Path>,
        sender: SocketAddr,
    ) -> io::Result<(Vec<MemoryRegion<'s>>, Registered)> {
        let slots: Vec<(Vec<u8>, Range<usize>)> = (0..self.slots())
            .map(|slot| {
                let (mut buf, range) = page_aligned(self.size);
                if self.direction == Direction::Read {
                    self.pattern.fill(slot, &mut buf[range.clone()]);
                }
                (buf, range)
            })
            .collect();
        if slots.is_empty() {
            return Ok((Vec::new(), Registered::GetMr));
        }
        let register = || -> io::Result<(Vec<MemoryRegion<'s>>, Registered)> {
            let registered = Registered::probe(self.cfg, rx, sender)?;
            let regions = slots
                .into_iter()
                .map(|(buf, range)| match registered {
                    Registered::GetMr => rx
                        .register_memory_range(buf, range, RdmaFlags::empty())
                        .map_err(|err| context(err.into(), "receiver: RDS_GET_MR")),
                    Registered::Map => rx
                        .send_to_mapped_range(MAPPED, sender, buf, range, RdmaFlags::empty())
                        .map_err(|err| context(err.into(), "receiver: RDS_CMSG_RDMA_MAP")),
                })
                .collect::<io::Result<Vec<MemoryRegion<'_>>>>()?;
            Ok((regions, registered))
        };
        match netns {
            Some(netns) => in_netns(netns, register),
            None => register(),
        }
    }
}

/// A buffer of `size` bytes and a page more, and the range of `size` bytes
/// in it that starts on a page: the regions are registered there (see
/// [`Flow::register`]).
pub(super) fn page_aligned(size: usize) -> (Vec<u8>, Range<usize>) {
    let buf = vec![0u8; size + PAGE];
    let skip = buf.as_ptr().align_offset(PAGE).min(PAGE);
    (buf, skip..skip + size)
}

/// Maps a probe region in a message to `sender` until that works:
/// in-tree RDS/IB answers ENODEV until the connection (which the first
/// attempt starts) is up.
fn wait_until_mappable(cfg: &Config, rx: &RdsSocket, sender: SocketAddr) -> io::Result<()> {
    let since = Instant::now();
    loop {
        // The probe region is freed again at once.
        match rx
            .send_to_mapped(MAPPED, sender, vec![0u8; PAGE], RdmaFlags::empty())
            .map_err(io::Error::from)
        {
            Ok(_) => return Ok(()),
            // ENODEV until the connection is up; EOPNOTSUPP (no RDMA transport) stays.
            Err(err) if err.raw_os_error() == Some(libc::ENODEV) || is_transient(&err) => {
                if since.elapsed() >= cfg.timeout {
                    return Err(context(
                        err,
                        "receiver: RDS_CMSG_RDMA_MAP, connection not up",
                    ));
                }
                // A plain message starts the connection where the failed
                // map did not.
                let _ = rx.send_to(MAPPED, sender);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(err) => return Err(context(err, "receiver: RDS_CMSG_RDMA_MAP")),
        }
    }
}

/// How the receiver registers its regions.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Registered {
    /// `RDS_GET_MR`.
    GetMr,
    /// `RDS_CMSG_RDMA_MAP` in messages to the sender (in-tree RDS/IB).
    Map,
}

impl Registered {
    /// How `rx` can register: `GetMr` if a probe GET_MR works, else (ENODEV
    /// or EOPNOTSUPP: in-tree RDS/IB on an FRWR device) `Map`, once a probe
    /// map to `sender` shows the connection is up.
    pub(super) fn probe(cfg: &Config, rx: &RdsSocket, sender: SocketAddr) -> io::Result<Self> {
        // The probe region is freed again at once.
        let refused = rx
            .register_memory(vec![0u8; PAGE], RdmaFlags::empty())
            .err()
            .map(io::Error::from);
        match refused {
            None => Ok(Self::GetMr),
            Some(err) if no_get_mr(&err) => {
                wait_until_mappable(cfg, rx, sender)?;
                Ok(Self::Map)
            }
            Some(err) => Err(context(err, "receiver: RDS_GET_MR")),
        }
    }
}

/// The payload of the receiver's mapping messages (and of its probes),
/// shorter than the credit messages the sender counts.
pub(super) const MAPPED: &[u8] = b"m";

/// GET_MR (or a map) is refused for want of a usable connection or
/// device: in-tree RDS/IB on an FRWR device.
fn no_get_mr(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENODEV) | Some(libc::EOPNOTSUPP)
    )
}

/// Takes the receiver's mapping messages off `tx` until the one carrying
/// `last` (the last region's cookie) arrives: messages of one connection
/// arrive in order, so every earlier one has been seen.
pub(super) fn drain_mapped(
    tx: &RdsSocket,
    last: u64,
    timeout: std::time::Duration,
) -> io::Result<()> {
    let since = Instant::now();
    let mut buf = [0u8; 16];
    loop {
        match tx.recv_msg(&mut buf) {
            Ok(got) if got.rdma_dest == Some(last) => return Ok(()),
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                let idle = since.elapsed();
                if idle >= timeout {
                    return Err(no_progress(format!(
                        "sender: the receiver's mapped cookies did not arrive within {timeout:?}"
                    )));
                }
                tx.wait_readable(SLICE.min(timeout - idle))?;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(context(err, "sender: recvmsg")),
        }
    }
}

/// One RDMA run: `--tasks` sender/receiver pairs at once, each with its
/// own regions.
pub(super) fn run(cfg: &Config, size: usize, run: u32, direction: Direction) -> io::Result<Sample> {
    let tasks = in_tasks(cfg.tasks, || one_pair(cfg, size, direction))?;
    Ok(Counted::sample(&tasks, Kind::of(direction), size, run))
}

/// One sender/receiver pair: its own two sockets and regions. The errors
/// counted include the sender's.
fn one_pair(cfg: &Config, size: usize, direction: Direction) -> io::Result<Counted> {
    let rx = open_peer_socket(cfg, MESSAGE)?;
    let tx = open_socket(cfg, cfg.addr, MESSAGE)?;
    // Failed operations are reported even without NOTIFY_ME (it is set anyway).
    tx.set_recverr(true)?;
    let (rx_addr, tx_addr) = (rx.local_addr()?, tx.local_addr()?);
    let stop = AtomicBool::new(false);
    let flow = Flow::new(cfg, size, direction, &stop);
    let (regions, registered) = flow.register(&rx, cfg.peer_netns.as_deref(), tx_addr)?;
    let cookies: Vec<u64> = regions.iter().map(MemoryRegion::cookie).collect();
    if let (Registered::Map, Some(&last)) = (registered, cookies.last()) {
        drain_mapped(&tx, last, cfg.timeout)?;
    }
    let (sent, counted) = run_pair(
        &stop,
        || send(&flow, &tx, rx_addr, &cookies),
        || receive(&flow, &rx, tx_addr, &regions),
    );
    match (sent, counted) {
        (Ok(sender_errors), Ok(mut counted)) => {
            counted.errors += sender_errors;
            Ok(counted)
        }
        // What the sender saw tells a lost message from a failed operation.
        (Ok(sender_errors), Err(receiver)) if sender_errors > 0 => Err(io::Error::new(
            receiver.kind(),
            format!("{receiver}; sender: {sender_errors} operations failed"),
        )),
        (Ok(_), Err(receiver)) => Err(receiver),
        (Err(sender), Ok(_)) => Err(sender),
        (Err(sender), Err(receiver)) => Err(io::Error::new(
            receiver.kind(),
            format!("{receiver}; {sender}"),
        )),
    }
}

/// Issues operations until stopped; returns the errors it saw (failed
/// operations, READs that brought the wrong bytes).
pub(super) fn send(
    flow: &Flow,
    tx: &RdsSocket,
    receiver: SocketAddr,
    cookies: &[u64],
) -> io::Result<u64> {
    let cfg = flow.cfg;
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut in_flight: HashMap<u64, RdmaInFlight> = HashMap::new();
    let (mut sent, mut acked, mut errors) = (0u64, 0u64, 0u64);
    // Failed operations: their messages never reach the receiver (a message
    // whose RDMA failed, or was dropped by a reconnect, is not sent), so its
    // count never covers them and they must not hold credits.
    let mut lost = 0u64;
    let mut last_progress = Instant::now();
    let mut note = [0u8; 16];
    while !flow.stopped() {
        let unacknowledged = sent - (acked + lost).min(sent);
        if unacknowledged >= flow.slots() || in_flight.len() as u64 >= flow.slots() {
            match tx.recv_msg(&mut note) {
                Ok(got) => {
                    if !got.rdma_statuses.is_empty() {
                        // In-tree RDS hands over as many as the control
                        // buffer holds, rrds one at a time.
                        for status in got.rdma_statuses {
                            let Some(op) = in_flight.remove(&status.token) else {
                                continue;
                            };
                            let Ok(buf) = op.finish(&status) else {
                                continue;
                            };
                            last_progress = Instant::now();
                            let wrong_bytes = cfg.verify
                                && flow.direction == Direction::Read
                                && !flow.pattern.matches(status.token % flow.slots(), &buf);
                            if !status.is_success() {
                                lost += 1;
                            }
                            if !status.is_success() || wrong_bytes {
                                errors += 1;
                            }
                            spare.push(buf);
                        }
                    } else if got.from == Some(receiver) && got.len == MESSAGE {
                        let granted = u64::from_le_bytes(note[..8].try_into().unwrap_or_default());
                        if granted.min(sent) > acked {
                            acked = granted.min(sent);
                            last_progress = Instant::now();
                        }
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    let idle = last_progress.elapsed();
                    if idle >= cfg.timeout {
                        return Err(no_progress(format!(
                            "sender: nothing back for {:?} with {} operations in flight and {} \
                             unacknowledged",
                            cfg.timeout,
                            in_flight.len(),
                            unacknowledged
                        )));
                    }
                    tx.wait_readable(SLICE.min(cfg.timeout - idle))?;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(context(err, "sender: recvmsg")),
            }
            continue;
        }
        let mut buf = spare.pop().unwrap_or_else(|| vec![0u8; flow.size]);
        if cfg.verify && flow.direction == Direction::Write {
            flow.pattern.fill(sent, &mut buf);
        }
        let op = RdmaOp {
            direction: flow.direction,
            cookie: cookies[(sent % flow.slots()) as usize],
            remote_offset: 0,
            buf,
            token: sent,
            flags: RdmaFlags::empty(),
        };
        match tx.send_rdma(&sent.to_le_bytes(), receiver, op) {
            Ok(op) => {
                in_flight.insert(sent, op);
                sent += 1;
                if let Some(meter) = &cfg.meter {
                    meter.count(1, flow.size as u64);
                }
                last_progress = Instant::now();
            }
            // Its buffer went with it; the next operation gets a new one.
            Err(err) if is_transient(&err) => tx.wait_writable(SLICE).map(|_| ())?,
            Err(err) => return Err(context(err, "sender: sendmsg with RDS_CMSG_RDMA_ARGS")),
        }
    }
    // Outcomes of what is still in flight: each buffer comes back (a handle
    // dropped without its outcome leaks its buffer) before the regions go.
    let since = Instant::now();
    while !in_flight.is_empty() && since.elapsed() < cfg.timeout {
        match tx.recv_msg(&mut note) {
            Ok(got) => {
                for status in got.rdma_statuses {
                    let Some(op) = in_flight.remove(&status.token) else {
                        continue;
                    };
                    if op.finish(&status).is_ok() && !status.is_success() {
                        errors += 1;
                    }
                }
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                tx.wait_readable(SLICE)?;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(context(err, "sender: recvmsg")),
        }
    }
    // An operation without an outcome is an error, but the receiver's count
    // of what arrived stands: in-tree RDS/IB on rxe loses a few of its
    // notifications, and its rate is still worth reporting.
    if !in_flight.is_empty() {
        eprintln!(
            "sender: {} of {} operations without an outcome {:?} after the run ({} failed)",
            in_flight.len(),
            sent,
            cfg.timeout,
            errors
        );
        errors += in_flight.len() as u64;
    }
    Ok(errors)
}

/// Counts operations for `duration` from the first on.
pub(super) fn receive(
    flow: &Flow,
    rx: &RdsSocket,
    sender: SocketAddr,
    regions: &[MemoryRegion<'_>],
) -> io::Result<Counted> {
    let cfg = flow.cfg;
    let mut check = vec![0u8; if cfg.verify { flow.size } else { 0 }];
    let mut expected = 0u64;
    let mut msg = [0u8; 16];
    receive_loop(
        cfg,
        || flow.stopped(),
        rx,
        sender,
        &mut msg,
        "operation",
        |msg, len| {
            let mut errors = 0;
            if len != MESSAGE {
                errors += 1;
            } else {
                let seq = u64::from_le_bytes(msg[..8].try_into().unwrap_or_default());
                errors += u64::from(seq != expected);
                expected = seq;
                if cfg.verify && flow.direction == Direction::Write {
                    let region = &regions[(seq % flow.slots()) as usize];
                    if region.copy_out(0, &mut check).is_none()
                        || !flow.pattern.matches(seq, &check)
                    {
                        errors += 1;
                    }
                }
            }
            expected = expected.wrapping_add(1);
            Taken {
                bytes: flow.size as u64,
                errors,
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_start_on_a_page_of_their_own_buffer() {
        for size in [1, 4096, 65536, 1 << 20] {
            let (buf, range) = page_aligned(size);
            assert_eq!(range.len(), size);
            assert!(range.end <= buf.len(), "size {size}");
            assert_eq!(
                (buf.as_ptr() as usize + range.start) % PAGE,
                0,
                "size {size}"
            );
        }
    }
}
