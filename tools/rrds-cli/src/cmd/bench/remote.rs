// SPDX-License-Identifier: GPL-2.0-only
//! Client/server runs (`--connect`, `--server`), as rds-stress splits them:
//! the client runs the sending ends (rate: senders; latency: clients; RDMA:
//! the operations' issuers), the server the receiving ends, each with its
//! own sockets, on two machines or namespaces.
//!
//! Control goes over RDS too, as short text datagrams between the client's
//! control socket and the server's (`--addr`:`--port`):
//!
//! - client: `hello kind=.. size=.. depth=.. tasks=.. verify=.. seed=..
//!   duration_ms=.. timeout_ms=.. ports=P1,P2,..` (the client's task
//!   sockets, in task order), and `ack=..` last with `--ack-size` (a
//!   server that predates it ignores it and echoes whole messages);
//! - server, per task: `ready task=I port=P cookies=C1,C2,..` (the receiving
//!   socket; RDMA: the cookies of its regions, one per slot);
//! - server, per task, once its receiver is done (rate, RDMA):
//!   `result task=I count=N bytes=B secs=S errors=E`; the client then stops
//!   that task's sender;
//! - client, when every sending end has finished: `done`; the server then
//!   stops its echo servers (latency) and frees its regions (RDMA: only then
//!   are no operations in flight), and answers `done` when it is ready for
//!   the next run. The client waits for that answer before it closes its
//!   sockets: closing the last RDS socket of a namespace drops what is
//!   still queued on its connections, its own `done` included;
//! - server, for a run it cannot start: `error TEXT`.
//!
//! The settings that shape the flow (size, depth, pattern, duration) are
//! the client's; the server binds to its own --addr with its own
//! --transport.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;
use std::time::Instant;

use rrds::rdma::Direction;
use rrds::MemoryRegion;
use rrds::RdsSocket;

use super::context;
use super::latency;
use super::no_progress;
use super::open_socket;
use super::open_socket_at;
use super::rate;
use super::rdma;
use super::Config;
use super::Counted;
use super::Flow;
use super::Kind;
use super::Sample;
use super::SLICE;

/// `--port`'s default: rds-stress's.
pub const DEFAULT_PORT: u16 = 4000;
/// Largest control datagram: a `ready` with 4096 cookies fits.
const CONTROL_MAX: usize = 128 << 10;
/// Most RDMA slots (cookies) per task over `--connect`.
const MAX_REMOTE_SLOTS: u64 = 4096;

/// A run as the client asks for it.
#[derive(Clone, Debug, PartialEq)]
struct Hello {
    kind: Kind,
    size: usize,
    depth: u64,
    verify: bool,
    seed: u64,
    duration: Duration,
    timeout: Duration,
    /// The client's task sockets' ports, one per task.
    ports: Vec<u16>,
    /// Latency: `--ack-size`.
    ack_size: Option<usize>,
}

/// One control datagram.
#[derive(Clone, Debug, PartialEq)]
enum Control {
    Hello(Hello),
    Ready {
        task: usize,
        port: u16,
        cookies: Vec<u64>,
    },
    /// A receiver's count.
    Result {
        task: usize,
        counted: Counted,
    },
    Done,
    Error(String),
}

fn list<T: ToString>(items: &[T]) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

impl Control {
    fn encode(&self) -> String {
        match self {
            Control::Hello(h) => format!(
                "hello kind={} size={} depth={} tasks={} verify={} seed={} duration_ms={} \
                 timeout_ms={} ports={}{}",
                h.kind,
                h.size,
                h.depth,
                h.ports.len(),
                u8::from(h.verify),
                h.seed,
                h.duration.as_millis(),
                h.timeout.as_millis(),
                list(&h.ports),
                h.ack_size
                    .map_or_else(String::new, |ack| format!(" ack={ack}"))
            ),
            Control::Ready {
                task,
                port,
                cookies,
            } => format!("ready task={task} port={port} cookies={}", list(cookies)),
            Control::Result { task, counted: c } => format!(
                "result task={task} count={} bytes={} secs={} errors={}",
                c.msgs, c.bytes, c.secs, c.errors
            ),
            Control::Done => "done".to_string(),
            Control::Error(text) => format!("error {text}"),
        }
    }

