//! Retention by count, bytes and age removes whole old segments, readers
//! are told with `Removed` gaps, and the sequence counter outlives it all.

mod common;

use common::*;
use sift_store::{GapReason, LogConfig, Retention, RECORD_HEADER_BYTES};

use sift_core::system_now_ns as now_ns;

#[test]
fn retention_by_count_keeps_the_newest_whole_segments_and_readers_are_told() {
    let dir = TempDir::new("by-count");
    let config = LogConfig { retention: Retention { max_msgs: 16, ..Retention::default() }, ..LogConfig::default() };
    let log = open(dir.path(), config.clone());
    append_all(&log, 1, 100, now_ns());
    log.apply_retention(now_ns()).expect("applies");
    let stats = log.stats();
    assert_eq!((stats.first_seq, stats.last_seq, stats.messages), (85, 100, 16), "{stats:?}");
    assert_eq!((stats.retention_messages_removed, stats.segments), (84, 8));
    assert_eq!(segment_files(dir.path()).len(), 8, "the files are gone");
    let (records, gaps) = read_all(&log, 1, 5);
    assert_eq!(
        gaps.iter().map(|gap| (gap.first_seq, gap.count, gap.reason)).collect::<Vec<_>>(),
        [(1, 84, GapReason::Removed)]
    );
    assert_eq!(seqs(&records), (85..=100).collect::<Vec<u64>>());
    log.close().expect("closes");
    let log = open(dir.path(), config);
    assert_eq!((log.first_seq(), log.last_seq()), (85, 100));
    append_all(&log, 101, 1, now_ns());
}

#[test]
fn retention_by_bytes_keeps_the_total_under_the_limit() {
    let dir = TempDir::new("by-bytes");
    let max_bytes = 40 * (RECORD_HEADER_BYTES as u64 + 12);
    let config = LogConfig { retention: Retention { max_bytes, ..Retention::default() }, ..LogConfig::default() };
    let log = open(dir.path(), config);
    append_all(&log, 1, 500, now_ns());
    log.apply_retention(now_ns()).expect("applies");
    let stats = log.stats();
    assert!(stats.bytes <= max_bytes, "{stats:?}");
    assert!(stats.bytes >= max_bytes - max_bytes / 8 - RECORD_HEADER_BYTES as u64 - 12, "within a segment: {stats:?}");
    assert_eq!(stats.last_seq, 500);
    let (records, gaps) = read_all(&log, 1, 50);
    assert_eq!(gaps[0].first_seq + gaps[0].count, stats.first_seq);
    assert_eq!(records.len() as u64, stats.messages);
}

#[test]
fn retention_by_age_empties_an_idle_log_and_the_seq_counter_survives() {
    let dir = TempDir::new("by-age");
    let hour_ns = 3_600_000_000_000;
    let config = LogConfig {
        retention: Retention { max_age_ns: hour_ns, ..Retention::default() },
        ..small_segments(10 * (RECORD_HEADER_BYTES as u64 + 12))
    };
    let log = open(dir.path(), config.clone());
    let old_ns = now_ns() - 2 * hour_ns;
    append_all(&log, 1, 30, old_ns);
    append_all(&log, 31, 20, now_ns());
    log.apply_retention(now_ns()).expect("applies");
    let stats = log.stats();
    assert_eq!((stats.first_seq, stats.retention_segments_removed, stats.retention_messages_removed), (31, 3, 30));
    let outcome = log.apply_retention(now_ns() + 3 * hour_ns).expect("applies");
    assert_eq!(outcome.messages_removed, 20, "{outcome:?}");
    let stats = log.stats();
    assert_eq!((stats.first_seq, stats.last_seq, stats.messages), (51, 50, 0), "everything went: {stats:?}");
    let (records, gaps) = read_all(&log, 1, 100);
    assert!(records.is_empty());
    assert_eq!(
        gaps.iter().map(|gap| (gap.first_seq, gap.count, gap.reason)).collect::<Vec<_>>(),
        [(1, 50, GapReason::Removed)]
    );
    log.close().expect("closes");
    let log = open(dir.path(), config);
    assert_eq!((log.first_seq(), log.last_seq()), (51, 50), "the empty segment's name keeps the counter");
    append_all(&log, 51, 1, now_ns());
}

#[test]
fn the_appender_applies_retention_by_itself() {
    let dir = TempDir::new("by-itself");
    let config = LogConfig { retention: Retention { max_msgs: 8, ..Retention::default() }, ..LogConfig::default() };
    let log = open(dir.path(), config);
    append_all(&log, 1, 100, now_ns());
    let stats = log.stats();
    assert!(stats.messages <= 9 && stats.retention_segments_removed > 0, "after each roll: {stats:?}");
}
