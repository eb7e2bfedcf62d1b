//! Summary statistics over benchmark samples.

/// Arithmetic mean; `None` for no samples.
pub fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some(values.iter().sum::<f64>() / values.len() as f64)
}

/// The `p`-th percentile (0 < p <= 100) of sorted `values` by the
/// nearest-rank method: the smallest value with at least p% of the samples
/// at or below it. `None` for no samples.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil();
    // rank is in 0..=len for p in 0..=100; clamp covers p outside that range.
    let index = (rank as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[index])
}

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

/// Round-trip latency summary, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl Latency {
    /// Summarises round-trip times given in nanoseconds; `None` for none.
    pub fn from_nanos(samples: &[u64]) -> Option<Self> {
        let mut us: Vec<f64> = samples.iter().map(|&ns| ns as f64 / 1000.0).collect();
        us.sort_by(f64::total_cmp);
        Some(Self {
            mean_us: mean(&us)?,
            p50_us: percentile(&us, 50.0)?,
            p99_us: percentile(&us, 99.0)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_of_nothing_is_none() {
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
    }

    #[test]
    fn percentile_uses_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), Some(50.0));
        assert_eq!(percentile(&values, 99.0), Some(99.0));
        assert_eq!(percentile(&values, 100.0), Some(100.0));
        assert_eq!(percentile(&values, 0.0), Some(1.0));
    }

    #[test]
    fn percentile_of_few_samples_takes_the_covering_one() {
        assert_eq!(percentile(&[10.0], 99.0), Some(10.0));
        assert_eq!(percentile(&[10.0, 20.0], 50.0), Some(10.0));
        assert_eq!(percentile(&[10.0, 20.0], 99.0), Some(20.0));
        assert_eq!(percentile(&[10.0, 20.0, 30.0], 50.0), Some(20.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

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

    #[test]
    fn latency_summary_in_microseconds() {
        let ns: Vec<u64> = (1..=100).rev().map(|us| us * 1000).collect();
        let lat = Latency::from_nanos(&ns).unwrap();
        assert_eq!(lat.mean_us, 50.5);
        assert_eq!(lat.p50_us, 50.0);
        assert_eq!(lat.p99_us, 99.0);
        assert_eq!(Latency::from_nanos(&[]), None);
    }
}
