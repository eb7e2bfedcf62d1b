// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! [`RdsSocket`]: an owned `PF_RDS` socket with typed operations.

use core::mem::offset_of;
use core::mem::size_of;
use std::fmt;
use std::io;
use std::io::IoSlice;
use std::io::IoSliceMut;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::os::fd::BorrowedFd;
use std::os::fd::FromRawFd;
use std::os::fd::IntoRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::time::Duration;
use std::time::SystemTime;

use libc::c_int;
use libc::socklen_t;

use crate::addr::RawAddr;
use crate::info;
use crate::sys;

/// Number of times [`RdsSocket::info`] retries when the result grew between
/// the sizing call and the copy.
const INFO_ATTEMPTS: usize = 8;
/// Size of the first `RDS_INFO` buffer: enough for a few sockets, so the
/// common small answer needs one call.
const INFO_FIRST_LEN: usize = 256;

/// A decoder of [`crate::info`]: an `RDS_INFO` result and its element size
/// to records.
type Decoder<T> = fn(&[u8], usize) -> io::Result<Vec<T>>;

/// Maps a `-1` return to the calling thread's errno.
pub(crate) fn cvt(ret: c_int) -> io::Result<c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Maps a `-1` byte count to errno, anything else to a length.
pub(crate) fn cvt_len(ret: isize) -> io::Result<usize> {
    usize::try_from(ret).map_err(|_| io::Error::last_os_error())
}

/// An option value as the kernel's `int`.
fn int_value(value: usize, what: &str) -> io::Result<c_int> {
    c_int::try_from(value).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} {value} does not fit in an int"),
        )
    })
}

/// A transport, as `SO_RDS_TRANSPORT` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Transport {
    /// InfiniBand / RDMA (`RDS_TRANS_IB`, 0).
    Ib,
    /// `RDS_TRANS_GAP` / `RDS_TRANS_IWARP` (1); no module registers it.
    Gap,
    /// TCP (`RDS_TRANS_TCP`, 2).
    Tcp,
    /// Loopback (3): read back for sockets bound to 127.0.0.0/8 or `::1`;
    /// cannot be set.
    Loopback,
    /// No transport attached (`RDS_TRANS_NONE`, -1): an unbound socket.
    None,
    /// A number this library does not know.
    Unknown(c_int),
}

impl Transport {
    /// The transport a `SO_RDS_TRANSPORT` value names.
    pub fn from_raw(raw: c_int) -> Self {
        match raw {
            sys::RDS_TRANS_IB => Self::Ib,
            sys::RDS_TRANS_GAP => Self::Gap,
            sys::RDS_TRANS_TCP => Self::Tcp,
            sys::RDS_TRANS_LOOP => Self::Loopback,
            sys::RDS_TRANS_NONE => Self::None,
            other => Self::Unknown(other),
        }
    }

    /// The `SO_RDS_TRANSPORT` value.
    pub fn as_raw(self) -> c_int {
        match self {
            Self::Ib => sys::RDS_TRANS_IB,
            Self::Gap => sys::RDS_TRANS_GAP,
            Self::Tcp => sys::RDS_TRANS_TCP,
            Self::Loopback => sys::RDS_TRANS_LOOP,
            Self::None => sys::RDS_TRANS_NONE,
            Self::Unknown(raw) => raw,
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ib => f.write_str("ib"),
            Self::Gap => f.write_str("gap"),
            Self::Tcp => f.write_str("tcp"),
            Self::Loopback => f.write_str("loopback"),
            Self::None => f.write_str("none"),
            Self::Unknown(raw) => write!(f, "unknown({raw})"),
        }
    }
}

/// What [`RdsSocket::recv_msg`] received: a datagram, or a notification
/// (a 0-byte receive whose `from` is `None`).
///
/// Receiving notifications: turn them on ([`RdsSocket::set_cong_monitor`],
/// [`RdsSocket::set_conn_monitor`], an operation's outcome comes unasked)
/// and look at the fields of each receive:
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// use rrds::RdsSocket;
///
/// let sock = RdsSocket::new()?;
/// sock.bind("10.0.0.1:4000".parse().unwrap())?;
/// sock.set_cong_monitor(true)?;
/// let mut buf = [0u8; 9000];
/// loop {
///     let got = sock.recv_msg(&mut buf)?;
///     if let Some(from) = got.from {
///         println!("{} bytes from {from}", got.len);
///     }
///     for status in &got.rdma_statuses {
///         println!("operation {}: {}", status.token, status.status);
///     }
///     if let Some(ports) = got.cong_update {
///         println!("uncongested ports (mod 64): {ports:#x}");
///     }
///     if let Some(event) = got.conn_event {
///         println!("{event}");
///     }
///     if let Some(event) = got.xrc_event {
///         println!("{event}");
///     }
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Received {
    /// Full length of the datagram, even when it was truncated (the call
    /// passes `MSG_TRUNC`). Only `min(len, buf.len())` bytes were copied.
    pub len: usize,
    /// The buffer was shorter than the datagram; the rest is lost.
    pub truncated: bool,
    /// The sender. `None` when the call returned a notification (RDMA
    /// status, congestion update) rather than a datagram.
    pub from: Option<SocketAddr>,
    /// Receive time, if `SO_TIMESTAMP` was on when the datagram was queued.
    pub timestamp: Option<SystemTime>,
    /// The notification was an rrds XRC event (a 0-byte receive).
    pub xrc_event: Option<crate::xrc::XrcEvent>,
    /// The notification was a change of a connection's link
    /// (`RRDS_CONN_MONITOR`; a 0-byte receive).
    pub conn_event: Option<crate::conn_events::ConnEvent>,
    /// The notification was the outcome of RDMA or atomic operations (a
    /// 0-byte receive), in the order they were queued: rrds hands over
    /// one per receive, in-tree RDS as many as the control buffer holds.
    /// Empty for anything else.
    pub rdma_statuses: Vec<crate::mr::RdmaStatus>,
    /// The cookie of a memory region the sender announced with the datagram
    /// (`RDS_CMSG_RDMA_DEST`; see [`RdsSocket::send_to_mapped`]).
    pub rdma_dest: Option<u64>,
    /// The notification was a congestion update (`RDS_CMSG_CONG_UPDATE`,
    /// with [`RdsSocket::set_cong_monitor`] on): bit `port % 64` is set for
    /// each port that was refused with `ENOBUFS` and is no longer congested
    /// (a 0-byte receive).
    pub cong_update: Option<u64>,
    /// The receive path's latency of the datagram, in the spans asked for
    /// with [`RdsSocket::set_rxpath_latency`] (none for a notification).
    pub rxpath_latency: Option<crate::rxpath::RxPathLatency>,
}

/// Size of the TOS ioctl argument buffer: at least `struct ifreq`.
const IOCTL_ARG_LEN: usize = 64;

/// Argument of the TOS ioctls, aligned like `struct ifreq`.
#[repr(C, align(8))]
struct IoctlArg([u8; IOCTL_ARG_LEN]);

/// Bytes of the control buffer of `recvmsg`: room for everything one
/// receive can carry (see `control_len_covers_every_receive`), so
/// `MSG_CTRUNC` is not expected; if it comes, the receive is an error.
pub(crate) const CONTROL_LEN: usize = 512;

/// Control buffer for `recvmsg` and `sendmsg`, aligned like `struct
/// cmsghdr`.
#[repr(C, align(8))]
pub(crate) struct ControlBuf(pub(crate) [u8; CONTROL_LEN]);

impl ControlBuf {
    /// A zeroed buffer.
    pub(crate) fn new() -> Self {
        Self([0; CONTROL_LEN])
    }
}

