//! The log through its public API: appends and reads, restarts, group
//! commit, torn tails at every offset, damaged records, retention.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

use bytes::Bytes;
use proptest::prelude::*;
use sift_store::{FsyncPolicy, GapReason, Log, LogConfig, Record, Retention};

struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("sift-store-{label}-{}-{number}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(dir: &Path, config: LogConfig) -> Log {
    Log::open(dir, config, Box::new(|_| {})).expect("opens").0
}

/// Appends `count` records "m{seq}" and waits for each to be stored.
fn append_all(log: &Log, first: u64, count: u64, timestamp_ns: u64) {
    let (done, stored) = mpsc::channel();
    for index in 0..count {
        let done = done.clone();
        let body = Bytes::from(format!("m{:04}", first + index));
        log.append(timestamp_ns, body, Some(Box::new(move |result| done.send(result.expect("stored")).expect("send"))))
            .expect("queued");
    }
    let seqs: Vec<u64> = (0..count).map(|_| stored.recv().expect("completion")).collect();
    assert_eq!(seqs, (first..first + count).collect::<Vec<u64>>());
}

/// Everything readable from `from`, records and gaps.
fn read_all(log: &Log, from: u64) -> (Vec<Record>, Vec<sift_store::Gap>) {
    let mut reader = log.reader();
    let (mut records, mut gaps, mut next) = (Vec::new(), Vec::new(), from);
    loop {
        let mut batch = Vec::new();
        let outcome = reader.read(next, 3, 64, &mut batch).expect("reads");
        if batch.is_empty() && outcome.gaps.is_empty() {
            return (records, gaps);
        }
        records.extend(batch);
        gaps.extend(outcome.gaps);
        next = outcome.next_seq;
    }
}

fn bodies(records: &[Record]) -> Vec<String> {
    records.iter().map(|record| String::from_utf8(record.body.to_vec()).expect("utf-8")).collect()
}

#[test]
fn appends_read_back_in_order_and_survive_a_reopen() {
    let dir = TempDir::new("reopen");
    let log = open(&dir.0, LogConfig::default());
    append_all(&log, 1, 50, 7);
    let (records, gaps) = read_all(&log, 1);
    assert!(gaps.is_empty());
    assert_eq!(records.len(), 50);
    assert!(records.iter().enumerate().all(|(index, record)| record.seq == index as u64 + 1));
    drop(log);
    let log = open(&dir.0, LogConfig::default());
    assert_eq!((log.first_seq(), log.last_seq()), (1, 50));
    append_all(&log, 51, 1, 8);
    assert_eq!(bodies(&read_all(&log, 50).0), ["m0050", "m0051"]);
}

#[test]
fn concurrent_appends_share_fsyncs_under_always() {
    let dir = TempDir::new("group");
    let log = Arc::new(open(&dir.0, LogConfig { fsync: FsyncPolicy::Always, ..LogConfig::default() }));
    let (done, stored) = mpsc::channel();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (log, done) = (log.clone(), done.clone());
            std::thread::spawn(move || {
                for _ in 0..500 {
                    let done = done.clone();
                    let completion =
                        Box::new(move |result: Result<u64, _>| done.send(result.expect("ok")).expect("send"));
                    log.append(1, Bytes::from_static(b"x"), Some(completion)).expect("queued");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("thread");
    }
    let mut seqs: Vec<u64> = (0..4000).map(|_| stored.recv().expect("completion")).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=4000).collect::<Vec<u64>>(), "distinct, consecutive sequences");
    let fsyncs = log.stats().fsyncs;
    assert!(fsyncs > 0 && fsyncs < 4000, "group commit: {fsyncs} fsyncs for 4000 appends");
}

#[test]
fn a_flipped_byte_is_reported_counted_and_never_served() {
    let dir = TempDir::new("damage");
    let log = open(&dir.0, LogConfig::default());
    append_all(&log, 1, 10, 1);
    drop(log);
    let segment = dir.0.join("00000000000000000001.seg");
    let mut bytes = std::fs::read(&segment).expect("read");
    let record_len = bytes.len() / 10;
    bytes[4 * record_len + 30] ^= 0x10;
    std::fs::write(&segment, &bytes).expect("write");
    let verified = sift_store::verify(&dir.0).expect("verifies");
    assert_eq!(verified.damaged.len(), 1);
    assert_eq!((verified.damaged[0].first_seq, verified.damaged[0].offset), (5, 4 * record_len as u64));
    assert_eq!(std::fs::read(&segment).expect("read"), bytes, "verify changes nothing");
    let (log, recovery) = Log::open(&dir.0, LogConfig::default(), Box::new(|_| {})).expect("opens");
    assert_eq!(recovery.damaged.len(), 1);
    assert_eq!(log.stats().damaged_records, 1);
    let (records, gaps) = read_all(&log, 1);
    assert_eq!(records.iter().map(|record| record.seq).collect::<Vec<_>>(), [1, 2, 3, 4, 6, 7, 8, 9, 10]);
    assert_eq!(gaps.len(), 1);
    assert_eq!((gaps[0].first_seq, gaps[0].count, gaps[0].reason), (5, 1, GapReason::Damaged));
}

