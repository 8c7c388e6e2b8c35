//! The Raft log of a replicated stream in a `sift_store::Log`.
//!
//! - Raft index `i` is the record of sequence `i + 1` (sequences start at
//!   1, Raft indexes at 0), its body an [`entry_codec`] encoding. The log
//!   is the stream's own: the broker's consumers read the same records,
//!   up to the committed sequence, and skip the group's own entries.
//! - `append` queues the entries to the log's appender and returns at
//!   once; until the appender has stored them they are read from a
//!   pending list, so openraft can replicate them while they are written.
//!   The flush callback runs once they are stored under the log's fsync
//!   policy (`always` for a replicated stream). So every append that
//!   arrives while an fsync runs shares the next one: the log's group
//!   commit batches a leader's publishes as it batches any stream's.
//! - `truncate` cuts the log's tail (`Log::truncate_from`, queued after the
//!   appends before it); `purge` records the purged log id first and is
//!   otherwise logical: reads never return an entry at or below it. When
//!   the next append lies past the end (a purge past the tail, as a
//!   follower that installs a snapshot does), the log restarts there
//!   (`Log::restart_at`).
//! - The vote, the committed and the purged log ids are the file
//!   `raft.json` beside the log, replaced atomically and synced before the
//!   call that changed them returns.

use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, Vote};
use sift_store::{Log, LogConfig};

use crate::entry_codec::{self, Entry};
use crate::{read_error, write_error, LogId, StorageError, TypeConfig};

/// Records read from the log at a time.
const READ_BATCH_RECORDS: usize = 256;
/// Bytes read from the log at a time, about.
const READ_BATCH_BYTES: usize = 1024 * 1024;
/// The name of the file beside the log that holds the vote and log ids.
pub const META_FILE: &str = "raft.json";

/// What is kept beside the log.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Meta {
    vote: Option<Vote<u64>>,
    committed: Option<LogId>,
    purged: Option<LogId>,
}

/// Entries appended but not yet stored by the log's appender, by index,
/// and the index the next append must have.
#[derive(Default)]
struct Pending {
    entries: std::collections::BTreeMap<u64, Entry>,
    next_index: u64,
}

/// The log and what is kept beside it, shared by the store and its readers.
struct Shared {
    log: Arc<Log>,
    meta_path: PathBuf,
    meta: Mutex<Meta>,
    pending: Mutex<Pending>,
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    fn meta(&self) -> std::sync::MutexGuard<'_, Meta> {
        locked(&self.meta)
    }

    /// Changes the kept state with `change` and makes it durable.
    fn save(&self, change: impl FnOnce(&mut Meta)) -> Result<(), StorageError> {
        let mut meta = self.meta();
        change(&mut meta);
        let bytes = serde_json::to_vec(&*meta).map_err(write_error)?;
        sift_store::write_file_atomically(&self.meta_path, &bytes).map_err(write_error)
    }

    /// The first index reads may return: past the purged one.
    fn first_readable_index(&self) -> u64 {
        self.meta().purged.map_or(0, |purged| purged.index + 1)
    }

    /// The entries of indexes `start..end` that are stored (or pending) and
    /// not purged, in order.
    fn entries(&self, start: u64, end: u64) -> Result<Vec<Entry>, StorageError> {
        let start = start.max(self.first_readable_index());
        // The pending ones first, with the log's end as it was then: an
        // entry leaves the pending list only after the log shows it, so
        // the two together have no hole.
        let (stored_end_seq, pending) = {
            let pending = locked(&self.pending);
            let stored_end_seq = self.log.last_seq() + 1;
            let from_index = start.max(stored_end_seq - 1);
            let tail: Vec<Entry> = match from_index < end {
                true => pending.entries.range(from_index..end).map(|(_, entry)| entry.clone()).collect(),
                false => Vec::new(),
            };
            (stored_end_seq, tail)
        };
        let end_seq = end.saturating_add(1).min(stored_end_seq);
        let mut entries = Vec::new();
        let mut reader = self.log.reader();
        let mut records = Vec::new();
        let mut next_seq = (start + 1).max(self.log.first_seq());
        while next_seq < end_seq {
            records.clear();
            let outcome =
                reader.read(next_seq, READ_BATCH_RECORDS, READ_BATCH_BYTES, &mut records).map_err(read_error)?;
            for record in records.iter().filter(|record| record.seq < end_seq) {
                entries.push(entry_codec::decode(record.timestamp_ns, &record.body).map_err(read_error)?);
            }
            if outcome.next_seq <= next_seq {
                break;
            }
            next_seq = outcome.next_seq;
        }
        entries.extend(pending);
        Ok(entries)
    }

    /// The log id of the last entry that is stored or pending and not
    /// purged; the purged one when there is none.
    fn last_log_id(&self) -> Result<Option<LogId>, StorageError> {
        if let Some((_, entry)) = locked(&self.pending).entries.last_key_value() {
            return Ok(Some(entry.log_id));
        }
        let purged = self.meta().purged;
        let last_seq = self.log.last_seq();
        let first_readable_seq = self.first_readable_index() + 1;
        if last_seq == 0 || last_seq < first_readable_seq.max(self.log.first_seq()) {
            return Ok(purged);
        }
        let last = self.entries(last_seq - 1, last_seq)?;
        Ok(last.last().map(|entry| entry.log_id).or(purged))
    }

    /// The appender stored `log_ids`: they leave the pending list (unless a
    /// cut replaced them there meanwhile).
    fn stored(&self, log_ids: &[LogId]) {
        let mut pending = locked(&self.pending);
        for log_id in log_ids {
            if pending.entries.get(&log_id.index).is_some_and(|entry| entry.log_id == *log_id) {
                pending.entries.remove(&log_id.index);
            }
        }
    }
}

