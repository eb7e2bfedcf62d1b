// SPDX-License-Identifier: GPL-2.0

//! The data path of one IB link: send and receive rings, credits, acks and
//! reassembly, on upstream's wire format (Documentation/reference/
//! upstream-rds-ib-protocol.md): every SEND is a 48-byte header copy followed
//! by at most one 4 KiB fragment (two towards an rrds peer: `FRAME_PAGES`);
//! receives are posted as [header, page, page].
//!
//! `Rings` is plain state: its owner (`IbPath`) keeps it under a spinlock and
//! calls these methods with it held, so nothing here sleeps or allocates
//! with anything but `GFP_ATOMIC`. Completions arrive in posting order per
//! queue (RC), which is how slots are matched to completions.
//!
//! This file holds the rings; the send side is in ring/send.rs, the
//! receive side in ring/receive.rs, credits and acks in ring/acks.rs, a
//! message's RDMA requests in ring/rdma.rs, packed frames in ring/pack.rs.

mod acks;
mod headers;
mod pack;
mod rdma;
mod receive;
mod send;
mod settle;

use acks::Credits;
use headers::HeaderArea;
pub(super) use pack::unpack;
use pack::Pack;
pub(super) use receive::{
    pages_filled,
    Payload, //
};
pub(super) use settle::Completed;
use settle::Generations;

use kernel::{
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
    sync::Arc,
};

use super::{
    IbPath,
    TAG_ACK,
    TAG_RECV,
    TAG_SEND, //
};
use crate::{
    ffi::{
        bindings,
        ib_cq::{
            sge,
            CqPoller,
            DmaDirection,
            DmaMapping,
            DmaPage,
            QpRef, //
        },
        ib_device::{
            DeviceCaps,
            DeviceRef, //
        },
        page::PageBytes,
    },
    message::{
        flags,
        Header,
        Message,
        HEADER_LEN, //
    },
    rdma::RdmaOp,
    stats::{
        self,
        Stat, //
    },
};

/// Send slots per link (upstream's default send ring).
pub(crate) const SEND_SLOTS: usize = 256;
/// Most pages one RDMA WRITE or READ request gathers (rxe's `RXE_MAX_SGE`;
/// in-tree RDS gathers at most 8).
const MAX_RDMA_SGES: usize = 32;
/// Receive buffers per link at most; the ring starts with
/// `ib_recv_ring_start` of them (towards a peer that does flow control) and
/// grows (`RING_GROW_WITHIN_NS`).
pub(crate) const RECV_SLOTS: usize = 256;
/// The fewest receive buffers a link starts with: a credit update is due
/// at `CREDIT_UPDATE_AT` buffers.
const RECV_RING_MIN: usize = 16;
/// A peer that fills the receive ring within this time doubles it.
const RING_GROW_WITHIN_NS: u64 = 1_000_000_000;
/// Largest credit grant one header carries (`RDS_MAX_ADV_CREDIT`).
const MAX_ADV_CREDIT: u32 = 255;
/// The most send credits a peer can give us: upstream keeps them in 16 bits.
/// A peer granting more (it never has that many receives posted) is capped
/// here rather than overflowing the count.
const MAX_SEND_CREDITS: u32 = u16::MAX as u32;
/// Posted-but-unadvertised credits that force an explicit ack (upstream: 16).
const CREDIT_UPDATE_AT: u32 = 16;
/// One request in this many of an RDMA operation is signalled (and its last
/// one): rxe gathers a 1 MiB operation into 8 requests, one completion.
const RDMA_SIGNAL_EVERY: usize = 8;
/// Messages between ACK_REQUIRED flags (upstream's `max_unacked_packets` + 1).
const ACK_EVERY: u32 = 8;
/// `RDS_FLAG_CONG_BITMAP`: a congestion map update, not a message.
pub(super) const FLAG_CONG_BITMAP: u8 = 0x01;
/// rrds only, sent to peers whose connect data offered `FEATURE_PACKED`: the
/// frame carries whole messages, each a record of its 48-byte header and its
/// payload padded to `PACK_ALIGN`. Its own header has sequence and ports 0
/// and `len` the records' bytes; it carries the ack and credits.
pub(super) const FLAG_PACKED: u8 = 0x80;
/// Record alignment in a packed frame.
const PACK_ALIGN: usize = 8;
/// Largest message packed; larger ones gain little from sharing a frame.
const PACK_MAX_LEN: usize = 2048;
/// Sends outstanding (posted, completion not yet handled) from which a new
/// small message is packed rather than posted: it would wait behind them
/// anyway, and their completions post the pack. Request and reply traffic
/// stays below it (the previous request's completion may not have been
/// handled when the reply comes), so its messages never wait for one.
const PACK_WHEN_OUTSTANDING: usize = 4;
/// Sends outstanding below which a frame is posted unsignalled: request and
/// reply traffic, whose send completions would only run ahead of the woken
/// receiver. Two below `PACK_WHEN_OUTSTANDING`, so that such traffic, one
/// completion not yet handled, still never packs; at and above it, frames
/// are signalled as a stream's must be for its completions to post packs.
const UNSIGNALLED_BELOW: usize = PACK_WHEN_OUTSTANDING - 2;
/// Pages of payload a receive buffer holds, and a frame carries towards a
/// peer that offered `FEATURE_LARGE_FRAMES` (upstream's fragment is one page).
pub(super) const FRAME_PAGES: usize = 2;
const HEADERS_PER_PAGE: usize = PAGE_SIZE / HEADER_LEN;

