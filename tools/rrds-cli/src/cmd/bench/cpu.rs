// SPDX-License-Identifier: GPL-2.0-only
//! The process's CPU use: user and system time (`getrusage(RUSAGE_SELF)`,
//! every thread) as a percentage of the wall time it took, so 100% is one
//! CPU busy and the sum over threads can exceed it. Kernel work done
//! outside the process's threads (softirq, kernel threads: much of an RDS
//! transport's completion handling) is not in it.

use std::time::Duration;
use std::time::Instant;

/// User plus system time of every thread of the process so far.
fn used() -> Option<Duration> {
    // SAFETY: rusage is plain data, all zeroes valid; getrusage fills it.
    let usage = unsafe {
        let mut usage: libc::rusage = core::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return None;
        }
        usage
    };
    let time = |tv: libc::timeval| {
        Duration::from_secs(u64::try_from(tv.tv_sec).ok()?)
            .checked_add(Duration::from_micros(u64::try_from(tv.tv_usec).ok()?))
    };
    time(usage.ru_utime)?.checked_add(time(usage.ru_stime)?)
}

/// CPU and wall time from a starting point.
#[derive(Clone, Copy, Debug)]
pub struct CpuClock {
    wall: Instant,
    cpu: Option<Duration>,
}

impl CpuClock {
    /// Starts counting now.
    pub fn start() -> Self {
        Self {
            wall: Instant::now(),
            cpu: used(),
        }
    }

    /// The CPU time used since [`CpuClock::start`] as a percentage of the
    /// wall time since; `None` if getrusage failed or no time passed.
    pub fn percent(&self) -> Option<f64> {
        percent(self.cpu?, used()?, self.wall.elapsed())
    }
}

/// `after - before` CPU time over `wall`, in percent.
fn percent(before: Duration, after: Duration, wall: Duration) -> Option<f64> {
    let wall = wall.as_secs_f64();
    (wall > 0.0).then(|| 100.0 * after.saturating_sub(before).as_secs_f64() / wall)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_of_wall_time() {
        let ms = Duration::from_millis;
        assert_eq!(percent(ms(100), ms(600), ms(1000)), Some(50.0));
        // Two busy threads.
        assert_eq!(percent(ms(0), ms(2000), ms(1000)), Some(200.0));
        assert_eq!(percent(ms(5), ms(5), ms(0)), None);
        assert_eq!(percent(ms(9), ms(5), ms(10)), Some(0.0));
    }

    #[test]
    fn busy_time_shows() {
        let clock = CpuClock::start();
        let before = used().unwrap();
        // Spin until the process has used 20 ms more (however loaded the
        // machine), or give up after a while.
        let give_up = Instant::now() + Duration::from_secs(60);
        let mut spins = 0u64;
        while used().unwrap() < before + Duration::from_millis(20) && Instant::now() < give_up {
            spins = std::hint::black_box(spins + 1);
        }
        let used = clock.percent().unwrap();
        assert!(used > 0.0, "{used}");
    }
}
