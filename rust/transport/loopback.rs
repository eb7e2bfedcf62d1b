// SPDX-License-Identifier: GPL-2.0

//! The loopback transport: messages between addresses of this host.
//!
//! It is a real transport, not a shortcut: each message goes through the
//! connection's sequenced queue, its header is encoded to the 48-byte wire
//! form and parsed back (checksum included) on the receive side, and it is
//! acknowledged only once the receive path has taken it, as upstream's
//! `rds_loop_xmit` does.

use kernel::{
    prelude::*,
    sync::Arc, //
};

use super::Transport;
use crate::{
    conn::Connection,
    message::{
        Header,
        Message, //
    },
    socket,
};

/// Upstream's internal `RDS_TRANS_LOOP`, which `SO_RDS_TRANSPORT` reports.
pub(crate) const TRANS_LOOP: i32 = 3;

pub(crate) struct Loopback;

pub(crate) static LOOPBACK: Loopback = Loopback;

impl Transport for Loopback {
    fn name(&self) -> &'static [u8] {
        b"loopback"
    }

    fn kind(&self) -> i32 {
        TRANS_LOOP
    }

    fn xmit(&self, conn: &Connection, header: &Header, message: &Arc<Message>) -> Result {
        let wire = header.to_wire();
        // The receiving side of a loopback connection is the same connection:
        // from its local address to its remote one.
        socket::recv::incoming(conn, &wire, message.clone());
        conn.drop_acked(header.sequence);
        Ok(())
    }
}
