//! Small file operations that must survive a crash.
//!
//! Creating, renaming or removing a file changes its directory, and that
//! change is only durable once the directory itself is synced: these
//! helpers do both halves, so no caller forgets the second.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// What is appended to a file name for its temporary twin.
pub(crate) const TEMPORARY_SUFFIX: &str = ".tmp";

/// Syncs a directory, so that files created, renamed or removed in it stay so.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|handle| handle.sync_all()).map_err(|error| StoreError::io(dir, "sync directory", error))
}

/// Syncs the directory holding `path`, if it has one.
pub(crate) fn sync_parent(path: &Path) -> Result<(), StoreError> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir),
        _ => Ok(()),
    }
}

/// `path` with [`TEMPORARY_SUFFIX`] appended to its file name.
pub(crate) fn temporary_path(path: &Path) -> PathBuf {
    let mut name: OsString = path.file_name().map(OsString::from).unwrap_or_default();
    name.push(TEMPORARY_SUFFIX);
    path.with_file_name(name)
}

/// Replaces `path` with `bytes` so that a crash leaves either the old or
/// the new contents, never a mix: write `path.tmp`, sync it, rename it
/// over `path`, sync the directory. For stream and durable definition
/// files, and for compacting a position log.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let temporary = temporary_path(path);
    let mut file = File::create(&temporary).map_err(|error| StoreError::io(&temporary, "create", error))?;
    let written = file
        .write_all(bytes)
        .map_err(|error| StoreError::io(&temporary, "write", error))
        .and_then(|()| file.sync_all().map_err(|error| StoreError::io(&temporary, "sync", error)));
    if let Err(error) = written {
        // Leave no half-written twin behind (a full disk is the usual cause).
        let _ = std::fs::remove_file(&temporary);
        return Err(error);
    }
    std::fs::rename(&temporary, path).map_err(|error| StoreError::io(path, "rename onto", error))?;
    sync_parent(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_no_twin() {
        let dir = std::env::temp_dir().join(format!("sift-store-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("stream.json");
        write_file_atomically(&path, b"old").expect("written");
        write_file_atomically(&path, b"new").expect("written");
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
        assert!(!temporary_path(&path).exists());
        assert_eq!(temporary_path(&path).file_name().and_then(|name| name.to_str()), Some("stream.json.tmp"));
        std::fs::remove_dir_all(&dir).expect("cleaned");
    }
}
