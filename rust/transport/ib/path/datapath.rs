// SPDX-License-Identifier: GPL-2.0

//! An IB path's data path: posting messages, receiving frames and
//! reassembling messages, congestion maps, and the send, receive and ack
//! completions.

// The rest of `IbPath`: path.rs's types and imports.
use super::*;

// SAFETY: `IbPath::new` builds the three `Cqe`s in the path it initialises in an
// `Arc`; the path outlives its links' QPs, drained before a link goes (teardown).
unsafe impl CompletionHandler for IbPath {
    fn completed(this: ArcBorrow<'_, Self>, tag: u32, wc: &WorkCompletion<'_>) {
        let this: Arc<Self> = this.into();
        match tag {
            TAG_SEND => this.send_completed(wc),
            TAG_RECV => this.recv_completed(wc),
            _ => this.ack_completed(wc),
        }
    }
}

impl IbPath {
    /// What busy-polls the current link's receive CQ, if a link is built.
    pub(crate) fn busy_poller(&self) -> Option<Arc<CqPoller>> {
        self.rings.lock().as_ref()?.busy_poller.clone()
    }

    /// Posts what it can of a message (see `Transport::xmit`).
    pub(crate) fn xmit(
        &self,
        conn: &dyn Conn,
        resets: u64,
        header: &Header,
        message: &Arc<Message>,
    ) -> Xmit {
        let mut guard = self.rings.lock();
        let Some(rings) = Option::as_mut(&mut *guard) else {
            return Xmit::Blocked;
        };
        // A retirement takes the rings, then resets the connection, with the
        // path's control lock held, which building the next link's rings
        // needs: rings found here after a reset are a later link's.
        if conn.resets() != resets {
            stats::inc(Stat::IbXmitAfterReset);
            return Xmit::Blocked;
        }
        if rings.xmit(self, header, message) {
            Xmit::Taken
        } else {
            rings.blocked = true;
            Xmit::Blocked
        }
    }

    /// A receive completed on a link not yet started: the peer sends, so it
    /// holds the connection established. A passive link whose `ESTABLISHED`
    /// has not come (the RTU is late or lost, and rxe raises no `COMM_EST`
    /// for upstream's answer) is established here, or it would not send
    /// until then. An accepted iWARP link waiting for the peer's first frame
    /// (`IWARP_RESPONDER_WAIT_TICKS`) starts here too.
    ///
    /// The IB CM is not told (`rdma_notify`): it would move to established
    /// and cancel the REP it retransmits only later, from its work queue, and
    /// a disconnect in between replaces the REP as the id's message without
    /// cancelling it. Destroying the id then waits for the REP's every retry
    /// (tens of seconds), holding up the path's teardown and reconnect. Left
    /// waiting, the CM completes on the RTU, which a REP retransmission asks
    /// the peer for again, or a teardown cancels the REP and rejects.
    pub(super) fn receive_before_established(self: &Arc<Self>) {
        let mut c = self.ctl.lock();
        if c.state != State::Connecting || c.link.as_ref().is_none_or(|l| l.active) {
            return;
        }
        c.step(Trail::UpByReceive);
        // An iWARP responder waiting for this frame had its event.
        if c.responder_waiting.is_none() {
            stats::inc(Stat::IbEstablishedByReceive);
        }
        let peer = c.peer_request;
        self.link_up(c, peer);
    }

    /// A frame of a message arrived: add it to the message being reassembled
    /// and hand the message on once whole.
    fn receive_frame(
        &self,
        conn: &dyn Conn,
        generation: u64,
        header: Header,
        payload: Payload,
    ) -> Result {
        let complete = {
            let mut rx = self.rx.lock();
            if rx.generation != generation {
                rx.generation = generation;
                rx.pending = None;
            }
            let (first, mut assembly) = match rx.pending.take() {
                Some((first, assembly)) => {
                    if (first.sequence, first.len, first.sport, first.dport)
                        != (header.sequence, header.len, header.sport, header.dport)
                    {
                        return Err(EINVAL);
                    }
                    (first, assembly)
                }
                None => (header, Assembly::new(header.len as usize)?),
            };
            let mut pages = payload.into_iter().flatten().peekable();
            // Only a 0-length message comes without payload.
            if pages.peek().is_none() && assembly.missing() > 0 {
                return Err(EINVAL);
            }
            for (page, bytes) in pages {
                assembly.push(page, bytes)?;
            }
            if assembly.missing() > 0 {
                rx.pending = Some((first, assembly));
                return Ok(());
            }
            (first, assembly.finish()?)
        };
        let (header, message) = complete;
        if header.flags == FLAG_CONG_BITMAP {
            // The peer's congestion map: the bits of its ports, which our senders
            // to it check.
            return conn.peer_cong_map(&message);
        }
        // Acknowledged only once taken: one the socket could not queue fails
        // the link, and the peer retransmits it.
        conn.arrived(Direction::FromPeer, header, message)?;
        if let Some(rings) = Option::as_mut(&mut *self.rings.lock()) {
            rings.message_received(header.sequence, header.flags & flags::ACK_REQUIRED != 0);
        }
        Ok(())
    }

