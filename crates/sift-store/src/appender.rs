//! The appender thread: the only writer of a log.
//!
//! It blocks until an append arrives, then takes every append already
//! queued behind it (up to [`WRITE_BATCH_BYTES_MAX`]), gives them
//! consecutive sequences, encodes them into one buffer and writes it with
//! one positioned write. Under `always` it then `fdatasync`s, and only
//! after that makes the records visible and completes them. So under load
//! one `fdatasync` serves every append that arrived while the previous one
//! ran: group commit, with no timer and no added latency when idle.
//!
//! Order of effects after a successful write, which readers rely on:
//! segment metadata, then the last visible sequence (`Release`), then the
//! completions, then the append hook. A completion therefore never fires
//! before a new reader can read its record.
//!
//! A failed write or sync fails the batch (see `active.rs`): its sequences
//! are given again to the next batch, which tries again, so storing
//! resumes by itself when space returns. Nothing completed before is
//! touched.

use std::fs::OpenOptions;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::active::ActiveSegment;
use crate::config::FsyncPolicy;
use crate::error::StoreError;
use crate::log::{AppendRequest, Command, Completion, Shared};
use crate::record::{encode_record, record_len};
use crate::retention::RetentionOutcome;
use crate::segment::{segment_name, Segment};

/// Most body bytes taken into one write batch.
pub const WRITE_BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;
/// How often retention runs besides after each segment roll (only for a
/// log that has a retention limit).
pub const RETENTION_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// One record of the batch being written.
struct Pending {
    seq: u64,
    timestamp_ns: u64,
    offset_in_batch: u64,
    record_bytes: u64,
    completion: Option<Completion>,
}

/// The appender's state; owned by its thread.
pub(crate) struct Appender {
    shared: Arc<Shared>,
    active: ActiveSegment,
    /// The sequence the next record gets.
    next_seq: u64,
    /// Encoded records of the batch not yet written.
    buffer: Vec<u8>,
    pending: Vec<Pending>,
    /// When data was first written and not yet synced (not under `always`).
    unsynced_since: Option<Instant>,
    last_retention: Instant,
    /// Why a cut of the tail failed after it began: the files and this
    /// state may disagree until the log is opened again (which finishes
    /// the cut), so appends are refused meanwhile.
    cut_failed: Option<String>,
}

/// The active segment of `shared` (its last) opened for appending, and
/// the sequence the next record gets.
fn active_of(shared: &Shared) -> Result<(ActiveSegment, u64), StoreError> {
    let (path, length, records, next_seq) = {
        let segments = shared.segments();
        let Some(active) = segments.last() else {
            return Err(StoreError::Invalid("a log has at least one segment".into()));
        };
        (active.path.clone(), active.bytes, active.messages(), active.last_seq + 1)
    };
    let file = OpenOptions::new().write(true).open(&path).map_err(|error| StoreError::io(&path, "open", error))?;
    Ok((ActiveSegment::new(Box::new(file), path, length, records), next_seq))
}

impl Appender {
    /// The appender of `shared`'s last segment.
    pub(crate) fn new(shared: Arc<Shared>) -> Result<Appender, StoreError> {
        let (active, next_seq) = active_of(&shared)?;
        Ok(Appender {
            shared,
            active,
            next_seq,
            buffer: Vec::new(),
            pending: Vec::new(),
            unsynced_since: None,
            last_retention: Instant::now(),
            cut_failed: None,
        })
    }

