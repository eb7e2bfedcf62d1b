// SPDX-License-Identifier: GPL-2.0-only
//! `rrds bench`: an rds-stress-like benchmark over the RDS socket ABI, so it
//! runs unchanged against the in-tree `rds` module and against rrds.
//!
//! By default both ends run in this process, in two threads with one socket
//! each (`--tasks` pairs of them). `--server` and `--connect` split them
//! across machines instead, as rds-stress does (see `remote`). The
//! sending end (rate: sender; latency: client) binds to `--addr`, the
//! receiving end (rate: receiver; latency: echo server) to `--peer-addr`,
//! which defaults to `--addr` (a loopback address by default). With two
//! addresses of RDMA devices and `--transport ib` the messages cross an IB
//! connection; to its own address a socket always uses loopback.
//! Sockets are non-blocking and every wait is a `poll` bounded by
//! `--timeout`: a lost message fails the run instead of hanging it.

mod cpu;
mod interval;
mod latency;
mod pattern;
pub mod plot;
mod progress;
mod rate;
mod rdma;
mod register;
mod remote;
mod report;
pub mod results;

use std::fmt;
use std::fs::File;
use std::io;
use std::io::IsTerminal;
use std::io::Write as _;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use std::time::Instant;

use clap::value_parser;
use clap::Args;
use clap::ValueEnum;
use rrds::rdma::Direction;
use rrds::sys::RDS_MAX_MSG_SIZE;
use rrds::RdsSocket;
use rrds::Transport;

use super::context;
use super::interrupt::catch_sigint;
use super::interrupt::interrupted;
use super::is_transient;
use super::new_socket;
use super::stats::Percentile;
use cpu::CpuClock;
use interval::Intervals;
use interval::Meter;
use progress::Progress;
use progress::Step;
use report::Report;

/// Longest single `poll`, so the stop flag is seen promptly.
const SLICE: Duration = Duration::from_millis(100);
/// Socket buffers are sized for `--depth` messages in flight, within these
/// bounds (and never below one message).
const MIN_BUFFER: usize = 256 << 10;
const MAX_BUFFER: usize = 64 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Throughput: one sender streams to one receiver.
    Rate,
    /// Round-trip latency: ping-pong of SIZE-byte messages.
    Latency,
    /// Rate, then latency.
    Both,
    /// RDMA WRITE throughput: SIZE bytes per operation into regions the
    /// receiver registered, each operation followed by an 8-byte message.
    RdmaWrite,
    /// RDMA READ throughput: SIZE bytes per operation from the receiver's
    /// regions.
    RdmaRead,
    /// RDMA WRITE, then RDMA READ.
    Rdma,
    /// Registration latency: register SIZE bytes for the peer and free them
    /// again, cycle after cycle (`RDS_GET_MR`, or `RDS_CMSG_RDMA_MAP` where
    /// GET_MR is refused, as in-tree RDS/IB on rxe and siw).
    Register,
}

/// What one run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Rate,
    Latency,
    RdmaWrite,
    RdmaRead,
    Register,
}

impl Kind {
    /// The RDMA kind of `direction`.
    fn of(direction: Direction) -> Self {
        match direction {
            Direction::Write => Self::RdmaWrite,
            Direction::Read => Self::RdmaRead,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rate => "rate",
            Self::Latency => "latency",
            Self::RdmaWrite => "rdma_write",
            Self::RdmaRead => "rdma_read",
            Self::Register => "register",
        }
    }

    /// The kind [`Kind::as_str`] names.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Rate,
            Self::Latency,
            Self::RdmaWrite,
            Self::RdmaRead,
            Self::Register,
        ]
        .into_iter()
        .find(|k| k.as_str() == name)
    }

    /// RDMA operations or registrations: sized by `--rdma-size`.
    pub fn takes_rdma_size(self) -> bool {
        matches!(self, Self::RdmaWrite | Self::RdmaRead | Self::Register)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Mode {
    /// The `--mode` value naming it.
    fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }

    fn kinds(self) -> &'static [Kind] {
        match self {
            Self::Rate => &[Kind::Rate],
            Self::Latency => &[Kind::Latency],
            Self::Both => &[Kind::Rate, Kind::Latency],
            Self::RdmaWrite => &[Kind::RdmaWrite],
            Self::RdmaRead => &[Kind::RdmaRead],
            Self::Rdma => &[Kind::RdmaWrite, Kind::RdmaRead],
            Self::Register => &[Kind::Register],
        }
    }
}

/// `--transport`: how the sockets get their transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// Pin IB/RDMA (SO_RDS_TRANSPORT = RDS_TRANS_IB) on both sockets before
    /// bind; both addresses must belong to RDMA devices.
    Ib,
    /// Loopback: both addresses must be loopback addresses (the option
    /// cannot select loopback); checked again after bind.
    Loop,
    /// Set nothing: bind picks (loopback for loopback addresses, else IB).
    Default,
}

