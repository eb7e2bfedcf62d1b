// SPDX-License-Identifier: GPL-2.0-only
//! `rrds ping`: rds-ping.
//!
//! A 0-byte message to port 0 is a ping: it reaches no socket, and the
//! destination's RDS stack answers with a 0-byte message from port 0 (a
//! pong) to the pinging socket.

use std::io;
use std::io::Write;
use std::net::IpAddr;
use std::net::Ipv4Addr;
use std::net::Ipv6Addr;
use std::net::SocketAddr;
use std::net::ToSocketAddrs;
use std::net::UdpSocket;
use std::time::Duration;
use std::time::Instant;

use clap::value_parser;
use clap::Args;
use rrds::RdsSocket;
use serde_json::json;

use super::context;
use super::interrupt::catch_sigint;
use super::interrupt::interrupted;
use super::interrupt::pause_until;
use super::is_transient;
use super::json::write_record;
use super::new_socket;
use super::parse_seconds;
use super::stats::Recorder;

#[derive(Args, Debug)]
pub struct PingArgs {
    /// Number of pings to send. Default: until interrupted (Ctrl-C).
    #[arg(short = 'c', long, value_parser = value_parser!(u32).range(1..))]
    pub count: Option<u32>,
    /// Seconds between pings, fractions allowed (-i 0.1), as ping and
    /// rds-ping take it.
    #[arg(
        short = 'i',
        long = "interval",
        value_name = "SECONDS",
        value_parser = parse_interval,
        default_value = "1"
    )]
    pub interval: Duration,
    /// Seconds to wait for each pong, fractions allowed.
    #[arg(
        short = 'W',
        long = "timeout",
        value_name = "SECONDS",
        value_parser = parse_timeout,
        default_value = "1"
    )]
    pub timeout: Duration,
    /// Type of service of the pings' connection (SIOCRDSSETTOS; 0-255,
    /// decimal or 0x hex). Loopback has none: it fails there.
    #[arg(short = 'Q', long = "tos", value_name = "TOS", value_parser = parse_tos)]
    pub tos: Option<u8>,
    /// Local address to bind. Default: ADDR itself if it is a loopback
    /// address (where the loopback transport delivers the pong), else the
    /// source address of the route to ADDR.
    #[arg(short = 'I', long = "local", value_name = "LOCAL_ADDR")]
    pub local: Option<IpAddr>,
    /// JSON Lines: a `meta` record, `ping_start`, a `pong`, `no_pong` or
    /// `send_failed` record per ping, and `ping_summary`.
    #[arg(long)]
    pub json: bool,
    /// Address or host name to ping (IPv4 or IPv6).
    #[arg(value_name = "ADDR", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub addr: String,
}

/// `-i`: 0 sends the next ping as soon as the last pong is in.
fn parse_interval(text: &str) -> Result<Duration, String> {
    parse_seconds(text, true)
}

/// `-W`: a pong cannot come back in no time.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    parse_seconds(text, false)
}

/// `-Q`: a byte, decimal or `0x` hexadecimal.
fn parse_tos(text: &str) -> Result<u8, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u8::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("`{text}` is not a type of service from 0 to 255"))
}

/// Seconds as ping prints them: `1`, `0.5`, `20`.
fn seconds(d: Duration) -> String {
    format!("{}", d.as_secs_f64())
}

/// Resolves `host` (an address or a name) to the address to ping: the
/// first of the family of `local` when one is given, else the first.
fn resolve(host: &str, local: Option<IpAddr>) -> io::Result<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    let ips: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .map_err(|err| context(err, format_args!("cannot resolve {host}")))?
        .map(|addr| addr.ip())
        .collect();
    let same_family = |ip: &&IpAddr| local.is_none_or(|l| l.is_ipv4() == ip.is_ipv4());
    ips.iter()
        .find(same_family)
        .or(ips.first())
        .copied()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address")))
}

