//! A stream's log: its segments, opened and recovered, appended to by one
//! thread, read by any number of readers.
//!
//! The [`Log`] handle only queues work: appends (and retention passes) go
//! over a channel to the appender thread (`appender.rs`), which is the only
//! writer of the active segment and of the segment list's shape. Readers
//! and the figures read the shared state directly: the segment list under
//! a mutex held for short copies, the last visible sequence in an atomic.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::{JoinHandle, ThreadId};

use bytes::Bytes;

use crate::config::LogConfig;
use crate::error::StoreError;
use crate::reader::LogReader;
use crate::record::RECORD_BODY_BYTES_MAX;
use crate::recovery::{open_segments, Recovery};
use crate::retention::RetentionOutcome;
use crate::segment::Segment;
use crate::stats::{Counters, LogStats};

/// Called with the outcome of an append: its sequence once stored under the
/// log's fsync policy, or why it was not. Runs on the appender thread, so
/// it must be quick and must not wait for the log (no `apply_retention`,
/// no `close`).
pub type Completion = Box<dyn FnOnce(Result<u64, StoreError>) + Send>;
/// Called on the appender thread with the new last visible sequence after
/// each written batch (to wake readers). Same rules as [`Completion`].
pub type AppendHook = Box<dyn Fn(u64) + Send + Sync>;

/// State shared by the log, its appender thread and its readers.
pub(crate) struct Shared {
    pub dir: PathBuf,
    pub config: LogConfig,
    /// Segments in sequence order; the last is the active one. Never empty.
    pub segments: Mutex<Vec<Segment>>,
    /// Newest sequence readers may read (written with `Release` after the
    /// segment metadata describing it).
    pub last_seq: AtomicU64,
    /// Body bytes queued for the appender and not yet written.
    pub queued_bytes: AtomicU64,
    pub counters: Counters,
    pub on_append: AppendHook,
    /// Grows with each cut of the log's tail: readers drop what they
    /// cached of bytes a cut may have removed.
    pub generation: AtomicU64,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Shared").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl Shared {
    /// Recovers the segments of `dir` (created if missing) into shared state.
    pub(crate) fn open(dir: &Path, config: LogConfig, on_append: AppendHook) -> Result<(Shared, Recovery), StoreError> {
        config.validate()?;
        if !dir.is_dir() {
            std::fs::create_dir_all(dir).map_err(|error| StoreError::io(dir, "create", error))?;
            crate::files::sync_parent(dir)?;
        }
        // A cut of the tail a crash interrupted is finished first.
        crate::truncate::finish_pending(dir)?;
        let (segments, recovery) = open_segments(dir, config.index_interval_bytes, true)?;
        debug_assert!(!segments.is_empty(), "opening creates the first segment");
        let counters = Counters::default();
        let damaged: u64 = recovery.damaged.iter().map(|damage| damage.count).sum();
        counters.damaged_records.store(damaged, Ordering::Relaxed);
        counters.torn_tails_cut.store(u64::from(recovery.torn_tail.is_some()), Ordering::Relaxed);
        let shared = Shared {
            dir: dir.to_path_buf(),
            config,
            segments: Mutex::new(segments),
            last_seq: AtomicU64::new(recovery.last_seq),
            queued_bytes: AtomicU64::new(0),
            counters,
            on_append,
            generation: AtomicU64::new(0),
        };
        Ok((shared, recovery))
    }

    /// The segment list. Every change to it is made whole under the lock,
    /// so a panic elsewhere cannot leave it half-done: poisoning is ignored.
    pub(crate) fn segments(&self) -> MutexGuard<'_, Vec<Segment>> {
        self.segments.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One append on its way to the appender thread.
pub(crate) struct AppendRequest {
    pub timestamp_ns: u64,
    pub body: Bytes,
    pub completion: Option<Completion>,
}

/// Work for the appender thread.
pub(crate) enum Command {
    /// Store a record.
    Append(AppendRequest),
    /// Run retention as of `now_ns` and answer.
    Retain { now_ns: u64, reply: mpsc::Sender<Result<RetentionOutcome, StoreError>> },
    /// Remove every record from `from_seq` on and answer how many went.
    Truncate { from_seq: u64, reply: mpsc::Sender<Result<u64, StoreError>> },
    /// Remove every record and resume at `next_seq`.
    Restart { next_seq: u64, reply: mpsc::Sender<Result<u64, StoreError>> },
}

/// A stream's message log. `Send + Sync`: share it with an `Arc`.
pub struct Log {
    shared: Arc<Shared>,
    sender: Option<mpsc::Sender<Command>>,
    thread: Option<JoinHandle<Result<(), StoreError>>>,
    appender_id: ThreadId,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Log").field("dir", &self.shared.dir).finish_non_exhaustive()
    }
}

