// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Ping-pong over RDS on tokio: two `AsyncRdsSocket`s of this process, on
//! one address (loopback by default), bounce a message back and forth and
//! time the round trips; the echo is a task of its own. Notifications,
//! which share the receive queue with the datagrams, are printed as they
//! come.
//!
//!     cargo run --features tokio --example async_ping_pong -- [ADDR] [ROUNDS]

use std::io;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::time::Duration;
use std::time::Instant;

use rrds::AsyncRdsSocket;

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
    // A runtime with its I/O driver (the sockets) and timers (the timeout,
    // and the wait of a send to a congested port).
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(ping_pong(addr, rounds))
}

async fn ping_pong(addr: IpAddr, rounds: u32) -> io::Result<()> {
    let ping = AsyncRdsSocket::bind(SocketAddr::new(addr, 0))?;
    let pong = AsyncRdsSocket::bind(SocketAddr::new(addr, 0))?;
    let to = pong.local_addr()?;

    let echo = tokio::spawn(async move {
        let mut buf = [0u8; 64];
        let mut echoed = 0;
        while echoed < rounds {
            let got = pong.recv_msg(&mut buf).await?;
            match got.from {
                Some(from) => {
                    pong.send_to(&buf[..got.len.min(buf.len())], from).await?;
                    echoed += 1;
                }
                None => println!("echo: a notification: {got:?}"),
            }
        }
        Ok::<_, io::Error>(())
    });

    let mut buf = [0u8; 64];
    for round in 0..rounds {
        let start = Instant::now();
        ping.send_to(&round.to_le_bytes(), to).await?;
        let (len, from) = tokio::time::timeout(Duration::from_secs(5), ping.recv_from(&mut buf))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no pong within 5 s"))??;
        println!(
            "{len} bytes from {from}: round={round} time={:?}",
            start.elapsed()
        );
    }
    echo.await.map_err(io::Error::other)??;
    Ok(())
}

fn bad(err: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, err.to_string())
}
