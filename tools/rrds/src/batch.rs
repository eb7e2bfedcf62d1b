// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Batches: [`RdsSocket::send_batch`] and [`RdsSocket::recv_batch`], several
//! datagrams per system call (`sendmmsg`, `recvmmsg`).
//!
//! `sendmmsg` has a trap on in-tree RDS: the kernel passes `MSG_BATCH`
//! ("more messages coming") to the protocol's sendmsg for every message of
//! a batch but the last, and in-tree RDS's sendmsg refuses any flag but
//! `MSG_DONTWAIT` with `EOPNOTSUPP`. A batch of two or more then fails on
//! its first message with nothing sent. `send_batch` notices (the first
//! message sent alone goes through) and from then on sends each message
//! with its own `sendmsg`, in this process. rrds takes `MSG_BATCH`: there a
//! batch is one `sendmmsg`. `recvmmsg` has no such
//! trap: `MSG_WAITFORONE` stays in the generic code.

use std::io;
use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use libc::c_uint;

use crate::addr::RawAddr;
use crate::socket::cvt;
use crate::socket::received_from;
use crate::socket::recv_header;
use crate::socket::ControlBuf;
use crate::RdsSocket;
use crate::Received;

/// The most messages one `sendmmsg` or `recvmmsg` takes (`UIO_MAXIOV`;
/// the kernel caps `vlen` there). A longer batch is cut to it.
pub const MAX_BATCH: usize = 1024;

/// Set once a `sendmmsg` of several messages failed with `EOPNOTSUPP`
/// while its first message alone went through: the loaded RDS refuses
/// `MSG_BATCH`, and batches go one `sendmsg` per message.
static SENDMMSG_REFUSED: AtomicBool = AtomicBool::new(false);

