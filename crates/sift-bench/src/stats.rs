//! Summary statistics of samples: count, mean, sample variance, standard
//! deviation, min, max and percentiles.
//!
//! [`Moments`] keeps count, mean and variance exactly with Welford's online
//! method (and merges two of them exactly with Chan et al.'s formula), so a
//! run of any length needs constant memory and loses no precision to a
//! running sum of squares. [`Samples`] adds percentiles from an HDR
//! histogram, whose memory is bounded by its value range and precision
//! (three significant digits), not by the number of samples.
//!
//! The variance is the **sample variance**, with `n - 1` in the denominator
//! (Bessel's correction): the samples are a sample of what the system does,
//! not the whole population. It is undefined, and reported as `None`, for
//! fewer than two samples.
//!
//! A percentile `pN` is the smallest recorded value that at least N % of
//! the samples do not exceed (the nearest-rank definition), to the
//! histogram's precision: exact below 2,048, within 0.1 % above. Percentiles
//! are clamped to the exact minimum and maximum.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest value a [`Samples`] histogram resolves: 60 s in nanoseconds.
/// Larger values count as this value in the percentiles (mean, variance,
/// min and max stay exact).
pub const SAMPLE_VALUE_MAX: u64 = 60_000_000_000;

/// Significant decimal digits the histogram keeps.
const HISTOGRAM_SIGNIFICANT_DIGITS: u8 = 3;

/// Count, mean, variance, min and max of a stream of values, exact and in
/// constant memory (Welford's method).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    count: u64,
    mean: f64,
    /// Sum of squared differences from the current mean.
    squares: f64,
    min: f64,
    max: f64,
}

impl Moments {
    /// No values yet.
    pub fn new() -> Moments {
        Moments::default()
    }

    /// Adds one value.
    pub fn push(&mut self, value: f64) {
        self.count += 1;
        if self.count == 1 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        let delta = value - self.mean;
        self.mean += delta / self.count as f64;
        self.squares += delta * (value - self.mean);
    }

    /// Adds every value `other` saw, as if they had been pushed here.
    pub fn merge(&mut self, other: &Moments) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        let count = self.count + other.count;
        let delta = other.mean - self.mean;
        let weight = self.count as f64 * other.count as f64 / count as f64;
        self.mean += delta * other.count as f64 / count as f64;
        self.squares += other.squares + delta * delta * weight;
        self.count = count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Values pushed.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Arithmetic mean; `None` without values.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then_some(self.mean)
    }

    /// Sample variance (denominator `n - 1`); `None` below two values.
    pub fn variance(&self) -> Option<f64> {
        (self.count > 1).then(|| self.squares / (self.count - 1) as f64)
    }

    /// Sample standard deviation, the square root of [`Moments::variance`].
    pub fn std_dev(&self) -> Option<f64> {
        self.variance().map(f64::sqrt)
    }

    /// Smallest value; `None` without values.
    pub fn min(&self) -> Option<f64> {
        (self.count > 0).then_some(self.min)
    }

    /// Largest value; `None` without values.
    pub fn max(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max)
    }
}

/// Integer samples (the bench records nanoseconds): exact [`Moments`] plus
/// a bounded histogram for percentiles.
#[derive(Debug, Clone)]
pub struct Samples {
    moments: Moments,
    histogram: Histogram<u64>,
}

impl Default for Samples {
    fn default() -> Self {
        Samples::new()
    }
}

impl Samples {
    /// No samples yet; values from 1 to [`SAMPLE_VALUE_MAX`] are resolved.
    pub fn new() -> Samples {
        let histogram = Histogram::new_with_bounds(1, SAMPLE_VALUE_MAX, HISTOGRAM_SIGNIFICANT_DIGITS)
            .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"));
        Samples { moments: Moments::new(), histogram }
    }

    /// Records one value. The histogram holds it clamped to
    /// 1..=[`SAMPLE_VALUE_MAX`]; the moments hold it exactly.
    pub fn record(&mut self, value: u64) {
        self.moments.push(value as f64);
        // Recording cannot fail once the value is within the bounds.
        let _ = self.histogram.record(value.clamp(1, SAMPLE_VALUE_MAX));
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Samples) {
        self.moments.merge(&other.moments);
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.histogram.add(&other.histogram);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.moments.count()
    }

    /// The summary in the recorded unit; `None` without samples.
    pub fn summary(&self) -> Option<Summary> {
        let (Some(mean), Some(min), Some(max)) = (self.moments.mean(), self.moments.min(), self.moments.max()) else {
            return None;
        };
        let percentile = |quantile: f64| (self.histogram.value_at_quantile(quantile) as f64).clamp(min, max);
        Some(Summary {
            count: self.moments.count(),
            mean,
            variance: self.moments.variance(),
            std_dev: self.moments.std_dev(),
            min,
            max,
            p50: percentile(0.5),
            p90: percentile(0.9),
            p99: percentile(0.99),
            p999: percentile(0.999),
        })
    }
}

/// What [`Samples::summary`] reports, in the unit the samples were recorded
/// in unless [`Summary::scaled`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample variance (`n - 1`); `None` for a single sample.
    pub variance: Option<f64>,
    /// Sample standard deviation; `None` for a single sample.
    pub std_dev: Option<f64>,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

