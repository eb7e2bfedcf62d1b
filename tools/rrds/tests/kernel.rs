// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The crate against the loaded module, between two network namespaces over
//! an RDMA device pair. Ignored by a plain `cargo test`: they need the
//! kernel. `selftests/tools_test.c` runs them in the test VM on rxe and on
//! siw, with `RRDS_TEST_LOCAL` (an address of this namespace),
//! `RRDS_TEST_REMOTE`, `RRDS_TEST_PEER_NETNS` (the peer's namespace),
//! `RRDS_TEST_DEVICE` (`rxe` or `siw`) and `RRDS_TEST_ATOMICS`.

use std::fs::File;
use std::io;
use std::io::{IoSlice, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;

use rrds::mr::cookie_offset;
use rrds::rdma::Direction;
use rrds::{
    Atomic, AtomicOp, RdmaFlags, RdmaOp, RdmaStatus, RdsSocket, Received, RxPathLatency, RxPathSpan,
};

struct Pair {
    local: IpAddr,
    remote: IpAddr,
    peer_netns: String,
}

fn pair() -> Pair {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set (run by tools_test)"))
    };
    Pair {
        local: var("RRDS_TEST_LOCAL").parse().expect("RRDS_TEST_LOCAL"),
        remote: var("RRDS_TEST_REMOTE").parse().expect("RRDS_TEST_REMOTE"),
        peer_netns: var("RRDS_TEST_PEER_NETNS"),
    }
}

