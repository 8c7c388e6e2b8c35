//! A log's counters, and the copy of them [`crate::Log::stats`] returns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters of a log, updated by the appender, readers and retention.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub fsyncs: AtomicU64,
    pub fsync_ns_total: AtomicU64,
    pub fsync_ns_max: AtomicU64,
    pub fsync_latency: sift_core::LatencyHistogram,
    pub write_errors: AtomicU64,
    pub damaged_records: AtomicU64,
    pub torn_tails_cut: AtomicU64,
    pub appends_refused_queue_full: AtomicU64,
    pub retention_segments_removed: AtomicU64,
    pub retention_messages_removed: AtomicU64,
    pub records_truncated: AtomicU64,
}

impl Counters {
    /// Counts one `fdatasync` that took `elapsed`.
    pub fn count_fsync(&self, elapsed: Duration) {
        let elapsed_ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.fsync_ns_total.fetch_add(elapsed_ns, Ordering::Relaxed);
        self.fsync_ns_max.fetch_max(elapsed_ns, Ordering::Relaxed);
        self.fsync_latency.record_ns(elapsed_ns);
    }
}

/// A copy of a log's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Bytes of whole records stored.
    pub bytes: u64,
    /// Sequences stored, from the first to the last (damaged ones included).
    pub messages: u64,
    /// Segment files.
    pub segments: usize,
    /// Oldest stored sequence (`last_seq + 1` when none is stored).
    pub first_seq: u64,
    /// Newest visible sequence, 0 when none was ever stored.
    pub last_seq: u64,
    /// `fdatasync` calls.
    pub fsyncs: u64,
    /// Their total time.
    pub fsync_ns_total: u64,
    /// The longest of them.
    pub fsync_ns_max: u64,
    /// Their durations by bucket.
    pub fsync_latency: sift_core::HistogramSnapshot,
    /// Failed writes, syncs, truncations and segment rolls.
    pub write_errors: u64,
    /// Damaged sequences found, at open and by readers since.
    pub damaged_records: u64,
    /// Torn tails cut at open.
    pub torn_tails_cut: u64,
    /// Appends without completion refused because the queue was full.
    pub appends_refused_queue_full: u64,
    /// Segments removed by retention.
    pub retention_segments_removed: u64,
    /// Messages they held.
    pub retention_messages_removed: u64,
    /// Records removed from the log's tail ([`crate::Log::truncate_from`]).
    pub records_truncated: u64,
}
