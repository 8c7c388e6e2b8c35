//! A durable subscription's position log: one checksummed record per
//! change, the last whole one wins.
//!
//! Appending is one small `write`, which a killed process keeps; `sync`
//! (or [`PositionLog::sync`]) makes it survive power loss too. A torn or
//! damaged tail (a crash during a write) is cut at open, so the previous
//! position stands: it is older, and resuming from an older position only
//! delivers again what was delivered, never skips. A failed write is cut
//! back at once for the same reason: a later record must never sit behind
//! a broken one, where open would not find it. Past
//! [`POSITION_LOG_BYTES_MAX`] the file is rewritten atomically with only
//! its last record.
//!
//! Record, little-endian: `magic u32 | body_len u32 | crc32 u32 | body`,
//! body = `ack_floor u64 | range_count u32 | (first u64, last u64) * range_count`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::BufMut;

use crate::error::StoreError;

/// Marks a position record: the bytes `SFTP`.
const POSITION_MAGIC: u32 = u32::from_le_bytes(*b"SFTP");
/// Bytes before a position record's body: magic, length, checksum.
const POSITION_HEADER_BYTES: usize = 12;
/// Bytes of a body without ranges: the floor and the range count.
const POSITION_BODY_FIXED_BYTES: usize = 12;
/// Bytes of one range.
const RANGE_BYTES: usize = 16;
/// The log is rewritten with only its last record past this size.
pub const POSITION_LOG_BYTES_MAX: u64 = 64 * 1024;
/// Most done ranges above the floor a position may hold.
pub const POSITION_ACKED_ABOVE_MAX: usize = 65_536;

/// Where a durable subscription stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Position {
    /// Every sequence at or below it is done.
    pub ack_floor: u64,
    /// Done sequences above the floor, as inclusive ranges `(first, last)`,
    /// ascending and disjoint. At most [`POSITION_ACKED_ABOVE_MAX`].
    pub done_above: Vec<(u64, u64)>,
}

impl Position {
    /// Checks the bound on the ranges and that each is a range. Their
    /// order is the caller's (the broker's range set keeps them ascending
    /// and disjoint; a reader of the position clamps them to the floor), so
    /// it is stored as given.
    fn validate(&self) -> Result<(), StoreError> {
        let count = self.done_above.len();
        if count > POSITION_ACKED_ABOVE_MAX {
            return Err(StoreError::Invalid(format!("{count} done ranges exceed POSITION_ACKED_ABOVE_MAX")));
        }
        if let Some((first, last)) = self.done_above.iter().find(|(first, last)| last < first) {
            return Err(StoreError::Invalid(format!("done range {first}..={last} ends before it starts")));
        }
        Ok(())
    }
}

/// An open position log.
#[derive(Debug)]
pub struct PositionLog {
    path: PathBuf,
    file: File,
    /// Bytes of whole records: where the next one goes.
    length: u64,
}

