//! Cutting a log's tail (`Log::truncate_from`): what stays, what appends
//! get afterwards, what readers see, and a cut a crash interrupted, finished
//! by the next open.

mod common;

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use sift_store::{Log, LogConfig, RECORD_HEADER_BYTES};

/// Segments of about ten records (bodies of [`body_for`] are 6 to 12 bytes).
fn ten_per_segment() -> LogConfig {
    small_segments(10 * (RECORD_HEADER_BYTES as u64 + 12))
}

/// Appends `bodies` one by one; their sequences.
fn append_bodies(log: &Log, bodies: &[Bytes]) -> Vec<u64> {
    let (done, stored) = std::sync::mpsc::channel();
    for body in bodies {
        let done = done.clone();
        let completion = Box::new(move |result: Result<u64, sift_store::StoreError>| {
            done.send(result.expect("stored")).expect("the test waits");
        });
        log.append(7, body.clone(), Some(completion)).expect("queued");
    }
    (0..bodies.len()).map(|_| stored.recv().expect("completion")).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// After a cut from any sequence, the log holds exactly the records
    /// before it, the next appends get the sequences the cut freed, and a
    /// reopen sees the same.
    #[test]
    fn a_cut_keeps_what_is_before_it_and_appends_carry_on_from_it(count in 1u64..45, cut in 1u64..50) {
        let dir = TempDir::new("cut");
        let log = open(dir.path(), ten_per_segment());
        append_all(&log, 1, count, 3);
        let removed = log.truncate_from(cut).expect("cut");
        let kept = (cut - 1).min(count);
        prop_assert_eq!(removed, count - kept);
        prop_assert_eq!(log.last_seq(), kept);
        let after: Vec<Bytes> = (0..3).map(|number| Bytes::from(format!("after-{number}"))).collect();
        prop_assert_eq!(append_bodies(&log, &after), vec![kept + 1, kept + 2, kept + 3]);
        let check = |log: &Log| {
            let (records, gaps) = read_all(log, 1, 4);
            assert!(gaps.is_empty(), "{gaps:?}");
            assert_eq!(seqs(&records), (1..=kept + 3).collect::<Vec<u64>>());
            assert_bodies(&records[..kept as usize]);
            let tail: Vec<Bytes> = records[kept as usize..].iter().map(|record| record.body.clone()).collect();
            assert_eq!(tail, after);
        };
        check(&log);
        log.close().expect("closes");
        check(&open(dir.path(), ten_per_segment()));
    }
}

#[test]
fn a_reader_that_read_past_a_cut_reads_the_new_records_there() {
    let dir = TempDir::new("cut-reader");
    let log = open(dir.path(), ten_per_segment());
    append_all(&log, 1, 25, 3);
    let mut reader = log.reader();
    let mut records = Vec::new();
    reader.read(18, 100, 1 << 20, &mut records).expect("reads");
    assert_eq!(records.first().map(|record| record.seq), Some(18));
    log.truncate_from(18).expect("cut");
    append_bodies(&log, &[Bytes::from_static(b"new-18")]);
    records.clear();
    reader.read(18, 100, 1 << 20, &mut records).expect("reads");
    assert_eq!(
        records.iter().map(|record| (record.seq, record.body.clone())).collect::<Vec<_>>(),
        [(18, Bytes::from_static(b"new-18"))]
    );
}

#[test]
fn a_cut_before_the_first_stored_sequence_is_refused_and_past_the_end_changes_nothing() {
    let dir = TempDir::new("cut-bounds");
    let log = open(dir.path(), ten_per_segment());
    append_all(&log, 1, 5, 3);
    assert!(log.truncate_from(0).is_err(), "sequences start at 1");
    assert_eq!(log.truncate_from(6).expect("nothing to cut"), 0);
    assert_eq!(log.truncate_from(1).expect("everything"), 5);
    assert_eq!(log.last_seq(), 0);
    assert_eq!(append_bodies(&log, &[Bytes::from_static(b"again")]), [1]);
    assert_eq!(log.stats().records_truncated, 5);
}

#[test]
fn a_cut_a_crash_interrupted_is_finished_by_the_next_open() {
    let dir = TempDir::new("cut-crash");
    let log = open(dir.path(), ten_per_segment());
    append_all(&log, 1, 35, 3);
    log.close().expect("closes");
    // As a crash right after the marker was written leaves it: the marker,
    // and every segment still whole.
    std::fs::write(dir.path().join("truncate-from"), b"12").expect("marker");
    let log = open(dir.path(), ten_per_segment());
    assert_eq!(log.last_seq(), 11, "the cut is finished before anything is read");
    assert!(!dir.path().join("truncate-from").exists(), "and its marker removed");
    let (records, gaps) = read_all(&log, 1, 8);
    assert!(gaps.is_empty());
    assert_eq!(seqs(&records), (1..=11).collect::<Vec<u64>>());
    assert_bodies(&records);
    assert_eq!(append_bodies(&log, &[Bytes::from_static(b"twelve")]), [12]);
}

#[test]
fn a_restart_resumes_the_log_past_its_end_and_survives_a_crash_half_way() {
    let dir = TempDir::new("restart");
    let log = open(dir.path(), ten_per_segment());
    append_all(&log, 1, 15, 3);
    assert!(log.restart_at(15).is_err(), "it still holds 15: cut it first");
    assert_eq!(log.restart_at(21).expect("restarted"), 15);
    assert_eq!((log.first_seq(), log.last_seq()), (21, 20));
    assert_eq!(append_bodies(&log, &[Bytes::from_static(b"twenty-one")]), [21]);
    let (records, gaps) = read_all(&log, 1, 8);
    assert_eq!(seqs(&records), [21]);
    assert_eq!(gaps.iter().map(|gap| (gap.first_seq, gap.count)).collect::<Vec<_>>(), [(1, 20)]);
    log.close().expect("closes");
    // As a crash right after the marker was written leaves it.
    std::fs::write(dir.path().join("restart-at"), b"40").expect("marker");
    let log = open(dir.path(), ten_per_segment());
    assert_eq!((log.first_seq(), log.last_seq()), (40, 39), "the restart is finished at open");
    assert!(!dir.path().join("restart-at").exists());
    assert_eq!(append_bodies(&log, &[Bytes::from_static(b"forty")]), [40]);
}
