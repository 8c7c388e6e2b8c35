//! Durable subscriptions on disk: a definition file and a position log per
//! durable, in `data_dir/durables/NAME/`.
//!
//! The definition (`durable.json`) says what the durable reads: its stream,
//! topic filter and content filter. It is written once, atomically, when the
//! durable is created; a subscriber that resumes it with other filters is
//! refused (`durable_mismatch`) rather than silently changing what it gets.
//! The position log (`position.log`, `sift-store`'s `PositionLog`) gets one
//! checksummed record per change of the ack floor or the done ranges above
//! it; the last whole record is the position.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sift_store::{Position, PositionLog};

use super::cursor::StoredPosition;
use super::settings::StorageError;

/// File holding a durable subscription's definition, in its directory.
pub const DEFINITION_FILE: &str = "durable.json";

/// File holding its position records.
pub const POSITION_FILE: &str = "position.log";

/// What a durable subscription reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurableDefinition {
    /// Its name.
    pub name: String,
    /// The stream it reads.
    pub stream: String,
    /// Its topic filter.
    pub topic_filter: String,
    /// Its content filter language (`none`, `tags`, `sql`, `xpath`, `regex`).
    pub filter_kind: String,
    /// Its content filter text.
    pub filter: String,
    /// True for a shared durable (JMS 2.0): several consumers, each message to one.
    pub shared: bool,
}

/// A durable subscription's definition and position log.
#[derive(Debug)]
pub struct DurableRecord {
    /// What it reads.
    pub definition: DurableDefinition,
    dir: PathBuf,
    positions: Mutex<PositionLog>,
    /// The ack floor last written to the position log.
    stored_floor: AtomicU64,
    /// True when a position was written and not yet synced to disk.
    unsynced: AtomicBool,
}

fn to_store(position: &StoredPosition) -> Position {
    Position { ack_floor: position.ack_floor, done_above: position.done_above.clone() }
}

fn from_store(position: &Position) -> StoredPosition {
    StoredPosition { ack_floor: position.ack_floor, done_above: position.done_above.clone() }
}

impl DurableRecord {
    /// Creates the durable's directory, definition and first position.
    pub fn create(
        dir: &Path,
        definition: DurableDefinition,
        start: &StoredPosition,
    ) -> Result<DurableRecord, StorageError> {
        let io = |source| StorageError::Io { path: dir.to_path_buf(), source };
        std::fs::create_dir_all(dir).map_err(io)?;
        let text = serde_json::to_vec_pretty(&definition).map_err(|error| StorageError::Invalid(error.to_string()))?;
        sift_store::write_file_atomically(&dir.join(DEFINITION_FILE), &text).map_err(StorageError::Store)?;
        let (mut positions, _) = PositionLog::open(&dir.join(POSITION_FILE)).map_err(StorageError::Store)?;
        positions.write(&to_store(start), true).map_err(StorageError::Store)?;
        Ok(DurableRecord {
            definition,
            dir: dir.to_path_buf(),
            positions: Mutex::new(positions),
            stored_floor: AtomicU64::new(start.ack_floor),
            unsynced: AtomicBool::new(false),
        })
    }

    /// Loads a durable from its directory, with its last stored position.
    pub fn load(dir: &Path) -> Result<(DurableRecord, StoredPosition), StorageError> {
        let path = dir.join(DEFINITION_FILE);
        let text = std::fs::read(&path).map_err(|source| StorageError::Io { path: path.clone(), source })?;
        let definition: DurableDefinition = serde_json::from_slice(&text)
            .map_err(|error| StorageError::Invalid(format!("{}: {error}", path.display())))?;
        let (positions, position) = PositionLog::open(&dir.join(POSITION_FILE)).map_err(StorageError::Store)?;
        let position = from_store(&position);
        let record = DurableRecord {
            definition,
            dir: dir.to_path_buf(),
            positions: Mutex::new(positions),
            stored_floor: AtomicU64::new(position.ack_floor),
            unsynced: AtomicBool::new(false),
        };
        Ok((record, position))
    }

    fn positions(&self) -> std::sync::MutexGuard<'_, PositionLog> {
        self.positions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends `position` to the position log, without waiting for the disk.
    pub fn store_position(&self, position: &StoredPosition) {
        match self.positions().write(&to_store(position), false) {
            Ok(()) => {
                self.stored_floor.store(position.ack_floor, Ordering::Relaxed);
                self.unsynced.store(true, Ordering::Relaxed);
            }
            // The position in memory is still right; a later write will
            // store it, and until then a restart redelivers (never loses).
            Err(error) => tracing::warn!(durable = %self.definition.name, %error, "cannot store the position"),
        }
    }

    /// Syncs the position log to disk if a write is pending.
    pub fn sync(&self) {
        if self.unsynced.swap(false, Ordering::Relaxed) {
            if let Err(error) = self.positions().sync() {
                self.unsynced.store(true, Ordering::Relaxed);
                tracing::warn!(durable = %self.definition.name, %error, "cannot sync the position");
            }
        }
    }

    /// The ack floor last written to the position log.
    pub fn stored_floor(&self) -> u64 {
        self.stored_floor.load(Ordering::Relaxed)
    }

    /// Deletes the durable's directory.
    pub fn remove(&self) -> Result<(), StorageError> {
        std::fs::remove_dir_all(&self.dir).map_err(|source| StorageError::Io { path: self.dir.clone(), source })
    }
}