/// The receive buffers a link posts at set-up, which its connect data
/// grants the peer as credits.
pub(super) fn initial_receives() -> usize {
    crate::limits::ib_recv_ring_start(RECV_RING_MIN, RECV_SLOTS)
}

/// How many pages one RDMA request of a link gathers: WRITEs up to the
/// device's `max_send_sge`, READs up to its `max_sge_rd` too (1 on siw).
#[derive(Clone, Copy)]
pub(super) struct RdmaSges {
    write: usize,
    read: usize,
}

impl RdmaSges {
    pub(super) fn for_device(caps: &DeviceCaps) -> Self {
        let limit = |n: i32| usize::try_from(n).unwrap_or(1).clamp(1, MAX_RDMA_SGES);
        let write = limit(caps.max_send_sge);
        Self {
            write,
            read: limit(caps.max_sge_rd).min(write),
        }
    }

    /// The SGEs a data QP needs per send request: a frame's header and
    /// pages, or an RDMA request's.
    pub(super) fn qp_send_sges(&self) -> u32 {
        self.write.max(1 + FRAME_PAGES) as u32
    }
}

/// One posted send: what it keeps alive until its completion.
#[derive(Default)]
struct SendSlot {
    /// Dropped before `message`, whose pages they map.
    maps: [Option<DmaMapping>; FRAME_PAGES],
    /// An RDMA request's page mappings; dropped before `message` too.
    rdma_maps: KVec<DmaMapping>,
    message: Option<Arc<Message>>,
    /// The slot is a work request of the message's RDMA operation (`Some`),
    /// its last one (`Some(true)`).
    rdma: Option<bool>,
    /// Posted without `IB_SEND_SIGNALED` (an RDMA operation's request, not
    /// its last, or a frame of a message without one): it completes
    /// silently with the next signalled request or explicit ack, unless it
    /// fails or is flushed.
    unsignalled: bool,
    /// A packed frame's payload page.
    packed: Option<DmaPage>,
}

impl SendSlot {
    /// Unmaps the slot's pages and hands back its message for the caller to
    /// drop (outside the ring lock if it has an RDMA operation: see
    /// `Rings::release_upto`).
    fn release(self) -> Option<Arc<Message>> {
        drop(self.maps);
        drop(self.rdma_maps);
        drop(self.packed);
        self.message
    }
}

/// What a send completion gives back, to drop outside the ring lock.
#[derive(Default)]
pub(in crate::transport::ib) struct SendDone {
    /// The completed request's message, and whether the request is its RDMA
    /// operation's (`Some`), the last (`Some(true)`).
    pub(in crate::transport::ib) completed: Option<(Arc<Message>, Option<bool>)>,
}

/// A message whose fragments are partly posted.
struct Partial {
    header: Header,
    message: Arc<Message>,
    next: usize,
    /// Fragments to post: none for a silent operation's message.
    count: usize,
    /// Work requests of the message's RDMA operation posted so far.
    rdma_next: usize,
}