fn setns(ns: &File) -> io::Result<()> {
    // SAFETY: setns on an open namespace file; it changes only this thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `f` in the network namespace `name` (this thread only).
fn in_netns<T>(name: &str, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let home = File::open("/proc/thread-self/ns/net")?;
    setns(&File::open(format!("/run/netns/{name}"))?)?;
    let out = f();
    setns(&home)?;
    out
}

impl Pair {
    /// A socket here on `port` and one in the peer's namespace on
    /// `port + 1`, and the peer's address.
    fn sockets(&self, port: u16) -> (RdsSocket, RdsSocket, SocketAddr) {
        let a = RdsSocket::new().expect("socket");
        a.bind(SocketAddr::new(self.local, port)).expect("bind");
        let to = SocketAddr::new(self.remote, port + 1);
        let b = in_netns(&self.peer_netns, || {
            let b = RdsSocket::new()?;
            b.bind(to)?;
            Ok(b)
        })
        .expect("peer socket");
        (a, b, to)
    }
}

/// The next datagram on `sock`, within 20 s.
fn receive(sock: &RdsSocket, buf: &mut [u8]) -> Received {
    assert!(
        sock.wait_readable(Duration::from_secs(20)).expect("poll"),
        "nothing arrived"
    );
    sock.recv_msg(buf).expect("recv_msg")
}

/// A memory region mapped in a send reaches the peer as its cookie; the
/// region is announced again by reference; a plain datagram carries none;
/// once freed, the kernel no longer knows the cookie.
#[test]
#[ignore]
fn mapped_region_is_announced_to_the_peer() {
    let p = pair();
    let (a, b, to) = p.sockets(4201);
    // The region starts 5 bytes into the buffer: a non-zero offset in its
    // page, since the allocator aligns the buffer to more than 5 bytes.
    let memory = vec![0u8; 4 * 4096];
    let offset = ((memory.as_ptr() as usize + 5) % 4096) as u32;
    assert_ne!(offset, 0, "the buffer starts 5 bytes before a page");
    let mut got = [0u8; 16];

    let region = a
        .send_to_mapped_range(b"m", to, memory, 5..5 + 3 * 4096, RdmaFlags::empty())
        .expect("RDS_CMSG_RDMA_MAP");
    assert_eq!(region.len(), 3 * 4096);
    assert_eq!(cookie_offset(region.cookie()), offset);
    let first = receive(&b, &mut got);
    assert_eq!((first.len, got[0]), (1, b'm'));
    assert_eq!(first.rdma_dest, Some(region.cookie()));

    a.send_to_with_region(b"d", to, &region)
        .expect("RDS_CMSG_RDMA_DEST");
    assert_eq!(receive(&b, &mut got).rdma_dest, Some(region.cookie()));
    a.send_to(b"p", to).expect("send_to");
    let plain = receive(&b, &mut got);
    assert_eq!((got[0], plain.rdma_dest), (b'p', None));

    let cookie = region.cookie();
    let memory = region.free().expect("RDS_FREE_MR");
    assert_eq!(memory.len(), 4 * 4096, "the whole buffer back");
    let err = a
        .free_mr(cookie, RdmaFlags::empty())
        .expect_err("freed twice");
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
}

/// Mapping memory that is not there fails with the kernel's errno and
/// leaves no region behind; the error hands the buffer back.
#[test]
#[ignore]
fn mapping_fails_cleanly() {
    let p = pair();
    let a = RdsSocket::new().expect("socket");
    a.bind(SocketAddr::new(p.local, 4203)).expect("bind");
    let to = SocketAddr::new(p.remote, 4204);
    let err = a
        .send_to_mapped(b"x", to, Vec::new(), RdmaFlags::empty())
        .expect_err("0 bytes");
    assert_eq!(err.error().raw_os_error(), Some(libc::EINVAL));
    assert_eq!(err.into_buf(), Some(Vec::new()));
    // Unbound: ENOTCONN, as every send.
    let unbound = RdsSocket::new().expect("socket");
    let err = unbound
        .send_to_mapped(b"x", to, vec![7u8; 64], RdmaFlags::empty())
        .expect_err("unbound");
    assert_eq!(err.error().raw_os_error(), Some(libc::ENOTCONN));
    assert_eq!(err.into_buf(), Some(vec![7u8; 64]));
}

/// Fetch-and-add and compare-and-swap change the peer's memory and return
/// the value before, where the device has atomics (`RRDS_TEST_ATOMICS=1`:
/// rxe). Masked forms (which rxe lacks), and every form on a device
/// without atomics (siw), fail with `EOPNOTSUPP` and change nothing.
#[test]
#[ignore]
fn atomics_change_the_peers_memory() {
    let p = pair();
    let has_atomics = std::env::var("RRDS_TEST_ATOMICS").expect("RRDS_TEST_ATOMICS") == "1";
    let (a, b, to) = p.sockets(4205);
    let mut memory = vec![0u8; 2 * 4096];
    let skip = memory.as_ptr().align_offset(4096);
    memory[skip..skip + 8].copy_from_slice(&5u64.to_ne_bytes());
    // siw connects the registration QP from the registering task's namespace.
    let region = in_netns(&p.peer_netns, || {
        Ok(b.register_memory_range(memory, skip..skip + 4096, RdmaFlags::empty())?)
    })
    .expect("RDS_GET_MR");
    let peer_value = || {
        let mut v = [0u8; 8];
        region.copy_out(0, &mut v).expect("in the region");
        u64::from_ne_bytes(v)
    };
    let op = |atomic, token| AtomicOp {
        atomic,
        cookie: region.cookie(),
        remote_offset: 0,
        token,
        flags: RdmaFlags::empty(),
    };
    let masked = Atomic::MaskedFetchAdd {
        add: 1,
        nocarry_mask: 0,
    };
    let err = a.send_atomic(b"m", to, op(masked, 1)).expect_err("masked");
    assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP));
    if !has_atomics {
        let err = a
            .send_atomic(b"f", to, op(Atomic::FetchAdd { add: 3 }, 2))
            .expect_err("no atomics");
        assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP));
        assert_eq!(peer_value(), 5);
        return;
    }
    // Each round: the operation, the value it returns, the value after.
    let rounds = [
        (Atomic::FetchAdd { add: 3 }, 5, 8),
        (
            Atomic::CompareSwap {
                compare: 8,
                swap: 100,
            },
            8,
            100,
        ),
        // A compare that fails swaps nothing and still returns the value.
        (
            Atomic::CompareSwap {
                compare: 1,
                swap: 7,
            },
            100,
            100,
        ),
    ];
    let mut got = [0u8; 16];
    for (token, (atomic, old, now)) in (10u64..).zip(rounds) {
        let in_flight = a
            .send_atomic(b"a", to, op(atomic, token))
            .expect("send_atomic");
        assert_eq!(receive(&b, &mut got).len, 1);
        let status = receive(&a, &mut got)
            .rdma_statuses
            .first()
            .copied()
            .expect("an outcome");
        assert!(status.is_success(), "{status:?}");
        assert_eq!(in_flight.finish(&status).expect("its outcome"), Some(old));
        assert_eq!(peer_value(), now, "after {atomic:?}");
    }
}

