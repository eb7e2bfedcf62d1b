// SPDX-License-Identifier: GPL-2.0

//! Bounded, interruptible waits with upstream RDS's errnos.

use kernel::{
    prelude::*,
    sync::{
        lock::{
            Backend,
            Guard, //
        },
        CondVar,
        CondVarTimeoutResult, //
    },
    task::MAX_SCHEDULE_TIMEOUT,
};

/// Waits on `cv`, with `guard` held between checks, until `ready` holds.
///
/// `timeo` is the time left in jiffies (`MAX_SCHEDULE_TIMEOUT` for no limit),
/// updated as time passes. Errors as upstream RDS returns them: `EAGAIN` when
/// there is no time to wait at all (non-blocking), `ETIMEDOUT` when the time
/// runs out, `ERESTARTSYS` on a signal.
pub(crate) fn wait_until<T: ?Sized + Unpin, B: Backend>(
    cv: &CondVar,
    guard: &mut Guard<'_, T, B>,
    timeo: &mut isize,
    mut ready: impl FnMut(&mut T) -> bool,
) -> Result {
    while !ready(&mut *guard) {
        if *timeo == 0 {
            return Err(EAGAIN);
        }
        let wait = if *timeo == MAX_SCHEDULE_TIMEOUT {
            c_ulong::MAX
        } else {
            *timeo as c_ulong
        };
        match cv.wait_interruptible_timeout(guard, wait) {
            CondVarTimeoutResult::Timeout => {
                // One last look: the condition may have become true as time ran out.
                return if ready(&mut *guard) {
                    Ok(())
                } else {
                    Err(ETIMEDOUT)
                };
            }
            CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
            CondVarTimeoutResult::Woken { jiffies } => {
                if *timeo != MAX_SCHEDULE_TIMEOUT {
                    // Never 0 here: 0 would turn a blocking wait into EAGAIN.
                    *timeo = (jiffies as isize).max(1);
                }
            }
        }
    }
    Ok(())
}

/// Sleeps in 10 ms steps until `done` holds, at most `max_ms`; whether it
/// held. For waits on another task that has no wait queue to signal (a
/// teardown, a test hook). Process context.
pub(crate) fn poll_until(max_ms: u32, mut done: impl FnMut() -> bool) -> bool {
    const STEP_MS: u32 = 10;
    let mut waited = 0;
    while !done() {
        if waited >= max_ms {
            return false;
        }
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(STEP_MS.into()));
        waited += STEP_MS;
    }
    true
}
