//! One broker per data directory.
//!
//! Two brokers writing one directory each append to the same stream logs
//! from their own idea of the next sequence, and each confirms its own
//! `#1..#3`; after a restart one of them has overwritten the other's
//! confirmed messages, and nothing on disk says so. A broker therefore
//! holds an exclusive lock on `DATA_DIR/broker.lock` for as long as it
//! runs, taken before anything else under the directory is opened.
//!
//! The lock is `flock(2)`'s (through [`std::fs::File::try_lock`]): the
//! kernel releases it when the process ends in any way, `kill -9`
//! included, so a crashed broker never leaves a stale lock behind. The
//! file's content is only a courtesy, the holder's pid, so that a refused
//! broker can say who holds the directory; the lock itself is what counts.
//! `flock` locks belong to an open file, not to a process, so two brokers
//! in one process are refused as well.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name under the data directory.
pub const LOCK_FILE_NAME: &str = "broker.lock";

/// Longest pid text read back from a lock file.
const PID_TEXT_BYTES_MAX: u64 = 32;

/// Why a data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error("{} is in use by {}; a second broker needs its own data directory (--data DIR)",
        data_dir.display(), holder_text(*holder_pid))]
    InUse {
        /// The data directory.
        data_dir: PathBuf,
        /// The holder's pid, when its lock file says it.
        holder_pid: Option<u32>,
    },
    /// The directory or its lock file could not be created, opened or locked.
    #[error("cannot lock {}: {source}", path.display())]
    Io {
        /// The lock file or the directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// How a holder is named in messages.
fn holder_text(holder_pid: Option<u32>) -> String {
    match holder_pid {
        Some(pid) => format!("broker pid {pid}"),
        None => "another broker".to_string(),
    }
}

/// Whether a data directory is held by a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    /// No process holds it.
    Free,
    /// A process holds it.
    Held {
        /// The holder's pid, when its lock file says it.
        holder_pid: Option<u32>,
    },
}

impl std::fmt::Display for LockState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockState::Free => formatter.write_str("not in use"),
            LockState::Held { holder_pid } => write!(formatter, "in use by {}", holder_text(*holder_pid)),
        }
    }
}

/// An exclusive lock on a data directory, held until dropped.
#[derive(Debug)]
pub struct DataDirLock {
    /// The open lock file; closing it releases the lock.
    file: File,
    path: PathBuf,
}

impl DataDirLock {
    /// Creates `data_dir` if needed and locks it for this process, writing
    /// this process's pid into the lock file; refuses when another holds it.
    pub fn acquire(data_dir: &Path) -> Result<DataDirLock, LockError> {
        std::fs::create_dir_all(data_dir).map_err(|source| LockError::Io { path: data_dir.to_path_buf(), source })?;
        let path = data_dir.join(LOCK_FILE_NAME);
        let io_error = |source| LockError::Io { path: path.clone(), source };
        // Not truncated at open: the holder's pid must still be readable
        // when the lock turns out to be taken.
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io_error)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(LockError::InUse { data_dir: data_dir.to_path_buf(), holder_pid: read_pid(&mut file) })
            }
            Err(TryLockError::Error(source)) => return Err(io_error(source)),
        }
        file.set_len(0).map_err(io_error)?;
        file.rewind().map_err(io_error)?;
        writeln!(file, "{}", std::process::id()).map_err(io_error)?;
        Ok(DataDirLock { file, path })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a process holds `data_dir`'s lock, for readers such as
    /// `sift stream verify`, which may read while a broker runs but should
    /// say so. A directory without a lock file is free.
    pub fn state(data_dir: &Path) -> Result<LockState, LockError> {
        let path = data_dir.join(LOCK_FILE_NAME);
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(LockState::Free),
            Err(source) => return Err(LockError::Io { path, source }),
        };
        match file.try_lock_shared() {
            // Released as soon as the file closes, at the end of this call.
            Ok(()) => Ok(LockState::Free),
            Err(TryLockError::WouldBlock) => Ok(LockState::Held { holder_pid: read_pid(&mut file) }),
            Err(TryLockError::Error(source)) => Err(LockError::Io { path, source }),
        }
    }
}

impl Drop for DataDirLock {
    fn drop(&mut self) {
        // The lock goes with the file descriptor; unlocking first only
        // makes the release independent of other copies of the descriptor.
        let _ = self.file.unlock();
    }
}

/// The pid a lock file names, if it names one.
fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.take(PID_TEXT_BYTES_MAX).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sift-lock-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_second_lock_is_refused_with_the_holders_pid_until_the_first_is_dropped() {
        let dir = scratch("second");
        let first = DataDirLock::acquire(&dir).expect("the first lock");
        assert_eq!(DataDirLock::state(&dir).expect("state"), LockState::Held { holder_pid: Some(std::process::id()) });
        match DataDirLock::acquire(&dir) {
            Err(LockError::InUse { holder_pid, .. }) => assert_eq!(holder_pid, Some(std::process::id())),
            other => panic!("expected InUse, got {other:?}"),
        }
        let refusal = DataDirLock::acquire(&dir).expect_err("still held").to_string();
        assert!(refusal.contains(&format!("broker pid {}", std::process::id())), "{refusal}");
        assert!(refusal.contains("--data DIR"), "{refusal}");
        drop(first);
        assert_eq!(DataDirLock::state(&dir).expect("state"), LockState::Free);
        let again = DataDirLock::acquire(&dir).expect("free again");
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_without_a_lock_file_has_no_holder() {
        let dir = scratch("none");
        assert_eq!(DataDirLock::state(&dir).expect("state"), LockState::Free);
    }
}
