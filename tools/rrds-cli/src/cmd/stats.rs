// SPDX-License-Identifier: GPL-2.0-only
//! Summary statistics over benchmark samples.

/// The median: the middle value, or the mean of the two middle values for
/// an even count. NaNs sort last. `None` for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The median of the values present; `None` if none are.
pub fn median_of(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    median(&values.into_iter().flatten().collect::<Vec<_>>())
}

/// Largest time a [`Recorder`] tells apart: an hour. Longer ones count
/// as an hour in the percentiles (min, mean and max stay exact).
const MAX_NS: u64 = 3_600_000_000_000;
/// Significant decimal digits of the histogram: values within 0.1%.
const SIGFIG: u8 = 3;

/// Times (round trips, registration cycles) as they come, in bounded
/// memory: an HDR histogram in nanoseconds with 3 significant digits for
/// the percentiles (at most a few hundred KiB however long the run), and
/// the exact count, sum, minimum, maximum and variance (Welford's running
/// sum of squared deviations) beside it.
#[derive(Clone, Debug)]
pub struct Recorder {
    hist: hdrhistogram::Histogram<u64>,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
    /// Sum of squared deviations from the running mean (ns^2).
    m2: f64,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        Self {
            // Auto-resizing from 1 ns: it grows with the largest value
            // seen, to a fixed size at MAX_NS.
            hist: hdrhistogram::Histogram::new(SIGFIG).expect("3 significant digits are valid"),
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            m2: 0.0,
        }
    }

    /// Records one time.
    pub fn record(&mut self, time: std::time::Duration) {
        self.record_ns(u64::try_from(time.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records one time in nanoseconds.
    pub fn record_ns(&mut self, ns: u64) {
        // record() grows the histogram as needed (saturating_record would
        // clamp to the current size instead); capped at MAX_NS it cannot
        // fail, but if it did the value would still count, clamped.
        let capped = ns.min(MAX_NS);
        if self.hist.record(capped).is_err() {
            self.hist.saturating_record(capped);
        }
        let old_mean = self.mean_ns().unwrap_or(0.0);
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        let mean = self.mean_ns().unwrap_or(0.0);
        self.m2 += (ns as f64 - old_mean) * (ns as f64 - mean);
    }

    /// Adds `other`'s times to these (tasks pooled into one run).
    pub fn merge(&mut self, other: &Recorder) {
        if other.count == 0 {
            return;
        }
        let (n_a, n_b) = (self.count as f64, other.count as f64);
        let delta = other.mean_ns().unwrap_or(0.0) - self.mean_ns().unwrap_or(0.0);
        self.m2 += other.m2 + delta * delta * n_a * n_b / (n_a + n_b);
        self.hist
            .add(&other.hist)
            .expect("histograms of one precision add up");
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// Times recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64)
    }

    /// The `q`-quantile (0..=1) in nanoseconds: the histogram's
    /// nearest-rank value, within 0.1% (its bucket's upper end), kept
    /// within the exact minimum and maximum.
    fn quantile_ns(&self, q: f64) -> u64 {
        self.hist
            .value_at_quantile(q)
            .clamp(self.min_ns, self.max_ns)
    }

    /// The summary in microseconds; `None` if nothing was recorded.
    pub fn latency(&self) -> Option<Latency> {
        let mean = self.mean_ns()?;
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(Latency {
            mean_us: mean / 1000.0,
            p50_us: us(self.quantile_ns(0.50)),
            p99_us: us(self.quantile_ns(0.99)),
            min_us: us(self.min_ns),
            p999_us: us(self.quantile_ns(0.999)),
            max_us: us(self.max_ns),
            // Population standard deviation, as ping's mdev.
            stdev_us: (self.m2 / self.count as f64).max(0.0).sqrt() / 1000.0,
        })
    }

    /// The percentile distribution: for each of [`DISTRIBUTION`] the
    /// time (µs) and how many times were at or below it. Empty if nothing
    /// was recorded.
    pub fn distribution(&self) -> Vec<Percentile> {
        if self.count == 0 {
            return Vec::new();
        }
        DISTRIBUTION
            .iter()
            .map(|&percent| {
                let ns = match percent {
                    0.0 => self.min_ns,
                    100.0 => self.max_ns,
                    _ => self.quantile_ns(percent / 100.0),
                };
                let at_or_below = if ns >= self.max_ns {
                    self.count
                } else {
                    self.hist.count_between(0, ns).min(self.count)
                };
                Percentile {
                    percent,
                    us: ns as f64 / 1000.0,
                    count: at_or_below,
                }
            })
            .collect()
    }
}

/// The percentiles `--histogram` prints: 0 is the minimum, 100 the
/// maximum.
pub const DISTRIBUTION: [f64; 14] = [
    0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0,
];

/// One line of a percentile distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percentile {
    pub percent: f64,
    /// The time at this percentile, µs.
    pub us: f64,
    /// Times at or below it.
    pub count: u64,
}

/// Round-trip latency summary, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub min_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Standard deviation (ping's mdev).
    pub stdev_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn median_of_skips_missing_values() {
        assert_eq!(
            median_of([Some(5.0), None, Some(1.0), Some(3.0)]),
            Some(3.0)
        );
        assert_eq!(median_of([None, None]), None);
    }

    fn recorded(ns: impl IntoIterator<Item = u64>) -> Recorder {
        let mut rec = Recorder::new();
        ns.into_iter().for_each(|ns| rec.record_ns(ns));
        rec
    }

    /// `got` is within the histogram's 0.1% of `want`.
    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= want * 1e-3
    }

    #[test]
    fn latency_summary_in_microseconds() {
        let lat = recorded((1..=100).rev().map(|us| us * 1000))
            .latency()
            .unwrap();
        assert_eq!(lat.mean_us, 50.5);
        assert!(close(lat.p50_us, 50.0), "{lat:?}");
        assert!(close(lat.p99_us, 99.0), "{lat:?}");
        assert!(close(lat.p999_us, 100.0), "{lat:?}");
        assert_eq!((lat.min_us, lat.max_us), (1.0, 100.0));
        // Population standard deviation of 1..=100: sqrt((100^2 - 1) / 12).
        assert!((lat.stdev_us - 28.866).abs() < 1e-3, "{lat:?}");
        assert_eq!(Recorder::new().latency(), None);
    }

    #[test]
    fn percentiles_stay_within_min_and_max() {
        // One value: every percentile is it, not its bucket's upper end.
        let lat = recorded([123_457]).latency().unwrap();
        assert_eq!(
            (lat.min_us, lat.p50_us, lat.p99_us, lat.p999_us, lat.max_us),
            (123.457, 123.457, 123.457, 123.457, 123.457)
        );
        assert_eq!(lat.stdev_us, 0.0);
    }

    #[test]
    fn tail_percentiles_see_the_outliers() {
        // 998 fast round trips, 2 slow ones: p99.9 is a slow one, p99 not.
        let rec = recorded((0..998).map(|_| 10_000).chain([5_000_000, 9_000_000]));
        let lat = rec.latency().unwrap();
        assert!(close(lat.p99_us, 10.0), "{lat:?}");
        assert!(close(lat.p999_us, 5000.0), "{lat:?}");
        assert_eq!(lat.max_us, 9000.0);
        assert_eq!(lat.min_us, 10.0);
    }

    #[test]
    fn huge_times_are_capped_in_the_histogram_only() {
        let rec = recorded([1_000, u64::MAX]);
        let lat = rec.latency().unwrap();
        assert_eq!(lat.max_us, u64::MAX as f64 / 1000.0);
        assert!(lat.p999_us <= MAX_NS as f64 / 1000.0 * 1.001, "{lat:?}");
    }

    #[test]
    fn merged_recorders_equal_one_recording_everything() {
        let (a, b): (Vec<u64>, Vec<u64>) = (
            (1..=300).map(|i| i * 997).collect(),
            (1..=50).map(|i| i * 40_000 + 7).collect(),
        );
        let mut merged = recorded(a.iter().copied());
        merged.merge(&recorded(b.iter().copied()));
        merged.merge(&Recorder::new());
        let whole = recorded(a.iter().chain(&b).copied());
        assert_eq!(merged.count(), 350);
        let (m, w) = (merged.latency().unwrap(), whole.latency().unwrap());
        assert_eq!(
            (m.mean_us, m.p50_us, m.p99_us, m.min_us, m.p999_us, m.max_us),
            (w.mean_us, w.p50_us, w.p99_us, w.min_us, w.p999_us, w.max_us)
        );
        assert!((m.stdev_us - w.stdev_us).abs() < 1e-6 * w.stdev_us);
        let mut empty = Recorder::new();
        empty.merge(&whole);
        assert_eq!(empty.latency(), whole.latency());
    }

    #[test]
    fn memory_does_not_grow_with_the_count() {
        let mut rec = recorded([1, MAX_NS]);
        let size = rec.hist.distinct_values();
        for i in 0..200_000u64 {
            rec.record_ns(1_000 + i % 500_000);
        }
        assert_eq!(rec.hist.distinct_values(), size);
        assert_eq!(rec.count(), 200_002);
    }

    #[test]
    fn distribution_runs_from_min_to_max() {
        let rec = recorded((1..=1000).map(|us| us * 1000));
        let dist = rec.distribution();
        assert_eq!(dist.len(), DISTRIBUTION.len());
        assert_eq!(
            dist[0],
            Percentile {
                percent: 0.0,
                us: 1.0,
                count: 1
            }
        );
        let last = dist[dist.len() - 1];
        assert_eq!(
            last,
            Percentile {
                percent: 100.0,
                us: 1000.0,
                count: 1000
            }
        );
        let p50 = dist.iter().find(|p| p.percent == 50.0).unwrap();
        assert!(close(p50.us, 500.0), "{p50:?}");
        assert!((500..=501).contains(&p50.count), "{p50:?}");
        assert!(dist
            .windows(2)
            .all(|w| w[0].us <= w[1].us && w[0].count <= w[1].count));
        assert!(Recorder::new().distribution().is_empty());
    }
}
