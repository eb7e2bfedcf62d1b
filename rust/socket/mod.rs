// SPDX-License-Identifier: GPL-2.0

//! The RDS socket family (PF_RDS): sockets, the bind table, send and receive.
//!
//! ABI and errnos follow upstream net/rds (af_rds.c, bind.c, send.c, recv.c);
//! see Documentation/userspace-api.rst for what is implemented so far.

mod addr;
pub(crate) mod bind;

use kernel::{
    new_mutex, new_spinlock,
    prelude::*,
    sync::{
        poll::PollCondVar,
        Arc,
        ArcBorrow,
        CondVarTimeoutResult,
        Mutex,
        SpinLock, //
    },
    task::MAX_SCHEDULE_TIMEOUT,
    uaccess::UserSlice,
};

use crate::{
    errno,
    ffi::{
        bindings,
        net::{
            FamilyRegistration,
            FamilyTables,
            GetOptResult,
            MsgHdr,
            NetRef,
            PollRequest,
            Sock,
            SockOptValue,
            SocketFamily, //
        },
    },
    message::{
        Header,
        Message,
        MAX_MSG_SIZE, //
    },
};
use addr::{
    Endpoint,
    Purpose, //
};

const SOL_RDS: i32 = bindings::SOL_RDS as i32;
/// `RDS_TRANS_NONE` as getsockopt reports it.
const TRANS_NONE: i32 = -1;
/// Messages to port 0 are pings, answered by the RDS stack itself.
const PING_PORT: u16 = 0;
/// The loopback transport's type number (upstream's internal `RDS_TRANS_LOOP`).
const TRANS_LOOP: i32 = 3;

/// `EPOLL*` bits (uapi/linux/eventpoll.h; bindgen cannot read their `__force` casts).
mod poll_bits {
    pub(super) const IN: u32 = 0x0001;
    pub(super) const OUT: u32 = 0x0004;
    pub(super) const RDNORM: u32 = 0x0040;
    pub(super) const WRNORM: u32 = 0x0100;
}

/// The PF_RDS family.
pub(crate) struct RdsFamily;

static TABLES: FamilyTables<RdsFamily> = FamilyTables::new(
    bindings::PF_RDS as i32,
    b"RDS",
    crate::THIS_MODULE.as_ptr().cast(),
);

/// Registers PF_RDS; fails with `EEXIST` if another RDS (the in-tree `rds`) holds it.
pub(crate) fn register() -> Result<FamilyRegistration<RdsFamily>> {
    TABLES.register().inspect_err(|e| {
        if *e == EEXIST {
            pr_err!("PF_RDS is already registered: unload the in-tree rds module first\n");
        }
    })
}

/// A message waiting in a receive queue.
struct Incoming {
    from: Endpoint,
    message: Arc<Message>,
}

/// What the socket lock (`state`) protects.
#[derive(Default)]
struct SockState {
    bound: Option<Endpoint>,
    /// The default destination set by `connect()`.
    peer: Option<Endpoint>,
    recverr: bool,
    /// Type of service of the socket's connections (`SIOCRDSSETTOS`).
    tos: u8,
}

/// The receive queue and its accounting.
#[derive(Default)]
struct RecvQueue {
    messages: KVec<Incoming>,
    bytes: usize,
}

/// One RDS socket.
///
/// Lock order: `state` before `rx`; `rx` is a spinlock because deliveries
/// will come from transport completion context.
#[pin_data]
pub(crate) struct RdsSock {
    net: NetRef,
    #[pin]
    state: Mutex<SockState>,
    #[pin]
    rx: SpinLock<RecvQueue>,
    /// Bytes of sent messages not yet acknowledged by the receiving end.
    #[pin]
    tx_bytes: SpinLock<usize>,
    /// Woken when a message arrives or send space frees up; poll waits here.
    #[pin]
    wait: PollCondVar,
}

impl RdsSock {
    fn endpoint(&self) -> Option<Endpoint> {
        self.state.lock().bound
    }

    /// Queues an incoming message (delivery context: may not sleep).
    fn deliver(&self, from: Endpoint, message: Arc<Message>) -> Result {
        let len = message.payload.len();
        let mut rx = self.rx.lock();
        rx.messages.push(Incoming { from, message }, GFP_ATOMIC)?;
        rx.bytes += len;
        drop(rx);
        self.wait.notify_all();
        Ok(())
    }
}

impl SocketFamily for RdsFamily {
    type State = RdsSock;

