// SPDX-License-Identifier: GPL-2.0

//! Clock reads: `ktime_get_ns` and `ktime_get_real_ns`.

use super::bindings;

/// Nanoseconds of `CLOCK_MONOTONIC` (`ktime_get_ns`). Any context.
pub(crate) fn monotonic_ns() -> u64 {
    // SAFETY: `ktime_get_ns` has no preconditions.
    unsafe { bindings::rrds_ktime_get_ns() }
}

/// Nanoseconds of `CLOCK_REALTIME` since the epoch (`ktime_get_real_ns`),
/// as `SO_TIMESTAMP` reports them. Any context.
pub(crate) fn real_ns() -> u64 {
    // SAFETY: `ktime_get_real_ns` has no preconditions.
    unsafe { bindings::rrds_ktime_get_real_ns() }
}
