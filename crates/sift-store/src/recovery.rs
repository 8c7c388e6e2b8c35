//! Opening a log's segments: a full scan that checks every record, cuts a
//! torn tail of the last segment (when repairing), and reports damage.
//! [`verify`] runs the same scan without changing anything.
//!
//! Cost: every byte of every segment is read once, and every record's
//! checksum computed (crc32fast runs at several GB/s, so the disk or the
//! page cache sets the pace). One segment is in memory at a time, so
//! opening needs up to `segment_bytes_max` of memory.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::StoreError;
use crate::files::{sync_dir, TEMPORARY_SUFFIX};
use crate::scan::scan_segment;
use crate::segment::{parse_segment_name, segment_name, DamagedRun, Segment, SEGMENT_EXTENSION};

/// A torn tail cut back (or, for [`verify`], found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The segment.
    pub segment: PathBuf,
    /// Where the incomplete or bad record began: the file's new length.
    pub offset: u64,
    /// Bytes from there to the end.
    pub bytes_cut: u64,
}

/// Damage found: kept on disk, counted, never served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The segment.
    pub segment: PathBuf,
    /// Offset of the bad bytes.
    pub offset: u64,
    /// First sequence lost.
    pub first_seq: u64,
    /// Sequences lost; 0 when only bytes between two good records are bad.
    pub count: u64,
    /// What was found there.
    pub detail: String,
}

/// What opening (or verifying) a log found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Segment files.
    pub segments: usize,
    /// Whole records.
    pub records: u64,
    /// Bytes of whole records.
    pub bytes: u64,
    /// Oldest sequence (`last_seq + 1` when the log holds none).
    pub first_seq: u64,
    /// Newest sequence (0 when none was ever stored).
    pub last_seq: u64,
    /// A torn tail of the last segment.
    pub torn_tail: Option<TornTail>,
    /// Damaged records and bytes, in log order.
    pub damaged: Vec<Damage>,
}

/// What [`verify`] reports: the same as opening finds, with the torn tail
/// found but not cut.
pub type VerifyReport = Recovery;

impl std::fmt::Display for Recovery {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{} segments, {} records ({} bytes), ", self.segments, self.records, self.bytes)?;
        // An empty log's first sequence is the next one to be written, one
        // past its last: say so rather than print a backwards range.
        match self.last_seq < self.first_seq {
            true => write!(formatter, "no sequences yet (the next is {})", self.first_seq)?,
            false => write!(formatter, "sequences {}..{}", self.first_seq, self.last_seq)?,
        }
        if let Some(tail) = &self.torn_tail {
            let (path, offset, bytes) = (tail.segment.display(), tail.offset, tail.bytes_cut);
            write!(formatter, "; torn tail at {path} byte {offset} ({bytes} bytes)")?;
        }
        for damage in &self.damaged {
            let (path, offset, detail) = (damage.segment.display(), damage.offset, &damage.detail);
            match damage.count {
                0 => write!(formatter, "; damaged: {path} at byte {offset}: {detail}, no sequence lost")?,
                count => {
                    let last = damage.first_seq + count - 1;
                    write!(
                        formatter,
                        "; damaged: {path} at byte {offset}: {detail}, sequences {}..{last} unreadable",
                        damage.first_seq
                    )?
                }
            }
        }
        Ok(())
    }
}

