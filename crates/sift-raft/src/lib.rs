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

/// The openraft this crate is built on, for the broker's types.
pub use openraft;

pub mod entry_codec;
pub mod log_store;
pub mod network;
pub mod replica;
pub mod seq_map;
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
    /// What makes the message the same as another sent again (after a
    /// lost answer or a failover): a hash of its `Sift-Msg-Id`, or of the
    /// broker it was published at and the id that broker gave it. A leader
    /// answers a key it has stored with the sequence stored, and stores
    /// nothing (see [`state_machine::AppliedState::seq_of_key`]).
    pub key: u64,
    /// The stored message.
    pub body: bytes::Bytes,
}

/// What a replicated stream's group appends: messages, or a change to the
/// stream's own state that every replica applies (the broker's: a durable
/// subscription made, its position, its removal), opaque here.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StreamEntry {
    /// Messages published while the previous entry was being stored, in
    /// order: one Raft entry (one append, one fsync on each replica), one
    /// stream record and sequence per message.
    Messages(Vec<Append>),
    /// A change to the stream's state, as the broker encodes it.
    State(bytes::Bytes),
}

impl Default for StreamEntry {
    fn default() -> Self {
        StreamEntry::State(bytes::Bytes::new())
    }
}

/// What applying a [`StreamEntry`] answers: the stream sequence of its
/// first record (its messages have that and the ones after it).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Appended {
    /// The sequence of the entry's first record.
    pub first_seq: u64,
}

openraft::declare_raft_types!(
    /// The openraft types of a replicated stream: brokers are numbered
    /// `u64`s, entries carry [`Append`]s.
    pub TypeConfig:
        D = StreamEntry,
        R = Appended,
);

/// FNV-1a over `parts` (with a separator between them): the hash behind
/// node ids and message keys, the same on every broker and every build.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET_BASIS;
    for (position, part) in parts.iter().enumerate() {
        if position > 0 {
            hash = (hash ^ 0xff).wrapping_mul(PRIME);
        }
        hash = part.iter().fold(hash, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(PRIME));
    }
    hash
}

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