fn encode(position: &Position) -> Result<Vec<u8>, StoreError> {
    position.validate()?;
    let count = position.done_above.len();
    let mut body = Vec::with_capacity(POSITION_BODY_FIXED_BYTES + count * RANGE_BYTES);
    body.put_u64_le(position.ack_floor);
    body.put_u32_le(count as u32);
    for (first, last) in &position.done_above {
        body.put_u64_le(*first);
        body.put_u64_le(*last);
    }
    let mut record = Vec::with_capacity(POSITION_HEADER_BYTES + body.len());
    record.put_u32_le(POSITION_MAGIC);
    record.put_u32_le(body.len() as u32);
    record.put_u32_le(crc32fast::hash(&body));
    record.extend_from_slice(&body);
    Ok(record)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// The position in a whole record's body, if the body is well-formed.
fn decode_body(body: &[u8]) -> Option<Position> {
    if body.len() < POSITION_BODY_FIXED_BYTES {
        return None;
    }
    let count = u32_at(body, 8) as usize;
    if count > POSITION_ACKED_ABOVE_MAX || body.len() != POSITION_BODY_FIXED_BYTES + count * RANGE_BYTES {
        return None;
    }
    let range = |index: usize| {
        let at = POSITION_BODY_FIXED_BYTES + index * RANGE_BYTES;
        (u64_at(body, at), u64_at(body, at + 8))
    };
    Some(Position { ack_floor: u64_at(body, 0), done_above: (0..count).map(range).collect() })
}

/// The last whole position in `bytes`, and where the whole records end.
fn last_position(bytes: &[u8]) -> (Position, usize) {
    let mut position = Position::default();
    let mut at = 0;
    while bytes.len() >= at + POSITION_HEADER_BYTES && u32_at(bytes, at) == POSITION_MAGIC {
        let end = at + POSITION_HEADER_BYTES + u32_at(bytes, at + 4) as usize;
        let Some(body) = bytes.get(at + POSITION_HEADER_BYTES..end) else { break };
        if crc32fast::hash(body) != u32_at(bytes, at + 8) {
            break;
        }
        let Some(decoded) = decode_body(body) else { break };
        position = decoded;
        at = end;
    }
    (position, at)
}

impl PositionLog {
    /// Opens (or creates) the log at `path` and returns its last whole
    /// position (the default when there is none); a torn or damaged tail
    /// is cut off.
    pub fn open(path: &Path) -> Result<(PositionLog, Position), StoreError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(StoreError::io(path, "read", error)),
        };
        let (position, whole) = last_position(&bytes);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|error| StoreError::io(path, "open", error))?;
        if whole < bytes.len() {
            file.set_len(whole as u64).map_err(|error| StoreError::io(path, "truncate", error))?;
            file.sync_all().map_err(|error| StoreError::io(path, "sync", error))?;
        }
        Ok((PositionLog { path: path.to_path_buf(), file, length: whole as u64 }, position))
    }

    /// Appends `position`; with `sync`, waits for the disk. Past
    /// [`POSITION_LOG_BYTES_MAX`] the log is compacted instead (which always syncs).
    pub fn write(&mut self, position: &Position, sync: bool) -> Result<(), StoreError> {
        let record = encode(position)?;
        if self.length + record.len() as u64 > POSITION_LOG_BYTES_MAX {
            return self.compact(&record);
        }
        if let Err(error) = self.file.write_all(&record) {
            // A partial record must not hide the ones after it.
            let _ = self.file.set_len(self.length);
            return Err(StoreError::io(&self.path, "write", error));
        }
        self.length += record.len() as u64;
        if sync {
            self.sync()?;
        }
        Ok(())
    }

    /// Syncs what was written.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(|error| StoreError::io(&self.path, "sync", error))
    }

    /// Replaces the log with one record, atomically.
    fn compact(&mut self, record: &[u8]) -> Result<(), StoreError> {
        crate::files::write_file_atomically(&self.path, record)?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|error| StoreError::io(&self.path, "open", error))?;
        self.length = record.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_and_bad_ones_are_refused() {
        let position = Position { ack_floor: 9, done_above: vec![(11, 12), (20, 20)] };
        let record = encode(&position).expect("valid");
        assert_eq!(last_position(&record), (position, record.len()));
        assert!(encode(&Position { ack_floor: 9, done_above: vec![(12, 11)] }).is_err());
        let too_many = Position {
            ack_floor: 0,
            done_above: (1..=POSITION_ACKED_ABOVE_MAX as u64 + 1).map(|seq| (seq * 2, seq * 2)).collect(),
        };
        assert!(encode(&too_many).is_err());
    }

    #[test]
    fn a_damaged_record_ends_the_log_there() {
        let first = encode(&Position { ack_floor: 1, done_above: Vec::new() }).expect("valid");
        let mut bytes = first.clone();
        bytes.extend(encode(&Position { ack_floor: 2, done_above: Vec::new() }).expect("valid"));
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(last_position(&bytes), (Position { ack_floor: 1, done_above: Vec::new() }, first.len()));
    }
}