/// The `msghdr` of a receive into `bufs`, with `name` for the sender and
/// `control` for the control data. The pointers it holds borrow all
/// three: they must outlive the `recvmsg` (or `recvmmsg`) it is for.
pub(crate) fn recv_header(
    name: &mut RawAddr,
    bufs: &mut [IoSliceMut<'_>],
    control: &mut ControlBuf,
) -> libc::msghdr {
    // SAFETY: msghdr is plain data for which all zeroes (null pointers,
    // zero lengths) is a valid value; zeroing also covers the padding
    // fields some libcs have.
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_name = name.as_mut_ptr().cast();
    msg.msg_namelen = name.len();
    // IoSliceMut is ABI-compatible with struct iovec (std guarantees it on
    // Unix).
    msg.msg_iov = bufs.as_mut_ptr().cast::<libc::iovec>();
    msg.msg_iovlen = bufs.len() as _;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    msg
}

/// What a receive of `len` bytes with header `msg` (made by
/// [`recv_header`] over `name` and `control`) brought.
pub(crate) fn received_from(
    len: usize,
    msg: &libc::msghdr,
    name: &mut RawAddr,
    control: &ControlBuf,
) -> io::Result<Received> {
    let from = if msg.msg_namelen == 0 {
        None
    } else {
        *name.len_mut() = msg.msg_namelen;
        Some(name.to_socket_addr()?)
    };
    // size_t in glibc, socklen_t in musl.
    #[allow(clippy::unnecessary_cast)]
    let control_len = (msg.msg_controllen as usize).min(control.0.len());
    decode_received(len, msg.msg_flags, from, &control.0[..control_len])
}

/// The length and sender of a receive that must be a datagram; a
/// notification is an `InvalidData` error.
pub(crate) fn datagram_of(received: Received) -> io::Result<(usize, SocketAddr)> {
    match received.from {
        Some(from) => Ok((received.len, from)),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "received a notification, not a datagram",
        )),
    }
}

/// An owned `PF_RDS` socket (`socket(AF_RDS, SOCK_SEQPACKET, 0)`), closed on
/// drop.
///
/// Every method is one or two system calls; errors carry the kernel's errno
/// (`io::Error::raw_os_error`).
#[derive(Debug)]
pub struct RdsSocket {
    fd: OwnedFd,
}

impl RdsSocket {
    /// Creates a socket. Fails with `EAFNOSUPPORT` when no RDS
    /// implementation (`rds` or `rrds`) is loaded.
    pub fn new() -> io::Result<Self> {
        // SAFETY: socket() takes no pointers; the result is checked below.
        let fd = cvt(unsafe {
            libc::socket(sys::AF_RDS, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0)
        })?;
        // SAFETY: fd is a descriptor socket() just returned; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Binds to `addr`. Port 0 picks a free port; read it with
    /// [`local_addr`](Self::local_addr).
    pub fn bind(&self, addr: SocketAddr) -> io::Result<()> {
        let raw = RawAddr::from_socket_addr(&addr);
        // SAFETY: raw.as_ptr() points to raw.len() initialised bytes that live
        // across the call; the kernel only reads them.
        cvt(unsafe { libc::bind(self.raw(), raw.as_ptr(), raw.len()) })?;
        Ok(())
    }

    /// Records `addr` as the default destination of [`send`](Self::send).
    pub fn connect(&self, addr: SocketAddr) -> io::Result<()> {
        let raw = RawAddr::from_socket_addr(&addr);
        // SAFETY: as in bind: a live, initialised address of raw.len() bytes.
        cvt(unsafe { libc::connect(self.raw(), raw.as_ptr(), raw.len()) })?;
        Ok(())
    }

    /// The bound address (getsockname). An unbound socket reads back as
    /// `0.0.0.0:0`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let mut raw = RawAddr::empty();
        // SAFETY: raw has room for raw.len() bytes and the kernel writes at
        // most that many, then stores the full length in the length field.
        cvt(unsafe { libc::getsockname(self.raw(), raw.as_mut_ptr(), raw.len_mut()) })?;
        raw.to_socket_addr()
    }

