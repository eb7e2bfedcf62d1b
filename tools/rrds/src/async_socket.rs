// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! [`AsyncRdsSocket`]: an [`RdsSocket`] on tokio's reactor (feature
//! `tokio`). The RDS traps it works around are in the crate's
//! documentation, "Async I/O".

use std::io;
use std::io::IoSlice;
use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::os::fd::BorrowedFd;
use std::os::fd::RawFd;
use std::time::Duration;

use tokio::io::unix::AsyncFd;

use crate::conn_events::ConnEvent;
use crate::xrc::XrcEvent;
use crate::RdsSocket;
use crate::Received;

/// The first wait before a send refused for congestion (`ENOBUFS`) is
/// tried again.
const CONG_RETRY_FIRST: Duration = Duration::from_millis(1);

/// The longest wait between two tries of a send refused for congestion:
/// the wait doubles from [`CONG_RETRY_FIRST`] up to this. A send goes at
/// most this long after its port clears.
const CONG_RETRY_MAX: Duration = Duration::from_millis(64);

/// How long a send waits for the socket to turn writable before it tries
/// anyway: rrds withholds `POLLOUT` from a socket refused for a congested
/// port until a poll finds the port clear, and epoll may not poll it
/// again (see the crate's documentation, "Async I/O").
const WRITABLE_RECHECK: Duration = Duration::from_millis(100);

/// An RDS socket for tokio: [`RdsSocket`], non-blocking, registered with
/// the runtime's reactor through [`AsyncFd`]. Sends and receives are
/// `async`; everything else (binding, options, memory regions, RDMA, the
/// `RDS_INFO` tables) is on [`get_ref`](Self::get_ref), whose calls fail
/// with `WouldBlock` (or `ENOBUFS`, for a congested port) where a blocking
/// socket would wait.
///
/// Every method takes `&self`: tasks can share the socket (in an `Arc`)
/// and send and receive at once. Receives are cancel-safe (a dropped
/// receive took nothing off the queue), and so are sends (a dropped send
/// sent nothing: each try is one system call, and the future returns as
/// soon as one goes).
///
/// Notifications (RDMA outcomes, congestion updates, connection and XRC
/// events) come on the receive queue with the datagrams, as for
/// [`RdsSocket`]: [`recv_msg`](Self::recv_msg) reports both, and a task
/// that waits for one kind of notification
/// ([`recv_conn_event`](Self::recv_conn_event)) takes whatever comes
/// first. Give the socket one receiving task and dispatch from there.
///
/// A send to a congested port waits, on a timer (see the crate's
/// documentation, "Async I/O"), until the port clears; bound it with
/// [`tokio::time::timeout`] if the receiver may never drain.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use rrds::AsyncRdsSocket;
///
/// let a = AsyncRdsSocket::bind("127.0.0.1:0".parse().unwrap())?;
/// let b = AsyncRdsSocket::bind("127.0.0.1:0".parse().unwrap())?;
/// a.send_to(b"ping", b.local_addr()?).await?;
/// let mut buf = [0u8; 64];
/// let (len, from) = b.recv_from(&mut buf).await?;
/// b.send_to(&buf[..len], from).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct AsyncRdsSocket {
    inner: AsyncFd<RdsSocket>,
}

impl AsyncRdsSocket {
    /// Makes `socket` non-blocking and registers it with the current
    /// runtime's reactor.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or in one built without its I/O driver
    /// (`enable_io`), as [`AsyncFd::register`].
    pub fn new(socket: RdsSocket) -> io::Result<Self> {
        socket.set_nonblocking(true)?;
        // SAFETY: the socket owns its descriptor (an OwnedFd), which stays
        // open and the same until the socket is dropped or taken back with
        // into_inner, and as_raw_fd always returns it.
        let inner = unsafe { AsyncFd::register(socket) }.map_err(io::Error::from)?;
        Ok(Self { inner })
    }

