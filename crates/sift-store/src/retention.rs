//! Retention: whole old segments go when the stream is over its age, byte
//! or message limit. The active segment never goes here (the appender
//! rolls it first when it is past the age limit), so that its name keeps
//! the next sequence across restarts even when no record is left.
//!
//! A segment is unlinked, then dropped from the list. Readers holding its
//! file keep reading it (unlink semantics), but a read from below the new
//! first sequence is told it is a `Removed` gap. The directory is synced
//! after a pass that removed anything, so that after a crash an older
//! segment is never back while a newer one is gone (which would look like
//! damage).

use std::sync::atomic::Ordering;

use crate::error::StoreError;
use crate::log::Shared;
use crate::segment::Segment;

/// What one retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Segment files removed.
    pub segments_removed: u64,
    /// Messages they held.
    pub messages_removed: u64,
}

/// True when the oldest of the segments (holding `total_bytes` and
/// `total_msgs` together) must go as of `now_ns`.
fn must_go(shared: &Shared, oldest: &Segment, total_bytes: u64, total_msgs: u64, now_ns: u64) -> bool {
    let limits = shared.config.retention;
    let too_old = limits.max_age_ns != 0 && oldest.max_timestamp_ns < now_ns.saturating_sub(limits.max_age_ns);
    let too_big = limits.max_bytes != 0 && total_bytes > limits.max_bytes;
    let too_many = limits.max_msgs != 0 && total_msgs > limits.max_msgs;
    too_old || too_big || too_many
}

/// Removes the oldest segments (never the active one) while a limit is
/// exceeded. A file that cannot be removed stops the pass, stays listed,
/// and is tried again next time.
pub(crate) fn remove_old_segments(shared: &Shared, now_ns: u64) -> Result<RetentionOutcome, StoreError> {
    let mut outcome = RetentionOutcome::default();
    if shared.config.retention == crate::config::Retention::default() {
        return Ok(outcome);
    }
    let mut failure = None;
    {
        let mut segments = shared.segments();
        let mut total_bytes: u64 = segments.iter().map(|segment| segment.bytes).sum();
        let mut total_msgs: u64 = segments.iter().map(Segment::messages).sum();
        while segments.len() > 1 && must_go(shared, &segments[0], total_bytes, total_msgs, now_ns) {
            let path = &segments[0].path;
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    failure = Some(StoreError::io(path, "remove", error));
                    break;
                }
            }
            let removed = segments.remove(0);
            total_bytes -= removed.bytes;
            total_msgs -= removed.messages();
            outcome.segments_removed += 1;
            outcome.messages_removed += removed.messages();
        }
    }
    let counters = &shared.counters;
    counters.retention_segments_removed.fetch_add(outcome.segments_removed, Ordering::Relaxed);
    counters.retention_messages_removed.fetch_add(outcome.messages_removed, Ordering::Relaxed);
    if let Some(error) = failure {
        return Err(error);
    }
    if outcome.segments_removed > 0 {
        crate::files::sync_dir(&shared.dir)?;
    }
    Ok(outcome)
}