    /// The `connect()`ed destination (getpeername); `ENOTCONN` if none.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        let mut raw = RawAddr::empty();
        // SAFETY: as in local_addr.
        cvt(unsafe { libc::getpeername(self.raw(), raw.as_mut_ptr(), raw.len_mut()) })?;
        raw.to_socket_addr()
    }

    /// Sends `buf` as one datagram to `addr`; returns its length.
    pub fn send_to(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        let raw = RawAddr::from_socket_addr(&addr);
        // SAFETY: buf is valid for buf.len() bytes and raw for raw.len()
        // bytes; the kernel only reads both. No flags: RDS rejects all but
        // MSG_DONTWAIT (even MSG_NOSIGNAL).
        cvt_len(unsafe {
            libc::sendto(
                self.raw(),
                buf.as_ptr().cast(),
                buf.len(),
                0,
                raw.as_ptr(),
                raw.len(),
            )
        })
    }

    /// Sends `buf` as one datagram to the `connect()`ed destination.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for buf.len() bytes; the kernel only reads it.
        cvt_len(unsafe { libc::send(self.raw(), buf.as_ptr().cast(), buf.len(), 0) })
    }

    /// Sends the slices of `bufs`, joined in order, as one datagram to
    /// `addr` (a gather: one `sendmsg` with an iovec per slice); returns
    /// the datagram's length.
    ///
    /// The peer receives one datagram, the same as from
    /// [`send_to`](Self::send_to) of the joined bytes; the limits are on
    /// the total ([`send_limit`](Self::send_limit), else `EMSGSIZE`). At
    /// most 1024 slices (`UIO_MAXIOV`); more is `EMSGSIZE` from the kernel.
    ///
    /// ```no_run
    /// # fn main() -> std::io::Result<()> {
    /// use std::io::IoSlice;
    /// use rrds::RdsSocket;
    ///
    /// let sock = RdsSocket::new()?;
    /// sock.bind("127.0.0.1:0".parse().unwrap())?;
    /// let header = 7u32.to_be_bytes();
    /// let body = b"payload";
    /// let to = "127.0.0.1:4000".parse().unwrap();
    /// // One 11-byte datagram, without copying header and body together.
    /// let sent = sock.send_to_vectored(&[IoSlice::new(&header), IoSlice::new(body)], to)?;
    /// assert_eq!(sent, 11);
    /// # Ok(())
    /// # }
    /// ```
    pub fn send_to_vectored(&self, bufs: &[IoSlice<'_>], addr: SocketAddr) -> io::Result<usize> {
        let raw = RawAddr::from_socket_addr(&addr);
        self.send_iov(bufs, Some(&raw))
    }

    /// [`send_to_vectored`](Self::send_to_vectored) to the `connect()`ed
    /// destination.
    pub fn send_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.send_iov(bufs, None)
    }

    /// One `sendmsg` of the slices of `bufs` to `to` (`None`: the
    /// connected peer), without control data.
    fn send_iov(&self, bufs: &[IoSlice<'_>], to: Option<&RawAddr>) -> io::Result<usize> {
        // SAFETY: as in recv_iov: all zeroes is a valid msghdr.
        let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
        if let Some(raw) = to {
            msg.msg_name = raw.as_ptr() as *mut libc::c_void;
            msg.msg_namelen = raw.len();
        }
        // IoSlice is ABI-compatible with struct iovec (std guarantees it
        // on Unix), so the slice is the kernel's iovec array as it is.
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len() as _;
        // SAFETY: msg points to the address (msg_namelen bytes) and to
        // bufs.len() iovecs, each over a live slice; all outlive the call,
        // and the kernel only reads them.
        cvt_len(unsafe { libc::sendmsg(self.raw(), &msg, 0) })
    }

    /// Receives one datagram into `buf`.
    ///
    /// Returns the datagram's full length and its sender. A length greater
    /// than `buf.len()` means the datagram was truncated (and the rest is
    /// lost): slice the data with `&buf[..len.min(buf.len())]`. A notification without a datagram is an `InvalidData` error;
    /// use [`recv_msg`](Self::recv_msg) to see notifications.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        datagram_of(self.recv_msg(buf)?)
    }

    /// Receives one datagram (or notification) into `buf`, with its length,
    /// truncation, sender and timestamp.
    pub fn recv_msg(&self, buf: &mut [u8]) -> io::Result<Received> {
        self.recv_msg_flags(buf, 0)
    }

    /// Receives one datagram (or notification) scattered over `bufs`, in
    /// order: each slice is filled before the next. As
    /// [`recv_msg`](Self::recv_msg), [`Received::len`] is the datagram's
    /// full length, and `truncated` says it was longer than the slices
    /// together (the rest is lost).
    ///
    /// ```no_run
    /// # fn main() -> std::io::Result<()> {
    /// use std::io::IoSliceMut;
    /// use rrds::RdsSocket;
    ///
    /// let sock = RdsSocket::new()?;
    /// sock.bind("127.0.0.1:4000".parse().unwrap())?;
    /// let (mut header, mut body) = ([0u8; 4], [0u8; 1024]);
    /// let got = sock.recv_msg_vectored(&mut [
    ///     IoSliceMut::new(&mut header),
    ///     IoSliceMut::new(&mut body),
    /// ])?;
    /// let body_len = got.len.min(4 + body.len()).saturating_sub(4);
    /// println!("{:?} sent {:?}", got.from, &body[..body_len]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn recv_msg_vectored(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<Received> {
        self.recv_iov(bufs, 0)
    }

    /// [`recv_from`](Self::recv_from) scattered over `bufs` as
    /// [`recv_msg_vectored`](Self::recv_msg_vectored) does: the datagram's
    /// full length and its sender; a notification is an `InvalidData`
    /// error.
    pub fn recv_from_vectored(
        &self,
        bufs: &mut [IoSliceMut<'_>],
    ) -> io::Result<(usize, SocketAddr)> {
        datagram_of(self.recv_msg_vectored(bufs)?)
    }

    /// [`Self::recv_msg`] with extra `recvmsg` flags (`MSG_DONTWAIT`).
    pub(crate) fn recv_msg_flags(&self, buf: &mut [u8], flags: c_int) -> io::Result<Received> {
        self.recv_iov(&mut [IoSliceMut::new(buf)], flags)
    }

    /// One `recvmsg` into the slices of `bufs`, with `MSG_TRUNC` and
    /// `flags`.
    fn recv_iov(&self, bufs: &mut [IoSliceMut<'_>], flags: c_int) -> io::Result<Received> {
        let mut name = RawAddr::empty();
        let mut control = ControlBuf::new();
        let mut msg = recv_header(&mut name, bufs, &mut control);
        // SAFETY: msg points to name (msg_namelen bytes), bufs.len() iovecs
        // over live slices and control (msg_controllen bytes), all of
        // which outlive the call; the kernel writes within those lengths.
        let len = cvt_len(unsafe { libc::recvmsg(self.raw(), &mut msg, libc::MSG_TRUNC | flags) })?;
        received_from(len, &msg, &mut name, &control)
    }

    /// Sends `buf` to `addr` with one `SOL_RDS` control message of `kind`
    /// carrying `value` (a plain-data uapi struct or integer).
    pub(crate) fn send_to_cmsg<T: Copy>(
        &self,
        buf: &[u8],
        addr: SocketAddr,
        kind: c_int,
        value: &T,
    ) -> io::Result<usize> {
        self.send_cmsg(buf, Some(addr), kind, value)
    }

    /// As [`Self::send_to_cmsg`], to `addr` or, with `None`, with no
    /// destination (the control message names where the bytes go).
    pub(crate) fn send_cmsg<T: Copy>(
        &self,
        buf: &[u8],
        addr: Option<SocketAddr>,
        kind: c_int,
        value: &T,
    ) -> io::Result<usize> {
        // SAFETY: value is a live plain-data value without padding (the uapi
        // structs and integers callers pass); its bytes are read only.
        let data =
            unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) };
        let raw = addr.as_ref().map(RawAddr::from_socket_addr);
        let mut control = ControlBuf::new();
        let used = encode_cmsg(&mut control.0, sys::SOL_RDS, kind, data).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "control message too long")
        })?;
        let mut iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: as in recv_header: all zeroes is a valid msghdr.
        let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
        if let Some(raw) = &raw {
            msg.msg_name = raw.as_ptr() as *mut libc::c_void;
            msg.msg_namelen = raw.len();
        }
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = used as _;
        // SAFETY: msg points to raw (msg_namelen bytes) or no name, one iovec
        // over buf and control (msg_controllen bytes), all live across the
        // call; the kernel only reads them (it writes a mapped cookie where
        // the data says, which the caller owns).
        cvt_len(unsafe { libc::sendmsg(self.raw(), &msg, 0) })
    }

    /// Makes sends and receives return `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        // SAFETY: F_GETFL takes no argument.
        let flags = cvt(unsafe { libc::fcntl(self.raw(), libc::F_GETFL) })?;
        let flags = if nonblocking {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        // SAFETY: F_SETFL takes an int argument.
        cvt(unsafe { libc::fcntl(self.raw(), libc::F_SETFL, flags) })?;
        Ok(())
    }

    /// Sets `SO_RCVTIMEO`: a blocking receive waits at most `timeout`, then
    /// fails with `WouldBlock` (`EAGAIN`), as [`std::net::UdpSocket`]'s
    /// does. `None` waits for ever. A zero duration is an `InvalidInput`
    /// error (as std's), and a nonzero one shorter than the kernel's
    /// microsecond is rounded up to it.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_timeout(libc::SO_RCVTIMEO, timeout)
    }

    /// `SO_RCVTIMEO`: `None` if receives wait for ever. The kernel keeps
    /// the timeout in scheduler ticks, so it reads back rounded up to a
    /// tick (1 to 10 ms).
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        self.timeout(libc::SO_RCVTIMEO)
    }

    /// Sets `SO_SNDTIMEO`: a blocking send (one waiting for send-buffer
    /// room) waits at most `timeout`, then fails with `WouldBlock`. `None`
    /// and zero as for [`set_read_timeout`](Self::set_read_timeout).
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_timeout(libc::SO_SNDTIMEO, timeout)
    }

    /// `SO_SNDTIMEO`: `None` if sends wait for ever; rounded up to a tick
    /// as [`read_timeout`](Self::read_timeout).
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        self.timeout(libc::SO_SNDTIMEO)
    }

    fn set_timeout(&self, name: c_int, timeout: Option<Duration>) -> io::Result<()> {
        let value = timeout_to_timeval(timeout)?;
        self.setsockopt_value(libc::SOL_SOCKET, name, &value)
    }

    fn timeout(&self, name: c_int) -> io::Result<Option<Duration>> {
        // SAFETY: timeval is plain data; all zeroes is a valid value.
        let mut value: libc::timeval = unsafe { core::mem::zeroed() };
        let mut len = size_of::<libc::timeval>() as socklen_t;
        // SAFETY: value is a live timeval of len bytes; the kernel writes at
        // most len bytes into it and updates len.
        cvt(unsafe {
            libc::getsockopt(
                self.raw(),
                libc::SOL_SOCKET,
                name,
                (&mut value as *mut libc::timeval).cast(),
                &mut len,
            )
        })?;
        Ok(timeval_to_timeout(&value))
    }

    /// A second handle to this socket (`F_DUPFD_CLOEXEC`): both refer to
    /// the one socket, its binding, options and queues; the socket closes
    /// when the last handle is dropped. Like [`std::net::UdpSocket::try_clone`].
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            fd: self.fd.try_clone()?,
        })
    }

    /// Waits up to `timeout` for `events`; returns the events that are ready
    /// (0 on timeout or when a signal interrupted the wait).
    fn poll(&self, events: libc::c_short, timeout: Duration) -> io::Result<libc::c_short> {
        let mut pfd = libc::pollfd {
            fd: self.raw(),
            events,
            revents: 0,
        };
        // Round up so a sub-millisecond wait does not become a busy loop.
        let ms = timeout.as_micros().div_ceil(1000);
        let ms = c_int::try_from(ms).unwrap_or(c_int::MAX);
        // SAFETY: pfd is one live pollfd, and the count passed is 1.
        match cvt(unsafe { libc::poll(&mut pfd, 1, ms) }) {
            Ok(_) => Ok(pfd.revents),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(err) => Err(err),
        }
    }

    /// Waits up to `timeout` for a 0-byte notification and returns what
    /// `take` finds in it (`None` on timeout). Anything else that comes
    /// first is consumed and reported as `InvalidData`, naming `what`.
    pub(crate) fn recv_notification<T>(
        &self,
        timeout: Duration,
        what: &str,
        take: impl FnOnce(Received) -> Option<T>,
    ) -> io::Result<Option<T>> {
        if !self.wait_readable(timeout)? {
            return Ok(None);
        }
        match self.recv_msg_flags(&mut [], libc::MSG_DONTWAIT) {
            Ok(received) => take(received).map(Some).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("received a datagram or another notification, not {what}"),
                )
            }),
            Err(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    /// Waits up to `timeout` until a receive would not block. `false` on
    /// timeout or a signal. RDS may report readiness spuriously (the first
    /// poll after a congestion update), so a receive can still say
    /// `WouldBlock`.
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        Ok(self.poll(libc::POLLIN, timeout)? & libc::POLLIN != 0)
    }

    /// Waits up to `timeout` until the send buffer has room. `false` on
    /// timeout or a signal. A send can still fail with `ENOBUFS` if the
    /// destination port is congested.
    pub fn wait_writable(&self, timeout: Duration) -> io::Result<bool> {
        Ok(self.poll(libc::POLLOUT, timeout)? & libc::POLLOUT != 0)
    }

    pub(crate) fn setsockopt_int(&self, level: c_int, name: c_int, value: c_int) -> io::Result<()> {
        self.setsockopt_value(level, name, &value)
    }

    /// Sets an option whose value is the plain-data `value` (an int or a C struct).
    pub(crate) fn setsockopt_value<T: Copy>(
        &self,
        level: c_int,
        name: c_int,
        value: &T,
    ) -> io::Result<()> {
        // SAFETY: value is a live plain-data value and the length passed is its
        // size; the kernel only reads it.
        cvt(unsafe {
            libc::setsockopt(
                self.raw(),
                level,
                name,
                (value as *const T).cast(),
                size_of::<T>() as socklen_t,
            )
        })?;
        Ok(())
    }

    pub(crate) fn getsockopt_int(&self, level: c_int, name: c_int) -> io::Result<c_int> {
        let mut value: c_int = 0;
        let mut len = size_of::<c_int>() as socklen_t;
        // SAFETY: value is a live int of len bytes; the kernel writes at most
        // len bytes into it and updates len.
        cvt(unsafe {
            libc::getsockopt(
                self.raw(),
                level,
                name,
                (&mut value as *mut c_int).cast(),
                &mut len,
            )
        })?;
        Ok(value)
    }

    /// `SO_SNDBUF` as the kernel reports it: twice the value set (the
    /// kernel doubles it for bookkeeping). RDS's own limit is half of this;
    /// see [`send_limit`](Self::send_limit).
    pub fn sndbuf(&self) -> io::Result<usize> {
        let value = self.getsockopt_int(libc::SOL_SOCKET, libc::SO_SNDBUF)?;
        Ok(usize::try_from(value).unwrap_or(0))
    }

    /// Sets `SO_SNDBUF` (clamped by the kernel to `net.core.wmem_max`). For
    /// RDS the value set is the largest message size and the amount of
    /// unacknowledged data a socket may have in flight.
    pub fn set_sndbuf(&self, bytes: usize) -> io::Result<()> {
        let value = int_value(bytes, "SO_SNDBUF")?;
        self.setsockopt_int(libc::SOL_SOCKET, libc::SO_SNDBUF, value)
    }

    /// Sets `SO_SNDBUFFORCE`: like [`set_sndbuf`](Self::set_sndbuf) without
    /// the `wmem_max` clamp. Needs `CAP_NET_ADMIN` (else `EPERM`).
    pub fn set_sndbuf_force(&self, bytes: usize) -> io::Result<()> {
        let value = int_value(bytes, "SO_SNDBUFFORCE")?;
        self.setsockopt_int(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, value)
    }

    /// `SO_RCVBUF` as the kernel reports it (twice the value set).
    pub fn rcvbuf(&self) -> io::Result<usize> {
        let value = self.getsockopt_int(libc::SOL_SOCKET, libc::SO_RCVBUF)?;
        Ok(usize::try_from(value).unwrap_or(0))
    }

    /// Sets `SO_RCVBUF` (clamped to `net.core.rmem_max`). RDS never refuses a
    /// message for lack of receive buffer; the value only drives congestion
    /// marking.
    pub fn set_rcvbuf(&self, bytes: usize) -> io::Result<()> {
        let value = int_value(bytes, "SO_RCVBUF")?;
        self.setsockopt_int(libc::SOL_SOCKET, libc::SO_RCVBUF, value)
    }

    /// Sets `SO_RCVBUFFORCE` (no `rmem_max` clamp; needs `CAP_NET_ADMIN`).
    pub fn set_rcvbuf_force(&self, bytes: usize) -> io::Result<()> {
        let value = int_value(bytes, "SO_RCVBUFFORCE")?;
        self.setsockopt_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, value)
    }

    /// The largest payload a send accepts: half the kernel's `sk_sndbuf`,
    /// at most 1 MiB. Larger sends fail with `EMSGSIZE`.
    pub fn send_limit(&self) -> io::Result<usize> {
        Ok((self.sndbuf()? / 2).min(sys::RDS_MAX_MSG_SIZE))
    }

    /// `RDS_RECVERR`: whether RDMA completion notifications are queued for
    /// failures too.
    pub fn recverr(&self) -> io::Result<bool> {
        Ok(self.getsockopt_int(sys::SOL_RDS, sys::RDS_RECVERR)? != 0)
    }

    /// `RDS_CANCEL_SENT_TO`: drops this socket's messages to `addr` that
    /// are still queued or unacknowledged. `ENOTCONN` if unbound.
    pub fn cancel_sent_to(&self, addr: SocketAddr) -> io::Result<()> {
        let raw = RawAddr::from_socket_addr(&addr);
        // SAFETY: raw holds a sockaddr of raw.len() bytes, alive across the
        // call; the kernel only reads it.
        cvt(unsafe {
            libc::setsockopt(
                self.raw(),
                sys::SOL_RDS,
                sys::RDS_CANCEL_SENT_TO,
                raw.as_ptr().cast(),
                raw.len(),
            )
        })
        .map(|_| ())
    }

    /// Sets `RDS_RECVERR`.
    pub fn set_recverr(&self, on: bool) -> io::Result<()> {
        self.setsockopt_int(sys::SOL_RDS, sys::RDS_RECVERR, c_int::from(on))
    }

    /// Sets `RDS_CONG_MONITOR`: report uncongested ports with
    /// `RDS_CMSG_CONG_UPDATE` notifications. (It cannot be read back: the
    /// kernel answers `ENOPROTOOPT`.)
    pub fn set_cong_monitor(&self, on: bool) -> io::Result<()> {
        self.setsockopt_int(sys::SOL_RDS, sys::RDS_CONG_MONITOR, c_int::from(on))
    }

    /// Sets `SO_RDS_MSG_RXPATH_LATENCY`: each datagram received from now on
    /// reports the time it spent in `spans` ([`Received::rxpath_latency`]);
    /// no spans turns it off. `EINVAL` for more than
    /// [`rxpath::MAX_SPANS`](crate::rxpath::MAX_SPANS).
    pub fn set_rxpath_latency(&self, spans: &[crate::rxpath::RxPathSpan]) -> io::Result<()> {
        let raw = crate::rxpath::encode_request(spans)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        self.setsockopt_value(sys::SOL_RDS, sys::SO_RDS_MSG_RXPATH_LATENCY, &raw)
    }

    /// `SO_RDS_TRANSPORT`: the attached transport, [`Transport::None`] when
    /// unbound, [`Transport::Loopback`] when bound to a loopback address.
    pub fn transport(&self) -> io::Result<Transport> {
        Ok(Transport::from_raw(
            self.getsockopt_int(sys::SOL_RDS, sys::SO_RDS_TRANSPORT)?,
        ))
    }

    /// Attaches a transport before bind. `EOPNOTSUPP` once one is attached,
    /// `EINVAL` for loopback/none, `ENOPROTOOPT` if it is not available.
    pub fn set_transport(&self, transport: Transport) -> io::Result<()> {
        self.setsockopt_int(sys::SOL_RDS, sys::SO_RDS_TRANSPORT, transport.as_raw())
    }

    /// Runs a TOS ioctl on a one-byte argument, returning the byte after it.
    fn tos_ioctl(&self, cmd: libc::c_ulong, tos: u8) -> io::Result<u8> {
        // The argument is one byte, but when the RDS handler declines
        // (-ENOIOCTLCMD) the generic socket layer reads a struct ifreq from
        // the same pointer for its device-ioctl fallback; a buffer of that
        // size keeps every access inside memory we own.
        let mut arg = IoctlArg([0; IOCTL_ARG_LEN]);
        arg.0[0] = tos;
        // SAFETY: arg is live and IOCTL_ARG_LEN bytes long, at least a
        // struct ifreq, the most the kernel reads or writes for these
        // commands.
        cvt(unsafe { libc::ioctl(self.raw(), cmd as _, arg.0.as_mut_ptr()) })?;
        Ok(arg.0[0])
    }

    /// The type of service (`SIOCRDSGETTOS`).
    pub fn tos(&self) -> io::Result<u8> {
        self.tos_ioctl(sys::SIOCRDSGETTOS, 0)
    }

    /// Sets the type of service (`SIOCRDSSETTOS`) before the first send.
    /// Needs a transport that maps TOS values: unbound and loopback-bound
    /// sockets get `ENOTTY`; `EINVAL` once set or after a send.
    pub fn set_tos(&self, tos: u8) -> io::Result<()> {
        self.tos_ioctl(sys::SIOCRDSSETTOS, tos)?;
        Ok(())
    }

    /// `SO_TIMESTAMP`: whether received datagrams carry their receive time.
    pub fn timestamps(&self) -> io::Result<bool> {
        Ok(self.getsockopt_int(libc::SOL_SOCKET, libc::SO_TIMESTAMP)? != 0)
    }

    /// Sets `SO_TIMESTAMP` (at `SOL_SOCKET`). Datagrams queued while it is on
    /// report [`Received::timestamp`].
    pub fn set_timestamps(&self, on: bool) -> io::Result<()> {
        self.setsockopt_int(libc::SOL_SOCKET, libc::SO_TIMESTAMP, c_int::from(on))
    }

    /// Reads `RDS_INFO_*` table `optname`: the raw entries and the element
    /// size.
    ///
    /// The kernel's sizing protocol: a getsockopt whose buffer is too small
    /// fails with `ENOSPC` and writes back the bytes needed; one that fits
    /// returns the element size and writes back the bytes used. The table
    /// can grow between the two calls, so this retries a few times with a
    /// little room to spare.
    pub fn info(&self, optname: c_int) -> io::Result<(Vec<u8>, usize)> {
        let mut buf = vec![0u8; INFO_FIRST_LEN];
        let mut last_err = None;
        for _ in 0..INFO_ATTEMPTS {
            let mut len = int_value(buf.len(), "RDS_INFO buffer")? as socklen_t;
            // SAFETY: buf is valid for writes of len bytes and lives across
            // the call; the kernel writes at most len bytes and updates len.
            let ret = unsafe {
                libc::getsockopt(
                    self.raw(),
                    sys::SOL_RDS,
                    optname,
                    buf.as_mut_ptr().cast(),
                    &mut len,
                )
            };
            match cvt(ret) {
                Ok(elem_size) => {
                    buf.truncate((len as usize).min(buf.len()));
                    // elem_size is non-negative after cvt.
                    return Ok((buf, elem_size as usize));
                }
                Err(err) if err.raw_os_error() == Some(libc::ENOSPC) => {
                    let needed = len as usize;
                    // Never retry with the same size, even if the kernel
                    // wrote back nothing useful.
                    let next = needed.max(buf.len() + 1);
                    buf.resize(next + next / 8, 0);
                    last_err = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::from_raw_os_error(libc::ENOSPC)))
    }

    /// `RDS_INFO_COUNTERS`: the global and transport counters.
    pub fn counters(&self) -> io::Result<Vec<info::Counter>> {
        let (buf, elem_size) = self.info(sys::RDS_INFO_COUNTERS)?;
        info::decode_counters(&buf, elem_size)
    }

    /// `RDS_INFO_SOCKETS`: the sockets bound to IPv4 addresses in this
    /// network namespace.
    pub fn sockets(&self) -> io::Result<Vec<info::SocketInfo>> {
        let (buf, elem_size) = self.info(sys::RDS_INFO_SOCKETS)?;
        info::decode_sockets(&buf, elem_size)
    }

    /// Reads IPv4 table `v4` and its `RDS6_` twin `v6` and merges them as
    /// [`info::merge_v4_v6`] describes. A kernel built without IPv6 has no
    /// `RDS6_` tables (`ENOPROTOOPT`): then the IPv4 table alone.
    fn info_v4_v6<T>(
        &self,
        (v4, decode_v4): (c_int, Decoder<T>),
        (v6, decode_v6): (c_int, Decoder<T>),
        local: fn(&T) -> IpAddr,
    ) -> io::Result<Vec<T>> {
        let (buf, elem_size) = self.info(v4)?;
        let v4 = decode_v4(&buf, elem_size)?;
        let v6 = match self.info(v6) {
            Ok((buf, elem_size)) => decode_v6(&buf, elem_size)?,
            Err(err) if err.raw_os_error() == Some(libc::ENOPROTOOPT) => Vec::new(),
            Err(err) => return Err(err),
        };
        Ok(info::merge_v4_v6(v4, v6, local))
    }

    /// `RDS_INFO_CONNECTIONS` and `RDS6_INFO_CONNECTIONS`: the connections
    /// of this network namespace, IPv4 ones first. The IPv6 table lists the
    /// IPv4 connections again with v4-mapped addresses; those duplicates
    /// are dropped for the IPv4 records, which carry `tos`, so only IPv6
    /// connections have `tos` `None`.
    pub fn connections(&self) -> io::Result<Vec<info::ConnectionInfo>> {
        self.info_v4_v6(
            (sys::RDS_INFO_CONNECTIONS, info::decode_connections),
            (sys::RDS6_INFO_CONNECTIONS, info::decode_connections_v6),
            |c| c.laddr,
        )
    }

    /// Messages of a queue, from `RDS_INFO_*_MESSAGES` (`v4`) and its
    /// `RDS6_` twin (`v6`), merged as for [`RdsSocket::connections`].
    fn messages(&self, v4: c_int, v6: c_int) -> io::Result<Vec<info::MessageInfo>> {
        self.info_v4_v6(
            (v4, info::decode_messages),
            (v6, info::decode_messages_v6),
            |m| m.laddr,
        )
    }

    /// `RDS_INFO_SEND_MESSAGES` and its `RDS6_` twin: the messages queued
    /// on this namespace's connections and not yet sent.
    pub fn send_messages(&self) -> io::Result<Vec<info::MessageInfo>> {
        self.messages(sys::RDS_INFO_SEND_MESSAGES, sys::RDS6_INFO_SEND_MESSAGES)
    }

    /// `RDS_INFO_RETRANS_MESSAGES` and its `RDS6_` twin: the messages sent
    /// on this namespace's connections and not yet acknowledged.
    pub fn retrans_messages(&self) -> io::Result<Vec<info::MessageInfo>> {
        self.messages(
            sys::RDS_INFO_RETRANS_MESSAGES,
            sys::RDS6_INFO_RETRANS_MESSAGES,
        )
    }

    /// `RDS_INFO_RECV_MESSAGES` and its `RDS6_` twin: the messages waiting
    /// in the receive queues of this namespace's sockets.
    pub fn recv_messages(&self) -> io::Result<Vec<info::MessageInfo>> {
        self.messages(sys::RDS_INFO_RECV_MESSAGES, sys::RDS6_INFO_RECV_MESSAGES)
    }

    /// `RDS_INFO_IB_CONNECTIONS` and `RDS6_INFO_IB_CONNECTIONS`: this
    /// namespace's connections over IB, merged as for
    /// [`RdsSocket::connections`]. `ENOPROTOOPT` if there is no IB
    /// transport (in-tree: `rds_rdma` is not loaded).
    pub fn ib_connections(&self) -> io::Result<Vec<info::IbConnectionInfo>> {
        self.info_v4_v6(
            (sys::RDS_INFO_IB_CONNECTIONS, info::decode_ib_connections),
            (
                sys::RDS6_INFO_IB_CONNECTIONS,
                info::decode_ib_connections_v6,
            ),
            |c| c.src_addr,
        )
    }
}

