// SPDX-License-Identifier: GPL-2.0

//! RDMA operations a message carries (`RDS_CMSG_RDMA_ARGS`) and their
//! status notifications (`RDS_CMSG_RDMA_STATUS`).
//!
//! The operation's local memory is pinned in `sendmsg` (process context)
//! and cut into chunks of at most a page. The IB ring posts them ahead of
//! the message's first fragment on the same RC QP, one SGE per chunk and as
//! many chunks per work request as the device allows (iWARP's `max_sge_rd`
//! is 1), and maps each page only while its request is outstanding (on
//! iWARP a READ's local memory is registered instead, and one READ fills
//! each registered sink: see `SinkRegistration`). An
//! operation runs at most once: one posted on a link that failed before it
//! completed is reported `RDS_RDMA_DROPPED`, and its message is dropped
//! instead of retransmitted, as upstream.

use kernel::{
    impl_has_work, new_work,
    page::PAGE_SIZE,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Full,
            Relaxed, //
        },
        Arc,
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
    workqueue::{
        Work,
        WorkItem, //
    },
};

mod atomic;

pub(crate) use atomic::{
    Atomic64,
    ATOMIC_ARGS_LEN, //
};

use crate::{
    ffi::{
        bindings,
        ib_device::DeviceRef,
        ib_mr::PinnedPage,
        net::ne_u64,
        workqueue, //
    },
    limits::MAX_MSG_SIZE,
    mr::{
        self,
        Pinned,
        Sink, //
    },
};

/// `UIO_MAXIOV`: most local iovecs one operation may have.
const MAX_LOCAL_VECS: u64 = 1024;
/// `sizeof(struct rds_rdma_args)`.
pub(crate) const ARGS_LEN: usize = 56;

const PENDING: u32 = 0;
const POSTED: u32 = 1;
const DONE: u32 = 2;

/// Part of one pinned page: one SGE of a work request.
struct Chunk {
    vec: usize,
    page: usize,
    offset: usize,
    len: usize,
    /// Where in the peer's range it goes (or comes from).
    remote: u64,
    /// The READ sink it fills (an index into `sinks`) and the sink's
    /// address of its first byte: such a chunk is the whole sink.
    sink: Option<(usize, u64)>,
}

/// How an operation's READ sinks are registered, where they must be
/// (iWARP): `register` registers one range of at most `max_pages` pages.
pub(crate) struct SinkRegistration<'a> {
    pub(crate) max_pages: usize,
    pub(crate) register: &'a mut dyn FnMut(u64, u64) -> Result<Sink>,
}

/// A socket that hears how its RDMA operations ended.
pub(crate) trait RdmaStatusSink: Send + Sync {
    /// The operation `token` ended with `status` (an `RDS_RDMA_*` status).
    /// Atomic context.
    fn rdma_status(&self, token: u64, status: i32);
}

/// Who hears how the operation ended.
struct Notify {
    sock: Arc<dyn RdmaStatusSink>,
    token: u64,
    /// `RDS_RDMA_NOTIFY_ME`: every outcome; else (`RDS_RECVERR`) failures only.
    always: bool,
}

impl Notify {
    /// Who hears of an operation with `flags` and `token`: the socket with
    /// `RDS_RDMA_NOTIFY_ME`, or with `RDS_RECVERR` on (failures only).
    fn wanted(
        flags: u64,
        token: u64,
        sock: Arc<dyn RdmaStatusSink>,
        recverr: bool,
    ) -> Option<Self> {
        let always = flags & u64::from(bindings::RDS_RDMA_NOTIFY_ME) != 0;
        (always || recverr).then(|| Notify {
            sock,
            token,
            always,
        })
    }
}

/// One RDMA READ or WRITE, or one atomic operation.
pub(crate) struct RdmaOp {
    write: bool,
    /// An atomic: its one chunk is the 8-byte local result.
    atomic: Option<Atomic64>,
    remote_addr: u64,
    rkey: u32,
    bytes: usize,
    /// `RDS_RDMA_SILENT`: an op of a 0-byte message sends no header.
    silent: bool,
    /// `RDS_RDMA_FENCE`: the message waits for the op to complete.
    fence: bool,
    /// Each local iovec's pinned pages; none for a READ into registered
    /// sinks, whose MRs pin them.
    pages: KVec<Pinned>,
    /// MRs over a READ's local memory, where the device needs them.
    sinks: KVec<Sink>,
    chunks: KVec<Chunk>,
    notify: Option<Notify>,
    /// `PENDING`, `POSTED` (on some link), `DONE` (outcome reported).
    state: Atomic<u32>,
    /// Carries `pages` to the workqueue when the op goes (see `Drop`).
    unpin: Option<Pin<KBox<DeferredUnpin>>>,
}

