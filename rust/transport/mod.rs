// SPDX-License-Identifier: GPL-2.0

//! Transports: what moves a connection's messages to the peer.

pub(crate) mod ib;
pub(crate) mod loopback;

use kernel::{
    prelude::*,
    sync::{
        aref::ARef,
        Arc,
        SetOnce, //
    },
    task::Task,
};

use crate::{
    ffi::{
        ib_cq::{
            CqPoller,
            CqSpin, //
        },
        net::NetRef, //
    },
    message::{
        Header,
        Message, //
    },
};

/// What identifies a connection: the core's table key, and what a
/// transport connects by.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnKey {
    pub(crate) net: NetRef,
    pub(crate) laddr: [u8; 16],
    pub(crate) faddr: [u8; 16],
    pub(crate) tos: u8,
    pub(crate) scope: u32,
}

/// What RDS_INFO and debugfs report of a connection's queue.
pub(crate) struct ConnSnapshot {
    pub(crate) next_tx_seq: u64,
    pub(crate) next_rx_seq: u64,
    pub(crate) transmitting: bool,
    /// Messages queued, and how many of them the transport holds (unacked).
    pub(crate) queued: usize,
    pub(crate) sent: usize,
}

/// A connection as its transport sees it: the core's ordered, sequenced
/// message stream (`conn::Connection`), which the transport feeds with
/// arrivals and acknowledgements and asks to transmit.
pub(crate) trait Conn: Send + Sync {
    fn key(&self) -> &ConnKey;
    fn transport(&self) -> &'static dyn Transport;
    /// The transport's own state of the connection.
    fn path(&self) -> &Path;
    /// Hands what is queued to the transport while it takes it.
    fn xmit(&self);
    /// A message arrived: the receive path checks and delivers it. Fails
    /// if it could not be taken (the transport must offer it again).
    fn arrived(&self, dir: Direction, header: Header, message: Arc<Message>) -> Result;
    /// The peer sent its congestion map.
    fn peer_cong_map(&self, message: &Message) -> Result;
    /// Our map for the local address, for a link that just came up.
    fn local_cong_message(&self) -> Option<Arc<Message>>;
    /// The peer has everything up to `seq`.
    fn drop_acked(&self, seq: u64);
    /// `message`, handed to `xmit`, was not sent after all.
    fn release_unsent(&self, message: &Arc<Message>);
    /// The link went: what it had not had acknowledged (and `also`) is sent
    /// again on the next.
    fn reset_for_retransmit(&self, also: Option<u64>);
    /// How many times [`Self::reset_for_retransmit`] has run.
    fn resets(&self) -> u64;
    /// The peer lost its state: what it was handed goes.
    fn peer_restarted(&self);
    fn link_changed(&self, change: LinkChange);
    /// The next sequence numbers to send and to receive.
    fn sequences(&self) -> (u64, u64);
    /// Whether anything waits to be sent or acknowledged.
    fn has_queued(&self) -> bool;
    /// Whether messages wait to be handed to the transport.
    fn has_unsent(&self) -> bool;
    /// A task that sent a message still queued (acknowledged or not), for
    /// which `usable` holds: the oldest such message's first. Process context.
    fn queued_sender(&self, usable: &dyn Fn(&Task) -> bool) -> Option<ARef<Task>>;
    fn snapshot(&self) -> ConnSnapshot;
}

/// The core's connection table, as transports reach it: plugged in once,
/// at module init, by the core ([`set_connections`]), so that this layer
/// never names the core's types.
pub(crate) trait Connections: Sync {
    /// The connection for `key`, created on first use (a peer connected to
    /// us), without becoming one of its users.
    fn find_or_create(
        &self,
        key: ConnKey,
        transport: &'static dyn Transport,
    ) -> Result<Arc<dyn Conn>>;
    /// Forgets `net`'s connections that have a link (its last listener
    /// went), keeping their sequence numbers for the next connection.
    fn forget_links(&self, net: NetRef);
    /// Transmits what is queued on every connection (test hook
    /// `loopback_hold` cleared).
    #[cfg(rrds_test_hooks)]
    fn xmit_all(&self);
    /// Every connection, for walks that may sleep.
    fn snapshot(&self) -> KVec<Arc<dyn Conn>>;
}

static CONNECTIONS: SetOnce<&'static dyn Connections> = SetOnce::new();

/// Plugs the core's connection table in. Call once, in module init, before
/// any transport runs.
pub(crate) fn set_connections(table: &'static dyn Connections) {
    CONNECTIONS.populate(table);
}

/// The core's connection table; `None` before module init plugged it in.
pub(crate) fn connections() -> Option<&'static dyn Connections> {
    CONNECTIONS.as_ref().copied()
}

/// A transport's own state of one connection (upstream's
/// `cp_transport_data`): IB's path, none on loopback. Opaque to the core.
#[derive(Clone, Default)]
pub(crate) struct Path(Option<Arc<ib::IbPath>>);

impl Path {
    /// The IB path, for the IB transport.
    fn ib(&self) -> Option<&Arc<ib::IbPath>> {
        self.0.as_ref()
    }

    /// Ties the path to its connection (once, when the connection is
    /// created, under the core's table lock).
    pub(crate) fn bind(&self, conn: Arc<dyn Conn>) {
        if let Some(path) = &self.0 {
            path.bind(conn);
        }
    }

    /// Whether the connection has a link to a peer: it stays while its
    /// namespace has listeners, users or not, for the peer may use it; an
    /// IB connection (RDS_INFO_IB_CONNECTIONS lists those).
    pub(crate) fn has_link(&self) -> bool {
        self.0.is_some()
    }