#[cfg(test)]
impl RdsSocket {
    /// A UDP socket on 127.0.0.1 in an `RdsSocket`: the `SOL_SOCKET` calls
    /// and the generic parts of sending and receiving (iovecs, batches,
    /// readiness) are the same, so it stands in for an RDS socket without
    /// a module.
    pub(crate) fn udp_stand_in() -> Self {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        Self {
            fd: OwnedFd::from(udp),
        }
    }
}

impl AsFd for RdsSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for RdsSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl From<RdsSocket> for OwnedFd {
    fn from(socket: RdsSocket) -> Self {
        socket.fd
    }
}

impl IntoRawFd for RdsSocket {
    /// Gives up ownership: the caller closes the descriptor.
    fn into_raw_fd(self) -> RawFd {
        self.fd.into_raw_fd()
    }
}

/// Adopts a descriptor as an [`RdsSocket`] if it is one: a socket of
/// domain `AF_RDS` (`SO_DOMAIN`) and type `SOCK_SEQPACKET` (`SO_TYPE`),
/// e.g. one inherited from a parent process or received over a Unix
/// socket. Anything else is an `InvalidInput` error, and the descriptor
/// is closed with the `OwnedFd` (keep a [`OwnedFd::try_clone`] to use it
/// otherwise).
///
/// A checked conversion rather than `From`: the methods rely on `PF_RDS`
/// semantics (a memory region or an RDMA operation leaks its buffer or
/// hands it back according to what RDS answers), and on another socket
/// they would fail late with misleading errors, or not at all (a UDP
/// socket takes `send_to` and `set_tos`'s ioctl means something else).
/// The check is two `getsockopt` calls, once.
impl TryFrom<OwnedFd> for RdsSocket {
    type Error = io::Error;