impl TransportArg {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ib => "ib",
            Self::Loop => "loop",
            Self::Default => "default",
        }
    }
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Address the sending end binds to (port 0: the kernel picks the
    /// ports); also the receiving end's unless --peer-addr is given
    /// (rds-stress's -r).
    #[arg(short = 'r', long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub addr: IpAddr,
    /// Address the receiving end binds to (rate: the receiver; latency: the
    /// echo server). Default: --addr. IB needs two different addresses: a
    /// socket sending to its own address uses loopback.
    #[arg(long, value_name = "ADDR")]
    pub peer_addr: Option<IpAddr>,
    /// Network namespace to create and bind the receiving end's socket in: a
    /// name as `ip netns` gives it (/run/netns/NAME) or a path to a
    /// namespace file.
    /// With --peer-addr, crosses between two namespaces of one machine.
    #[arg(long, value_name = "NETNS")]
    pub peer_netns: Option<String>,
    /// Transport of both sockets: `ib` pins IB with SO_RDS_TRANSPORT before
    /// bind, `loop` requires loopback addresses, `default` lets bind choose.
    #[arg(long, value_enum, value_name = "TRANSPORT", default_value_t = TransportArg::Default)]
    pub transport: TransportArg,
    /// Message size in bytes, up to 1 MiB (suffix k or m: KiB, MiB), as
    /// rds-stress's -q. Repeat for several sizes.
    #[arg(
        short = 'q',
        long = "size",
        value_name = "BYTES",
        value_parser = parse_size,
        default_values = ["64", "8192"]
    )]
    pub sizes: Vec<usize>,
    /// RDMA modes and register: the operation and region size instead of
    /// --size (rds-stress's -D; RDMA runs send 8-byte messages). Up to 1
    /// MiB, k or m suffix; repeat for several sizes.
    #[arg(short = 'D', long = "rdma-size", value_name = "BYTES", value_parser = parse_size)]
    pub rdma_sizes: Vec<usize>,
    /// Latency mode: bytes of the echo (rds-stress's -a, the ack), up to 1
    /// MiB. Default: the message size.
    #[arg(short = 'a', long = "ack-size", value_name = "BYTES", value_parser = parse_size)]
    pub ack_size: Option<usize>,
    /// Seconds each run measures (rds-stress's -T). 0: until Ctrl-C, for
    /// one run of one mode and size.
    #[arg(
        short = 'T',
        long,
        value_name = "SECONDS",
        value_parser = parse_duration,
        default_value = "5"
    )]
    pub duration: Duration,
    /// Runs per mode and size; the summary is their median. Default: 3, or
    /// 1 with --duration 0.
    #[arg(long, value_parser = value_parser!(u32).range(1..=1000))]
    pub runs: Option<u32>,
    /// What to measure.
    #[arg(long, value_enum, default_value_t = Mode::Both)]
    pub mode: Mode,
    /// Rate mode: most messages in flight (sent, not yet credited back by
    /// the receiver); RDMA modes: operations in flight, each to a region of
    /// its own (rds-stress's -d).
    #[arg(short = 'd', long, default_value_t = 32, value_parser = value_parser!(u32).range(1..=65536))]
    pub depth: u32,
    /// Serve the receiving ends of clients' runs (`--connect`), one run at
    /// a time, bound to --addr and --port, until killed. Prints a line per
    /// run served on standard error; the client reports the results.
    #[arg(long, conflicts_with_all = ["connect", "peer_addr", "peer_netns", "plot", "interval"])]
    pub server: bool,
    /// --server's port.
    #[arg(long, default_value_t = remote::DEFAULT_PORT, requires = "server")]
    pub port: u16,
    /// Run the sending ends here, bound to --addr, against the receiving
    /// ends of `rrds bench --server` at ADDR:PORT (rds-stress's -s). The
    /// server's address is the receiving end's (--peer-addr).
    #[arg(long, value_name = "ADDR:PORT", conflicts_with_all = ["peer_addr", "peer_netns"])]
    pub connect: Option<SocketAddr>,
    /// Pairs of ends running at once, each pair with its own two sockets
    /// (rds-stress's -t, its tasks): rates add up over the pairs, latencies
    /// are pooled. --depth is per pair.
    #[arg(short = 't', long, default_value_t = 1, value_parser = value_parser!(u32).range(1..=64))]
    pub tasks: u32,
    /// Fill payloads from a seeded pattern and check every received byte
    /// (rds-stress's -v). Corrupt, lost or reordered messages count as
    /// errors and fail the benchmark (messages of the wrong length always
    /// do).
    #[arg(short = 'v', long)]
    pub verify: bool,
    /// Seed of the --verify pattern.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds without progress after which a run fails.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, default_value = "5")]
    pub timeout: Duration,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// After the runs, also write an SVG chart of the medians to this file:
    /// message rate and latency (p50, p99) against message size, for the
    /// modes measured. Standard output is the same with or without it.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Also print a line every SECONDS of each run (fractions allowed):
    /// what the sending ends did in that interval (messages, RDMA
    /// operations, round trips or cycles per second, MB/s, the mean round
    /// trip or cycle) and the process's CPU use, as rds-stress prints one
    /// a second. Replaces the progress line.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub interval: Option<Duration>,
    /// Also print each latency or register run's percentile distribution
    /// (min, p10 ... p99.999, max, from its HDR histogram): lines under its
    /// table row, or a "histogram" array at the end of its JSON object.
    #[arg(long)]
    pub histogram: bool,
    /// Check the options as a run would, print the runs it would make, one
    /// line per mode and size, and exit without opening a socket (the
    /// `make bench` scripts check their options with it before a boot).
    #[arg(long, conflicts_with = "server")]
    pub dry_run: bool,
}

impl BenchArgs {
    /// The receiving end's address: the server's with `--connect`, else
    /// `--peer-addr`, else `--addr`.
    pub fn peer_addr(&self) -> IpAddr {
        match self.connect {
            Some(server) => server.ip(),
            None => self.peer_addr.unwrap_or(self.addr),
        }
    }

