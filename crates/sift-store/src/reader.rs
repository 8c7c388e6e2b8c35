//! Reading a log: records from a sequence on, through the page cache, with
//! every checksum checked and every sequence that cannot be served
//! reported as a gap, never skipped silently.
//!
//! A read finds the segment holding its first sequence, starts at the
//! sparse index entry at or before it (or exactly where the reader's last
//! read stopped), and reads forward in chunks with `pread`, which shares
//! the segment's file between readers without sharing a file position.
//! Bodies are zero-copy slices of the chunk, so a record held keeps its
//! chunk (up to [`READ_CHUNK_BYTES`]) in memory. The reader keeps its last
//! chunk too, and serves the next read from it when it starts inside: a
//! consumer reads a few hundred records at a time, and each read must not
//! cost a chunk of I/O.
//!
//! A record that fails its checksum here, though it passed at open (the
//! disk changed under the log), is handled like damage found at open: the
//! reader searches for the next whole record, returns the sequences in
//! between as a `Damaged` gap, counts them, and remembers the run in the
//! segment so that no later read trips over it again.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::error::StoreError;
use crate::log::Shared;
use crate::record::{claimed_len, parse_at, resync, Parsed, RECORD_HEADER_BYTES};
use crate::segment::DamagedRun;

/// Most bytes read from a segment at a time.
pub const READ_CHUNK_BYTES: usize = 1024 * 1024;
/// Records a time lookup reads at a time while scanning a segment.
const TIME_SCAN_RECORDS: usize = 4_096;

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
    /// Damaged on disk: the record fails its checksum or is missing.
    Damaged,
}

/// Sequences a read passed over.
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
    /// Where to continue: after the last record or gap returned.
    pub next_seq: u64,
    /// Sequences skipped, in order.
    pub gaps: Vec<Gap>,
}

/// Where the last read stopped, so that the next one from there does not
/// go back to an index entry.
#[derive(Debug, Clone, Copy)]
struct Resume {
    next_seq: u64,
    segment_first_seq: u64,
    offset: u64,
}

/// A reader of one log, with its own position; used from one thread at a
/// time (it is `Send`), and as many readers as wanted.
#[derive(Debug)]
pub struct LogReader {
    shared: Arc<Shared>,
    resume: Option<Resume>,
    /// The chunk the last read took from disk.
    chunk: Option<CachedChunk>,
    /// The log's generation `resume` and `chunk` belong to: a cut of the
    /// tail makes both stale.
    generation: u64,
}

/// A chunk of one segment, as read: whole visible records only, since a
/// chunk never reaches past the visible end of its segment.
#[derive(Debug)]
struct CachedChunk {
    segment_first_seq: u64,
    offset: u64,
    bytes: Bytes,
}

impl CachedChunk {
    /// The rest of the chunk from `offset` in segment `segment_first_seq`,
    /// when the chunk holds bytes there.
    fn from(&self, segment_first_seq: u64, offset: u64) -> Option<Bytes> {
        let start = usize::try_from(offset.checked_sub(self.offset)?).ok()?;
        (self.segment_first_seq == segment_first_seq && start < self.bytes.len()).then(|| self.bytes.slice(start..))
    }
}

/// The segment a read works in, copied out of the list so that the read
/// holds no lock while it does I/O.
struct Place {
    file: Arc<File>,
    path: PathBuf,
    first_seq: u64,
    end: u64,
    last_seq: u64,
    damaged: Vec<DamagedRun>,
}

/// A read's progress through its segment.
struct Walk {
    expected: u64,
    offset: u64,
    limit: u64,
    records_max: usize,
    bytes_max: usize,
    chunk_bytes: usize,
    records: usize,
    bytes: usize,
}

impl Walk {
    /// True when the read returned enough: the record limit, or the byte
    /// limit after at least one record.
    fn full(&self) -> bool {
        self.records >= self.records_max || (self.records > 0 && self.bytes >= self.bytes_max)
    }
}

impl LogReader {
    pub(crate) fn new(shared: Arc<Shared>) -> LogReader {
        let generation = shared.generation.load(Ordering::Acquire);
        LogReader { shared, resume: None, chunk: None, generation }
    }

