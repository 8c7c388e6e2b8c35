//! How a log stores: its fsync policy, retention and bounds.
//!
//! Every bound has a named default here, so that the broker's configuration
//! and the documentation name the same numbers.

use std::time::Duration;

use crate::error::StoreError;
use crate::record::RECORD_HEADER_BYTES;

/// Largest segment file by default.
pub const SEGMENT_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;
/// One sparse index entry per this many bytes by default.
pub const INDEX_INTERVAL_BYTES_DEFAULT: u64 = 16 * 1024;
/// Bytes of appends without completion that may wait for the appender.
pub const APPEND_QUEUE_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;

/// When appended records reach the disk, and so what a completed append
/// promises. Every policy survives `kill -9` of the process once an append
/// completed (the `write` returned, the page cache holds the data); they
/// differ in what survives power loss or an OS crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// `fdatasync` before an append completes; appends queued together
    /// share one (group commit). A completed append survives power loss.
    Always,
    /// Complete after the `write`; `fdatasync` at most this long after
    /// unsynced data was written. Power loss may lose about this much of
    /// completed appends.
    Every(Duration),
    /// Complete after the `write`; never sync while running (the kernel
    /// writes back on its own; `close` still syncs). Power loss may lose
    /// any recent append.
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

/// Retention limits; 0 = no limit. Whole segments are removed, so a limit
/// holds to within one segment (an eighth of it, see
/// [`LogConfig::segment_msgs_max`] and [`LogConfig::segment_bytes_limit`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// A segment goes once its newest message is older than this.
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
    /// Bound of the body bytes waiting for the appender thread, past which
    /// appends without a completion are refused.
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
    /// Checks the bounds that must be positive: a segment must hold at
    /// least one record header, and the queue at least one byte.
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.segment_bytes_max < RECORD_HEADER_BYTES as u64 {
            let limit = self.segment_bytes_max;
            return Err(StoreError::Invalid(format!("segment_bytes_max = {limit} is below one record header")));
        }
        if self.append_queue_bytes_max == 0 {
            return Err(StoreError::Invalid("append_queue_bytes_max must be positive".into()));
        }
        if let FsyncPolicy::Every(interval) = self.fsync {
            if interval.is_zero() {
                return Err(StoreError::Invalid("fsync every:MS needs MS > 0".into()));
            }
        }
        Ok(())
    }

    /// Messages after which the active segment rolls: an eighth of the
    /// count limit, so that removing whole segments keeps within an eighth
    /// of it.
    pub fn segment_msgs_max(&self) -> u64 {
        match self.retention.max_msgs {
            0 => u64::MAX,
            limit => (limit / 8).max(1),
        }
    }

    /// Bytes a segment may reach before the next record goes to a new
    /// one: `segment_bytes_max`, or an eighth of the byte limit when that
    /// is smaller (but at least one record header).
    pub fn segment_bytes_limit(&self) -> u64 {
        match self.retention.max_bytes {
            0 => self.segment_bytes_max,
            limit => (limit / 8).max(RECORD_HEADER_BYTES as u64).min(self.segment_bytes_max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_the_same() {
        for text in ["always", "every:10", "os"] {
            let policy: FsyncPolicy = text.parse().expect("parses");
            assert_eq!(policy.to_string(), text);
        }
        assert_eq!("every:250".parse::<FsyncPolicy>(), Ok(FsyncPolicy::Every(Duration::from_millis(250))));
        for bad in ["", "every:", "every:0", "every:x", "sometimes"] {
            assert!(bad.parse::<FsyncPolicy>().is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn retention_limits_make_segments_smaller() {
        let config = LogConfig::default();
        assert_eq!((config.segment_msgs_max(), config.segment_bytes_limit()), (u64::MAX, SEGMENT_BYTES_MAX_DEFAULT));
        let limited = LogConfig {
            retention: Retention { max_msgs: 100, max_bytes: 80_000, max_age_ns: 0 },
            ..LogConfig::default()
        };
        assert_eq!((limited.segment_msgs_max(), limited.segment_bytes_limit()), (12, 10_000));
        let tiny =
            LogConfig { retention: Retention { max_msgs: 3, max_bytes: 8, max_age_ns: 0 }, ..LogConfig::default() };
        assert_eq!((tiny.segment_msgs_max(), tiny.segment_bytes_limit()), (1, RECORD_HEADER_BYTES as u64));
        assert!(LogConfig { segment_bytes_max: 1, ..LogConfig::default() }.validate().is_err());
        assert!(LogConfig::default().validate().is_ok());
    }
}
