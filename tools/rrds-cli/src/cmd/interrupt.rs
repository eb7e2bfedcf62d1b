// SPDX-License-Identifier: GPL-2.0-only
//! Ctrl-C for the commands that run until interrupted (`ping` without
//! `-c`, `bench --duration 0`): SIGINT sets a flag instead of killing the
//! process, the command's loops look at it, stop, and print their summary.
//! A second Ctrl-C, for a stop that takes too long (a wait bounded by
//! `--timeout`), ends the process at once with status 130, as the shell
//! reports a death by SIGINT.

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;
use std::time::Instant;

use super::context;

/// Longest sleep between looks at the flag in [`pause_until`].
const NAP: Duration = Duration::from_millis(50);

/// Set by SIGINT once [`catch_sigint`] is in place.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    // A lock-free atomic is async-signal-safe, and so is _exit.
    if INTERRUPTED.swap(true, Ordering::Relaxed) {
        // SAFETY: _exit ends the process without running anything else.
        unsafe { libc::_exit(130) };
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
    #[test]
    fn sigint_sets_the_flag_and_ends_a_pause() {
        catch_sigint().unwrap();
        // SAFETY: raise() takes no pointers; the handler is installed.
        assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
        assert!(interrupted());
        let start = Instant::now();
        pause_until(start + Duration::from_secs(10));
        assert!(start.elapsed() < Duration::from_secs(1));
        INTERRUPTED.store(false, Ordering::Relaxed);
    }
}
