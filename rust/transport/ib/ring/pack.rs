// SPDX-License-Identifier: GPL-2.0

//! Packed frames (`FLAG_PACKED`): small messages gathered into one
//! frame's page as records, and taken apart on receipt.

// The rest of `Rings`: ring.rs's types and imports.
use super::*;

/// Small messages gathered for one packed frame (`FLAG_PACKED`), in sequence
/// order: nothing else is posted until the frame is.
pub(super) struct Pack {
    /// The records, at most a page.
    records: KVec<u8>,
    messages: u64,
}

impl Pack {
    /// A record for a message of `len` bytes fits.
    fn fits(&self, len: usize) -> bool {
        self.records.len() + record_len(len) <= PAGE_SIZE
    }

    /// Appends `header`'s record with `message`'s payload; on failure the
    /// records are as they were (a partial record would go out as garbage).
    fn push(&mut self, header: &Header, message: &Message) -> Result {
        let at = self.records.len();
        let len = message.len();
        self.records.resize(at + record_len(len), 0, GFP_ATOMIC)?;
        self.records[at..at + HEADER_LEN].copy_from_slice(&header.to_wire());
        let copied =
            message.copy_to_kernel(&mut self.records[at + HEADER_LEN..at + HEADER_LEN + len]);
        if copied.is_err() {
            self.records.truncate(at);
            return copied;
        }
        self.messages += 1;
        Ok(())
    }
}

/// Bytes a message of `len` bytes takes in a packed frame.
fn record_len(len: usize) -> usize {
    HEADER_LEN + len.next_multiple_of(PACK_ALIGN)
}

/// The messages of a packed frame's records, each its header and payload;
/// `None` if the records are malformed.
pub(in crate::transport::ib) fn unpack(records: &[u8]) -> Option<KVec<(Header, &[u8])>> {
    let mut out = KVec::new();
    let mut at = 0;
    while at < records.len() {
        let raw: &[u8; HEADER_LEN] = records.get(at..at + HEADER_LEN)?.try_into().ok()?;
        let header = Header::from_wire(raw)?;
        let len = header.len as usize;
        // Only whole messages of their own: no fragments, maps or packs.
        if len > PAGE_SIZE || header.flags & (FLAG_CONG_BITMAP | FLAG_PACKED) != 0 {
            return None;
        }
        let payload = records.get(at + HEADER_LEN..at + HEADER_LEN + len)?;
        out.push((header, payload), GFP_KERNEL).ok()?;
        at = at.checked_add(record_len(len))?;
    }
    Some(out)
}

impl Rings {
    /// Copies `message` into the pack (posting the pack first if it has no
    /// room): `true` once it is in, and so handed over.
    pub(super) fn pack_message(
        &mut self,
        path: &IbPath,
        header: &Header,
        message: &Message,
    ) -> bool {
        if self.pack.as_ref().is_some_and(|p| !p.fits(message.len())) && !self.post_pack(path) {
            return false;
        }
        if self.pack.is_none() {
            let Ok(records) = KVec::with_capacity(PAGE_SIZE, GFP_ATOMIC) else {
                return false;
            };
            self.pack = Some(Pack {
                records,
                messages: 0,
            });
        }
        // The frame carries the ack and credits; records only what is their own.
        let header = Header {
            ack: 0,
            credit: 0,
            ..*header
        };
        self.pack
            .as_mut()
            .is_some_and(|p| p.push(&header, message).is_ok())
    }

