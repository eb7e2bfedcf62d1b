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
