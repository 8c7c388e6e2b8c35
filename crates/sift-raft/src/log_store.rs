//! The Raft log of a replicated stream in a `sift_store::Log`.
//!
//! - Each Raft entry is one or more records of the log ([`entry_codec`]):
//!   a batch of messages a record per message, every other entry one. The
//!   log is the stream's own: the broker's consumers read the same
//!   records, up to the committed sequence, and skip the group's own.
//!   [`SeqMap`] says where each entry starts; it is rebuilt at open from
//!   the records' headers, and an entry the log holds only part of (a
//!   crash while it was written, never acknowledged) is cut then.
//! - `append` queues the entries' records to the log's appender and
//!   returns at once; until the appender has stored an entry's last record
//!   the entry is read from a pending list, so that openraft can replicate
//!   it while it is written. The flush callback runs once the last entry
//!   is stored under the log's fsync policy (`always` for a replicated
//!   stream).
//! - `truncate` cuts the log's tail (`Log::truncate_from`, queued after the
//!   appends before it); `purge` records the purged log id first and is
//!   otherwise logical: reads never return an entry at or below it. When
//!   the next append lies past the end (a purge past the tail, as a
//!   follower that installs a snapshot does), the log restarts there
//!   (`Log::restart_at`), its sequences going on from the last.
//! - The vote, the committed and the purged log ids are the file
//!   `raft.json` beside the log, replaced atomically and synced before the
//!   call that changed them returns (the committed id is written with the
//!   next of the others: it is learnt again from the leader).

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, Vote};
use sift_store::{Log, LogConfig};

use crate::entry_codec::{self, Entry};
use crate::seq_map::SeqMap;
use crate::{read_error, write_error, LogId, StorageError, TypeConfig};

/// Records read from the log at a time.
const READ_BATCH_RECORDS: usize = 512;
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

/// The log's end as Raft sees it: where entries start, the next index and
/// sequence, and the entries appended but not yet stored whole.
#[derive(Debug)]
struct Tail {
    map: SeqMap,
    next_index: u64,
    next_seq: u64,
    pending: BTreeMap<u64, Entry>,
}

/// The log and what is kept beside it, shared by the store and its readers.
struct Shared {
    log: Arc<Log>,
    meta_path: PathBuf,
    meta: Mutex<Meta>,
    tail: Mutex<Tail>,
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
        // The pending ones first, with where the stored ones end: an entry
        // leaves the pending list only once the log holds all of it.
        let (from_seq, stored_end_index, pending) = {
            let tail = locked(&self.tail);
            let stored_end_index = tail.pending.keys().next().copied().unwrap_or(tail.next_index);
            let pending: Vec<Entry> = match start < end {
                true => tail.pending.range(start..end).map(|(_, entry)| entry.clone()).collect(),
                false => Vec::new(),
            };
            (tail.map.from(start), stored_end_index.min(end), pending)
        };
        let mut entries = Vec::new();
        if let Some((from_index, from_seq)) = from_seq.filter(|(from_index, _)| *from_index < stored_end_index) {
            self.read_stored(from_seq, start.max(from_index), stored_end_index, &mut entries)?;
        }
        entries.extend(pending);
        Ok(entries)
    }

    /// Reads the stored entries of indexes `start..end` from `from_seq`.
    fn read_stored(&self, from_seq: u64, start: u64, end: u64, entries: &mut Vec<Entry>) -> Result<(), StorageError> {
        let mut reader = self.log.reader();
        let mut records = Vec::new();
        let mut parts: Vec<(u64, Bytes)> = Vec::new();
        let mut next_seq = from_seq.max(self.log.first_seq());
        while next_seq <= self.log.last_seq() {
            records.clear();
            let outcome =
                reader.read(next_seq, READ_BATCH_RECORDS, READ_BATCH_BYTES, &mut records).map_err(read_error)?;
            if let Some(gap) = outcome.gaps.first() {
                let message = format!("the Raft log lacks records {}..{}", gap.first_seq, gap.first_seq + gap.count);
                return Err(read_error(std::io::Error::other(message)));
            }
            for record in records.drain(..) {
                let head = entry_codec::header_of(&record.body).map_err(read_error)?;
                if head.log_id.index < start {
                    continue;
                }
                if head.log_id.index >= end {
                    return Ok(());
                }
                parts.push((record.timestamp_ns, record.body));
                if head.part + 1 == head.parts {
                    entries.push(entry_codec::decode(&parts).map_err(read_error)?);
                    parts.clear();
                }
            }
            if outcome.next_seq <= next_seq {
                break;
            }
            next_seq = outcome.next_seq;
        }
        Ok(())
    }

    /// The log id of the last entry that is stored or pending and not
    /// purged; the purged one when there is none.
    fn last_log_id(&self) -> Result<Option<LogId>, StorageError> {
        let (last_index, last_pending) = {
            let tail = locked(&self.tail);
            (tail.next_index.checked_sub(1), tail.pending.last_key_value().map(|(_, entry)| entry.log_id))
        };
        if last_pending.is_some() {
            return Ok(last_pending);
        }
        let purged = self.meta().purged;
        match last_index.filter(|index| *index >= self.first_readable_index()) {
            Some(index) => Ok(self.entries(index, index + 1)?.last().map(|entry| entry.log_id).or(purged)),
            None => Ok(purged),
        }
    }

    /// The appender stored `log_ids` whole: they leave the pending list
    /// (unless a cut replaced them there meanwhile).
    fn stored(&self, log_ids: &[LogId]) {
        let mut tail = locked(&self.tail);
        for log_id in log_ids {
            if tail.pending.get(&log_id.index).is_some_and(|entry| entry.log_id == *log_id) {
                tail.pending.remove(&log_id.index);
            }
        }
    }
}