/// A replicated stream's Raft log storage.
#[derive(Clone)]
pub struct SegmentLogStore {
    shared: Arc<Shared>,
}

/// A reader of the log, used by replication while appends go on.
#[derive(Clone)]
pub struct SegmentLogReader {
    shared: Arc<Shared>,
}

/// Why a store did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The log did not open.
    #[error(transparent)]
    Log(#[from] sift_store::StoreError),
    /// `raft.json` is not what this crate writes.
    #[error("{path}: {source}")]
    Meta {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}

impl SegmentLogStore {
    /// Opens (or creates) a store of its own in `dir`: the log's segments
    /// and `raft.json` side by side.
    pub fn open(dir: &Path, config: LogConfig) -> Result<SegmentLogStore, OpenError> {
        let (log, _) = Log::open(dir, config, Box::new(|_| {}))?;
        SegmentLogStore::on_log(Arc::new(log), dir)
    }

    /// The store of an open `log` (a replicated stream's), its kept state
    /// in `dir/raft.json`.
    pub fn on_log(log: Arc<Log>, dir: &Path) -> Result<SegmentLogStore, OpenError> {
        let meta_path = dir.join(META_FILE);
        let meta: Meta = match std::fs::read(&meta_path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| OpenError::Meta { path: meta_path.clone(), source })?
            }
            Err(_) => Meta::default(),
        };
        let next_index = log.last_seq();
        let pending = Mutex::new(Pending { entries: Default::default(), next_index });
        Ok(SegmentLogStore { shared: Arc::new(Shared { log, meta_path, meta: Mutex::new(meta), pending }) })
    }

    /// The log the entries are records of.
    pub fn log(&self) -> &Arc<Log> {
        &self.shared.log
    }

    /// Queues `entries`, which follow the last one (or a purge past it),
    /// to the log's appender; `stored` hears when the appender has them.
    fn store(&self, entries: Vec<Entry>, stored: LogFlushed<TypeConfig>) -> Result<(), StorageError> {
        let Some(first) = entries.first() else {
            stored.log_io_completed(Ok(()));
            return Ok(());
        };
        let log = &self.shared.log;
        let mut pending = locked(&self.shared.pending);
        if first.log_id.index > pending.next_index {
            // Only past a purge: the entries between were never to be read.
            debug_assert!(pending.entries.is_empty(), "a purge past the end follows every pending entry");
            log.restart_at(first.log_id.index + 1).map_err(write_error)?;
        } else if first.log_id.index < pending.next_index {
            let message = format!(
                "an append at index {} before the end of the log (index {})",
                first.log_id.index, pending.next_index
            );
            return Err(write_error(std::io::Error::other(message)));
        }
        let log_ids: Vec<LogId> = entries.iter().map(|entry| entry.log_id).collect();
        let last = entries.len() - 1;
        let mut records = Vec::with_capacity(entries.len());
        for entry in &entries {
            records.push(entry_codec::encode(entry).map_err(write_error)?);
        }
        pending.next_index = log_ids[last].index + 1;
        for entry in entries {
            pending.entries.insert(entry.log_id.index, entry);
        }
        // Queued under the pending lock, so that the log's order is the
        // order of the indexes.
        let shared = self.shared.clone();
        let mut stored = Some(stored);
        let mut completion = Some(Box::new(move |result: Result<u64, sift_store::StoreError>| {
            shared.stored(&log_ids);
            if let Some(stored) = stored.take() {
                stored.log_io_completed(result.map(|_| ()).map_err(std::io::Error::other));
            }
        }) as sift_store::Completion);
        for (position, (timestamp_ns, body)) in records.into_iter().enumerate() {
            let completion = if position == last { completion.take() } else { None };
            log.append(timestamp_ns, body, completion).map_err(write_error)?;
        }
        Ok(())
    }
}

/// The bounds of a range of indexes as `start..end`.
fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(start) => *start,
        Bound::Excluded(start) => start.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(end) => end.saturating_add(1),
        Bound::Excluded(end) => *end,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for SegmentLogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let (start, end) = bounds(&range);
        self.shared.entries(start, end)
    }
}

impl RaftLogReader<TypeConfig> for SegmentLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let (start, end) = bounds(&range);
        self.shared.entries(start, end)
    }
}

impl RaftLogStorage<TypeConfig> for SegmentLogStore {
    type LogReader = SegmentLogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id = self.shared.meta().purged;
        Ok(LogState { last_purged_log_id, last_log_id: self.shared.last_log_id()? })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        SegmentLogReader { shared: self.shared.clone() }
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError> {
        self.shared.save(|meta| meta.vote = Some(*vote))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError> {
        Ok(self.shared.meta().vote)
    }

    /// Kept in memory and written with the next vote or purge: openraft
    /// calls this before each batch it applies, and an fsync there would
    /// cost every commit. A committed id lost in a crash is learnt again
    /// from the leader.
    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.shared.meta().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.shared.meta().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
    {
        self.store(entries.into_iter().collect(), callback)
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let log = &self.shared.log;
        let mut pending = locked(&self.shared.pending);
        if log_id.index >= pending.next_index {
            return Ok(());
        }
        pending.entries.retain(|index, _| *index < log_id.index);
        pending.next_index = log_id.index;
        // Queued after the appends of the cut entries, so that it cuts them too.
        let from_seq = (log_id.index + 1).max(log.first_seq());
        log.truncate_from(from_seq).map_err(write_error)?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.shared.save(|meta| meta.purged = Some(log_id))
    }
}
