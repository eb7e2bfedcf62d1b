// SPDX-License-Identifier: GPL-2.0

//! RDS messages: the 48-byte wire header, its extension headers and the
//! payload.
//!
//! The header keeps upstream's layout (net/rds/rds.h `struct rds_header`, all
//! fields big-endian) so that rrds can talk to an in-tree RDS peer over IB.
//! Every transport moves a header and a [`Message`]: the loopback transport
//! encodes the header to its wire form and parses it back, the IB transport
//! sends it with every frame (a page of payload, two towards an rrds peer).

use kernel::{
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
    sync::Arc,
};

use crate::ffi::{
    net::MsgHdr,
    page::PageBytes, //
};

/// Size of the wire header.
pub(crate) const HEADER_LEN: usize = 48;
pub(crate) use crate::limits::MAX_MSG_SIZE;
/// Size of the extension area of the header.
pub(crate) const EXTHDR_LEN: usize = 16;

/// What a queued message costs at least, whatever its length: its `Message`
/// and the queue entry holding it. Send and receive buffers are charged
/// [`charge`], so that a flood of empty or tiny messages fills them as a
/// flood of real data would (upstream charges the payload alone, and a
/// socket that never reads can then hold millions of empty messages).
pub(crate) const MIN_CHARGE: usize = 256;

// The bookkeeping must fit in what a message is charged.
const _: () = assert!(core::mem::size_of::<Message>() + 64 <= MIN_CHARGE);

/// What a message of `len` payload bytes is charged to its sender's send
/// buffer and its receiver's receive queue: messages of at least
/// [`MIN_CHARGE`] bytes are charged their length, as upstream, so congestion
/// thresholds for them are upstream's.
pub(crate) const fn charge(len: usize) -> usize {
    if len < MIN_CHARGE {
        MIN_CHARGE
    } else {
        len
    }
}

/// `h_flags` bits.
pub(crate) mod flags {
    pub(crate) const ACK_REQUIRED: u8 = 0x02;
    pub(crate) const RETRANSMITTED: u8 = 0x04;
}

/// The RDS header, in host order.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) sequence: u64,
    pub(crate) ack: u64,
    pub(crate) len: u32,
    pub(crate) sport: u16,
    pub(crate) dport: u16,
    pub(crate) flags: u8,
    pub(crate) credit: u8,
    pub(crate) exthdr: [u8; EXTHDR_LEN],
}

impl Header {
    /// The header as sent on the wire, with its checksum.
    pub(crate) fn to_wire(self) -> [u8; HEADER_LEN] {
        let mut w = [0u8; HEADER_LEN];
        w[0..8].copy_from_slice(&self.sequence.to_be_bytes());
        w[8..16].copy_from_slice(&self.ack.to_be_bytes());
        w[16..20].copy_from_slice(&self.len.to_be_bytes());
        w[20..22].copy_from_slice(&self.sport.to_be_bytes());
        w[22..24].copy_from_slice(&self.dport.to_be_bytes());
        w[24] = self.flags;
        w[25] = self.credit;
        // 26..30 padding, 30..32 checksum.
        w[32..48].copy_from_slice(&self.exthdr);
        let csum = checksum(&w);
        w[30..32].copy_from_slice(&csum.to_ne_bytes());
        w
    }

    /// Parses a wire header; `None` if its checksum is wrong (0 means "none", as upstream).
    pub(crate) fn from_wire(w: &[u8; HEADER_LEN]) -> Option<Self> {
        let csum = u16::from_ne_bytes([w[30], w[31]]);
        if csum != 0 && checksum(w) != 0 {
            return None;
        }
        let be64 = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&w[o..o + 8]);
            u64::from_be_bytes(b)
        };
        let mut exthdr = [0u8; EXTHDR_LEN];
        exthdr.copy_from_slice(&w[32..48]);
        Some(Self {
            sequence: be64(0),
            ack: be64(8),
            len: u32::from_be_bytes([w[16], w[17], w[18], w[19]]),
            sport: u16::from_be_bytes([w[20], w[21]]),
            dport: u16::from_be_bytes([w[22], w[23]]),
            flags: w[24],
            credit: w[25],
            exthdr,
        })
    }

    /// Adds an extension header after those already present. An extension
    /// that does not fit is left out and `false` returned (upstream drops it
    /// silently too).
    pub(crate) fn add_extension(&mut self, ext: Extension) -> bool {
        let (kind, body, body_len) = ext.encode();
        let mut at = 0;
        while at < EXTHDR_LEN {
            let t = self.exthdr[at];
            if t == 0 {
                break;
            }
            match extension_len(t) {
                Some(n) => at += 1 + n,
                None => return false,
            }
        }
        if at + 1 + body_len > EXTHDR_LEN {
            return false;
        }
        self.exthdr[at] = kind;
        self.exthdr[at + 1..at + 1 + body_len].copy_from_slice(&body[..body_len]);
        true
    }

    /// The extension headers, in order; parsing stops at a type 0, an unknown
    /// type or one that runs past the extension area.
    pub(crate) fn extensions(&self) -> impl Iterator<Item = Extension> + '_ {
        let mut at = 0;
        core::iter::from_fn(move || {
            let t = *self.exthdr.get(at)?;
            let n = extension_len(t)?;
            let body = self.exthdr.get(at + 1..at + 1 + n)?;
            at += 1 + n;
            Extension::decode(t, body)
        })
    }
}