impl Summary {
    /// The same summary in another unit: every value times `factor` (the
    /// variance times its square), e.g. `1e-3` for nanoseconds to microseconds.
    pub fn scaled(&self, factor: f64) -> Summary {
        Summary {
            count: self.count,
            mean: self.mean * factor,
            variance: self.variance.map(|variance| variance * factor * factor),
            std_dev: self.std_dev.map(|std_dev| std_dev * factor),
            min: self.min * factor,
            max: self.max * factor,
            p50: self.p50 * factor,
            p90: self.p90 * factor,
            p99: self.p99 * factor,
            p999: self.p999 * factor,
        }
    }
}

/// Median of a few values, such as the rounds of one grid point (the mean
/// of the middle two for an even count); `None` when there are none. NaNs
/// sort last.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        length if length % 2 == 1 => Some(sorted[middle]),
        _ => Some((sorted[middle - 1] + sorted[middle]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0)
    }

    fn samples(values: impl IntoIterator<Item = u64>) -> Samples {
        let mut samples = Samples::new();
        values.into_iter().for_each(|value| samples.record(value));
        samples
    }

    #[test]
    fn one_to_hundred_has_the_textbook_summary() {
        let summary = samples(1..=100).summary().expect("samples");
        assert_eq!(summary.count, 100);
        assert!(close(summary.mean, 50.5));
        // Sample variance of 1..=n is n(n+1)/12.
        assert!(close(summary.variance.expect("variance"), 100.0 * 101.0 / 12.0), "{summary:?}");
        assert!(close(summary.std_dev.expect("std dev"), (100.0f64 * 101.0 / 12.0).sqrt()));
        assert_eq!((summary.min, summary.max), (1.0, 100.0));
        assert_eq!((summary.p50, summary.p90, summary.p99, summary.p999), (50.0, 90.0, 99.0, 100.0));
    }

    #[test]
    fn constant_data_has_no_spread() {
        let summary = samples(std::iter::repeat_n(7_000, 1000)).summary().expect("samples");
        assert_eq!(summary.variance, Some(0.0));
        assert_eq!(summary.std_dev, Some(0.0));
        assert_eq!((summary.min, summary.p50, summary.p999, summary.max), (7_000.0, 7_000.0, 7_000.0, 7_000.0));
    }

    #[test]
    fn a_single_sample_has_no_variance() {
        let summary = samples([1_234_567]).summary().expect("one sample");
        assert_eq!(summary.count, 1);
        assert_eq!(summary.mean, 1_234_567.0);
        assert_eq!(summary.variance, None);
        assert_eq!(summary.std_dev, None);
        // The histogram's bucket is wider than one, but percentiles are clamped to the exact range.
        assert_eq!((summary.p50, summary.p999), (1_234_567.0, 1_234_567.0));
    }

    #[test]
    fn no_samples_have_no_summary() {
        assert_eq!(Samples::new().summary(), None);
        assert_eq!(Moments::new().mean(), None);
        assert_eq!(Moments::new().variance(), None);
    }

    #[test]
    fn large_values_keep_an_exact_mean_and_bounded_percentiles() {
        let summary = samples([1_000_000_001, 1_000_000_003]).summary().expect("samples");
        assert_eq!(summary.mean, 1_000_000_002.0);
        assert!(close(summary.variance.expect("variance"), 2.0));
        assert!((summary.p50 - 1_000_000_001.0).abs() / 1e9 < 1e-3);
    }

    #[test]
    fn values_beyond_the_histogram_are_clamped_but_the_max_is_exact() {
        let summary = samples([10, SAMPLE_VALUE_MAX * 2]).summary().expect("samples");
        assert_eq!(summary.max, (SAMPLE_VALUE_MAX * 2) as f64);
        assert!(summary.p999 <= summary.max);
    }

    #[test]
    fn merging_equals_recording_everything_in_one() {
        let mut left = samples(1..=40);
        left.merge(&samples(41..=100));
        assert_eq!(left.summary(), samples(1..=100).summary());
        let mut empty = Samples::new();
        empty.merge(&samples([5, 6]));
        assert_eq!(empty.summary(), samples([5, 6]).summary());
    }

    #[test]
    fn moments_of_floats_match_the_two_pass_formula() {
        let values = [2.5, 4.0, 4.0, 4.5, 5.0, 5.25, 7.0, 9.0];
        let mut moments = Moments::new();
        values.iter().for_each(|value| moments.push(*value));
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let variance = values.iter().map(|value| (value - mean).powi(2)).sum::<f64>() / (values.len() - 1) as f64;
        assert!(close(moments.mean().expect("mean"), mean));
        assert!(close(moments.variance().expect("variance"), variance));
        assert_eq!((moments.min(), moments.max()), (Some(2.5), Some(9.0)));
    }

    #[test]
    fn the_median_is_the_middle_value_or_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn scaling_converts_units_and_squares_the_variance_factor() {
        let summary = samples([1_000, 3_000]).summary().expect("samples").scaled(1e-3);
        assert!(close(summary.mean, 2.0));
        assert!(close(summary.variance.expect("variance"), 2.0));
        assert!(close(summary.max, 3.0));
    }
}
