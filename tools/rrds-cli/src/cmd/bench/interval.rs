// SPDX-License-Identifier: GPL-2.0-only
//! `--interval SECONDS`: a line every SECONDS of the run under way, as
//! rds-stress prints one a second: what the sending ends did in that
//! interval (messages sent, RDMA operations issued, round trips or
//! registration cycles done), the rates, the mean time of a round trip or
//! cycle, and the process's CPU use.
//!
//! The measurement loops add to a [`Meter`] (atomics, only when
//! `--interval` is given); a thread of its own wakes at each interval's
//! end, takes the counts and prints. The counts are the sending ends',
//! where a `--connect` client has them too; the run's own row still has
//! the receivers' counts.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::PoisonError;
use std::thread;
use std::thread::JoinHandle;
use std::time::Duration;
use std::time::Instant;

use super::cpu::CpuClock;
use super::Kind;

/// What the measurement loops count, since the last look.
#[derive(Debug, Default)]
pub struct Meter {
    msgs: AtomicU64,
    bytes: AtomicU64,
    /// Round trips or cycles timed, and their total time.
    timed: AtomicU64,
    time_ns: AtomicU64,
}

/// What a [`Meter`] counted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    pub msgs: u64,
    pub bytes: u64,
    pub timed: u64,
    pub time_ns: u64,
}

impl Meter {
    /// `msgs` messages or operations of `bytes` bytes in all.
    pub fn count(&self, msgs: u64, bytes: u64) {
        self.msgs.fetch_add(msgs, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// One round trip or cycle that took `time`.
    pub fn time(&self, time: Duration) {
        self.msgs.fetch_add(1, Ordering::Relaxed);
        self.timed.fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
        self.time_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The counts so far, starting again from 0.
    fn take(&self) -> Counts {
        Counts {
            msgs: self.msgs.swap(0, Ordering::Relaxed),
            bytes: self.bytes.swap(0, Ordering::Relaxed),
            timed: self.timed.swap(0, Ordering::Relaxed),
            time_ns: self.time_ns.swap(0, Ordering::Relaxed),
        }
    }
}

/// One interval of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    pub kind: Kind,
    pub size: usize,
    pub run: u32,
    /// Seconds into the run at the interval's start and end.
    pub start_s: f64,
    pub end_s: f64,
    pub counts: Counts,
    /// The process's CPU use over the interval, in percent.
    pub cpu_percent: Option<f64>,
}

impl Tick {
    fn per_sec(&self, count: f64) -> Option<f64> {
        let secs = self.end_s - self.start_s;
        (secs > 0.0).then(|| count / secs)
    }

    /// Messages (operations, round trips, cycles) per second.
    pub fn msgs_per_sec(&self) -> Option<f64> {
        self.per_sec(self.counts.msgs as f64)
    }

    /// 10^6 bytes per second: rate and RDMA runs only.
    pub fn mb_per_sec(&self) -> Option<f64> {
        match self.kind {
            Kind::Rate | Kind::RdmaWrite | Kind::RdmaRead => {
                self.per_sec(self.counts.bytes as f64 / 1e6)
            }
            Kind::Latency | Kind::Register => None,
        }
    }

    /// The mean round trip or cycle of the interval, in µs.
    pub fn lat_mean_us(&self) -> Option<f64> {
        (self.counts.timed > 0).then(|| self.counts.time_ns as f64 / self.counts.timed as f64 / 1e3)
    }
}

/// The run under way.
struct Current {
    kind: Kind,
    size: usize,
    run: u32,
    started: Instant,
    /// The last interval's end (at first the run's start).
    last: Instant,
    cpu: CpuClock,
}

struct State {
    current: Option<Current>,
    quit: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The interval lines of a benchmark: one thread, for all its runs.
pub struct Intervals {
    meter: Arc<Meter>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Intervals {
    /// Hands each interval of `every` to `print` (on a thread of its own).
    pub fn new(every: Duration, print: impl FnMut(&Tick) + Send + 'static) -> Self {
        let meter = Arc::new(Meter::default());
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                current: None,
                quit: false,
            }),
            wake: Condvar::new(),
        });
        let thread = {
            let (meter, shared) = (Arc::clone(&meter), Arc::clone(&shared));
            thread::Builder::new()
                .name("bench-interval".to_string())
                .spawn(move || tick(&shared, &meter, every, print))
                .ok()
        };
        Self {
            meter,
            shared,
            thread,
        }
    }