    /// Serves commands until every sender is gone, then syncs what is
    /// unsynced (under every policy) and returns how that went.
    pub(crate) fn run(mut self, receiver: mpsc::Receiver<Command>) -> Result<(), StoreError> {
        loop {
            let received = match self.next_timer() {
                Some(wait) => receiver.recv_timeout(wait),
                None => receiver.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            match received {
                Ok(command) => self.serve(command, &receiver),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return self.finish(),
            }
            self.run_timers();
        }
    }

    /// Runs one command; an append takes every append queued behind it
    /// into its batch.
    fn serve(&mut self, command: Command, receiver: &mpsc::Receiver<Command>) {
        match command {
            Command::Retain { now_ns, reply } => {
                let _ = reply.send(self.retain(now_ns));
            }
            Command::Truncate { from_seq, reply } => {
                let _ = reply.send(self.truncate(from_seq));
            }
            Command::Restart { next_seq, reply } => {
                let _ = reply.send(self.restart(next_seq));
            }
            Command::Append(first) => {
                let mut batch_bytes = first.body.len();
                let mut batch = vec![first];
                let mut after_batch = None;
                while batch_bytes < WRITE_BATCH_BYTES_MAX {
                    match receiver.try_recv() {
                        Ok(Command::Append(next)) => {
                            batch_bytes += next.body.len();
                            batch.push(next);
                        }
                        Ok(other) => {
                            after_batch = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                self.write_batch(batch);
                if let Some(command) = after_batch {
                    self.serve(command, receiver);
                }
            }
        }
    }

    /// How long until a timer is due: the `every` sync, the retention tick.
    fn next_timer(&self) -> Option<Duration> {
        let sync_due = match (self.shared.config.fsync, self.unsynced_since) {
            (FsyncPolicy::Every(interval), Some(since)) => Some(interval.saturating_sub(since.elapsed())),
            _ => None,
        };
        let retention_due =
            self.has_retention().then(|| RETENTION_CHECK_INTERVAL.saturating_sub(self.last_retention.elapsed()));
        match (sync_due, retention_due) {
            (Some(sync), Some(retention)) => Some(sync.min(retention)),
            (sync, retention) => sync.or(retention),
        }
    }

    fn run_timers(&mut self) {
        if let (FsyncPolicy::Every(interval), Some(since)) = (self.shared.config.fsync, self.unsynced_since) {
            if since.elapsed() >= interval {
                self.sync_unsynced();
            }
        }
        if self.has_retention() && self.last_retention.elapsed() >= RETENTION_CHECK_INTERVAL {
            if let Err(error) = self.retain(sift_core::system_now_ns()) {
                self.count_error(&error);
            }
        }
    }

    fn has_retention(&self) -> bool {
        self.shared.config.retention != crate::config::Retention::default()
    }

    /// A retention pass: rolls the active segment first when its newest
    /// record is past the age limit (so that it can go too), then removes
    /// old segments.
    fn retain(&mut self, now_ns: u64) -> Result<RetentionOutcome, StoreError> {
        self.last_retention = Instant::now();
        let max_age_ns = self.shared.config.retention.max_age_ns;
        let aged = max_age_ns > 0
            && self.active.records() > 0
            && self
                .shared
                .segments()
                .last()
                .is_some_and(|active| active.max_timestamp_ns < now_ns.saturating_sub(max_age_ns));
        if aged {
            debug_assert!(self.pending.is_empty(), "retention runs between batches");
            self.roll()?;
        }
        crate::retention::remove_old_segments(&self.shared, now_ns)
    }

    /// Removes every record from `from_seq` on (`truncate.rs`), then
    /// appends again from `from_seq`.
    fn truncate(&mut self, from_seq: u64) -> Result<u64, StoreError> {
        debug_assert!(self.pending.is_empty(), "a cut runs between batches");
        if let Some(why) = &self.cut_failed {
            return Err(StoreError::Invalid(why.clone()));
        }
        let first_seq = self.shared.segments().first().map_or(1, |segment| segment.first_seq);
        let last_seq = self.shared.last_seq.load(Ordering::Acquire);
        if from_seq < first_seq.max(1) {
            return Err(StoreError::Invalid(format!(
                "cannot cut the log from sequence {from_seq}: its first stored sequence is {first_seq}"
            )));
        }
        if from_seq > last_seq {
            return Ok(0);
        }
        let dir = self.shared.dir.clone();
        crate::truncate::mark(&dir, from_seq)?;
        if let Err(error) = self.cut_and_reopen(from_seq) {
            self.cut_failed = Some(format!("a cut of the log's tail failed ({error}); open the log again"));
            return Err(error);
        }
        crate::truncate::unmark(&dir, crate::truncate::MARKER_FILE)?;
        let removed = last_seq + 1 - from_seq;
        self.shared.counters.records_truncated.fetch_add(removed, Ordering::Relaxed);
        Ok(removed)
    }

    /// Removes every record and resumes at `next_seq`, which may lie past
    /// the end (a Raft log purged past its tail); returns how many went.
    fn restart(&mut self, next_seq: u64) -> Result<u64, StoreError> {
        debug_assert!(self.pending.is_empty(), "a restart runs between batches");
        if let Some(why) = &self.cut_failed {
            return Err(StoreError::Invalid(why.clone()));
        }
        let (first_seq, last_seq) = (
            self.shared.segments().first().map_or(1, |segment| segment.first_seq),
            self.shared.last_seq.load(Ordering::Acquire),
        );
        if next_seq <= last_seq || next_seq == 0 {
            return Err(StoreError::Invalid(format!(
                "cannot restart the log at sequence {next_seq}: it holds sequences up to {last_seq}; cut it first"
            )));
        }
        let dir = self.shared.dir.clone();
        crate::truncate::mark_restart(&dir, next_seq)?;
        let restarted = crate::truncate::restart_files(&dir, next_seq).and_then(|()| self.reopen(next_seq - 1));
        if let Err(error) = restarted {
            self.cut_failed = Some(format!("a restart of the log failed ({error}); open the log again"));
            return Err(error);
        }
        crate::truncate::unmark(&dir, crate::truncate::RESTART_MARKER_FILE)?;
        let removed = (last_seq + 1).saturating_sub(first_seq);
        self.shared.counters.records_truncated.fetch_add(removed, Ordering::Relaxed);
        Ok(removed)
    }

    /// The cut itself, then the segment list, the visible end, the readers'
    /// generation and the active segment as the files now are.
    fn cut_and_reopen(&mut self, from_seq: u64) -> Result<(), StoreError> {
        crate::truncate::cut_files(&self.shared.dir, from_seq)?;
        self.reopen(from_seq - 1)
    }

    /// Takes the files as they are after a cut or a restart: the segment
    /// list, the visible end (`last_seq`), the readers' generation and the
    /// active segment.
    fn reopen(&mut self, last_seq: u64) -> Result<(), StoreError> {
        let (segments, recovery) =
            crate::recovery::open_segments(&self.shared.dir, self.shared.config.index_interval_bytes, true)?;
        debug_assert_eq!(recovery.last_seq, last_seq, "the log ends where the change left it");
        *self.shared.segments() = segments;
        self.shared.last_seq.store(recovery.last_seq, Ordering::Release);
        self.shared.generation.fetch_add(1, Ordering::AcqRel);
        let (active, next_seq) = active_of(&self.shared)?;
        (self.active, self.next_seq, self.unsynced_since) = (active, next_seq, None);
        Ok(())
    }

    /// Syncs the active segment if it has unsynced data; a failure is
    /// counted and retried an interval later.
    fn sync_unsynced(&mut self) {
        if self.unsynced_since.is_none() {
            return;
        }
        match self.active.sync(&self.shared.counters) {
            Ok(()) => self.unsynced_since = None,
            Err(error) => {
                self.count_error(&error);
                self.unsynced_since = Some(Instant::now());
            }
        }
    }

    /// At close: syncs what is unsynced, under every policy.
    fn finish(mut self) -> Result<(), StoreError> {
        debug_assert!(self.pending.is_empty(), "batches are written whole");
        match self.unsynced_since.take() {
            Some(_) => self.active.sync(&self.shared.counters),
            None => Ok(()),
        }
    }

    /// Counts a failure no completion reports, and says it once.
    fn count_error(&self, error: &StoreError) {
        self.shared.counters.write_errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("sift-store: {error}");
    }

    /// Numbers, encodes and writes `batch`, rolling the segment where a
    /// record would not fit, and completes every request in it.
    pub(crate) fn write_batch(&mut self, batch: Vec<AppendRequest>) {
        let batch_bytes: u64 = batch.iter().map(|request| request.body.len() as u64).sum();
        if let Some(why) = &self.cut_failed {
            for request in batch {
                if let Some(completion) = request.completion {
                    completion(Err(StoreError::Invalid(why.clone())));
                }
            }
            self.shared.queued_bytes.fetch_sub(batch_bytes, Ordering::Relaxed);
            return;
        }
        for request in batch {
            let record_bytes = record_len(request.body.len()) as u64;
            if self.must_roll(record_bytes) {
                self.flush();
                let rolled = self.roll().and_then(|()| self.retain_after_roll());
                if let Err(error) = rolled {
                    self.count_error(&error);
                }
            }
            let offset_in_batch = self.buffer.len() as u64;
            encode_record(&mut self.buffer, self.next_seq, request.timestamp_ns, &request.body);
            self.pending.push(Pending {
                seq: self.next_seq,
                timestamp_ns: request.timestamp_ns,
                offset_in_batch,
                record_bytes,
                completion: request.completion,
            });
            self.next_seq += 1;
        }
        self.flush();
        self.shared.queued_bytes.fetch_sub(batch_bytes, Ordering::Relaxed);
    }

    fn retain_after_roll(&mut self) -> Result<(), StoreError> {
        match self.has_retention() {
            true => crate::retention::remove_old_segments(&self.shared, sift_core::system_now_ns()).map(|_| ()),
            false => Ok(()),
        }
    }

    /// True when a record of `record_bytes` belongs in a new segment: the
    /// active one holds a record already, and is at its message limit or
    /// would pass its byte limit.
    fn must_roll(&self, record_bytes: u64) -> bool {
        let config = &self.shared.config;
        let records = self.active.records() + self.pending.len() as u64;
        let bytes = self.active.length() + self.buffer.len() as u64;
        records > 0 && (records >= config.segment_msgs_max() || bytes + record_bytes > config.segment_bytes_limit())
    }

    /// Writes the buffered records (syncing under `always`), then publishes
    /// and completes them; on failure fails them and takes their sequences back.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let batch_offset = self.active.length();
        let sync = self.shared.config.fsync == FsyncPolicy::Always;
        let pending = std::mem::take(&mut self.pending);
        let stored = self.active.store(&self.buffer, pending.len() as u64, sync, &self.shared.counters);
        self.buffer.clear();
        match stored {
            Ok(()) => self.publish(pending, batch_offset),
            Err(error) => self.fail(pending, error),
        }
    }

    /// Makes written records visible, then completes them, then tells the hook.
    fn publish(&mut self, pending: Vec<Pending>, batch_offset: u64) {
        let Some(last_seq) = pending.last().map(|record| record.seq) else { return };
        {
            let mut segments = self.shared.segments();
            let interval = self.shared.config.index_interval_bytes;
            if let Some(active) = segments.last_mut() {
                for record in &pending {
                    let offset = batch_offset + record.offset_in_batch;
                    active.add_record(record.seq, record.timestamp_ns, offset, offset + record.record_bytes, interval);
                }
                debug_assert_eq!(active.bytes, self.active.length(), "metadata and file agree");
            }
        }
        if self.shared.config.fsync != FsyncPolicy::Always && self.unsynced_since.is_none() {
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

    /// Fails every record of a batch that could not be stored, and gives
    /// their sequences to the next batch.
    fn fail(&mut self, pending: Vec<Pending>, error: StoreError) {
        self.shared.counters.write_errors.fetch_add(1, Ordering::Relaxed);
        self.next_seq -= pending.len() as u64;
        debug_assert_eq!(pending.first().map(|record| record.seq), Some(self.next_seq));
        for record in pending {
            if let Some(completion) = record.completion {
                completion(Err(error.duplicate()));
            }
        }
    }

    /// Seals the active segment (synced unless the policy is `os`) and
    /// starts the next one, named by the next sequence. A failure leaves
    /// the active segment as it was (it grows past its limit until a later
    /// roll succeeds) and no new file behind.
    fn roll(&mut self) -> Result<(), StoreError> {
        debug_assert!(self.pending.is_empty(), "a roll follows a flush");
        if self.shared.config.fsync != FsyncPolicy::Os && self.unsynced_since.is_some() {
            self.active.sync(&self.shared.counters)?;
        }
        let path = self.shared.dir.join(segment_name(self.next_seq));
        let opened = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path);
        let file = opened.map_err(|error| StoreError::io(&path, "create", error))?;
        let prepared = crate::files::sync_dir(&self.shared.dir)
            .and_then(|()| file.try_clone().map_err(|error| StoreError::io(&path, "open", error)));
        let reading = match prepared {
            Ok(reading) => reading,
            Err(error) => {
                let _ = std::fs::remove_file(&path);
                return Err(error);
            }
        };
        self.shared.segments().push(Segment::empty(self.next_seq, path.clone(), Arc::new(reading)));
        self.active = ActiveSegment::new(Box::new(file), path, 0, 0);
        self.unsynced_since = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use bytes::Bytes;

    use super::*;
    use crate::active::tests::FailingFile;
    use crate::config::LogConfig;

    type Outcomes = Arc<Mutex<Vec<Result<u64, bool>>>>;

    /// Requests whose completions record (seq or is-full) into `outcomes`.
    fn requests(count: usize, outcomes: &Outcomes) -> Vec<AppendRequest> {
        (0..count)
            .map(|index| {
                let outcomes = outcomes.clone();
                let completion: Completion = Box::new(move |result: Result<u64, StoreError>| {
                    outcomes.lock().expect("not poisoned").push(result.map_err(|error| error.is_full()));
                });
                AppendRequest {
                    timestamp_ns: index as u64,
                    body: Bytes::from_static(b"body"),
                    completion: Some(completion),
                }
            })
            .collect()
    }

    #[test]
    fn a_failed_batch_is_failed_whole_and_its_sequences_go_to_the_next() {
        let dir = std::env::temp_dir().join(format!("sift-store-appender-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let hooked = Arc::new(Mutex::new(Vec::new()));
        let hook_target = hooked.clone();
        let hook = Box::new(move |seq| hook_target.lock().expect("not poisoned").push(seq));
        let (shared, _) = Shared::open(&dir, LogConfig::default(), hook).expect("opens");
        let shared = Arc::new(shared);
        let mut appender = Appender::new(shared.clone()).expect("appender");
        let file = FailingFile::default();
        appender.active = ActiveSegment::new(Box::new(file.clone()), "memory.seg".into(), 0, 0);
        let outcomes = Outcomes::default();
        appender.write_batch(requests(2, &outcomes));
        let written_before = file.state().bytes.len();
        file.state().capacity_bytes = Some(written_before + 10);
        appender.write_batch(requests(3, &outcomes));
        assert_eq!(shared.last_seq.load(Ordering::Acquire), 2, "nothing of the failed batch is visible");
        let written = file.state().bytes.len();
        file.state().capacity_bytes = None;
        appender.write_batch(requests(1, &outcomes));
        let outcomes = outcomes.lock().expect("not poisoned").clone();
        assert_eq!(outcomes, [Ok(1), Ok(2), Err(true), Err(true), Err(true), Ok(3)]);
        assert_eq!(*hooked.lock().expect("not poisoned"), [2, 3]);
        assert_eq!(written, 2 * record_len(4), "the failed batch was cut off");
        assert_eq!(shared.counters.write_errors.load(Ordering::Relaxed), 1);
        assert_eq!(
            shared.segments().last().map(|segment| (segment.last_seq, segment.bytes)),
            Some((3, 3 * record_len(4) as u64))
        );
        std::fs::remove_dir_all(&dir).expect("cleaned");
    }
}
