// SPDX-License-Identifier: GPL-2.0

//! Transports: what moves a connection's messages to the peer.

pub(crate) mod loopback;

use kernel::{
    prelude::*,
    sync::Arc, //
};

use crate::{
    conn::Connection,
    message::{
        Header,
        Message, //
    },
};

/// A transport.
pub(crate) trait Transport: Sync {
    /// The name RDS_INFO connection records carry ("loopback", ...).
    fn name(&self) -> &'static [u8];

    /// The `RDS_TRANS_*` number `SO_RDS_TRANSPORT` reports.
    fn kind(&self) -> i32;

    /// Whether messages may be handed to `xmit` now; while not, they stay
    /// queued (unsent) on their connection.
    fn can_send(&self) -> bool {
        true
    }

    /// Sends one message. Called by one thread at a time per connection, in
    /// sequence order, in process context. The transport reports delivery
    /// with `Connection::drop_acked`.
    fn xmit(&self, conn: &Connection, header: &Header, message: &Arc<Message>) -> Result;
}
