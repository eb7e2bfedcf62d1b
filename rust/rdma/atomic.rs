// SPDX-License-Identifier: GPL-2.0

//! Atomic operations (`RDS_CMSG_ATOMIC_*`, `RDS_CMSG_MASKED_ATOMIC_*`):
//! their arguments, and the one-chunk operation that carries them.

// The rest of `RdmaOp`: mod.rs's types and imports.
use super::*;

/// The values of an atomic operation (upstream's `rm->atomic`).
#[derive(Clone, Copy)]
pub(crate) struct Atomic64 {
    /// `IB_WR_ATOMIC_*` or `IB_WR_MASKED_ATOMIC_*`.
    pub(crate) opcode: u32,
    pub(crate) compare_add: u64,
    pub(crate) swap: u64,
    pub(crate) compare_add_mask: u64,
    pub(crate) swap_mask: u64,
}

/// `sizeof(struct rds_atomic_args)`.
pub(crate) const ATOMIC_ARGS_LEN: usize = 72;

impl Atomic64 {
    /// Decodes the values of `struct rds_atomic_args` (`args`, at least
    /// `ATOMIC_ARGS_LEN` bytes) for cmsg type `kind`.
    ///
    /// Returns them and whether the device can do that form (`atomic`,
    /// `masked`: whether it has plain and masked atomics).
    ///
    /// # Errors
    ///
    /// `EINVAL` if `kind` is no atomic operation.
    fn decode(kind: u32, args: &[u8], (atomic, masked): (bool, bool)) -> Result<(Self, bool)> {
        let (u0, u1, u2, u3) = (
            ne_u64(args, 24),
            ne_u64(args, 32),
            ne_u64(args, 40),
            ne_u64(args, 48),
        );
        let (opcode, compare_add, swap, compare_add_mask, swap_mask, supported) = match kind {
            bindings::RDS_CMSG_ATOMIC_FADD => (
                bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
                u0,
                0,
                0,
                0,
                atomic,
            ),
            bindings::RDS_CMSG_ATOMIC_CSWP => (
                bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
                u0,
                u1,
                0,
                0,
                atomic,
            ),
            bindings::RDS_CMSG_MASKED_ATOMIC_FADD => (
                bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD,
                u0,
                0,
                u1,
                0,
                masked,
            ),
            bindings::RDS_CMSG_MASKED_ATOMIC_CSWP => (
                bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP,
                u0,
                u1,
                u2,
                u3,
                masked,
            ),
            _ => return Err(EINVAL),
        };
        let values = Atomic64 {
            opcode,
            compare_add,
            swap,
            compare_add_mask,
            swap_mask,
        };
        Ok((values, supported))
    }
}

impl RdmaOp {
    /// The atomic operation `struct rds_atomic_args` (`args`) of cmsg type
    /// `kind` asks for, as upstream's `rds_cmsg_atomic`: an unaligned local
    /// address is EFAULT. Then a form the device cannot do (`atomic`, `masked`:
    /// whether it has plain and masked atomics) is EOPNOTSUPP, before
    /// anything is pinned or posted. Process context.
    pub(crate) fn from_atomic(
        kind: u32,
        args: &[u8],
        sock: Arc<dyn RdmaStatusSink>,
        recverr: bool,
        (atomic, masked): (bool, bool),
    ) -> Result<Self> {
        if args.len() < ATOMIC_ARGS_LEN {
            return Err(EINVAL);
        }
        let cookie = ne_u64(args, 0);
        let (local_addr, remote_addr) = (ne_u64(args, 8), ne_u64(args, 16));
        let (flags, token) = (ne_u64(args, 56), ne_u64(args, 64));
        let (values, supported) = Atomic64::decode(kind, args, (atomic, masked))?;
        // Upstream's order: the arguments first, then what the device can do.
        if local_addr % 8 != 0 {
            return Err(EFAULT);
        }
        if !supported {
            return Err(crate::errno::eopnotsupp());
        }
        // The target must be 8-byte aligned too (IB atomics): upstream posts it
        // anyway, and rxe refuses the post, which resets the whole link.
        let remote_addr = remote_addr.wrapping_add(cookie >> 32);
        if remote_addr % 8 != 0 {
            return Err(EINVAL);
        }
        let offset = (local_addr as usize) % PAGE_SIZE;
        let pinned = Pinned::pin(local_addr - offset as u64, 1, true)?;
        let mut op = Self::pending(
            false,
            Some(values),
            remote_addr,
            cookie,
            flags,
            KVec::with_capacity(1, GFP_KERNEL)?,
            KVec::with_capacity(1, GFP_KERNEL)?,
        )?;
        // It moves the 8-byte local result.
        op.bytes = 8;
        op.pages.push(pinned, GFP_KERNEL)?;
        op.chunks.push(
            Chunk {
                vec: 0,
                page: 0,
                offset,
                len: 8,
                remote: 0,
                sink: None,
            },
            GFP_KERNEL,
        )?;
        op.notify = Notify::wanted(flags, token, sock, recverr);
        Ok(op)
    }
}
