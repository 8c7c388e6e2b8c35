//! Opening a log's segments: a full scan that checks every record, cuts a
//! torn tail of the last segment (when repairing), and reports damage.
//! `verify` runs the same scan without changing anything.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::StoreError;
use crate::log::{segment_name, Segment};
use crate::scan::{scan_segment, DamagedRun};

/// A torn tail cut back (or, for `verify`, found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The segment.
    pub segment: PathBuf,
    /// Where the incomplete record began.
    pub offset: u64,
    /// Bytes after it.
    pub bytes_cut: u64,
}

/// Damaged records found: kept on disk, counted, never served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The segment.
    pub segment: PathBuf,
    /// Offset of the bad bytes.
    pub offset: u64,
    /// First sequence lost.
    pub first_seq: u64,
    /// Sequences lost.
    pub count: u64,
}

/// What opening a log found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Segment files.
    pub segments: usize,
    /// Whole records.
    pub records: u64,
    /// Bytes of whole records.
    pub bytes: u64,
    /// Oldest sequence.
    pub first_seq: u64,
    /// Newest sequence (0 when none).
    pub last_seq: u64,
    /// A torn tail of the last segment.
    pub torn_tail: Option<TornTail>,
    /// Damaged records.
    pub damaged: Vec<Damage>,
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "{} segments, {} records ({} bytes), sequences {}..{}",
            self.segments, self.records, self.bytes, self.first_seq, self.last_seq
        )?;
        if let Some(tail) = &self.torn_tail {
            write!(
                formatter,
                "; torn tail at {} byte {} ({} bytes)",
                tail.segment.display(),
                tail.offset,
                tail.bytes_cut
            )?;
        }
        for damage in &self.damaged {
            write!(
                formatter,
                "; damaged: {} at byte {}: sequences {}..{} unreadable",
                damage.segment.display(),
                damage.offset,
                damage.first_seq,
                damage.first_seq + damage.count.saturating_sub(1)
            )?;
        }
        Ok(())
    }
}

/// The segment files of `dir`, by first sequence; stray temporary files are removed when `repair`.
fn segment_files(dir: &Path, repair: bool) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|error| StoreError::io(dir, "list", error))? {
        let entry = entry.map_err(|error| StoreError::io(dir, "list", error))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if repair && name.ends_with(".seg.tmp") {
            let _ = std::fs::remove_file(entry.path());
            continue;
        }
        let Some(stem) = name.strip_suffix(".seg") else { continue };
        if stem.len() == 20 && stem.bytes().all(|byte| byte.is_ascii_digit()) {
            if let Ok(first_seq) = stem.parse::<u64>() {
                found.push((first_seq, entry.path()));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Scans every segment of `dir` into memory form.
pub(crate) fn open_segments(
    dir: &Path,
    index_interval: u64,
    repair: bool,
) -> Result<(Vec<Segment>, Recovery), StoreError> {
    let mut files = segment_files(dir, repair)?;
    if files.is_empty() && repair {
        let path = dir.join(segment_name(1));
        File::create(&path).map_err(|error| StoreError::io(&path, "create", error))?;
        crate::files::sync_dir(dir)?;
        files.push((1, path));
    }
    let mut recovery = Recovery::default();
    let mut segments: Vec<Segment> = Vec::with_capacity(files.len());
    let count = files.len();
    for (position, (first_seq, path)) in files.into_iter().enumerate() {
        let bytes = std::fs::read(&path).map_err(|error| StoreError::io(&path, "read", error))?;
        let scan = scan_segment(&bytes, first_seq, index_interval);
        let damaged = scan.damaged.clone();
        if let Some(tail_at) = scan.tail_at {
            if position + 1 == count {
                let bytes_cut = bytes.len() as u64 - tail_at;
                recovery.torn_tail = Some(TornTail { segment: path.clone(), offset: tail_at, bytes_cut });
                if repair {
                    cut(&path, scan.valid_len)?;
                }
            }
            // Bad bytes at the end of a sealed segment: the sequences up to
            // the next segment's first are lost, as `close_chain` records.
        }
        let file = open_file(&path, repair)?;
        segments.push(Segment {
            first_seq,
            path,
            file: Arc::new(file),
            bytes: scan.valid_len,
            last_seq: scan.last_seq,
            min_timestamp_ns: scan.min_timestamp_ns,
            max_timestamp_ns: scan.max_timestamp_ns,
            index: scan.index,
            damaged,
        });
        recovery.records += scan.records;
        recovery.bytes += scan.valid_len;
    }
    close_chain(&mut segments);
    for segment in &segments {
        for run in segment.damaged.iter().filter(|run| run.count > 0) {
            recovery.damaged.push(Damage {
                segment: segment.path.clone(),
                offset: run.offset,
                first_seq: run.first_seq,
                count: run.count,
            });
        }
    }
    recovery.segments = segments.len();
    recovery.first_seq = segments.first().map_or(1, |segment| segment.first_seq);
    recovery.last_seq = segments.last().map_or(0, |segment| segment.last_seq);
    Ok((segments, recovery))
}

/// Makes the sequence chain whole: what lies between a segment's last
/// record and the next segment's first is a damaged run of the former.
fn close_chain(segments: &mut [Segment]) {
    for position in 1..segments.len() {
        let next_first = segments[position].first_seq;
        let segment = &mut segments[position - 1];
        segment.damaged.retain(|run| run.count > 0);
        if segment.last_seq + 1 < next_first {
            let first_seq = segment.last_seq + 1;
            let offset = segment.bytes;
            segment.damaged.push(DamagedRun {
                first_seq,
                count: next_first - first_seq,
                offset,
                resume_offset: offset,
            });
            segment.last_seq = next_first - 1;
        }
    }
    if let Some(last) = segments.last_mut() {
        last.damaged.retain(|run| run.count > 0);
    }
}

fn open_file(path: &Path, writable: bool) -> Result<File, StoreError> {
    OpenOptions::new().read(true).write(writable).open(path).map_err(|error| StoreError::io(path, "open", error))
}

/// Cuts `path` back to `length` and syncs it.
fn cut(path: &Path, length: u64) -> Result<(), StoreError> {
    let file = open_file(path, true)?;
    file.set_len(length).map_err(|error| StoreError::io(path, "truncate", error))?;
    file.sync_all().map_err(|error| StoreError::io(path, "sync", error))
}

/// Checks a stream's files offline without changing anything: every
/// record's checksum, the sequence chain, a torn tail.
pub fn verify(dir: &Path) -> Result<Recovery, StoreError> {
    open_segments(dir, u64::MAX, false).map(|(_, recovery)| recovery)
}
