//! openraft's own storage test suite against the segment-log store and the
//! applied-state machine: every case on a fresh store in a directory of
//! its own.

use openraft::testing::{StoreBuilder, Suite};
use sift_raft::log_store::SegmentLogStore;
use sift_raft::state_machine::AppliedState;
use sift_raft::{StorageError, TypeConfig};
use sift_store::{FsyncPolicy, LogConfig};

/// A directory removed when the case is done.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Builder;

impl StoreBuilder<TypeConfig, SegmentLogStore, AppliedState, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, SegmentLogStore, AppliedState), StorageError> {
        static CASES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let case = CASES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("sift-raft-suite-{}-{case}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = LogConfig { fsync: FsyncPolicy::Always, ..LogConfig::default() };
        let store = SegmentLogStore::open(&dir, config).map_err(|error| {
            StorageError::from(openraft::StorageIOError::write_logs(openraft::AnyError::new(&error)))
        })?;
        Ok((TempDir(dir), store, AppliedState::default()))
    }
}

#[test]
fn the_store_passes_openrafts_storage_suite() {
    // A plain test: the suite starts a runtime for each of its cases.
    if let Err(error) = Suite::test_all(Builder) {
        panic!("the storage suite failed: {error}");
    }
}
