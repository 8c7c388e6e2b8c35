//! The appender thread: the only writer of a log.
//!
//! It takes every append already queued (up to [`WRITE_BATCH_BYTES_MAX`]),
//! gives them consecutive sequences, writes them with one `write`, syncs
//! under `always`, and only then makes them visible and completes them. So
//! under load one `fdatasync` serves every publish that arrived while the
//! previous one ran: group commit. A failed write or sync cuts the segment
//! back to where the batch began and fails the batch; the thread goes on,
//! and the next batch tries again.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::config::FsyncPolicy;
use crate::error::StoreError;
use crate::log::{segment_name, AppendRequest, Completion, Segment, Shared};
use crate::record::{encode_record, record_len};

/// Most bytes of records written with one `write`.
pub const WRITE_BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;
/// How often retention is checked besides after each segment roll.
pub const RETENTION_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// One record of the batch being written.
struct Pending {
    seq: u64,
    timestamp_ns: u64,
    offset_in_batch: u64,
    body_len: u64,
    counted: bool,
    completion: Option<Completion>,
}

pub(crate) struct Appender {
    shared: Arc<Shared>,
    file: File,
    path: PathBuf,
    /// Bytes of whole records in the active segment.
    offset: u64,
    next_seq: u64,
    active_records: u64,
    buffer: Vec<u8>,
    pending: Vec<Pending>,
    unsynced_since: Option<Instant>,
    last_retention: Instant,
}

impl Appender {
    pub(crate) fn new(shared: Arc<Shared>) -> Result<Appender, StoreError> {
        let (path, offset, next_seq, active_records) = {
            let segments = shared.segments();
            let Some(active) = segments.last() else {
                return Err(StoreError::Invalid("a log has at least one segment".into()));
            };
            (active.path.clone(), active.bytes, active.last_seq + 1, active.messages())
        };
        let file = OpenOptions::new().write(true).open(&path).map_err(|error| StoreError::io(&path, "open", error))?;
        Ok(Appender {
            shared,
            file,
            path,
            offset,
            next_seq,
            active_records,
            buffer: Vec::new(),
            pending: Vec::new(),
            unsynced_since: None,
            last_retention: Instant::now(),
        })
    }

    /// Serves appends until every sender is gone, then syncs what is unsynced.
    pub(crate) fn run(mut self, receiver: mpsc::Receiver<AppendRequest>) {
        loop {
            match receiver.recv_timeout(self.next_timer()) {
                Ok(first) => {
                    let mut batch_bytes = first.body.len();
                    let mut batch = vec![first];
                    while batch_bytes < WRITE_BATCH_BYTES_MAX {
                        let Ok(next) = receiver.try_recv() else { break };
                        batch_bytes += next.body.len();
                        batch.push(next);
                    }
                    self.write_batch(batch);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.sync_unsynced();
                    return;
                }
            }
            self.run_timers();
        }
    }

    fn next_timer(&self) -> Duration {
        let retention_due = RETENTION_CHECK_INTERVAL.saturating_sub(self.last_retention.elapsed());
        match (self.shared.config.fsync, self.unsynced_since) {
            (FsyncPolicy::Every(interval), Some(since)) => interval.saturating_sub(since.elapsed()).min(retention_due),
            _ => retention_due,
        }
    }

    fn run_timers(&mut self) {
        if let (FsyncPolicy::Every(interval), Some(since)) = (self.shared.config.fsync, self.unsynced_since) {
            if since.elapsed() >= interval {
                self.sync_unsynced();
            }
        }
        if self.last_retention.elapsed() >= RETENTION_CHECK_INTERVAL {
            self.retain();
        }
    }

    fn retain(&mut self) {
        self.last_retention = Instant::now();
        crate::retention::apply(&self.shared, crate::now_ns());
    }

    fn sync_unsynced(&mut self) {
        if self.unsynced_since.is_some() {
            match self.sync() {
                Ok(()) => self.unsynced_since = None,
                Err(error) => self.count_error(&error),
            }
        }
    }

    fn sync(&self) -> Result<(), StoreError> {
        let started = Instant::now();
        self.file.sync_data().map_err(|error| StoreError::io(&self.path, "sync", error))?;
        let elapsed_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let counters = &self.shared.counters;
        counters.fsyncs.fetch_add(1, Ordering::Relaxed);
        counters.fsync_ns_total.fetch_add(elapsed_ns, Ordering::Relaxed);
        counters.fsync_ns_max.fetch_max(elapsed_ns, Ordering::Relaxed);
        Ok(())
    }

    fn count_error(&self, error: &StoreError) {
        self.shared.counters.write_errors.fetch_add(1, Ordering::Relaxed);
        // One line per failure: the completions tell the publishers.
        eprintln!("sift-store: {error}");
    }

