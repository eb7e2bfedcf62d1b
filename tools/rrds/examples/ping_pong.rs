// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Ping-pong over RDS: two sockets of this process, on one address
//! (loopback by default), bounce a message back and forth and time the
//! round trips.
//!
//!     cargo run --example ping_pong -- [ADDR] [ROUNDS]

use std::io;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::thread;
use std::time::Instant;

use rrds::RdsSocket;

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr: IpAddr = args
        .next()
        .as_deref()
        .unwrap_or("127.0.0.1")
        .parse()
        .map_err(bad)?;
    let rounds: u32 = args
        .next()
        .as_deref()
        .unwrap_or("10")
        .parse()
        .map_err(bad)?;

    let ping = RdsSocket::new()?;
    let pong = RdsSocket::new()?;
    ping.bind(SocketAddr::new(addr, 0))?;
    pong.bind(SocketAddr::new(addr, 0))?;
    let to = pong.local_addr()?;

    let echo = thread::spawn(move || -> io::Result<()> {
        let mut buf = [0u8; 64];
        for _ in 0..rounds {
            let (len, from) = pong.recv_from(&mut buf)?;
            pong.send_to(&buf[..len.min(buf.len())], from)?;
        }
        Ok(())
    });

    let mut buf = [0u8; 64];
    for round in 0..rounds {
        let start = Instant::now();
        ping.send_to(&round.to_le_bytes(), to)?;
        let (len, from) = ping.recv_from(&mut buf)?;
        println!(
            "{len} bytes from {from}: round={round} time={:?}",
            start.elapsed()
        );
    }
    echo.join().expect("the echo thread")?;
    Ok(())
}

fn bad(err: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, err.to_string())
}