    /// Whether each run lasts until Ctrl-C (`--duration 0`).
    pub fn until_interrupted(&self) -> bool {
        self.duration.is_zero()
    }

    /// Runs per mode and size: `--runs`, by default 3 (1 until Ctrl-C).
    pub fn runs(&self) -> u32 {
        self.runs
            .unwrap_or(if self.until_interrupted() { 1 } else { 3 })
    }

    /// The sizes `kind` runs with: `--rdma-size`'s for RDMA and register
    /// runs when given, else `--size`'s.
    pub fn sizes_of(&self, kind: Kind) -> &[usize] {
        if kind.takes_rdma_size() && !self.rdma_sizes.is_empty() {
            &self.rdma_sizes
        } else {
            &self.sizes
        }
    }

    /// What the options cannot say together, which clap does not know:
    /// `--duration 0` measures one run of one mode and one size, locally;
    /// `--rdma-size` and `--ack-size` need a mode they size.
    pub fn check(&self) -> Result<(), String> {
        let kinds = self.mode.kinds();
        if !self.rdma_sizes.is_empty() && !kinds.iter().any(|k| k.takes_rdma_size()) {
            return Err(format!(
                "-D/--rdma-size sizes RDMA runs, and --mode {} has none: give --mode rdma-write, \
                 rdma-read, rdma or register",
                self.mode.name()
            ));
        }
        if self.ack_size.is_some() && !kinds.contains(&Kind::Latency) {
            return Err(format!(
                "-a/--ack-size sizes the latency mode's echo, and --mode {} has none",
                self.mode.name()
            ));
        }
        if self.until_interrupted() && !self.server {
            if self.connect.is_some() {
                return Err("--duration 0 (until Ctrl-C) runs without --connect".to_string());
            }
            let sizes = kinds.iter().map(|&k| self.sizes_of(k).len()).max();
            if kinds.len() != 1 || sizes != Some(1) || self.runs() != 1 {
                return Err(format!(
                    "--duration 0 measures one run until Ctrl-C: give a --mode of one \
                     measurement (not both or rdma), one --size (or -D) and no --runs above 1 \
                     (here: --mode {} with {} sizes and --runs {})",
                    self.mode.name(),
                    sizes.unwrap_or(0),
                    self.runs()
                ));
            }
        }
        Ok(())
    }
}

/// The runs `args` ask for, a line per mode and size, as `--dry-run`
/// prints them.
fn planned_runs(args: &BenchArgs) -> String {
    let mut text = String::new();
    for &kind in args.mode.kinds() {
        for size in args.sizes_of(kind) {
            let runs = if args.until_interrupted() {
                "one run until Ctrl-C".to_string()
            } else {
                format!("{} x {} s", args.runs(), args.duration.as_secs_f64())
            };
            text.push_str(&format!("{} {size} B: {runs}\n", kind.as_str()));
        }
    }
    text
}

/// Checks what the command line alone can: one address family (RDS does
/// not cross families; an IPv4-mapped IPv6 address counts as IPv4, as RDS
/// treats it), and loopback addresses for `--transport loop`.
fn check_endpoints(addr: IpAddr, peer: IpAddr, transport: TransportArg) -> Result<(), String> {
    if addr.to_canonical().is_ipv4() != peer.to_canonical().is_ipv4() {
        return Err(format!(
            "--addr {addr} and --peer-addr {peer} must both be IPv4 or both IPv6"
        ));
    }
    if transport == TransportArg::Loop {
        let not_loopback = |a: &IpAddr| !a.to_canonical().is_loopback();
        if let Some(other) = [addr, peer].into_iter().find(not_loopback) {
            return Err(format!(
                "--transport loop needs loopback addresses (127.0.0.0/8, ::1), and {other} is not \
                 one: RDS picks loopback by address, SO_RDS_TRANSPORT cannot select it"
            ));
        }
    }
    Ok(())
}

/// Parses a message size: bytes, or KiB/MiB with a k/m suffix.
fn parse_size(text: &str) -> Result<usize, String> {
    let (digits, unit) = match text.char_indices().last() {
        Some((at, 'k' | 'K')) => (&text[..at], 1 << 10),
        Some((at, 'm' | 'M')) => (&text[..at], 1 << 20),
        _ => (text, 1),
    };
    let value: usize = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size (e.g. 64, 8k, 1m)"))?;
    match value.checked_mul(unit) {
        Some(size) if size <= RDS_MAX_MSG_SIZE => Ok(size),
        _ => Err(format!("{text} is larger than the RDS limit of 1 MiB")),
    }
}

/// Parses a positive number of seconds (fractions allowed).
fn parse_seconds(text: &str) -> Result<Duration, String> {
    super::parse_seconds(text, false)
}

/// `--duration`: seconds, fractions allowed; 0 for until Ctrl-C.
fn parse_duration(text: &str) -> Result<Duration, String> {
    super::parse_seconds(text, true)
}