    fn decode(bytes: &[u8]) -> Option<Control> {
        let text = std::str::from_utf8(bytes).ok()?;
        let (verb, rest) = text.split_once(' ').unwrap_or((text, ""));
        if verb == "error" {
            return Some(Control::Error(rest.to_string()));
        }
        let fields: HashMap<&str, &str> = rest
            .split(' ')
            .filter(|f| !f.is_empty())
            .map(|f| f.split_once('='))
            .collect::<Option<_>>()?;
        let get = |key: &str| fields.get(key).copied();
        let num = |key: &str| get(key)?.parse::<u64>().ok();
        let nums = |key: &str| -> Option<Vec<u64>> {
            match get(key)? {
                "" => Some(Vec::new()),
                text => text.split(',').map(|n| n.parse().ok()).collect(),
            }
        };
        Some(match verb {
            "hello" => {
                let ports: Vec<u16> = nums("ports")?
                    .into_iter()
                    .map(|p| u16::try_from(p).ok())
                    .collect::<Option<_>>()?;
                if num("tasks")? != ports.len() as u64 {
                    return None;
                }
                let ack_size = match get("ack") {
                    Some(ack) => Some(ack.parse::<usize>().ok()?),
                    None => None,
                };
                Control::Hello(Hello {
                    kind: match Kind::parse(get("kind")?)? {
                        Kind::Register => return None,
                        kind => kind,
                    },
                    size: usize::try_from(num("size")?).ok()?,
                    depth: num("depth")?,
                    verify: num("verify")? != 0,
                    seed: num("seed")?,
                    duration: Duration::from_millis(num("duration_ms")?),
                    timeout: Duration::from_millis(num("timeout_ms")?),
                    ports,
                    ack_size,
                })
            }
            "ready" => Control::Ready {
                task: usize::try_from(num("task")?).ok()?,
                port: u16::try_from(num("port")?).ok()?,
                cookies: nums("cookies")?,
            },
            "result" => Control::Result {
                task: usize::try_from(num("task")?).ok()?,
                counted: Counted {
                    msgs: num("count")?,
                    bytes: num("bytes")?,
                    secs: get("secs")?.parse().ok()?,
                    errors: num("errors")?,
                },
            },
            "done" => Control::Done,
            _ => return None,
        })
    }
}

/// Sends `msg` on the control socket, waiting while the socket is full.
fn send(cfg: &Config, ctl: &RdsSocket, to: SocketAddr, msg: &Control) -> io::Result<()> {
    let stop = AtomicBool::new(false);
    let flow = Flow {
        cfg,
        size: 0,
        stop: &stop,
    };
    flow.send(ctl, msg.encode().as_bytes(), to, "control")
        .map(|_| ())
}

/// The next control datagram from `from` (any sender if `None`) within
/// `within`; `Ok(None)` on a timeout. Others and garbage are skipped.
fn receive(
    ctl: &RdsSocket,
    from: Option<SocketAddr>,
    within: Option<Duration>,
) -> io::Result<Option<(Control, SocketAddr)>> {
    let mut buf = vec![0u8; CONTROL_MAX];
    let since = Instant::now();
    loop {
        match ctl.recv_from(&mut buf) {
            Ok((len, sender)) if from.is_none_or(|f| f == sender) => {
                if let Some(msg) = Control::decode(&buf[..len.min(buf.len())]) {
                    return Ok(Some((msg, sender)));
                }
            }
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                let wait = match within {
                    Some(within) if since.elapsed() >= within => return Ok(None),
                    Some(within) => SLICE.min(within - since.elapsed()),
                    None => SLICE,
                };
                ctl.wait_readable(wait)?;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(context(err, "control: recvmsg")),
        }
    }
}

