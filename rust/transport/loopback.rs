// SPDX-License-Identifier: GPL-2.0

//! The loopback transport: messages between addresses of this host.
//!
//! It is a real transport, not a shortcut: each message goes through the
//! connection's sequenced queue, its header is encoded to the 48-byte wire
//! form and parsed back (checksum included) on the receive side, and it is
//! acknowledged only once the receive path has taken it, as upstream's
//! `rds_loop_xmit` does.

use kernel::sync::Arc;

#[cfg(rrds_test_hooks)]
use super::connections;
use super::{
    Conn,
    Direction,
    Transport,
    Xmit, //
};
use crate::{
    message::{
        Header,
        Message, //
    },
    stats::{
        self,
        Stat, //
    },
};

/// Upstream's internal `RDS_TRANS_LOOP`, which `SO_RDS_TRANSPORT` reports.
pub(crate) const TRANS_LOOP: i32 = 3;

pub(crate) struct Loopback;

pub(crate) static LOOPBACK: Loopback = Loopback;

/// Test hook `rrds/loopback_hold` cleared: sends everything it held.
#[cfg(rrds_test_hooks)]
pub(crate) fn send_held() {
    if let Some(conns) = connections() {
        conns.xmit_all();
    }
}

impl Transport for Loopback {
    fn name(&self) -> &'static [u8] {
        b"loopback"
    }

    fn kind(&self) -> i32 {
        TRANS_LOOP
    }

    fn can_send(&self, _conn: &dyn Conn) -> bool {
        !crate::hooks::LOOPBACK_HOLD.is_set()
    }

    // A loopback connection is never reset: `resets` cannot change.
    fn xmit(&self, conn: &dyn Conn, _resets: u64, header: &Header, message: &Arc<Message>) -> Xmit {
        let wire = header.to_wire();
        // The receiving side of a loopback connection is the same connection:
        // from its local address to its remote one.
        match Header::from_wire(&wire) {
            Some(received) => {
                if conn
                    .arrived(Direction::Loopback, received, message.clone())
                    .is_err()
                {
                    // The receiver could not take it (full, or no memory): it
                    // stays queued, and the watchdog tries again.
                    stats::inc(Stat::RecvDelayedRetry);
                    return Xmit::Blocked;
                }
            }
            None => stats::inc(Stat::RecvDropBadChecksum),
        }
        conn.drop_acked(header.sequence);
        Xmit::Taken
    }
}