/// The parameters a run needs.
struct Config {
    /// The sending end's address.
    addr: IpAddr,
    /// The receiving end's address.
    peer_addr: IpAddr,
    /// The receiving end's network namespace file, if not ours.
    peer_netns: Option<PathBuf>,
    transport: TransportArg,
    /// How long a run measures; `Duration::MAX` until Ctrl-C.
    duration: Duration,
    /// Latency mode: bytes of the echo (`None`: what came).
    ack_size: Option<usize>,
    depth: u64,
    /// Pairs of ends running at once (`--tasks`).
    tasks: u32,
    /// The server running the receiving ends (`--connect`), if not here.
    remote: Option<SocketAddr>,
    /// What the sending ends count for `--interval`.
    meter: Option<Arc<Meter>>,
    verify: bool,
    seed: u64,
    timeout: Duration,
}

/// What a receiving end counted (rate: messages; RDMA: operations, and
/// their bytes).
#[derive(Clone, Debug, PartialEq)]
struct Counted {
    msgs: u64,
    bytes: u64,
    secs: f64,
    errors: u64,
}

impl Counted {
    /// The run's sample from what each task's receiver counted: the tasks'
    /// rates summed.
    fn sample(tasks: &[Counted], kind: Kind, size: usize, run: u32) -> Sample {
        let per_sec =
            |count: fn(&Counted) -> f64| summed_rate(tasks.iter().map(|c| (count(c), c.secs)));
        Sample {
            msgs_per_sec: per_sec(|c| c.msgs as f64),
            mb_per_sec: per_sec(|c| c.bytes as f64 / 1e6),
            errors: tasks.iter().map(|c| c.errors).sum(),
            ..Sample::empty(kind, size, run)
        }
    }
}

/// What both ends of a run share.
struct Flow<'a> {
    cfg: &'a Config,
    size: usize,
    /// Set by whichever end finishes or fails first; the other end stops.
    stop: &'a AtomicBool,
}

impl Flow<'_> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sends one datagram, waiting while the send buffer is full or the
    /// port congested. `Ok(false)` if told to stop first; an error after
    /// `timeout` without success.
    fn send(&self, sock: &RdsSocket, buf: &[u8], to: SocketAddr, who: &str) -> io::Result<bool> {
        let since = Instant::now();
        loop {
            match sock.send_to(buf, to) {
                Ok(_) => return Ok(true),
                Err(err) if is_transient(&err) => {
                    if self.stopped() {
                        return Ok(false);
                    }
                    if since.elapsed() >= self.cfg.timeout {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "{who}: could not send to {to} for {:?} (last error: {err})",
                                self.cfg.timeout
                            ),
                        ));
                    }
                    if err.kind() == io::ErrorKind::WouldBlock {
                        sock.wait_writable(SLICE)?;
                    } else {
                        // ENOBUFS: the port is congested. poll() does not
                        // wait for that without RDS_CONG_MONITOR; back off.
                        thread::sleep(Duration::from_millis(1));
                    }
                }
                Err(err) => return Err(context(err, format_args!("{who}: sendmsg to {to}"))),
            }
        }
    }
}

/// One run's measurements. Rate runs fill the throughput fields, latency
/// runs the latency ones and `msgs_per_sec` (round trips per second).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub kind: Kind,
    pub size: usize,
    pub run: u32,
    pub msgs_per_sec: Option<f64>,
    pub mb_per_sec: Option<f64>,
    pub lat_mean_us: Option<f64>,
    pub lat_p50_us: Option<f64>,
    pub lat_p99_us: Option<f64>,
    pub errors: u64,
    /// Latency extremes and tail (added after the fields above; JSON
    /// carries them last).
    pub lat_min_us: Option<f64>,
    pub lat_p999_us: Option<f64>,
    pub lat_max_us: Option<f64>,
    /// The round trips' percentile distribution (`--histogram`); empty
    /// for modes without latencies.
    pub distribution: Vec<Percentile>,
}

impl Sample {
    fn empty(kind: Kind, size: usize, run: u32) -> Self {
        Self {
            kind,
            size,
            run,
            msgs_per_sec: None,
            mb_per_sec: None,
            lat_mean_us: None,
            lat_p50_us: None,
            lat_p99_us: None,
            errors: 0,
            lat_min_us: None,
            lat_p999_us: None,
            lat_max_us: None,
            distribution: Vec::new(),
        }
    }
}

/// Medians over the runs of one mode and size, and their total errors.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub kind: Kind,
    pub size: usize,
    pub runs: usize,
    pub msgs_per_sec: Option<f64>,
    pub mb_per_sec: Option<f64>,
    pub lat_mean_us: Option<f64>,
    pub lat_p50_us: Option<f64>,
    pub lat_p99_us: Option<f64>,
    pub errors: u64,
    pub lat_min_us: Option<f64>,
    pub lat_p999_us: Option<f64>,
    pub lat_max_us: Option<f64>,
}

impl Summary {
    fn of(kind: Kind, size: usize, samples: &[Sample]) -> Self {
        use super::stats::median_of;
        Self {
            kind,
            size,
            runs: samples.len(),
            msgs_per_sec: median_of(samples.iter().map(|s| s.msgs_per_sec)),
            mb_per_sec: median_of(samples.iter().map(|s| s.mb_per_sec)),
            lat_mean_us: median_of(samples.iter().map(|s| s.lat_mean_us)),
            lat_p50_us: median_of(samples.iter().map(|s| s.lat_p50_us)),
            lat_p99_us: median_of(samples.iter().map(|s| s.lat_p99_us)),
            errors: samples.iter().map(|s| s.errors).sum(),
            lat_min_us: median_of(samples.iter().map(|s| s.lat_min_us)),
            lat_p999_us: median_of(samples.iter().map(|s| s.lat_p999_us)),
            lat_max_us: median_of(samples.iter().map(|s| s.lat_max_us)),
        }
    }
}

