//! Scanning a segment's bytes: every record's checksum and the sequence
//! chain, the sparse index, the damaged runs, and a torn tail.

use crate::record::{parse_at, resync, Parsed};

/// A run of sequences a segment holds but cannot serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DamagedRun {
    /// First sequence lost.
    pub first_seq: u64,
    /// Sequences lost.
    pub count: u64,
    /// Offset of the bad bytes.
    pub offset: u64,
    /// Offset of the next whole record (or the segment's end).
    pub resume_offset: u64,
}

/// What a scan of one segment found.
#[derive(Debug, Clone, Default)]
pub struct SegmentScan {
    /// Bytes up to the end of the last whole record (a torn tail excluded).
    pub valid_len: u64,
    /// Whole records found.
    pub records: u64,
    /// Sequence of the last whole record; `first_seq - 1` when none.
    pub last_seq: u64,
    /// Smallest and largest timestamps (0, 0 when no record).
    pub min_timestamp_ns: u64,
    /// Largest timestamp.
    pub max_timestamp_ns: u64,
    /// Sparse index: (seq, offset) of a record every `index_interval` bytes.
    pub index: Vec<(u64, u64)>,
    /// Damaged runs inside the segment.
    pub damaged: Vec<DamagedRun>,
    /// Offset of bad or incomplete bytes with no whole record after them.
    pub tail_at: Option<u64>,
}

impl SegmentScan {
    /// Counts `found` into the scan.
    fn add(&mut self, seq: u64, timestamp_ns: u64, offset: u64, end: u64, index_interval: u64) {
        let last_indexed = self.index.last().map(|(_, at)| *at);
        if last_indexed.is_none_or(|at| offset >= at + index_interval) {
            self.index.push((seq, offset));
        }
        if self.records == 0 {
            self.min_timestamp_ns = timestamp_ns;
        }
        self.min_timestamp_ns = self.min_timestamp_ns.min(timestamp_ns);
        self.max_timestamp_ns = self.max_timestamp_ns.max(timestamp_ns);
        self.records += 1;
        self.last_seq = seq;
        self.valid_len = end;
    }
}

/// Scans `bytes`, a segment whose first record should be `first_seq`.
pub fn scan_segment(bytes: &[u8], first_seq: u64, index_interval: u64) -> SegmentScan {
    let mut scan = SegmentScan { last_seq: first_seq.saturating_sub(1), ..SegmentScan::default() };
    let mut offset = 0usize;
    loop {
        match parse_at(bytes, offset) {
            Parsed::End => return scan,
            Parsed::Whole(found) if found.seq == scan.last_seq + 1 => {
                let end = offset + found.len();
                scan.add(found.seq, found.timestamp_ns, offset as u64, end as u64, index_interval);
                offset = end;
            }
            // A whole record out of sequence, bad bytes, or a record that
            // does not fit: look for the next whole record after it.
            _ => match resync(bytes, offset + 1) {
                Some((next, found)) if found.seq > scan.last_seq + 1 => {
                    let first = scan.last_seq + 1;
                    scan.damaged.push(DamagedRun {
                        first_seq: first,
                        count: found.seq - first,
                        offset: offset as u64,
                        resume_offset: next as u64,
                    });
                    scan.last_seq = found.seq - 1;
                    offset = next;
                }
                // Only older sequences follow (stale bytes): nothing more here.
                Some(_) | None => {
                    scan.tail_at = Some(offset as u64);
                    return scan;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::encode_record;

    #[test]
    fn a_flipped_byte_makes_a_damaged_run_and_a_cut_makes_a_tail() {
        let mut bytes = Vec::new();
        let mut offsets = Vec::new();
        for seq in 5..15 {
            offsets.push(bytes.len());
            encode_record(&mut bytes, seq, seq * 10, b"0123456789");
        }
        let clean = scan_segment(&bytes, 5, 0);
        assert_eq!((clean.records, clean.last_seq, clean.tail_at), (10, 14, None));
        let mut damaged = bytes.clone();
        damaged[offsets[3] + 30] ^= 0xff;
        let scan = scan_segment(&damaged, 5, 0);
        assert_eq!(scan.records, 9);
        assert_eq!(
            scan.damaged,
            [DamagedRun { first_seq: 8, count: 1, offset: offsets[3] as u64, resume_offset: offsets[4] as u64 }]
        );
        let cut = scan_segment(&bytes[..offsets[9] + 5], 5, 0);
        assert_eq!((cut.last_seq, cut.tail_at, cut.valid_len), (13, Some(offsets[9] as u64), offsets[9] as u64));
    }
}
