// SPDX-License-Identifier: GPL-2.0

//! Clock reads (`ktime_get_ns`, `ktime_get_real_ns`) and an idle sleep.

use super::bindings;

/// `jiffies` in microseconds (saturated at `u32::MAX`).
pub(crate) fn jiffies_to_usecs(jiffies: kernel::ffi::c_ulong) -> u32 {
    // SAFETY: A pure conversion; no preconditions.
    unsafe { bindings::rrds_jiffies_to_usecs(jiffies) }
}

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

/// Sleeps `ms` milliseconds for a kernel worker, interruptibly
/// (`msleep_interruptible`): a worker gets no signals, so it sleeps the
/// whole time, and unlike `fsleep` the sleep does not count towards the
/// host's load average. Process context, no lock held.
pub(crate) fn idle_sleep_ms(ms: u32) {
    // SAFETY: `msleep_interruptible` takes a plain number; the caller is in
    // process context.
    unsafe { kernel::bindings::msleep_interruptible(ms) };
}
