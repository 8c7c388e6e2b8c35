//! Replicated streams: a stream's segment log as the log of an openraft
//! group, so that a persistent message survives the loss of its broker.
//!
//! openraft (0.9, a well-kept Raft library) does the consensus: elections,
//! log replication, membership. This crate gives it storage:
//!
//! - [`log_store::SegmentLogStore`] keeps the Raft log in a
//!   `sift_store::Log` (the same segment files, group commit and crash
//!   recovery as every stream): Raft index `i` is the log's sequence `i + 1`
//!   ([`entry_codec`] says how an entry is a record), the vote, the
//!   committed and the purged log ids sit beside it in a file written
//!   atomically, a conflicting tail is cut with `Log::truncate_from` and a
//!   purge past the end restarts the log with `Log::restart_at`;
//! - [`state_machine::AppliedState`] keeps what was applied: the last log
//!   id and the membership (the messages themselves are the log).
//!
//! Both pass openraft's own storage test suite (`tests/suite.rs`).
//! [`replica::Replica`] runs an openraft node on them with the calls the
//! broker makes: append (or be told the leader), the committed sequence
//! consumers read up to, and the group's status.

// openraft's `StorageError` is the error its storage traits require, and
// large; the helpers here return it as the traits will, not boxed.
#![allow(clippy::result_large_err)]

pub mod entry_codec;
pub mod log_store;
pub mod network;
pub mod replica;
pub mod state_machine;

// The type declaration below names `Cursor` (its default snapshot data).
use std::io::Cursor;

/// A message appended to a replicated stream: the stored body, as a
/// stream record holds it, and the time its record carries (what replay
/// by time and age retention read).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Append {
    /// The message's time, ns since the epoch.
    pub timestamp_ns: u64,
    /// The stored message.
    pub body: bytes::Bytes,
}

/// What applying an [`Append`] answers: nothing more than that it is
/// committed (its log id is in the write's response).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Appended;

openraft::declare_raft_types!(
    /// The openraft types of a replicated stream: brokers are numbered
    /// `u64`s, entries carry [`Append`]s.
    pub TypeConfig:
        D = Append,
        R = Appended,
);

/// A log id of this crate's groups.
pub type LogId = openraft::LogId<u64>;
/// A storage error of this crate's groups.
pub type StorageError = openraft::StorageError<u64>;

/// A storage error from an I/O failure while writing the log.
pub(crate) fn write_error(error: impl std::error::Error + 'static) -> StorageError {
    openraft::StorageIOError::write_logs(openraft::AnyError::new(&error)).into()
}

/// A storage error from an I/O failure while reading the log.
pub(crate) fn read_error(error: impl std::error::Error + 'static) -> StorageError {
    openraft::StorageIOError::read_logs(openraft::AnyError::new(&error)).into()
}