/// A region's cookie reaches its memory while the region lives, and
/// nothing once the region is dropped: dropping frees it with
/// `RDS_RDMA_INVALIDATE` before the buffer goes back to the allocator, so
/// the peer's RDMA with the old cookie fails, right after. A WRITE's
/// outcome is the peer's answer on rxe; on iWARP (siw) a WRITE completes
/// once its data is sent and a refusal only resets the connection, so
/// there the stale cookie is tried with a READ only, whose outcome is the
/// peer's answer on both. A `USE_ONCE` region, which the kernel drops on
/// its first use, is freed through the flush: `free` still hands the
/// buffer back, with the peer's bytes.
#[test]
#[ignore]
fn dropped_region_refuses_the_peers_rdma() {
    let p = pair();
    let iwarp = std::env::var("RRDS_TEST_DEVICE").expect("RRDS_TEST_DEVICE") == "siw";
    let (a, b, to) = p.sockets(4207);
    // An RDMA of 100 bytes of 0x5a with `cookie`, carried by `msg`; its outcome.
    let rdma = |direction, cookie, token, msg: &[u8]| -> RdmaStatus {
        let op = RdmaOp {
            direction,
            cookie,
            remote_offset: 0,
            buf: vec![0x5a; 100],
            token,
            flags: RdmaFlags::empty(),
        };
        let in_flight = a.send_rdma(msg, to, op).expect("send_rdma");
        let mut note = [0u8; 16];
        let status = receive(&a, &mut note)
            .rdma_statuses
            .first()
            .copied()
            .expect("an outcome");
        assert_eq!(status.token, token);
        in_flight.finish(&status).expect("its outcome");
        status
    };
    let mut got = [0u8; 16];
    // siw connects the registration QP from the registering task's namespace.
    let region = in_netns(&p.peer_netns, || {
        Ok(b.register_memory(vec![0u8; 4096], RdmaFlags::empty())?)
    })
    .expect("RDS_GET_MR");
    let cookie = region.cookie();
    let status = rdma(Direction::Write, cookie, 1, b"w");
    assert!(status.is_success(), "{status:?}");
    let written = receive(&b, &mut got);
    assert_eq!((written.len, got[0]), (1, b'w'));
    let mut peer_bytes = [0u8; 100];
    region.copy_out(0, &mut peer_bytes).expect("in the region");
    assert_eq!(peer_bytes, [0x5a; 100]);

    drop(region);
    let stale: &[(Direction, u64, &[u8])] = if iwarp {
        &[(Direction::Read, 3, b"r")]
    } else {
        &[(Direction::Write, 2, b"s"), (Direction::Read, 3, b"r")]
    };
    for &(direction, token, msg) in stale {
        let status = rdma(direction, cookie, token, msg);
        // The peer's NAK gives REMOTE_ERROR; if the peer's disconnect
        // flushes our QP first, the operation ends DROPPED. Never success.
        assert!(
            !status.is_success(),
            "{direction:?} after the drop: {status:?}"
        );
        // Messages flow again once the connection recovers; the failed
        // operation's own message is dropped, never delivered.
        a.send_to(b"ok", to).expect("send_to");
        let next = receive(&b, &mut got);
        assert_eq!(&got[..next.len], b"ok", "after the {direction:?}");
    }

    let once = in_netns(&p.peer_netns, || {
        Ok(b.register_memory(vec![0u8; 4096], RdmaFlags::USE_ONCE)?)
    })
    .expect("RDS_GET_MR USE_ONCE");
    let status = rdma(Direction::Write, once.cookie(), 4, b"u");
    assert!(status.is_success(), "{status:?}");
    let used = receive(&b, &mut got);
    assert_eq!((used.len, got[0]), (1, b'u'));
    // Gone with its use: RDS_FREE_MR of its cookie is EINVAL, so `free`
    // waits for the invalidation with a flush.
    let err = b
        .free_mr(once.cookie(), RdmaFlags::empty())
        .expect_err("used once");
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    let memory = once.free().expect("flushed");
    assert_eq!(memory.len(), 4096);
    assert_eq!(memory[..100], [0x5a; 100]);
}

/// With SO_RDS_MSG_RXPATH_LATENCY, a datagram over IB reports the spans the
/// socket asked for, in its order, each shorter than the wait for it; off
/// again, none.
#[test]
#[ignore]
fn receive_path_latency_is_reported_as_asked() {
    let p = pair();
    let (a, b, to) = p.sockets(4301);
    let mut got = [0u8; 16];
    let asked = [RxPathSpan::Delivered, RxPathSpan::HeaderToDatagram];
    b.set_rxpath_latency(&asked)
        .expect("SO_RDS_MSG_RXPATH_LATENCY");
    let sent = std::time::Instant::now();
    a.send_to(b"t", to).expect("send_to");
    let traced = receive(&b, &mut got);
    let waited = sent.elapsed();
    let RxPathLatency(spans) = traced.rxpath_latency.expect("no latency trace");
    assert_eq!(
        spans.iter().map(|(span, _)| *span).collect::<Vec<_>>(),
        asked
    );
    for (span, time) in spans {
        assert!(
            time <= waited,
            "{span:?} took {time:?}, the receive {waited:?}"
        );
    }
    b.set_rxpath_latency(&[]).expect("off");
    a.send_to(b"u", to).expect("send_to");
    assert_eq!(receive(&b, &mut got).rxpath_latency, None);
}