    fn try_from(fd: OwnedFd) -> io::Result<Self> {
        let socket = Self { fd };
        let domain = socket.getsockopt_int(libc::SOL_SOCKET, libc::SO_DOMAIN)?;
        let kind = socket.getsockopt_int(libc::SOL_SOCKET, libc::SO_TYPE)?;
        if domain != sys::AF_RDS || kind != libc::SOCK_SEQPACKET {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "not an RDS socket: domain {domain}, type {kind} \
                     (want AF_RDS {}, SOCK_SEQPACKET {})",
                    sys::AF_RDS,
                    libc::SOCK_SEQPACKET
                ),
            ));
        }
        Ok(socket)
    }
}

/// `SO_RCVTIMEO`/`SO_SNDTIMEO`'s value for `timeout`: `None` is 0 (no
/// limit); zero is refused as std refuses it, since to the kernel it
/// would mean no limit; under a microsecond rounds up to one.
fn timeout_to_timeval(timeout: Option<Duration>) -> io::Result<libc::timeval> {
    let Some(timeout) = timeout else {
        return Ok(libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        });
    };
    if timeout.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot set a 0 duration timeout",
        ));
    }
    let tv_sec = libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX);
    let mut tv_usec = timeout.subsec_micros() as libc::suseconds_t;
    if tv_sec == 0 && tv_usec == 0 {
        tv_usec = 1;
    }
    Ok(libc::timeval { tv_sec, tv_usec })
}