    /// What the measurement loops count into.
    pub fn meter(&self) -> Arc<Meter> {
        Arc::clone(&self.meter)
    }

    /// A run begins: its intervals count from now.
    pub fn start(&self, kind: Kind, size: usize, run: u32) {
        let mut state = lock(&self.shared);
        self.meter.take();
        let now = Instant::now();
        state.current = Some(Current {
            kind,
            size,
            run,
            started: now,
            last: now,
            cpu: CpuClock::start(),
        });
        self.shared.wake.notify_all();
    }

    /// The run ended: no more lines for it (a last, partial interval is
    /// not printed; the run's row follows).
    pub fn stop(&self) {
        lock(&self.shared).current = None;
        self.shared.wake.notify_all();
    }
}

impl Drop for Intervals {
    fn drop(&mut self) {
        lock(&self.shared).quit = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread: waits for each interval's end and prints it.
fn tick(shared: &Shared, meter: &Meter, every: Duration, mut print: impl FnMut(&Tick)) {
    let mut state = lock(shared);
    while !state.quit {
        let Some(current) = state.current.as_mut() else {
            state = shared
                .wake
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            continue;
        };
        let due = current.last + every;
        let now = Instant::now();
        if now < due {
            state = shared
                .wake
                .wait_timeout(state, due - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            continue;
        }
        // Printed with the lock held: a run cannot end or begin meanwhile.
        let line = Tick {
            kind: current.kind,
            size: current.size,
            run: current.run,
            start_s: (current.last - current.started).as_secs_f64(),
            end_s: (now - current.started).as_secs_f64(),
            counts: meter.take(),
            cpu_percent: current.cpu.percent(),
        };
        current.last = now;
        current.cpu = CpuClock::start();
        print(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn rates_over_the_interval() {
        let tick = Tick {
            kind: Kind::Rate,
            size: 1000,
            run: 1,
            start_s: 1.0,
            end_s: 3.0,
            counts: Counts {
                msgs: 500,
                bytes: 500_000,
                timed: 0,
                time_ns: 0,
            },
            cpu_percent: Some(50.0),
        };
        assert_eq!(tick.msgs_per_sec(), Some(250.0));
        assert_eq!(tick.mb_per_sec(), Some(0.25));
        assert_eq!(tick.lat_mean_us(), None);
        let latency = Tick {
            kind: Kind::Latency,
            counts: Counts {
                msgs: 4,
                bytes: 0,
                timed: 4,
                time_ns: 100_000,
            },
            ..tick
        };
        assert_eq!(latency.msgs_per_sec(), Some(2.0));
        assert_eq!(latency.mb_per_sec(), None);
        assert_eq!(latency.lat_mean_us(), Some(25.0));
    }

    #[test]
    fn meter_counts_and_starts_again() {
        let meter = Meter::default();
        meter.count(2, 128);
        meter.time(Duration::from_micros(10));
        let counts = meter.take();
        assert_eq!(
            counts,
            Counts {
                msgs: 3,
                bytes: 128,
                timed: 1,
                time_ns: 10_000
            }
        );
        assert_eq!(meter.take(), Counts::default());
    }

    #[test]
    fn a_line_per_interval_of_the_run_under_way() {
        let (tx, rx) = mpsc::channel();
        let intervals = Intervals::new(Duration::from_millis(50), move |tick| {
            let _ = tx.send(tick.clone());
        });
        let meter = intervals.meter();
        intervals.start(Kind::Rate, 64, 2);
        meter.count(10, 640);
        let first = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!((first.kind, first.size, first.run), (Kind::Rate, 64, 2));
        assert_eq!(first.start_s, 0.0);
        assert!(first.end_s >= 0.05, "{first:?}");
        assert_eq!(first.counts.msgs, 10);
        assert_eq!(first.counts.bytes, 640);
        let second = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(second.start_s, first.end_s);
        assert!(second.end_s > second.start_s);
        intervals.stop();
        // Lines already on their way, then none.
        while rx.recv_timeout(Duration::from_millis(200)).is_ok() {}
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        // The next run counts from its own start, without the counts
        // between the runs.
        meter.count(99, 0);
        intervals.start(Kind::Latency, 8, 1);
        meter.time(Duration::from_micros(5));
        let next = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!((next.kind, next.run, next.start_s), (Kind::Latency, 1, 0.0));
        assert_eq!(next.counts.msgs, 1);
        drop(intervals);
    }
}