/// A gathered send arrives as one datagram of the joined slices; a
/// scattered receive fills the slices in order with the full length,
/// truncated when they are shorter. More than `UIO_MAXIOV` slices, or a
/// total over the send limit, is `EMSGSIZE`, and sends nothing.
#[test]
#[ignore]
fn vectored_datagrams_gather_and_scatter() {
    let p = pair();
    let (a, b, to) = p.sockets(4311);
    let from = a.local_addr().expect("local_addr");
    let slices = [
        IoSlice::new(b"gat"),
        IoSlice::new(b""),
        IoSlice::new(b"her"),
    ];
    assert_eq!(
        a.send_to_vectored(&slices, to).expect("send_to_vectored"),
        6
    );
    assert!(
        b.wait_readable(Duration::from_secs(20)).expect("poll"),
        "nothing arrived"
    );
    let (mut head, mut tail) = ([0u8; 2], [0u8; 16]);
    let got = b
        .recv_msg_vectored(&mut [IoSliceMut::new(&mut head), IoSliceMut::new(&mut tail)])
        .expect("recv_msg_vectored");
    assert_eq!((got.len, got.truncated, got.from), (6, false, Some(from)));
    assert_eq!((&head, &tail[..4]), (b"ga", &b"ther"[..]));

    let many = vec![IoSlice::new(b"x"); 1025];
    let err = a.send_to_vectored(&many, to).expect_err("1025 slices");
    assert_eq!(err.raw_os_error(), Some(libc::EMSGSIZE));
    let big = vec![0u8; a.send_limit().expect("send_limit")];
    let err = a
        .send_to_vectored(&[IoSlice::new(&big), IoSlice::new(b"+")], to)
        .expect_err("over the limit");
    assert_eq!(err.raw_os_error(), Some(libc::EMSGSIZE));

    // The next datagram is this one: the refused sends sent nothing.
    a.send_to(b"0123456789", to).expect("send_to");
    assert!(
        b.wait_readable(Duration::from_secs(20)).expect("poll"),
        "nothing arrived"
    );
    let (mut x, mut y) = ([0u8; 3], [0u8; 4]);
    let (len, sender) = b
        .recv_from_vectored(&mut [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)])
        .expect("recv_from_vectored");
    assert_eq!((len, sender), (10, from));
    assert_eq!((&x, &y), (b"012", b"3456"));
}

/// `send_batch` sends every datagram of a batch in order and says how many
/// went (rrds takes `sendmmsg`'s `MSG_BATCH`; where in-tree RDS refuses
/// it the crate falls back to a `sendmsg` each); a message the kernel
/// refuses ends a batch there, or fails it if it comes first. `recv_batch` takes what is
/// queued, each entry as `recv_msg` reports it, and on a non-blocking
/// socket with nothing queued it would block.
#[test]
#[ignore]
fn batches_send_and_receive_several_datagrams() {
    let p = pair();
    let (a, b, to) = p.sockets(4313);
    let from = a.local_addr().expect("local_addr");
    let msgs: Vec<(Vec<u8>, SocketAddr)> = (1u8..=4).map(|i| (vec![i; i.into()], to)).collect();
    assert_eq!(a.send_batch(&msgs).expect("send_batch"), 4);
    let big = vec![9u8; a.send_limit().expect("send_limit") + 1];
    let partial = [(&b"p"[..], to), (&big[..], to), (&b"never"[..], to)];
    assert_eq!(a.send_batch(&partial).expect("a partial batch"), 1);
    let err = a.send_batch(&partial[1..]).expect_err("refused first");
    assert_eq!(err.raw_os_error(), Some(libc::EMSGSIZE));

    let mut got = Vec::new();
    let mut bufs = [[0u8; 16]; 8];
    let mut received = Vec::new();
    while got.len() < 5 {
        assert!(
            b.wait_readable(Duration::from_secs(20)).expect("poll"),
            "{} of 5 datagrams arrived: {got:?}",
            got.len()
        );
        let n = match b.recv_batch(&mut bufs, &mut received) {
            // RDS may report readiness spuriously.
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            other => other.expect("recv_batch"),
        };
        assert!(n >= 1 && n == received.len(), "{n} of {}", received.len());
        for (r, buf) in received.iter().zip(&bufs) {
            assert!(!r.truncated, "{r:?}");
            got.push((buf[..r.len].to_vec(), r.from));
        }
    }
    let want: Vec<_> = [&[1u8][..], &[2; 2], &[3; 3], &[4; 4], b"p"]
        .into_iter()
        .map(|data| (data.to_vec(), Some(from)))
        .collect();
    assert_eq!(got, want);
    b.set_nonblocking(true).expect("O_NONBLOCK");
    let err = b
        .recv_batch(&mut bufs, &mut received)
        .expect_err("nothing queued");
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
}
