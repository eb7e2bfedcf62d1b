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
use std::net::UdpSocket;
use std::thread;
use std::time::Duration;
use std::time::Instant;

use clap::value_parser;
use clap::Args;
use rrds::RdsSocket;

use super::context;
use super::is_transient;
use super::new_socket;

#[derive(Args, Debug)]
pub struct PingArgs {
    /// Number of pings to send.
    #[arg(short = 'c', long, default_value_t = 5, value_parser = value_parser!(u32).range(1..))]
    pub count: u32,
    /// Milliseconds between pings.
    #[arg(
        short = 'i',
        long = "interval",
        value_name = "INTERVAL_MS",
        default_value_t = 1000
    )]
    pub interval_ms: u64,
    /// Milliseconds to wait for each pong.
    #[arg(
        short = 'W',
        long = "timeout",
        value_name = "TIMEOUT_MS",
        default_value_t = 1000,
        value_parser = value_parser!(u64).range(1..)
    )]
    pub timeout_ms: u64,
    /// Local address to bind. Default: ADDR itself if it is a loopback
    /// address (where the loopback transport delivers the pong), else the
    /// source address of the route to ADDR.
    #[arg(short = 'I', long = "local", value_name = "LOCAL_ADDR")]
    pub local: Option<IpAddr>,
    /// Address to ping.
    #[arg(value_name = "ADDR")]
    pub addr: IpAddr,
}

/// Runs the pings; `Ok(true)` if every pong came back in time.
pub fn run(args: &PingArgs) -> io::Result<bool> {
    let mut out = io::stdout().lock();
    let local_ip = match args.local {
        Some(ip) => ip,
        None => default_local(args.addr)?,
    };
    let sock = new_socket()?;
    sock.bind(SocketAddr::new(local_ip, 0))
        .map_err(|err| context(err, format_args!("bind {local_ip}")))?;
    sock.set_nonblocking(true)?;
    let local = sock.local_addr()?;
    let target = SocketAddr::new(args.addr, 0);
    let interval = Duration::from_millis(args.interval_ms);
    let timeout = Duration::from_millis(args.timeout_ms);

    writeln!(out, "PING {} from {local}: 0-byte RDS messages", args.addr)?;
    let mut rtts = Vec::new();
    for seq in 1..=args.count {
        // A pong later than its timeout must not answer the next ping.
        drain(&sock)?;
        let sent_at = Instant::now();
        match sock.send_to(&[], target) {
            Ok(_) => match wait_pong(&sock, sent_at, timeout)? {
                Some((from, rtt)) => {
                    writeln!(
                        out,
                        "pong from {}: seq={seq} time={:.3} ms",
                        from.ip(),
                        rtt.as_secs_f64() * 1e3
                    )?;
                    rtts.push(rtt);
                }
                None => writeln!(out, "no pong for seq={seq} within {} ms", args.timeout_ms)?,
            },
            Err(err) if is_transient(&err) => writeln!(out, "seq={seq}: send failed: {err}")?,
            Err(err) => return Err(context(err, format_args!("sendmsg to {target}"))),
        }
        if seq < args.count {
            thread::sleep(interval.saturating_sub(sent_at.elapsed()));
        }
    }
    write!(out, "{}", summary(args.addr, args.count, &rtts))?;
    Ok(rtts.len() == args.count as usize)
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

/// Waits until `sent_at + timeout` for a pong (a message from port 0).
fn wait_pong(
    sock: &RdsSocket,
    sent_at: Instant,
    timeout: Duration,
) -> io::Result<Option<(SocketAddr, Duration)>> {
    let deadline = sent_at + timeout;
    let mut buf = [0u8; 64];
    loop {
        match sock.recv_msg(&mut buf) {
            Ok(received) => match received.from {
                Some(from) if from.port() == 0 => return Ok(Some((from, sent_at.elapsed()))),
                // Not a pong (a datagram from a socket, or a notification).
                _ => {}
            },
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                let now = Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                sock.wait_readable(deadline - now)?;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(context(err, "recvmsg")),
        }
    }
}

/// The closing statistics, like ping's.
fn summary(addr: IpAddr, sent: u32, rtts: &[Duration]) -> String {
    let received = rtts.len();
    let loss = if sent == 0 {
        0.0
    } else {
        100.0 * (f64::from(sent) - received as f64) / f64::from(sent)
    };
    let mut text = format!(
        "--- {addr} rds-ping statistics ---\n{sent} pings sent, {received} pongs received, {loss:.0}% loss\n"
    );
    let ms: Vec<f64> = rtts.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    if let (Some(min), Some(max), Some(avg)) = (
        ms.iter().copied().reduce(f64::min),
        ms.iter().copied().reduce(f64::max),
        super::stats::mean(&ms),
    ) {
        text.push_str(&format!(
            "rtt min/avg/max = {min:.3}/{avg:.3}/{max:.3} ms\n"
        ));
    }
    text
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

    #[test]
    fn summary_with_all_pongs() {
        let rtts = [Duration::from_micros(10), Duration::from_micros(30)];
        assert_eq!(
            summary("127.0.0.1".parse().unwrap(), 2, &rtts),
            "--- 127.0.0.1 rds-ping statistics ---\n\
             2 pings sent, 2 pongs received, 0% loss\n\
             rtt min/avg/max = 0.010/0.020/0.030 ms\n"
        );
    }

    #[test]
    fn summary_with_no_pongs_has_no_rtt_line() {
        assert_eq!(
            summary("10.0.0.1".parse().unwrap(), 4, &[]),
            "--- 10.0.0.1 rds-ping statistics ---\n\
             4 pings sent, 0 pongs received, 100% loss\n"
        );
    }
}
