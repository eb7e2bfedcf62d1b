// SPDX-License-Identifier: GPL-2.0

//! The send side of a link: messages into send slots as fragments (two
//! pages towards an rrds peer), partial messages the link finishes on its
//! own, and send completions.

// The rest of `Rings`: ring.rs's types and imports.
use super::*;

impl Rings {
    /// Whether a send slot is free. If completed slots held for rxe fill the
    /// ring, asks for an explicit ack: its completion releases them.
    pub(super) fn has_send_slot(&mut self, path: &IbPath) -> bool {
        if self.send_posted - self.send_released < SEND_SLOTS {
            return true;
        }
        if self.settling() != 0 {
            self.ack_wanted = true;
            // A completion or the watchdog tries again if this fails.
            let _ = self.send_ack(path);
        }
        false
    }

    /// Posts what it can of `header`/`message` (after finishing a message it
    /// had started earlier): `true` once all of `message` is posted.
    pub(in crate::transport::ib) fn xmit(
        &mut self,
        path: &IbPath,
        header: &Header,
        message: &Arc<Message>,
    ) -> bool {
        if !self.up {
            return false;
        }
        let mine = self.partial.as_ref().is_some_and(|p| {
            p.header.sequence == header.sequence && Arc::ptr_eq(&p.message, message)
        });
        if mine {
            return self.finish_own(path);
        }
        if self.finished.take() == Some((header.sequence, Arc::as_ptr(message))) {
            // Posted whole by `kick` since it was last handed to us.
            return true;
        }
        // A message begun earlier (cancelled since) and congestion updates go first.
        if !self.kick(path) {
            return false;
        }
        // A message not packed follows the pack on the wire; before its operation
        // is claimed below, which a retry would not claim again.
        let packable = self.peer_packs
            && message.rdma().is_none()
            && message.len() <= PACK_MAX_LEN
            && (self.pack.is_some()
                || (self.send_posted - self.send_done >= PACK_WHEN_OUTSTANDING
                    && self.signalled_pending > 0));
        if !packable && !self.post_pack(path) {
            return false;
        }
        // The message's operation is claimed here, once: a retry after a full
        // ring continues the partial message above. One posted on a link that
        // failed since, or cancelled (the connection normally drops such a
        // message before it gets here), never runs twice, and its message
        // never goes without it (upstream never retransmits one either).
        if let Some(op) = message.rdma() {
            if !op.start() {
                op.dropped();
                return true;
            }
            // Its READ sinks were registered on another device (the bound
            // address moved there since): not postable here.
            if !op.usable_on(self.device) {
                op.dropped();
                return true;
            }
        }
        let mut header = *header;
        // A silent operation's message posts its RDMA and no fragment.
        let silent = message
            .rdma()
            .is_some_and(|op| op.sends_nothing(message.len()));
        // Upstream's rule: ACK_REQUIRED every few messages, so a one-way stream
        // is acknowledged without reverse traffic.
        if !silent {
            if self.until_ack_required == 0 || header.flags & flags::RETRANSMITTED != 0 {
                header.flags |= flags::ACK_REQUIRED;
            }
            if header.flags & flags::ACK_REQUIRED != 0 {
                stats::inc(Stat::SendAckRequired);
                self.until_ack_required = ACK_EVERY;
            } else {
                self.until_ack_required -= 1;
            }
        }
        if packable {
            return self.pack_message(path, &header, message);
        }
        self.partial = Some(Partial {
            header,
            message: message.clone(),
            next: 0,
            count: if silent {
                0
            } else {
                self.frame_count(message.len())
            },
            rdma_next: 0,
        });
        self.finish_own(path)
    }

    /// Frames a message of `len` bytes takes on this link (one if empty).
    fn frame_count(&self, len: usize) -> usize {
        len.div_ceil(self.frame_len).max(1)
    }

    /// Continues the caller's own message: finished here, it is no `kick`'s.
    fn finish_own(&mut self, path: &IbPath) -> bool {
        let done = self.continue_partial(path);
        if done {
            self.finished = None;
        }
        done
    }

    /// Finishes what was begun and sends a pending congestion map: `true`
    /// when nothing is left, so a new message may start.
    pub(in crate::transport::ib) fn kick(&mut self, path: &IbPath) -> bool {
        if !self.up {
            return false;
        }
        loop {
            if self.partial.is_some() {
                if !self.continue_partial(path) {
                    return false;
                }
                continue;
            }
            let Some(map) = self.cong_pending.take() else {
                return true;
            };
            // Upstream's form: flags exactly CONG_BITMAP, sequence and ports 0,
            // never acknowledged or retransmitted.
            let header = Header {
                len: map.len() as u32,
                flags: FLAG_CONG_BITMAP,
                ..Header::default()
            };
            self.partial = Some(Partial {
                header,
                count: self.frame_count(map.len()),
                message: map,
                next: 0,
                rdma_next: 0,
            });
        }
    }

