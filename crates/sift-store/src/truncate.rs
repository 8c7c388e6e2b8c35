//! Cutting a log's tail: every record from a sequence on goes.
//!
//! A Raft log needs it: a follower's entries that a new leader does not
//! have are overruled, and must never come back. So a cut is made durable
//! in an order that a crash at any point cannot undo half-way:
//!
//! 1. a marker file, [`MARKER_FILE`], is written atomically with the first
//!    sequence to remove;
//! 2. segment files whose first sequence is at or after it are removed,
//!    newest first, and the segment holding it is cut back (`set_len`) to
//!    the start of that record and synced;
//! 3. the directory is synced, then the marker removed.
//!
//! Opening a log that finds the marker does steps 2 and 3 again before it
//! scans anything ([`finish_pending`]): each is idempotent. Until the
//! marker is gone, no append can reuse a removed sequence, so an old record
//! with a higher sequence can never reappear behind a new one.
//!
//! Cost: the segment that holds the cut is read whole to find the record's
//! offset. Cuts are rare (a Raft leader change with a diverged follower).

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Arc;

use crate::error::StoreError;
use crate::files::{sync_dir, write_file_atomically};
use crate::record::{parse_at, Parsed};
use crate::recovery::segment_files;
use crate::scan::scan_segment;
use crate::segment::Segment;

/// The marker of a cut under way, in the log's directory: the first
/// sequence to remove, in decimal.
pub(crate) const MARKER_FILE: &str = "truncate-from";
/// The marker of a restart under way ([`restart_files`]): the sequence the
/// log resumes at, in decimal.
pub(crate) const RESTART_MARKER_FILE: &str = "restart-at";

/// Records the cut from `from_seq` as under way, durably.
pub(crate) fn mark(dir: &Path, from_seq: u64) -> Result<(), StoreError> {
    write_file_atomically(&dir.join(MARKER_FILE), from_seq.to_string().as_bytes())
}

/// Records a restart at `next_seq` as under way, durably.
pub(crate) fn mark_restart(dir: &Path, next_seq: u64) -> Result<(), StoreError> {
    write_file_atomically(&dir.join(RESTART_MARKER_FILE), next_seq.to_string().as_bytes())
}

/// Finishes a cut or a restart a crash interrupted, if a marker says one
/// was under way.
pub(crate) fn finish_pending(dir: &Path) -> Result<(), StoreError> {
    if let Some(from_seq) = read_marker(dir, MARKER_FILE)? {
        cut_files(dir, from_seq)?;
        unmark(dir, MARKER_FILE)?;
    }
    if let Some(next_seq) = read_marker(dir, RESTART_MARKER_FILE)? {
        restart_files(dir, next_seq)?;
        unmark(dir, RESTART_MARKER_FILE)?;
    }
    Ok(())
}

/// The sequence a marker holds, if the marker is there.
fn read_marker(dir: &Path, name: &str) -> Result<Option<u64>, StoreError> {
    let marker = dir.join(name);
    let text = match std::fs::read_to_string(&marker) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(StoreError::io(&marker, "read", error)),
    };
    let seq = text.trim().parse().map_err(|_| StoreError::Corrupt {
        path: marker.clone(),
        offset: 0,
        detail: format!("a marker that is not a sequence: {text:?}"),
    })?;
    Ok(Some(seq))
}

/// Removes the marker `name` once what it marked is durable.
pub(crate) fn unmark(dir: &Path, name: &str) -> Result<(), StoreError> {
    let marker = dir.join(name);
    std::fs::remove_file(&marker).map_err(|error| StoreError::io(&marker, "remove", error))?;
    sync_dir(dir)
}

/// A restart's files: every segment removed, newest first, and one empty
/// segment named `next_seq` left (made first, so that the log always has
/// one). Running it again changes nothing.
pub(crate) fn restart_files(dir: &Path, next_seq: u64) -> Result<(), StoreError> {
    let fresh = dir.join(crate::segment::segment_name(next_seq));
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(&fresh)
        .map_err(|error| StoreError::io(&fresh, "create", error))?;
    sync_dir(dir)?;
    let files = segment_files(dir, false)?;
    for (first_seq, path) in files.iter().rev() {
        if *first_seq != next_seq {
            std::fs::remove_file(path).map_err(|error| StoreError::io(path, "remove", error))?;
        }
    }
    let file = OpenOptions::new().write(true).open(&fresh).map_err(|error| StoreError::io(&fresh, "open", error))?;
    file.set_len(0).map_err(|error| StoreError::io(&fresh, "truncate", error))?;
    file.sync_all().map_err(|error| StoreError::io(&fresh, "sync", error))?;
    sync_dir(dir)
}

/// Step 2 and the directory sync: the segment files of `dir` then hold
/// nothing from `from_seq` on. Running it again changes nothing.
pub(crate) fn cut_files(dir: &Path, from_seq: u64) -> Result<(), StoreError> {
    let files = segment_files(dir, false)?;
    // The oldest segment stays even when the cut takes all it holds: its
    // name keeps where the log's sequences resume.
    let keep_oldest = files.first().map(|(first_seq, _)| *first_seq);
    for (first_seq, path) in files.iter().rev() {
        if *first_seq >= from_seq && Some(*first_seq) != keep_oldest {
            std::fs::remove_file(path).map_err(|error| StoreError::io(path, "remove", error))?;
        }
    }
    let holding = files.iter().rev().find(|(first_seq, _)| *first_seq < from_seq || Some(*first_seq) == keep_oldest);
    if let Some((first_seq, path)) = holding {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|error| StoreError::io(path, "open", error))?;
        let bytes = std::fs::read(path).map_err(|error| StoreError::io(path, "read", error))?;
        let scanned = file.try_clone().map_err(|error| StoreError::io(path, "open", error))?;
        let mut segment = Segment::empty(*first_seq, path.clone(), Arc::new(scanned));
        let cut_at = offset_of(&bytes, &mut segment, from_seq);
        if cut_at < bytes.len() as u64 {
            file.set_len(cut_at).map_err(|error| StoreError::io(path, "truncate", error))?;
            file.sync_all().map_err(|error| StoreError::io(path, "sync", error))?;
        }
    }
    sync_dir(dir)
}

/// Where the record `from_seq` (or the first after it) starts in the
/// bytes of `segment` (empty, scanned here): the length of what stays.
/// Damage that hides `from_seq` is cut with it.
fn offset_of(bytes: &[u8], segment: &mut Segment, from_seq: u64) -> u64 {
    let outcome = scan_segment(bytes, segment, u64::MAX);
    let end = outcome.tail_at.unwrap_or(bytes.len() as u64);
    if let Some(run) = segment.damaged.iter().find(|run| run.holds(from_seq)) {
        return run.offset;
    }
    let mut offset = 0usize;
    while (offset as u64) < end {
        match parse_at(bytes, offset) {
            Parsed::Whole(found) if found.seq >= from_seq => return offset as u64,
            Parsed::Whole(found) => offset += found.len(),
            _ => {
                let skip =
                    segment.damaged.iter().find(|run| run.offset == offset as u64 && run.resume_offset > run.offset);
                match skip {
                    Some(run) => offset = run.resume_offset as usize,
                    None => return offset as u64,
                }
            }
        }
    }
    end
}
