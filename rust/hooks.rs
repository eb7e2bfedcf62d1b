// SPDX-License-Identifier: GPL-2.0

//! Test hooks: the debugfs knobs with which the selftests hold or fail a
//! path (`rrds/loopback_hold`, `xmit_hold`, `regqp_fail`, ...).

use kernel::prelude::*;

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