/// Wire lengths of the extension bodies by type (net/rds/message.c), `None`
/// for a type that ends parsing.
fn extension_len(kind: u8) -> Option<usize> {
    match kind {
        ext::VERSION => Some(4),
        ext::RDMA => Some(4),
        ext::RDMA_DEST => Some(8),
        ext::RDMA_BYTES => Some(8),
        ext::NPATHS => Some(2),
        ext::GEN_NUM => Some(4),
        ext::SPORT_IDX => Some(1),
        7 | 9..=15 => Some(0),
        _ => None,
    }
}

/// Extension header types.
mod ext {
    pub(super) const VERSION: u8 = 1;
    pub(super) const RDMA: u8 = 2;
    pub(super) const RDMA_DEST: u8 = 3;
    pub(super) const RDMA_BYTES: u8 = 4;
    pub(super) const NPATHS: u8 = 5;
    pub(super) const GEN_NUM: u8 = 6;
    pub(super) const SPORT_IDX: u8 = 8;
}

/// An extension header (net/rds/rds.h `struct rds_ext_header_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Extension {
    Version(u32),
    Rdma { rkey: u32 },
    RdmaDest { rkey: u32, offset: u32 },
    RdmaBytes { bytes: u32, rflags: u8 },
    Npaths(u16),
    GenNum(u32),
    SportIdx(u8),
}

impl Extension {
    fn encode(self) -> (u8, [u8; 8], usize) {
        let mut b = [0u8; 8];
        match self {
            Self::Version(v) => {
                b[..4].copy_from_slice(&v.to_be_bytes());
                (ext::VERSION, b, 4)
            }
            Self::Rdma { rkey } => {
                b[..4].copy_from_slice(&rkey.to_be_bytes());
                (ext::RDMA, b, 4)
            }
            Self::RdmaDest { rkey, offset } => {
                b[..4].copy_from_slice(&rkey.to_be_bytes());
                b[4..].copy_from_slice(&offset.to_be_bytes());
                (ext::RDMA_DEST, b, 8)
            }
            Self::RdmaBytes { bytes, rflags } => {
                b[..4].copy_from_slice(&bytes.to_be_bytes());
                b[4] = rflags;
                (ext::RDMA_BYTES, b, 8)
            }
            Self::Npaths(n) => {
                b[..2].copy_from_slice(&n.to_be_bytes());
                (ext::NPATHS, b, 2)
            }
            Self::GenNum(g) => {
                b[..4].copy_from_slice(&g.to_be_bytes());
                (ext::GEN_NUM, b, 4)
            }
            Self::SportIdx(i) => {
                b[0] = i;
                (ext::SPORT_IDX, b, 1)
            }
        }
    }

    fn decode(kind: u8, body: &[u8]) -> Option<Self> {
        let be32 = |o: usize| -> Option<u32> {
            Some(u32::from_be_bytes(body.get(o..o + 4)?.try_into().ok()?))
        };
        Some(match kind {
            ext::VERSION => Self::Version(be32(0)?),
            ext::RDMA => Self::Rdma { rkey: be32(0)? },
            ext::RDMA_DEST => Self::RdmaDest {
                rkey: be32(0)?,
                offset: be32(4)?,
            },
            ext::RDMA_BYTES => Self::RdmaBytes {
                bytes: be32(0)?,
                rflags: *body.get(4)?,
            },
            ext::NPATHS => Self::Npaths(u16::from_be_bytes([*body.first()?, *body.get(1)?])),
            ext::GEN_NUM => Self::GenNum(be32(0)?),
            ext::SPORT_IDX => Self::SportIdx(*body.first()?),
            _ => return None,
        })
    }
}