    fn tables() -> &'static FamilyTables<Self> {
        &TABLES
    }

    fn create(net: NetRef, sock_type: i32, protocol: i32) -> Result<Arc<RdsSock>> {
        if sock_type != bindings::sock_type_SOCK_SEQPACKET as i32 || protocol != 0 {
            return Err(errno::esocktnosupport());
        }
        Arc::pin_init(
            try_pin_init!(RdsSock {
                net,
                state <- new_mutex!(SockState::default()),
                rx <- new_spinlock!(RecvQueue::default()),
                tx_bytes <- new_spinlock!(0),
                wait <- kernel::new_poll_condvar!("rrds_sock_wait"),
            }),
            GFP_KERNEL,
        )
    }

    fn release(state: Arc<RdsSock>, _sk: &Sock) {
        // Unbind first: no new deliveries after this. Queued messages go with `state`.
        if let Some(ep) = state.state.lock().bound.take() {
            bind::remove(state.net, &ep);
        }
    }

    fn bind(state: ArcBorrow<'_, RdsSock>, _sk: &Sock, raw: &[u8]) -> Result {
        let mut ep = Endpoint::parse(raw, Purpose::Bind)?;
        let mut s = state.state.lock();
        if s.bound.is_some() {
            return Err(EINVAL);
        }
        // Until the IB transport lands, loopback addresses are the only ones served.
        if !ep.is_loopback() {
            return Err(errno::eaddrnotavail());
        }
        ep.port = bind::add(state, ep)?;
        s.bound = Some(ep);
        Ok(())
    }

    fn connect(state: &RdsSock, _sk: &Sock, raw: &[u8]) -> Result {
        let ep = Endpoint::parse(raw, Purpose::Connect)?;
        state.state.lock().peer = Some(ep);
        Ok(())
    }

    fn getname(state: &RdsSock, _sk: &Sock, peer: bool, out: &mut [u8; 28]) -> Result<usize> {
        let s = state.state.lock();
        if peer {
            return Ok(s.peer.ok_or_else(errno::enotconn)?.write_sockaddr(out));
        }
        Ok(match (s.bound, s.peer) {
            (Some(ep), _) => ep.write_sockaddr(out),
            // Unbound: an all-zero address of the peer's family, as upstream.
            (None, Some(peer)) => {
                let len = peer.write_sockaddr(out);
                out[2..].fill(0);
                len
            }
            (None, None) => {
                *out = [0; 28];
                16
            }
        })
    }

    fn poll(state: &RdsSock, sk: &Sock, req: &PollRequest<'_>) -> u32 {
        req.wait_on(&state.wait);
        let mut mask = 0;
        if !state.rx.lock().messages.is_empty() {
            mask |= poll_bits::IN | poll_bits::RDNORM;
        }
        if *state.tx_bytes.lock() < sk.sndbuf() / 2 {
            mask |= poll_bits::OUT | poll_bits::WRNORM;
        }
        mask
    }

    fn ioctl(state: &RdsSock, _sk: &Sock, cmd: u32, arg: usize) -> Result<i32> {
        match cmd {
            bindings::SIOCRDSGETTOS => {
                let tos = state.state.lock().tos;
                UserSlice::new(UserPtr::from_addr(arg), 1)
                    .writer()
                    .write(&tos)?;
                Ok(0)
            }
            // Setting a TOS needs a transport that maps it (IB); upstream answers
            // ENOIOCTLCMD (ENOTTY to the caller) for loopback and unbound sockets.
            _ => Err(ENOIOCTLCMD),
        }
    }

    fn setsockopt(
        state: &RdsSock,
        sk: &Sock,
        level: i32,
        name: i32,
        value: SockOptValue,
    ) -> Result {
        if level != SOL_RDS {
            return Err(errno::enoprotoopt());
        }
        sk.locked(|| match name as u32 {
            bindings::RDS_RECVERR => {
                if value.len() < 4 {
                    return Err(EINVAL);
                }
                let v = i32::from_ne_bytes(value.read::<4>()?);
                state.state.lock().recverr = v != 0;
                Ok(())
            }
            bindings::SO_RDS_TRANSPORT => {
                // Every bound socket already has a transport (loopback, for now).
                if state.endpoint().is_some() {
                    return Err(errno::eopnotsupp());
                }
                if value.len() != 4 {
                    return Err(EINVAL);
                }
                let t = i32::from_ne_bytes(value.read::<4>()?);
                if !(0..3).contains(&t) {
                    return Err(EINVAL);
                }
                // IB (0) and TCP (2) are not available yet; GAP (1) never is.
                Err(errno::enoprotoopt())
            }
            _ => Err(errno::enoprotoopt()),
        })
    }

    fn getsockopt(
        state: &RdsSock,
        _sk: &Sock,
        level: i32,
        name: i32,
        value: UserSlice,
        len: usize,
    ) -> Result<GetOptResult> {
        if level != SOL_RDS {
            return Err(errno::enoprotoopt());
        }
        let v: i32 = match name as u32 {
            bindings::RDS_RECVERR => i32::from(state.state.lock().recverr),
            bindings::SO_RDS_TRANSPORT => match state.endpoint() {
                Some(_) => TRANS_LOOP,
                None => TRANS_NONE,
            },
            _ => return Err(errno::enoprotoopt()),
        };
        if len < 4 {
            return Err(EINVAL);
        }
        value.writer().write(&v)?;
        Ok(GetOptResult { ret: 0, len: 4 })
    }

    fn sendmsg(state: &RdsSock, sk: &Sock, msg: &mut MsgHdr, len: usize) -> Result<usize> {
        let flags = msg.flags();
        if flags & !(bindings::MSG_DONTWAIT | bindings::MSG_CMSG_COMPAT | bindings::MSG_ZEROCOPY)
            != 0
        {
            return Err(errno::eopnotsupp());
        }
        let named = if msg.name().is_empty() {
            None
        } else {
            Some(Endpoint::parse(msg.name(), Purpose::SendTo)?)
        };
        let (from, to) = {
            let s = state.state.lock();
            let from = s.bound.ok_or_else(errno::enotconn)?;
            let to = match named {
                Some(to) => {
                    if to.is_v4() != from.is_v4() {
                        return Err(errno::eopnotsupp());
                    }
                    to
                }
                None => s.peer.ok_or_else(errno::enotconn)?,
            };
            (from, to)
        };
        if len > MAX_MSG_SIZE || len > sk.sndbuf() / 2 {
            return Err(EMSGSIZE);
        }
        let mut payload = KVVec::with_capacity(len, GFP_KERNEL)?;
        payload.resize(len, 0, GFP_KERNEL)?;
        msg.copy_from_user(&mut payload)?;
        let message = Arc::new(
            Message {
                header: Header {
                    len: len as u32,
                    sport: from.port,
                    dport: to.port,
                    ..Header::default()
                },
                payload,
            },
            GFP_KERNEL,
        )?;
        // Loopback: the receiver is in this namespace; deliver now. A message to a
        // port nobody is bound to is dropped, as on the wire.
        if to.port == PING_PORT {
            // rds-ping: the destination's RDS answers with an empty message from port 0
            // and consumes the ping (upstream rds_send_pong).
            let pong = Arc::new(
                Message {
                    header: Header {
                        dport: from.port,
                        ..Header::default()
                    },
                    payload: KVVec::new(),
                },
                GFP_KERNEL,
            )?;
            if let Some(pinger) = bind::find(state.net, &from) {
                pinger.deliver(to, pong)?;
            }
        } else if let Some(receiver) = bind::find(state.net, &to) {
            receiver.deliver(from, message)?;
        }
        Ok(len)
    }

    fn recvmsg(
        state: &RdsSock,
        sk: &Sock,
        msg: &mut MsgHdr,
        len: usize,
        flags: i32,
    ) -> Result<usize> {
        let flags = flags as u32;
        if flags & bindings::MSG_OOB != 0 {
            return Ok(0);
        }
        let peek = flags & bindings::MSG_PEEK != 0;
        let mut timeo = if flags & bindings::MSG_DONTWAIT != 0 {
            0
        } else {
            sk.rcvtimeo()
        };
        let mut rx = state.rx.lock();
        while rx.messages.is_empty() {
            if timeo == 0 {
                return Err(EAGAIN);
            }
            let wait = if timeo == MAX_SCHEDULE_TIMEOUT {
                c_ulong::MAX
            } else {
                timeo as c_ulong
            };
            match state.wait.wait_interruptible_timeout(&mut rx, wait) {
                CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
                CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
                CondVarTimeoutResult::Woken { jiffies } => {
                    if timeo != MAX_SCHEDULE_TIMEOUT {
                        timeo = jiffies as isize;
                    }
                }
            }
        }
        let (from, message) = {
            let head = &rx.messages[0];
            // The source port is the one the header carries (a pong comes from port 0).
            let from = Endpoint {
                port: head.message.header.sport,
                ..head.from
            };
            (from, head.message.clone())
        };
        if !peek {
            rx.bytes -= message.payload.len();
            rx.messages.remove(0).map_err(|_| EINVAL)?;
        }
        drop(rx);
        let total = message.payload.len();
        let copied = total.min(len);
        msg.copy_to_user(&message.payload[..copied])?;
        if copied < total {
            msg.set_truncated();
        }
        let mut name = [0u8; 28];
        let name_len = from.write_sockaddr(&mut name);
        msg.set_name(&name[..name_len]);
        Ok(if flags & bindings::MSG_TRUNC != 0 {
            total
        } else {
            copied
        })
    }
}
