//! Helpers shared by the integration tests: temporary directories, logs
//! opened with a no-op hook, appends that wait, reads that drain.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use bytes::Bytes;
use sift_store::{Gap, Log, LogConfig, Record};

/// A directory under the system's temporary directory, unique to this
/// process and call, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let number = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("sift-store-test-{label}-{}-{number}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn open(dir: &Path, config: LogConfig) -> Log {
    Log::open(dir, config, Box::new(|_| {})).expect("opens").0
}

/// The body of record `seq` in these tests: its length varies with `seq`.
pub fn body_for(seq: u64) -> Bytes {
    Bytes::from(format!("m{seq:05}{}", "x".repeat((seq % 7) as usize)))
}

/// Appends records `first..first + count` (bodies from [`body_for`]) and
/// waits for each to be stored, checking it got the sequence expected.
pub fn append_all(log: &Log, first: u64, count: u64, timestamp_ns: u64) {
    let (done, stored) = mpsc::channel();
    for seq in first..first + count {
        let done = done.clone();
        let completion = Box::new(move |result: Result<u64, sift_store::StoreError>| {
            done.send(result.expect("stored")).expect("the test waits");
        });
        log.append(timestamp_ns, body_for(seq), Some(completion)).expect("queued");
    }
    let seqs: Vec<u64> = (0..count).map(|_| stored.recv().expect("completion")).collect();
    assert_eq!(seqs, (first..first + count).collect::<Vec<u64>>());
}

/// Everything readable from `from`, `chunk_records` at a time.
pub fn read_all(log: &Log, from: u64, chunk_records: usize) -> (Vec<Record>, Vec<Gap>) {
    let mut reader = log.reader();
    let (mut records, mut gaps, mut next) = (Vec::new(), Vec::new(), from);
    loop {
        let outcome = reader.read(next, chunk_records, 256, &mut records).expect("reads");
        if outcome.next_seq == next && outcome.gaps.is_empty() {
            return (records, gaps);
        }
        assert!(outcome.next_seq > next, "a read moves on");
        gaps.extend(outcome.gaps);
        next = outcome.next_seq;
    }
}

pub fn seqs(records: &[Record]) -> Vec<u64> {
    records.iter().map(|record| record.seq).collect()
}

/// Checks every record's body is the one [`append_all`] stored.
pub fn assert_bodies(records: &[Record]) {
    for record in records {
        assert_eq!(record.body, body_for(record.seq), "body of {}", record.seq);
    }
}

/// The segment files of `dir`, by name.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("lists")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "seg"))
        .collect();
    files.sort();
    files
}

/// The first sequence a segment file's name gives.
pub fn first_seq_of(path: &Path) -> u64 {
    let stem = path.file_stem().and_then(|stem| stem.to_str()).expect("a name");
    stem.parse().expect("twenty digits")
}

/// Bytes record `seq` takes on disk.
pub fn record_bytes(seq: u64) -> u64 {
    sift_store::RECORD_HEADER_BYTES as u64 + body_for(seq).len() as u64
}

/// A config with small segments, so that tests span several.
pub fn small_segments(segment_bytes_max: u64) -> LogConfig {
    LogConfig { segment_bytes_max, index_interval_bytes: 64, ..LogConfig::default() }
}