/// The timeout a `SO_RCVTIMEO`/`SO_SNDTIMEO` value means: `None` for 0.
fn timeval_to_timeout(value: &libc::timeval) -> Option<Duration> {
    if value.tv_sec == 0 && value.tv_usec == 0 {
        return None;
    }
    let secs = u64::try_from(value.tv_sec).unwrap_or(0);
    let micros = u32::try_from(value.tv_usec).unwrap_or(0);
    Some(Duration::new(secs, micros.saturating_mul(1000)))
}

/// What a `recvmsg` returned: `len`, `msg_flags`, the sender and the
/// control data. `MSG_CTRUNC` is an error: the kernel had more control data
/// than fit (a notification rrds keeps queued for the next receive, one
/// in-tree RDS drops), which [`CONTROL_LEN`] should have made impossible.
fn decode_received(
    len: usize,
    msg_flags: c_int,
    from: Option<SocketAddr>,
    control: &[u8],
) -> io::Result<Received> {
    if msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "recvmsg: control data truncated (MSG_CTRUNC) in a {CONTROL_LEN}-byte buffer; \
                 a notification or the datagram's ancillary data may be lost"
            ),
        ));
    }
    Ok(Received {
        len,
        truncated: msg_flags & libc::MSG_TRUNC != 0,
        from,
        timestamp: find_timestamp(control),
        xrc_event: find_cmsg(control, sys::SOL_RDS, sys::RRDS_CMSG_XRC_EVENT)
            .and_then(crate::xrc::XrcEvent::decode),
        conn_event: find_cmsg(control, sys::SOL_RDS, sys::RRDS_CMSG_CONN_EVENT)
            .and_then(crate::conn_events::ConnEvent::decode),
        rdma_statuses: cmsgs(control)
            .filter(|&(level, kind, _)| level == sys::SOL_RDS && kind == sys::RDS_CMSG_RDMA_STATUS)
            .filter_map(|(_, _, data)| crate::mr::RdmaStatus::decode(data))
            .collect(),
        rdma_dest: find_cmsg(control, sys::SOL_RDS, sys::RDS_CMSG_RDMA_DEST).and_then(ne_u64),
        cong_update: find_cmsg(control, sys::SOL_RDS, sys::RDS_CMSG_CONG_UPDATE).and_then(ne_u64),
        rxpath_latency: find_cmsg(control, sys::SOL_RDS, sys::RDS_CMSG_RXPATH_LATENCY)
            .and_then(crate::rxpath::RxPathLatency::decode),
    })
}

/// Size of a field, given an accessor: `field_size(|h: &T| &h.f)`.
fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// Reads a native-endian signed integer of `size` (4 or 8) bytes.
fn read_int(bytes: &[u8], size: usize) -> Option<i64> {
    match size {
        4 => Some(i64::from(i32::from_ne_bytes(
            bytes.get(..4)?.try_into().ok()?,
        ))),
        8 => Some(i64::from_ne_bytes(bytes.get(..8)?.try_into().ok()?)),
        _ => None,
    }
}

/// Rounds `len` up like `CMSG_ALIGN`.
fn cmsg_align(len: usize) -> usize {
    let align = size_of::<usize>();
    len.div_ceil(align) * align
}

/// Lays out one control message (`CMSG_LEN` header, data, `CMSG_SPACE`
/// padding) at the start of `out`; returns the bytes used, `None` if it
/// does not fit.
fn encode_cmsg(out: &mut [u8], level: c_int, kind: c_int, data: &[u8]) -> Option<usize> {
    let header = cmsg_align(size_of::<libc::cmsghdr>());
    let space = header + cmsg_align(data.len());
    let out = out.get_mut(..space)?;
    out.fill(0);
    let len = header + data.len();
    match field_size(|h: &libc::cmsghdr| &h.cmsg_len) {
        4 => out[..4].copy_from_slice(&(len as u32).to_ne_bytes()),
        _ => out[..8].copy_from_slice(&(len as u64).to_ne_bytes()),
    }
    let level_off = offset_of!(libc::cmsghdr, cmsg_level);
    let type_off = offset_of!(libc::cmsghdr, cmsg_type);
    out[level_off..level_off + 4].copy_from_slice(&level.to_ne_bytes());
    out[type_off..type_off + 4].copy_from_slice(&kind.to_ne_bytes());
    out[header..len].copy_from_slice(data);
    Some(space)
}

/// A cmsg's first 8 bytes as a native-endian `u64`.
fn ne_u64(data: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(data.get(..8)?.try_into().ok()?))
}