/// How long a run may take past its duration: set-up, draining, and the
/// other side's timeouts.
fn grace(timeout: Duration) -> Duration {
    timeout * 4 + Duration::from_secs(10)
}

fn direction(kind: Kind) -> Direction {
    if kind == Kind::RdmaRead {
        Direction::Read
    } else {
        Direction::Write
    }
}

fn is_rdma(kind: Kind) -> bool {
    matches!(kind, Kind::RdmaWrite | Kind::RdmaRead)
}

/// The size of the largest datagrams a run's sockets carry.
fn message_size(cfg: &Config, kind: Kind, size: usize) -> usize {
    match kind {
        Kind::RdmaWrite | Kind::RdmaRead | Kind::Register => rdma::MESSAGE,
        Kind::Latency => latency::largest(cfg, size),
        Kind::Rate => size,
    }
}

/// What a client task brought home.
enum Local {
    Rate,
    Latency(latency::Measured),
    /// The sender's errors (failed operations, wrong READ bytes).
    Rdma(u64),
}

/// Register mode measures one host's registrations: it has no server.
fn local_only() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "--mode register runs without --connect",
    )
}

/// One run with the receiving ends at `server` (`--connect`).
pub(super) fn run(
    cfg: &Config,
    server: SocketAddr,
    kind: Kind,
    size: usize,
    run: u32,
) -> io::Result<Sample> {
    if kind == Kind::Register {
        return Err(local_only());
    }
    if is_rdma(kind) && cfg.depth > MAX_REMOTE_SLOTS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("RDMA modes over --connect take --depth up to {MAX_REMOTE_SLOTS}"),
        ));
    }
    let ctl = open_socket(cfg, cfg.addr, CONTROL_MAX)?;
    let tasks = (0..cfg.tasks)
        .map(|_| {
            let sock = open_socket(cfg, cfg.addr, message_size(cfg, kind, size))?;
            if is_rdma(kind) {
                sock.set_recverr(true)?;
            }
            Ok(sock)
        })
        .collect::<io::Result<Vec<RdsSocket>>>()?;
    let ports = tasks
        .iter()
        .map(|s| s.local_addr().map(|a| a.port()))
        .collect::<io::Result<Vec<u16>>>()?;
    let hello = Hello {
        kind,
        size,
        depth: cfg.depth,
        verify: cfg.verify,
        seed: cfg.seed,
        duration: cfg.duration,
        timeout: cfg.timeout,
        ports,
        ack_size: cfg.ack_size.filter(|_| kind == Kind::Latency),
    };
    send(cfg, &ctl, server, &Control::Hello(hello))?;
    // The server's receiving sockets (and regions), per task.
    let mut ready: Vec<Option<(SocketAddr, Vec<u64>)>> = vec![None; tasks.len()];
    while ready.iter().any(Option::is_none) {
        match receive(&ctl, Some(server), Some(grace(cfg.timeout)))? {
            Some((
                Control::Ready {
                    task,
                    port,
                    cookies,
                },
                _,
            )) if task < ready.len() => {
                ready[task] = Some((SocketAddr::new(server.ip(), port), cookies));
            }
            Some((Control::Error(text), _)) => {
                return Err(io::Error::other(format!("server {server}: {text}")))
            }
            Some(_) => {}
            None => {
                return Err(no_progress(format!(
                    "no answer from the server at {server} (is `rrds bench --server` running \
                     there?)"
                )))
            }
        }
    }
    let ready: Vec<(SocketAddr, Vec<u64>)> = ready.into_iter().flatten().collect();
    let stops: Vec<AtomicBool> = tasks.iter().map(|_| AtomicBool::new(false)).collect();
    let mut results: Vec<Option<Counted>> = tasks.iter().map(|_| None).collect();
    let locals = thread::scope(|scope| {
        let handles: Vec<_> = tasks
            .iter()
            .zip(&ready)
            .zip(&stops)
            .map(|((sock, (to, cookies)), stop)| {
                scope.spawn(move || -> io::Result<Local> {
                    let flow = Flow { cfg, size, stop };
                    match kind {
                        Kind::Rate => rate::send(&flow, sock, *to).map(|_| Local::Rate),
                        Kind::Latency => latency::ping_pong(&flow, sock, *to).map(Local::Latency),
                        Kind::RdmaWrite | Kind::RdmaRead => {
                            let flow = rdma::Flow::new(cfg, size, direction(kind), stop);
                            rdma::send(&flow, sock, *to, cookies).map(Local::Rdma)
                        }
                        Kind::Register => Err(local_only()),
                    }
                })
            })
            .collect();
        // The receivers' counts stop the senders (latency: the clients stop
        // on their own after the duration).
        let mut failed = None;
        if kind != Kind::Latency {
            let deadline = Instant::now() + cfg.duration + grace(cfg.timeout);
            while results.iter().any(Option::is_none) && failed.is_none() {
                let left = deadline.saturating_duration_since(Instant::now());
                match receive(&ctl, Some(server), Some(left)) {
                    Ok(Some((Control::Result { task, counted }, _))) if task < results.len() => {
                        stops[task].store(true, Ordering::Relaxed);
                        results[task] = Some(counted);
                    }
                    Ok(Some((Control::Error(text), _))) => {
                        failed = Some(io::Error::other(format!("server {server}: {text}")));
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => failed = Some(no_progress("no result from the server".into())),
                    Err(err) => failed = Some(err),
                }
            }
        }
        // Latency clients stop on their own: stopping them would fail their
        // round trip in flight.
        if kind != Kind::Latency {
            for stop in &stops {
                stop.store(true, Ordering::Relaxed);
            }
        }
        let locals = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("benchmark task panicked")))
            })
            .collect::<io::Result<Vec<Local>>>();
        match failed {
            Some(err) => Err(err),
            None => locals,
        }
    });
    // Every sending end has finished: the server may let go. Its answer
    // matters: closing the last socket of a namespace drops what it still
    // has queued, `done` included.
    send(cfg, &ctl, server, &Control::Done)?;
    let confirmed = loop {
        match receive(&ctl, Some(server), Some(grace(cfg.timeout)))? {
            Some((Control::Done, _)) => break true,
            Some(_) => {}
            None => break false,
        }
    };
    let locals = locals?;
    if !confirmed {
        return Err(no_progress(format!(
            "the server at {server} did not confirm the end of the run"
        )));
    }
    let counted = || results.iter().flatten();
    Ok(match kind {
        Kind::Register => return Err(local_only()),
        Kind::Rate => Counted::sample(&counted().cloned().collect::<Vec<_>>(), kind, size, run),
        Kind::Latency => {
            let measured: Vec<latency::Measured> = locals
                .into_iter()
                .filter_map(|l| match l {
                    Local::Latency(m) => Some(m),
                    _ => None,
                })
                .collect();
            latency::sample(&measured, kind, size, run)
        }
        Kind::RdmaWrite | Kind::RdmaRead => {
            let sender_errors = locals.iter().map(|l| match l {
                Local::Rdma(errors) => *errors,
                _ => 0,
            });
            let tasks: Vec<Counted> = counted()
                .zip(sender_errors)
                .map(|(c, sender)| Counted {
                    errors: c.errors + sender,
                    ..c.clone()
                })
                .collect();
            Counted::sample(&tasks, kind, size, run)
        }
    })
}

