//! What the MQTT front-end keeps across restarts: retained messages and
//! persistent sessions (client id, expiry, subscriptions), in one
//! append-only journal file, `DATA_DIR/mqtt/state.journal`.
//!
//! Each change is one record, appended as it happens:
//!
//! ```text
//! body_len u32 | crc32 u32 | kind u8 | key_len u16 | key | value
//! ```
//!
//! little-endian, the checksum over everything after itself. A record is
//! trusted only whole: on open, the journal is read up to the first record
//! that is short (a write torn by a crash) or fails its checksum, the file
//! is cut back there, and the records before it are replayed, the last
//! record of each key winning. The live state is then written to a new
//! file, synced, and renamed over the old one, so the journal starts each
//! run compact; it is compacted the same way whenever the bytes of
//! superseded records pass `mqtt.journal_compact_bytes`.
//!
//! Appends reach the operating system at once (they survive `kill -9`);
//! with `mqtt.journal_fsync` each is also synced (they survive a power
//! cut too, at the cost of a sync per retained message or session change).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;

/// Bytes before a record's kind.
const RECORD_HEADER_BYTES: usize = 8;
/// Largest record body accepted on reading; a header claiming more is damage.
pub const RECORD_BODY_BYTES_MAX: usize = 256 * 1024 * 1024;
/// The journal's file name in its directory.
const FILE_NAME: &str = "state.journal";

/// What a record says about its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The retained message of a topic (the value: an encoded message).
    Retained = 1,
    /// The retained message of a topic is gone.
    RetainedRemoved = 2,
    /// A persistent session (the value: its JSON description).
    Session = 3,
    /// A session ended.
    SessionRemoved = 4,
}

impl Kind {
    fn of(code: u8) -> Option<Kind> {
        match code {
            1 => Some(Kind::Retained),
            2 => Some(Kind::RetainedRemoved),
            3 => Some(Kind::Session),
            4 => Some(Kind::SessionRemoved),
            _ => None,
        }
    }

    /// Whether the record ends its key.
    fn is_removal(self) -> bool {
        matches!(self, Kind::RetainedRemoved | Kind::SessionRemoved)
    }

    /// The kind of the value its key holds (`Retained` or `Session`): a
    /// key is one retained topic or one session, set and removed.
    fn family(self) -> Kind {
        match self {
            Kind::Retained | Kind::RetainedRemoved => Kind::Retained,
            Kind::Session | Kind::SessionRemoved => Kind::Session,
        }
    }
}

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A file operation failed.
    #[error("MQTT journal {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A key or value too large for a record.
    #[error("MQTT journal: a record of {bytes} bytes is over the limit of {RECORD_BODY_BYTES_MAX}")]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
}

/// The live state read from a journal: the value of every key of the
/// non-removal kinds, by kind and key.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Retained messages (encoded) by MQTT topic.
    pub retained: HashMap<String, Bytes>,
    /// Sessions (JSON) by client id.
    pub sessions: HashMap<String, Bytes>,
    /// Bytes cut from the end: a torn or damaged tail.
    pub bytes_discarded: u64,
}

/// An open journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    fsync: bool,
    /// Bytes of the live records (the last one of each live key).
    live_bytes: HashMap<(Kind, String), u64>,
    live_total: u64,
    /// Bytes in the file.
    file_bytes: u64,
    compact_bytes: u64,
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io { path: path.to_path_buf(), source }
}

/// Appends one record to `buf`.
fn encode_record(buf: &mut Vec<u8>, kind: Kind, key: &str, value: &[u8]) -> Result<(), JournalError> {
    let key_len = u16::try_from(key.len()).map_err(|_| JournalError::TooLarge { bytes: key.len() })?;
    let body_len = 1 + 2 + key.len() + value.len();
    if body_len > RECORD_BODY_BYTES_MAX {
        return Err(JournalError::TooLarge { bytes: body_len });
    }
    let start = buf.len();
    buf.extend_from_slice(&(body_len as u32).to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.push(kind as u8);
    buf.extend_from_slice(&key_len.to_le_bytes());
    buf.extend_from_slice(key.as_bytes());
    buf.extend_from_slice(value);
    let checksum = crc32fast::hash(&buf[start + RECORD_HEADER_BYTES..]);
    buf[start + 4..start + 8].copy_from_slice(&checksum.to_le_bytes());
    Ok(())
}

/// One record read back: kind, key, value, and its length on disk.
struct RecordView<'a> {
    kind: Kind,
    key: &'a str,
    value: &'a [u8],
    bytes: usize,
}