/// The data path state of one link.
///
/// # Invariants
///
/// Slots `send_done..send_posted` (mod `SEND_SLOTS`) are posted and complete in
/// order; likewise `recv_done..recv_posted` for receives. The QP lives until
/// the link is torn down, after the rings are out of the path.
pub(super) struct Rings {
    pub(super) qp: QpRef,
    device: DeviceRef,
    lkey: u32,
    rdma_sges: RdmaSges,
    send_headers: HeaderArea,
    send_slots: KVec<SendSlot>,
    send_posted: usize,
    send_done: usize,
    recv_headers: HeaderArea,
    recv_slots: KVec<Option<[DmaPage; FRAME_PAGES]>>,
    recv_posted: usize,
    recv_done: usize,
    /// Receive buffers the ring keeps posted: `ib_recv_ring_start` at first,
    /// doubled up to `RECV_SLOTS` whenever the peer fills the ring within
    /// `RING_GROW_WITHIN_NS` (`recv_done` and the time when it last did).
    recv_target: usize,
    ring_filled: (usize, u64),
    credits: Credits,
    partial: Option<Partial>,
    /// The peer takes packed frames (its connect data offered them).
    peer_packs: bool,
    /// Payload bytes per frame: two pages if the peer offered
    /// `FEATURE_LARGE_FRAMES`, else upstream's one.
    frame_len: usize,
    /// Small messages gathered while sends are outstanding, posted as one
    /// frame when a send completes or credits come (`post_pack`), when it is
    /// full, or before anything else with a sequence number is posted.
    pack: Option<Pack>,
    /// Signalled requests posted whose completion is not handled yet.
    signalled_pending: usize,
    /// `send_posted` when the explicit ack in flight was posted: its
    /// completion stands for the requests before it.
    ack_covers: usize,
    /// Sequence of the last message received whole (what `h_ack` says).
    last_received: u64,
    /// The last `h_ack` sent (on data, a pack or an explicit ack).
    ack_sent: u64,
    ack_in_flight: bool,
    ack_wanted: bool,
    /// Messages until the next ACK_REQUIRED.
    until_ack_required: u32,
    /// ESTABLISHED: sends may be posted.
    pub(super) up: bool,
    /// A send was refused for want of slots or credits, or its post failed
    /// for want of memory: completions, credit updates and the watchdog
    /// resume the connection's transmission.
    pub(super) blocked: bool,
    /// Our congestion map, to send before the next message (upstream sends
    /// it on every new connection and after every change).
    pub(super) cong_pending: Option<Arc<Message>>,
    /// What busy-polls the link's receive CQ, for sockets that busy-poll.
    pub(super) busy_poller: Option<Arc<CqPoller>>,
    /// Explicit acks completed.
    acks_done: usize,
    /// Watchdog: `send_done + acks_done` at the last tick, and ticks since it
    /// moved.
    watch_done: usize,
    stalled_ticks: u32,
    /// The last message whose posting `kick` finished on its own (after
    /// `xmit` had returned blocked): its next `xmit` is a no-op.
    finished: Option<(u64, *const Message)>,
    /// Slots `send_released..send_done` completed and are kept, buffers
    /// mapped and message held, until rxe cannot read them again (see
    /// ring/settle.rs), in at most two generations.
    send_released: usize,
    generations: Generations,
    /// Explicit acks posted: the in-flight one is number `acks_posted - 1`.
    acks_posted: usize,
    /// Released messages with an RDMA operation, for the completion handler
    /// to drop outside the lock; `SEND_SLOTS` reserved up front.
    released: KVec<Arc<Message>>,
}

// SAFETY: `device` is only passed to DMA calls, valid while the link exists.
unsafe impl Send for Rings {}

