// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! An RDMA WRITE into a registered region: a receiving socket registers a
//! buffer and sends its cookie; the sending socket writes into it with
//! RDMA, carried by a message; the receiver reads what arrived once the
//! message is in.
//!
//!     cargo run --example rdma_write -- LOCAL_ADDR PEER_ADDR
//!
//! Both addresses must be on RDMA devices (e.g. an rxe pair) and differ:
//! RDS between one address and itself is loopback, which has no RDMA.

use std::io;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::time::Duration;

use rrds::rdma::Direction;
use rrds::{RdmaFlags, RdmaOp, RdsSocket};

const DATA: &[u8] = b"written by RDMA";

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut addr = || -> io::Result<IpAddr> {
        args.next()
            .ok_or_else(|| bad("usage: rdma_write LOCAL_ADDR PEER_ADDR"))?
            .parse()
            .map_err(bad)
    };
    let (local, peer) = (addr()?, addr()?);

    let writer = RdsSocket::new()?;
    writer.bind(SocketAddr::new(local, 0))?;
    let target = RdsSocket::new()?;
    target.bind(SocketAddr::new(peer, 0))?;

    // The target registers 4 KiB and hands the cookie over.
    let region = target
        .register_memory(vec![0u8; 4096], RdmaFlags::empty())
        .map_err(io::Error::from)?;
    target.send_to(&region.cookie().to_le_bytes(), writer.local_addr()?)?;
    let mut cookie = [0u8; 8];
    writer.recv_from(&mut cookie)?;

    // The writer's WRITE travels with a message; the message arrives after it.
    let op = RdmaOp {
        direction: Direction::Write,
        cookie: u64::from_le_bytes(cookie),
        remote_offset: 0,
        buf: DATA.to_vec(),
        token: 1,
        flags: RdmaFlags::empty(),
    };
    let in_flight = writer.send_rdma(b"written", target.local_addr()?, op)?;
    let mut note = [0u8; 16];
    let (len, _) = target.recv_from(&mut note)?;
    println!(
        "message: {:?}",
        String::from_utf8_lossy(&note[..len.min(note.len())])
    );
    let mut got = vec![0u8; DATA.len()];
    region.copy_out(0, &mut got).expect("within the region");
    println!("region: {:?}", String::from_utf8_lossy(&got));

    // The writer's outcome hands its buffer back.
    if !writer.wait_readable(Duration::from_secs(5))? {
        return Err(bad("no outcome within 5 s"));
    }
    for status in writer.recv_msg(&mut [])?.rdma_statuses {
        println!("outcome of token {}: {}", status.token, status.status);
        if status.token == in_flight.token() {
            let _buf = in_flight.finish(&status).expect("its own outcome");
            break;
        }
    }
    region.free()?;
    Ok(())
}

fn bad(err: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, err.to_string())
}