/// The record at the start of `bytes`, or `None` when it is short,
/// damaged or unknown: the end of what can be trusted.
fn decode_record(bytes: &[u8]) -> Option<RecordView<'_>> {
    let body_len = u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?) as usize;
    let checksum = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?);
    if !(3..=RECORD_BODY_BYTES_MAX).contains(&body_len) {
        return None;
    }
    let body = bytes.get(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + body_len)?;
    if crc32fast::hash(body) != checksum {
        return None;
    }
    let kind = Kind::of(body[0])?;
    let key_len = u16::from_le_bytes([body[1], body[2]]) as usize;
    let key = std::str::from_utf8(body.get(3..3 + key_len)?).ok()?;
    Some(RecordView { kind, key, value: &body[3 + key_len..], bytes: RECORD_HEADER_BYTES + body_len })
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, recovers its live state,
    /// and rewrites the file compact.
    pub fn open(dir: &Path, fsync: bool, compact_bytes: u64) -> Result<(Journal, Recovered), JournalError> {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        let path = dir.join(FILE_NAME);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(JournalError::Io { path, source }),
        };
        let recovered = replay(&bytes);
        if recovered.bytes_discarded > 0 {
            tracing::warn!(path = %path.display(), "MQTT journal: {} bytes after the last whole record discarded", recovered.bytes_discarded);
        }
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(io_error(&path))?;
        let mut journal =
            Journal { path, file, fsync, live_bytes: HashMap::new(), live_total: 0, file_bytes: 0, compact_bytes };
        let live = live_records(&recovered);
        journal.rewrite(&live)?;
        Ok((journal, recovered))
    }

    /// Appends a record: `value` for `key`, or with a removal kind the
    /// key's end.
    pub fn append(&mut self, kind: Kind, key: &str, value: &[u8]) -> Result<(), JournalError> {
        let mut buf = Vec::with_capacity(RECORD_HEADER_BYTES + 3 + key.len() + value.len());
        encode_record(&mut buf, kind, key, value)?;
        self.file.write_all(&buf).map_err(io_error(&self.path))?;
        if self.fsync {
            self.file.sync_data().map_err(io_error(&self.path))?;
        }
        self.file_bytes += buf.len() as u64;
        let superseded = match kind.is_removal() {
            true => self.live_bytes.remove(&(kind.family(), key.to_string())),
            false => self.live_bytes.insert((kind.family(), key.to_string()), buf.len() as u64),
        };
        self.live_total -= superseded.unwrap_or(0);
        if !kind.is_removal() {
            self.live_total += buf.len() as u64;
        }
        debug_assert!(self.live_total <= self.file_bytes, "live records are in the file");
        if self.file_bytes - self.live_total > self.compact_bytes {
            self.compact()?;
        }
        Ok(())
    }

    /// Bytes in the file now.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Rewrites the file with only its live records.
    fn compact(&mut self) -> Result<(), JournalError> {
        let bytes = std::fs::read(&self.path).map_err(io_error(&self.path))?;
        self.rewrite(&live_records(&replay(&bytes)))
    }

    /// Writes `records` to a new file, syncs it and renames it over the
    /// journal: a crash leaves either the old file or the new one.
    fn rewrite(&mut self, records: &[(Kind, String, Bytes)]) -> Result<(), JournalError> {
        let temporary = self.path.with_extension("journal.new");
        let mut buf = Vec::new();
        self.live_bytes.clear();
        for (kind, key, value) in records {
            let before = buf.len();
            encode_record(&mut buf, *kind, key, value)?;
            self.live_bytes.insert((kind.family(), key.clone()), (buf.len() - before) as u64);
        }
        let mut file = File::create(&temporary).map_err(io_error(&temporary))?;
        file.write_all(&buf).and_then(|()| file.sync_all()).map_err(io_error(&temporary))?;
        std::fs::rename(&temporary, &self.path).map_err(io_error(&self.path))?;
        if let Some(dir) = self.path.parent() {
            File::open(dir).and_then(|dir| dir.sync_all()).map_err(io_error(dir))?;
        }
        self.file = OpenOptions::new().append(true).open(&self.path).map_err(io_error(&self.path))?;
        self.file_bytes = buf.len() as u64;
        self.live_total = self.file_bytes;
        Ok(())
    }
}