/// Runs the pings; `Ok(true)` if any pong came back (as ping: 1 if none
/// did).
pub fn run(args: &PingArgs) -> io::Result<bool> {
    // First: Ctrl-C while the name resolves or the socket binds ends with
    // the summary too, not the default action.
    catch_sigint()?;
    let mut out = io::stdout().lock();
    let target_ip = resolve(&args.addr, args.local)?;
    let local_ip = match args.local {
        Some(ip) => ip,
        None => default_local(target_ip)?,
    };
    let sock = new_socket()?;
    sock.bind(SocketAddr::new(local_ip, 0))
        .map_err(|err| context(err, format_args!("bind {local_ip}")))?;
    if let Some(tos) = args.tos {
        sock.set_tos(tos).map_err(|err| {
            if err.raw_os_error() == Some(libc::ENOTTY) {
                context(
                    err,
                    format_args!("-Q {tos}: SIOCRDSSETTOS (the loopback transport has no TOS)"),
                )
            } else {
                context(err, format_args!("-Q {tos}: SIOCRDSSETTOS"))
            }
        })?;
    }
    sock.set_nonblocking(true)?;
    let local = sock.local_addr()?;
    let target = SocketAddr::new(target_ip, 0);

    let shown = if args.addr == target_ip.to_string() {
        args.addr.clone()
    } else {
        format!("{} ({target_ip})", args.addr)
    };
    if args.json {
        let start = json!({ "addr": args.addr, "target": target_ip, "local": local });
        write_record(&mut out, "ping_start", &start)?;
    } else {
        writeln!(out, "PING {shown} from {local}: 0-byte RDS messages")?;
    }
    let mut rtts = Recorder::new();
    let mut sent: u64 = 0;
    while !interrupted() && args.count.is_none_or(|count| sent < u64::from(count)) {
        sent += 1;
        let seq = sent;
        // A pong later than its timeout must not answer the next ping.
        drain(&sock)?;
        let sent_at = Instant::now();
        match sock.send_to(&[], target) {
            Ok(_) => match wait_pong(&sock, sent_at, args.timeout)? {
                Pong::Back(from, rtt) => {
                    let ms = rtt.as_secs_f64() * 1e3;
                    if args.json {
                        let pong = json!({ "seq": seq, "from": from.ip(), "rtt_ms": ms });
                        write_record(&mut out, "pong", &pong)?;
                    } else {
                        writeln!(out, "pong from {}: seq={seq} time={ms:.3} ms", from.ip())?;
                    }
                    rtts.record(rtt);
                }
                Pong::TimedOut if args.json => {
                    let timeout_s = args.timeout.as_secs_f64();
                    let lost = json!({ "seq": seq, "timeout_s": timeout_s });
                    write_record(&mut out, "no_pong", &lost)?;
                }
                Pong::TimedOut => writeln!(
                    out,
                    "no pong for seq={seq} within {} s",
                    seconds(args.timeout)
                )?,
                Pong::Interrupted => {}
            },
            Err(err) if is_transient(&err) && args.json => {
                let failed = json!({ "seq": seq, "error": err.to_string() });
                write_record(&mut out, "send_failed", &failed)?;
            }
            Err(err) if is_transient(&err) => writeln!(out, "seq={seq}: send failed: {err}")?,
            Err(err) => return Err(context(err, format_args!("sendmsg to {target}"))),
        }
        if args.count.is_none_or(|count| sent < u64::from(count)) {
            pause_until(sent_at + args.interval);
        }
    }
    if args.json {
        write_record(
            &mut out,
            "ping_summary",
            &summary_json(&args.addr, sent, &rtts),
        )?;
    } else {
        write!(out, "{}", summary(&args.addr, sent, &rtts))?;
    }
    Ok(rtts.count() > 0)
}