    /// Tears the link down (the connection is forgotten) and returns what
    /// the next connection with the same key takes up ([`Self::resume`]).
    pub(crate) fn forget(&self) -> Option<Incarnations> {
        let path = self.0.as_ref()?;
        crate::hooks::FORGET_HOLD.pause();
        if path.kill() {
            ib::adopt_orphan(path.clone());
        }
        Some(path.incarnations())
    }

    /// Takes up what a forgotten connection with this key left, before the
    /// path is bound.
    pub(crate) fn resume(&self, incarnations: Incarnations) {
        if let Some(path) = &self.0 {
            path.resume_incarnations(incarnations);
        }
    }

    /// The link's state for RDS_INFO (loopback is always up).
    pub(crate) fn link_state(&self) -> LinkState {
        self.0.as_ref().map_or(LinkState::Up, |p| p.link_state())
    }

    /// RDS_INFO_IB_CONNECTIONS's record of an IB connection: `None` on
    /// loopback, and while the link is not up.
    pub(crate) fn ib_info(&self) -> Option<ib::IbInfo> {
        self.0.as_ref()?.info()
    }

    /// What busy-polls the arrivals of the connection's current link (its
    /// receive CQ); `None` on loopback and without a link.
    pub(crate) fn busy_poller(&self) -> Option<BusyPoller> {
        self.0.as_ref()?.busy_poller().map(BusyPoller)
    }

    /// Sends our congestion map, in wire form, to the peer (loopback has
    /// none: its receivers are our own sockets).
    pub(crate) fn send_cong_map(&self, map: Arc<Message>) {
        if let Some(path) = &self.0 {
            path.send_cong_map(map);
        }
    }
}

/// What a socket busy-polls to take a connection's arrivals sooner than the
/// completion's work item would (`SO_BUSY_POLL`; upstream sockets keep the
/// NAPI id their last packet came through for the same purpose).
#[derive(Clone)]
pub(crate) struct BusyPoller(Arc<CqPoller>);

impl BusyPoller {
    /// Starts polling the link's receive completions: the returned spin
    /// hands them to the transport, which delivers what they complete, and
    /// holds the CQ's work item off until it is dropped. Process context,
    /// no socket lock held while it polls.
    pub(crate) fn spin(&self) -> CqSpin {
        self.0.spin()
    }

    /// Whether both poll the same CQ.
    pub(crate) fn same_as(&self, other: &BusyPoller) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Ours and the peer's incarnation of a connection: together with its
/// sequence numbers, what makes a new connection with the same key the old
/// one to the peer (an IB path keeps them; see the core's `conn::table::Resume`).
#[derive(Clone, Copy)]
pub(crate) struct Incarnations {
    /// Ours (never 0): resumed with our sequence numbers, so the peer sees
    /// no restart.
    own: u32,
    /// The peer's on the last link (0: none seen).
    peer: u32,
}

/// Which way a message crossed its connection.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Loopback: the sender's own connection, from its local address to its
    /// remote one.
    Loopback,
    /// From the peer: the receiver's connection, from its remote address to
    /// its local one.
    FromPeer,
}

/// What became of a message handed to [`Transport::xmit`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Xmit {
    /// Handed over whole; the transport reports its acknowledgement.
    Taken,
    /// Not (wholly) handed over for want of resources or link: the transport
    /// calls `Connection::xmit` when it can go on, and gets it again.
    Blocked,
}

/// Where a connection's link is, as RDS_INFO reports it (upstream's
/// `RDS_INFO_CONNECTION_FLAG_CONNECTING` / `_CONNECTED`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkState {
    Down,
    Connecting,
    Up,
}

/// Why a connection's link went down (`RRDS_CONN_REASON_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum DownReason {
    /// The peer disconnected, or refused the link we thought up.
    PeerClosed = 1,
    /// A completion error, a stalled link, a failed rdma_cm step.
    LinkError = 2,
    /// Its RDMA device was removed.
    DeviceRemoved = 3,
    /// It carried nothing for the namespace's idle timeout.
    Idle = 4,
    /// The local address moved to another device.
    AddrChange = 5,
}

/// A change of a connection's link, reported to the sockets that monitor
/// connections (`RRDS_CONN_MONITOR`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LinkChange {
    Up,
    /// An up link went; with `retransmit`, messages it had not had
    /// acknowledged are sent again on the next one.
    Down {
        reason: DownReason,
        retransmit: bool,
    },
}

/// A transport.
pub(crate) trait Transport: Sync {
    /// The name RDS_INFO connection records carry ("loopback", ...).
    fn name(&self) -> &'static [u8];

    /// The `RDS_TRANS_*` number `SO_RDS_TRANSPORT` reports.
    fn kind(&self) -> i32;

    /// The transport's own state for a new connection (IB's path).
    fn new_path(&self, _key: &ConnKey) -> Result<Path> {
        Ok(Path::default())
    }

    /// Whether messages may be handed to `xmit` now; while not, they stay
    /// queued (unsent) on their connection (and IB starts connecting).
    fn can_send(&self, _conn: &dyn Conn) -> bool {
        true
    }

    /// Sends one message. Called by one thread at a time per connection, in
    /// sequence order, in process context. The transport reports delivery
    /// with [`Conn::drop_acked`].
    ///
    /// `resets` is [`Conn::resets`] as of when the message left the queue. A
    /// transport whose link can go must refuse (`Blocked`) a message whose
    /// connection was reset since, checking under the lock its reset is
    /// ordered with: the message was put back, flagged, to go after those
    /// sent before it, and sent now it would overtake them; a peer taking
    /// it first would drop them as old retransmissions.
    fn xmit(&self, conn: &dyn Conn, resets: u64, header: &Header, message: &Arc<Message>) -> Xmit;
}
