//! The crate against the loaded module, between two network namespaces over
//! an RDMA device pair. Ignored by a plain `cargo test`: they need the
//! kernel. `selftests/tools_test.c` runs them in the test VM on rxe and on
//! siw, with `RRDS_TEST_LOCAL` (an address of this namespace),
//! `RRDS_TEST_REMOTE` and `RRDS_TEST_PEER_NETNS` (the peer's namespace).

use std::fs::File;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;

use rrds::mr::cookie_offset;
use rrds::{Atomic, AtomicOp, RdsSocket, Received};

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
    let mut memory = vec![0u8; 4 * 4096];
    let region_buf = &mut memory[5..5 + 3 * 4096];
    let offset = (region_buf.as_ptr() as usize % 4096) as u32;
    let mut got = [0u8; 16];

    let region = a
        .send_to_mapped(b"m", to, region_buf, 0)
        .expect("RDS_CMSG_RDMA_MAP");
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
    region.free(true).expect("RDS_FREE_MR");
    let err = a.free_mr(cookie, 0).expect_err("freed twice");
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
}

/// Mapping memory that is not there fails with the kernel's errno and
/// leaves no region behind.
#[test]
#[ignore]
fn mapping_fails_cleanly() {
    let p = pair();
    let a = RdsSocket::new().expect("socket");
    a.bind(SocketAddr::new(p.local, 4203)).expect("bind");
    let to = SocketAddr::new(p.remote, 4204);
    let mut empty: [u8; 0] = [];
    let err = a
        .send_to_mapped(b"x", to, &mut empty, 0)
        .expect_err("0 bytes");
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    // Unbound: ENOTCONN, as every send.
    let unbound = RdsSocket::new().expect("socket");
    let mut buf = [0u8; 64];
    let err = unbound
        .send_to_mapped(b"x", to, &mut buf, 0)
        .expect_err("unbound");
    assert_eq!(err.raw_os_error(), Some(libc::ENOTCONN));
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
    let word = &mut memory[skip..skip + 4096];
    word[..8].copy_from_slice(&5u64.to_ne_bytes());
    // siw connects the registration QP from the registering task's namespace.
    let region = in_netns(&p.peer_netns, || b.register_memory(word, 0)).expect("RDS_GET_MR");
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
        flags: 0,
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
        let status = receive(&a, &mut got).rdma_status.expect("an outcome");
        assert!(status.is_success(), "{status:?}");
        assert_eq!(in_flight.finish(&status).expect("its outcome"), Some(old));
        assert_eq!(peer_value(), now, "after {atomic:?}");
    }
}