impl Log {
    /// Opens the log in `dir` (created if missing), recovering every
    /// segment (a torn tail is cut, damage reported; see `recovery.rs` for
    /// the cost), and starts its appender thread `sift-store-<dirname>`.
    pub fn open(dir: &Path, config: LogConfig, on_append: AppendHook) -> Result<(Log, Recovery), StoreError> {
        let (shared, recovery) = Shared::open(dir, config, on_append)?;
        let shared = Arc::new(shared);
        let appender = crate::appender::Appender::new(shared.clone())?;
        let (sender, receiver) = mpsc::channel();
        let dir_name = dir.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned());
        let thread = std::thread::Builder::new()
            .name(format!("sift-store-{dir_name}"))
            .spawn(move || appender.run(receiver))
            .map_err(|error| StoreError::io(dir, "start the appender thread for", error))?;
        let appender_id = thread.thread().id();
        let log = Log { shared, sender: Some(sender), thread: Some(thread), appender_id };
        Ok((log, recovery))
    }

    /// Queues an append of `body` stamped `timestamp_ns`; `completion` hears
    /// its sequence once it is stored under the fsync policy, or why not.
    ///
    /// An append with a completion is always taken: how many of those wait
    /// is bounded upstream, by the publishers' confirm windows. One without
    /// is refused with [`StoreError::QueueFull`] (and counted) while the
    /// bytes waiting for the appender exceed `append_queue_bytes_max`, so
    /// that data nobody waits for never blocks or swamps anything. A
    /// refused append never runs its completion: the error is the answer.
    pub fn append(&self, timestamp_ns: u64, body: Bytes, completion: Option<Completion>) -> Result<(), StoreError> {
        if body.len() > RECORD_BODY_BYTES_MAX {
            return Err(StoreError::RecordTooLarge { body_bytes: body.len(), limit: RECORD_BODY_BYTES_MAX });
        }
        let Some(sender) = self.sender.as_ref() else { return Err(StoreError::Closed) };
        let length = body.len() as u64;
        let queued = &self.shared.queued_bytes;
        if completion.is_none()
            && queued.load(Ordering::Relaxed).saturating_add(length) > self.config().append_queue_bytes_max
        {
            self.shared.counters.appends_refused_queue_full.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::QueueFull);
        }
        queued.fetch_add(length, Ordering::Relaxed);
        sender.send(Command::Append(AppendRequest { timestamp_ns, body, completion })).map_err(|_| {
            queued.fetch_sub(length, Ordering::Relaxed);
            StoreError::Closed
        })
    }

    /// A reader with its own position; readers do not wait for each other.
    pub fn reader(&self) -> LogReader {
        LogReader::new(self.shared.clone())
    }

    /// Oldest stored sequence (`last_seq + 1` when nothing is stored).
    pub fn first_seq(&self) -> u64 {
        let segments = self.shared.segments();
        segments.first().map_or_else(|| self.last_seq() + 1, |segment| segment.first_seq)
    }

    /// Newest visible sequence, 0 when none was ever stored.
    pub fn last_seq(&self) -> u64 {
        self.shared.last_seq.load(Ordering::Acquire)
    }

    /// The settings.
    pub fn config(&self) -> &LogConfig {
        &self.shared.config
    }

    /// The first sequence, in log order, whose timestamp is at or after
    /// `timestamp_ns`; `last_seq + 1` when there is none. Timestamps need
    /// not grow with sequences (publishers' clocks differ), so this is the
    /// first record in log order, not a binary search: segments whose
    /// newest timestamp is before `timestamp_ns` are skipped whole, the
    /// first other one is scanned.
    pub fn seq_at_or_after_time(&self, timestamp_ns: u64) -> Result<u64, StoreError> {
        crate::reader::seq_at_or_after_time(&self.shared, timestamp_ns)
    }

    /// The log's figures now.
    pub fn stats(&self) -> LogStats {
        let counters = &self.shared.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let segments = self.shared.segments();
        let last_seq = self.last_seq();
        let first_seq = segments.first().map_or(last_seq + 1, |segment| segment.first_seq);
        LogStats {
            bytes: segments.iter().map(|segment| segment.bytes).sum(),
            messages: (last_seq + 1).saturating_sub(first_seq),
            segments: segments.len(),
            first_seq,
            last_seq,
            fsyncs: load(&counters.fsyncs),
            fsync_ns_total: load(&counters.fsync_ns_total),
            fsync_ns_max: load(&counters.fsync_ns_max),
            fsync_latency: counters.fsync_latency.snapshot(),
            write_errors: load(&counters.write_errors),
            damaged_records: load(&counters.damaged_records),
            torn_tails_cut: load(&counters.torn_tails_cut),
            appends_refused_queue_full: load(&counters.appends_refused_queue_full),
            retention_segments_removed: load(&counters.retention_segments_removed),
            retention_messages_removed: load(&counters.retention_messages_removed),
            records_truncated: load(&counters.records_truncated),
        }
    }

    /// Removes what retention no longer keeps, as of `now_ns`. The appender
    /// does the same every [`crate::RETENTION_CHECK_INTERVAL`] and after
    /// each segment roll; this runs a pass now, on the appender thread
    /// after the appends already queued, and waits for it. When the active
    /// segment's newest record is past the age limit, the pass first rolls
    /// it, so that an idle stream empties too.
    pub fn apply_retention(&self, now_ns: u64) -> Result<RetentionOutcome, StoreError> {
        let on_appender = std::thread::current().id() == self.appender_id;
        let Some(sender) = self.sender.as_ref().filter(|_| !on_appender) else {
            // From a completion, or after close: no roll, just the removal.
            return crate::retention::remove_old_segments(&self.shared, now_ns);
        };
        let (reply, answer) = mpsc::channel();
        sender.send(Command::Retain { now_ns, reply }).map_err(|_| StoreError::Closed)?;
        answer.recv().map_err(|_| StoreError::Closed)?
    }

    /// Removes every record from `from_seq` on (a Raft follower's entries
    /// that a new leader overrules), after the appends already queued; the
    /// next append gets `from_seq`. Returns how many records went. The cut
    /// survives a crash at any point (`truncate.rs`). A read running while
    /// it happens may still return records it removes; readers that must
    /// not see them read only below the cut. `from_seq` before the first
    /// stored sequence is refused.
    pub fn truncate_from(&self, from_seq: u64) -> Result<u64, StoreError> {
        let on_appender = std::thread::current().id() == self.appender_id;
        let Some(sender) = self.sender.as_ref().filter(|_| !on_appender) else { return Err(StoreError::Closed) };
        let (reply, answer) = mpsc::channel();
        sender.send(Command::Truncate { from_seq, reply }).map_err(|_| StoreError::Closed)?;
        answer.recv().map_err(|_| StoreError::Closed)?
    }

    /// Removes every record and resumes the log at `next_seq`, after the
    /// appends already queued: the next append gets `next_seq`, and the
    /// first stored sequence becomes `next_seq` (a Raft log purged past its
    /// end, as a follower that installs a snapshot is). `next_seq` must be
    /// past the last stored sequence. Crash-safe as a cut is. Returns how
    /// many records went.
    pub fn restart_at(&self, next_seq: u64) -> Result<u64, StoreError> {
        let on_appender = std::thread::current().id() == self.appender_id;
        let Some(sender) = self.sender.as_ref().filter(|_| !on_appender) else { return Err(StoreError::Closed) };
        let (reply, answer) = mpsc::channel();
        sender.send(Command::Restart { next_seq, reply }).map_err(|_| StoreError::Closed)?;
        answer.recv().map_err(|_| StoreError::Closed)?
    }

    /// Completes every queued append, syncs what is unsynced (under every
    /// policy), and stops the appender thread. Dropping the log does the
    /// same, ignoring errors.
    pub fn close(mut self) -> Result<(), StoreError> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<(), StoreError> {
        drop(self.sender.take());
        let Some(thread) = self.thread.take() else { return Ok(()) };
        if thread.thread().id() == std::thread::current().id() {
            // Dropped by a completion: the appender stops once it returns.
            return Ok(());
        }
        thread
            .join()
            .map_err(|_| StoreError::Invalid(format!("the appender of {} panicked", self.shared.dir.display())))?
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Log>();
        fn sendable<T: Send>() {}
        sendable::<LogReader>();
    }
}
