//! The Sift message log.
//!
//! A stream is a directory of segment files (`{first_seq:020}.seg`), each a
//! run of checksummed records appended in sequence order and read back
//! through the page cache. `docs/STORAGE.md` has the format byte by byte;
//! in short, every record is, little-endian:
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `magic` | `u32` | the bytes `SFTR` ([`RECORD_MAGIC`]) |
//! | `body_len` | `u32` | bytes of body, at most [`RECORD_BODY_BYTES_MAX`] |
//! | `crc32` | `u32` | CRC-32 of everything after it: `seq`, `timestamp_ns`, body |
//! | `seq` | `u64` | stream sequence, consecutive, first is 1 |
//! | `timestamp_ns` | `u64` | the message's timestamp |
//! | body | `body_len` bytes | opaque |
//!
//! One appender thread per log writes every queued append with one
//! `write`, syncs according to the log's [`FsyncPolicy`] (group commit
//! under `always`), and only then makes the records visible and completes
//! them. Opening a log scans it whole: a torn tail of the last segment is
//! cut back to the last whole record; a damaged record anywhere else is
//! reported with its place, kept, and later returned to readers as a
//! [`Gap`], never served. Retention removes whole old segments. A
//! durable subscription's [`PositionLog`] and [`write_file_atomically`]
//! (for definition files) complete the crate.
//!
//! What is judged is what survives `kill -9` (everything completed, under
//! every policy) and power loss (what each policy promises, see
//! [`FsyncPolicy`]). The crate is runtime-free: std threads and files, no
//! async. One process owns a log directory at a time; nothing here stops a
//! second from opening it, so the broker must not.

mod active;
mod appender;
mod config;
mod error;
mod files;
mod log;
mod position;
mod reader;
mod record;
mod recovery;
mod retention;
mod scan;
mod segment;
mod stats;
mod truncate;

pub use appender::{RETENTION_CHECK_INTERVAL, WRITE_BATCH_BYTES_MAX};
pub use config::{
    FsyncPolicy, LogConfig, Retention, APPEND_QUEUE_BYTES_MAX_DEFAULT, INDEX_INTERVAL_BYTES_DEFAULT,
    SEGMENT_BYTES_MAX_DEFAULT,
};
pub use error::StoreError;
pub use files::write_file_atomically;
pub use log::{AppendHook, Completion, Log};
pub use position::{Position, PositionLog, POSITION_ACKED_ABOVE_MAX, POSITION_LOG_BYTES_MAX};
pub use reader::{Gap, GapReason, LogReader, ReadOutcome, Record, READ_CHUNK_BYTES};
pub use record::{RECORD_BODY_BYTES_MAX, RECORD_HEADER_BYTES, RECORD_MAGIC};
pub use recovery::{verify, Damage, Recovery, TornTail, VerifyReport};
pub use retention::RetentionOutcome;
pub use stats::LogStats;