/// Runs the benchmark; `Ok(true)` if no run counted an error.
pub fn run(args: &BenchArgs) -> io::Result<bool> {
    let mut cfg = Config {
        addr: args.addr,
        peer_addr: args.peer_addr(),
        peer_netns: args.peer_netns.as_deref().map(netns_path),
        transport: args.transport,
        duration: if args.until_interrupted() {
            Duration::MAX
        } else {
            args.duration
        },
        ack_size: args.ack_size,
        depth: u64::from(args.depth),
        tasks: args.tasks,
        remote: args.connect,
        meter: None,
        verify: args.verify,
        seed: args.seed,
        timeout: args.timeout,
    };
    if args.server {
        return remote::serve(&cfg, args.port).map(|()| true);
    }
    let invalid = |msg| io::Error::new(io::ErrorKind::InvalidInput, msg);
    args.check().map_err(invalid)?;
    check_endpoints(cfg.addr, cfg.peer_addr, cfg.transport).map_err(invalid)?;
    if cfg.transport == TransportArg::Ib && cfg.addr == cfg.peer_addr {
        // Not an error (it measures IB-pinned sockets), but not IB traffic.
        eprintln!(
            "rrds bench: note: --transport ib with one address: messages to a socket's own \
             address go over loopback; give --peer-addr another RDMA address to cross IB"
        );
    }
    if let Some(path) = &args.plot {
        // A directory that is not there fails now, not after the runs.
        plot::check(path, "--plot")?;
    }
    if args.dry_run {
        io::stdout()
            .lock()
            .write_all(planned_runs(args).as_bytes())?;
        return Ok(true);
    }
    // Fail before printing anything if there is no RDS at all.
    drop(new_socket()?);
    let implementation = rrds::loaded_implementation().unwrap_or("none");
    // Not locked: the interval lines come from a thread of their own.
    let mut report = Report::new(io::stdout(), args.json, implementation, args);
    report.header()?;
    let intervals = args.interval.map(|every| {
        let json = args.json;
        Intervals::new(every, move |tick| {
            // A line that cannot be written is not worth stopping for; the
            // report's own lines will fail the same way.
            let _ = writeln!(
                io::stdout(),
                "{}",
                report::interval(json, implementation, tick)
            );
        })
    });
    cfg.meter = intervals.as_ref().map(Intervals::meter);
    let cpu = CpuClock::start();
    // Ctrl-C ends the run under way and the benchmark after it, with the
    // report of what was measured. With --connect it ends the process, as
    // before: the server's ends would wait out their timeouts.
    if cfg.remote.is_none() {
        catch_sigint()?;
    }
    let progress =
        Progress::new(!args.json && args.interval.is_none() && io::stderr().is_terminal());
    let runs = args.runs();
    let steps: usize = args
        .mode
        .kinds()
        .iter()
        .map(|&kind| args.sizes_of(kind).len() * runs as usize)
        .sum();
    let mut step = 0;
    let mut summaries = Vec::new();
    'all: for &kind in args.mode.kinds() {
        for &size in args.sizes_of(kind) {
            let mut samples = Vec::new();
            for run in 1..=runs {
                if interrupted() {
                    break;
                }
                step += 1;
                progress.start(Step {
                    kind,
                    size,
                    run,
                    runs,
                    step,
                    steps,
                });
                if let Some(intervals) = &intervals {
                    intervals.start(kind, size, run);
                }
                let measured = match (kind, cfg.remote) {
                    (_, Some(server)) => remote::run(&cfg, server, kind, size, run),
                    (Kind::Rate, None) => rate::run(&cfg, size, run),
                    (Kind::Latency, None) => latency::run(&cfg, size, run),
                    (Kind::RdmaWrite, None) => rdma::run(&cfg, size, run, Direction::Write),
                    (Kind::RdmaRead, None) => rdma::run(&cfg, size, run, Direction::Read),
                    (Kind::Register, None) => register::run(&cfg, size, run),
                };
                // Erased before anything else is printed, errors included.
                progress.stop();
                if let Some(intervals) = &intervals {
                    intervals.stop();
                }
                let sample = measured.map_err(|err| {
                    context(
                        err,
                        format_args!("{kind} run {run} with {size}-byte messages"),
                    )
                })?;
                report.sample(&sample)?;
                samples.push(sample);
            }
            if samples.is_empty() {
                break 'all;
            }
            let summary = Summary::of(kind, size, &samples);
            report.median(&summary)?;
            summaries.push(summary);
            if interrupted() {
                break 'all;
            }
        }
    }
    drop(progress);
    drop(intervals);
    if interrupted() {
        eprintln!("rrds bench: interrupted: the report covers the runs measured so far");
    }
    report.finish(&summaries, cpu.percent())?;
    let clean = summaries.iter().all(|s| s.errors == 0);
    if let Some(path) = &args.plot {
        let result = plot::Source {
            label: None,
            meta: plot::Meta::new(implementation, args),
            summaries,
        };
        plot::write(path, "--plot", &[result])?;
    }
    Ok(clean)
}

/// Bytes of socket buffer for `size`-byte messages, `depth` in flight.
fn buffer_bytes(size: usize, depth: u64) -> usize {
    let depth = usize::try_from(depth).unwrap_or(usize::MAX);
    size.saturating_mul(depth)
        .clamp(MIN_BUFFER, MAX_BUFFER)
        .max(size)
}

