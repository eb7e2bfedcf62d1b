// SPDX-License-Identifier: GPL-2.0

//! The receive ring: posting receive buffers, receive completions
//! (credits, acks, frames) and the acknowledgements they owe.

// The rest of `Rings`: ring.rs's types and imports.
use super::*;

/// A frame's payload: its pages in order, each with the bytes it holds.
pub(in crate::transport::ib) type Payload = [Option<(Page, usize)>; FRAME_PAGES];

/// The pages of a receive buffer a completion of `byte_len` bytes filled:
/// they go up with the frame and fresh ones take their place.
pub(in crate::transport::ib) fn pages_filled(byte_len: usize) -> usize {
    byte_len
        .saturating_sub(HEADER_LEN)
        .div_ceil(PAGE_SIZE)
        .min(FRAME_PAGES)
}

/// What a receive completion produced, for the caller to act on once it has
/// dropped the lock.
#[derive(Default)]
pub(in crate::transport::ib) struct Received {
    /// The peer acknowledged every message up to this sequence.
    pub(in crate::transport::ib) acked: Option<u64>,
    /// A frame of a message (not an explicit ack): its header and payload
    /// pages with the bytes each holds, in order (none for a header-only
    /// frame).
    pub(in crate::transport::ib) frame: Option<(Header, Payload)>,
    /// A packed frame: the page of its records and their length.
    pub(in crate::transport::ib) packed: Option<(Page, usize)>,
    /// The link is broken (protocol error); reset it.
    pub(in crate::transport::ib) error: bool,
    /// Credits came in: blocked sends may go on.
    pub(in crate::transport::ib) credits_added: bool,
    /// The ring grew: post its new buffers (`IbPath::grow_receives`).
    pub(in crate::transport::ib) grow: bool,
}

impl Rings {
    /// Posts the ring's first receive buffers (before connect/accept, so the
    /// peer never meets an empty queue). Process context.
    pub(in crate::transport::ib) fn post_all_receives(&mut self, path: &IbPath) -> Result {
        while self.recv_posted - self.recv_done < self.recv_target {
            let buffer = [self.new_buffer_page()?, self.new_buffer_page()?];
            self.post_receive(path, buffer)?;
        }
        // They are advertised by the connection's private data.
        self.credits.posted = 0;
        Ok(())
    }

    /// The receive buffers posted and not completed: before the link is
    /// up, the credits its connect data grants.
    pub(in crate::transport::ib) fn receives_posted(&self) -> usize {
        self.recv_posted - self.recv_done
    }

    /// Buffers the ring lacks after growing: what `post_more_receives`
    /// wants, as pages (`FRAME_PAGES` a buffer).
    pub(in crate::transport::ib) fn receive_pages_wanted(&self) -> usize {
        self.recv_target.saturating_sub(self.receives_posted()) * FRAME_PAGES
    }

    /// Posts buffers made of `pages` until the ring has its target; the ring
    /// is then as large as what got posted (a short allocation or a failed
    /// post leaves it smaller, and a later fill grows it again). The credits
    /// go to the peer with the next header, or an explicit ack once
    /// `CREDIT_UPDATE_AT` have gathered.
    pub(in crate::transport::ib) fn post_more_receives(
        &mut self,
        path: &IbPath,
        pages: &mut KVec<Page>,
    ) {
        while self.receives_posted() < self.recv_target && pages.len() >= FRAME_PAGES {
            let (Some(second), Some(first)) = (pages.pop(), pages.pop()) else {
                break;
            };
            let map = |p| DmaPage::map(self.device, p, DmaDirection::FromDevice);
            let (Ok(first), Ok(second)) = (map(first), map(second)) else {
                break;
            };
            if self.post_receive(path, [first, second]).is_err() {
                break;
            }
        }
        self.recv_target = self.receives_posted();
    }

    /// A peer that went through the whole ring within `RING_GROW_WITHIN_NS`
    /// is busy: doubles the ring, up to `RECV_SLOTS`. Whether it grew.
    fn grow_if_filled(&mut self) -> bool {
        let (since, at) = self.ring_filled;
        if self.recv_done - since < self.recv_target {
            return false;
        }
        let now = crate::ffi::time::monotonic_ns();
        self.ring_filled = (self.recv_done, now);
        if now.saturating_sub(at) >= RING_GROW_WITHIN_NS || self.recv_target >= RECV_SLOTS {
            return false;
        }
        self.recv_target = (self.recv_target * 2).min(RECV_SLOTS);
        stats::inc(Stat::IbRxRingGrown);
        true
    }

    fn new_buffer_page(&self) -> Result<DmaPage> {
        DmaPage::map(
            self.device,
            Page::alloc_page(GFP_KERNEL)?,
            DmaDirection::FromDevice,
        )
    }

    fn post_receive(&mut self, path: &IbPath, buffer: [DmaPage; FRAME_PAGES]) -> Result {
        let i = self.recv_posted % RECV_SLOTS;
        let mut sges = [
            self.recv_headers.sge(i, self.lkey),
            sge(buffer[0].addr(), PAGE_SIZE, self.lkey),
            sge(buffer[1].addr(), PAGE_SIZE, self.lkey),
        ];
        self.qp.post_recv(path.cqe(TAG_RECV), &mut sges)?;
        self.recv_slots[i] = Some(buffer);
        self.recv_posted += 1;
        // Never more than the ring: without flow control nothing advertises
        // them, and the peer cannot hold credits for more buffers than
        // there are (so the count is right if flow control starts later).
        self.credits.posted = (self.credits.posted + 1).min(RECV_SLOTS as u32);
        Ok(())
    }