    /// A packed frame of `bytes` bytes of records in `page` arrived: each of
    /// its messages is received as a frame of its own, in order.
    fn receive_packed(&self, conn: &dyn Conn, generation: u64, page: Page, bytes: usize) -> Result {
        let mut records = KVec::with_capacity(bytes, GFP_KERNEL)?;
        records.resize(bytes, 0, GFP_KERNEL)?;
        // `bytes` is at most a page (`Rings::receive_completed`); the receive
        // completed and the page is unmapped, so the device is done with it.
        page.read_slice(0, &mut records)?;
        drop(page);
        for (header, payload) in unpack(&records).ok_or(EINVAL)? {
            let mut pages: Payload = [None, None];
            if !payload.is_empty() {
                let mut page = Page::alloc_page(GFP_KERNEL)?;
                page.write_slice(0, payload)?;
                pages[0] = Some((page, payload.len()));
            }
            stats::inc(Stat::IbRxPackedMessages);
            self.receive_frame(conn, generation, header, pages)?;
        }
        Ok(())
    }

    /// Sends `map` (our congestion map in wire form) to the peer, before the
    /// next message. Dropped if the link is not up: a new link sends it.
    pub(crate) fn send_cong_map(&self, map: Arc<Message>) {
        let old = {
            let mut guard = self.rings.lock();
            let Some(r) = Option::as_mut(&mut *guard).filter(|r| r.up) else {
                return;
            };
            let old = r.cong_pending.replace(map);
            if !r.kick(self) {
                r.blocked = true;
            }
            old
        };
        drop(old);
    }

    /// Sends resumed after a completion or a credit update: what the rings
    /// had begun, then the connection's queue.
    pub(super) fn resume(&self, conn: &dyn Conn) {
        {
            let mut guard = self.rings.lock();
            if let Some(r) = Option::as_mut(&mut *guard) {
                if !r.kick(self) {
                    r.blocked = true;
                    return;
                }
            }
        }
        conn.xmit();
    }

    pub(super) fn send_completed(self: &Arc<Self>, wc: &WorkCompletion<'_>) {
        let (done, released, blocked) = {
            let mut guard = self.rings.lock();
            match Option::as_mut(&mut *guard) {
                Some(r) if r.qp.key() == wc.qp() => {
                    let done = r.send_completed(wc.is_success());
                    // What was packed while this send was outstanding goes now.
                    if wc.is_success() {
                        r.post_pack(self);
                    }
                    (done, r.take_released(), core::mem::take(&mut r.blocked))
                }
                _ => (SendDone::default(), KVec::new(), false),
            }
        };
        self.drop_released(released);
        if let Some((message, Some(last))) = &done.completed {
            if let Some(op) = message.rdma() {
                op.completed(wc.status(), *last);
                if *last && wc.is_success() && op.sends_nothing(message.len()) {
                    // No header went, so no ack will release it.
                    if let Some(conn) = self.conn() {
                        conn.release_unsent(message);
                    }
                }
            }
        }
        drop(done);
        if !wc.is_success() {
            // A flush of the live link's QP is a failure too: rxe moves a QP
            // to error on its own when its netdev goes down and flushes every
            // request, the failed one included, with no other event.
            pr_debug!("send completion status {}\n", wc.status());
            self.fail_qp(wc.qp());
            return;
        }
        if blocked {
            if let Some(conn) = self.conn() {
                self.resume(&*conn);
            }
        }
    }

    /// A receive failed or was flushed: the link is gone if it is the live
    /// one (see `send_completed`).
    fn recv_failed(self: &Arc<Self>, wc: &WorkCompletion<'_>) {
        if let Some(r) = Option::as_mut(&mut *self.rings.lock()) {
            if r.qp.key() == wc.qp() {
                r.receive_failed();
            }
        }
        pr_debug!("receive completion status {}\n", wc.status());
        self.fail_qp(wc.qp());
    }

