// SPDX-License-Identifier: GPL-2.0-only
//! Seeded payload patterns, so a receiver can check every byte it gets.

/// Offsets into the base pattern repeat with this period (a prime, so
/// neighbouring messages never share a payload).
const PERIOD: usize = 251;

/// The payloads of one message size.
///
/// Message `seq` is a window of a seeded pseudo-random buffer, starting at
/// `seq % PERIOD`; messages of 8 bytes or more start with `seq` itself
/// (little endian), so a lost or reordered message shows too. Checking is a
/// comparison, cheap enough for 1 MiB messages.
pub struct Pattern {
    base: Vec<u8>,
    size: usize,
}

impl Pattern {
    pub fn new(seed: u64, size: usize) -> Self {
        // xorshift64*: any non-zero state works; fold the seed so 0 does too.
        let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
        let mut base = Vec::with_capacity(size + PERIOD + 8);
        while base.len() < size + PERIOD {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            base.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
        }
        Self { base, size }
    }

    fn window(&self, seq: u64) -> &[u8] {
        // The remainder is below PERIOD, so it fits in usize.
        let start = (seq % PERIOD as u64) as usize;
        &self.base[start..start + self.size]
    }

    /// Writes message `seq` into `buf` (`buf.len()` must be the size).
    pub fn fill(&self, seq: u64, buf: &mut [u8]) {
        buf.copy_from_slice(self.window(seq));
        if let Some(head) = buf.get_mut(..8) {
            head.copy_from_slice(&seq.to_le_bytes());
        }
    }

    /// The sequence number a message of 8 bytes or more carries.
    pub fn sequence(&self, buf: &[u8]) -> Option<u64> {
        let head = buf.get(..8)?;
        let mut seq = [0u8; 8];
        seq.copy_from_slice(head);
        Some(u64::from_le_bytes(seq))
    }

    /// Whether `buf` is exactly message `seq`.
    pub fn matches(&self, seq: u64, buf: &[u8]) -> bool {
        if buf.len() != self.size {
            return false;
        }
        let expected = self.window(seq);
        if self.size >= 8 {
            buf[..8] == seq.to_le_bytes() && buf[8..] == expected[8..]
        } else {
            buf == expected
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(p: &Pattern, seq: u64, size: usize) -> Vec<u8> {
        let mut buf = vec![0; size];
        p.fill(seq, &mut buf);
        buf
    }

    #[test]
    fn filled_message_matches() {
        for size in [0, 1, 7, 8, 9, 64, 8192] {
            let p = Pattern::new(1, size);
            for seq in [0, 1, 250, 251, 1 << 40] {
                assert!(
                    p.matches(seq, &message(&p, seq, size)),
                    "size {size} seq {seq}"
                );
            }
        }
    }

    #[test]
    fn flipped_byte_does_not_match() {
        let p = Pattern::new(7, 64);
        for at in [0, 8, 63] {
            let mut buf = message(&p, 3, 64);
            buf[at] ^= 1;
            assert!(!p.matches(3, &buf), "byte {at}");
        }
    }

    #[test]
    fn other_sequence_number_does_not_match() {
        let p = Pattern::new(7, 64);
        assert!(!p.matches(4, &message(&p, 3, 64)));
        let small = Pattern::new(7, 4);
        assert!(!small.matches(4, &message(&small, 3, 4)));
    }

    #[test]
    fn sequence_is_read_from_the_head() {
        let p = Pattern::new(7, 64);
        assert_eq!(p.sequence(&message(&p, 1234, 64)), Some(1234));
        let small = Pattern::new(7, 7);
        assert_eq!(small.sequence(&message(&small, 3, 7)), None);
    }

    #[test]
    fn wrong_length_does_not_match() {
        let p = Pattern::new(7, 64);
        assert!(!p.matches(0, &message(&p, 0, 64)[..63]));
    }

    #[test]
    fn seeds_give_different_payloads() {
        let a = Pattern::new(1, 64);
        let b = Pattern::new(2, 64);
        assert_ne!(message(&a, 0, 64), message(&b, 0, 64));
        let zero = Pattern::new(0, 64);
        assert!(message(&zero, 0, 64)[8..].iter().any(|&b| b != 0));
    }
}