/// The segment files of `dir`, by first sequence. Anything else is left
/// alone, except that a stray `*.seg.tmp` is removed when repairing.
pub(crate) fn segment_files(dir: &Path, repair: bool) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let temporary_suffix = format!("{SEGMENT_EXTENSION}{TEMPORARY_SUFFIX}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|error| StoreError::io(dir, "list", error))? {
        let entry = entry.map_err(|error| StoreError::io(dir, "list", error))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(&temporary_suffix) {
            if repair {
                std::fs::remove_file(entry.path()).map_err(|error| StoreError::io(&entry.path(), "remove", error))?;
            }
            continue;
        }
        if let Some(first_seq) = parse_segment_name(&name) {
            found.push((first_seq, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Scans every segment of `dir` into memory. When `repair`, a missing
/// first segment is created, a torn tail cut and stale files removed, and
/// the files are opened for writing; otherwise nothing is changed.
pub(crate) fn open_segments(
    dir: &Path,
    index_interval_bytes: u64,
    repair: bool,
) -> Result<(Vec<Segment>, Recovery), StoreError> {
    let mut files = segment_files(dir, repair)?;
    if files.is_empty() && repair {
        let path = dir.join(segment_name(1));
        File::create(&path).map_err(|error| StoreError::io(&path, "create", error))?;
        sync_dir(dir)?;
        files.push((1, path));
    }
    let mut recovery = Recovery::default();
    let mut segments: Vec<Segment> = Vec::with_capacity(files.len());
    let last_position = files.len().saturating_sub(1);
    for (position, (first_seq, path)) in files.into_iter().enumerate() {
        let segment =
            open_segment(first_seq, path, index_interval_bytes, repair, position == last_position, &mut recovery)?;
        segments.push(segment);
    }
    drop_stale_segments(&mut segments, repair)?;
    close_chain(&mut segments)?;
    report_damage(&segments, &mut recovery);
    recovery.segments = segments.len();
    recovery.last_seq = segments.last().map_or(0, |segment| segment.last_seq);
    recovery.first_seq = segments.first().map_or(recovery.last_seq + 1, |segment| segment.first_seq);
    Ok((segments, recovery))
}

/// Opens and scans one segment file. A tail that is not a whole record is
/// torn in the last segment (cut when repairing) and damage in any other.
fn open_segment(
    first_seq: u64,
    path: PathBuf,
    index_interval_bytes: u64,
    repair: bool,
    is_last: bool,
    recovery: &mut Recovery,
) -> Result<Segment, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(repair)
        .open(&path)
        .map_err(|error| StoreError::io(&path, "open", error))?;
    let bytes = std::fs::read(&path).map_err(|error| StoreError::io(&path, "read", error))?;
    let mut segment = Segment::empty(first_seq, path, Arc::new(file));
    let outcome = scan_segment(&bytes, &mut segment, index_interval_bytes);
    recovery.records += outcome.records;
    recovery.bytes += segment.bytes;
    let Some(tail_at) = outcome.tail_at else { return Ok(segment) };
    let file_len = bytes.len() as u64;
    if is_last {
        let torn = TornTail { segment: segment.path.clone(), offset: tail_at, bytes_cut: file_len - tail_at };
        recovery.torn_tail = Some(torn);
        if repair {
            debug_assert_eq!(tail_at, segment.bytes, "the tail starts where the whole records end");
            segment.file.set_len(tail_at).map_err(|error| StoreError::io(&segment.path, "truncate", error))?;
            segment.file.sync_all().map_err(|error| StoreError::io(&segment.path, "sync", error))?;
        }
    } else {
        // Kept as it is; `close_chain` adds the sequences it hides.
        let first_seq = segment.last_seq + 1;
        let detail = outcome.tail_detail;
        segment.damaged.push(DamagedRun { first_seq, count: 0, offset: tail_at, resume_offset: file_len, detail });
    }
    Ok(segment)
}

/// Removes segments without a record whose name is not past the previous
/// segment's last sequence: left by a segment roll that failed half-way,
/// they claim sequences the previous segment holds. A non-empty segment
/// that overlaps its predecessor cannot be written by this crate and is
/// left to `close_chain` to refuse.
fn drop_stale_segments(segments: &mut Vec<Segment>, repair: bool) -> Result<(), StoreError> {
    let mut position = 1;
    while position < segments.len() {
        let stale = segments[position].first_seq <= segments[position - 1].last_seq
            && segments[position].bytes == 0
            && segments[position].damaged.is_empty();
        if !stale {
            position += 1;
            continue;
        }
        let removed = segments.remove(position);
        if repair {
            std::fs::remove_file(&removed.path).map_err(|error| StoreError::io(&removed.path, "remove", error))?;
        }
    }
    Ok(())
}

/// Makes the sequence chain whole: the sequences between a segment's last
/// record and the next segment's first are lost from the former (a
/// damaged run at its end). Overlapping segments are refused.
fn close_chain(segments: &mut [Segment]) -> Result<(), StoreError> {
    for position in 1..segments.len() {
        let next_first = segments[position].first_seq;
        let segment = &mut segments[position - 1];
        if next_first <= segment.last_seq {
            let detail =
                format!("holds sequences up to {}, but the next segment starts at {next_first}", segment.last_seq);
            return Err(StoreError::Corrupt { path: segment.path.clone(), offset: 0, detail });
        }
        let missing = next_first - segment.last_seq - 1;
        if missing == 0 {
            continue;
        }
        let bytes = segment.bytes;
        match segment.damaged.last_mut() {
            // Bad bytes at the end already: they hid the sequences.
            Some(run) if run.offset >= bytes => run.count += missing,
            _ => segment.damaged.push(DamagedRun {
                first_seq: segment.last_seq + 1,
                count: missing,
                offset: bytes,
                resume_offset: bytes,
                detail: "sequences missing at the end of the segment (the next one starts later)",
            }),
        }
        segment.last_seq = next_first - 1;
    }
    Ok(())
}

/// Lists every damaged run in `recovery`.
fn report_damage(segments: &[Segment], recovery: &mut Recovery) {
    for segment in segments {
        for run in &segment.damaged {
            recovery.damaged.push(Damage {
                segment: segment.path.clone(),
                offset: run.offset,
                first_seq: run.first_seq,
                count: run.count,
                detail: run.detail.to_string(),
            });
        }
    }
}

/// Checks a stream's files offline, changing nothing: every record's
/// checksum, the sequence chain, a torn tail (found, not cut), every
/// damaged record with its file and offset. A missing directory is an
/// error; an empty one an empty log.
pub fn verify(dir: &Path) -> Result<VerifyReport, StoreError> {
    open_segments(dir, u64::MAX, false).map(|(_, recovery)| recovery)
}