    fn recv_completed(self: &Arc<Self>, wc: &WorkCompletion<'_>) {
        if !wc.is_success() {
            self.recv_failed(wc);
            return;
        }
        // The pages that replace those the frame filled, allocated before
        // taking the lock (a packed frame fills one page).
        let filled = pages_filled(wc.byte_len());
        let mut fresh: [Option<Page>; FRAME_PAGES] = [None, None];
        for page in fresh.iter_mut().take(filled) {
            *page = Page::alloc_page(GFP_KERNEL).ok();
        }
        let (received, generation, not_started) = {
            let mut guard = self.rings.lock();
            let Some(r) = Option::as_mut(&mut *guard).filter(|r| r.qp.key() == wc.qp()) else {
                return;
            };
            let not_started = !r.up;
            let received = r.receive_completed(self, wc.byte_len(), fresh);
            (received, *self.generation.lock(), not_started)
        };
        if not_started {
            self.receive_before_established();
        }
        if received.grow {
            self.grow_receives();
        }
        let Some(conn) = self.conn() else {
            return;
        };
        if let Some(seq) = received.acked {
            conn.drop_acked(seq);
        }
        let mut error = received.error;
        if let Some((header, payload)) = received.frame {
            if self
                .receive_frame(&*conn, generation, header, payload)
                .is_err()
            {
                error = true;
            }
        }
        if let Some((page, bytes)) = received.packed {
            if self
                .receive_packed(&*conn, generation, page, bytes)
                .is_err()
            {
                error = true;
            }
        }
        if error {
            self.fail_qp(wc.qp());
            return;
        }
        let blocked = {
            let mut guard = self.rings.lock();
            match Option::as_mut(&mut *guard) {
                Some(r) => {
                    // A pack waiting for credits carries the ack too.
                    if received.credits_added {
                        r.post_pack(self);
                    }
                    if r.send_ack(self).is_err() {
                        error = true;
                    }
                    received.credits_added && core::mem::take(&mut r.blocked)
                }
                None => false,
            }
        };
        if error {
            self.fail_qp(wc.qp());
        } else if blocked {
            self.resume(&*conn);
        }
    }

    pub(super) fn ack_completed(self: &Arc<Self>, wc: &WorkCompletion<'_>) {
        // Flushes included (see `send_completed`).
        let mut error = !wc.is_success();
        let (released, blocked) = {
            let mut guard = self.rings.lock();
            let Some(r) = Option::as_mut(&mut *guard).filter(|r| r.qp.key() == wc.qp()) else {
                return;
            };
            r.ack_completed(wc.is_success());
            if wc.is_success() && r.send_ack(self).is_err() {
                error = true;
            }
            (r.take_released(), core::mem::take(&mut r.blocked))
        };
        self.drop_released(released);
        if error {
            self.fail_qp(wc.qp());
            return;
        }
        // Slots it released may be what a blocked send waits for.
        if blocked {
            if let Some(conn) = self.conn() {
                self.resume(&*conn);
            }
        }
    }

    /// Posts the buffers the receive ring grew by, allocated here with no
    /// lock held. Process context (a completion handler or `link_up`).
    pub(super) fn grow_receives(&self) {
        let wanted = match Option::as_ref(&*self.rings.lock()) {
            Some(r) => r.receive_pages_wanted(),
            None => return,
        };
        let Ok(mut pages) = KVec::with_capacity(wanted, GFP_KERNEL) else {
            return;
        };
        for _ in 0..wanted {
            let Ok(page) = Page::alloc_page(GFP_KERNEL) else {
                break;
            };
            if pages.push(page, GFP_KERNEL).is_err() {
                break;
            }
        }
        if let Some(r) = Option::as_mut(&mut *self.rings.lock()) {
            r.post_more_receives(self, &mut pages);
            // Granted at once if enough gathered; else with the next header.
            let _ = r.send_ack(self);
        }
        // Pages left over (the ring was torn down meanwhile) go here, unlocked.
        drop(pages);
    }

    /// Drops messages a completion released (`Rings::take_released`) outside
    /// the ring lock, and gives their vector back to the rings.
    fn drop_released(&self, mut released: KVec<Arc<Message>>) {
        if released.capacity() == 0 {
            return;
        }
        released.clear();
        if let Some(r) = Option::as_mut(&mut *self.rings.lock()) {
            r.restore_released(released);
        }
    }
}
