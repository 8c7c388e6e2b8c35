//! The log through its public API: appends and reads, restarts, group
//! commit, visibility before completion, the append queue bound, close.

mod common;

use std::sync::{mpsc, Arc, Mutex};

use bytes::Bytes;
use common::*;
use sift_store::{FsyncPolicy, Log, LogConfig, LogReader, StoreError, RECORD_BODY_BYTES_MAX};

#[test]
fn appends_read_back_in_order_in_any_chunk_size_and_survive_a_reopen() {
    let dir = TempDir::new("round-trip");
    let log = open(dir.path(), small_segments(1024));
    assert_eq!((log.first_seq(), log.last_seq()), (1, 0), "a new log");
    append_all(&log, 1, 300, 7);
    assert!(log.stats().segments > 5, "spans segments: {:?}", log.stats());
    for chunk_records in [1, 2, 3, 7, 64, 1000] {
        let (records, gaps) = read_all(&log, 1, chunk_records);
        assert!(gaps.is_empty());
        assert_eq!(seqs(&records), (1..=300).collect::<Vec<u64>>(), "chunks of {chunk_records}");
        assert_bodies(&records);
    }
    let (records, _) = read_all(&log, 157, 5);
    assert_eq!(seqs(&records), (157..=300).collect::<Vec<u64>>(), "a read from the middle");
    log.close().expect("closes");
    let log = open(dir.path(), small_segments(1024));
    assert_eq!((log.first_seq(), log.last_seq()), (1, 300));
    append_all(&log, 301, 2, 8);
    let (records, gaps) = read_all(&log, 299, 2);
    assert!(gaps.is_empty());
    assert_eq!(seqs(&records), [299, 300, 301, 302]);
    assert_bodies(&records);
}

#[test]
fn a_read_stops_at_its_limits_and_at_the_last_visible_sequence() {
    let dir = TempDir::new("limits");
    let log = open(dir.path(), LogConfig::default());
    append_all(&log, 1, 10, 1);
    let mut reader = log.reader();
    let mut out = Vec::new();
    let outcome = reader.read(0, 4, 1 << 20, &mut out).expect("reads");
    assert_eq!((seqs(&out), outcome.next_seq), (vec![1, 2, 3, 4], 5));
    out.clear();
    let outcome = reader.read(5, 100, 1, &mut out).expect("reads");
    assert_eq!((seqs(&out), outcome.next_seq), (vec![5], 6), "at least one record, about max_bytes");
    out.clear();
    let outcome = reader.read(6, 100, 1 << 20, &mut out).expect("reads");
    assert_eq!((seqs(&out), outcome.next_seq), ((6..=10).collect::<Vec<u64>>(), 11));
    out.clear();
    let outcome = reader.read(11, 100, 1 << 20, &mut out).expect("reads");
    assert!(out.is_empty() && outcome.gaps.is_empty() && outcome.next_seq == 11, "nothing more yet");
}

#[test]
fn concurrent_appends_get_distinct_consecutive_seqs_and_share_fsyncs() {
    const THREADS: u64 = 8;
    const APPENDS_PER_THREAD: u64 = 2_000;
    let dir = TempDir::new("group-commit");
    let log = Arc::new(open(dir.path(), LogConfig { fsync: FsyncPolicy::Always, ..LogConfig::default() }));
    let (done, stored) = mpsc::channel();
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (log, done) = (log.clone(), done.clone());
            std::thread::spawn(move || {
                for index in 0..APPENDS_PER_THREAD {
                    let done = done.clone();
                    let completion = Box::new(move |result: Result<u64, StoreError>| {
                        done.send(result.expect("stored")).expect("the test waits");
                    });
                    let body = Bytes::from(format!("{thread}:{index}"));
                    log.append(thread, body, Some(completion)).expect("queued");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("appending thread");
    }
    let total = THREADS * APPENDS_PER_THREAD;
    let mut seqs: Vec<u64> = (0..total).map(|_| stored.recv().expect("completion")).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=total).collect::<Vec<u64>>(), "distinct, consecutive sequences");
    let stats = log.stats();
    assert!(stats.fsyncs > 0 && stats.fsyncs < total, "group commit: {} fsyncs for {total} appends", stats.fsyncs);
    assert!(stats.fsync_ns_max <= stats.fsync_ns_total);
    assert_eq!((stats.last_seq, stats.messages, stats.write_errors), (total, total, 0));
    // Each thread's appends keep their order.
    let (records, _) = read_all(&log, 1, 4096);
    for thread in 0..THREADS {
        let indexes: Vec<u64> = records
            .iter()
            .filter(|record| record.timestamp_ns == thread)
            .map(|record| {
                let text = std::str::from_utf8(&record.body).expect("utf-8");
                text.split(':').nth(1).and_then(|index| index.parse().ok()).expect("an index")
            })
            .collect();
        assert_eq!(indexes, (0..APPENDS_PER_THREAD).collect::<Vec<u64>>(), "thread {thread} in order");
    }
}

/// Reads `seq` alone with `reader`: true when it is there.
fn readable(reader: &Mutex<Option<LogReader>>, seq: u64) -> bool {
    let mut guard = reader.lock().expect("not poisoned");
    let reader = guard.as_mut().expect("set before appending");
    let mut out = Vec::new();
    reader.read(seq, 1, 0, &mut out).expect("reads");
    out.first().is_some_and(|record| record.seq == seq)
}

