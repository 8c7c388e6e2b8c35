//! The Sift message log.
//!
//! A stream is a directory of segment files (`{first_seq:020}.seg`), each a
//! run of checksummed records appended in sequence order and read back
//! through the page cache (`docs/STORAGE.md` has the format). One appender
//! thread per log writes every queued append with one `write`, syncs
//! according to the log's [`FsyncPolicy`] (group commit under `always`),
//! and only then makes the records visible and completes them. Opening a
//! log scans it whole: a torn tail is cut back to the last whole record, a
//! damaged record is reported with its place and later returned as a gap,
//! never served. Retention removes whole old segments.
//!
//! The crate is runtime-free: std threads and files, no async.

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

pub use appender::{RETENTION_CHECK_INTERVAL, WRITE_BATCH_BYTES_MAX};
pub use config::{
    FsyncPolicy, LogConfig, Retention, APPEND_QUEUE_BYTES_MAX_DEFAULT, INDEX_INTERVAL_BYTES_DEFAULT,
    SEGMENT_BYTES_MAX_DEFAULT,
};
pub use error::StoreError;
pub use files::write_file_atomically;
pub use log::{AppendHook, Completion, Log, LogStats};
pub use position::{Position, PositionLog, POSITION_ACKED_ABOVE_MAX, POSITION_LOG_BYTES_MAX};
pub use reader::{Gap, GapReason, LogReader, ReadOutcome, Record, READ_CHUNK_BYTES};
pub use record::{RECORD_BODY_BYTES_MAX, RECORD_HEADER_BYTES};
pub use recovery::{verify, Damage, Recovery, TornTail};
pub use retention::RetentionOutcome;

/// Nanoseconds since the Unix epoch, or 0 if the clock is before it.
pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
}
