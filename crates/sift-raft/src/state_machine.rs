//! What a replicated stream's group has applied: the last log id and the
//! membership. The messages themselves are the log, so applying an entry
//! records only that it was applied; a snapshot is these two, as JSON.
//!
//! It also keeps the keys of the last messages applied ([`Append::key`],
//! at most `keys_max`): a leader answers a message sent again with the
//! sequence it has, so that a publish retried after a lost answer or a
//! failover is stored once. Every member applies every entry, so a new
//! leader has the window as the old one had it.

use std::collections::VecDeque;
use std::io::Cursor;
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{BasicNode, EntryPayload, OptionalSend, RaftSnapshotBuilder, SnapshotMeta, StoredMembership};

use crate::entry_codec::Entry;
use crate::{Append, Appended, LogId, StorageError, StreamEntry, TypeConfig};

/// What a snapshot holds.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Applied {
    last_applied: Option<LogId>,
    membership: StoredMembership<u64, BasicNode>,
    /// The stream sequence the next entry starts at (0 before the first,
    /// which starts at 1): every replica counts the same records.
    #[serde(default)]
    next_seq: u64,
}

/// The applied state and the current snapshot.
#[derive(Debug, Default)]
struct Inner {
    applied: Applied,
    current: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
    snapshots_built: u64,
    /// The stream sequence of each recent key, and the keys oldest first.
    /// The keys are hashes already (FNV-1a), so a fast hasher serves.
    keys: FxHashMap<u64, u64>,
    key_order: VecDeque<u64>,
    keys_max: usize,
}

impl Inner {
    /// Remembers that the message `key` is stored at `seq`, forgetting the
    /// oldest key past `keys_max`.
    fn remember(&mut self, key: u64, seq: u64) {
        if key == 0 || self.keys_max == 0 || self.keys.insert(key, seq).is_some() {
            return;
        }
        self.key_order.push_back(key);
        while self.key_order.len() > self.keys_max {
            if let Some(oldest) = self.key_order.pop_front() {
                self.keys.remove(&oldest);
            }
        }
        debug_assert_eq!(self.keys.len(), self.key_order.len(), "each remembered key once in the order");
    }
}

/// Told, after each batch, the stream sequence applied (committed) up to
/// and the state changes of the batch, in order (every replica applies
/// the same, from the first entry on after a restart).
pub type AppliedHook = Arc<dyn Fn(u64, Vec<bytes::Bytes>) + Send + Sync>;

/// A replicated stream's state machine.
#[derive(Clone, Default)]
pub struct AppliedState {
    inner: Arc<Mutex<Inner>>,
    on_applied: Option<AppliedHook>,
}

impl std::fmt::Debug for AppliedState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("AppliedState").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl AppliedState {
    /// A state machine that tells `on_applied` how far it applied (the
    /// broker wakes the stream's consumers with it) and remembers the keys
    /// of the last `keys_max` messages.
    pub fn with_hook(on_applied: AppliedHook, keys_max: usize) -> AppliedState {
        let inner = Inner { keys_max, ..Inner::default() };
        AppliedState { inner: Arc::new(Mutex::new(inner)), on_applied: Some(on_applied) }
    }

    /// The last stream sequence applied (committed): how far readers read.
    pub fn applied_seq(&self) -> u64 {
        self.inner().applied.next_seq.saturating_sub(1)
    }

    /// The stream sequence of the applied message `key`, while remembered.
    pub fn seq_of_key(&self, key: u64) -> Option<u64> {
        self.inner().keys.get(&key).copied()
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn snapshot_error(error: impl std::error::Error + 'static) -> StorageError {
    openraft::StorageIOError::write_snapshot(None, openraft::AnyError::new(&error)).into()
}

impl RaftSnapshotBuilder<TypeConfig> for AppliedState {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let mut inner = self.inner();
        let data = serde_json::to_vec(&inner.applied).map_err(snapshot_error)?;
        inner.snapshots_built += 1;
        let index = inner.applied.last_applied.map_or(0, |log_id| log_id.index);
        let meta = SnapshotMeta {
            last_log_id: inner.applied.last_applied,
            last_membership: inner.applied.membership.clone(),
            snapshot_id: format!("{index}-{}", inner.snapshots_built),
        };
        inner.current = Some((meta.clone(), data.clone()));
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(data)) })
    }
}

impl RaftStateMachine<TypeConfig> for AppliedState {
    type SnapshotBuilder = AppliedState;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership<u64, BasicNode>), StorageError> {
        let inner = self.inner();
        Ok((inner.applied.last_applied, inner.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Appended>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
    {
        let mut inner = self.inner();
        let mut answers = Vec::new();
        let mut states = Vec::new();
        for entry in entries {
            let first_seq = inner.applied.next_seq.max(1);
            inner.applied.next_seq = first_seq + crate::entry_codec::records_of(&entry);
            inner.applied.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Membership(membership) => {
                    inner.applied.membership = StoredMembership::new(Some(entry.log_id), membership);
                }
                EntryPayload::Normal(StreamEntry::Messages(messages)) => {
                    for (offset, Append { key, .. }) in messages.iter().enumerate() {
                        inner.remember(*key, first_seq + offset as u64);
                    }
                }
                EntryPayload::Normal(StreamEntry::State(state)) => states.push(state),
                EntryPayload::Blank => {}
            }
            answers.push(Appended { first_seq });
        }
        let applied_seq = inner.applied.next_seq.saturating_sub(1);
        drop(inner);
        if let Some(on_applied) = &self.on_applied {
            on_applied(applied_seq, states);
        }
        Ok(answers)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let applied: Applied = serde_json::from_slice(&data).map_err(snapshot_error)?;
        let mut inner = self.inner();
        inner.applied = applied;
        inner.current = Some((meta.clone(), data));
        let applied_seq = inner.applied.next_seq.saturating_sub(1);
        drop(inner);
        if let Some(on_applied) = &self.on_applied {
            on_applied(applied_seq, Vec::new());
        }
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let inner = self.inner();
        Ok(inner.current.clone().map(|(meta, data)| Snapshot { meta, snapshot: Box::new(Cursor::new(data)) }))
    }
}
