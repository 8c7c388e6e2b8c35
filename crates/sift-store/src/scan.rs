//! Scanning a segment's bytes: every record's checksum and the sequence
//! chain, the sparse index, the damaged runs, and a torn tail.
//!
//! The scan expects the segment's records to carry consecutive sequences
//! from the one its file name gives. Whatever breaks that (bytes that are
//! not a record, a record out of sequence, a record cut short) starts a
//! search for the next whole record with a sequence not yet seen
//! ([`resync`]): found, the sequences in between are a damaged run and the
//! scan goes on from that record; not found, the bytes from the break to
//! the end are a tail. Whether a tail is torn (cut off) or damage (kept)
//! is the caller's decision: only the last segment is ever written to.

use crate::record::{parse_at, resync, Found, Parsed};
use crate::segment::{DamagedRun, Segment};

/// What a scan found besides what it put in the segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ScanOutcome {
    /// Whole records found.
    pub records: u64,
    /// Offset of bad or incomplete bytes with no whole record after them.
    pub tail_at: Option<u64>,
    /// What those bytes were.
    pub tail_detail: &'static str,
}

/// Why the record expected at some offset is not there.
fn break_detail(parsed: Parsed) -> &'static str {
    match parsed {
        Parsed::Whole(_) => "a whole record with an older sequence than expected",
        Parsed::Incomplete => "a record cut short",
        Parsed::Bad | Parsed::End => "bytes that are not a record (magic, length or checksum wrong)",
    }
}

/// Scans `bytes`, the contents of `segment`'s file, into `segment` (which
/// must be empty): the metadata of every whole record in sequence, and
/// every damaged run.
pub(crate) fn scan_segment(bytes: &[u8], segment: &mut Segment, index_interval_bytes: u64) -> ScanOutcome {
    debug_assert_eq!(segment.messages(), 0, "a scan fills an empty segment");
    let mut outcome = ScanOutcome::default();
    let mut offset = 0usize;
    loop {
        let expected = segment.last_seq + 1;
        let parsed = parse_at(bytes, offset);
        match parsed {
            Parsed::End => return outcome,
            Parsed::Whole(found) if found.seq == expected => {
                let end = offset + found.len();
                segment.add_record(found.seq, found.timestamp_ns, offset as u64, end as u64, index_interval_bytes);
                outcome.records += 1;
                offset = end;
            }
            // A good record, but sequences are missing before it: they are
            // lost, it is not.
            Parsed::Whole(found) if found.seq > expected => {
                let detail = "sequences missing before a whole record";
                lose(segment, found, offset, offset, detail);
            }
            _ => match resync(bytes, offset + 1, expected) {
                Some((next, found)) => {
                    lose(segment, found, offset, next, break_detail(parsed));
                    offset = next;
                }
                None => {
                    outcome.tail_at = Some(offset as u64);
                    outcome.tail_detail = break_detail(parsed);
                    return outcome;
                }
            },
        }
    }
}

/// Records the sequences from the segment's next one up to `found`'s as a
/// damaged run of the bytes from `offset` to `resume_offset` (where
/// `found` is). No sequence may be lost (junk between two consecutive
/// records): then the run only marks the bytes.
fn lose(segment: &mut Segment, found: Found, offset: usize, resume_offset: usize, detail: &'static str) {
    let first_seq = segment.last_seq + 1;
    debug_assert!(found.seq >= first_seq, "resync only finds newer records");
    segment.damaged.push(DamagedRun {
        first_seq,
        count: found.seq - first_seq,
        offset: offset as u64,
        resume_offset: resume_offset as u64,
        detail,
    });
    segment.last_seq = found.seq - 1;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::record::encode_record;

    /// Ten records, seqs 5..=14, and where each starts.
    fn ten_records() -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut offsets = Vec::new();
        for seq in 5..15 {
            offsets.push(bytes.len());
            encode_record(&mut bytes, seq, seq * 10, b"0123456789");
        }
        (bytes, offsets)
    }

    fn scan(bytes: &[u8]) -> (Segment, ScanOutcome) {
        let file = std::fs::File::open(std::env::temp_dir()).expect("any file will do");
        let mut segment = Segment::empty(5, "test.seg".into(), Arc::new(file));
        let outcome = scan_segment(bytes, &mut segment, 100);
        (segment, outcome)
    }

    #[test]
    fn a_clean_segment_scans_whole_with_a_sparse_index() {
        let (bytes, offsets) = ten_records();
        let (segment, outcome) = scan(&bytes);
        assert_eq!((outcome.records, segment.last_seq, outcome.tail_at), (10, 14, None));
        assert_eq!((segment.min_timestamp_ns, segment.max_timestamp_ns, segment.bytes), (50, 140, bytes.len() as u64));
        assert_eq!(segment.index, [(5, 0), (8, offsets[3] as u64), (11, offsets[6] as u64), (14, offsets[9] as u64)]);
        assert_eq!(segment.offset_for(10), offsets[3] as u64);
    }

    #[test]
    fn a_flipped_byte_makes_a_damaged_run_and_a_cut_makes_a_tail() {
        let (bytes, offsets) = ten_records();
        let mut damaged = bytes.clone();
        damaged[offsets[3] + 30] ^= 0xff;
        let (segment, outcome) = scan(&damaged);
        assert_eq!((outcome.records, segment.last_seq, outcome.tail_at), (9, 14, None));
        assert_eq!(segment.damaged.len(), 1);
        let run = segment.damaged[0];
        assert_eq!((run.first_seq, run.count, run.offset), (8, 1, offsets[3] as u64));
        assert_eq!(run.resume_offset, offsets[4] as u64);
        let (segment, outcome) = scan(&bytes[..offsets[9] + 5]);
        assert_eq!(
            (segment.last_seq, outcome.tail_at, segment.bytes),
            (13, Some(offsets[9] as u64), offsets[9] as u64)
        );
    }

    #[test]
    fn junk_between_records_loses_no_sequence_and_a_missing_record_is_a_run() {
        let (bytes, offsets) = ten_records();
        let mut junk = bytes[..offsets[2]].to_vec();
        junk.extend_from_slice(b"junk!");
        junk.extend_from_slice(&bytes[offsets[2]..]);
        let (segment, outcome) = scan(&junk);
        assert_eq!((outcome.records, segment.last_seq), (10, 14));
        assert_eq!(segment.damaged.iter().map(|run| (run.first_seq, run.count)).collect::<Vec<_>>(), [(7, 0)]);
        let mut missing = bytes[..offsets[2]].to_vec();
        missing.extend_from_slice(&bytes[offsets[4]..]);
        let (segment, outcome) = scan(&missing);
        assert_eq!((outcome.records, segment.last_seq), (8, 14));
        assert_eq!(segment.damaged.iter().map(|run| (run.first_seq, run.count)).collect::<Vec<_>>(), [(7, 2)]);
    }
}
