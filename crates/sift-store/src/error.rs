//! Why a store operation failed.
//!
//! Every variant says what was being done, to which file, and why, so that
//! one log line is enough to act on. A full disk is its own variant because
//! the broker answers it differently (`storage_full`: retry when space
//! returns) from every other I/O failure (`storage_error`).

use std::path::{Path, PathBuf};

/// `ENOSPC` on Linux: no space left on the device.
const ERRNO_NO_SPACE: i32 = 28;
/// `EDQUOT` on Linux: the user's disk quota is exhausted.
const ERRNO_QUOTA_EXCEEDED: i32 = 122;

/// A store error: what failed, where, and why.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The disk (or the quota) is full; retry when space returns.
    #[error("storage_full: no space left to {op} {path}")]
    Full {
        /// The file being written.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
    },
    /// A file operation failed for another reason.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Appends nobody waits for already fill `append_queue_bytes_max`.
    #[error("the append queue is full (append_queue_bytes_max); message not stored")]
    QueueFull,
    /// The log is closed, or its appender thread has stopped.
    #[error("the log is closed")]
    Closed,
    /// A body larger than a record may carry.
    #[error("a body of {body_bytes} bytes exceeds RECORD_BODY_BYTES_MAX ({limit})")]
    RecordTooLarge {
        /// The body's length.
        body_bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A file's contents are not what the format says, in a way the log
    /// cannot serve around.
    #[error("{path} at byte {offset}: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where.
        offset: u64,
        /// What was found.
        detail: String,
    },
    /// An argument is out of range.
    #[error("{0}")]
    Invalid(String),
}

impl StoreError {
    /// True when the disk or quota is full.
    pub fn is_full(&self) -> bool {
        matches!(self, StoreError::Full { .. })
    }

    /// Classifies an I/O error from doing `op` to `path`: no space or no
    /// quota is [`StoreError::Full`], anything else [`StoreError::Io`].
    pub fn io(path: &Path, op: &'static str, source: std::io::Error) -> StoreError {
        let full = source.kind() == std::io::ErrorKind::StorageFull
            || source.kind() == std::io::ErrorKind::QuotaExceeded
            || matches!(source.raw_os_error(), Some(ERRNO_NO_SPACE | ERRNO_QUOTA_EXCEEDED));
        match full {
            true => StoreError::Full { path: path.to_path_buf(), op },
            false => StoreError::Io { path: path.to_path_buf(), op, source },
        }
    }

    /// A copy of this error for one more receiver: a failed batch hands
    /// the same failure to every append in it, and `std::io::Error` is not
    /// `Clone`. The copy keeps the OS error number (so its kind), or else
    /// the kind and the message.
    pub(crate) fn duplicate(&self) -> StoreError {
        match self {
            StoreError::Full { path, op } => StoreError::Full { path: path.clone(), op },
            StoreError::Io { path, op, source } => {
                let source = match source.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(source.kind(), source.to_string()),
                };
                StoreError::Io { path: path.clone(), op, source }
            }
            StoreError::QueueFull => StoreError::QueueFull,
            StoreError::Closed => StoreError::Closed,
            StoreError::RecordTooLarge { body_bytes, limit } => {
                StoreError::RecordTooLarge { body_bytes: *body_bytes, limit: *limit }
            }
            StoreError::Corrupt { path, offset, detail } => {
                StoreError::Corrupt { path: path.clone(), offset: *offset, detail: detail.clone() }
            }
            StoreError::Invalid(detail) => StoreError::Invalid(detail.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_space_and_no_quota_are_full_and_copies_keep_the_kind() {
        let path = Path::new("segment");
        let no_space = StoreError::io(path, "write", std::io::Error::from_raw_os_error(ERRNO_NO_SPACE));
        let no_quota = StoreError::io(path, "write", std::io::Error::from_raw_os_error(ERRNO_QUOTA_EXCEEDED));
        assert!(no_space.is_full() && no_quota.is_full());
        assert!(no_space.to_string().starts_with("storage_full"), "{no_space}");
        let denied = StoreError::io(path, "write", std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        assert!(!denied.is_full());
        let StoreError::Io { source, .. } = denied.duplicate() else { panic!("an I/O error stays one") };
        assert_eq!(source.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(no_space.duplicate().is_full());
    }
}
