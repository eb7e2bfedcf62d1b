// SPDX-License-Identifier: GPL-2.0

//! Copies between byte slices and a `kernel::page::Page`, bounds-checked.
//!
//! rrds writes a page from the CPU only through `&mut Page` (these copies,
//! `MsgHdr::copy_page_from_user`), so while a `&Page` is borrowed nothing
//! on the CPU writes it. Pages a device writes are mapped for it only inside
//! a `DmaPage`, which does not lend its page out.

use kernel::{
    page::Page,
    prelude::*, //
};

/// Byte copies into and out of a page, `kernel::page::Page`'s `write_raw`
/// and `read_raw` on slices.
pub(crate) trait PageBytes {
    /// Copies `src` into the page at `offset`; `EINVAL` (nothing copied) if
    /// it would run past the end of the page.
    fn write_slice(&mut self, offset: usize, src: &[u8]) -> Result;

    /// Fills `dst` from the page at `offset`; `EINVAL` (nothing copied) if it
    /// would run past the end of the page.
    fn read_slice(&self, offset: usize, dst: &mut [u8]) -> Result;
}

impl PageBytes for Page {
    fn write_slice(&mut self, offset: usize, src: &[u8]) -> Result {
        // SAFETY: `src` is valid for reads of `src.len()` bytes. The page is borrowed
        // mutably, so nothing else reads or writes it during the copy (module doc).
        unsafe { self.write_raw(src.as_ptr(), offset, src.len()) }
    }

    fn read_slice(&self, offset: usize, dst: &mut [u8]) -> Result {
        // SAFETY: `dst` is valid for writes of `dst.len()` bytes. The page is borrowed,
        // so nothing writes it during the copy: the CPU only through `&mut Page`, a
        // device only a page a `DmaPage` keeps to itself (module doc).
        unsafe { self.read_raw(dst.as_mut_ptr(), offset, dst.len()) }
    }
}
