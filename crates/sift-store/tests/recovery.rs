//! What a reopen finds after crashes and damage: torn tails cut at any
//! offset, flipped bytes reported and returned as gaps, `verify` changing
//! nothing, stray files, damage found by a reader after open.

mod common;

use std::path::Path;

use common::*;
use proptest::prelude::*;
use sift_store::{GapReason, Log, LogConfig, Recovery, RECORD_HEADER_BYTES};

/// Segments of ten records (bodies of [`body_for`] are 6 to 12 bytes).
fn ten_per_segment() -> LogConfig {
    small_segments(10 * (RECORD_HEADER_BYTES as u64 + 12))
}

fn reopen(dir: &Path, config: LogConfig) -> (Log, Recovery) {
    Log::open(dir, config, Box::new(|_| {})).expect("opens")
}

/// Offset of record `seq` in the segment starting at `first_seq`.
fn offset_of(first_seq: u64, seq: u64) -> u64 {
    (first_seq..seq).map(record_bytes).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Cutting the last segment anywhere leaves exactly the records wholly
    /// before the cut, and appends carry on after the last of them.
    #[test]
    fn a_torn_tail_at_any_offset_is_cut_to_the_last_whole_record(count in 1u64..60, cut_fraction in 0.0f64..1.0) {
        let dir = TempDir::new("torn");
        let log = open(dir.path(), ten_per_segment());
        append_all(&log, 1, count, 3);
        log.close().expect("closes");
        let last = segment_files(dir.path()).pop().expect("a segment");
        let first_seq = first_seq_of(&last);
        let bytes = std::fs::read(&last).expect("read");
        let cut = (bytes.len() as f64 * cut_fraction) as u64;
        std::fs::write(&last, &bytes[..cut as usize]).expect("cut");
        let mut whole = first_seq - 1;
        while whole < count && offset_of(first_seq, whole + 2) <= cut {
            whole += 1;
        }
        let on_boundary = offset_of(first_seq, whole + 1) == cut;
        let (log, recovery) = reopen(dir.path(), ten_per_segment());
        prop_assert_eq!(log.last_seq(), whole);
        prop_assert_eq!(recovery.torn_tail.is_some(), !on_boundary);
        if let Some(tail) = &recovery.torn_tail {
            prop_assert_eq!((tail.offset, tail.bytes_cut), (offset_of(first_seq, whole + 1), cut - offset_of(first_seq, whole + 1)));
            prop_assert_eq!(log.stats().torn_tails_cut, 1);
        }
        prop_assert!(recovery.damaged.is_empty());
        append_all(&log, whole + 1, 2, 4);
        let (records, gaps) = read_all(&log, 1, 7);
        prop_assert!(gaps.is_empty());
        prop_assert_eq!(seqs(&records), (1..=whole + 2).collect::<Vec<u64>>());
        assert_bodies(&records);
    }
}

/// Flips one byte in the body of record `seq` of the segment at `path`.
fn flip_body_byte(path: &Path, seq: u64) {
    let mut bytes = std::fs::read(path).expect("read");
    let at = offset_of(first_seq_of(path), seq) as usize + RECORD_HEADER_BYTES + 2;
    bytes[at] ^= 0x10;
    std::fs::write(path, &bytes).expect("write");
}

#[test]
fn flipped_bytes_are_reported_counted_and_returned_as_gaps() {
    let dir = TempDir::new("damage");
    let log = open(dir.path(), ten_per_segment());
    append_all(&log, 1, 25, 1);
    log.close().expect("closes");
    let files = segment_files(dir.path());
    assert_eq!(files.iter().map(|path| first_seq_of(path)).collect::<Vec<_>>(), [1, 11, 21]);
    flip_body_byte(&files[0], 5);
    flip_body_byte(&files[2], 23);
    let before: Vec<Vec<u8>> = files.iter().map(|path| std::fs::read(path).expect("read")).collect();
    let verified = sift_store::verify(dir.path()).expect("verifies");
    let after: Vec<Vec<u8>> = files.iter().map(|path| std::fs::read(path).expect("read")).collect();
    assert_eq!(before, after, "verify changes nothing");
    let found = |recovery: &Recovery| {
        recovery
            .damaged
            .iter()
            .map(|damage| (damage.segment.clone(), damage.offset, damage.first_seq, damage.count))
            .collect::<Vec<_>>()
    };
    let expected = vec![(files[0].clone(), offset_of(1, 5), 5, 1), (files[2].clone(), offset_of(21, 23), 23, 1)];
    assert_eq!(found(&verified), expected);
    assert!(verified.torn_tail.is_none());
    assert_eq!((verified.records, verified.first_seq, verified.last_seq), (23, 1, 25));
    let (log, recovery) = reopen(dir.path(), ten_per_segment());
    assert_eq!(found(&recovery), expected);
    assert!(recovery.to_string().contains("sequences 5..5 unreadable"), "{recovery}");
    assert_eq!(log.stats().damaged_records, 2);
    let (records, gaps) = read_all(&log, 1, 3);
    let mut wanted: Vec<u64> = (1..=25).collect();
    wanted.retain(|seq| *seq != 5 && *seq != 23);
    assert_eq!(seqs(&records), wanted);
    assert_bodies(&records);
    let gaps: Vec<_> = gaps.iter().map(|gap| (gap.first_seq, gap.count, gap.reason)).collect();
    assert_eq!(gaps, [(5, 1, GapReason::Damaged), (23, 1, GapReason::Damaged)]);
    let (records, gaps) = read_all(&log, 6, 100);
    assert_eq!((records.first().map(|record| record.seq), gaps.len()), (Some(6), 1), "a read past damage");
    append_all(&log, 26, 1, 2);
}