/// The Internet checksum of the header (RFC 1071), folded and complemented.
fn checksum(w: &[u8; HEADER_LEN]) -> u16 {
    let mut sum: u32 = 0;
    for pair in w.chunks_exact(2) {
        sum += u32::from(u16::from_ne_bytes([pair[0], pair[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Pages held inline: a message up to this many pages needs no allocation
/// besides its `Arc` and its pages (under the debug kernel each slab
/// allocation costs a stack trace for KASAN and kmemleak).
const INLINE_PAGES: usize = 4;

/// A message's payload, in pages (what the IB transport maps for DMA, one
/// fragment per page). Shared (`Arc`) between the sender's connection queue
/// and the receiver's socket queue, never copied inside the kernel; the
/// header travels beside it by value.
///
/// # Invariants
///
/// The payload is `len.div_ceil(PAGE_SIZE)` pages: the first in `inline`
/// (all `Some` before any `None`), the rest in `more`. `len <= MAX_MSG_SIZE`.
pub(crate) struct Message {
    len: usize,
    inline: [Option<Page>; INLINE_PAGES],
    more: KVec<Page>,
    /// The RDMA operation posted ahead of the message (`RDS_CMSG_RDMA_ARGS`).
    /// Boxed: most messages have none, and a message's size is what every
    /// queued message costs (see [`MIN_CHARGE`]).
    rdma: Option<KBox<crate::rdma::RdmaOp>>,
}

impl Message {
    /// An empty message (pings, pongs).
    pub(crate) fn empty() -> Result<Arc<Self>> {
        Ok(Arc::new(
            Message {
                len: 0,
                inline: [const { None }; INLINE_PAGES],
                more: KVec::new(),
                rdma: None,
            },
            GFP_KERNEL,
        )?)
    }

    /// A message of the next `len` bytes of a sendmsg caller's data.
    pub(crate) fn from_user(
        msg: &mut MsgHdr,
        len: usize,
        rdma: Option<KBox<crate::rdma::RdmaOp>>,
    ) -> Result<Arc<Self>> {
        if len > MAX_MSG_SIZE {
            return Err(EMSGSIZE);
        }
        let count = len.div_ceil(PAGE_SIZE);
        // Charged to the sender's memory cgroup: it is what the sender causes.
        let mut inline = [const { None }; INLINE_PAGES];
        let mut more = KVec::new();
        if count > INLINE_PAGES {
            more.reserve(count - INLINE_PAGES, GFP_KERNEL_ACCOUNT)?;
        }
        let mut left = len;
        for i in 0..count {
            let chunk = left.min(PAGE_SIZE);
            let mut page = Page::alloc_page(GFP_KERNEL_ACCOUNT)?;
            msg.copy_page_from_user(&mut page, chunk)?;
            match inline.get_mut(i) {
                Some(slot) => *slot = Some(page),
                None => more.push(page, GFP_KERNEL_ACCOUNT)?,
            }
            left -= chunk;
        }
        // INVARIANT: `count` pages, inline first, in order.
        Ok(Arc::new(
            Message {
                len,
                inline,
                more,
                rdma,
            },
            GFP_KERNEL_ACCOUNT,
        )?)
    }

    /// A message holding a copy of `bytes` (congestion maps). Process context.
    pub(crate) fn from_kernel(bytes: &[u8]) -> Result<Arc<Self>> {
        let mut assembly = Assembly::new(bytes.len())?;
        for chunk in bytes.chunks(PAGE_SIZE) {
            let mut page = Page::alloc_page(GFP_KERNEL)?;
            page.write_slice(0, chunk)?;
            assembly.push(page, chunk.len())?;
        }
        assembly.finish()
    }

    /// Copies the payload into `out` (as much as fits).
    pub(crate) fn copy_to_kernel(&self, out: &mut [u8]) -> Result {
        let mut at = 0;
        for page in self.pages() {
            let n = (out.len() - at).min(PAGE_SIZE).min(self.len - at);
            if n == 0 {
                break;
            }
            page.read_slice(0, &mut out[at..at + n])?;
            at += n;
        }
        Ok(())
    }

    /// The RDMA operation the message carries, if any.
    pub(crate) fn rdma(&self) -> Option<&crate::rdma::RdmaOp> {
        self.rdma.as_deref()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The payload's pages, in order.
    pub(crate) fn pages(&self) -> impl Iterator<Item = &Page> {
        Iterator::chain(
            self.inline.iter().map_while(Option::as_ref),
            self.more.iter(),
        )
    }

    /// Copies the first `len` bytes of the payload to a recvmsg caller.
    pub(crate) fn copy_to_user(&self, msg: &mut MsgHdr, len: usize) -> Result {
        let mut left = len.min(self.len);
        for page in self.pages() {
            if left == 0 {
                break;
            }
            let chunk = left.min(PAGE_SIZE);
            msg.copy_page_to_user(page, chunk)?;
            left -= chunk;
        }
        Ok(())
    }
}

/// A message being reassembled from received fragments (IB), page by page.
pub(crate) struct Assembly {
    len: usize,
    count: usize,
    inline: [Option<Page>; INLINE_PAGES],
    more: KVec<Page>,
}

impl Assembly {
    /// Room for a message of `len` bytes; `None` if `len` is over the limit.
    pub(crate) fn new(len: usize) -> Result<Self> {
        if len > MAX_MSG_SIZE {
            return Err(EMSGSIZE);
        }
        let mut more = KVec::new();
        let pages = len.div_ceil(PAGE_SIZE);
        if pages > INLINE_PAGES {
            more.reserve(pages - INLINE_PAGES, GFP_KERNEL)?;
        }
        Ok(Self {
            len,
            count: 0,
            inline: [const { None }; INLINE_PAGES],
            more,
        })
    }

    /// How many more pages complete the message.
    pub(crate) fn missing(&self) -> usize {
        self.len.div_ceil(PAGE_SIZE) - self.count
    }

    /// Appends the next page of payload, holding `bytes`: a whole page, but
    /// for the last one's remainder (else EINVAL: a short fragment would hand
    /// on stale bytes of its page).
    pub(crate) fn push(&mut self, page: Page, bytes: usize) -> Result {
        let expected = self
            .len
            .saturating_sub(self.count * PAGE_SIZE)
            .min(PAGE_SIZE);
        if self.missing() == 0 || bytes != expected {
            return Err(EINVAL);
        }
        match self.inline.get_mut(self.count) {
            Some(slot) => *slot = Some(page),
            None => self.more.push(page, GFP_KERNEL)?,
        }
        self.count += 1;
        Ok(())
    }

    /// The message, once every page is in.
    pub(crate) fn finish(self) -> Result<Arc<Message>> {
        if self.missing() != 0 {
            return Err(EINVAL);
        }
        // INVARIANT: `len.div_ceil(PAGE_SIZE)` pages, inline first, in order.
        Ok(Arc::new(
            Message {
                len: self.len,
                inline: self.inline,
                more: self.more,
                rdma: None,
            },
            GFP_KERNEL,
        )?)
    }
}

/// The wire format against known vectors (in the test kernel, KUnit runs
/// them when the module loads: `module_test`'s `kunit_suites_pass`).
#[kunit_tests(rrds_wire)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            sequence: 0x0102_0304_0506_0708,
            ack: 9,
            len: 4097,
            sport: 0x1234,
            dport: 18634,
            flags: flags::ACK_REQUIRED,
            credit: 3,
            exthdr: [0; EXTHDR_LEN],
        }
    }

    #[test]
    fn header_fields_are_big_endian_at_upstreams_offsets() {
        let w = header().to_wire();
        assert!(w[..8] == [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(w[8..16] == [0, 0, 0, 0, 0, 0, 0, 9]);
        assert!(w[16..20] == [0, 0, 0x10, 0x01]);
        assert!(w[20..22] == [0x12, 0x34]);
        assert!(w[22..24] == [0x48, 0xca]);
        assert_eq!(w[24], flags::ACK_REQUIRED);
        assert_eq!(w[25], 3);
        assert!(w[26..30] == [0; 4]);
    }

    #[test]
    fn header_round_trips_and_a_flipped_bit_fails_the_checksum() {
        let h = header();
        let w = h.to_wire();
        assert!(Header::from_wire(&w) == Some(h));
        for byte in [0, 20, 25, 47] {
            let mut corrupt = w;
            corrupt[byte] ^= 1;
            assert!(Header::from_wire(&corrupt).is_none());
        }
        // A zero checksum means "none" (upstream): accepted as is.
        let mut unchecked = w;
        unchecked[30] = 0;
        unchecked[31] = 0;
        unchecked[0] ^= 0x80;
        assert!(Header::from_wire(&unchecked).is_some_and(|p| p.sequence == 0x8102_0304_0506_0708));
    }

    #[test]
    fn extensions_are_kept_in_order_until_full() {
        let mut h = header();
        let dest = Extension::RdmaDest {
            rkey: 0xdead_beef,
            offset: 42,
        };
        assert!(h.add_extension(dest));
        assert!(h.add_extension(Extension::Npaths(8)));
        // 16 bytes: RDMA_DEST (1 + 8) and NPATHS (1 + 2) leave no room for 1 + 5.
        assert!(!h.add_extension(Extension::RdmaBytes {
            bytes: 1,
            rflags: 1
        }));
        let w = h.to_wire();
        assert_eq!(w[32], ext::RDMA_DEST);
        let parsed = Header::from_wire(&w);
        assert!(parsed == Some(h));
        let mut exts = h.extensions();
        assert!(exts.next() == Some(dest));
        assert!(exts.next() == Some(Extension::Npaths(8)));
        assert!(exts.next().is_none());
    }
}