/// The live state of a journal's bytes, up to the first record that
/// cannot be trusted.
fn replay(bytes: &[u8]) -> Recovered {
    let mut recovered = Recovered::default();
    let mut offset = 0;
    while let Some(record) = decode_record(&bytes[offset..]) {
        let map = match record.kind.family() {
            Kind::Retained => &mut recovered.retained,
            _ => &mut recovered.sessions,
        };
        match record.kind.is_removal() {
            true => map.remove(record.key),
            false => map.insert(record.key.to_string(), Bytes::copy_from_slice(record.value)),
        };
        offset += record.bytes;
    }
    recovered.bytes_discarded = (bytes.len() - offset) as u64;
    recovered
}

fn live_records(recovered: &Recovered) -> Vec<(Kind, String, Bytes)> {
    let retained = recovered.retained.iter().map(|(key, value)| (Kind::Retained, key.clone(), value.clone()));
    let sessions = recovered.sessions.iter().map(|(key, value)| (Kind::Session, key.clone(), value.clone()));
    retained.chain(sessions).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sift-mqtt-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_last_record_of_each_key_wins_across_reopens() {
        let dir = scratch("reopen");
        let (mut journal, recovered) = Journal::open(&dir, false, 1 << 20).expect("opens");
        assert!(recovered.retained.is_empty() && recovered.sessions.is_empty());
        journal.append(Kind::Retained, "a/b", b"one").expect("append");
        journal.append(Kind::Retained, "a/b", b"two").expect("append");
        journal.append(Kind::Retained, "a/c", b"three").expect("append");
        journal.append(Kind::RetainedRemoved, "a/c", b"").expect("append");
        journal.append(Kind::Session, "client-1", b"{}").expect("append");
        drop(journal);
        let (_journal, recovered) = Journal::open(&dir, false, 1 << 20).expect("reopens");
        assert_eq!(recovered.retained.len(), 1);
        assert_eq!(recovered.retained["a/b"].as_ref(), b"two");
        assert_eq!(recovered.sessions["client-1"].as_ref(), b"{}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_torn_or_damaged_tail_is_cut_and_what_precedes_it_kept() {
        let dir = scratch("torn");
        let (mut journal, _) = Journal::open(&dir, true, 1 << 20).expect("opens");
        journal.append(Kind::Retained, "kept", b"whole").expect("append");
        journal.append(Kind::Retained, "torn", b"half written").expect("append");
        let whole_bytes = journal.file_bytes();
        drop(journal);
        let path = dir.join(FILE_NAME);
        let bytes = std::fs::read(&path).expect("read");
        let first_len = RECORD_HEADER_BYTES + 3 + 4 + 5;
        // Every cut inside the second record, and a flipped bit in it.
        for cut in first_len..whole_bytes as usize {
            std::fs::write(&path, &bytes[..cut]).expect("write");
            let (_journal, recovered) = Journal::open(&dir, false, 1 << 20).expect("reopens");
            assert_eq!(recovered.retained.len(), 1, "cut at {cut}");
            assert_eq!(recovered.bytes_discarded, (cut - first_len) as u64);
        }
        let mut flipped = bytes.clone();
        flipped[first_len + RECORD_HEADER_BYTES + 4] ^= 0x10;
        std::fs::write(&path, &flipped).expect("write");
        let (_journal, recovered) = Journal::open(&dir, false, 1 << 20).expect("reopens");
        assert_eq!(recovered.retained.keys().collect::<Vec<_>>(), ["kept"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn superseded_records_are_compacted_away() {
        let dir = scratch("compact");
        let (mut journal, _) = Journal::open(&dir, false, 4_096).expect("opens");
        for round in 0..1_000u32 {
            journal.append(Kind::Retained, "hot/topic", &round.to_le_bytes()).expect("append");
            assert!(journal.file_bytes() <= 4_096 + 2 * 64, "bounded: {}", journal.file_bytes());
        }
        drop(journal);
        let (_journal, recovered) = Journal::open(&dir, false, 4_096).expect("reopens");
        assert_eq!(recovered.retained["hot/topic"].as_ref(), 999u32.to_le_bytes());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
