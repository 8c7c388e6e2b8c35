//! A durable subscription's position log: one checksummed record per
//! change, the last whole one wins. Appending is one small `write`, which a
//! killed process keeps; `sync` makes it survive power loss too.
//!
//! Record, little-endian: `magic u32 | body_len u32 | crc32 u32 | body`,
//! body = `ack_floor u64 | range count u32 | (first u64, last u64)...`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::BufMut;

use crate::error::StoreError;

/// Marks a position record ("SFTP").
const POSITION_MAGIC: u32 = u32::from_le_bytes(*b"SFTP");
/// The log is rewritten with only its last record past this size.
pub const POSITION_LOG_BYTES_MAX: u64 = 64 * 1024;
/// Most done ranges above the floor a position may hold.
pub const POSITION_ACKED_ABOVE_MAX: usize = 65_536;

/// Where a durable subscription stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Position {
    /// Every sequence at or below it is done.
    pub ack_floor: u64,
    /// Done ranges above the floor, inclusive, ascending.
    pub done_above: Vec<(u64, u64)>,
}

/// An open position log.
#[derive(Debug)]
pub struct PositionLog {
    path: PathBuf,
    file: File,
    length: u64,
}

fn encode(position: &Position) -> Result<Vec<u8>, StoreError> {
    if position.done_above.len() > POSITION_ACKED_ABOVE_MAX {
        let count = position.done_above.len();
        return Err(StoreError::Invalid(format!("{count} done ranges exceed POSITION_ACKED_ABOVE_MAX")));
    }
    let mut body = Vec::with_capacity(12 + position.done_above.len() * 16);
    body.put_u64_le(position.ack_floor);
    body.put_u32_le(position.done_above.len() as u32);
    for (first, last) in &position.done_above {
        body.put_u64_le(*first);
        body.put_u64_le(*last);
    }
    let mut record = Vec::with_capacity(12 + body.len());
    record.put_u32_le(POSITION_MAGIC);
    record.put_u32_le(body.len() as u32);
    record.put_u32_le(crc32fast::hash(&body));
    record.extend_from_slice(&body);
    Ok(record)
}

/// The last whole position in `bytes`, and where the whole records end.
fn last_position(bytes: &[u8]) -> (Position, usize) {
    let mut position = Position::default();
    let mut at = 0;
    while bytes.len() >= at + 12 {
        let word = |offset: usize| {
            u32::from_le_bytes([bytes[offset], bytes[offset + 1], bytes[offset + 2], bytes[offset + 3]])
        };
        let length = word(at + 4) as usize;
        if word(at) != POSITION_MAGIC || bytes.len() < at + 12 + length || length < 12 {
            break;
        }
        let body = &bytes[at + 12..at + 12 + length];
        if crc32fast::hash(body) != word(at + 8) {
            break;
        }
        let long = |offset: usize| u64::from_le_bytes(body[offset..offset + 8].try_into().unwrap_or([0; 8]));
        let count = u32::from_le_bytes(body[8..12].try_into().unwrap_or([0; 4])) as usize;
        if body.len() != 12 + count * 16 {
            break;
        }
        position = Position {
            ack_floor: long(0),
            done_above: (0..count).map(|index| (long(12 + index * 16), long(20 + index * 16))).collect(),
        };
        at += 12 + length;
    }
    (position, at)
}

impl PositionLog {
    /// Opens (or creates) the log at `path` and returns its last position;
    /// a torn or damaged tail is cut off.
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
        }
        Ok((PositionLog { path: path.to_path_buf(), file, length: whole as u64 }, position))
    }

    /// Appends `position`; with `sync`, waits for the disk.
    pub fn write(&mut self, position: &Position, sync: bool) -> Result<(), StoreError> {
        let record = encode(position)?;
        if self.length + record.len() as u64 > POSITION_LOG_BYTES_MAX {
            return self.compact(&record);
        }
        self.file.write_all(&record).map_err(|error| StoreError::io(&self.path, "write", error))?;
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