/// Raises the send and receive buffers: the FORCE options (root) lift the
/// `wmem_max`/`rmem_max` clamp; without privilege fall back to the plain
/// ones.
fn set_buffers(sock: &RdsSocket, bytes: usize) -> io::Result<()> {
    match sock.set_sndbuf_force(bytes) {
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => sock.set_sndbuf(bytes),
        other => other,
    }
    .map_err(|err| context(err, "SO_SNDBUF"))?;
    match sock.set_rcvbuf_force(bytes) {
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => sock.set_rcvbuf(bytes),
        other => other,
    }
    .map_err(|err| context(err, "SO_RCVBUF"))
}

/// Pins IB on an unbound socket, explaining `ENOPROTOOPT`.
fn pin_ib(sock: &RdsSocket) -> io::Result<()> {
    sock.set_transport(Transport::Ib).map_err(|err| {
        if err.raw_os_error() == Some(libc::ENOPROTOOPT) {
            context(
                err,
                "SO_RDS_TRANSPORT ib: the loaded RDS implementation has no IB transport \
                 (in-tree rds: modprobe rds_rdma; rrds: a build without one)",
            )
        } else {
            context(err, "SO_RDS_TRANSPORT ib")
        }
    })
}

/// Binds `sock` to `at` with the transport `cfg` asks for.
fn bind(cfg: &Config, sock: &RdsSocket, at: SocketAddr) -> io::Result<()> {
    if cfg.transport == TransportArg::Ib {
        pin_ib(sock)?;
    }
    let addr = at.ip();
    sock.bind(at).map_err(|err| {
        if cfg.transport == TransportArg::Ib && err.raw_os_error() == Some(libc::ENOPROTOOPT) {
            context(
                err,
                format_args!(
                    "bind {at} with IB pinned: {addr} is not an address of an RDMA device the \
                     IB transport can use (in-tree RDS/IB: init_net only, no iWARP)"
                ),
            )
        } else {
            context(err, format_args!("bind {at}"))
        }
    })?;
    if cfg.transport == TransportArg::Loop {
        let attached = sock
            .transport()
            .map_err(|err| context(err, "SO_RDS_TRANSPORT"))?;
        if attached != Transport::Loopback {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("--transport loop: the socket bound to {at} uses {attached}, not loopback"),
            ));
        }
    }
    Ok(())
}

/// `ip netns`'s file for a namespace name; a path stays as it is.
fn netns_path(name: &str) -> PathBuf {
    if name.contains('/') {
        PathBuf::from(name)
    } else {
        Path::new("/run/netns").join(name)
    }
}

/// Runs `f` with this thread in the network namespace of the file `netns`,
/// then returns the thread to its own namespace. A socket stays in the
/// namespace it was created in; binding it there too matters: rrds starts
/// the namespace's RDMA listener at bind, and an iWARP (siw) listener is a
/// TCP socket of the binding task's namespace.
fn in_netns<T>(netns: &Path, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let own = File::open("/proc/thread-self/ns/net")
        .map_err(|err| context(err, "open /proc/thread-self/ns/net"))?;
    let target =
        File::open(netns).map_err(|err| context(err, format_args!("open {}", netns.display())))?;
    let enter = |ns: &File, what: &dyn std::fmt::Display| {
        // SAFETY: setns takes a descriptor and a flag; ns stays open across the call.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
            return Err(context(
                io::Error::last_os_error(),
                format_args!("setns {what}"),
            ));
        }
        Ok(())
    };
    enter(&target, &netns.display())?;
    let result = f();
    enter(&own, &"back")?;
    result
}

/// The receiving end's socket: like [`open_socket`], in `--peer-netns`.
fn open_peer_socket(cfg: &Config, size: usize) -> io::Result<RdsSocket> {
    match &cfg.peer_netns {
        Some(netns) => in_netns(netns, || open_socket(cfg, cfg.peer_addr, size)),
        None => open_socket(cfg, cfg.peer_addr, size),
    }
}

/// A non-blocking socket bound to `addr` (port 0), able to send
/// `size`-byte messages.
fn open_socket(cfg: &Config, addr: IpAddr, size: usize) -> io::Result<RdsSocket> {
    open_socket_at(cfg, SocketAddr::new(addr, 0), size)
}

/// Like [`open_socket`], bound to `at`.
fn open_socket_at(cfg: &Config, at: SocketAddr, size: usize) -> io::Result<RdsSocket> {
    setup_socket(cfg, new_socket()?, at, size)
}

/// Buffers, bind, non-blocking and the send limit of a new socket.
fn setup_socket(
    cfg: &Config,
    sock: RdsSocket,
    at: SocketAddr,
    size: usize,
) -> io::Result<RdsSocket> {
    set_buffers(&sock, buffer_bytes(size, cfg.depth))?;
    bind(cfg, &sock, at)?;
    sock.set_nonblocking(true)?;
    let limit = sock.send_limit()?;
    if limit < size {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{size}-byte messages need SO_SNDBUF >= {size}, but the socket allows {limit}: \
                 run as root (SO_SNDBUFFORCE) or raise net.core.wmem_max"
            ),
        ));
    }
    Ok(sock)
}

/// A timeout error for an end that saw no progress.
fn no_progress(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what)
}

