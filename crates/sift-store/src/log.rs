//! A stream's log: its segments, opened and recovered, appended to by one
//! thread, read by any number of readers.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use crate::config::LogConfig;
use crate::error::StoreError;
use crate::reader::LogReader;
use crate::recovery::{open_segments, Recovery};
use crate::scan::DamagedRun;

/// Called with the outcome of an append: its sequence once stored under the
/// log's fsync policy, or why it was not.
pub type Completion = Box<dyn FnOnce(Result<u64, StoreError>) + Send>;
/// Called with the new last visible sequence after each written batch.
pub type AppendHook = Box<dyn Fn(u64) + Send + Sync>;

/// One segment file, as the log keeps it in memory.
#[derive(Debug)]
pub struct Segment {
    /// The sequence of its first record (its file name).
    pub first_seq: u64,
    /// Its path.
    pub path: PathBuf,
    /// The open file (readers `pread` it; unlinking keeps it readable).
    pub file: Arc<File>,
    /// Bytes of whole records.
    pub bytes: u64,
    /// Sequence of its last record; `first_seq - 1` when empty.
    pub last_seq: u64,
    /// Smallest record timestamp.
    pub min_timestamp_ns: u64,
    /// Largest record timestamp.
    pub max_timestamp_ns: u64,
    /// Sparse index: (seq, offset), ascending.
    pub index: Vec<(u64, u64)>,
    /// Runs of sequences it cannot serve.
    pub damaged: Vec<DamagedRun>,
}

impl Segment {
    /// Sequences it spans (damaged ones included).
    pub fn messages(&self) -> u64 {
        (self.last_seq + 1).saturating_sub(self.first_seq)
    }

    /// The indexed offset to start reading `seq` from.
    pub fn offset_for(&self, seq: u64) -> u64 {
        match self.index.partition_point(|(indexed, _)| *indexed <= seq) {
            0 => 0,
            after => self.index[after - 1].1,
        }
    }
}

/// The name of the segment file starting at `first_seq`.
pub fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}.seg")
}

/// Counters of a log, read with [`Log::stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub fsyncs: AtomicU64,
    pub fsync_ns_total: AtomicU64,
    pub fsync_ns_max: AtomicU64,
    pub write_errors: AtomicU64,
    pub damaged_records: AtomicU64,
    pub torn_tails_cut: AtomicU64,
    pub appends_refused_queue_full: AtomicU64,
    pub retention_segments_removed: AtomicU64,
    pub retention_messages_removed: AtomicU64,
}

/// A copy of a log's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Bytes stored.
    pub bytes: u64,
    /// Messages stored (from the first to the last sequence).
    pub messages: u64,
    /// Segment files.
    pub segments: usize,
    /// Oldest stored sequence (`last_seq + 1` when empty).
    pub first_seq: u64,
    /// Newest visible sequence, 0 when none ever.
    pub last_seq: u64,
    /// `fdatasync` calls.
    pub fsyncs: u64,
    /// Their total time.
    pub fsync_ns_total: u64,
    /// The longest.
    pub fsync_ns_max: u64,
    /// Failed writes or syncs.
    pub write_errors: u64,
    /// Damaged records found (at open and since).
    pub damaged_records: u64,
    /// Torn tails cut at open.
    pub torn_tails_cut: u64,
    /// Appends refused because the queue was full.
    pub appends_refused_queue_full: u64,
    /// Segments removed by retention.
    pub retention_segments_removed: u64,
    /// Messages removed by retention.
    pub retention_messages_removed: u64,
}

/// State shared by the log, its appender thread and its readers.
pub(crate) struct Shared {
    pub dir: PathBuf,
    pub config: LogConfig,
    pub segments: Mutex<Vec<Segment>>,
    /// Newest sequence readers may read.
    pub last_seq: AtomicU64,
    /// Body bytes of queued appends without completion.
    pub queued_bytes: AtomicU64,
    pub counters: Counters,
    pub on_append: AppendHook,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Shared").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn segments(&self) -> MutexGuard<'_, Vec<Segment>> {
        // Updates to the list are single assignments; a panic cannot leave it half-done.
        self.segments.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One append on its way to the appender thread.
pub(crate) struct AppendRequest {
    pub timestamp_ns: u64,
    pub body: Bytes,
    pub completion: Option<Completion>,
}

/// A stream's message log.
pub struct Log {
    shared: Arc<Shared>,
    sender: Mutex<Option<mpsc::Sender<AppendRequest>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Log").field("dir", &self.shared.dir).finish_non_exhaustive()
    }
}

