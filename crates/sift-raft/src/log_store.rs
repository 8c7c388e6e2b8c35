//! The Raft log of a replicated stream in a `sift_store::Log`.
//!
//! - Raft index `i` is the record of sequence `i + 1` (sequences start at
//!   1, Raft indexes at 0), its body an [`entry_codec`] encoding.
//! - `append` queues every entry to the log's appender and returns once the
//!   last is stored under the log's fsync policy (`always` for a
//!   replicated stream): then the entries are readable and durable, so the
//!   flush callback is called at once.
//! - `truncate` cuts the log's tail (`Log::truncate_from`); `purge` records
//!   the purged log id first and is otherwise logical: reads never return
//!   an entry at or below it. When the next append lies past the end (a
//!   purge past the tail, as a follower that installs a snapshot does), the
//!   log restarts there (`Log::restart_at`).
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
const META_FILE: &str = "raft.json";

/// What is kept beside the log.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Meta {
    vote: Option<Vote<u64>>,
    committed: Option<LogId>,
    purged: Option<LogId>,
}

/// The log and what is kept beside it, shared by the store and its readers.
struct Shared {
    log: Log,
    meta_path: PathBuf,
    meta: Mutex<Meta>,
}

impl Shared {
    fn meta(&self) -> std::sync::MutexGuard<'_, Meta> {
        self.meta.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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

    /// The entries of indexes `start..end` that are stored and not purged,
    /// in order.
    fn entries(&self, start: u64, end: u64) -> Result<Vec<Entry>, StorageError> {
        let start = start.max(self.first_readable_index());
        let end_seq = end.saturating_add(1).min(self.log.last_seq() + 1);
        let mut entries = Vec::new();
        let mut reader = self.log.reader();
        let mut records = Vec::new();
        let mut next_seq = (start + 1).max(self.log.first_seq());
        while next_seq < end_seq {
            records.clear();
            let outcome =
                reader.read(next_seq, READ_BATCH_RECORDS, READ_BATCH_BYTES, &mut records).map_err(read_error)?;
            for record in records.iter().filter(|record| record.seq < end_seq) {
                entries.push(entry_codec::decode(&record.body).map_err(read_error)?);
            }
            if outcome.next_seq <= next_seq {
                break;
            }
            next_seq = outcome.next_seq;
        }
        Ok(entries)
    }

    /// The log id of the last stored entry that is not purged; the purged
    /// one when there is none.
    fn last_log_id(&self) -> Result<Option<LogId>, StorageError> {
        let purged = self.meta().purged;
        let last_seq = self.log.last_seq();
        let first_readable_seq = self.first_readable_index() + 1;
        if last_seq == 0 || last_seq < first_readable_seq.max(self.log.first_seq()) {
            return Ok(purged);
        }
        let last = self.entries(last_seq - 1, last_seq)?;
        Ok(last.last().map(|entry| entry.log_id).or(purged))
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
    /// Opens (or creates) the store in `dir`: the log in `dir/log` under
    /// `config`, the kept state in `dir/raft.json`.
    pub fn open(dir: &Path, config: LogConfig) -> Result<SegmentLogStore, OpenError> {
        let (log, _) = Log::open(&dir.join("log"), config, Box::new(|_| {}))?;
        let meta_path = dir.join(META_FILE);
        let meta = match std::fs::read(&meta_path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| OpenError::Meta { path: meta_path.clone(), source })?
            }
            Err(_) => Meta::default(),
        };
        Ok(SegmentLogStore { shared: Arc::new(Shared { log, meta_path, meta: Mutex::new(meta) }) })
    }

    /// Stores `entries`, which follow the last stored one (or a purge past
    /// it), and waits until the last is stored.
    async fn store(&self, entries: Vec<Entry>) -> Result<(), StorageError> {
        let Some(first) = entries.first() else { return Ok(()) };
        let log = &self.shared.log;
        let first_seq = first.log_id.index + 1;
        let expected_seq = log.last_seq() + 1;
        if first_seq > expected_seq {
            // Only past a purge: the entries between were never to be read.
            log.restart_at(first_seq).map_err(write_error)?;
        } else if first_seq < expected_seq {
            let message = format!(
                "an append at index {} before the end of the log (sequence {expected_seq})",
                first.log_id.index
            );
            return Err(write_error(std::io::Error::other(message)));
        }
        let (stored, waiting) = tokio::sync::oneshot::channel();
        let last = entries.len() - 1;
        let mut stored = Some(stored);
        for (position, entry) in entries.iter().enumerate() {
            let body = entry_codec::encode(entry).map_err(write_error)?;
            let completion: Option<sift_store::Completion> = match (position == last, stored.take()) {
                (true, Some(sender)) => Some(Box::new(move |result| {
                    let _ = sender.send(result);
                })),
                (_, sender) => {
                    stored = sender;
                    None
                }
            };
            log.append(0, body.into(), completion).map_err(write_error)?;
        }
        let last_seq = waiting.await.map_err(write_error)?.map_err(write_error)?;
        debug_assert_eq!(last_seq, first_seq + last as u64, "the entries got the sequences of their indexes");
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

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.shared.save(|meta| meta.committed = committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.shared.meta().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        self.store(entries).await?;
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let log = &self.shared.log;
        let from_seq = (log_id.index + 1).max(log.first_seq());
        if from_seq <= log.last_seq() {
            log.truncate_from(from_seq).map_err(write_error)?;
        }
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.shared.save(|meta| meta.purged = Some(log_id))
    }
}
