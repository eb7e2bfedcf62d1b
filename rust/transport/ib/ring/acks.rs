// SPDX-License-Identifier: GPL-2.0

//! Credits and acknowledgements: the send credits the peer grants, the
//! receive buffers we advertise, and the explicit ack frame.

// The rest of `Rings`: ring.rs's types and imports.
use super::*;

/// Send credits (flow control), as upstream's `i_credits`.
pub(super) struct Credits {
    pub(super) enabled: bool,
    /// Sends the peer has room for.
    pub(super) send: u32,
    /// Receive buffers posted and not yet advertised to the peer.
    pub(super) posted: u32,
}

impl Credits {
    /// Takes up to `wanted` send credits and the posted credits to advertise
    /// with them (upstream's `rds_ib_send_grab_credits`): the last send credit
    /// is kept for a send that advertises credits, so neither side can end up
    /// with no credits and nothing to tell the other.
    pub(super) fn grab(&mut self, wanted: u32) -> (u32, u8) {
        if !self.enabled {
            return (wanted, 0);
        }
        let mut avail = self.send;
        if avail > 0 && self.posted == 0 {
            avail -= 1;
        }
        let got = avail.min(wanted);
        self.send -= got;
        let mut advertise = 0;
        if self.posted > 0 && got > 0 {
            advertise = self.posted.min(MAX_ADV_CREDIT);
            self.posted -= advertise;
        }
        (got, advertise as u8)
    }
}

impl Rings {
    /// The explicit ack completed: on success, every request posted before
    /// it did too (RC completes in order), and the ack may release slots held
    /// for rxe (ring/settle.rs).
    pub(in crate::transport::ib) fn ack_completed(&mut self, success: bool) {
        self.ack_in_flight = false;
        self.acks_done += 1;
        if !success {
            return;
        }
        // Signalled requests before the ack completed earlier on this CQ, so
        // only unsignalled ones are left before `ack_covers`.
        while self.send_done < self.ack_covers {
            let i = self.send_done % SEND_SLOTS;
            if !self.send_slots[i].unsignalled {
                break;
            }
            self.send_done += 1;
        }
        // Acks complete in the order they were posted, failed ones included.
        self.settle(Completed::Ack(self.acks_done - 1));
    }

    /// Whether an explicit ack (or credit update) should go out.
    pub(in crate::transport::ib) fn wants_ack(&self) -> bool {
        self.up
            && (self.ack_wanted
                || (self.credits.enabled && self.credits.posted >= CREDIT_UPDATE_AT))
    }

    /// Posts the explicit ack frame if one is wanted and none is in flight.
    pub(in crate::transport::ib) fn send_ack(&mut self, path: &IbPath) -> Result {
        if !self.wants_ack() || self.ack_in_flight {
            return Ok(());
        }
        let (got, advertise) = self.credits.grab(1);
        if got == 0 {
            return Ok(());
        }
        let header = Header {
            ack: self.last_received,
            credit: advertise,
            ..Header::default()
        };
        self.send_headers.write(SEND_SLOTS, &header.to_wire());
        let mut sges = [self.send_headers.sge(SEND_SLOTS, self.lkey)];
        if let Err(e) = self.qp.post_send(path.cqe(TAG_ACK), &mut sges, true) {
            self.credits.send += got;
            self.credits.posted += u32::from(advertise);
            return Err(e);
        }
        self.ack_in_flight = true;
        self.acks_posted += 1;
        self.ack_wanted = false;
        self.ack_sent = self.last_received;
        self.ack_covers = self.send_posted;
        Ok(())
    }

    /// Whether messages received have not been acknowledged to the peer yet
    /// (a one-way stream's last few, below the next ACK_REQUIRED): asks
    /// for an explicit ack and posts it if it can.
    pub(in crate::transport::ib) fn settle_acks(&mut self, path: &IbPath) -> bool {
        if self.last_received == self.ack_sent {
            return false;
        }
        self.ack_wanted = true;
        // The watchdog's next tick tries again if this fails.
        let _ = self.send_ack(path);
        true
    }
}