/// `rrds bench --server`: serves runs, one at a time, until killed.
pub(super) fn serve(cfg: &Config, port: u16) -> io::Result<()> {
    let at = SocketAddr::new(cfg.addr, port);
    let ctl = open_socket_at(cfg, at, CONTROL_MAX)?;
    eprintln!("rrds bench: serving on {at}");
    loop {
        let Some((Control::Hello(hello), client)) = receive(&ctl, None, None)? else {
            continue;
        };
        match serve_run(cfg, &ctl, client, &hello) {
            Ok(()) => eprintln!(
                "rrds bench: served {} {} B x {} for {client}",
                hello.kind,
                hello.size,
                hello.ports.len()
            ),
            Err(err) => {
                eprintln!("rrds bench: run for {client}: {err}");
                // The client may be gone: its own timeout covers that.
                let _ = send(cfg, &ctl, client, &Control::Error(err.to_string()));
            }
        }
    }
}

/// Serves one run: opens the receiving ends, runs them, reports.
fn serve_run(base: &Config, ctl: &RdsSocket, client: SocketAddr, hello: &Hello) -> io::Result<()> {
    let kind = hello.kind;
    if is_rdma(kind) && hello.depth > MAX_REMOTE_SLOTS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--depth {} is above {MAX_REMOTE_SLOTS}", hello.depth),
        ));
    }
    let cfg = Config {
        addr: base.addr,
        peer_addr: client.ip(),
        peer_netns: None,
        transport: base.transport,
        duration: hello.duration,
        ack_size: hello.ack_size,
        depth: hello.depth,
        tasks: u32::try_from(hello.ports.len()).unwrap_or(u32::MAX),
        remote: None,
        meter: None,
        verify: hello.verify,
        seed: hello.seed,
        timeout: hello.timeout,
    };
    let cfg = &cfg;
    let senders: Vec<SocketAddr> = hello
        .ports
        .iter()
        .map(|&p| SocketAddr::new(client.ip(), p))
        .collect();
    let socks = senders
        .iter()
        .map(|_| open_socket(cfg, cfg.addr, message_size(cfg, kind, hello.size)))
        .collect::<io::Result<Vec<RdsSocket>>>()?;
    let stop = AtomicBool::new(false);
    let rdma_flow = rdma::Flow::new(cfg, hello.size, direction(kind), &stop);
    // RDMA: each socket's regions, which own their memory. Mapped regions'
    // messages (in-tree RDS) go to the client's senders, which take only
    // their credit messages.
    let regions = socks
        .iter()
        .zip(&senders)
        .map(|(sock, &sender)| {
            if !is_rdma(kind) {
                return Ok(Vec::new());
            }
            rdma_flow
                .register(sock, None, sender)
                .map(|(regions, _)| regions)
        })
        .collect::<io::Result<Vec<Vec<MemoryRegion<'_>>>>>()?;
    for (task, (sock, regions)) in socks.iter().zip(&regions).enumerate() {
        let ready = Control::Ready {
            task,
            port: sock.local_addr()?.port(),
            cookies: regions.iter().map(MemoryRegion::cookie).collect(),
        };
        send(cfg, ctl, client, &ready)?;
    }
    let flow = Flow {
        cfg,
        size: hello.size,
        stop: &stop,
    };
    thread::scope(|scope| -> io::Result<()> {
        let handles: Vec<_> = socks
            .iter()
            .zip(&senders)
            .zip(&regions)
            .map(|((sock, &from), regions)| {
                let (flow, rdma_flow) = (&flow, &rdma_flow);
                scope.spawn(move || -> io::Result<Option<Counted>> {
                    match kind {
                        Kind::Rate => rate::receive(flow, sock, from).map(Some),
                        Kind::Latency => latency::serve(flow, sock, from).map(|()| None),
                        Kind::RdmaWrite | Kind::RdmaRead => {
                            rdma::receive(rdma_flow, sock, from, regions).map(Some)
                        }
                        Kind::Register => Err(local_only()),
                    }
                })
            })
            .collect();
        let deadline = Instant::now() + cfg.duration + grace(cfg.timeout);
        let join = |handle: thread::ScopedJoinHandle<'_, io::Result<Option<Counted>>>| {
            handle
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("benchmark task panicked")))
        };
        let mut outcome = Ok(());
        let mut handles = handles.into_iter();
        if kind != Kind::Latency {
            // Each receiver's count goes out as it finishes: it stops that
            // task's sender.
            for (task, handle) in handles.by_ref().enumerate() {
                match join(handle) {
                    Ok(Some(counted)) => {
                        let result = Control::Result { task, counted };
                        outcome = outcome.and(send(cfg, ctl, client, &result));
                    }
                    Ok(None) => {}
                    Err(err) => outcome = outcome.and(Err(err)),
                }
            }
        }
        // The client's `done`: its senders are finished (nothing in flight
        // to the regions), its latency clients too.
        // No early return before `stop` is set: the echo servers run until it is.
        let done = outcome.is_ok() && {
            let left = deadline.saturating_duration_since(Instant::now());
            loop {
                match receive(ctl, Some(client), Some(left)) {
                    Ok(Some((Control::Done, _))) => break true,
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break false,
                }
            }
        };
        stop.store(true, Ordering::Relaxed);
        for handle in handles {
            outcome = outcome.and(join(handle).map(|_| ()));
        }
        outcome?;
        if !done {
            return Err(no_progress(format!(
                "no `done` from the client {client} (gone?)"
            )));
        }
        // Ready for the next run: the client may close its sockets.
        send(cfg, ctl, client, &Control::Done)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(msg: Control) {
        let text = msg.encode();
        assert_eq!(Control::decode(text.as_bytes()), Some(msg), "{text}");
    }

    #[test]
    fn control_messages_survive_the_wire() {
        round_trip(Control::Hello(Hello {
            kind: Kind::RdmaRead,
            size: 65536,
            depth: 8,
            verify: true,
            seed: 7,
            duration: Duration::from_millis(2500),
            timeout: Duration::from_secs(60),
            ports: vec![40001, 40002],
            ack_size: None,
        }));
        round_trip(Control::Hello(Hello {
            kind: Kind::Latency,
            size: 8192,
            depth: 1,
            verify: false,
            seed: 1,
            duration: Duration::from_secs(5),
            timeout: Duration::from_secs(5),
            ports: vec![40001],
            ack_size: Some(0),
        }));
        round_trip(Control::Ready {
            task: 1,
            port: 40003,
            cookies: vec![u64::MAX, 0x1234_0000_5678],
        });
        round_trip(Control::Ready {
            task: 0,
            port: 1,
            cookies: Vec::new(),
        });
        round_trip(Control::Result {
            task: 0,
            counted: Counted {
                msgs: 10,
                bytes: 81920,
                secs: 2.000_125,
                errors: 0,
            },
        });
        round_trip(Control::Done);
        round_trip(Control::Error("bind 10.0.0.1:0: no such device".into()));
    }

    #[test]
    fn malformed_control_is_refused() {
        for bad in [
            "hello kind=rate size=1",
            "hello kind=warp size=1 depth=1 tasks=0 verify=0 seed=1 duration_ms=1 \
             timeout_ms=1 ports=",
            // The task count must match the ports.
            "hello kind=rate size=1 depth=1 tasks=2 verify=0 seed=1 duration_ms=1 \
             timeout_ms=1 ports=5",
            "ready task=0 port=70000 cookies=",
            "result task=0 count=x bytes=0 secs=0 errors=0",
            "hello kind=latency size=1 depth=1 tasks=1 verify=0 seed=1 duration_ms=1 \
             timeout_ms=1 ports=5 ack=-1",
            "hello kind=register size=1 depth=1 tasks=1 verify=0 seed=1 duration_ms=1 \
             timeout_ms=1 ports=5",
            "bogus",
        ] {
            assert_eq!(Control::decode(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(Control::decode(&[0xff, 0xfe]), None);
    }
}
