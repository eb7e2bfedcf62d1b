// SPDX-License-Identifier: GPL-2.0

//! A message's RDMA operation on the send ring: its READ or WRITE requests,
//! posted ahead of the message's first fragment.

// The rest of `Rings`: ring.rs's types and imports.
use super::*;

impl Rings {
    /// Posts the partial message's RDMA operation, if any, ahead of its first
    /// fragment: each request gathers as many consecutive pages as the link
    /// allows (`RdmaSges`) and takes one send slot but no credit (RDMA
    /// consumes no receive). `true` when none of it is left to post.
    pub(super) fn continue_rdma(&mut self, path: &IbPath) -> bool {
        let Some(p) = &self.partial else {
            return true;
        };
        let message = p.message.clone();
        let Some(op) = message.rdma() else {
            return true;
        };
        let (direction, per_request) = if op.is_write() {
            (DmaDirection::ToDevice, self.rdma_sges.write)
        } else {
            (DmaDirection::FromDevice, self.rdma_sges.read)
        };
        while let Some(p) = &self.partial {
            let first = p.rdma_next;
            // A READ sink (iWARP, registered on this device: `usable_on`) is one
            // chunk, named by its MR's key: one request, nothing to map.
            let sink = op.chunk_sink(first);
            let count = match sink {
                Some(_) => 1,
                None => op.chunk_count().saturating_sub(first).min(per_request),
            };
            if count == 0 {
                return true;
            }
            if !self.has_send_slot(path) {
                return false;
            }
            let Some((len, remote)) = op.chunk_extent(first) else {
                return false;
            };
            let mut sges = [bindings::ib_sge::default(); MAX_RDMA_SGES];
            let maps = match sink {
                Some((address, key)) => {
                    sges[0] = sge(address, len, key);
                    KVec::new()
                }
                None => {
                    let Ok(maps) = self.map_chunks(op, first, count, direction) else {
                        return false;
                    };
                    for (sge_out, map) in sges.iter_mut().zip(maps.iter()) {
                        *sge_out = sge(map.addr(), map.len(), self.lkey);
                    }
                    maps
                }
            };
            // Only the operation's last request, and every `RDMA_SIGNAL_EVERY`th,
            // raise a completion when all goes well: each stands for the ones
            // before it. The periodic ones free slots for the rest of an
            // operation longer than the ring (a 1 MiB READ on siw is 256).
            let last = first + count == op.chunk_count();
            let signalled =
                last || (first / per_request) % RDMA_SIGNAL_EVERY == RDMA_SIGNAL_EVERY - 1;
            // RDS_RDMA_FENCE on a WRITE: its first request waits for the READs
            // and atomics before it, so it sends the bytes they fetched.
            let fenced = first == 0 && op.fences_earlier_ops();
            let posted =
                self.post_rdma_request(path, op, &mut sges, count, remote, signalled, fenced);
            if posted.is_err() {
                return false;
            }
            self.fill_rdma_slot(maps, message.clone(), last, signalled);
            if let Some(p) = &mut self.partial {
                p.rdma_next += count;
            }
        }
        true
    }

    /// Posts one request of `op` at `remote`: its atomic operation on
    /// `sges[0]`, always signalled, or an RDMA WRITE or READ gathering
    /// `sges[..count]`, signalled if `signalled`, fenced if `fenced`.
    ///
    /// Errors: those of the post, which leaves the ring as it was.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn post_rdma_request(
        &self,
        path: &IbPath,
        op: &RdmaOp,
        sges: &mut [bindings::ib_sge; MAX_RDMA_SGES],
        count: usize,
        remote: u64,
        signalled: bool,
        fenced: bool,
    ) -> Result {
        let cqe = path.cqe(TAG_SEND);
        match op.atomic() {
            Some(a) => self.qp.post_atomic(
                cqe,
                &mut sges[0],
                a.opcode,
                remote,
                op.rkey(),
                [a.compare_add, a.swap, a.compare_add_mask, a.swap_mask],
            ),
            None => self.qp.post_rdma(
                cqe,
                &mut sges[..count],
                op.is_write(),
                remote,
                op.rkey(),
                signalled,
                fenced,
            ),
        }
    }

    /// A request of `message`'s RDMA operation was posted (its `last`, or
    /// not): the next send slot keeps its `maps` and `message` until it
    /// completes.
    #[inline]
    fn fill_rdma_slot(
        &mut self,
        maps: KVec<DmaMapping>,
        message: Arc<Message>,
        last: bool,
        signalled: bool,
    ) {
        let slot = self.send_posted % SEND_SLOTS;
        self.send_slots[slot] = SendSlot {
            maps: [None, None],
            rdma_maps: maps,
            message: Some(message),
            rdma: Some(last),
            unsignalled: !signalled,
            packed: None,
        };
        self.posted(signalled);
    }

    /// Maps chunks `first..first + count` of `op` for one request.
    fn map_chunks(
        &self,
        op: &RdmaOp,
        first: usize,
        count: usize,
        direction: DmaDirection,
    ) -> Result<KVec<DmaMapping>> {
        let mut maps = KVec::with_capacity(count, GFP_ATOMIC)?;
        for i in first..first + count {
            let (page, offset, len) = op.chunk(i).ok_or(EINVAL)?;
            // SAFETY: The page is pinned by the operation, which the message (kept in
            // the slot with the mappings) owns.
            let map = unsafe { DmaMapping::map_pinned(self.device, page, offset, len, direction) }?;
            maps.push(map, GFP_ATOMIC)?;
        }
        Ok(maps)
    }
}