impl Rings {
    /// Rings for `qp` on `device`, every receive buffer allocated but not posted.
    pub(super) fn new(
        qp: QpRef,
        device: DeviceRef,
        lkey: u32,
        rdma_sges: RdmaSges,
    ) -> Result<Self> {
        let mut send_slots = KVec::with_capacity(SEND_SLOTS, GFP_KERNEL)?;
        for _ in 0..SEND_SLOTS {
            send_slots.push(SendSlot::default(), GFP_KERNEL)?;
        }
        let mut recv_slots = KVec::with_capacity(RECV_SLOTS, GFP_KERNEL)?;
        for _ in 0..RECV_SLOTS {
            recv_slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            qp,
            device,
            lkey,
            rdma_sges,
            // One more header than slots: the ack's.
            send_headers: HeaderArea::new(device, SEND_SLOTS + 1, DmaDirection::ToDevice)?,
            send_slots,
            send_posted: 0,
            send_done: 0,
            signalled_pending: 0,
            ack_covers: 0,
            recv_headers: HeaderArea::new(device, RECV_SLOTS, DmaDirection::FromDevice)?,
            recv_slots,
            recv_posted: 0,
            recv_done: 0,
            recv_target: initial_receives(),
            ring_filled: (0, crate::ffi::time::monotonic_ns()),
            credits: Credits {
                enabled: false,
                send: 0,
                posted: 0,
            },
            partial: None,
            send_released: 0,
            generations: Generations::default(),
            acks_posted: 0,
            released: KVec::with_capacity(SEND_SLOTS, GFP_KERNEL)?,
            peer_packs: false,
            frame_len: PAGE_SIZE,
            pack: None,
            last_received: 0,
            ack_sent: 0,
            ack_in_flight: false,
            ack_wanted: false,
            until_ack_required: 0,
            up: false,
            blocked: false,
            cong_pending: None,
            finished: None,
            acks_done: 0,
            watch_done: 0,
            stalled_ticks: 0,
            busy_poller: None,
        })
    }

    /// Turns flow control on with the peer's initial credits (its private
    /// data), if it asked for it; `peer_packs` and `peer_large` if it offered
    /// to take packed and large frames.
    pub(super) fn start(&mut self, peer_credit: u32, peer_packs: bool, peer_large: bool) {
        self.peer_packs = peer_packs;
        self.frame_len = if peer_large {
            FRAME_PAGES * PAGE_SIZE
        } else {
            PAGE_SIZE
        };
        self.credits.enabled = peer_credit != 0;
        self.credits.send = peer_credit.min(MAX_SEND_CREDITS);
        self.up = true;
        // A peer without flow control (upstream's default) sends whatever
        // we have posted or not: it gets the whole ring (`grow_receives`).
        if !self.credits.enabled {
            self.recv_target = RECV_SLOTS;
        }
    }

    /// The message this link posted fragments of on its own (`kick`), if
    /// any: partly posted, or finished after `xmit` returned blocked.
    pub(super) fn handed_over(&self) -> Option<u64> {
        match &self.partial {
            Some(p) if p.next > 0 && p.header.flags != FLAG_CONG_BITMAP => Some(p.header.sequence),
            _ => self.finished.map(|(sequence, _)| sequence),
        }
    }

    /// debugfs `rrds/ib_links`: the ring counters of this link.
    pub(super) fn show(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        write!(
            f,
            " up {} blocked {} send {}/{} recv {}/{} credits {} {}/{} ack {} wanted {} \
             in_flight {} partial {} cong_pending {} stalled {} signalled {} settling {} \
             ring {}",
            u8::from(self.up),
            u8::from(self.blocked),
            self.send_done,
            self.send_posted,
            self.recv_done,
            self.recv_posted,
            if self.credits.enabled { "on" } else { "off" },
            self.credits.send,
            self.credits.posted,
            self.last_received,
            u8::from(self.ack_wanted),
            u8::from(self.ack_in_flight),
            u8::from(self.partial.is_some()),
            u8::from(self.cong_pending.is_some()),
            self.stalled_ticks,
            self.signalled_pending,
            self.settling(),
            self.recv_target,
        )
    }

    /// One watchdog tick: the number of consecutive ticks sends have been
    /// outstanding without one completing.
    pub(super) fn watchdog_tick(&mut self) -> u32 {
        // Unsignalled requests at the end of the ring, behind nothing that
        // will complete: an explicit ack frees their slots (and messages).
        if self.send_done != self.send_posted && self.signalled_pending == 0 {
            self.ack_wanted = true;
        }
        // Completed requests held for rxe on a link that sends nothing more:
        // an ack's completion lets them go.
        if self.settling() != 0 && self.send_done == self.send_posted {
            self.ack_wanted = true;
        }
        // Explicit acks count: a receive-only end posts nothing else. A tail
        // of unsignalled requests alone raises no completion to wait for.
        let done = self.send_done + self.acks_done;
        let outstanding = self.signalled_pending != 0 || self.ack_in_flight;
        if !self.up || !outstanding || done != self.watch_done {
            self.watch_done = done;
            self.stalled_ticks = 0;
        } else {
            self.stalled_ticks += 1;
        }
        self.stalled_ticks
    }
}