#[test]
fn retention_removes_whole_old_segments_and_readers_are_told() {
    let dir = TempDir::new("retention");
    let config = LogConfig { retention: Retention { max_msgs: 16, ..Retention::default() }, ..LogConfig::default() };
    let log = open(&dir.0, config.clone());
    append_all(&log, 1, 100, 1);
    log.apply_retention(2);
    let stats = log.stats();
    assert!(stats.first_seq > 80 && stats.messages <= 18, "{stats:?}");
    let (records, gaps) = read_all(&log, 1);
    assert_eq!((gaps[0].first_seq, gaps[0].count, gaps[0].reason), (1, stats.first_seq - 1, GapReason::Removed));
    assert_eq!(records.first().map(|record| record.seq), Some(stats.first_seq));
    drop(log);
    let log = open(&dir.0, config);
    append_all(&log, 101, 1, 1);
    let old = LogConfig { retention: Retention { max_age_ns: 10, ..Retention::default() }, ..LogConfig::default() };
    drop(log);
    let log = open(&dir.0, old);
    assert!(log.apply_retention(1_000).segments_removed > 0, "segments older than the age limit go");
    assert_eq!(log.last_seq(), 101, "the last segment stays, and with it the next sequence");
}

#[test]
fn time_finds_the_first_message_at_or_after_it() {
    let dir = TempDir::new("time");
    let log = open(&dir.0, LogConfig::default());
    for (index, timestamp_ns) in [10, 20, 30, 40].into_iter().enumerate() {
        append_all(&log, index as u64 + 1, 1, timestamp_ns);
    }
    assert_eq!(log.seq_at_or_after_time(25).expect("found"), 3);
    assert_eq!(log.seq_at_or_after_time(5).expect("found"), 1);
    assert_eq!(log.seq_at_or_after_time(41).expect("found"), 5);
}

#[test]
fn position_logs_keep_the_last_whole_record() {
    let dir = TempDir::new("position");
    std::fs::create_dir_all(&dir.0).expect("dir");
    let path = dir.0.join("position.log");
    let (mut positions, start) = sift_store::PositionLog::open(&path).expect("opens");
    assert_eq!(start, sift_store::Position::default());
    for floor in 1..=5000u64 {
        let position = sift_store::Position { ack_floor: floor, done_above: vec![(floor + 2, floor + 3)] };
        positions.write(&position, false).expect("written");
    }
    drop(positions);
    assert!(std::fs::metadata(&path).expect("file").len() <= sift_store::POSITION_LOG_BYTES_MAX, "compacted");
    let mut bytes = std::fs::read(&path).expect("read");
    bytes.extend_from_slice(&[0x53, 0x46, 0x54]);
    std::fs::write(&path, &bytes).expect("torn tail");
    let (_, position) = sift_store::PositionLog::open(&path).expect("opens");
    assert_eq!(position, sift_store::Position { ack_floor: 5000, done_above: vec![(5002, 5003)] });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Cutting the last segment anywhere leaves exactly the records wholly
    /// before the cut, and appends carry on after the last of them.
    #[test]
    fn a_torn_tail_at_any_offset_is_cut_to_the_last_whole_record(count in 1u64..20, cut_fraction in 0.0f64..1.0) {
        let dir = TempDir::new("torn");
        let log = open(&dir.0, LogConfig::default());
        append_all(&log, 1, count, 3);
        drop(log);
        let segment = dir.0.join("00000000000000000001.seg");
        let bytes = std::fs::read(&segment).expect("read");
        let record_len = bytes.len() as u64 / count;
        let cut = ((bytes.len() as f64) * cut_fraction) as u64;
        std::fs::write(&segment, &bytes[..cut as usize]).expect("cut");
        let (log, recovery) = Log::open(&dir.0, LogConfig::default(), Box::new(|_| {})).expect("opens");
        let whole = cut / record_len;
        prop_assert_eq!(log.last_seq(), whole);
        prop_assert_eq!(recovery.torn_tail.is_some(), !cut.is_multiple_of(record_len));
        append_all(&log, whole + 1, 1, 4);
        let (records, gaps) = read_all(&log, 1);
        prop_assert!(gaps.is_empty());
        prop_assert_eq!(records.len() as u64, whole + 1);
    }
}
