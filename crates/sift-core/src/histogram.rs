//! A latency histogram that threads record into without locks: fixed
//! buckets whose upper bounds double from 1 µs, each an atomic counter.
//!
//! It exists for the broker's operators (Prometheus histograms of
//! publish-to-deliver and fsync latency), so it trades resolution for a
//! recording cost of two relaxed atomic additions: a bucket is a factor of
//! two wide. Benchmarks use HDR histograms instead.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets with a finite bound: 2⁰ µs (1 µs) to 2²⁴ µs (about 16.8 s).
pub const LATENCY_BUCKETS: usize = 25;

/// Counts of latencies by bucket, and their sum.
#[derive(Debug)]
pub struct LatencyHistogram {
    /// Bucket `i` counts latencies above `2^(i-1)` µs and at most `2^i` µs
    /// (bucket 0: at most 1 µs); the last counts everything longer.
    counts: [AtomicU64; LATENCY_BUCKETS + 1],
    sum_ns: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram { counts: std::array::from_fn(|_| AtomicU64::new(0)), sum_ns: AtomicU64::new(0) }
    }
}

/// A copy of a [`LatencyHistogram`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Per-bucket counts (not cumulative); `LATENCY_BUCKETS + 1` of them
    /// once anything was recorded, or none for an empty default.
    pub counts: Vec<u64>,
    /// Sum of the recorded latencies, in nanoseconds.
    pub sum_ns: u64,
}

impl LatencyHistogram {
    /// Records one latency.
    pub fn record_ns(&self, latency_ns: u64) {
        self.counts[bucket_of(latency_ns)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(latency_ns, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            counts: self.counts.iter().map(|count| count.load(Ordering::Relaxed)).collect(),
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
        }
    }
}

impl HistogramSnapshot {
    /// Upper bound of bucket `index` in microseconds; `None` for the last
    /// (unbounded) one.
    pub fn bound_us(index: usize) -> Option<u64> {
        (index < LATENCY_BUCKETS).then(|| 1u64 << index)
    }

    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other`'s counts to these (several logs into one figure).
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (count, added) in self.counts.iter_mut().zip(&other.counts) {
            *count += added;
        }
        self.sum_ns += other.sum_ns;
    }
}

/// The bucket of a latency: the smallest `i` with `latency ≤ 2^i µs`.
fn bucket_of(latency_ns: u64) -> usize {
    let latency_us = latency_ns.div_ceil(1_000);
    if latency_us <= 1 {
        return 0;
    }
    let index = (u64::BITS - (latency_us - 1).leading_zeros()) as usize;
    index.min(LATENCY_BUCKETS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_latency_lands_in_the_first_bucket_whose_bound_holds_it() {
        for (latency_ns, bucket) in
            [(0, 0), (1_000, 0), (1_001, 1), (2_000, 1), (2_001, 2), (1_000_000, 10), (1_024_000, 10), (u64::MAX, 25)]
        {
            assert_eq!(bucket_of(latency_ns), bucket, "{latency_ns} ns");
            if let Some(bound_us) = HistogramSnapshot::bound_us(bucket) {
                assert!(latency_ns.div_ceil(1_000) <= bound_us);
            }
        }
    }

    #[test]
    fn snapshots_count_sum_and_merge() {
        let histogram = LatencyHistogram::default();
        for latency_ns in [500, 1_500, 3_000_000] {
            histogram.record_ns(latency_ns);
        }
        let mut snapshot = histogram.snapshot();
        assert_eq!(snapshot.count(), 3);
        assert_eq!(snapshot.sum_ns, 3_002_000);
        assert_eq!(snapshot.counts.len(), LATENCY_BUCKETS + 1);
        let copy = snapshot.clone();
        snapshot.merge(&copy);
        assert_eq!(snapshot.count(), 6);
        let mut empty = HistogramSnapshot::default();
        empty.merge(&copy);
        assert_eq!(empty, copy);
    }
}
