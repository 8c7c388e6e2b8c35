//! How a log stores: its fsync policy, retention and bounds.

use std::time::Duration;

/// Largest segment file by default.
pub const SEGMENT_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;
/// One sparse index entry per this many bytes by default.
pub const INDEX_INTERVAL_BYTES_DEFAULT: u64 = 16 * 1024;
/// Bytes of appends without completion that may wait for the appender.
pub const APPEND_QUEUE_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;

/// When appended records reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// `fdatasync` before an append completes; concurrent appends share one.
    Always,
    /// Complete after the `write`; `fdatasync` at most this long after it.
    Every(Duration),
    /// Complete after the `write`; never sync (the kernel writes back).
    Os,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;

    /// Parses `always`, `every:MS` or `os`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "always" => Ok(FsyncPolicy::Always),
            "os" => Ok(FsyncPolicy::Os),
            other => match other.strip_prefix("every:").map(str::parse::<u64>) {
                Some(Ok(ms)) if ms > 0 => Ok(FsyncPolicy::Every(Duration::from_millis(ms))),
                _ => Err(format!("unknown fsync policy {other:?}: expected always, every:MS (MS > 0) or os")),
            },
        }
    }
}

impl std::fmt::Display for FsyncPolicy {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsyncPolicy::Always => formatter.write_str("always"),
            FsyncPolicy::Every(interval) => write!(formatter, "every:{}", interval.as_millis()),
            FsyncPolicy::Os => formatter.write_str("os"),
        }
    }
}

/// Retention limits; 0 = no limit. Whole segments are removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Age of the newest message of a segment past which it goes.
    pub max_age_ns: u64,
    /// Bytes kept at most.
    pub max_bytes: u64,
    /// Messages kept at most.
    pub max_msgs: u64,
}

/// A log's settings.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// When records reach the disk.
    pub fsync: FsyncPolicy,
    /// What is kept.
    pub retention: Retention,
    /// Largest segment file.
    pub segment_bytes_max: u64,
    /// One sparse index entry per this many bytes.
    pub index_interval_bytes: u64,
    /// Bound of appends without completion waiting for the appender.
    pub append_queue_bytes_max: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            fsync: FsyncPolicy::Always,
            retention: Retention::default(),
            segment_bytes_max: SEGMENT_BYTES_MAX_DEFAULT,
            index_interval_bytes: INDEX_INTERVAL_BYTES_DEFAULT,
            append_queue_bytes_max: APPEND_QUEUE_BYTES_MAX_DEFAULT,
        }
    }
}

impl LogConfig {
    /// Messages after which the active segment rolls: an eighth of the
    /// count limit, so that removing whole segments keeps close to it.
    pub fn segment_msgs_max(&self) -> u64 {
        match self.retention.max_msgs {
            0 => u64::MAX,
            limit => (limit / 8).max(1),
        }
    }

    /// Bytes after which the active segment rolls.
    pub fn segment_bytes_limit(&self) -> u64 {
        match self.retention.max_bytes {
            0 => self.segment_bytes_max,
            limit => (limit / 8).max(1).min(self.segment_bytes_max),
        }
    }
}