    /// A receive completed successfully with `byte_len` bytes; `fresh` is the
    /// page to post in its place (allocated by the caller before locking).
    pub(in crate::transport::ib) fn receive_completed(
        &mut self,
        path: &IbPath,
        byte_len: usize,
        fresh: [Option<Page>; FRAME_PAGES],
    ) -> Received {
        let mut out = Received::default();
        if self.recv_done == self.recv_posted {
            return out;
        }
        let i = self.recv_done % RECV_SLOTS;
        self.recv_done += 1;
        let raw = self.recv_headers.read(i);
        out.grow = self.grow_if_filled();
        let (filled, reposted) = self.repost_receive(path, i, byte_len, fresh);
        // One buffer short if not reposted; the credits the peer has account for it.
        out.error = !reposted;
        if byte_len < HEADER_LEN {
            out.error = true;
            return out;
        }
        let Some(header) = Header::from_wire(&raw) else {
            out.error = true;
            return out;
        };
        out.credits_added = self.take_credits(&header);
        if header.ack != 0 {
            out.acked = Some(header.ack);
        }
        take_frame(header, filled, byte_len, &mut out);
        out
    }

    /// Takes the pages of receive slot `i` that a frame of `byte_len` bytes
    /// filled, and posts the buffer again with `fresh` pages in their place
    /// (those it left empty go again as they are). Returns the filled pages
    /// and whether the buffer was posted.
    fn repost_receive(
        &mut self,
        path: &IbPath,
        i: usize,
        byte_len: usize,
        fresh: [Option<Page>; FRAME_PAGES],
    ) -> ([Option<DmaPage>; FRAME_PAGES], bool) {
        let mut pages = match self.recv_slots[i].take() {
            Some(buffer) => buffer.map(Some),
            None => [None, None],
        };
        let mut filled: [Option<DmaPage>; FRAME_PAGES] = [None, None];
        for (slot, page) in filled
            .iter_mut()
            .zip(pages.iter_mut())
            .take(pages_filled(byte_len))
        {
            *slot = page.take();
        }
        let mut fresh = fresh.into_iter().flatten();
        for page in pages.iter_mut().filter(|p| p.is_none()) {
            *page = fresh
                .next()
                .and_then(|p| DmaPage::map(self.device, p, DmaDirection::FromDevice).ok());
        }
        let reposted = match pages {
            [Some(a), Some(b)] => self.post_receive(path, [a, b]).is_ok(),
            _ => false,
        };
        (filled, reposted)
    }

    /// Adds the send credits `header` grants; returns whether it granted any.
    fn take_credits(&mut self, header: &Header) -> bool {
        if header.credit == 0 {
            return false;
        }
        if !self.credits.enabled {
            // A peer that offered no credits but advertises some does flow
            // control on the credits we offered: in-tree RDS with
            // `flow_control` set offers none, its receives not yet posted
            // when it connects. Its sends stop unless ours advertise the
            // buffers we post, and its grants are all our sends may use.
            self.credits.enabled = true;
            self.credits.send = 0;
        }
        self.credits.send = self
            .credits
            .send
            .saturating_add(u32::from(header.credit))
            .min(MAX_SEND_CREDITS);
        true
    }

    /// A whole message `sequence` arrived: acks from now on cover it.
    pub(in crate::transport::ib) fn message_received(&mut self, sequence: u64, ack_required: bool) {
        self.last_received = sequence;
        if ack_required {
            stats::inc(Stat::RecvAckRequired);
            self.ack_wanted = true;
        }
    }

    /// A receive completed in error (flush): forget its buffer.
    pub(in crate::transport::ib) fn receive_failed(&mut self) {
        if self.recv_done == self.recv_posted {
            return;
        }
        let i = self.recv_done % RECV_SLOTS;
        self.recv_done += 1;
        self.recv_slots[i] = None;
    }
}

/// What a received frame with `header` carries in its `filled` pages
/// (`byte_len` bytes with the header): a packed frame's page, nothing for
/// an explicit ack, else a message's frame and its payload; `error` for a
/// frame that fits none.
fn take_frame(
    header: Header,
    mut filled: [Option<DmaPage>; FRAME_PAGES],
    byte_len: usize,
    out: &mut Received,
) {
    let data_len = byte_len.saturating_sub(HEADER_LEN);
    if header.flags & FLAG_PACKED != 0 {
        // We offer packed frames to every peer.
        let framed = header.sequence == 0
            && header.sport == 0
            && header.dport == 0
            && header.len as usize == data_len
            && (1..=PAGE_SIZE).contains(&data_len);
        match filled[0].take() {
            Some(b) if framed => out.packed = Some((b.unmap(), data_len)),
            _ => out.error = true,
        }
        return;
    }
    if header.sport == 0 && header.dport == 0 && data_len == 0 && header.len == 0 {
        // An explicit ack (or credit update).
        return;
    }
    // We offer large frames to every peer; the buffer bounds the rest.
    if data_len > FRAME_PAGES * PAGE_SIZE {
        out.error = true;
        return;
    }
    let used = pages_filled(byte_len);
    if used > 1 && header.flags != FLAG_CONG_BITMAP {
        stats::inc(Stat::IbRxLargeFrames);
    }
    let mut payload: Payload = [None, None];
    for (n, (slot, page)) in payload.iter_mut().zip(filled).enumerate().take(used) {
        match page {
            Some(b) => *slot = Some((b.unmap(), (data_len - n * PAGE_SIZE).min(PAGE_SIZE))),
            None => {
                out.error = true;
                return;
            }
        }
    }
    out.frame = Some((header, payload));
}