/// Pages to unpin and sinks to invalidate in process context: a message
/// (and its op) can lose its last reference under a spinlock, and
/// `unpin_user_pages_dirty_lock` and `Sink::drop` sleep. Allocated with the
/// op, so dropping it allocates nothing.
#[pin_data]
struct DeferredUnpin {
    pages: KVec<Pinned>,
    sinks: KVec<Sink>,
    #[pin]
    work: Work<DeferredUnpin>,
}

impl_has_work! {
    impl HasWork<Self> for DeferredUnpin { self.work }
}

impl WorkItem for DeferredUnpin {
    type Pointer = Pin<KBox<DeferredUnpin>>;

    fn run(this: Pin<KBox<DeferredUnpin>>) {
        drop(this);
    }
}

fn new_unpin() -> Result<Pin<KBox<DeferredUnpin>>> {
    KBox::pin_init(
        pin_init!(DeferredUnpin {
            pages: KVec::new(),
            sinks: KVec::new(),
            work <- new_work!("rrds_rdma_unpin"),
        }),
        GFP_KERNEL,
    )
}

/// Reads the `count` local iovecs (`struct rds_iovec`, 16 bytes each) at
/// user address `addr` into kernel memory, once: the operation is built
/// from this copy.
///
/// Returns the iovecs' bytes.
///
/// # Errors
///
/// `EINVAL` for no iovec, `EMSGSIZE` for more than `MAX_LOCAL_VECS`, and
/// those of allocation and of the copy.
fn read_local_vecs(addr: u64, count: u64) -> Result<KVec<u8>> {
    if count == 0 {
        return Err(EINVAL);
    }
    if count > MAX_LOCAL_VECS {
        return Err(EMSGSIZE);
    }
    let count = count as usize;
    let mut raw = KVec::with_capacity(count * 16, GFP_KERNEL)?;
    UserSlice::new(UserPtr::from_addr(addr as usize), count * 16)
        .reader()
        .read_all(&mut raw, GFP_KERNEL)?;
    Ok(raw)
}

impl Drop for RdmaOp {
    fn drop(&mut self) {
        let Some(mut unpin) = self.unpin.take() else {
            return;
        };
        let deferred = unpin.as_mut().project();
        *deferred.pages = core::mem::take(&mut self.pages);
        *deferred.sinks = core::mem::take(&mut self.sinks);
        workqueue::queue().enqueue(unpin);
    }
}

impl RdmaOp {
    /// The operation `struct rds_rdma_args` (`args`, at least `ARGS_LEN`
    /// bytes) asks for, with upstream's checks (`rds_rdma_extra_size`,
    /// `rds_cmsg_rdma_args`). The local iovec array is read from user
    /// memory once and used from that copy. A READ's local memory is
    /// registered through `sinks` when given. Process context.
    pub(crate) fn from_args(
        args: &[u8],
        sock: Arc<dyn RdmaStatusSink>,
        recverr: bool,
        sinks: Option<SinkRegistration<'_>>,
    ) -> Result<Self> {
        if args.len() < ARGS_LEN {
            return Err(EINVAL);
        }
        let cookie = ne_u64(args, 0);
        let (remote_addr, remote_bytes) = (ne_u64(args, 8), ne_u64(args, 16));
        let (local_vec_addr, nr_local) = (ne_u64(args, 24), ne_u64(args, 32));
        let (flags, token) = (ne_u64(args, 40), ne_u64(args, 48));
        let raw = read_local_vecs(local_vec_addr, nr_local)?;
        // At most `MAX_LOCAL_VECS`: `read_local_vecs` checked.
        let nr_local = nr_local as usize;
        let write = flags & u64::from(bindings::RDS_RDMA_READWRITE) != 0;
        // A READ into registered sinks has its pages pinned by the sinks' MRs:
        // pinning them here too would charge them twice.
        let into_sinks = !write && sinks.is_some();
        let mut op = Self::pending(
            write,
            None,
            remote_addr.wrapping_add(cookie >> 32),
            cookie,
            flags,
            KVec::with_capacity(nr_local, GFP_KERNEL)?,
            KVec::new(),
        )?;
        let mut remote = 0u64;
        for vec in 0..nr_local {
            remote = op.add_local_vec(&raw, vec, into_sinks, remote)?;
        }
        if op.bytes as u64 > remote_bytes {
            return Err(EINVAL);
        }
        // Registered once the arguments are known to be good.
        if let (false, Some(reg)) = (write, sinks) {
            op.register_sinks(&raw, reg)?;
        }
        op.notify = Notify::wanted(flags, token, sock, recverr);
        Ok(op)
    }