    /// Posts fragments of the partial message while slots and credits last;
    /// `true` when it is wholly posted.
    fn continue_partial(&mut self, path: &IbPath) -> bool {
        loop {
            let Some(p) = &self.partial else {
                return true;
            };
            if p.next == 0 && !self.continue_rdma(path) {
                return false;
            }
            let Some(p) = &self.partial else {
                return true;
            };
            if p.next == p.count {
                if p.header.flags != FLAG_CONG_BITMAP {
                    self.finished = Some((p.header.sequence, Arc::as_ptr(&p.message)));
                }
                self.partial = None;
                return true;
            }
            if !self.has_send_slot(path) {
                return false;
            }
            let Some(p) = &self.partial else {
                return true;
            };
            let (got, advertise) = self.credits.grab(1);
            if got == 0 {
                return false;
            }
            let (mut header, message, index, last) =
                (p.header, p.message.clone(), p.next, p.next + 1 == p.count);
            header.ack = self.last_received;
            header.credit = advertise;
            if self
                .post_fragment(path, &header, message, index, last)
                .is_err()
            {
                // Give the credits back; a completion or the watchdog tries again
                // (`IbPath::watchdog_tick`).
                self.credits.send += got;
                self.credits.posted += u32::from(advertise);
                return false;
            }
            if let Some(p) = &mut self.partial {
                p.next += 1;
            }
            // The ack rides on the data.
            self.ack_wanted = false;
            self.ack_sent = header.ack;
        }
    }

    fn post_fragment(
        &mut self,
        path: &IbPath,
        header: &Header,
        message: Arc<Message>,
        index: usize,
        last: bool,
    ) -> Result {
        let i = self.send_posted % SEND_SLOTS;
        self.send_headers.write(i, &header.to_wire());
        let mut sges = [bindings::ib_sge::default(); 1 + FRAME_PAGES];
        sges[0] = self.send_headers.sge(i, self.lkey);
        let offset = index * self.frame_len;
        let len = message.len().saturating_sub(offset).min(self.frame_len);
        let mut slot = SendSlot::default();
        // The frame's pages, each mapped for the device: whole pages but the
        // message's last.
        // At most `FRAME_PAGES`: `len` is at most `frame_len`.
        let count = len.div_ceil(PAGE_SIZE).min(FRAME_PAGES);
        {
            let mut pages = message.pages().skip(offset / PAGE_SIZE);
            let slots = slot.maps.iter_mut().zip(sges[1..].iter_mut());
            for (n, (map_slot, sge_slot)) in slots.take(count).enumerate() {
                let page = pages.next().ok_or(EINVAL)?;
                let map = DmaMapping::map(self.device, page, DmaDirection::ToDevice)?;
                let bytes = (len - n * PAGE_SIZE).min(PAGE_SIZE);
                *sge_slot = sge(map.addr(), bytes, self.lkey);
                *map_slot = Some(map);
            }
        }
        // The first fragment waits for the operation when it must (`fenced`).
        let fence = index == 0 && message.rdma().is_some_and(|op| op.fenced());
        // A message with an operation is released by its completion (its last
        // reference may unpin user pages: never under the ring lock), and a
        // congestion map, which no ack covers, as well.
        let signalled = message.rdma().is_some()
            || header.flags == FLAG_CONG_BITMAP
            || self.send_posted - self.send_done >= UNSIGNALLED_BELOW;
        self.qp.post_send_fenced(
            path.cqe(TAG_SEND),
            &mut sges[..1 + count],
            last,
            fence,
            signalled,
        )?;
        slot.unsignalled = !signalled;
        // Messages' frames only: congestion maps come and go with links.
        if len > PAGE_SIZE && header.flags != FLAG_CONG_BITMAP {
            stats::inc(Stat::IbTxLargeFrames);
        }
        slot.message = Some(message);
        self.send_slots[i] = slot;
        self.posted(signalled);
        Ok(())
    }

    /// A request went into the next send slot.
    pub(super) fn posted(&mut self, signalled: bool) {
        self.send_posted += 1;
        if signalled {
            self.signalled_pending += 1;
        }
    }

    /// A send completed: it and the unsignalled slots before it, which
    /// completed silently, are done; on success they are held until rxe
    /// cannot read them again (ring/settle.rs). Returns the completed slot's
    /// message (with its RDMA role), to be dropped by the caller outside
    /// the lock.
    ///
    /// A failed or flushed request completes whether it was signalled or not
    /// (rxe and siw both post its completion), so an error completes one
    /// slot: the oldest, which may be a request of the same operation that
    /// succeeded silently before the failed one. The operation's outcome is
    /// the error either way, and the link is torn down with the slots left.
    pub(in crate::transport::ib) fn send_completed(&mut self, success: bool) -> SendDone {
        loop {
            if self.send_done == self.send_posted {
                return SendDone::default();
            }
            let i = self.send_done % SEND_SLOTS;
            self.send_done += 1;
            let slot = &self.send_slots[i];
            if success && slot.unsignalled {
                continue;
            }
            if !slot.unsignalled {
                self.signalled_pending = self.signalled_pending.saturating_sub(1);
            }
            let completed = slot.message.clone().map(|m| (m, slot.rdma));
            if success {
                self.settle(Completed::Send(self.send_done - 1));
            }
            return SendDone { completed };
        }
    }
}