    /// Appends to `out` the records with sequence `from_seq` and on, in
    /// order, up to the last visible one: at most `max_records` (at least
    /// one) and about `max_bytes` of bodies (at least one record), all
    /// from one segment. Sequences retention removed or damage lost come
    /// back as gaps. An empty outcome (`next_seq == from_seq`, no gap) means
    /// nothing more is visible yet.
    pub fn read(
        &mut self,
        from_seq: u64,
        max_records: usize,
        max_bytes: usize,
        out: &mut Vec<Record>,
    ) -> Result<ReadOutcome, StoreError> {
        let generation = self.shared.generation.load(Ordering::Acquire);
        if generation != self.generation {
            (self.chunk, self.resume, self.generation) = (None, None, generation);
        }
        let last_visible = self.shared.last_seq.load(Ordering::Acquire);
        let mut outcome = ReadOutcome { next_seq: from_seq.max(1), gaps: Vec::new() };
        if outcome.next_seq > last_visible {
            return Ok(outcome);
        }
        let Some((mut place, offset)) = self.place(&mut outcome) else { return Ok(outcome) };
        let interval = usize::try_from(self.shared.config.index_interval_bytes).unwrap_or(READ_CHUNK_BYTES);
        let mut walk = Walk {
            expected: outcome.next_seq,
            offset,
            limit: last_visible.min(place.last_seq),
            records_max: max_records.max(1),
            bytes_max: max_bytes,
            chunk_bytes: max_bytes.max(interval).clamp(RECORD_HEADER_BYTES, READ_CHUNK_BYTES),
            records: 0,
            bytes: 0,
        };
        self.walk(&mut place, &mut walk, out, &mut outcome.gaps)?;
        outcome.next_seq = walk.expected;
        self.resume = Some(Resume { next_seq: walk.expected, segment_first_seq: place.first_seq, offset: walk.offset });
        Ok(outcome)
    }

    /// The segment holding `outcome.next_seq` and the offset to start at,
    /// after a `Removed` gap when retention took the sequences wanted.
    fn place(&self, outcome: &mut ReadOutcome) -> Option<(Place, u64)> {
        let segments = self.shared.segments();
        let first = segments.first()?.first_seq;
        if outcome.next_seq < first {
            let count = first - outcome.next_seq;
            outcome.gaps.push(Gap { first_seq: outcome.next_seq, count, reason: GapReason::Removed });
            outcome.next_seq = first;
        }
        let position = segments.partition_point(|segment| segment.first_seq <= outcome.next_seq).checked_sub(1)?;
        let segment = &segments[position];
        if outcome.next_seq > segment.last_seq {
            return None;
        }
        let offset = match self.resume {
            Some(resume) if resume.next_seq == outcome.next_seq && resume.segment_first_seq == segment.first_seq => {
                resume.offset
            }
            _ => segment.offset_for(outcome.next_seq),
        };
        let place = Place {
            file: segment.file.clone(),
            path: segment.path.clone(),
            first_seq: segment.first_seq,
            end: segment.bytes,
            last_seq: segment.last_seq,
            damaged: segment.damaged.clone(),
        };
        Some((place, offset))
    }

    /// Reads forward through `place` until the walk is full or at its limit.
    fn walk(
        &mut self,
        place: &mut Place,
        walk: &mut Walk,
        out: &mut Vec<Record>,
        gaps: &mut Vec<Gap>,
    ) -> Result<(), StoreError> {
        while walk.expected <= walk.limit && !walk.full() {
            if let Some(run) = place.damaged.iter().find(|run| run.holds(walk.expected)) {
                let end = (run.first_seq + run.count).min(walk.limit + 1);
                gaps.push(Gap { first_seq: walk.expected, count: end - walk.expected, reason: GapReason::Damaged });
                walk.expected = end;
                walk.offset = walk.offset.max(run.resume_offset);
                continue;
            }
            // Reading forward from an index entry may meet damage before
            // the sequence wanted: step over its bytes.
            if let Some(run) =
                place.damaged.iter().find(|run| run.offset == walk.offset && run.resume_offset > run.offset)
            {
                walk.offset = run.resume_offset;
                continue;
            }
            if walk.offset >= place.end {
                let detail = format!("sequence {} lies past the end of the whole records", walk.expected);
                return Err(StoreError::Corrupt { path: place.path.clone(), offset: walk.offset, detail });
            }
            let cached = self.chunk.as_ref().and_then(|chunk| chunk.from(place.first_seq, walk.offset));
            let from_cache = cached.is_some();
            let chunk = match cached {
                Some(chunk) => chunk,
                None => self.read_chunk(place, walk)?,
            };
            match take_records(&chunk, walk, out) {
                // The cached chunk ends inside a record: read on from disk.
                0 if from_cache => self.chunk = None,
                0 => {
                    let run = self.damage_found(place, walk.offset, walk.expected)?;
                    place.damaged.push(run);
                }
                consumed => walk.offset += consumed as u64,
            }
        }
        Ok(())
    }

