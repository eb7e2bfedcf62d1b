// SPDX-License-Identifier: GPL-2.0

//! Memory registration: user pages pinned long-term, the scatterlist that
//! maps them for one device, fast-registration MRs (`IB_MR_TYPE_MEM_REG`),
//! and the `IB_WR_REG_MR` / `IB_WR_LOCAL_INV` / RDMA work requests.

use core::{
    marker::PhantomData,
    ptr::{
        self,
        NonNull, //
    },
};
use kernel::{
    alloc::KVVec,
    error::{
        from_err_ptr,
        to_result, //
    },
    page::PAGE_SIZE,
    prelude::*,
};

use super::{
    bindings,
    ib_cq::{
        CompletionHandler,
        Cqe,
        QpRef, //
    },
    ib_device::DeviceRef,
    ib_pd::ProtectionDomain,
    random, //
};

/// Pages of the calling process pinned with `FOLL_LONGTERM`, charged to its
/// `RLIMIT_MEMLOCK` the way `mlock` is: EPERM when the limit is 0 and the
/// caller lacks `CAP_IPC_LOCK`, ENOMEM past a non-zero limit.
///
/// # Invariants
///
/// Every entry of `pages` is pinned (`pin_user_pages_fast`) and unpinned only
/// by `drop`; `mm` is counted (`mmgrab`) and charged `charged` pages of
/// `pinned_vm`, both released by `drop`.
pub(crate) struct PinnedPages {
    pages: KVVec<*mut bindings::page>,
    mm: NonNull<bindings::mm_struct>,
    /// Pages charged to `mm`: the whole request, even when fewer got pinned.
    charged: usize,
    writable: bool,
}

// SAFETY: Pinned pages and a counted mm may be released from any process-context thread.
unsafe impl Send for PinnedPages {}
// SAFETY: Shared references only read the page pointers.
unsafe impl Sync for PinnedPages {}

impl PinnedPages {
    /// Pins `count` pages from the page-aligned user address `start`, for the
    /// device to write to as well when `writable`. Process context.
    pub(crate) fn pin(start: u64, count: usize, writable: bool) -> Result<Self> {
        // SAFETY: Reads the caller's rlimit; no other requirement.
        let limit = unsafe { bindings::rrds_rlimit_memlock() } / PAGE_SIZE as u64;
        // SAFETY: `capable` only reads the caller's credentials.
        let privileged = || unsafe { bindings::capable(bindings::CAP_IPC_LOCK as c_int) };
        if limit == 0 && !privileged() {
            return Err(EPERM);
        }
        // SAFETY: Counts the caller's mm, if it has one.
        let mm = NonNull::new(unsafe { bindings::rrds_current_mm_grab() }).ok_or(EFAULT)?;
        let charge = count as i64;
        // SAFETY: `mm` is counted just above.
        let pinned = unsafe { bindings::rrds_mm_pinned_add(mm.as_ptr(), charge) };
        let undo = || {
            // SAFETY: `mm` is counted and was charged `charge` pages above.
            unsafe {
                bindings::rrds_mm_pinned_add(mm.as_ptr(), -charge);
                bindings::rrds_mmdrop(mm.as_ptr());
            }
        };
        if pinned as u64 > limit && !privileged() {
            undo();
            return Err(ENOMEM);
        }
        let mut pages = KVVec::with_capacity(count, GFP_KERNEL).inspect_err(|_| undo())?;
        let mut flags = bindings::FOLL_LONGTERM;
        if writable {
            flags |= bindings::FOLL_WRITE;
        }
        // SAFETY: `pages` has room for `count` entries, which the call fills in.
        let got = unsafe {
            bindings::pin_user_pages_fast(
                start as c_ulong,
                count as c_int,
                flags,
                pages.as_mut_ptr(),
            )
        };
        if got < 0 {
            undo();
            return Err(Error::from_errno(got));
        }
        // SAFETY: The call initialised the first `got` entries, got <= count.
        unsafe { pages.inc_len(got as usize) };
        // INVARIANT: all pinned; `mm` counted and charged `count` pages.
        let pinned = Self {
            pages,
            mm,
            charged: count,
            writable,
        };
        if pinned.pages.len() != count {
            // Part of the range is not mapped: unpinned and uncharged on drop.
            return Err(EFAULT);
        }
        Ok(pinned)
    }

    pub(crate) fn count(&self) -> usize {
        self.pages.len()
    }

    /// Page `i`, pinned while `self` lives.
    pub(crate) fn page(&self, i: usize) -> Option<PinnedPage<'_>> {
        let page = NonNull::new(*self.pages.get(i)?)?;
        // INVARIANT: An entry of `pages`, pinned until `self` drops.
        Some(PinnedPage(page, PhantomData))
    }
}

