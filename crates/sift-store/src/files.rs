//! Small file operations that must survive a crash.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::error::StoreError;

/// Syncs a directory, so that files created or renamed in it stay.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|handle| handle.sync_all()).map_err(|error| StoreError::io(dir, "sync directory", error))
}

/// Replaces `path` with `bytes` so that a crash leaves either the old or
/// the new contents: write a temporary file, sync it, rename it over, sync
/// the directory.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let temporary = path.with_extension("tmp");
    let mut file = File::create(&temporary).map_err(|error| StoreError::io(&temporary, "create", error))?;
    file.write_all(bytes).map_err(|error| StoreError::io(&temporary, "write", error))?;
    file.sync_all().map_err(|error| StoreError::io(&temporary, "sync", error))?;
    std::fs::rename(&temporary, path).map_err(|error| StoreError::io(path, "rename onto", error))?;
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir),
        _ => Ok(()),
    }
}