    /// A new socket bound to `addr` ([`RdsSocket::new`],
    /// [`RdsSocket::bind`], [`new`](Self::new)).
    ///
    /// # Panics
    ///
    /// As [`new`](Self::new).
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let socket = RdsSocket::new()?;
        socket.bind(addr)?;
        Self::new(socket)
    }

    /// The socket, for everything that does not wait: options, memory
    /// regions, RDMA, tables. It is non-blocking.
    pub fn get_ref(&self) -> &RdsSocket {
        self.inner.get_ref()
    }

    /// Deregisters the socket and hands it back, still non-blocking
    /// ([`RdsSocket::set_nonblocking`] turns that off).
    pub fn into_inner(self) -> RdsSocket {
        self.inner.into_inner()
    }

    /// The bound address ([`RdsSocket::local_addr`]).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().local_addr()
    }

    /// Sends `buf` as one datagram to `addr` ([`RdsSocket::send_to`]),
    /// waiting for send-buffer room and for a congested port to clear.
    pub async fn send_to(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        self.send_with(|socket| socket.send_to(buf, addr)).await
    }

    /// Sends `buf` to the `connect()`ed destination ([`RdsSocket::send`]),
    /// waiting as [`send_to`](Self::send_to).
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.send_with(|socket| socket.send(buf)).await
    }

    /// Sends the slices of `bufs` as one datagram to `addr`
    /// ([`RdsSocket::send_to_vectored`]), waiting as
    /// [`send_to`](Self::send_to).
    pub async fn send_to_vectored(
        &self,
        bufs: &[IoSlice<'_>],
        addr: SocketAddr,
    ) -> io::Result<usize> {
        self.send_with(|socket| socket.send_to_vectored(bufs, addr))
            .await
    }

    /// Sends the datagrams of `msgs` in order ([`RdsSocket::send_batch`]):
    /// waits, as [`send_to`](Self::send_to), until the first goes, then
    /// sends as many more as go without waiting, and returns how many
    /// went. Call it again with the rest.
    pub async fn send_batch<B: AsRef<[u8]>>(&self, msgs: &[(B, SocketAddr)]) -> io::Result<usize> {
        self.send_with(|socket| socket.send_batch(msgs)).await
    }

    /// Receives one datagram or notification into `buf`
    /// ([`RdsSocket::recv_msg`]), once one is queued.
    pub async fn recv_msg(&self, buf: &mut [u8]) -> io::Result<Received> {
        self.recv_with(|socket| socket.recv_msg(buf)).await
    }

    /// Receives one datagram into `buf` ([`RdsSocket::recv_from`]): its
    /// full length and sender. A notification is an `InvalidData` error
    /// (and is gone): use [`recv_msg`](Self::recv_msg) where notifications
    /// may come.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_with(|socket| socket.recv_from(buf)).await
    }

    /// Receives one datagram or notification scattered over `bufs`
    /// ([`RdsSocket::recv_msg_vectored`]).
    pub async fn recv_msg_vectored(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<Received> {
        self.recv_with(|socket| socket.recv_msg_vectored(bufs))
            .await
    }

    /// Receives what is queued, up to one datagram or notification per
    /// buffer ([`RdsSocket::recv_batch`]), once at least one is; returns
    /// how many, with each in `received`.
    pub async fn recv_batch<B: AsMut<[u8]>>(
        &self,
        bufs: &mut [B],
        received: &mut Vec<Received>,
    ) -> io::Result<usize> {
        self.recv_with(|socket| socket.recv_batch(bufs, received))
            .await
    }

    /// The next receive, which must be a connection event (see
    /// [`RdsSocket::set_conn_monitor`]); anything else that comes first
    /// is taken and reported as `InvalidData`, as by
    /// [`RdsSocket::recv_conn_event`]. Bound the wait with
    /// [`tokio::time::timeout`].
    pub async fn recv_conn_event(&self) -> io::Result<ConnEvent> {
        self.recv_notification("a connection event", |r| r.conn_event)
            .await
    }

    /// The next receive, which must be an XRC event; as
    /// [`recv_conn_event`](Self::recv_conn_event) (see
    /// [`RdsSocket::recv_xrc_event`]).
    pub async fn recv_xrc_event(&self) -> io::Result<XrcEvent> {
        self.recv_notification("an XRC event", |r| r.xrc_event)
            .await
    }

    async fn recv_notification<T>(
        &self,
        what: &str,
        take: impl FnOnce(Received) -> Option<T>,
    ) -> io::Result<T> {
        let received = self.recv_msg(&mut []).await?;
        take(received).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("received a datagram or another notification, not {what}"),
            )
        })
    }

    /// Runs `recv` once the socket is readable, until it does not say
    /// `WouldBlock`. RDS reports readiness spuriously at times (in-tree,
    /// after any congestion map update): `try_io` then clears it and the
    /// wait goes on.
    async fn recv_with<T>(
        &self,
        mut recv: impl FnMut(&RdsSocket) -> io::Result<T>,
    ) -> io::Result<T> {
        loop {
            let mut guard = self.inner.readable().await?;
            if let Ok(result) = guard.try_io(|inner| recv(inner.get_ref())) {
                return result;
            }
        }
    }

    /// Runs `send` once the socket is writable, until it neither says
    /// `WouldBlock` nor `ENOBUFS`.
    ///
    /// `WouldBlock` (no send-buffer room) waits for the next writable
    /// edge, but at most [`WRITABLE_RECHECK`], then tries anyway: rrds
    /// may withhold `POLLOUT` for a congested port with no wake-up epoll
    /// hears. `ENOBUFS` (the port is congested; the socket may still poll
    /// writable) waits on a timer, from [`CONG_RETRY_FIRST`] doubling up to
    /// [`CONG_RETRY_MAX`].
    async fn send_with<T>(&self, send: impl FnMut(&RdsSocket) -> io::Result<T>) -> io::Result<T> {
        send_with_backoff(&self.inner, send, CONG_RETRY_FIRST, CONG_RETRY_MAX).await
    }
}

