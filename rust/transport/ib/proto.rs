// SPDX-License-Identifier: GPL-2.0

//! The connection private data rdma_cm carries in connect requests and
//! replies: upstream's `struct rds_ib_connect_private` (IPv4, 32 bytes) and
//! `struct rds6_ib_connect_private` (IPv6, 56 bytes), big-endian fields.
//! See Documentation/reference/upstream-rds-ib-protocol.md.

use crate::addr::v4_mapped;

/// rdma_cm port of IPv4 connections (upstream's `RDS_PORT`).
pub(crate) const PORT_V4: u16 = 18634;
/// rdma_cm port of IPv6 connections (upstream's `RDS_CM_PORT`).
pub(crate) const PORT_V6: u16 = 16385;

/// Protocol 3.1, the version upstream speaks and accepts.
pub(crate) const PROTOCOL_MAJOR: u8 = 3;
pub(crate) const PROTOCOL_MINOR: u8 = 1;
/// Upstream's `RDS_IB_SUPPORTED_PROTOCOLS`: the minor versions it accepts.
const MINOR_MASK: u16 = 0x0003;

/// rrds only, in upstream's `ripc_reserved1` (upstream sends zero and
/// ignores it): the sender takes packed frames (`ring::FLAG_PACKED`).
pub(crate) const FEATURE_PACKED: u8 = 0x01;
/// rrds only, likewise: the sender's receive buffers hold two pages, so a
/// frame may carry that much payload (`ring::FRAME_PAGES`).
pub(crate) const FEATURE_LARGE_FRAMES: u8 = 0x02;

const V4_LEN: usize = 32;
const V6_LEN: usize = 56;

/// The private data of either form, in host order; addresses 16 bytes
/// (IPv4 as `::ffff:a.b.c.d`).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ConnectPrivate {
    pub(crate) saddr: [u8; 16],
    pub(crate) daddr: [u8; 16],
    pub(crate) major: u8,
    pub(crate) minor: u8,
    pub(crate) tos: u8,
    pub(crate) ack_seq: u64,
    /// Receive buffers the sender posted: the initial send credits of the
    /// other side; 0 turns flow control off.
    pub(crate) credit: u32,
    /// rrds only, in the structure's tail padding (upstream sends and ignores
    /// zeroes): which incarnation of the sender's connection state this is,
    /// so a peer can tell a restarted one from a reconnecting one; 0: unknown.
    pub(crate) incarnation: u32,
    /// rrds only: the `FEATURE_*` bits of what the sender takes.
    pub(crate) features: u8,
}

fn is_v4(addr: &[u8; 16]) -> bool {
    addr[..12] == v4_mapped([0; 4])[..12]
}

impl ConnectPrivate {
    /// A new connection's data for protocol 3.1.
    pub(crate) fn new(
        saddr: [u8; 16],
        daddr: [u8; 16],
        tos: u8,
        ack_seq: u64,
        credit: u32,
        incarnation: u32,
        features: u8,
    ) -> Self {
        Self {
            saddr,
            daddr,
            major: PROTOCOL_MAJOR,
            minor: PROTOCOL_MINOR,
            tos,
            ack_seq,
            credit,
            incarnation,
            features,
        }
    }

    /// Encodes into `out`; returns the length (32 for IPv4, 56 for IPv6).
    pub(crate) fn encode(&self, out: &mut [u8; V6_LEN]) -> usize {
        *out = [0; V6_LEN];
        let at = if is_v4(&self.saddr) && is_v4(&self.daddr) {
            out[0..4].copy_from_slice(&self.saddr[12..]);
            out[4..8].copy_from_slice(&self.daddr[12..]);
            8
        } else {
            out[0..16].copy_from_slice(&self.saddr);
            out[16..32].copy_from_slice(&self.daddr);
            32
        };
        out[at] = self.major;
        out[at + 1] = self.minor;
        out[at + 2..at + 4].copy_from_slice(&MINOR_MASK.to_be_bytes());
        out[at + 4] = self.tos;
        out[at + 5] = self.features;
        out[at + 8..at + 16].copy_from_slice(&self.ack_seq.to_be_bytes());
        out[at + 16..at + 20].copy_from_slice(&self.credit.to_be_bytes());
        out[at + 20..at + 24].copy_from_slice(&self.incarnation.to_be_bytes());
        at + 24
    }