    fn write_batch(&mut self, batch: Vec<AppendRequest>) {
        for request in batch {
            let length = record_len(request.body.len()) as u64;
            if self.must_roll(length) {
                self.flush();
                if let Err(error) = self.roll() {
                    self.count_error(&error);
                }
            }
            let offset_in_batch = self.buffer.len() as u64;
            encode_record(&mut self.buffer, self.next_seq, request.timestamp_ns, &request.body);
            self.pending.push(Pending {
                seq: self.next_seq,
                timestamp_ns: request.timestamp_ns,
                offset_in_batch,
                body_len: request.body.len() as u64,
                counted: request.completion.is_none(),
                completion: request.completion,
            });
            self.next_seq += 1;
        }
        self.flush();
    }

    /// True when a record of `length` bytes belongs in a new segment.
    fn must_roll(&self, length: u64) -> bool {
        let config = &self.shared.config;
        let bytes = self.offset + self.buffer.len() as u64;
        let records = self.active_records + self.pending.len() as u64;
        records > 0 && (records >= config.segment_msgs_max() || bytes + length > config.segment_bytes_limit())
    }

    /// Writes the buffered records, syncs under `always`, then publishes
    /// and completes them; on failure cuts back and fails them.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let written = self
            .file
            .write_all_at(&self.buffer, self.offset)
            .map_err(|error| StoreError::io(&self.path, "write", error))
            .and_then(|()| match self.shared.config.fsync {
                FsyncPolicy::Always => self.sync(),
                _ => Ok(()),
            });
        let pending = std::mem::take(&mut self.pending);
        let counted: u64 = pending.iter().filter(|record| record.counted).map(|record| record.body_len).sum();
        self.shared.queued_bytes.fetch_sub(counted, Ordering::Relaxed);
        match written {
            Ok(()) => self.publish(pending),
            Err(error) => self.fail(pending, error),
        }
        self.buffer.clear();
    }

    fn publish(&mut self, pending: Vec<Pending>) {
        let batch_offset = self.offset;
        let last_seq = pending.last().map_or(self.next_seq - 1, |record| record.seq);
        {
            let mut segments = self.shared.segments();
            if let Some(active) = segments.last_mut() {
                let interval = self.shared.config.index_interval_bytes;
                for record in &pending {
                    let offset = batch_offset + record.offset_in_batch;
                    if active.index.last().is_none_or(|(_, indexed)| offset >= indexed + interval) {
                        active.index.push((record.seq, offset));
                    }
                    if active.messages() == 0 {
                        active.min_timestamp_ns = record.timestamp_ns;
                    }
                    active.min_timestamp_ns = active.min_timestamp_ns.min(record.timestamp_ns);
                    active.max_timestamp_ns = active.max_timestamp_ns.max(record.timestamp_ns);
                    active.last_seq = record.seq;
                }
                active.bytes = batch_offset + self.buffer.len() as u64;
                debug_assert_eq!(active.last_seq, last_seq, "the active segment ends with the batch");
            }
        }
        self.offset += self.buffer.len() as u64;
        self.active_records += pending.len() as u64;
        if !matches!(self.shared.config.fsync, FsyncPolicy::Always) && self.unsynced_since.is_none() {
            self.unsynced_since = Some(Instant::now());
        }
        self.shared.last_seq.store(last_seq, Ordering::Release);
        for record in pending {
            if let Some(completion) = record.completion {
                completion(Ok(record.seq));
            }
        }
        (self.shared.on_append)(last_seq);
    }

    fn fail(&mut self, pending: Vec<Pending>, error: StoreError) {
        self.count_error(&error);
        // Nothing of the batch may stay: a later batch must follow the last
        // record that was published.
        if let Err(cut_error) = self.file.set_len(self.offset) {
            self.count_error(&StoreError::io(&self.path, "truncate", cut_error));
        }
        self.next_seq -= pending.len() as u64;
        let full = error.is_full();
        for record in pending {
            if let Some(completion) = record.completion {
                let failure = match full {
                    true => StoreError::Full { path: self.path.clone() },
                    false => StoreError::Io {
                        path: self.path.clone(),
                        op: "write",
                        source: std::io::Error::other(error.to_string()),
                    },
                };
                completion(Err(failure));
            }
        }
    }

    /// Seals the active segment and starts the next one.
    fn roll(&mut self) -> Result<(), StoreError> {
        if !matches!(self.shared.config.fsync, FsyncPolicy::Os) {
            self.sync()?;
            self.unsynced_since = None;
        }
        let path = self.shared.dir.join(segment_name(self.next_seq));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|error| StoreError::io(&path, "create", error))?;
        crate::files::sync_dir(&self.shared.dir)?;
        let reading = file.try_clone().map_err(|error| StoreError::io(&path, "open", error))?;
        self.shared.segments().push(Segment {
            first_seq: self.next_seq,
            path: path.clone(),
            file: Arc::new(reading),
            bytes: 0,
            last_seq: self.next_seq - 1,
            min_timestamp_ns: 0,
            max_timestamp_ns: 0,
            index: Vec::new(),
            damaged: Vec::new(),
        });
        self.file = file;
        self.path = path;
        self.offset = 0;
        self.active_records = 0;
        self.retain();
        Ok(())
    }
}
