//! Reading a log: records from a sequence on, through the page cache, with
//! every checksum checked and every sequence that cannot be served
//! reported as a gap.

use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::error::StoreError;
use crate::log::Shared;
use crate::record::{claimed_len, parse_at, Parsed};

/// Bytes read from a segment at a time.
pub const READ_CHUNK_BYTES: usize = 1024 * 1024;

/// One stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its stream sequence.
    pub seq: u64,
    /// Its timestamp.
    pub timestamp_ns: u64,
    /// Its body, sliced out of the chunk read.
    pub body: Bytes,
}

/// Why sequences are skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapReason {
    /// Removed by retention.
    Removed,
    /// Damaged on disk: its checksum failed.
    Damaged,
}

/// Sequences a read passed over, never silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// First sequence skipped.
    pub first_seq: u64,
    /// How many.
    pub count: u64,
    /// Why.
    pub reason: GapReason,
}

/// What a read returned besides records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Where to continue.
    pub next_seq: u64,
    /// Sequences skipped.
    pub gaps: Vec<Gap>,
}

/// A reader of one log; cheap, used by one thread at a time.
#[derive(Debug)]
pub struct LogReader {
    shared: Arc<Shared>,
}

/// What a read needs of the segment holding its start.
struct Place {
    file: Arc<std::fs::File>,
    offset: u64,
    end: u64,
    segment_last_seq: u64,
    damaged: Vec<crate::scan::DamagedRun>,
}

impl LogReader {
    pub(crate) fn new(shared: Arc<Shared>) -> LogReader {
        LogReader { shared }
    }

    /// Appends to `out` the records with sequence `from_seq` and on, in
    /// order, up to the last visible one, at most `max_records` and about
    /// `max_bytes` (at least one record), all from one segment. Sequences
    /// removed by retention or damaged come back as gaps.
    pub fn read(
        &mut self,
        from_seq: u64,
        max_records: usize,
        max_bytes: usize,
        out: &mut Vec<Record>,
    ) -> Result<ReadOutcome, StoreError> {
        let last_visible = self.shared.last_seq.load(Ordering::Acquire);
        let mut outcome = ReadOutcome { next_seq: from_seq.max(1), gaps: Vec::new() };
        if outcome.next_seq > last_visible {
            return Ok(outcome);
        }
        let Some(place) = self.place(&mut outcome) else { return Ok(outcome) };
        let mut expected = outcome.next_seq;
        let mut offset = place.offset;
        let want_bytes = max_bytes.clamp(1, READ_CHUNK_BYTES);
        let limit = last_visible.min(place.segment_last_seq);
        let path = &self.shared.dir;
        while expected <= limit && out.len() < max_records.max(1) {
            if let Some(run) =
                place.damaged.iter().find(|run| run.first_seq <= expected && expected < run.first_seq + run.count)
            {
                let count = run.first_seq + run.count - expected;
                outcome.gaps.push(Gap { first_seq: expected, count, reason: GapReason::Damaged });
                expected += count;
                offset = offset.max(run.resume_offset);
                continue;
            }
            // Reading forward from an indexed offset may cross damage that
            // lies before the sequence wanted: step over it.
            if let Some(run) = place.damaged.iter().find(|run| run.offset == offset && run.resume_offset > offset) {
                offset = run.resume_offset;
                continue;
            }
            if offset >= place.end {
                break;
            }
            let chunk = read_chunk(&place.file, offset, place.end, want_bytes)
                .map_err(|error| StoreError::io(path, "read a segment of", error))?;
            let mut at = 0usize;
            while at < chunk.len() && expected <= limit && out.len() < max_records.max(1) {
                let Parsed::Whole(found) = parse_at(&chunk, at) else { break };
                if found.seq > expected {
                    break;
                }
                if found.seq == expected {
                    let body = chunk.slice(found.body_start..found.body_start + found.body_len);
                    out.push(Record { seq: found.seq, timestamp_ns: found.timestamp_ns, body });
                    expected += 1;
                }
                at += found.len();
                if at >= want_bytes && !out.is_empty() {
                    break;
                }
            }
            let stuck = at == 0 && !place.damaged.iter().any(|run| run.first_seq == expected);
            if stuck {
                // Bytes no damaged run names: the file changed under the log.
                return Err(StoreError::Corrupt {
                    path: path.clone(),
                    offset,
                    detail: format!("sequence {expected} does not parse where the log expects it"),
                });
            }
            offset += at as u64;
            if at >= want_bytes && !out.is_empty() {
                break;
            }
        }
        outcome.next_seq = expected;
        Ok(outcome)
    }

    /// The segment holding `outcome.next_seq`, after a gap for sequences
    /// retention removed.
    fn place(&self, outcome: &mut ReadOutcome) -> Option<Place> {
        let segments = self.shared.segments();
        let first = segments.first()?.first_seq;
        if outcome.next_seq < first {
            outcome.gaps.push(Gap {
                first_seq: outcome.next_seq,
                count: first - outcome.next_seq,
                reason: GapReason::Removed,
            });
            outcome.next_seq = first;
        }
        let position = segments.partition_point(|segment| segment.first_seq <= outcome.next_seq).checked_sub(1)?;
        let segment = &segments[position];
        if outcome.next_seq > segment.last_seq {
            return None;
        }
        Some(Place {
            file: segment.file.clone(),
            offset: segment.offset_for(outcome.next_seq),
            end: segment.bytes,
            segment_last_seq: segment.last_seq,
            damaged: segment.damaged.clone(),
        })
    }
}

/// Reads `want` bytes (or a whole record, when the first is larger) from `offset`, not past `end`.
fn read_chunk(file: &std::fs::File, offset: u64, end: u64, want: usize) -> std::io::Result<Bytes> {
    let available = usize::try_from(end - offset).unwrap_or(usize::MAX);
    // At least a header, so that a record larger than `want` is seen whole.
    let mut length = want.max(crate::record::RECORD_HEADER_BYTES).min(available);
    let mut buffer = BytesMut::zeroed(length);
    file.read_exact_at(&mut buffer, offset)?;
    if let Some(record) = claimed_len(&buffer, 0) {
        if record > length && record <= available {
            length = record;
            buffer = BytesMut::zeroed(length);
            file.read_exact_at(&mut buffer, offset)?;
        }
    }
    Ok(buffer.freeze())
}