    /// Posts the pack, if there is one, as one frame: `true` unless it still
    /// waits for a send slot or credit (or its post failed: a completion, a
    /// credit update or the watchdog tries again).
    pub(in crate::transport::ib) fn post_pack(&mut self, path: &IbPath) -> bool {
        if self.pack.is_none() {
            return true;
        }
        if !self.has_send_slot(path) {
            return false;
        }
        let Some(pack) = &self.pack else {
            return true;
        };
        let (got, advertise) = self.credits.grab(1);
        if got == 0 {
            return false;
        }
        let header = Header {
            ack: self.last_received,
            credit: advertise,
            len: pack.records.len() as u32,
            flags: FLAG_PACKED,
            ..Header::default()
        };
        let messages = pack.messages;
        if self.post_packed_frame(path, &header).is_err() {
            self.credits.send += got;
            self.credits.posted += u32::from(advertise);
            return false;
        }
        stats::inc(Stat::IbTxPackedFrames);
        stats::add(Stat::IbTxPackedMessages, messages);
        self.pack = None;
        self.ack_wanted = false;
        self.ack_sent = header.ack;
        true
    }

    fn post_packed_frame(&mut self, path: &IbPath, header: &Header) -> Result {
        let records = &self.pack.as_ref().ok_or(EINVAL)?.records;
        let mut page = Page::alloc_page(GFP_ATOMIC)?;
        page.write_slice(0, records)?;
        let page = DmaPage::map(self.device, page, DmaDirection::ToDevice)?;
        let i = self.send_posted % SEND_SLOTS;
        self.send_headers.write(i, &header.to_wire());
        let mut sges = [
            self.send_headers.sge(i, self.lkey),
            sge(page.addr(), records.len(), self.lkey),
        ];
        self.qp.post_send(path.cqe(TAG_SEND), &mut sges, true)?;
        self.send_slots[i] = SendSlot {
            packed: Some(page),
            ..SendSlot::default()
        };
        self.posted(true);
        Ok(())
    }
}

#[kunit_tests(rrds_packed_frames)]
mod tests {
    use super::*;

    fn record(records: &mut KVec<u8>, len: u32, flags: u8, fill: u8) -> Result {
        let header = Header {
            sequence: u64::from(fill),
            len,
            flags,
            ..Header::default()
        };
        records.extend_from_slice(&header.to_wire(), GFP_KERNEL)?;
        let at = records.len();
        records.resize(
            at + (len as usize).next_multiple_of(PACK_ALIGN),
            0,
            GFP_KERNEL,
        )?;
        records[at..at + len as usize].fill(fill);
        Ok(())
    }

    #[test]
    fn records_come_apart_in_order_with_their_payloads() -> Result {
        let mut records = KVec::new();
        record(&mut records, 0, 0, 1)?;
        record(&mut records, 3, 0, 2)?;
        record(&mut records, 64, 0, 3)?;
        assert_eq!(
            records.len(),
            record_len(0) + record_len(3) + record_len(64)
        );
        let messages = unpack(&records);
        assert!(messages.as_ref().is_some_and(|m| m.len() == 3));
        if let Some(messages) = messages {
            for (i, (header, payload)) in messages.iter().enumerate() {
                assert_eq!(header.sequence, i as u64 + 1);
                assert_eq!(payload.len(), header.len as usize);
                assert!(payload.iter().all(|&b| b == i as u8 + 1));
            }
        }
        Ok(())
    }

    #[test]
    fn malformed_records_are_refused() -> Result {
        let mut records = KVec::new();
        record(&mut records, 8, 0, 1)?;
        // A record cut short, in its header or its payload.
        assert!(unpack(&records[..HEADER_LEN - 1]).is_none());
        assert!(unpack(&records[..HEADER_LEN + 4]).is_none());
        // A bad checksum.
        let mut corrupt = KVec::new();
        corrupt.extend_from_slice(&records, GFP_KERNEL)?;
        corrupt[3] ^= 1;
        assert!(unpack(&corrupt).is_none());
        // Packs and congestion maps are never packed themselves.
        for flags in [FLAG_PACKED, FLAG_CONG_BITMAP] {
            let mut nested = KVec::new();
            record(&mut nested, 8, flags, 1)?;
            assert!(unpack(&nested).is_none());
        }
        // Nor is anything larger than a page.
        let mut large = KVec::new();
        record(&mut large, PAGE_SIZE as u32 + 1, 0, 1)?;
        assert!(unpack(&large).is_none());
        Ok(())
    }
}
