//! Retention: whole old segments go when the stream is over its age, byte
//! or message limit. The active segment always stays, so that its name
//! keeps the next sequence across restarts.

use std::sync::atomic::Ordering;

use crate::log::Shared;

/// What one retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Segment files removed.
    pub segments_removed: u64,
    /// Messages they held.
    pub messages_removed: u64,
}

/// Removes the oldest segments while a limit is exceeded.
pub(crate) fn apply(shared: &Shared, now_ns: u64) -> RetentionOutcome {
    let limits = shared.config.retention;
    let mut outcome = RetentionOutcome::default();
    if limits == crate::config::Retention::default() {
        return outcome;
    }
    let mut segments = shared.segments();
    let mut total_bytes: u64 = segments.iter().map(|segment| segment.bytes).sum();
    let mut total_msgs: u64 = segments.iter().map(|segment| segment.messages()).sum();
    while segments.len() > 1 {
        let oldest = &segments[0];
        let too_old = limits.max_age_ns != 0 && oldest.max_timestamp_ns < now_ns.saturating_sub(limits.max_age_ns);
        let too_big = limits.max_bytes != 0 && total_bytes > limits.max_bytes;
        let too_many = limits.max_msgs != 0 && total_msgs > limits.max_msgs;
        if !(too_old || too_big || too_many) {
            break;
        }
        let removed = segments.remove(0);
        // Readers holding the file keep reading it; the name is gone.
        if let Err(error) = std::fs::remove_file(&removed.path) {
            eprintln!("sift-store: cannot remove {}: {error}", removed.path.display());
        }
        total_bytes -= removed.bytes;
        total_msgs -= removed.messages();
        outcome.segments_removed += 1;
        outcome.messages_removed += removed.messages();
    }
    drop(segments);
    let counters = &shared.counters;
    counters.retention_segments_removed.fetch_add(outcome.segments_removed, Ordering::Relaxed);
    counters.retention_messages_removed.fetch_add(outcome.messages_removed, Ordering::Relaxed);
    outcome
}