#[test]
fn completions_and_the_hook_run_only_once_the_record_is_readable() {
    for policy in [FsyncPolicy::Always, FsyncPolicy::Every(std::time::Duration::from_millis(5)), FsyncPolicy::Os] {
        let dir = TempDir::new("visible");
        let hook_reader: Arc<Mutex<Option<LogReader>>> = Arc::default();
        let hook_seen = Arc::new(Mutex::new(Vec::new()));
        let (target_reader, target_seen) = (hook_reader.clone(), hook_seen.clone());
        let hook = Box::new(move |last_seq| target_seen.lock().expect("ok").push(readable(&target_reader, last_seq)));
        let config = LogConfig { fsync: policy, ..LogConfig::default() };
        let (log, _) = Log::open(dir.path(), config, hook).expect("opens");
        *hook_reader.lock().expect("ok") = Some(log.reader());
        let completion_reader = Arc::new(Mutex::new(Some(log.reader())));
        let (done, checked) = mpsc::channel();
        for seq in 1..=200 {
            let (reader, done) = (completion_reader.clone(), done.clone());
            let completion = Box::new(move |result: Result<u64, StoreError>| {
                let seq = result.expect("stored");
                done.send((seq, readable(&reader, seq))).expect("the test waits");
            });
            log.append(1, body_for(seq), Some(completion)).expect("queued");
        }
        for _ in 1..=200 {
            let (seq, visible) = checked.recv().expect("completion");
            assert!(visible, "{policy}: record {seq} completed before it was readable");
        }
        log.close().expect("closes");
        let seen = hook_seen.lock().expect("ok");
        assert!(!seen.is_empty() && seen.iter().all(|visible| *visible), "{policy}: the hook ran too early");
    }
}

#[test]
fn appends_nobody_waits_for_are_refused_past_the_queue_bound_and_big_bodies_always() {
    let dir = TempDir::new("queue");
    let config = LogConfig { append_queue_bytes_max: 10, ..LogConfig::default() };
    let log = open(dir.path(), config);
    let error = log.append(1, Bytes::from(vec![0u8; 11]), None).expect_err("over the bound");
    assert!(matches!(error, StoreError::QueueFull), "{error}");
    assert_eq!(log.stats().appends_refused_queue_full, 1);
    let (done, stored) = mpsc::channel();
    let completion = Box::new(move |result: Result<u64, StoreError>| done.send(result.is_ok()).expect("waits"));
    log.append(1, Bytes::from(vec![0u8; 11]), Some(completion)).expect("one with a completion is taken");
    assert!(stored.recv().expect("completion"));
    let huge = Bytes::from(vec![0u8; RECORD_BODY_BYTES_MAX + 1]);
    let completion = Box::new(|_: Result<u64, StoreError>| panic!("a refused append never completes"));
    let error = log.append(1, huge, Some(completion)).expect_err("too large");
    assert!(matches!(error, StoreError::RecordTooLarge { .. }), "{error}");
    assert_eq!(log.last_seq(), 1);
}

#[test]
fn close_stores_every_queued_append_under_every_policy() {
    for policy in [FsyncPolicy::Os, FsyncPolicy::Every(std::time::Duration::from_secs(60)), FsyncPolicy::Always] {
        let dir = TempDir::new("close");
        let config = LogConfig { fsync: policy, ..small_segments(4096) };
        let log = open(dir.path(), config.clone());
        for seq in 1..=1_000 {
            log.append(seq, body_for(seq), None).expect("queued");
        }
        log.close().expect("closes");
        let log = open(dir.path(), config);
        assert_eq!(log.last_seq(), 1_000, "{policy}");
        let (records, gaps) = read_all(&log, 1, 500);
        assert!(gaps.is_empty());
        assert_eq!(records.len(), 1_000);
        assert_bodies(&records);
    }
}

#[test]
fn every_policy_syncs_within_its_interval() {
    let dir = TempDir::new("every");
    let config = LogConfig { fsync: FsyncPolicy::Every(std::time::Duration::from_millis(20)), ..LogConfig::default() };
    let log = open(dir.path(), config);
    append_all(&log, 1, 10, 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while log.stats().fsyncs == 0 {
        assert!(std::time::Instant::now() < deadline, "no fsync within 5 s under every:20");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let os = TempDir::new("os");
    let log = open(os.path(), LogConfig { fsync: FsyncPolicy::Os, ..LogConfig::default() });
    append_all(&log, 1, 10, 1);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(log.stats().fsyncs, 0, "os never syncs while running");
}

#[test]
fn time_finds_the_first_record_in_log_order_at_or_after_it() {
    let dir = TempDir::new("time");
    // Two records per segment; timestamps not monotonic across publishers.
    let log = open(dir.path(), small_segments(2 * record_bytes(1) + 8));
    let timestamps = [10, 20, 50, 30, 25, 60, 5, 40];
    for (index, timestamp_ns) in timestamps.into_iter().enumerate() {
        append_all(&log, index as u64 + 1, 1, timestamp_ns);
    }
    assert!(log.stats().segments >= 4, "{:?}", log.stats());
    let expected = [(0, 1), (10, 1), (11, 2), (21, 3), (26, 3), (50, 3), (51, 6), (60, 6), (61, 9)];
    for (timestamp_ns, seq) in expected {
        assert_eq!(log.seq_at_or_after_time(timestamp_ns).expect("found"), seq, "time {timestamp_ns}");
    }
}
