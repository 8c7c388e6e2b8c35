//! The active segment as its writer sees it: where the whole records end,
//! and the one rule that keeps the log whole when the disk says no.
//!
//! A batch is written at the end of the whole records with one positioned
//! write, then (under `always`) synced. If either fails, the file is cut
//! back to where the batch began, so that the next batch follows the last
//! record that was completed and no half-written record is left in the
//! middle of the log. After a failed `fdatasync` the page cache's state is
//! unknown (Linux may have dropped the dirty pages and cleared the error),
//! so the batch is not trusted even if its bytes may have reached the
//! disk: it is cut and failed, and its publishers resend. If even the cut
//! fails, the next batch cuts first, and fails too while it cannot.
//!
//! The file is behind [`SegmentFile`] so that this rule can be tested with
//! a file that fails half-way through a write.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

use crate::error::StoreError;
use crate::stats::Counters;

/// What the appender needs of a segment file.
pub(crate) trait SegmentFile: Send {
    /// Writes all of `bytes` at `offset`.
    fn write_all_at(&self, bytes: &[u8], offset: u64) -> std::io::Result<()>;
    /// `fdatasync`.
    fn sync_data(&self) -> std::io::Result<()>;
    /// Cuts or extends the file to `length`.
    fn set_len(&self, length: u64) -> std::io::Result<()>;
}

impl SegmentFile for File {
    fn write_all_at(&self, bytes: &[u8], offset: u64) -> std::io::Result<()> {
        FileExt::write_all_at(self, bytes, offset)
    }

    fn sync_data(&self) -> std::io::Result<()> {
        File::sync_data(self)
    }

    fn set_len(&self, length: u64) -> std::io::Result<()> {
        File::set_len(self, length)
    }
}

/// The segment being appended to.
pub(crate) struct ActiveSegment {
    file: Box<dyn SegmentFile>,
    path: PathBuf,
    /// Bytes of whole, written records: where the next batch goes.
    length: u64,
    /// Sequences the segment holds.
    records: u64,
    /// A failed batch could not be cut back: cut before writing again.
    needs_cut: bool,
}

impl ActiveSegment {
    /// The segment at `path`, whose whole records end at `length`.
    pub fn new(file: Box<dyn SegmentFile>, path: PathBuf, length: u64, records: u64) -> ActiveSegment {
        ActiveSegment { file, path, length, records, needs_cut: false }
    }

    /// Bytes of whole records.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// Sequences it holds.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Writes `batch` (`records` whole records) after the whole records,
    /// and syncs it when `sync`. On failure the file is cut back to where
    /// the batch began (see the module documentation) and the error
    /// returned; the segment is then as it was before.
    pub fn store(&mut self, batch: &[u8], records: u64, sync: bool, counters: &Counters) -> Result<(), StoreError> {
        if self.needs_cut {
            self.file.set_len(self.length).map_err(|error| StoreError::io(&self.path, "truncate", error))?;
            self.needs_cut = false;
        }
        let written = self
            .file
            .write_all_at(batch, self.length)
            .map_err(|error| StoreError::io(&self.path, "write", error))
            .and_then(|()| if sync { self.sync(counters) } else { Ok(()) });
        match written {
            Ok(()) => {
                self.length += batch.len() as u64;
                self.records += records;
                Ok(())
            }
            Err(error) => {
                self.needs_cut = self.file.set_len(self.length).is_err();
                Err(error)
            }
        }
    }

    /// `fdatasync`s the segment, counting the call and its time.
    pub fn sync(&self, counters: &Counters) -> Result<(), StoreError> {
        let started = Instant::now();
        self.file.sync_data().map_err(|error| StoreError::io(&self.path, "sync", error))?;
        counters.count_fsync(started.elapsed());
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// ENOSPC.
    const NO_SPACE: i32 = 28;

    /// A file in memory that can be told to fail: writes past
    /// `capacity_bytes` stop there with ENOSPC (the bytes before it
    /// stay, as on a real disk), and syncs or cuts fail on demand.
    #[derive(Clone, Default)]
    pub(crate) struct FailingFile {
        pub state: Arc<Mutex<FailingState>>,
    }

    #[derive(Default)]
    pub(crate) struct FailingState {
        pub bytes: Vec<u8>,
        pub capacity_bytes: Option<usize>,
        pub fail_sync: bool,
        pub fail_cut: bool,
    }

    impl FailingFile {
        pub fn state(&self) -> std::sync::MutexGuard<'_, FailingState> {
            self.state.lock().expect("not poisoned")
        }
    }

    impl SegmentFile for FailingFile {
        fn write_all_at(&self, bytes: &[u8], offset: u64) -> std::io::Result<()> {
            let mut state = self.state();
            let start = usize::try_from(offset).expect("small");
            let end = start + bytes.len();
            let room = state.capacity_bytes.unwrap_or(usize::MAX).min(end);
            if state.bytes.len() < room {
                state.bytes.resize(room, 0);
            }
            let fits = room.saturating_sub(start);
            state.bytes[start..start + fits].copy_from_slice(&bytes[..fits]);
            match fits == bytes.len() {
                true => Ok(()),
                false => Err(std::io::Error::from_raw_os_error(NO_SPACE)),
            }
        }

        fn sync_data(&self) -> std::io::Result<()> {
            match self.state().fail_sync {
                true => Err(std::io::Error::other("injected sync failure")),
                false => Ok(()),
            }
        }

        fn set_len(&self, length: u64) -> std::io::Result<()> {
            let mut state = self.state();
            if state.fail_cut {
                return Err(std::io::Error::other("injected truncate failure"));
            }
            state.bytes.resize(usize::try_from(length).expect("small"), 0);
            Ok(())
        }
    }

    fn active(file: &FailingFile) -> ActiveSegment {
        ActiveSegment::new(Box::new(file.clone()), "test.seg".into(), 0, 0)
    }

    #[test]
    fn a_write_that_fails_half_way_is_cut_back_and_the_next_one_goes_on() {
        let (file, counters) = (FailingFile::default(), Counters::default());
        let mut segment = active(&file);
        segment.store(b"first", 1, true, &counters).expect("fits");
        file.state().capacity_bytes = Some(8);
        let error = segment.store(b"second", 1, true, &counters).expect_err("no room");
        assert!(error.is_full(), "{error}");
        assert_eq!(file.state().bytes, b"first", "the half-written batch is cut off");
        assert_eq!((segment.length(), segment.records()), (5, 1));
        file.state().capacity_bytes = None;
        segment.store(b"third", 1, true, &counters).expect("room again");
        assert_eq!(file.state().bytes, b"firstthird");
        assert_eq!(counters.fsyncs.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_failed_sync_fails_the_batch_and_a_failed_cut_is_retried_first() {
        let (file, counters) = (FailingFile::default(), Counters::default());
        let mut segment = active(&file);
        segment.store(b"kept", 1, false, &counters).expect("written");
        file.state().fail_sync = true;
        file.state().fail_cut = true;
        let error = segment.store(b"lost", 1, true, &counters).expect_err("sync fails");
        assert!(!error.is_full());
        assert_eq!(file.state().bytes, b"keptlost", "the cut failed too");
        let error = segment.store(b"next", 1, false, &counters).expect_err("the cut is retried first");
        assert!(matches!(error, StoreError::Io { op: "truncate", .. }), "{error}");
        file.state().fail_cut = false;
        file.state().fail_sync = false;
        segment.store(b"next", 1, true, &counters).expect("written");
        assert_eq!(file.state().bytes, b"keptnext");
        assert_eq!((segment.length(), segment.records()), (8, 2));
    }
}
