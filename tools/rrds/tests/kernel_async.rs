// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! `AsyncRdsSocket` against the loaded module (feature `tokio`), over the
//! loopback transport (127.0.0.1; `lo` must be up). Ignored by a plain
//! `cargo test`: they need the kernel. `selftests/tools_test.c` runs them
//! in the test VM after `tests/kernel.rs`, from a build with
//! `--features tokio`.

use std::future::Future;
use std::io;
use std::io::{IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use rrds::{AsyncRdsSocket, Transport};
use tokio::time::timeout;

/// Runs `f` on a runtime with I/O and timers, for at most 60 s.
fn block_on<T>(f: impl Future<Output = io::Result<T>>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async { timeout(Duration::from_secs(60), f).await })
        .expect("the test took 60 s")
        .expect("the test failed")
}

/// A socket bound to 127.0.0.1, port 0, on the runtime.
fn loopback() -> io::Result<AsyncRdsSocket> {
    AsyncRdsSocket::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
}

/// `f` within `secs` seconds, else a `TimedOut` error naming `what`.
async fn within<T>(secs: u64, what: &str, f: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    timeout(Duration::from_secs(secs), f).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what}: nothing within {secs} s"),
        )
    })?
}

/// Two async sockets bounce datagrams back and forth, the echo a task of
/// its own; vectored and batched sends and receives go through the same
/// waits.
#[test]
#[ignore]
fn async_sockets_ping_pong_over_loopback() {
    const ROUNDS: u32 = 20;
    block_on(async {
        let ping = loopback()?;
        let pong = loopback()?;
        assert_eq!(ping.get_ref().transport()?, Transport::Loopback);
        let (from, to) = (ping.local_addr()?, pong.local_addr()?);
        let echo = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            for _ in 0..ROUNDS {
                let (len, from) = pong.recv_from(&mut buf).await?;
                pong.send_to(&buf[..len.min(buf.len())], from).await?;
            }
            Ok::<_, io::Error>(pong)
        });
        let mut buf = [0u8; 64];
        for round in 0..ROUNDS {
            ping.send_to(&round.to_le_bytes(), to).await?;
            let got = within(10, "a pong", ping.recv_msg(&mut buf)).await?;
            assert_eq!((got.len, got.from), (4, Some(to)), "round {round}");
            assert_eq!(buf[..4], round.to_le_bytes());
        }
        let pong = echo.await.map_err(io::Error::other)??;

        let slices = [IoSlice::new(b"vec"), IoSlice::new(b"tored")];
        assert_eq!(ping.send_to_vectored(&slices, to).await?, 8);
        let (mut head, mut tail) = ([0u8; 3], [0u8; 16]);
        let got = within(
            10,
            "a vectored datagram",
            pong.recv_msg_vectored(&mut [IoSliceMut::new(&mut head), IoSliceMut::new(&mut tail)]),
        )
        .await?;
        assert_eq!((got.len, got.from), (8, Some(from)));
        assert_eq!((&head, &tail[..5]), (b"vec", &b"tored"[..]));

        let msgs = [(&b"1"[..], to), (&b"22"[..], to), (&b"333"[..], to)];
        let mut sent = 0;
        while sent < msgs.len() {
            sent += ping.send_batch(&msgs[sent..]).await?;
        }
        let mut bufs = [[0u8; 8]; 8];
        let mut received = Vec::new();
        let mut lens = Vec::new();
        while lens.len() < msgs.len() {
            within(10, "a batch", pong.recv_batch(&mut bufs, &mut received)).await?;
            for (r, buf) in received.iter().zip(&bufs) {
                assert_eq!(r.from, Some(from));
                assert_eq!(buf[..r.len], msgs[lens.len()].0[..]);
                lens.push(r.len);
            }
        }
        assert_eq!(lens, [1, 2, 3]);
        Ok(())
    });
}

/// Congestion is not POLLOUT: once the receiver holds more than half its
/// receive buffer, a non-blocking send to its port fails with `ENOBUFS`,
/// and the async send waits instead, however writable the socket says it
/// is; it goes once the receiver drains. The sender, with
/// `RDS_CONG_MONITOR` on, hears of the cleared port as a notification on
/// its own receive queue.
#[test]
#[ignore]
fn async_send_to_a_congested_port_goes_once_the_receiver_drains() {
    block_on(async {
        let rx = loopback()?;
        let tx = loopback()?;
        rx.get_ref().set_rcvbuf(8192)?;
        tx.get_ref().set_cong_monitor(true)?;
        let to = rx.local_addr()?;
        let msg = [0x5au8; 1024];
        let mut queued = 0;
        loop {
            match tx.get_ref().send_to(&msg, to) {
                Ok(_) => queued += 1,
                Err(err) if err.raw_os_error() == Some(libc::ENOBUFS) => break,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err(err) => return Err(err),
            }
            assert!(queued < 10_000, "no congestion after {queued} datagrams");
        }
        assert!(queued > 0, "congested before the first datagram");

        let mut send = Box::pin(tx.send_to(b"last", to));
        assert!(
            timeout(Duration::from_millis(300), &mut send)
                .await
                .is_err(),
            "a send to a congested port went"
        );
        let mut buf = [0u8; 2048];
        for i in 0..queued {
            let (len, from) = within(10, "a queued datagram", rx.recv_from(&mut buf)).await?;
            assert_eq!((len, from), (msg.len(), tx.local_addr()?), "datagram {i}");
        }
        assert_eq!(within(10, "the waiting send", send).await?, 4);
        let (len, _) = within(10, "the last datagram", rx.recv_from(&mut buf)).await?;
        assert_eq!(&buf[..len], b"last");

        let note = within(10, "the congestion update", tx.recv_msg(&mut [])).await?;
        assert_eq!(note.from, None, "{note:?}");
        let ports = note.cong_update.expect("a congestion update");
        assert_ne!(ports & (1 << (to.port() % 64)), 0, "{ports:#x}");
        Ok(())
    });
}
