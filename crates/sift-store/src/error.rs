//! Why a store operation failed.

use std::path::PathBuf;

/// A store error: what failed, where, and why.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The disk (or quota) is full; retry when space returns.
    #[error("storage_full: no space left writing {path}")]
    Full {
        /// The file being written.
        path: PathBuf,
    },
    /// A file operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Appends that wait for nothing exceed `append_queue_bytes_max`.
    #[error("the append queue is full (append_queue_bytes_max); message not stored")]
    QueueFull,
    /// The log is closed.
    #[error("the log is closed")]
    Closed,
    /// A file's contents are not what the format says.
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

    /// Classifies an I/O error on `path`: no space is [`StoreError::Full`].
    pub fn io(path: &std::path::Path, op: &'static str, source: std::io::Error) -> StoreError {
        // ENOSPC (28) and EDQUOT (122) on Linux.
        let full = source.kind() == std::io::ErrorKind::StorageFull || matches!(source.raw_os_error(), Some(28 | 122));
        match full {
            true => StoreError::Full { path: path.to_path_buf() },
            false => StoreError::Io { path: path.to_path_buf(), op, source },
        }
    }
}
