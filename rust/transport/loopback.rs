// SPDX-License-Identifier: GPL-2.0

//! The loopback transport: messages between addresses of this host.
//!
//! It is a real transport, not a shortcut: each message goes through the
//! connection's sequenced queue, its header is encoded to the 48-byte wire
//! form and parsed back (checksum included) on the receive side, and it is
//! acknowledged only once the receive path has taken it, as upstream's
//! `rds_loop_xmit` does.

use kernel::{
    fmt,
    prelude::*,
    sync::{
        atomic::{
            AtomicFlag,
            Relaxed, //
        },
        Arc,
    },
    uaccess::UserSliceReader,
};

use super::{
    connections,
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

/// Test knob (debugfs `rrds/loopback_hold`): while set, loopback messages
/// stay queued unsent, as they would on a slow or disconnected link, so the
/// send-buffer, cancel and close paths can be tested without a network.
static HOLD: AtomicFlag = AtomicFlag::new(false);

/// debugfs read of `loopback_hold`.
pub(crate) fn show_hold(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_fmt(fmt!("{}\n", u8::from(HOLD.load(Relaxed))))
}

/// debugfs write of `loopback_hold`: "1" holds, "0" releases and sends
/// everything held.
pub(crate) fn store_hold(reader: &mut UserSliceReader) -> Result {
    let hold = crate::hooks::read_knob(reader)?;
    HOLD.store(hold, Relaxed);
    if !hold {
        if let Some(conns) = connections() {
            conns.xmit_all();
        }
    }
    Ok(())
}

impl Transport for Loopback {
    fn name(&self) -> &'static [u8] {
        b"loopback"
    }

    fn kind(&self) -> i32 {
        TRANS_LOOP
    }

    fn can_send(&self, _conn: &dyn Conn) -> bool {
        !HOLD.load(Relaxed)
    }

    fn xmit(&self, conn: &dyn Conn, header: &Header, message: &Arc<Message>) -> Xmit {
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
