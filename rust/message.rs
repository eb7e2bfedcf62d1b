// SPDX-License-Identifier: GPL-2.0

//! RDS messages: the 48-byte wire header and the payload.
//!
//! The header keeps upstream's layout (net/rds/rds.h `struct rds_header`, all
//! fields big-endian) so that rrds can talk to an in-tree RDS peer over IB.
//! Every transport moves a [`Message`]; the loopback transport hands it over
//! whole, the IB transport will cut it into [`FRAG_SIZE`] fragments.

use kernel::prelude::*;

/// Size of the wire header.
pub(crate) const HEADER_LEN: usize = 48;
/// Largest message payload (upstream's `RDS_MAX_MSG_SIZE`).
pub(crate) const MAX_MSG_SIZE: usize = 1 << 20;
/// Fragment size on the wire.
#[allow(dead_code)]
pub(crate) const FRAG_SIZE: usize = 4096;

/// `h_flags` bits.
#[allow(dead_code)]
pub(crate) mod flags {
    pub(crate) const CONG_BITMAP: u8 = 0x01;
    pub(crate) const ACK_REQUIRED: u8 = 0x02;
    pub(crate) const RETRANSMITTED: u8 = 0x04;
    pub(crate) const EXTHDR_EXTENSION: u8 = 0x20;
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
    pub(crate) exthdr: [u8; 16],
}

impl Header {
    /// The header as sent on the wire, with its checksum.
    #[allow(dead_code)]
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
    #[allow(dead_code)]
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
        let mut exthdr = [0u8; 16];
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

/// A message: header and payload. Shared (`Arc`) between the sender's queues
/// and the receiver's queue, never copied inside the kernel.
pub(crate) struct Message {
    pub(crate) header: Header,
    pub(crate) payload: KVVec<u8>,
}