/// Reads the log's record headers to find where each entry starts: the
/// map, the next index and sequence, and the sequence of an entry the log
/// holds only part of (cut it).
fn scan(log: &Log, purged: Option<LogId>) -> Result<(Tail, Option<u64>), sift_store::StoreError> {
    let first_seq = log.first_seq();
    let mut tail = Tail {
        map: SeqMap::starting(purged.map_or(0, |purged| purged.index + 1), first_seq),
        next_index: purged.map_or(0, |purged| purged.index + 1),
        next_seq: first_seq,
        pending: BTreeMap::new(),
    };
    let mut reader = log.reader();
    let mut records = Vec::new();
    let mut partial_from = None;
    let mut next_seq = first_seq;
    let mut first_record = true;
    while next_seq <= log.last_seq() {
        records.clear();
        let outcome = reader.read(next_seq, READ_BATCH_RECORDS, READ_BATCH_BYTES, &mut records)?;
        for record in &records {
            let Ok(head) = entry_codec::header_of(&record.body) else { continue };
            if first_record {
                tail.map = SeqMap::starting(head.log_id.index, record.seq);
                first_record = false;
            }
            if head.part == 0 {
                tail.map.push(head.log_id.index, record.seq, u64::from(head.parts));
                partial_from = Some(record.seq);
            }
            if head.part + 1 == head.parts {
                tail.next_index = head.log_id.index + 1;
                tail.next_seq = record.seq + 1;
                partial_from = None;
            }
        }
        if outcome.next_seq <= next_seq {
            break;
        }
        next_seq = outcome.next_seq;
    }
    if let Some(from_seq) = partial_from {
        tail.map.cut_from(tail.next_index);
        debug_assert_eq!(tail.map.seq_of(tail.next_index), Some(from_seq), "the part cut is where the next starts");
    }
    Ok((tail, partial_from))
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
        let (tail, partial_from) = scan(&log, meta.purged)?;
        if let Some(from_seq) = partial_from {
            log.truncate_from(from_seq)?;
        }
        let shared = Shared { log, meta_path, meta: Mutex::new(meta), tail: Mutex::new(tail) };
        Ok(SegmentLogStore { shared: Arc::new(shared) })
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
        let mut tail = locked(&self.shared.tail);
        if first.log_id.index > tail.next_index {
            // Only past a purge: the entries between were never to be read.
            debug_assert!(tail.pending.is_empty(), "a purge past the end follows every pending entry");
            if log.last_seq() >= log.first_seq() {
                log.restart_at(tail.next_seq).map_err(write_error)?;
            }
            tail.map = SeqMap::starting(first.log_id.index, tail.next_seq);
            tail.next_index = first.log_id.index;
        } else if first.log_id.index < tail.next_index {
            let message = format!(
                "an append at index {} before the end of the log (index {})",
                first.log_id.index, tail.next_index
            );
            return Err(write_error(std::io::Error::other(message)));
        }
        let mut records = Vec::new();
        for entry in &entries {
            let encoded = entry_codec::encode(entry).map_err(write_error)?;
            let (index, seq) = (entry.log_id.index, tail.next_seq);
            tail.map.push(index, seq, encoded.len() as u64);
            tail.next_index = index + 1;
            tail.next_seq = seq + encoded.len() as u64;
            records.extend(encoded);
        }
        let log_ids: Vec<LogId> = entries.iter().map(|entry| entry.log_id).collect();
        for entry in entries {
            tail.pending.insert(entry.log_id.index, entry);
        }
        // Queued under the tail's lock, so that the log's order is the
        // order of the indexes.
        let shared = self.shared.clone();
        let mut stored = Some(stored);
        let mut completion = Some(Box::new(move |result: Result<u64, sift_store::StoreError>| {
            shared.stored(&log_ids);
            if let Some(stored) = stored.take() {
                stored.log_io_completed(result.map(|_| ()).map_err(std::io::Error::other));
            }
        }) as sift_store::Completion);
        let last = records.len() - 1;
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

/// The store reads as its readers do.
impl RaftLogReader<TypeConfig> for SegmentLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        SegmentLogReader { shared: self.shared.clone() }.try_get_log_entries(range).await
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
        let mut tail = locked(&self.shared.tail);
        if log_id.index >= tail.next_index {
            return Ok(());
        }
        let Some(from_seq) = tail.map.seq_of(log_id.index) else { return Ok(()) };
        tail.pending.retain(|index, _| *index < log_id.index);
        tail.map.cut_from(log_id.index);
        tail.next_index = log_id.index;
        tail.next_seq = from_seq;
        // Queued after the appends of the cut entries, so that it cuts them too.
        if from_seq >= log.first_seq() {
            log.truncate_from(from_seq).map_err(write_error)?;
        }
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.shared.save(|meta| meta.purged = Some(log_id))
    }
}
