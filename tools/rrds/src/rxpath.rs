// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Receive-path latency (`SO_RDS_MSG_RXPATH_LATENCY`): with it set, every
//! datagram comes with how long it spent in the spans of the receive path
//! the socket asked for (`RDS_CMSG_RXPATH_LATENCY`, `struct
//! rds_cmsg_rx_trace`), in nanoseconds of the kernel's trace clock.

use std::time::Duration;

/// Spans of the receive path (`enum rds_message_rxpath_latency`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RxPathSpan {
    /// From the header's arrival to the datagram's start
    /// (`RDS_MSG_RX_HDR_TO_DGRAM_START`).
    HeaderToDatagram,
    /// Reassembling the datagram (`RDS_MSG_RX_DGRAM_REASSEMBLE`).
    Reassembly,
    /// From the datagram's delivery to its socket to this receive
    /// (`RDS_MSG_RX_DGRAM_DELIVERED`).
    Delivered,
}

/// Spans one socket can trace at most (`RDS_MSG_RX_DGRAM_TRACE_MAX`).
pub const MAX_SPANS: usize = 3;

impl RxPathSpan {
    fn to_raw(self) -> u8 {
        match self {
            Self::HeaderToDatagram => 0,
            Self::Reassembly => 1,
            Self::Delivered => 2,
        }
    }

    fn from_raw(raw: u8) -> Option<Self> {
        match raw {
            0 => Some(Self::HeaderToDatagram),
            1 => Some(Self::Reassembly),
            2 => Some(Self::Delivered),
            _ => None,
        }
    }
}

/// `struct rds_rx_trace_so` asking for `spans`; `None` for more than
/// [`MAX_SPANS`].
pub(crate) fn encode_request(spans: &[RxPathSpan]) -> Option<[u8; 1 + MAX_SPANS]> {
    if spans.len() > MAX_SPANS {
        return None;
    }
    let mut raw = [0u8; 1 + MAX_SPANS];
    raw[0] = spans.len() as u8;
    for (slot, span) in raw[1..].iter_mut().zip(spans) {
        *slot = span.to_raw();
    }
    Some(raw)
}

/// The receive path's latency of one datagram: each span the socket asked
/// for, in the order it asked, and the time spent in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxPathLatency(pub Vec<(RxPathSpan, Duration)>);

impl RxPathLatency {
    /// Decodes `struct rds_cmsg_rx_trace`: a count, the spans, padding to
    /// 8 bytes, then a native-endian `u64` of nanoseconds per span.
    /// `None` if it is short or names a span this crate does not know.
    pub(crate) fn decode(data: &[u8]) -> Option<Self> {
        const STAMPS_AT: usize = 8;
        let count = usize::from(*data.first()?);
        if count > MAX_SPANS || data.len() < STAMPS_AT + 8 * MAX_SPANS {
            return None;
        }
        let mut spans = Vec::with_capacity(count);
        for i in 0..count {
            let span = RxPathSpan::from_raw(data[1 + i])?;
            let at = STAMPS_AT + 8 * i;
            let ns = u64::from_ne_bytes(data[at..at + 8].try_into().ok()?);
            spans.push((span, Duration::from_nanos(ns)));
        }
        Some(Self(spans))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(spans: &[u8], ns: [u64; 3]) -> Vec<u8> {
        let mut data = vec![0u8; 32];
        data[0] = spans.len() as u8;
        data[1..1 + spans.len()].copy_from_slice(spans);
        for (i, v) in ns.iter().enumerate() {
            data[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_ne_bytes());
        }
        data
    }

    #[test]
    fn a_trace_decodes_in_the_order_asked() {
        let got = RxPathLatency::decode(&trace(&[2, 0], [1500, 20, 0])).unwrap();
        assert_eq!(
            got.0,
            [
                (RxPathSpan::Delivered, Duration::from_nanos(1500)),
                (RxPathSpan::HeaderToDatagram, Duration::from_nanos(20)),
            ]
        );
        assert_eq!(RxPathLatency::decode(&trace(&[], [0; 3])).unwrap().0, []);
    }

    #[test]
    fn a_bad_trace_is_refused() {
        // Too many spans, an unknown span, too short.
        assert!(RxPathLatency::decode(&trace(&[0, 1, 2, 0][..3], [0; 3])).is_some());
        let mut four = trace(&[0, 1, 2], [0; 3]);
        four[0] = 4;
        assert!(RxPathLatency::decode(&four).is_none());
        assert!(RxPathLatency::decode(&trace(&[3], [0; 3])).is_none());
        assert!(RxPathLatency::decode(&trace(&[0], [0; 3])[..31]).is_none());
        assert!(RxPathLatency::decode(&[]).is_none());
    }

    #[test]
    fn a_request_is_rds_rx_trace_so() {
        let raw = encode_request(&[RxPathSpan::Reassembly, RxPathSpan::Delivered]).unwrap();
        assert_eq!(raw, [2, 1, 2, 0]);
        assert!(encode_request(&[RxPathSpan::Delivered; 4]).is_none());
        assert_eq!(encode_request(&[]).unwrap(), [0; 4]);
    }
}