/// The control messages in `control` (what `recvmsg` returned in
/// `msg_control`): level, type and data of each, up to the first malformed
/// one.
fn cmsgs(control: &[u8]) -> impl Iterator<Item = (c_int, c_int, &[u8])> {
    let len_size = field_size(|h: &libc::cmsghdr| &h.cmsg_len);
    let level_off = offset_of!(libc::cmsghdr, cmsg_level);
    let type_off = offset_of!(libc::cmsghdr, cmsg_type);
    let header = cmsg_align(size_of::<libc::cmsghdr>());
    let mut off = 0;
    std::iter::from_fn(move || {
        let cmsg = control.get(off..)?;
        if cmsg.len() < header {
            return None;
        }
        let cmsg_len = usize::try_from(read_int(cmsg, len_size)?).ok()?;
        if cmsg_len < header || cmsg_len > cmsg.len() {
            return None;
        }
        let level = c_int::try_from(read_int(&cmsg[level_off..], 4)?).ok()?;
        let kind = c_int::try_from(read_int(&cmsg[type_off..], 4)?).ok()?;
        off += cmsg_align(cmsg_len);
        Some((level, kind, &cmsg[header..cmsg_len]))
    })
}

/// The data of the first control message in `control` of `level` and
/// `kind`.
fn find_cmsg(control: &[u8], level: c_int, kind: c_int) -> Option<&[u8]> {
    cmsgs(control)
        .find(|&(l, k, _)| l == level && k == kind)
        .map(|(_, _, data)| data)
}

/// Decodes an `SCM_TIMESTAMP` control message in `control`, if present.
fn find_timestamp(control: &[u8]) -> Option<SystemTime> {
    timeval_to_time(find_cmsg(control, libc::SOL_SOCKET, libc::SCM_TIMESTAMP)?)
}

