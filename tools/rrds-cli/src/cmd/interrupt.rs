// SPDX-License-Identifier: GPL-2.0-only
//! Ctrl-C for the commands that run until interrupted (`ping` without
//! `-c`, `bench --duration 0`): SIGINT sets a flag instead of killing the
//! process, the command's loops look at it, stop, and print their summary.
//! A second Ctrl-C, for a stop that takes too long (a wait bounded by
//! `--timeout`), ends the process at once with status 130, as the shell
//! reports a death by SIGINT. A SIGINT that follows the first within
//! [`SAME_CTRL_C`] counts as the same one: `timeout -s INT` sends it to the
//! command and then to the command's process group, so one stop arrives
//! twice.

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;
use std::time::Instant;

use super::context;

/// Longest sleep between looks at the flag in [`pause_until`].
const NAP: Duration = Duration::from_millis(50);

/// SIGINTs closer together than this are one Ctrl-C.
const SAME_CTRL_C: Duration = Duration::from_millis(500);

/// Set by SIGINT once [`catch_sigint`] is in place.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// CLOCK_MONOTONIC in nanoseconds at the first SIGINT, 0 before it.
static FIRST_SIGINT_NS: AtomicU64 = AtomicU64::new(0);

/// CLOCK_MONOTONIC in nanoseconds, never 0.
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write; clock_gettime is
    // async-signal-safe, and CLOCK_MONOTONIC cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let ns = u64::try_from(now.tv_sec).unwrap_or(0) * 1_000_000_000
        + u64::try_from(now.tv_nsec).unwrap_or(0);
    ns.max(1)
}

extern "C" fn on_sigint(_: libc::c_int) {
    // Lock-free atomics and clock_gettime are async-signal-safe, and so
    // is _exit.
    let now = monotonic_ns();
    match FIRST_SIGINT_NS.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => INTERRUPTED.store(true, Ordering::Relaxed),
        Err(first) if now.saturating_sub(first) >= SAME_CTRL_C.as_nanos() as u64 => {
            // SAFETY: _exit ends the process without running anything else.
            unsafe { libc::_exit(130) };
        }
        Err(_) => {}
    }
}

/// Catches SIGINT (Ctrl-C) in the flag [`interrupted`] reads, without
/// `SA_RESTART`, so a `poll` waiting in any thread returns at once (the
/// library's waits take that for a timeout).
pub fn catch_sigint() -> io::Result<()> {
    // SAFETY: sigaction is plain data, all zeroes valid (no flags, empty
    // mask); the handler only swaps an atomic and may call _exit, both
    // async-signal-safe, and has the signature sa_sigaction expects
    // without SA_SIGINFO.
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGINT, &action, core::ptr::null_mut()) != 0 {
            return Err(context(io::Error::last_os_error(), "sigaction(SIGINT)"));
        }
    }
    Ok(())
}

/// Whether Ctrl-C came since [`catch_sigint`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Sleeps until `until`, or until Ctrl-C.
pub fn pause_until(until: Instant) {
    while !interrupted() {
        let now = Instant::now();
        if now >= until {
            return;
        }
        thread::sleep(NAP.min(until - now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test that raises SIGINT: the flag is process-wide.
    /// The second SIGINT is `timeout -s INT`'s copy to the process group:
    /// it must not end the process (this test would die with it).
    #[test]
    fn sigint_sets_the_flag_and_ends_a_pause() {
        catch_sigint().unwrap();
        // SAFETY: raise() takes no pointers; the handler is installed.
        assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
        assert!(interrupted());
        // SAFETY: as above.
        assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
        let start = Instant::now();
        pause_until(start + Duration::from_secs(10));
        assert!(start.elapsed() < Duration::from_secs(1));
        INTERRUPTED.store(false, Ordering::Relaxed);
        FIRST_SIGINT_NS.store(0, Ordering::Relaxed);
    }
}