#[test]
fn a_bad_last_record_is_a_torn_tail_and_a_lost_segment_is_damage() {
    let dir = TempDir::new("tail-and-hole");
    let log = open(dir.path(), ten_per_segment());
    append_all(&log, 1, 35, 1);
    log.close().expect("closes");
    let files = segment_files(dir.path());
    flip_body_byte(&files[3], 35);
    std::fs::remove_file(&files[1]).expect("a segment lost");
    let (log, recovery) = reopen(dir.path(), ten_per_segment());
    let tail = recovery.torn_tail.clone().expect("the bad last record is torn");
    assert_eq!((tail.segment, tail.offset), (files[3].clone(), offset_of(31, 35)));
    assert_eq!(log.last_seq(), 34);
    assert_eq!(recovery.damaged.iter().map(|damage| (damage.first_seq, damage.count)).collect::<Vec<_>>(), [(11, 10)]);
    let (records, gaps) = read_all(&log, 1, 4);
    assert_eq!(records.len(), 24);
    assert_eq!(
        gaps.iter().map(|gap| (gap.first_seq, gap.count, gap.reason)).collect::<Vec<_>>(),
        [(11, 10, GapReason::Damaged)]
    );
    append_all(&log, 35, 1, 2);
}

#[test]
fn damage_found_by_a_reader_after_open_is_a_gap_too() {
    let dir = TempDir::new("late-damage");
    let log = open(dir.path(), ten_per_segment());
    append_all(&log, 1, 8, 1);
    flip_body_byte(&segment_files(dir.path())[0], 4);
    let (records, gaps) = read_all(&log, 1, 100);
    assert_eq!(seqs(&records), [1, 2, 3, 5, 6, 7, 8]);
    assert_eq!(
        gaps.iter().map(|gap| (gap.first_seq, gap.count, gap.reason)).collect::<Vec<_>>(),
        [(4, 1, GapReason::Damaged)]
    );
    assert_eq!(log.stats().damaged_records, 1);
    let (_, gaps) = read_all(&log, 2, 1);
    assert_eq!(gaps.len(), 1, "remembered, and counted once");
    assert_eq!(log.stats().damaged_records, 1);
}

#[test]
fn strangers_are_ignored_temporaries_removed_and_a_missing_dir_is_a_new_log() {
    let dir = TempDir::new("strangers");
    let log = open(&dir.path().join("new"), LogConfig::default());
    assert_eq!((log.first_seq(), log.last_seq()), (1, 0));
    append_all(&log, 1, 3, 1);
    log.close().expect("closes");
    let stream = dir.path().join("new");
    std::fs::write(stream.join("notes.txt"), b"mine").expect("write");
    std::fs::write(stream.join("00000000000000000004.seg.tmp"), b"half").expect("write");
    std::fs::write(stream.join("4.seg"), b"not twenty digits").expect("write");
    let (log, recovery) = reopen(&stream, LogConfig::default());
    assert_eq!((recovery.segments, recovery.records, log.last_seq()), (1, 3, 3));
    assert!(stream.join("notes.txt").exists() && stream.join("4.seg").exists());
    assert!(!stream.join("00000000000000000004.seg.tmp").exists());
    assert!(sift_store::verify(&dir.path().join("absent")).is_err(), "verify creates nothing");
    assert!(!dir.path().join("absent").exists());
}