/// Runs `task` `tasks` times at once, one thread each (`--tasks`; each
/// opens its own sockets), and returns every result, or the first error.
fn in_tasks<T: Send>(tasks: u32, task: impl Fn() -> io::Result<T> + Sync) -> io::Result<Vec<T>> {
    if tasks <= 1 {
        return task().map(|one| vec![one]);
    }
    thread::scope(|scope| {
        let handles: Vec<_> = (0..tasks).map(|_| scope.spawn(&task)).collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("benchmark task panicked")))
            })
            .collect()
    })
}

/// The sum of the tasks' rates `count / secs`; `None` if no task measured
/// any time.
fn summed_rate(parts: impl Iterator<Item = (f64, f64)>) -> Option<f64> {
    parts
        .filter(|&(_, secs)| secs > 0.0)
        .map(|(count, secs)| count / secs)
        .reduce(|a, b| a + b)
}

/// Runs `a` on a new thread and `b` on this one, sharing a stop flag that
/// either sets when it returns, and returns both results.
fn run_pair<A, B, RA, RB>(stop: &AtomicBool, a: A, b: B) -> (io::Result<RA>, io::Result<RB>)
where
    A: FnOnce() -> io::Result<RA> + Send,
    B: FnOnce() -> io::Result<RB>,
    RA: Send,
{
    thread::scope(|scope| {
        let handle = scope.spawn(|| {
            let result = a();
            stop.store(true, Ordering::Relaxed);
            result
        });
        let result_b = b();
        stop.store(true, Ordering::Relaxed);
        let result_a = handle
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("benchmark thread panicked")));
        (result_a, result_b)
    })
}