/// A page of a [`PinnedPages`], borrowed from it.
///
/// # Invariants
///
/// `self.0` is pinned for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct PinnedPage<'a>(NonNull<bindings::page>, PhantomData<&'a PinnedPages>);

impl PinnedPage<'_> {
    pub(super) fn as_ptr(self) -> *mut bindings::page {
        self.0.as_ptr()
    }
}

impl Drop for PinnedPages {
    fn drop(&mut self) {
        // SAFETY: The pages are pinned and `mm` is counted and charged `count` pages
        // (type invariant); the device wrote to them only if `writable`, so that
        // decides whether they are dirtied. Process context (may sleep).
        unsafe {
            if !self.pages.is_empty() {
                bindings::unpin_user_pages_dirty_lock(
                    self.pages.as_mut_ptr(),
                    self.pages.len() as c_ulong,
                    self.writable,
                );
            }
            bindings::rrds_mm_pinned_add(self.mm.as_ptr(), -(self.charged as i64));
            bindings::rrds_mmdrop(self.mm.as_ptr());
        }
    }
}

/// Which way the device moves the data of a mapping.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SgDirection {
    /// The device may read and write it.
    Bidirectional,
}

impl SgDirection {
    fn raw(self) -> bindings::dma_data_direction {
        match self {
            SgDirection::Bidirectional => bindings::dma_data_direction_DMA_BIDIRECTIONAL,
        }
    }
}

/// `len` bytes from `offset` into the first of some pinned pages, described
/// by a scatterlist mapped for DMA by one device: one entry per page, the
/// first starting at `offset`, the last ending with the range.
///
/// # Invariants
///
/// `table[..table.len()]` is an initialised scatterlist mapped with
/// `ib_dma_map_sg` on `device` (which stays registered until `drop`, the
/// owner's teardown order) and unmapped only by `drop`; the pages it names
/// stay pinned while it exists (the owner keeps them).
pub(crate) struct MappedSg {
    table: KVVec<bindings::scatterlist>,
    device: *mut bindings::ib_device,
    direction: SgDirection,
}

// SAFETY: The mapping may be released from any thread.
unsafe impl Send for MappedSg {}
// SAFETY: Shared references only read the table.
unsafe impl Sync for MappedSg {}

impl MappedSg {
    /// Maps `len` bytes from `offset` (< PAGE_SIZE) into the first of `pages`.
    pub(crate) fn map(
        device: DeviceRef,
        pages: &PinnedPages,
        offset: usize,
        len: usize,
        direction: SgDirection,
    ) -> Result<Self> {
        let device = device.as_ptr();
        let count = pages.count();
        if len == 0 || offset >= PAGE_SIZE || offset + len > count * PAGE_SIZE {
            return Err(EINVAL);
        }
        let mut table = KVVec::with_capacity(count, GFP_KERNEL)?;
        for _ in 0..count {
            table.push(bindings::scatterlist::default(), GFP_KERNEL)?;
        }
        // SAFETY: `table` holds `count` entries.
        unsafe { bindings::sg_init_table(table.as_mut_ptr(), count as c_uint) };
        let (mut start, mut left) = (offset, len);
        for (entry, page) in table.iter_mut().zip(pages.pages.iter()) {
            let chunk = left.min(PAGE_SIZE - start);
            // SAFETY: `entry` is an initialised entry; `page` is pinned.
            unsafe { bindings::rrds_sg_set_page(entry, *page, chunk as c_uint, start as c_uint) };
            left -= chunk;
            start = 0;
        }
        // SAFETY: `device` is registered (the caller's); the table is initialised.
        let mapped = unsafe {
            bindings::rrds_ib_dma_map_sg(
                device,
                table.as_mut_ptr(),
                count as c_int,
                direction.raw(),
            )
        };
        if mapped as usize != count {
            if mapped > 0 {
                // SAFETY: Mapped just above; the entry count is the one passed to map.
                unsafe {
                    bindings::rrds_ib_dma_unmap_sg(
                        device,
                        table.as_mut_ptr(),
                        count as c_int,
                        direction.raw(),
                    )
                };
            }
            return Err(ENOMEM);
        }
        // INVARIANT: mapped above.
        Ok(Self {
            table,
            device,
            direction,
        })
    }

    pub(crate) fn entries(&self) -> usize {
        self.table.len()
    }
}

impl Drop for MappedSg {
    fn drop(&mut self) {
        // SAFETY: Mapped on `device` with this entry count (type invariant).
        unsafe {
            bindings::rrds_ib_dma_unmap_sg(
                self.device,
                self.table.as_mut_ptr(),
                self.table.len() as c_int,
                self.direction.raw(),
            )
        };
    }
}

