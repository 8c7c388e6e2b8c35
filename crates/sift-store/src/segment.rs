//! A segment as the log keeps it in memory, and segment file names.
//!
//! The log never keeps an index file: opening it scans every segment
//! (`recovery.rs`) and rebuilds this: the sequence range, the timestamp
//! range, a sparse index of `(seq, offset)` pairs, and the runs of
//! sequences the segment holds but cannot serve.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

/// Characters of a segment file's name before `.seg`: the first sequence
/// in decimal, zero-padded to the width of `u64::MAX`.
pub(crate) const SEGMENT_NAME_DIGITS: usize = 20;
/// The extension of segment files.
pub(crate) const SEGMENT_EXTENSION: &str = ".seg";

/// The name of the segment file whose first record is (or will be) `first_seq`.
pub(crate) fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}{SEGMENT_EXTENSION}")
}

/// The first sequence a segment file name stands for, or `None` when the
/// name is not twenty digits and `.seg`, or names sequence 0 (sequences
/// start at 1): such files are not the log's, and are left alone.
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(SEGMENT_EXTENSION)?;
    if stem.len() != SEGMENT_NAME_DIGITS || !stem.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().filter(|first_seq| *first_seq > 0)
}

/// A run of sequences a segment holds but cannot serve, or (with a count
/// of 0) bytes in it that are not records and hide no sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DamagedRun {
    /// First sequence lost.
    pub first_seq: u64,
    /// Sequences lost (0: only bytes, no sequence, are bad).
    pub count: u64,
    /// Offset of the bad bytes.
    pub offset: u64,
    /// Offset of the next whole record, or the end of what is read.
    pub resume_offset: u64,
    /// What the bytes were.
    pub detail: &'static str,
}

impl DamagedRun {
    /// True when `seq` is one of the run's sequences.
    pub fn holds(&self, seq: u64) -> bool {
        self.first_seq <= seq && seq < self.first_seq + self.count
    }
}

/// One segment file.
#[derive(Debug)]
pub(crate) struct Segment {
    /// The sequence of its first record (its file name).
    pub first_seq: u64,
    /// Its path.
    pub path: PathBuf,
    /// The open file. Readers `pread` it, so they share it without sharing
    /// a file position; and a segment retention unlinks stays readable
    /// through it until the last reader lets go.
    pub file: Arc<File>,
    /// Bytes up to the end of its last whole record.
    pub bytes: u64,
    /// Sequence of its last record (damaged ones included); `first_seq - 1`
    /// when it holds none.
    pub last_seq: u64,
    /// Smallest record timestamp (0 when empty).
    pub min_timestamp_ns: u64,
    /// Largest record timestamp (0 when empty).
    pub max_timestamp_ns: u64,
    /// Sparse index: `(seq, offset)` of a record about every
    /// `index_interval_bytes`, ascending.
    pub index: Vec<(u64, u64)>,
    /// What it cannot serve, by offset.
    pub damaged: Vec<DamagedRun>,
}

impl Segment {
    /// A segment with no record yet, whose first will be `first_seq`.
    pub fn empty(first_seq: u64, path: PathBuf, file: Arc<File>) -> Segment {
        debug_assert!(first_seq >= 1, "sequences start at 1");
        Segment {
            first_seq,
            path,
            file,
            bytes: 0,
            last_seq: first_seq - 1,
            min_timestamp_ns: 0,
            max_timestamp_ns: 0,
            index: Vec::new(),
            damaged: Vec::new(),
        }
    }

    /// Sequences it spans, damaged ones included.
    pub fn messages(&self) -> u64 {
        (self.last_seq + 1).saturating_sub(self.first_seq)
    }

    /// The offset to start reading at to find `seq`: the indexed record at
    /// or before it, or the start of the file.
    pub fn offset_for(&self, seq: u64) -> u64 {
        match self.index.partition_point(|(indexed, _)| *indexed <= seq) {
            0 => 0,
            after => self.index[after - 1].1,
        }
    }

    /// Counts one whole record at `offset` into the metadata: the
    /// timestamp range, the last sequence, and an index entry when the
    /// last one is `index_interval_bytes` or more behind.
    pub fn add_record(&mut self, seq: u64, timestamp_ns: u64, offset: u64, end: u64, index_interval_bytes: u64) {
        debug_assert!(seq > self.last_seq, "sequences only grow within a segment");
        // The first whole record always gets an index entry.
        let first_record = self.index.is_empty();
        let last_indexed = self.index.last().map(|(_, indexed)| *indexed);
        if last_indexed.is_none_or(|indexed| offset >= indexed.saturating_add(index_interval_bytes)) {
            self.index.push((seq, offset));
        }
        if first_record {
            self.min_timestamp_ns = timestamp_ns;
            self.max_timestamp_ns = timestamp_ns;
        }
        self.min_timestamp_ns = self.min_timestamp_ns.min(timestamp_ns);
        self.max_timestamp_ns = self.max_timestamp_ns.max(timestamp_ns);
        self.last_seq = seq;
        self.bytes = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_not_segments() {
        assert_eq!(segment_name(42), "00000000000000000042.seg");
        assert_eq!(parse_segment_name(&segment_name(42)), Some(42));
        assert_eq!(parse_segment_name(&segment_name(u64::MAX)), Some(u64::MAX));
        for stranger in [
            "00000000000000000000.seg",
            "42.seg",
            "0000000000000000004x.seg",
            "00000000000000000042.seg.tmp",
            "stream.json",
        ] {
            assert_eq!(parse_segment_name(stranger), None, "{stranger}");
        }
        assert_eq!(parse_segment_name("99999999999999999999.seg"), None, "past u64::MAX");
    }
}