    /// Returns a pending operation on the peer's `remote_addr` with the key
    /// of `cookie`, `RDS_RDMA_SILENT` and `RDS_RDMA_FENCE` as `flags` say,
    /// over `pages` cut into `chunks`: no bytes counted yet, no sinks and
    /// nobody to notify.
    ///
    /// # Errors
    ///
    /// `ENOMEM` if its deferred unpin cannot be allocated (`pages` and
    /// `chunks` are dropped then).
    fn pending(
        write: bool,
        atomic: Option<Atomic64>,
        remote_addr: u64,
        cookie: u64,
        flags: u64,
        pages: KVec<Pinned>,
        chunks: KVec<Chunk>,
    ) -> Result<Self> {
        Ok(RdmaOp {
            write,
            atomic,
            remote_addr,
            rkey: mr::cookie_key(cookie),
            bytes: 0,
            silent: flags & u64::from(bindings::RDS_RDMA_SILENT) != 0,
            fence: flags & u64::from(bindings::RDS_RDMA_FENCE) != 0,
            pages,
            sinks: KVec::new(),
            chunks,
            notify: None,
            state: Atomic::new(PENDING),
            unpin: Some(new_unpin()?),
        })
    }

    /// Adds local iovec `vec` of `raw` (the copied iovec array): counts its
    /// bytes, pins its pages unless `into_sinks` (a READ into registered
    /// sinks) and cuts it into chunks of at most a page, the first at
    /// `remote` in the peer's range.
    ///
    /// Returns where in the peer's range the next iovec starts.
    ///
    /// # Errors
    ///
    /// `EMSGSIZE` for an iovec longer than a message may be, `EINVAL` if the
    /// operation's length overflows, and those of `mr::pages_in`, of pinning
    /// and of allocation.
    fn add_local_vec(
        &mut self,
        raw: &[u8],
        vec: usize,
        into_sinks: bool,
        mut remote: u64,
    ) -> Result<u64> {
        let (addr, bytes) = (ne_u64(raw, vec * 16), ne_u64(raw, vec * 16 + 8));
        if bytes > MAX_MSG_SIZE as u64 {
            return Err(EMSGSIZE);
        }
        let count = mr::pages_in(addr, bytes)?;
        self.bytes = self.bytes.checked_add(bytes as usize).ok_or(EINVAL)?;
        // A READ writes the local pages.
        let offset = (addr as usize) % PAGE_SIZE;
        if !into_sinks {
            let pinned = Pinned::pin(addr - offset as u64, count, !self.write)?;
            self.pages.push(pinned, GFP_KERNEL)?;
        }
        let (mut left, mut start) = (bytes as usize, offset);
        for page in 0..count {
            let len = left.min(PAGE_SIZE - start);
            self.chunks.push(
                Chunk {
                    vec,
                    page,
                    offset: start,
                    len,
                    remote,
                    sink: None,
                },
                GFP_KERNEL,
            )?;
            left -= len;
            start = 0;
            remote += len as u64;
        }
        Ok(remote)
    }

    /// Registers the READ's local memory through `reg`, each sink at most
    /// `reg.max_pages` pages of one iovec (`raw` holds the iovecs), and
    /// merges each sink's chunks into one: a registered sink is one SGE
    /// however many pages it spans, so one READ fills it.
    fn register_sinks(&mut self, raw: &[u8], reg: SinkRegistration<'_>) -> Result {
        let max_pages = reg.max_pages.max(1);
        let pages = core::mem::take(&mut self.chunks);
        // The first page of the current sink.
        let mut first = 0;
        for chunk in pages {
            if let Some(last) = self.chunks.last_mut() {
                if last.vec == chunk.vec && chunk.page - first < max_pages {
                    last.len += chunk.len;
                    continue;
                }
            }
            let (vec, page, start) = (chunk.vec, chunk.page, chunk.offset);
            let (addr, bytes) = (ne_u64(raw, vec * 16), ne_u64(raw, vec * 16 + 8));
            let base = addr - addr % PAGE_SIZE as u64;
            let from = base + (page * PAGE_SIZE + start) as u64;
            // `pages_in` bounded `addr + bytes`; the sink's end may pass the top
            // of the address space (an address the registration then refuses).
            let to =
                (addr + bytes).min(base.saturating_add(((page + max_pages) * PAGE_SIZE) as u64));
            self.sinks
                .push((reg.register)(from, to - from)?, GFP_KERNEL)?;
            first = page;
            // Zero-based: the sink's first byte is at its offset in its first page.
            let sink = Some((self.sinks.len() - 1, start as u64));
            self.chunks.push(Chunk { sink, ..chunk }, GFP_KERNEL)?;
        }
        Ok(())
    }

    /// The atomic operation, if this is one.
    pub(crate) fn atomic(&self) -> Option<&Atomic64> {
        self.atomic.as_ref()
    }