/// [`AsyncRdsSocket::send_with`] with the back-off as arguments.
async fn send_with_backoff<T>(
    inner: &AsyncFd<RdsSocket>,
    mut send: impl FnMut(&RdsSocket) -> io::Result<T>,
    first: Duration,
    max: Duration,
) -> io::Result<T> {
    let mut backoff = first;
    loop {
        let result = match tokio::time::timeout(WRITABLE_RECHECK, inner.writable()).await {
            Ok(guard) => match guard?.try_io(|inner| send(inner.get_ref())) {
                Ok(result) => result,
                // Not writable after all: try_io cleared the readiness.
                Err(_would_block) => continue,
            },
            Err(_elapsed) => send(inner.get_ref()),
        };
        match result {
            Err(err) if err.raw_os_error() == Some(libc::ENOBUFS) => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(max);
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            other => return other,
        }
    }
}

impl AsFd for AsyncRdsSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.get_ref().as_fd()
    }
}

impl AsRawFd for AsyncRdsSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.get_ref().as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), f).await })
            .expect("the test took 10 s")
    }

    /// Two UDP stand-ins (see `RdsSocket::udp_stand_in`) on the reactor.
    fn pair() -> (AsyncRdsSocket, AsyncRdsSocket) {
        let a = AsyncRdsSocket::new(RdsSocket::udp_stand_in()).unwrap();
        let b = AsyncRdsSocket::new(RdsSocket::udp_stand_in()).unwrap();
        (a, b)
    }

    #[test]
    fn datagrams_go_both_ways() {
        block_on(async {
            let (a, b) = pair();
            let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            let echo = tokio::spawn(async move {
                let mut buf = [0u8; 16];
                for _ in 0..3 {
                    let (len, from) = b.recv_from(&mut buf).await.unwrap();
                    b.send_to(&buf[..len], from).await.unwrap();
                }
                b
            });
            let mut buf = [0u8; 16];
            for round in 0u8..3 {
                a.send_to(&[round; 3], b_addr).await.unwrap();
                let got = a.recv_msg(&mut buf).await.unwrap();
                assert_eq!((got.len, got.from), (3, Some(b_addr)));
                assert_eq!(buf[..3], [round; 3]);
            }
            let b = echo.await.unwrap();
            // Vectored and batched, through the same waits.
            let sent = a
                .send_to_vectored(&[IoSlice::new(b"ve"), IoSlice::new(b"c")], b_addr)
                .await
                .unwrap();
            assert_eq!(sent, 3);
            let (mut x, mut y) = ([0u8; 1], [0u8; 4]);
            let got = b
                .recv_msg_vectored(&mut [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)])
                .await
                .unwrap();
            assert_eq!(
                (got.len, got.from, &x, &y[..2]),
                (3, Some(a_addr), b"v", &b"ec"[..])
            );
            let msgs = [(&b"1"[..], b_addr), (&b"22"[..], b_addr)];
            assert_eq!(a.send_batch(&msgs).await.unwrap(), 2);
            let mut bufs = [[0u8; 4]; 4];
            let mut received = vec![];
            let mut lens = vec![];
            while lens.len() < 2 {
                b.recv_batch(&mut bufs, &mut received).await.unwrap();
                lens.extend(received.iter().map(|r| r.len));
            }
            assert_eq!(lens, [1, 2]);
        });
    }

    #[test]
    fn a_receive_waits_for_its_datagram() {
        block_on(async {
            let (a, b) = pair();
            let to = b.local_addr().unwrap();
            let sender = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                a.send_to(b"late", to).await.unwrap();
            });
            let start = Instant::now();
            let mut buf = [0u8; 8];
            let (len, _) = b.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..len], b"late");
            assert!(start.elapsed() >= Duration::from_millis(40));
            sender.await.unwrap();
        });
    }

    #[test]
    fn a_datagram_is_not_the_notification_asked_for() {
        block_on(async {
            let (a, b) = pair();
            a.send_to(b"data", b.local_addr().unwrap()).await.unwrap();
            let err = b.recv_conn_event().await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData);
            assert!(err.to_string().contains("a connection event"), "{err}");
        });
    }

    #[test]
    fn congestion_is_waited_out_with_a_growing_backoff() {
        block_on(async {
            let (a, _) = pair();
            let mut tries = Vec::new();
            let sent = send_with_backoff(
                &a.inner,
                |_| {
                    tries.push(Instant::now());
                    if tries.len() <= 4 {
                        Err(io::Error::from_raw_os_error(libc::ENOBUFS))
                    } else {
                        Ok(7)
                    }
                },
                Duration::from_millis(2),
                Duration::from_millis(8),
            )
            .await
            .unwrap();
            assert_eq!((sent, tries.len()), (7, 5));
            // 2, 4, 8, 8 ms: doubled, then capped.
            let waits: Vec<_> = tries.windows(2).map(|w| w[1] - w[0]).collect();
            for (wait, want) in waits.iter().zip([2, 4, 8, 8]) {
                let want = Duration::from_millis(want);
                assert!(*wait >= want, "{waits:?}");
            }
        });
    }

    #[test]
    fn other_send_errors_come_back_at_once() {
        block_on(async {
            let (a, _) = pair();
            let mut tries = 0;
            let err = send_with_backoff(
                &a.inner,
                |_| -> io::Result<()> {
                    tries += 1;
                    Err(io::Error::from_raw_os_error(libc::EMSGSIZE))
                },
                CONG_RETRY_FIRST,
                CONG_RETRY_MAX,
            )
            .await
            .unwrap_err();
            assert_eq!((err.raw_os_error(), tries), (Some(libc::EMSGSIZE), 1));
        });
    }

    #[test]
    fn the_socket_goes_back_nonblocking() {
        block_on(async {
            let (a, _) = pair();
            let fd = a.as_raw_fd();
            let socket = a.into_inner();
            assert_eq!(socket.as_raw_fd(), fd);
            // SAFETY: F_GETFL takes no argument.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
            assert_ne!(flags & libc::O_NONBLOCK, 0);
        });
    }
}