    /// Reads the chunk at the walk's offset from disk, and keeps it for
    /// the next read.
    fn read_chunk(&mut self, place: &Place, walk: &Walk) -> Result<Bytes, StoreError> {
        let bytes = read_chunk(&place.file, walk.offset, place.end, walk.chunk_bytes)
            .map_err(|error| StoreError::io(&place.path, "read", error))?;
        let chunk = CachedChunk { segment_first_seq: place.first_seq, offset: walk.offset, bytes: bytes.clone() };
        self.chunk = Some(chunk);
        Ok(bytes)
    }

    /// A record at `offset` that does not parse where the log expects
    /// `expected`: finds where the next whole record is, and records the
    /// sequences in between as damaged (returned, counted, remembered).
    fn damage_found(&self, place: &Place, offset: u64, expected: u64) -> Result<DamagedRun, StoreError> {
        let mut rest = vec![0u8; usize::try_from(place.end - offset).unwrap_or(usize::MAX)];
        place.file.read_exact_at(&mut rest, offset).map_err(|error| StoreError::io(&place.path, "read", error))?;
        let detail = "a record that fails its checksum when read (the file changed after open)";
        let (count, resume_offset) = match parse_at(&rest, 0) {
            Parsed::Whole(found) if found.seq > expected => (found.seq - expected, offset),
            _ => match resync(&rest, 1, expected) {
                Some((next, found)) => (found.seq - expected, offset + next as u64),
                None => (place.last_seq + 1 - expected, place.end),
            },
        };
        let run = DamagedRun { first_seq: expected, count, offset, resume_offset, detail };
        debug_assert!(run.count > 0 || run.resume_offset > offset, "a run always moves the read on");
        let mut segments = self.shared.segments();
        if let Some(segment) = segments.iter_mut().find(|segment| segment.first_seq == place.first_seq) {
            if !segment.damaged.iter().any(|known| known.offset == offset) {
                segment.damaged.push(run);
                self.shared.counters.damaged_records.fetch_add(count, Ordering::Relaxed);
            }
        }
        Ok(run)
    }
}

/// Takes the records of `chunk` (read at `walk.offset`) in sequence into
/// `out`, passing over older ones, until the walk is full, at its limit,
/// or the chunk ends or stops parsing. Returns the bytes consumed.
fn take_records(chunk: &Bytes, walk: &mut Walk, out: &mut Vec<Record>) -> usize {
    let mut at = 0usize;
    while walk.expected <= walk.limit && !walk.full() {
        let Parsed::Whole(found) = parse_at(chunk, at) else { break };
        if found.seq > walk.expected {
            break;
        }
        if found.seq == walk.expected {
            let body = chunk.slice(found.body_start..found.body_start + found.body_len);
            out.push(Record { seq: found.seq, timestamp_ns: found.timestamp_ns, body });
            walk.expected += 1;
            walk.records += 1;
            walk.bytes += found.body_len;
        }
        at += found.len();
    }
    at
}

/// Reads `want` bytes from `offset`, not past `end`, or the whole first
/// record when it is larger.
fn read_chunk(file: &File, offset: u64, end: u64, want: usize) -> std::io::Result<Bytes> {
    let available = usize::try_from(end - offset).unwrap_or(usize::MAX);
    let mut length = want.max(RECORD_HEADER_BYTES).min(available);
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

/// The first sequence, in log order, whose timestamp is at or after
/// `timestamp_ns`, or `last_seq + 1`: segments whose newest record is
/// older are skipped whole, the others scanned in order.
pub(crate) fn seq_at_or_after_time(shared: &Arc<Shared>, timestamp_ns: u64) -> Result<u64, StoreError> {
    let candidates: Vec<(u64, u64)> = shared
        .segments()
        .iter()
        .filter(|segment| !segment.index.is_empty() && segment.max_timestamp_ns >= timestamp_ns)
        .map(|segment| (segment.first_seq, segment.last_seq))
        .collect();
    let mut reader = LogReader::new(shared.clone());
    let mut records = Vec::new();
    for (first_seq, last_seq) in candidates {
        let mut next = first_seq;
        while next <= last_seq {
            records.clear();
            let outcome = reader.read(next, TIME_SCAN_RECORDS, READ_CHUNK_BYTES, &mut records)?;
            if let Some(found) = records.iter().find(|record| record.timestamp_ns >= timestamp_ns) {
                return Ok(found.seq);
            }
            if outcome.next_seq == next {
                break;
            }
            next = outcome.next_seq;
        }
    }
    Ok(shared.last_seq.load(Ordering::Acquire) + 1)
}