/// A fast-registration MR of up to `max_pages` pages.
///
/// # Invariants
///
/// `mr` came from `ib_alloc_mr` on a PD that outlives it (the device record's,
/// freed after every MR in `remove`) and is deregistered only by `drop`.
pub(crate) struct FastRegMr {
    mr: NonNull<bindings::ib_mr>,
    max_pages: u32,
}

// SAFETY: MRs may be deregistered from any process-context thread.
unsafe impl Send for FastRegMr {}
// SAFETY: Shared references only read the keys.
unsafe impl Sync for FastRegMr {}

impl FastRegMr {
    pub(crate) fn alloc(pd: &ProtectionDomain, max_pages: u32) -> Result<Self> {
        // SAFETY: `pd` is live.
        let mr = unsafe {
            bindings::ib_alloc_mr(
                pd.as_raw(),
                bindings::ib_mr_type_IB_MR_TYPE_MEM_REG,
                max_pages,
            )
        };
        let mr = from_err_ptr(mr)?;
        // INVARIANT: allocated just above on `pd`.
        NonNull::new(mr)
            .map(|mr| Self { mr, max_pages })
            .ok_or(ENOMEM)
    }

    pub(crate) fn max_pages(&self) -> u32 {
        self.max_pages
    }

    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: The MR is live (type invariant).
        unsafe { (*self.mr.as_ptr()).rkey }
    }

    /// Moves the key to a new version (`ib_update_fast_reg_key`): keys of
    /// earlier registrations of this MR no longer match once the next REG_MR
    /// completes. The key byte is random, never the current one (upstream's
    /// `ib_inc_rkey` adds one), so a peer that once held a key of this MR
    /// cannot tell its next one.
    pub(crate) fn next_key(&mut self) {
        let key = self.rkey();
        let mut byte = u32::from(random::u8());
        if byte == key & 0xff {
            byte = (byte + 1) & 0xff;
        }
        let next = (key & 0xffff_ff00) | byte;
        // SAFETY: The MR is live and not being registered (the owner's state machine);
        // only the key byte changes, as ib_update_fast_reg_key does.
        unsafe {
            (*self.mr.as_ptr()).lkey = next;
            (*self.mr.as_ptr()).rkey = next;
        }
    }

    /// Maps `sg` into the MR at the I/O virtual address `iova`: the MR then
    /// covers exactly `[iova, iova + sg.len())`.
    pub(crate) fn map(&mut self, sg: &MappedSg, iova: u64) -> Result {
        if sg.entries() > self.max_pages as usize {
            return Err(EMSGSIZE);
        }
        let mr = self.mr.as_ptr();
        // SAFETY: The MR is live and not in use by the device (the owner's state
        // machine); the scatterlist is mapped on the MR's device.
        let n = unsafe {
            bindings::ib_map_mr_sg(
                mr,
                sg.table.as_ptr().cast_mut(),
                sg.entries() as c_int,
                ptr::null_mut(),
                PAGE_SIZE as c_uint,
            )
        };
        if n < 0 {
            return Err(Error::from_errno(n));
        }
        if n as usize != sg.entries() {
            return Err(EINVAL);
        }
        // SAFETY: As above; the REG_MR work request reads the IOVA (zero-based: the
        // start of the first page is 0).
        unsafe { (*mr).iova = iova };
        Ok(())
    }
}

impl Drop for FastRegMr {
    fn drop(&mut self) {
        // SAFETY: Allocated by `alloc`, not yet deregistered (type invariant); no work
        // request on it is outstanding (the owner's state machine).
        let ret = unsafe { bindings::ib_dereg_mr_user(self.mr.as_ptr(), ptr::null_mut()) };
        if ret != 0 {
            pr_warn!("ib_dereg_mr: {}\n", ret);
        }
    }
}

/// Access an MR grants the peer.
pub(crate) const ACCESS_REMOTE_READ: i32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ as i32;
/// Write access for the peer (iWARP also requires it of an RDMA READ sink).
pub(crate) const ACCESS_REMOTE_WRITE: i32 = (bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE)
    as i32;

/// Atomic access for the peer (on devices with atomics).
pub(crate) const ACCESS_REMOTE_ATOMIC: i32 =
    bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC as i32;

/// A signalled request of `opcode` over `sges`, completing to `cqe`.
fn signalled_wr<T: CompletionHandler>(
    cqe: &Cqe<T>,
    sges: &mut [bindings::ib_sge],
    opcode: u32,
) -> bindings::ib_send_wr {
    let mut wr = unsignalled_wr(cqe, sges, opcode);
    wr.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED as c_int;
    wr
}