/// Decodes a `struct timeval` (wall-clock time since the epoch).
fn timeval_to_time(data: &[u8]) -> Option<SystemTime> {
    let sec = read_int(
        data.get(offset_of!(libc::timeval, tv_sec)..)?,
        field_size(|t: &libc::timeval| &t.tv_sec),
    )?;
    let usec = read_int(
        data.get(offset_of!(libc::timeval, tv_usec)..)?,
        field_size(|t: &libc::timeval| &t.tv_usec),
    )?;
    let since_epoch = Duration::from_secs(u64::try_from(sec).ok()?)
        .checked_add(Duration::from_micros(u64::try_from(usec).ok()?))?;
    SystemTime::UNIX_EPOCH.checked_add(since_epoch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::RdmaOutcome;

    #[test]
    fn encoded_cmsg_is_found_again() {
        let mut out = [0u8; 64];
        let used = encode_cmsg(
            &mut out,
            sys::SOL_RDS,
            sys::RDS_CMSG_RDMA_DEST,
            &7u64.to_ne_bytes(),
        )
        .unwrap();
        // CMSG_SPACE(8) on LP64: a 16-byte header and 8 bytes of data.
        assert_eq!(used, cmsg_align(size_of::<libc::cmsghdr>()) + 8);
        let data = find_cmsg(&out[..used], sys::SOL_RDS, sys::RDS_CMSG_RDMA_DEST).unwrap();
        assert_eq!(data, 7u64.to_ne_bytes());
        assert_eq!(
            find_cmsg(&out[..used], sys::SOL_RDS, sys::RDS_CMSG_RDMA_MAP),
            None
        );
        assert_eq!(encode_cmsg(&mut out[..20], sys::SOL_RDS, 2, &[0; 8]), None);
    }

    /// Builds one control message as the kernel lays it out.
    fn cmsg(level: c_int, kind: c_int, data: &[u8]) -> Vec<u8> {
        let header = cmsg_align(size_of::<libc::cmsghdr>());
        let len = header + data.len();
        let mut out = vec![0u8; cmsg_align(len)];
        let len_size = field_size(|h: &libc::cmsghdr| &h.cmsg_len);
        out[..len_size].copy_from_slice(&len.to_ne_bytes()[..len_size]);
        let level_off = offset_of!(libc::cmsghdr, cmsg_level);
        out[level_off..level_off + 4].copy_from_slice(&level.to_ne_bytes());
        let type_off = offset_of!(libc::cmsghdr, cmsg_type);
        out[type_off..type_off + 4].copy_from_slice(&kind.to_ne_bytes());
        out[header..len].copy_from_slice(data);
        out
    }

    fn timeval(sec: i64, usec: i64) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(sec as libc::time_t).to_ne_bytes());
        out.extend_from_slice(&(usec as libc::suseconds_t).to_ne_bytes());
        out
    }

    #[test]
    fn transport_numbers_round_trip() {
        for raw in [-1, 0, 1, 2, 3, 42] {
            assert_eq!(Transport::from_raw(raw).as_raw(), raw);
        }
        assert_eq!(Transport::from_raw(3), Transport::Loopback);
        assert_eq!(Transport::from_raw(-1), Transport::None);
        assert_eq!(Transport::from_raw(42), Transport::Unknown(42));
        assert_eq!(Transport::Loopback.to_string(), "loopback");
    }

    #[test]
    fn timestamp_cmsg_is_decoded() {
        let control = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMP, &timeval(1000, 250));
        assert_eq!(
            find_timestamp(&control),
            Some(SystemTime::UNIX_EPOCH + Duration::new(1000, 250_000))
        );
    }

    #[test]
    fn timestamp_is_found_after_other_cmsgs() {
        let mut control = cmsg(sys::SOL_RDS, sys::RDS_CMSG_RDMA_DEST, &7u64.to_ne_bytes());
        control.extend(cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMP, &timeval(5, 0)));
        assert_eq!(
            find_timestamp(&control),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(5))
        );
    }

    #[test]
    fn no_or_malformed_cmsgs_give_no_timestamp() {
        assert_eq!(find_timestamp(&[]), None);
        let mut control = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMP, &timeval(5, 0));
        control.truncate(control.len() - 1);
        assert_eq!(find_timestamp(&control), None);
        let other = cmsg(sys::SOL_RDS, sys::RDS_CMSG_CONG_UPDATE, &1u64.to_ne_bytes());
        assert_eq!(find_timestamp(&other), None);
    }

    #[test]
    fn truncated_control_data_is_an_error() {
        let control = cmsg(sys::SOL_RDS, sys::RDS_CMSG_CONG_UPDATE, &1u64.to_ne_bytes());
        let err = decode_received(0, libc::MSG_CTRUNC, None, &control).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("MSG_CTRUNC"), "{err}");
        let got = decode_received(0, 0, None, &control).unwrap();
        assert_eq!(got.cong_update, Some(1));
        assert!(!got.truncated);
        let got = decode_received(9, libc::MSG_TRUNC, None, &[]).unwrap();
        assert!(got.truncated);
    }

    fn rdma_note(token: u64, status: i32) -> Vec<u8> {
        let mut note = token.to_ne_bytes().to_vec();
        note.extend_from_slice(&status.to_ne_bytes());
        note.extend_from_slice(&[0; 4]);
        cmsg(sys::SOL_RDS, sys::RDS_CMSG_RDMA_STATUS, &note)
    }

    #[test]
    fn every_rdma_status_of_a_receive_is_kept() {
        // In-tree RDS puts as many outcomes in one receive as fit.
        let mut control = rdma_note(1, sys::RDS_RDMA_SUCCESS);
        control.extend(rdma_note(2, sys::RDS_RDMA_DROPPED));
        control.extend(rdma_note(3, 77));
        let got = decode_received(0, 0, None, &control).unwrap();
        let statuses: Vec<_> = got
            .rdma_statuses
            .iter()
            .map(|s| (s.token, s.status))
            .collect();
        assert_eq!(
            statuses,
            [
                (1, RdmaOutcome::Success),
                (2, RdmaOutcome::Dropped),
                (3, RdmaOutcome::Unknown(77))
            ]
        );
        assert!(decode_received(0, 0, None, &[])
            .unwrap()
            .rdma_statuses
            .is_empty());
    }

    #[test]
    fn control_len_covers_every_receive() {
        let space = |data: usize| cmsg_align(size_of::<libc::cmsghdr>()) + cmsg_align(data);
        // A datagram: its region's cookie, its timestamp, the receive path's
        // latency trace (struct rds_cmsg_rx_trace: a u8 and two arrays of
        // 4 u64, 72 bytes) and zero-copy completions (struct
        // rds_zcopy_cookies: a u32 and 8 more, 36 bytes).
        let datagram = space(8) + space(size_of::<libc::timeval>()) + space(72) + space(36);
        // A notification: one of each kind rrds has (it hands over one at a
        // time, and keeps one that does not fit queued, with MSG_CTRUNC).
        let notification = [
            space(16),
            space(8),
            space(size_of::<sys::rrds_conn_event>()),
            space(size_of::<sys::rrds_xrc_event>()),
        ];
        assert!(CONTROL_LEN >= datagram, "{datagram}");
        assert!(notification.iter().all(|&n| CONTROL_LEN >= n));
        // In-tree RDS fills the buffer with outcomes: several per receive.
        assert!(CONTROL_LEN / space(16) > 1);
    }

    #[test]
    fn tos_ioctl_argument_covers_ifreq() {
        assert!(IOCTL_ARG_LEN >= size_of::<libc::ifreq>());
    }

    fn udp_stand_in() -> RdsSocket {
        RdsSocket::udp_stand_in()
    }

    /// `got` is `want` rounded up to a scheduler tick (at most 10 ms).
    fn about(got: Option<Duration>, want: Duration) -> bool {
        got.is_some_and(|got| got >= want && got <= want + Duration::from_millis(10))
    }

    #[test]
    fn timeouts_read_back_as_set() {
        let sock = udp_stand_in();
        assert_eq!(sock.read_timeout().unwrap(), None);
        assert_eq!(sock.write_timeout().unwrap(), None);
        sock.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        sock.set_write_timeout(Some(Duration::from_micros(250)))
            .unwrap();
        assert!(about(
            sock.read_timeout().unwrap(),
            Duration::from_millis(1500)
        ));
        assert!(about(
            sock.write_timeout().unwrap(),
            Duration::from_micros(250)
        ));
        sock.set_read_timeout(None).unwrap();
        assert_eq!(sock.read_timeout().unwrap(), None);
        assert!(about(
            sock.write_timeout().unwrap(),
            Duration::from_micros(250)
        ));
    }

    #[test]
    fn zero_timeout_is_refused_like_std() {
        let sock = udp_stand_in();
        for err in [
            sock.set_read_timeout(Some(Duration::ZERO)).unwrap_err(),
            sock.set_write_timeout(Some(Duration::ZERO)).unwrap_err(),
        ] {
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let std_err = udp.set_read_timeout(Some(Duration::ZERO)).unwrap_err();
        assert_eq!(std_err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn sub_microsecond_timeout_rounds_up() {
        let tv = timeout_to_timeval(Some(Duration::from_nanos(1))).unwrap();
        assert_eq!((tv.tv_sec, tv.tv_usec), (0, 1));
        let tv = timeout_to_timeval(Some(Duration::new(2, 999))).unwrap();
        assert_eq!((tv.tv_sec, tv.tv_usec), (2, 0));
        let tv = timeout_to_timeval(None).unwrap();
        assert_eq!((tv.tv_sec, tv.tv_usec), (0, 0));
        assert_eq!(timeval_to_timeout(&tv), None);
        let sock = udp_stand_in();
        sock.set_read_timeout(Some(Duration::from_nanos(10)))
            .unwrap();
        // Not 0, which would read back as no timeout.
        assert!(about(
            sock.read_timeout().unwrap(),
            Duration::from_micros(1)
        ));
    }

    #[test]
    fn timed_out_receive_would_block() {
        let sock = udp_stand_in();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let start = std::time::Instant::now();
        let err = sock.recv_msg(&mut [0; 8]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(start.elapsed() >= Duration::from_millis(15));
    }

    #[test]
    fn clone_shares_the_socket_and_is_cloexec() {
        let sock = udp_stand_in();
        let clone = sock.try_clone().unwrap();
        assert_ne!(clone.as_raw_fd(), sock.as_raw_fd());
        assert_eq!(clone.local_addr().unwrap(), sock.local_addr().unwrap());
        // One socket: an option set through one handle reads back through
        // the other.
        clone
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        assert!(about(sock.read_timeout().unwrap(), Duration::from_secs(3)));
        // SAFETY: F_GETFD takes no argument.
        let flags = unsafe { libc::fcntl(clone.as_raw_fd(), libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        drop(sock);
        assert!(clone.local_addr().is_ok());
    }

    #[test]
    fn into_raw_fd_gives_up_ownership() {
        let sock = udp_stand_in();
        let raw = sock.into_raw_fd();
        // SAFETY: raw came from into_raw_fd, so nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Still open: fcntl succeeds on it.
        // SAFETY: F_GETFD takes no argument.
        assert!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) } >= 0);
    }

    #[test]
    fn only_rds_sockets_convert_from_owned_fds() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let err = RdsSocket::try_from(OwnedFd::from(udp)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("not an RDS socket"), "{err}");
        // The right type, the wrong domain.
        let (a, _b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let err = RdsSocket::try_from(OwnedFd::from(a)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        // Not a socket at all.
        let file = std::fs::File::open("/dev/null").unwrap();
        let err = RdsSocket::try_from(OwnedFd::from(file)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTSOCK));
        // A real one converts, where a module is loaded.
        if let Ok(sock) = RdsSocket::new() {
            let fd = OwnedFd::from(sock);
            assert!(RdsSocket::try_from(fd).is_ok());
        }
    }

    #[test]
    fn vectored_send_gathers_and_receive_scatters() {
        let (a, b) = (udp_stand_in(), udp_stand_in());
        b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let to = b.local_addr().unwrap();
        let slices = [
            IoSlice::new(b"hel"),
            IoSlice::new(b""),
            IoSlice::new(b"lo!"),
        ];
        assert_eq!(a.send_to_vectored(&slices, to).unwrap(), 6);
        let (mut head, mut tail) = ([0u8; 4], [0u8; 8]);
        let got = b
            .recv_msg_vectored(&mut [IoSliceMut::new(&mut head), IoSliceMut::new(&mut tail)])
            .unwrap();
        assert_eq!(
            (got.len, got.truncated, got.from),
            (6, false, Some(a.local_addr().unwrap()))
        );
        assert_eq!((&head, &tail[..2]), (b"hell", &b"o!"[..]));

        // Longer than the slices together: the full length, truncated.
        a.send_to(b"0123456789", to).unwrap();
        let (mut x, mut y) = ([0u8; 2], [0u8; 3]);
        let got = b
            .recv_msg_vectored(&mut [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)])
            .unwrap();
        assert_eq!((got.len, got.truncated), (10, true));
        assert_eq!((x, y), (*b"01", *b"234"));

        // To the connected peer; recv_from_vectored gives length and sender.
        a.connect(to).unwrap();
        let sent = a
            .send_vectored(&[IoSlice::new(b"c"), IoSlice::new(b"d")])
            .unwrap();
        assert_eq!(sent, 2);
        let (len, from) = b
            .recv_from_vectored(&mut [IoSliceMut::new(&mut x)])
            .unwrap();
        assert_eq!((len, from, x), (2, a.local_addr().unwrap(), *b"cd"));
    }

    #[test]
    fn more_slices_than_uio_maxiov_is_emsgsize() {
        let (a, b) = (udp_stand_in(), udp_stand_in());
        b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let to = b.local_addr().unwrap();
        let many = vec![IoSlice::new(b"x"); 1025];
        let err = a.send_to_vectored(&many, to).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EMSGSIZE));
        assert_eq!(a.send_to_vectored(&many[..1024], to).unwrap(), 1024);
        // The receive refuses them before it would wait.
        let mut bytes = vec![[0u8; 1]; 1025];
        let mut slices: Vec<_> = bytes.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        let err = b.recv_msg_vectored(&mut slices).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EMSGSIZE));
        let got = b.recv_msg_vectored(&mut slices[..1024]).unwrap();
        assert_eq!((got.len, got.truncated), (1024, false));
        assert!(bytes[..1024].iter().all(|b| b == b"x"));
    }

    #[test]
    fn oversized_buffer_values_are_rejected_before_the_kernel() {
        let err = int_value(usize::MAX, "SO_SNDBUF").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