impl RdsSocket {
    /// Sends each `(datagram, destination)` of `msgs`, in order, as many
    /// as go (`sendmmsg`); returns how many went.
    ///
    /// As `sendmmsg`: the first message's error is the call's error;
    /// an error on a later one ends the batch there and is not reported
    /// (a count short of `msgs.len()` says where it stopped: send the
    /// rest again to see it). A blocking socket waits for each message as
    /// [`send_to`](Self::send_to) does; a non-blocking one stops at the
    /// first that would wait (`WouldBlock`, or `ENOBUFS` for a congested
    /// port). An empty batch sends nothing and returns 0; at most
    /// [`MAX_BATCH`](crate::batch::MAX_BATCH) messages go per call.
    ///
    /// In-tree RDS refuses `sendmmsg`'s batches (see [`crate::batch`]):
    /// once the first batch has shown that, each message is one `sendmsg`,
    /// so a batch saves no system calls, but keeps the partial-count
    /// semantics. rrds takes them whole.
    ///
    /// ```no_run
    /// # fn main() -> std::io::Result<()> {
    /// use std::net::SocketAddr;
    /// use rrds::RdsSocket;
    ///
    /// let sock = RdsSocket::new()?;
    /// sock.bind("127.0.0.1:0".parse().unwrap())?;
    /// let (a, b): (SocketAddr, SocketAddr) =
    ///     ("127.0.0.1:4000".parse().unwrap(), "127.0.0.1:4001".parse().unwrap());
    /// let msgs = [(&b"to a"[..], a), (&b"to b"[..], b), (&b"a again"[..], a)];
    /// let mut sent = 0;
    /// while sent < msgs.len() {
    ///     sent += sock.send_batch(&msgs[sent..])?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn send_batch<B: AsRef<[u8]>>(&self, msgs: &[(B, SocketAddr)]) -> io::Result<usize> {
        let msgs = &msgs[..msgs.len().min(MAX_BATCH)];
        if msgs.len() < 2 || SENDMMSG_REFUSED.load(Relaxed) {
            return self.send_each(msgs);
        }
        match self.sendmmsg(msgs) {
            Err(err) if err.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                // MSG_BATCH, or the first message itself? Alone, the first
                // message goes without MSG_BATCH.
                let (buf, addr) = &msgs[0];
                self.send_to(buf.as_ref(), *addr)?;
                SENDMMSG_REFUSED.store(true, Relaxed);
                Ok(1 + self.send_each(&msgs[1..]).unwrap_or(0))
            }
            other => other,
        }
    }

    /// One `sendmmsg` of `msgs` (at most [`MAX_BATCH`]).
    fn sendmmsg<B: AsRef<[u8]>>(&self, msgs: &[(B, SocketAddr)]) -> io::Result<usize> {
        let names: Vec<RawAddr> = msgs
            .iter()
            .map(|(_, addr)| RawAddr::from_socket_addr(addr))
            .collect();
        let iovs: Vec<libc::iovec> = msgs
            .iter()
            .map(|(buf, _)| libc::iovec {
                iov_base: buf.as_ref().as_ptr() as *mut libc::c_void,
                iov_len: buf.as_ref().len(),
            })
            .collect();
        let mut hdrs: Vec<libc::mmsghdr> = names
            .iter()
            .zip(&iovs)
            .map(|(name, iov)| {
                // SAFETY: mmsghdr is plain data for which all zeroes (null
                // pointers, zero lengths) is a valid value.
                let mut hdr: libc::mmsghdr = unsafe { core::mem::zeroed() };
                hdr.msg_hdr.msg_name = name.as_ptr() as *mut libc::c_void;
                hdr.msg_hdr.msg_namelen = name.len();
                hdr.msg_hdr.msg_iov = iov as *const libc::iovec as *mut libc::iovec;
                hdr.msg_hdr.msg_iovlen = 1;
                hdr
            })
            .collect();
        // SAFETY: hdrs holds hdrs.len() (at most MAX_BATCH, so it fits in
        // c_uint) headers, each pointing to its address in names and its
        // iovec in iovs over the caller's buffer, all alive across the
        // call; the kernel reads those and writes only each msg_len.
        let sent =
            cvt(unsafe { libc::sendmmsg(self.raw(), hdrs.as_mut_ptr(), hdrs.len() as c_uint, 0) })?;
        Ok(sent as usize)
    }

    /// `msgs` one `sendmsg` each, with `sendmmsg`'s result: the first
    /// error if nothing went, else how many went.
    pub(crate) fn send_each<B: AsRef<[u8]>>(&self, msgs: &[(B, SocketAddr)]) -> io::Result<usize> {
        for (sent, (buf, addr)) in msgs.iter().enumerate() {
            if let Err(err) = self.send_to(buf.as_ref(), *addr) {
                return if sent == 0 { Err(err) } else { Ok(sent) };
            }
        }
        Ok(msgs.len())
    }

    /// Receives up to `bufs.len()` datagrams or notifications, one into
    /// each buffer in order, with one `recvmmsg`; replaces the contents of
    /// `received` with what came (`received[i]` is what `bufs[i]` holds)
    /// and returns how many.
    ///
    /// With `MSG_WAITFORONE`: a blocking socket waits for the first
    /// (within [`read_timeout`](Self::read_timeout), else `WouldBlock`)
    /// and takes the rest only as far as they are already queued; a
    /// non-blocking one fails with `WouldBlock` if nothing is. Each entry
    /// is what [`recv_msg`](Self::recv_msg) would say: full length,
    /// truncation, sender or notification. No buffers receive nothing and
    /// return 0; at most [`MAX_BATCH`](crate::batch::MAX_BATCH) per call.
    ///
    /// An entry that cannot be decoded (control data truncated, which the
    /// 512-byte control buffer should rule out) ends the batch: the
    /// entries before it are returned, or its error if it is the first,
    /// and the datagrams after it in this batch are lost.
    ///
    /// ```no_run
    /// # fn main() -> std::io::Result<()> {
    /// use rrds::RdsSocket;
    ///
    /// let sock = RdsSocket::new()?;
    /// sock.bind("127.0.0.1:4000".parse().unwrap())?;
    /// let mut bufs = vec![[0u8; 2048]; 32];
    /// let mut received = Vec::new();
    /// loop {
    ///     let n = sock.recv_batch(&mut bufs, &mut received)?;
    ///     for (got, buf) in received.iter().zip(&bufs).take(n) {
    ///         if let Some(from) = got.from {
    ///             println!("{from}: {:?}", &buf[..got.len.min(buf.len())]);
    ///         }
    ///     }
    /// }
    /// # }
    /// ```
    pub fn recv_batch<B: AsMut<[u8]>>(
        &self,
        bufs: &mut [B],
        received: &mut Vec<Received>,
    ) -> io::Result<usize> {
        received.clear();
        let n = bufs.len().min(MAX_BATCH);
        if n == 0 {
            return Ok(0);
        }
        let mut names = vec![RawAddr::empty(); n];
        let mut controls: Vec<ControlBuf> = (0..n).map(|_| ControlBuf::new()).collect();
        let mut iovs: Vec<IoSliceMut<'_>> = bufs[..n]
            .iter_mut()
            .map(|buf| IoSliceMut::new(buf.as_mut()))
            .collect();
        let mut hdrs: Vec<libc::mmsghdr> = names
            .iter_mut()
            .zip(controls.iter_mut())
            .zip(iovs.chunks_mut(1))
            .map(|((name, control), iov)| libc::mmsghdr {
                msg_hdr: recv_header(name, iov, control),
                msg_len: 0,
            })
            .collect();
        // SAFETY: hdrs holds n (at most MAX_BATCH, so it fits in c_uint)
        // headers made by recv_header, each pointing to its own address,
        // iovec and control buffer (names, iovs, controls), which are not
        // touched again until the call returns; the kernel writes within
        // their lengths. No timeout (a null pointer).
        let got = cvt(unsafe {
            libc::recvmmsg(
                self.raw(),
                hdrs.as_mut_ptr(),
                n as c_uint,
                (libc::MSG_TRUNC | libc::MSG_WAITFORONE) as _,
                core::ptr::null_mut(),
            )
        })? as usize;
        for (i, hdr) in hdrs.iter().take(got).enumerate() {
            // The kernel wrote through the pointers in hdr, into names[i]
            // and controls[i]; read them back through the same places.
            match received_from(
                hdr.msg_len as usize,
                &hdr.msg_hdr,
                &mut names[i],
                &controls[i],
            ) {
                Ok(r) => received.push(r),
                Err(err) if i == 0 => return Err(err),
                Err(_) => break,
            }
        }
        Ok(received.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn udp_pair() -> (RdsSocket, RdsSocket) {
        let (a, b) = (RdsSocket::udp_stand_in(), RdsSocket::udp_stand_in());
        b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        (a, b)
    }

    #[test]
    fn batch_goes_in_order_and_comes_back_in_one_receive() {
        let (a, b) = udp_pair();
        let to = b.local_addr().unwrap();
        let msgs = [(&b"one"[..], to), (&b""[..], to), (&b"three"[..], to)];
        assert_eq!(a.send_batch(&msgs).unwrap(), 3);
        // Loopback UDP has queued all three by now: one receive takes them,
        // and the fourth buffer stays unused.
        let mut bufs = [[0u8; 8]; 4];
        let mut received = vec![];
        assert_eq!(b.recv_batch(&mut bufs, &mut received).unwrap(), 3);
        let from = Some(a.local_addr().unwrap());
        let got: Vec<_> = received.iter().map(|r| (r.len, r.from)).collect();
        assert_eq!(got, [(3, from), (0, from), (5, from)]);
        assert_eq!((&bufs[0][..3], &bufs[2][..5]), (&b"one"[..], &b"three"[..]));
        // Truncation is per entry.
        a.send_to(b"0123456789", to).unwrap();
        let mut small = [vec![0u8; 4]];
        assert_eq!(b.recv_batch(&mut small, &mut received).unwrap(), 1);
        assert_eq!((received[0].len, received[0].truncated), (10, true));
        assert_eq!(small[0], b"0123");
    }

    #[test]
    fn empty_batches_make_no_call() {
        let (a, b) = udp_pair();
        let none: [(&[u8], SocketAddr); 0] = [];
        assert_eq!(a.send_batch(&none).unwrap(), 0);
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        let mut received = vec![b.recv_msg(&mut [0; 4]).unwrap()];
        // Nothing is queued: a call would wait 5 s, then fail.
        let mut no_bufs: [[u8; 4]; 0] = [];
        assert_eq!(b.recv_batch(&mut no_bufs, &mut received).unwrap(), 0);
        assert!(received.is_empty(), "cleared");
    }

    #[test]
    fn nonblocking_receive_of_nothing_would_block() {
        let (_, b) = udp_pair();
        b.set_nonblocking(true).unwrap();
        let mut bufs = [[0u8; 4]; 2];
        let err = b.recv_batch(&mut bufs, &mut vec![]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_failing_message_ends_the_batch() {
        let (a, b) = udp_pair();
        let to = b.local_addr().unwrap();
        // Too long for UDP: EMSGSIZE.
        let huge = vec![0u8; 70_000];
        let msgs = [(&b"ok"[..], to), (&huge[..], to), (&b"never"[..], to)];
        // sendmmsg and the one-by-one fallback agree.
        assert_eq!(a.send_batch(&msgs).unwrap(), 1);
        assert_eq!(a.send_each(&msgs).unwrap(), 1);
        for err in [
            a.send_batch(&msgs[1..]).unwrap_err(),
            a.send_each(&msgs[1..]).unwrap_err(),
        ] {
            assert_eq!(err.raw_os_error(), Some(libc::EMSGSIZE));
        }
        let mut bufs = [[0u8; 8]; 4];
        let mut received = vec![];
        assert_eq!(b.recv_batch(&mut bufs, &mut received).unwrap(), 2);
        assert_eq!((&bufs[0][..2], &bufs[1][..2]), (&b"ok"[..], &b"ok"[..]));
    }

    #[test]
    fn batches_are_cut_to_max_batch() {
        let (a, b) = udp_pair();
        let to = b.local_addr().unwrap();
        let msgs = vec![(&b"x"[..], to); MAX_BATCH + 10];
        assert_eq!(a.send_batch(&msgs).unwrap(), MAX_BATCH);
        assert_eq!(a.send_each(&msgs[..10]).unwrap(), 10);
    }
}
