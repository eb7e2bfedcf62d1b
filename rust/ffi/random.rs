// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's CRNG (`get_random_u16` and friends).

use super::bindings;

/// A random `u8` (`get_random_u8`). Any context.
pub(crate) fn u8() -> u8 {
    // SAFETY: `get_random_u8` has no preconditions.
    unsafe { bindings::get_random_u8() }
}

/// A random `u16` (`get_random_u16`). Any context.
pub(crate) fn u16() -> u16 {
    // SAFETY: `get_random_u16` has no preconditions.
    unsafe { bindings::get_random_u16() }
}

/// A random `u32` (`get_random_u32`). Any context.
pub(crate) fn u32() -> u32 {
    // SAFETY: `get_random_u32` has no preconditions.
    unsafe { bindings::get_random_u32() }
}

/// A random `u64` (`get_random_u64`). Any context.
pub(crate) fn u64() -> u64 {
    // SAFETY: `get_random_u64` has no preconditions.
    unsafe { bindings::get_random_u64() }
}