    /// Bytes the operation moves.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn is_write(&self) -> bool {
        self.write
    }

    /// Whether the operation itself waits for the connection's earlier READs
    /// and atomics (`RDS_RDMA_FENCE` on a WRITE), so that it sends bytes they
    /// fetched. siw refuses a fenced READ, and a READ's message is fenced
    /// anyway (see [`Self::fenced`]).
    pub(crate) fn fences_earlier_ops(&self) -> bool {
        self.fence && self.write && self.atomic.is_none()
    }

    /// Whether the message's first fragment waits for the operation: always
    /// after a READ or an atomic (the peer may reuse its memory once it has
    /// the message; upstream fences any operation only on `RDS_RDMA_FENCE`),
    /// after a WRITE on `RDS_RDMA_FENCE`.
    pub(crate) fn fenced(&self) -> bool {
        self.fence || !self.write
    }

    /// Whether the message goes without a header (`RDS_RDMA_SILENT` on a
    /// 0-byte message, upstream's `all_ops_are_silent`): the peer sees only
    /// the RDMA, and no ack will come for it.
    pub(crate) fn sends_nothing(&self, message_len: usize) -> bool {
        self.silent && message_len == 0
    }

    pub(crate) fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// Chunk `i`: its page, offset and length. `None` for a chunk that is a
    /// registered sink (its pages are the sink MR's: see `chunk_sink`).
    pub(crate) fn chunk(&self, i: usize) -> Option<(PinnedPage<'_>, usize, usize)> {
        let c = self.chunks.get(i)?;
        let page = self.pages.get(c.vec)?.page(c.page)?;
        Some((page, c.offset, c.len))
    }

    /// Chunk `i`'s length and the peer address it moves to (or from).
    pub(crate) fn chunk_extent(&self, i: usize) -> Option<(usize, u64)> {
        let c = self.chunks.get(i)?;
        Some((c.len, self.remote_addr.wrapping_add(c.remote)))
    }

    /// Chunk `i`'s registered sink, if it has one: the address and key its
    /// work request names it with (the chunk may span many pages then).
    pub(crate) fn chunk_sink(&self, i: usize) -> Option<(u64, u32)> {
        let (index, address) = self.chunks.get(i)?.sink?;
        Some((address, self.sinks.get(index)?.lkey()))
    }

    /// Whether a QP of `device` can post the operation: its sinks, if any,
    /// are registered there.
    pub(crate) fn usable_on(&self, device: DeviceRef) -> bool {
        self.sinks.iter().all(|sink| sink.is_on(device))
    }

    pub(crate) fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Whether a link has posted the operation (so it must not be sent again).
    pub(crate) fn was_posted(&self) -> bool {
        self.state.load(Relaxed) != PENDING
    }

    /// Claims the operation for posting: `false` if a link already posted it.
    pub(crate) fn start(&self) -> bool {
        self.state.cmpxchg(PENDING, POSTED, Full).is_ok()
    }

    /// A work request of the operation completed: `last` is its final one.
    /// A flushed request leaves the outcome open (`dropped` reports it).
    pub(crate) fn completed(&self, status: u32, last: bool) {
        let outcome = match status {
            bindings::ib_wc_status_IB_WC_SUCCESS if last => bindings::RDS_RDMA_SUCCESS,
            bindings::ib_wc_status_IB_WC_SUCCESS | bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR => {
                return
            }
            bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR
            | bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR
            | bindings::ib_wc_status_IB_WC_REM_OP_ERR => bindings::RDS_RDMA_REMOTE_ERROR,
            _ => bindings::RDS_RDMA_OTHER_ERROR,
        };
        self.finish(outcome as i32);
    }

    /// The operation will not run (again): one posted on a failed link
    /// without an outcome, never run twice, or one whose message is dropped
    /// before it was posted (the peer restarted, as upstream's
    /// `RDS_MSG_FLUSH`) is reported `RDS_RDMA_DROPPED`.
    pub(crate) fn dropped(&self) {
        self.abandon(bindings::RDS_RDMA_DROPPED as i32);
    }

    /// The message was cancelled (`RDS_CANCEL_SENT_TO`, close) before the
    /// operation had an outcome: `RDS_RDMA_CANCELED`, as upstream.
    pub(crate) fn canceled(&self) {
        self.abandon(bindings::RDS_RDMA_CANCELED as i32);
    }

    /// The operation will not run: reported `status` unless it had an
    /// outcome. One never posted is reported like one that was, and a link
    /// that meets it later does not post it (`start` fails).
    fn abandon(&self, status: i32) {
        let _ = self.state.cmpxchg(PENDING, POSTED, Full);
        self.finish(status);
    }

    fn finish(&self, status: i32) {
        if self.state.cmpxchg(POSTED, DONE, Full).is_err() {
            return;
        }
        if let Some(n) = &self.notify {
            if n.always || status != bindings::RDS_RDMA_SUCCESS as i32 {
                n.sock.rdma_status(n.token, status);
            }
        }
    }
}