impl Log {
    /// Opens the log in `dir` (created if missing), recovering every
    /// segment: a torn tail is cut, damaged records are reported.
    pub fn open(dir: &Path, config: LogConfig, on_append: AppendHook) -> Result<(Log, Recovery), StoreError> {
        std::fs::create_dir_all(dir).map_err(|error| StoreError::io(dir, "create", error))?;
        let (segments, recovery) = open_segments(dir, config.index_interval_bytes, true)?;
        let last_seq = segments.last().map_or(0, |segment| segment.last_seq);
        let counters = Counters::default();
        counters.damaged_records.store(recovery.damaged.iter().map(|damage| damage.count).sum(), Ordering::Relaxed);
        counters.torn_tails_cut.store(u64::from(recovery.torn_tail.is_some()), Ordering::Relaxed);
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            config,
            segments: Mutex::new(segments),
            last_seq: AtomicU64::new(last_seq),
            queued_bytes: AtomicU64::new(0),
            counters,
            on_append,
        });
        let (sender, receiver) = mpsc::channel();
        let appender = crate::appender::Appender::new(shared.clone())?;
        let name = format!(
            "sift-store-{}",
            dir.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned())
        );
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || appender.run(receiver))
            .map_err(|error| StoreError::io(dir, "start the appender thread for", error))?;
        let log = Log { shared, sender: Mutex::new(Some(sender)), thread: Mutex::new(Some(thread)) };
        Ok((log, recovery))
    }

    /// Queues an append. One with a completion is always taken (the
    /// caller's confirm windows bound how many wait); one without is
    /// refused with [`StoreError::QueueFull`] past `append_queue_bytes_max`,
    /// so that data nobody waits for never blocks a publisher. A refused
    /// append never runs its completion.
    pub fn append(&self, timestamp_ns: u64, body: Bytes, completion: Option<Completion>) -> Result<(), StoreError> {
        if completion.is_none() {
            let queued = self.shared.queued_bytes.load(Ordering::Relaxed);
            if queued + body.len() as u64 > self.shared.config.append_queue_bytes_max {
                self.shared.counters.appends_refused_queue_full.fetch_add(1, Ordering::Relaxed);
                return Err(StoreError::QueueFull);
            }
            self.shared.queued_bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        }
        let sender = self.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(sender) = sender.as_ref() else { return Err(StoreError::Closed) };
        let counted = completion.is_none();
        let length = body.len() as u64;
        sender.send(AppendRequest { timestamp_ns, body, completion }).map_err(|_| {
            if counted {
                self.shared.queued_bytes.fetch_sub(length, Ordering::Relaxed);
            }
            StoreError::Closed
        })
    }

    /// A reader with its own view of the segments.
    pub fn reader(&self) -> LogReader {
        LogReader::new(self.shared.clone())
    }

    /// Oldest stored sequence (`last_seq + 1` when nothing is stored).
    pub fn first_seq(&self) -> u64 {
        let segments = self.shared.segments();
        segments.first().map_or(1, |segment| segment.first_seq)
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
    /// `timestamp_ns`; `last_seq + 1` when none is.
    pub fn seq_at_or_after_time(&self, timestamp_ns: u64) -> Result<u64, StoreError> {
        let candidates: Vec<u64> = {
            let segments = self.shared.segments();
            segments
                .iter()
                .filter(|segment| segment.max_timestamp_ns >= timestamp_ns && segment.messages() > 0)
                .map(|segment| segment.first_seq)
                .collect()
        };
        let mut reader = self.reader();
        let mut records = Vec::new();
        for first_seq in candidates {
            let mut next = first_seq;
            loop {
                records.clear();
                let outcome = reader.read(next, 1024, 1 << 20, &mut records)?;
                if let Some(found) = records.iter().find(|record| record.timestamp_ns >= timestamp_ns) {
                    return Ok(found.seq);
                }
                let same_segment = self
                    .shared
                    .segments()
                    .iter()
                    .any(|segment| segment.first_seq == first_seq && outcome.next_seq <= segment.last_seq);
                if (records.is_empty() && outcome.gaps.is_empty()) || !same_segment {
                    break;
                }
                next = outcome.next_seq;
            }
        }
        Ok(self.last_seq() + 1)
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
            write_errors: load(&counters.write_errors),
            damaged_records: load(&counters.damaged_records),
            torn_tails_cut: load(&counters.torn_tails_cut),
            appends_refused_queue_full: load(&counters.appends_refused_queue_full),
            retention_segments_removed: load(&counters.retention_segments_removed),
            retention_messages_removed: load(&counters.retention_messages_removed),
        }
    }

    /// Removes what retention no longer keeps (the appender does it too,
    /// after each segment roll and every second).
    pub fn apply_retention(&self, now_ns: u64) -> crate::retention::RetentionOutcome {
        crate::retention::apply(&self.shared, now_ns)
    }

    /// Completes every queued append, syncs, and stops the appender.
    pub fn close(&self) {
        drop(self.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take());
        let thread = self.thread.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.close();
    }
}
