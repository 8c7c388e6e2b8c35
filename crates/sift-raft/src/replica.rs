//! One broker's replica of a replicated stream: an openraft node on a
//! [`SegmentLogStore`], with the calls the broker makes of it.
//!
//! - [`Replica::append`] stores a message on the group: it returns the
//!   stream sequence once a quorum has it durable, or says which broker
//!   leads when this one does not ([`AppendError::NotLeader`]), so that the
//!   caller forwards the publish there;
//! - [`Replica::committed_seq`] is how far consumers may read: never an
//!   entry a new leader could overrule;
//! - [`Replica::status`] is what `sift stream info` shows: the leader, the
//!   term, and for a leader each follower's lag.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::Mutex;

use bytes::Bytes;
use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{BasicNode, Config, Raft, RaftNetworkFactory};
use tokio::sync::oneshot;

use crate::log_store::{OpenError, SegmentLogStore};
use crate::network::{CallKind, WireError};
use crate::state_machine::AppliedState;
use crate::{Append, StreamEntry, TypeConfig};

/// The Raft node id of the broker named `name`: FNV-1a of the name, so
/// that every broker numbers every other alike without asking. The
/// membership keeps each id's name beside it ([`BasicNode::addr`]).
pub fn node_id(name: &str) -> u64 {
    crate::fnv1a(&[name.as_bytes()])
}

/// Why a replica did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Its store did not open.
    #[error(transparent)]
    Store(#[from] OpenError),
    /// The Raft node did not start.
    #[error("the Raft node did not start: {0}")]
    Raft(String),
}

/// Why an append was not stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    /// Another broker leads the group (or none is known yet): send the
    /// publish there.
    #[error("this broker does not lead the stream's group; the leader is {leader:?}")]
    NotLeader {
        /// The leader, when known.
        leader: Option<u64>,
    },
    /// The group refused or failed it otherwise.
    #[error("the stream's group did not store the message: {0}")]
    Failed(String),
}

/// What a replica knows of its group now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// This broker.
    pub id: u64,
    /// The leader, when known.
    pub leader: Option<u64>,
    /// The Raft term.
    pub term: u64,
    /// The last stored sequence.
    pub last_seq: u64,
    /// The last committed (and applied) sequence: how far consumers read.
    pub committed_seq: u64,
    /// For a leader: each member's replicated sequence, itself included.
    pub replicated_seq: BTreeMap<u64, u64>,
    /// The members: each one's node id and broker name.
    pub members: BTreeMap<u64, String>,
}

/// Waiters for the answer of an append in flight, by message key.
type InFlight = Arc<Mutex<HashMap<u64, Vec<oneshot::Sender<Result<u64, AppendError>>>>>>;

/// One broker's replica of a stream.
#[derive(Clone)]
pub struct Replica {
    id: u64,
    raft: Raft<TypeConfig>,
    state: AppliedState,
    /// Appends in flight by key: one sent again while the first runs
    /// waits for the first's answer instead of storing a second copy.
    in_flight: InFlight,
}

impl Replica {
    /// Starts the replica `id` of a group on `store` and `state`, reaching
    /// the other members through `network`.
    pub async fn start<N: RaftNetworkFactory<TypeConfig>>(
        id: u64,
        store: SegmentLogStore,
        state: AppliedState,
        config: Arc<Config>,
        network: N,
    ) -> Result<Replica, StartError> {
        let raft = Raft::new(id, config, network, store, state.clone())
            .await
            .map_err(|error| StartError::Raft(error.to_string()))?;
        Ok(Replica { id, raft, state, in_flight: InFlight::default() })
    }

    /// Serves a call of this group that reached this broker: its answer.
    pub async fn serve(&self, kind: CallKind, request: Bytes) -> Result<Bytes, WireError> {
        crate::network::serve(&self.raft, kind, request).await
    }

    /// The openraft node, for the network's server side.
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    /// Makes the brokers named `members` the group, once: a group that
    /// already has members keeps them.
    pub async fn initialize(&self, members: &[String]) -> Result<(), String> {
        let members: BTreeMap<u64, BasicNode> =
            members.iter().map(|name| (node_id(name), BasicNode { addr: name.clone() })).collect();
        match self.raft.initialize(members).await {
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(error) => Err(error.to_string()),
        }
    }

