// SPDX-License-Identifier: GPL-2.0

//! The rings' 48-byte header buffers, DMA-mapped a page at a time.

// The rest of `Rings`: ring.rs's types and imports.
use super::*;

/// DMA-mapped 48-byte header buffers, one per slot.
pub(super) struct HeaderArea {
    pages: KVec<DmaPage>,
}

impl HeaderArea {
    pub(super) fn new(device: DeviceRef, count: usize, dir: DmaDirection) -> Result<Self> {
        let n = count.div_ceil(HEADERS_PER_PAGE);
        let mut pages = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            let page = Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?;
            pages.push(DmaPage::map(device, page, dir)?, GFP_KERNEL)?;
        }
        Ok(Self { pages })
    }

    fn locate(&self, i: usize) -> Option<(&DmaPage, usize)> {
        let page = self.pages.get(i / HEADERS_PER_PAGE)?;
        Some((page, (i % HEADERS_PER_PAGE) * HEADER_LEN))
    }

    fn locate_mut(&mut self, i: usize) -> Option<(&mut DmaPage, usize)> {
        let page = self.pages.get_mut(i / HEADERS_PER_PAGE)?;
        Some((page, (i % HEADERS_PER_PAGE) * HEADER_LEN))
    }

    pub(super) fn sge(&self, i: usize, lkey: u32) -> bindings::ib_sge {
        match self.locate(i) {
            Some((page, offset)) => sge(page.addr() + offset as u64, HEADER_LEN, lkey),
            None => sge(0, 0, lkey),
        }
    }

    /// Writes header `i`; the slot is not posted (its owner's invariant).
    pub(super) fn write(&mut self, i: usize, header: &[u8; HEADER_LEN]) {
        if let Some((page, offset)) = self.locate_mut(i) {
            // SAFETY: The slot is not posted, so the device does not touch these bytes.
            let _ = unsafe { page.write_slice(offset, header) };
            page.sync_for_device(PAGE_SIZE);
        }
    }

    /// Reads header `i` after its receive completed.
    pub(super) fn read(&self, i: usize) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        if let Some((page, offset)) = self.locate(i) {
            page.sync_for_cpu(PAGE_SIZE);
            // SAFETY: The receive into the slot completed and it is not posted again
            // yet, so the device does not write these bytes.
            let _ = unsafe { page.read_slice(offset, &mut out) };
        }
        out
    }
}