    /// Decodes private data of `v6` form (the listener's family decides, as
    /// upstream's two listeners do). `None` if it is too short.
    pub(crate) fn decode(raw: &[u8], v6: bool) -> Option<Self> {
        let (len, at) = if v6 { (V6_LEN, 32) } else { (V4_LEN, 8) };
        // Peers may send more (newer versions append fields); never less.
        let raw = raw.get(..len)?;
        let (saddr, daddr) = if v6 {
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&raw[0..16]);
            d.copy_from_slice(&raw[16..32]);
            (s, d)
        } else {
            (
                v4_mapped([raw[0], raw[1], raw[2], raw[3]]),
                v4_mapped([raw[4], raw[5], raw[6], raw[7]]),
            )
        };
        let mut ack = [0u8; 8];
        ack.copy_from_slice(&raw[at + 8..at + 16]);
        Some(Self {
            saddr,
            daddr,
            major: raw[at],
            minor: raw[at + 1],
            tos: raw[at + 4],
            features: raw[at + 5],
            ack_seq: u64::from_be_bytes(ack),
            credit: u32::from_be_bytes([raw[at + 16], raw[at + 17], raw[at + 18], raw[at + 19]]),
            incarnation: u32::from_be_bytes([
                raw[at + 20],
                raw[at + 21],
                raw[at + 22],
                raw[at + 23],
            ]),
        })
    }

    /// Whether we speak the peer's version (major 3; minor 0 or 1).
    pub(crate) fn compatible(&self) -> bool {
        self.major == PROTOCOL_MAJOR && self.minor <= PROTOCOL_MINOR
    }
}

/// Private data buffer large enough for either form.
pub(crate) type PrivateBuf = [u8; V6_LEN];

#[kernel::macros::kunit_tests(rrds_connect_private)]
mod tests {
    use super::*;

    fn v4(last: u8) -> [u8; 16] {
        v4_mapped([10, 254, 9, last])
    }

    #[test]
    fn ipv4_form_is_upstreams_32_bytes() {
        let data = ConnectPrivate::new(v4(1), v4(2), 5, 0x0102_0304_0506_0708, 256, 7, 3);
        let mut out = [0xaa; V6_LEN];
        assert_eq!(data.encode(&mut out), V4_LEN);
        assert!(out[0..8] == [10, 254, 9, 1, 10, 254, 9, 2]);
        // major, minor, the accepted minors (big-endian), TOS, features.
        assert!(out[8..14] == [3, 1, 0, 3, 5, 3]);
        assert!(out[16..24] == [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(out[24..28] == [0, 0, 1, 0]);
        assert!(out[28..32] == [0, 0, 0, 7]);
        // The rest of the buffer is cleared.
        assert!(out[V4_LEN..].iter().all(|&b| b == 0));
        assert!(ConnectPrivate::decode(&out[..V4_LEN], false) == Some(data));
    }

    #[test]
    fn ipv6_form_is_upstreams_56_bytes() {
        let mut saddr = [0u8; 16];
        saddr[0] = 0xfd;
        saddr[15] = 1;
        let mut daddr = saddr;
        daddr[15] = 2;
        let data = ConnectPrivate::new(saddr, daddr, 0, 9, 512, 0, FEATURE_PACKED);
        let mut out = [0; V6_LEN];
        assert_eq!(data.encode(&mut out), V6_LEN);
        assert!(out[0..16] == saddr);
        assert!(out[16..32] == daddr);
        assert!(out[32..34] == [PROTOCOL_MAJOR, PROTOCOL_MINOR]);
        assert!(ConnectPrivate::decode(&out, true) == Some(data));
    }

    #[test]
    fn short_data_is_refused_and_longer_data_read() {
        let data = ConnectPrivate::new(v4(1), v4(2), 0, 1, 2, 3, 0);
        let mut out = [0; V6_LEN];
        let len = data.encode(&mut out);
        assert!(ConnectPrivate::decode(&out[..len - 1], false).is_none());
        assert!(ConnectPrivate::decode(&out[..len], true).is_none());
        // Newer peers may append fields: read as far as we know.
        assert!(ConnectPrivate::decode(&out, false) == Some(data));
    }

    #[test]
    fn only_protocol_3_0_and_3_1_are_compatible() {
        let mut data = ConnectPrivate::new(v4(1), v4(2), 0, 0, 0, 0, 0);
        assert!(data.compatible());
        data.minor = 0;
        assert!(data.compatible());
        data.minor = 2;
        assert!(!data.compatible());
        data.minor = 1;
        data.major = 4;
        assert!(!data.compatible());
    }
}
