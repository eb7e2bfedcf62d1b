// SPDX-License-Identifier: GPL-2.0

//! Test hooks: the debugfs knobs with which the selftests hold or fail a
//! path (`rrds/loopback_hold`, `xmit_hold`, `regqp_fail`, ...).

use kernel::{
    prelude::*,
    sync::atomic::{
        AtomicFlag,
        Relaxed, //
    },
};

/// Reads a debugfs knob's `0` or `1` (surrounding whitespace allowed);
/// anything else is EINVAL.
pub(crate) fn read_knob(reader: &mut kernel::uaccess::UserSliceReader) -> Result<bool> {
    let mut buf = [0u8; 4];
    let n = reader.len().min(buf.len());
    reader.read_slice(&mut buf[..n])?;
    match buf[..n].trim_ascii() {
        b"1" => Ok(true),
        b"0" => Ok(false),
        _ => Err(EINVAL),
    }
}

/// A point where a test can make the code pause (a debugfs knob, `1` to
/// arm, `0` to let it go on): the next task to reach it waits there until
/// the knob is cleared, at most `max_ms`, and reads of the knob say
/// whether one is waiting.
pub(crate) struct Hold {
    armed: AtomicFlag,
    holding: AtomicFlag,
    max_ms: u32,
}

impl Hold {
    pub(crate) const fn new(max_ms: u32) -> Self {
        Self {
            armed: AtomicFlag::new(false),
            holding: AtomicFlag::new(false),
            max_ms,
        }
    }

    /// Whether the hold is armed.
    pub(crate) fn is_armed(&self) -> bool {
        self.armed.load(Relaxed)
    }

    /// Waits here while the knob is set. Process context.
    pub(crate) fn pause(&self) {
        if !self.is_armed() {
            return;
        }
        self.holding.store(true, Relaxed);
        let mut waited = 0;
        while self.armed.load(Relaxed) && waited < self.max_ms {
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(10));
            waited += 10;
        }
        self.armed.store(false, Relaxed);
        self.holding.store(false, Relaxed);
    }

    /// debugfs write: `1` arms the hold, `0` releases it.
    pub(crate) fn store(&self, reader: &mut kernel::uaccess::UserSliceReader) -> Result {
        self.armed.store(read_knob(reader)?, Relaxed);
        Ok(())
    }

    /// debugfs read: whether the hold is armed, and whether a task waits in it.
    pub(crate) fn show(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        f.write_fmt(fmt!(
            "{} {}\n",
            u8::from(self.is_armed()),
            u8::from(self.holding.load(Relaxed))
        ))
    }
}