/// A request that raises a completion only if it fails or is flushed: a
/// later signalled one's success implies its own (RC completes in order).
fn unsignalled_wr<T: CompletionHandler>(
    cqe: &Cqe<T>,
    sges: &mut [bindings::ib_sge],
    opcode: u32,
) -> bindings::ib_send_wr {
    bindings::ib_send_wr {
        __bindgen_anon_1: bindings::ib_send_wr__bindgen_ty_1 {
            wr_cqe: cqe.as_raw(),
        },
        sg_list: sges.as_mut_ptr(),
        num_sge: sges.len() as c_int,
        opcode,
        ..Default::default()
    }
}

fn post(qp: &QpRef, wr: &bindings::ib_send_wr) -> Result {
    let mut bad = ptr::null();
    // SAFETY: The QP is live (QpRef invariant); the request and what it points to
    // are valid for the call (drivers copy them before returning).
    to_result(unsafe { bindings::rrds_ib_post_send(qp.as_raw(), wr, &mut bad) })
}

impl QpRef {
    /// Posts a signalled `IB_WR_REG_MR` of `mr` with its current key and
    /// mapping, granting `access` (`ACCESS_*`), completing to `cqe`.
    pub(crate) fn post_reg_mr<T: CompletionHandler>(
        &self,
        cqe: &Cqe<T>,
        mr: &FastRegMr,
        access: i32,
    ) -> Result {
        let wr = bindings::ib_reg_wr {
            wr: bindings::ib_send_wr {
                __bindgen_anon_1: bindings::ib_send_wr__bindgen_ty_1 {
                    wr_cqe: cqe.as_raw(),
                },
                opcode: bindings::ib_wr_opcode_IB_WR_REG_MR,
                send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
                ..Default::default()
            },
            mr: mr.mr.as_ptr(),
            key: mr.rkey(),
            access,
        };
        cqe.posting(true, || post(self, &wr.wr))
    }

    /// Posts a signalled `IB_WR_LOCAL_INV` of `rkey`, completing to `cqe`.
    pub(crate) fn post_local_inv<T: CompletionHandler>(&self, cqe: &Cqe<T>, rkey: u32) -> Result {
        let wr = bindings::ib_send_wr {
            __bindgen_anon_1: bindings::ib_send_wr__bindgen_ty_1 {
                wr_cqe: cqe.as_raw(),
            },
            opcode: bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
            send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
            ex: bindings::ib_send_wr__bindgen_ty_2 {
                invalidate_rkey: rkey,
            },
            ..Default::default()
        };
        cqe.posting(true, || post(self, &wr))
    }

    /// Posts one RDMA WRITE (or READ) of `sges`, gathered (or scattered) in
    /// order, to (from) the peer's `remote_addr` under `rkey`, completing to
    /// `cqe`: always if `signalled`, else only in error; if `fenced`, it
    /// starts only once the QP's earlier READs and atomics have completed
    /// (`IB_SEND_FENCE`). The caller keeps `sges` within the QP's
    /// `max_send_sge` (and the device's `max_sge_rd` for a READ).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post_rdma<T: CompletionHandler>(
        &self,
        cqe: &Cqe<T>,
        sges: &mut [bindings::ib_sge],
        write: bool,
        remote_addr: u64,
        rkey: u32,
        signalled: bool,
        fenced: bool,
    ) -> Result {
        let opcode = if write {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
        } else {
            bindings::ib_wr_opcode_IB_WR_RDMA_READ
        };
        let mut wr = bindings::ib_rdma_wr {
            wr: if signalled {
                signalled_wr(cqe, sges, opcode)
            } else {
                unsignalled_wr(cqe, sges, opcode)
            },
            remote_addr,
            rkey,
        };
        if fenced {
            wr.wr.send_flags |= bindings::ib_send_flags_IB_SEND_FENCE as c_int;
        }
        cqe.posting(signalled, || post(self, &wr.wr))
    }

    /// Posts one signalled atomic operation (`opcode`, an `IB_WR_*ATOMIC*`)
    /// on the peer's 8 bytes at `remote_addr` under `rkey`; the original
    /// value lands in `sge`. Completes to `cqe`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post_atomic<T: CompletionHandler>(
        &self,
        cqe: &Cqe<T>,
        sge: &mut bindings::ib_sge,
        opcode: u32,
        remote_addr: u64,
        rkey: u32,
        values: [u64; 4],
    ) -> Result {
        let wr = bindings::ib_atomic_wr {
            wr: signalled_wr(cqe, core::slice::from_mut(sge), opcode),
            remote_addr,
            compare_add: values[0],
            swap: values[1],
            compare_add_mask: values[2],
            swap_mask: values[3],
            rkey,
        };
        cqe.posting(true, || post(self, &wr.wr))
    }
}