    /// Stores `append` on the group; its stream sequence once a quorum
    /// has it durable. A message whose key the group stored already (sent
    /// again after a lost answer) gets the sequence it has, and is not
    /// stored twice. Callers bound the wait: without a quorum it lasts.
    pub async fn append(&self, append: Append) -> Result<u64, AppendError> {
        self.caught_up_as_leader().await?;
        if let Some(seq) = self.state.seq_of_key(append.key) {
            return Ok(seq);
        }
        let key = append.key;
        if let Some(answer) = self.join_in_flight(key) {
            return answer.await.unwrap_or_else(|_| Err(AppendError::Failed("the first append went".into())));
        }
        let result = self.write(StreamEntry::Message(append)).await;
        let waiters = match key {
            0 => None,
            _ => self.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&key),
        };
        for waiter in waiters.into_iter().flatten() {
            let _ = waiter.send(result.clone());
        }
        result
    }

    /// Stores a change to the stream's state on the group; its sequence
    /// once a quorum has it. Callers bound the wait, as for `append`.
    pub async fn append_state(&self, state: Bytes) -> Result<u64, AppendError> {
        self.write(StreamEntry::State(state)).await
    }

    async fn write(&self, entry: StreamEntry) -> Result<u64, AppendError> {
        match self.raft.client_write(entry).await {
            Ok(written) => Ok(written.log_id.index + 1),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
                Err(AppendError::NotLeader { leader: forward.leader_id })
            }
            Err(error) => Err(AppendError::Failed(error.to_string())),
        }
    }

    /// The answer to wait for when an append of `key` is in flight; else
    /// `None`, and this append is the one in flight.
    fn join_in_flight(&self, key: u64) -> Option<oneshot::Receiver<Result<u64, AppendError>>> {
        if key == 0 {
            return None;
        }
        let mut in_flight = self.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match in_flight.get_mut(&key) {
            Some(waiters) => {
                let (sender, answer) = oneshot::channel();
                waiters.push(sender);
                Some(answer)
            }
            None => {
                in_flight.insert(key, Vec::new());
                None
            }
        }
    }

    /// Returns once this replica, if it leads, has applied an entry of its
    /// own term: then every entry of earlier leaders that it holds is
    /// applied and its keys known, so a message sent again is found. A
    /// replica that does not lead returns at once (the write tells it so).
    async fn caught_up_as_leader(&self) -> Result<(), AppendError> {
        let id = self.id;
        let caught_up = |metrics: &openraft::RaftMetrics<u64, BasicNode>| {
            metrics.current_leader != Some(id)
                || metrics.last_applied.is_some_and(|applied| applied.leader_id.term == metrics.current_term)
        };
        let mut metrics = self.raft.metrics();
        loop {
            if caught_up(&metrics.borrow_and_update()) {
                return Ok(());
            }
            metrics.changed().await.map_err(|_| AppendError::Failed("the Raft node stopped".into()))?;
        }
    }

    /// The last committed (and applied) stream sequence.
    pub fn committed_seq(&self) -> u64 {
        self.raft.metrics().borrow().last_applied.map_or(0, |log_id| log_id.index + 1)
    }

    /// The group as this replica sees it now.
    pub fn status(&self) -> ReplicaStatus {
        let metrics = self.raft.metrics().borrow().clone();
        let replicated_seq = metrics
            .replication
            .iter()
            .flatten()
            .map(|(member, matched)| (*member, matched.map_or(0, |log_id| log_id.index + 1)))
            .collect();
        let members = metrics
            .membership_config
            .membership()
            .nodes()
            .map(|(node_id, node)| (*node_id, node.addr.clone()))
            .collect();
        ReplicaStatus {
            id: self.id,
            leader: metrics.current_leader,
            term: metrics.current_term,
            last_seq: metrics.last_log_index.map_or(0, |index| index + 1),
            committed_seq: metrics.last_applied.map_or(0, |log_id| log_id.index + 1),
            replicated_seq,
            members,
        }
    }

    /// Stops the node.
    pub async fn shutdown(&self) -> Result<(), String> {
        self.raft.shutdown().await.map_err(|error| error.to_string())
    }
}
