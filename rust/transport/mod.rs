// SPDX-License-Identifier: GPL-2.0

//! Transports: what moves a connection's messages to the peer.

pub(crate) mod ib;
pub(crate) mod loopback;

use kernel::{
    prelude::*,
    sync::Arc, //
};

use crate::{
    conn::{
        ConnKey,
        Connection, //
    },
    message::{
        Header,
        Message, //
    },
};

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
    fn new_path(&self, _key: &ConnKey) -> Result<Option<Arc<ib::IbPath>>> {
        Ok(None)
    }

    /// Whether messages may be handed to `xmit` now; while not, they stay
    /// queued (unsent) on their connection (and IB starts connecting).
    fn can_send(&self, _conn: &Connection) -> bool {
        true
    }

    /// Sends one message. Called by one thread at a time per connection, in
    /// sequence order, in process context. The transport reports delivery
    /// with `Connection::drop_acked`.
    fn xmit(&self, conn: &Connection, header: &Header, message: &Arc<Message>) -> Xmit;
}