/// `rrds bench` with `extra` as its options, parsed as the command line
/// would be: for the tests of this module's files.
#[cfg(test)]
pub(super) fn parsed_args(extra: &[&str]) -> BenchArgs {
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        bench: BenchArgs,
    }
    let argv = ["bench"].iter().chain(extra).copied();
    Wrapper::try_parse_from(argv).unwrap().bench
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn dry_run(argv: &[&str]) -> Result<String, String> {
        let argv = ["bench", "--dry-run"].iter().chain(argv);
        let args = Cli::try_parse_from(argv).map_err(|e| e.to_string())?.bench;
        args.check()?;
        check_endpoints(args.addr, args.peer_addr(), args.transport)?;
        Ok(planned_runs(&args))
    }

    #[test]
    fn dry_run_lists_the_runs_and_refuses_what_a_run_would() {
        assert_eq!(
            dry_run(&["-q", "64", "-q", "8k", "--mode", "both", "--runs", "2", "-T", "0.5"]),
            Ok("rate 64 B: 2 x 0.5 s\nrate 8192 B: 2 x 0.5 s\n\
                latency 64 B: 2 x 0.5 s\nlatency 8192 B: 2 x 0.5 s\n"
                .to_string())
        );
        assert_eq!(
            dry_run(&["--mode", "register", "-D", "1m", "-T", "0"]),
            Ok("register 1048576 B: one run until Ctrl-C\n".to_string())
        );
        assert!(dry_run(&["--mode", "rate", "-D", "4k"])
            .unwrap_err()
            .contains("--rdma-size"));
        assert!(dry_run(&["--transport", "loop", "--addr", "10.0.0.1"]).is_err());
        assert!(dry_run(&["--mode", "warp"]).is_err());
        assert!(dry_run(&["--server"]).is_err());
    }

    /// `rrds bench`'s options as `scripts/bench-options.txt` lists them for
    /// the scripts' check before a boot: `--long -s value|flag once|many
    /// [possible value...]`, `-` for no short form.
    fn options_table() -> String {
        let cmd = BenchArgs::augment_args(clap::Command::new("bench"));
        let mut text = String::new();
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let short = arg.get_short().map_or("-".to_string(), |c| format!("-{c}"));
            let takes = if arg.get_action().takes_values() {
                "value"
            } else {
                "flag"
            };
            let times = match arg.get_action() {
                clap::ArgAction::Append => "many",
                _ => "once",
            };
            text.push_str(&format!("--{long} {short} {takes} {times}"));
            for value in arg.get_possible_values() {
                if !matches!(arg.get_action(), clap::ArgAction::SetTrue) {
                    text.push(' ');
                    text.push_str(value.get_name());
                }
            }
            text.push('\n');
        }
        text
    }

    /// The scripts check options against this file, so it must be what
    /// clap takes. `RRDS_BLESS=1 cargo test` rewrites it.
    #[test]
    fn scripts_know_every_bench_option() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/bench-options.txt"
        );
        let want = format!(
            "# rrds bench's options for scripts/common.sh's check_bench_options, written by\n\
             # tools/rrds-cli/src/cmd/bench/mod.rs's scripts_know_every_bench_option\n\
             # (RRDS_BLESS=1 cargo test): --long -short|- value|flag once|many [values...]\n{}",
            options_table()
        );
        if std::env::var_os("RRDS_BLESS").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            have, want,
            "{path} is stale: RRDS_BLESS=1 cargo test rewrites it"
        );
    }

    #[test]
    fn task_rates_add_up() {
        assert_eq!(
            summed_rate([(100.0, 2.0), (30.0, 1.0)].into_iter()),
            Some(80.0)
        );
        // A task that measured no time adds nothing; none at all is no rate.
        assert_eq!(
            summed_rate([(5.0, 0.0), (10.0, 5.0)].into_iter()),
            Some(2.0)
        );
        assert_eq!(summed_rate([(5.0, 0.0)].into_iter()), None);
    }

    #[test]
    fn tasks_run_at_once_and_keep_their_results() {
        let started = std::sync::atomic::AtomicU32::new(0);
        let all = in_tasks(4, || {
            let n = started.fetch_add(1, Ordering::SeqCst);
            // Every task waits for the others: they must run concurrently.
            let since = Instant::now();
            while started.load(Ordering::SeqCst) < 4 && since.elapsed() < Duration::from_secs(10) {
                thread::sleep(Duration::from_millis(1));
            }
            Ok((n, started.load(Ordering::SeqCst)))
        })
        .unwrap();
        assert_eq!(all.len(), 4);
        assert!(all.iter().all(|&(_, seen)| seen == 4));
        let failed = in_tasks(3, || -> io::Result<()> { Err(io::Error::other("task")) });
        assert!(failed.is_err());
    }

    #[test]
    fn sizes_accept_suffixes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("64"), Ok(64));
        assert_eq!(parse_size("8k"), Ok(8192));
        assert_eq!(parse_size("8K"), Ok(8192));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
    }

    #[test]
    fn sizes_above_one_mib_or_malformed_are_rejected() {
        assert!(parse_size("1048577").is_err());
        assert!(parse_size("2m").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("12x").is_err());
        assert!(parse_size("99999999999999999999k").is_err());
    }

    #[test]
    fn seconds_must_be_positive() {
        assert_eq!(parse_seconds("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_seconds("0.25"), Ok(Duration::from_millis(250)));
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("nan").is_err());
        assert!(parse_seconds("inf").is_err());
    }

    #[test]
    fn buffers_hold_depth_messages_within_bounds() {
        assert_eq!(buffer_bytes(64, 32), MIN_BUFFER);
        assert_eq!(buffer_bytes(65536, 32), 2 << 20);
        assert_eq!(buffer_bytes(1 << 20, 32), 32 << 20);
        assert_eq!(buffer_bytes(1 << 20, 65536), MAX_BUFFER);
        assert_eq!(buffer_bytes(1 << 20, 1), 1 << 20);
    }

    #[test]
    fn one_address_family_only() {
        let v4: IpAddr = "10.254.9.1".parse().unwrap();
        let v6: IpAddr = "::1".parse().unwrap();
        assert_eq!(check_endpoints(v4, v4, TransportArg::Ib), Ok(()));
        assert_eq!(check_endpoints(v6, v6, TransportArg::Default), Ok(()));
        assert!(check_endpoints(v4, v6, TransportArg::Default).is_err());
        assert!(check_endpoints(v6, v4, TransportArg::Ib).is_err());
        let mapped: IpAddr = "::ffff:10.254.9.2".parse().unwrap();
        assert_eq!(check_endpoints(v4, mapped, TransportArg::Ib), Ok(()));
    }

    #[test]
    fn loop_needs_loopback_addresses() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let lo2: IpAddr = "127.0.0.2".parse().unwrap();
        let lo6: IpAddr = "::1".parse().unwrap();
        let rdma: IpAddr = "10.254.9.2".parse().unwrap();
        assert_eq!(check_endpoints(lo, lo2, TransportArg::Loop), Ok(()));
        assert_eq!(check_endpoints(lo6, lo6, TransportArg::Loop), Ok(()));
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(check_endpoints(mapped, lo, TransportArg::Loop), Ok(()));
        let err = check_endpoints(lo, rdma, TransportArg::Loop).unwrap_err();
        assert!(err.contains("10.254.9.2"), "{err}");
        assert!(check_endpoints(rdma, lo, TransportArg::Loop).is_err());
        // Other transports leave the addresses to the kernel.
        assert_eq!(check_endpoints(lo, rdma, TransportArg::Default), Ok(()));
    }

    #[test]
    fn transport_names() {
        for t in [TransportArg::Ib, TransportArg::Loop, TransportArg::Default] {
            let value = t.to_possible_value().unwrap();
            assert_eq!(value.get_name(), t.as_str());
        }
    }

    #[test]
    fn both_runs_rate_then_latency() {
        assert_eq!(Mode::Both.kinds(), &[Kind::Rate, Kind::Latency]);
        assert_eq!(Mode::Rate.kinds(), &[Kind::Rate]);
    }

    #[test]
    fn summary_takes_medians_and_sums_errors() {
        let sample = |run, rate: f64, errors| Sample {
            msgs_per_sec: Some(rate),
            mb_per_sec: Some(rate / 10.0),
            errors,
            ..Sample::empty(Kind::Rate, 64, run)
        };
        let samples = [
            sample(1, 300.0, 0),
            sample(2, 100.0, 2),
            sample(3, 200.0, 1),
        ];
        let summary = Summary::of(Kind::Rate, 64, &samples);
        assert_eq!(summary.runs, 3);
        assert_eq!(summary.msgs_per_sec, Some(200.0));
        assert_eq!(summary.mb_per_sec, Some(20.0));
        assert_eq!(summary.lat_p50_us, None);
        assert_eq!(summary.errors, 3);
    }

    #[test]
    fn pair_stops_the_other_end() {
        let stop = AtomicBool::new(false);
        let (a, b) = run_pair(
            &stop,
            || {
                while !stop.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_millis(1));
                }
                Ok(1)
            },
            || Err::<(), _>(io::Error::other("b failed")),
        );
        assert_eq!(a.unwrap(), 1);
        assert!(b.is_err());
    }
}