/// The local address for pinging `addr` when none is given.
fn default_local(addr: IpAddr) -> io::Result<IpAddr> {
    if addr.is_loopback() {
        // The loopback transport sends the pong to (target address, our
        // port), so only a socket bound to the target itself receives it.
        return Ok(addr);
    }
    // Ask the routing table, as rds-ping does: a connected UDP socket's
    // local address is the route's source. connect() sends nothing.
    let unspecified: IpAddr = match addr {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let route = || -> io::Result<IpAddr> {
        let probe = UdpSocket::bind((unspecified, 0))?;
        probe.connect((addr, 9))?;
        Ok(probe.local_addr()?.ip())
    };
    route().map_err(|err| {
        context(
            err,
            format_args!("no local address to reach {addr} (pass -I LOCAL_ADDR)"),
        )
    })
}

/// Discards whatever is queued on the socket.
fn drain(sock: &RdsSocket) -> io::Result<()> {
    let mut buf = [0u8; 64];
    loop {
        match sock.recv_msg(&mut buf) {
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(context(err, "recvmsg")),
        }
    }
}

/// How waiting for a pong ended.
#[derive(Debug)]
enum Pong {
    /// From whom, after how long.
    Back(SocketAddr, Duration),
    TimedOut,
    /// Ctrl-C.
    Interrupted,
}

/// Waits until `sent_at + timeout` for a pong (a message from port 0).
fn wait_pong(sock: &RdsSocket, sent_at: Instant, timeout: Duration) -> io::Result<Pong> {
    let deadline = sent_at + timeout;
    let mut buf = [0u8; 64];
    loop {
        match sock.recv_msg(&mut buf) {
            Ok(received) => match received.from {
                // Later than the timeout is no pong within it, even when it
                // was queued by the time we looked (loopback answers inside
                // sendmsg, which can outlast a short -W).
                Some(from) if from.port() == 0 => {
                    let rtt = sent_at.elapsed();
                    return Ok(if rtt > timeout {
                        Pong::TimedOut
                    } else {
                        Pong::Back(from, rtt)
                    });
                }
                // Not a pong (a datagram from a socket, or a notification).
                _ => {}
            },
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                if interrupted() {
                    return Ok(Pong::Interrupted);
                }
                let now = Instant::now();
                if now >= deadline {
                    return Ok(Pong::TimedOut);
                }
                // SIGINT ends the poll early (no SA_RESTART).
                sock.wait_readable(deadline - now)?;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(context(err, "recvmsg")),
        }
    }
}

/// The closing statistics, like ping's: pings sent (each one tried,
/// a last one cut short by Ctrl-C included), pongs received, loss, and
/// the round trips' min/avg/max/mdev (mdev: their standard deviation).
fn summary(addr: &str, sent: u64, rtts: &Recorder) -> String {
    let received = rtts.count();
    let loss = loss_percent(sent, received);
    let mut text = format!(
        "--- {addr} rds-ping statistics ---\n{sent} pings sent, {received} pongs received, {loss:.0}% loss\n"
    );
    if let Some(lat) = rtts.latency() {
        text.push_str(&format!(
            "rtt min/avg/max/mdev = {:.3}/{:.3}/{:.3}/{:.3} ms\n",
            lat.min_us / 1e3,
            lat.mean_us / 1e3,
            lat.max_us / 1e3,
            lat.stdev_us / 1e3
        ));
    }
    text
}

/// The closing statistics as a `ping_summary` record: `rtt_ms` is `null`
/// when no pong came back.
fn summary_json(addr: &str, sent: u64, rtts: &Recorder) -> serde_json::Value {
    let received = rtts.count();
    let rtt_ms = rtts.latency().map(|lat| {
        json!({
            "min": lat.min_us / 1e3,
            "avg": lat.mean_us / 1e3,
            "max": lat.max_us / 1e3,
            "mdev": lat.stdev_us / 1e3,
        })
    });
    json!({
        "addr": addr,
        "sent": sent,
        "received": received,
        "loss_percent": loss_percent(sent, received),
        "rtt_ms": rtt_ms,
    })
}

/// Pings without their pong, in percent of those sent.
fn loss_percent(sent: u64, received: u64) -> f64 {
    if sent == 0 {
        0.0
    } else {
        100.0 * (sent as f64 - received as f64) / sent as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_target_pings_from_itself() {
        let addr: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(default_local(addr).unwrap(), addr);
        let addr: IpAddr = "::1".parse().unwrap();
        assert_eq!(default_local(addr).unwrap(), addr);
    }

    fn recorded(us: &[u64]) -> Recorder {
        let mut rec = Recorder::new();
        us.iter()
            .for_each(|&us| rec.record(Duration::from_micros(us)));
        rec
    }

    #[test]
    fn summary_with_all_pongs() {
        assert_eq!(
            summary("127.0.0.1", 2, &recorded(&[10, 30])),
            "--- 127.0.0.1 rds-ping statistics ---\n\
             2 pings sent, 2 pongs received, 0% loss\n\
             rtt min/avg/max/mdev = 0.010/0.020/0.030/0.010 ms\n"
        );
    }

    #[test]
    fn summary_with_some_pongs_lost() {
        assert_eq!(
            summary("rds-peer", 4, &recorded(&[1000, 2000, 3000])),
            "--- rds-peer rds-ping statistics ---\n\
             4 pings sent, 3 pongs received, 25% loss\n\
             rtt min/avg/max/mdev = 1.000/2.000/3.000/0.816 ms\n"
        );
    }

    #[test]
    fn summary_with_no_pongs_has_no_rtt_line() {
        assert_eq!(
            summary("10.0.0.1", 4, &Recorder::new()),
            "--- 10.0.0.1 rds-ping statistics ---\n\
             4 pings sent, 0 pongs received, 100% loss\n"
        );
        // Interrupted before the first ping.
        assert_eq!(
            summary("10.0.0.1", 0, &Recorder::new()),
            "--- 10.0.0.1 rds-ping statistics ---\n\
             0 pings sent, 0 pongs received, 0% loss\n"
        );
    }

    #[test]
    fn json_summary_has_the_same_figures() {
        let summary = summary_json("rds-peer", 4, &recorded(&[1000, 2000, 3000]));
        assert_eq!(summary["sent"], 4);
        assert_eq!(summary["received"], 3);
        assert_eq!(summary["loss_percent"], 25.0);
        assert_eq!(summary["rtt_ms"]["avg"], 2.0);
        assert_eq!(summary["rtt_ms"]["min"], 1.0);
        let none = summary_json("10.0.0.1", 2, &Recorder::new());
        assert_eq!(none["loss_percent"], 100.0);
        assert!(none["rtt_ms"].is_null());
    }

    #[test]
    fn seconds_take_fractions() {
        assert_eq!(parse_interval("0.1"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_interval("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_interval("0"), Ok(Duration::ZERO));
        assert_eq!(parse_timeout("20"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_timeout(".5"), Ok(Duration::from_millis(500)));
        assert!(parse_timeout("0").is_err());
        assert!(parse_interval("-1").is_err());
        assert!(parse_interval("1e9").is_err());
        assert!(parse_interval("NaN").is_err());
        assert!(parse_timeout("20ms").is_err());
        assert_eq!(seconds(Duration::from_millis(500)), "0.5");
        assert_eq!(seconds(Duration::from_secs(20)), "20");
    }

    #[test]
    fn tos_is_a_byte_in_decimal_or_hex() {
        assert_eq!(parse_tos("0"), Ok(0));
        assert_eq!(parse_tos("255"), Ok(255));
        assert_eq!(parse_tos("0x10"), Ok(16));
        assert_eq!(parse_tos("0XfF"), Ok(255));
        assert!(parse_tos("256").is_err());
        assert!(parse_tos("-1").is_err());
        assert!(parse_tos("0x100").is_err());
        assert!(parse_tos("low").is_err());
    }

    #[test]
    fn addresses_and_names_resolve() {
        let v4: IpAddr = "127.0.0.1".parse().unwrap();
        let v6: IpAddr = "::1".parse().unwrap();
        assert_eq!(resolve("127.0.0.1", None).unwrap(), v4);
        assert_eq!(resolve("::1", Some(v4)).unwrap(), v6);
        // A name: the local address's family first (localhost is both, or
        // at least IPv4, in every /etc/hosts).
        let ip = resolve("localhost", Some(v4)).unwrap();
        assert!(ip.is_loopback() && ip.is_ipv4(), "{ip}");
        assert!(resolve("localhost", None).unwrap().is_loopback());
        assert!(resolve("no-such-host.invalid", None).is_err());
    }
}
