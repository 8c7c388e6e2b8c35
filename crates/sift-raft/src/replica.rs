//! One broker's replica of a replicated stream: an openraft node on a
//! [`SegmentLogStore`], with the calls the broker makes of it.
//!
//! - [`Replica::write`] stores a batch of messages (or a state change) on
//!   the group as one Raft entry: it returns the stream sequence of its
//!   first record once a quorum has it durable, or says which broker leads
//!   when this one does not ([`AppendError::NotLeader`]), so that the
//!   caller forwards the batch there;
//! - [`Replica::committed_seq`] is how far consumers may read: never an
//!   entry a new leader could overrule;
//! - [`Replica::status`] is what `sift stream info` shows: the leader, the
//!   term, and for a leader each follower's lag.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{BasicNode, Config, Raft, RaftNetworkFactory};

use crate::log_store::{OpenError, SegmentLogStore};
use crate::network::{CallKind, WireError};
use crate::state_machine::AppliedState;
use crate::{Append, StreamEntry, TypeConfig};

/// The Raft node id of the broker named `name` in a group it formed with
/// the others: FNV-1a of the name, so that every broker numbers every other
/// alike without asking. The membership keeps each id's name beside it
/// ([`BasicNode::addr`]).
pub fn node_id(name: &str) -> u64 {
    crate::fnv1a(&[name.as_bytes()])
}

/// The node id of incarnation `incarnation` of the broker's replica: 0 is
/// the one that formed the group ([`node_id`]); a replica that joined an
/// existing group, or came back without the files it had (a wiped or
/// damaged directory), takes a new random incarnation, so that the group
/// never mistakes it for the node that held those files and voted.
pub fn node_id_of(name: &str, incarnation: u64) -> u64 {
    match incarnation {
        0 => node_id(name),
        _ => crate::fnv1a(&[name.as_bytes(), &incarnation.to_be_bytes()]),
    }
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
    /// The last Raft index stored here.
    pub last_index: Option<u64>,
    /// The last stream sequence committed (and applied): how far consumers
    /// read.
    pub committed_seq: u64,
    /// For a leader: the last Raft index each member holds, itself
    /// included (`None` for one that has nothing yet).
    pub replicated_index: BTreeMap<u64, Option<u64>>,
    /// The members: each one's node id and broker name.
    pub members: BTreeMap<u64, String>,
}

/// One broker's replica of a stream.
#[derive(Clone)]
pub struct Replica {
    id: u64,
    raft: Raft<TypeConfig>,
    state: AppliedState,
    /// The term this replica last found itself leading in, and the last
    /// Raft index its log held then: once that is applied, every key the
    /// group stored before this leadership is known here.
    leadership: Arc<std::sync::Mutex<Option<(u64, u64)>>>,
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
        Ok(Replica { id, raft, state, leadership: Arc::default() })
    }

    /// Serves a call of this group that reached this broker: its answer.
    /// A call for another node id (an earlier incarnation of this broker's
    /// replica) is refused.
    pub async fn serve(&self, kind: CallKind, request: Bytes) -> Result<Bytes, WireError> {
        crate::network::serve(&self.raft, self.id, kind, request).await
    }

    /// The openraft node, for the network's server side.
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    /// This broker's node id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The leader, when known.
    pub fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
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

    /// Stores `entry` on the group as one Raft entry; the stream sequence
    /// of its first record once a quorum has it durable (the messages of a
    /// batch have that one and the ones after it). Callers bound the wait:
    /// without a quorum it lasts.
    pub async fn write(&self, entry: StreamEntry) -> Result<u64, AppendError> {
        match self.raft.client_write(entry).await {
            Ok(written) => Ok(written.data.first_seq),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
                Err(AppendError::NotLeader { leader: forward.leader_id })
            }
            Err(error) => Err(AppendError::Failed(error.to_string())),
        }
    }

    /// Hands `entry` to the group after every entry handed before it, and
    /// returns at once with what will answer: the stream sequence of its
    /// first record once a quorum has it durable. So several entries can
    /// be under way (each replica stores them one after the other, while
    /// the earlier ones replicate), in the order they were handed.
    pub async fn write_in_order(
        &self,
        entry: StreamEntry,
    ) -> Result<impl std::future::Future<Output = Result<u64, AppendError>> + Send + 'static, AppendError> {
        let answer = self.raft.client_write_ff(entry).await.map_err(|error| AppendError::Failed(error.to_string()))?;
        Ok(async move {
            match answer.await {
                Ok(Ok(written)) => Ok(written.data.first_seq),
                Ok(Err(ClientWriteError::ForwardToLeader(forward))) => {
                    Err(AppendError::NotLeader { leader: forward.leader_id })
                }
                Ok(Err(error)) => Err(AppendError::Failed(error.to_string())),
                Err(_) => Err(AppendError::Failed("the Raft node stopped".into())),
            }
        })
    }

    /// Stores one message, unless the group holds its key already: its
    /// stream sequence either way.
    pub async fn append(&self, append: Append) -> Result<u64, AppendError> {
        self.caught_up_as_leader().await?;
        if let Some(seq) = self.seq_of_key(append.key) {
            return Ok(seq);
        }
        self.write(StreamEntry::Messages(vec![append])).await
    }

    /// Stores a change to the stream's state on the group; its sequence.
    pub async fn append_state(&self, state: Bytes) -> Result<u64, AppendError> {
        self.write(StreamEntry::State(state)).await
    }

    /// The stream sequence of the applied message `key`, while the group
    /// remembers it (`keys_max` messages).
    pub fn seq_of_key(&self, key: u64) -> Option<u64> {
        self.state.seq_of_key(key)
    }

    /// Returns once this replica, if it leads, has applied every entry its
    /// log held when it found itself leading: then every key the group
    /// stored before is known here, so a message sent again is found. (Not
    /// "an entry of its own term": a leader restarted with its vote takes
    /// up its term again, its old entries of that term unapplied.) A
    /// replica that does not lead returns at once (a write tells it so).
    pub async fn caught_up_as_leader(&self) -> Result<(), AppendError> {
        let mut metrics = self.raft.metrics();
        loop {
            if self.caught_up(&metrics.borrow_and_update()) {
                return Ok(());
            }
            metrics.changed().await.map_err(|_| AppendError::Failed("the Raft node stopped".into()))?;
        }
    }

    fn caught_up(&self, metrics: &openraft::RaftMetrics<u64, BasicNode>) -> bool {
        if metrics.current_leader != Some(self.id) {
            return true;
        }
        let mut leadership = self.leadership.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let target = match *leadership {
            Some((term, target)) if term == metrics.current_term => target,
            _ => {
                let target = metrics.last_log_index.unwrap_or(0);
                *leadership = Some((metrics.current_term, target));
                target
            }
        };
        metrics.last_applied.is_some_and(|applied| applied.index >= target)
    }

    /// The brokers whose votes make the group's quorum: each one's node id
    /// and name.
    pub fn voters(&self) -> Vec<(u64, String)> {
        let metrics = self.raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership();
        membership.voter_ids().filter_map(|id| membership.get_node(&id).map(|node| (id, node.addr.clone()))).collect()
    }

    /// Makes the group's voters `voters` (node id and broker name): each
    /// new one is added as a learner first and sent the log until it has
    /// caught up, then the voters change through a joint configuration
    /// (Raft's membership change), committed by a quorum of the old voters
    /// and of the new. Only the leader can; a leader that is not among the
    /// new voters steps down once the change is committed. Asking again
    /// for the voters the group has changes nothing.
    pub async fn change_voters(&self, voters: &[(u64, String)]) -> Result<(), AppendError> {
        let current: std::collections::BTreeSet<u64> = self.voters().into_iter().map(|(id, _)| id).collect();
        for (id, name) in voters {
            if current.contains(id) {
                continue;
            }
            let added = self.raft.add_learner(*id, BasicNode { addr: name.clone() }, true).await;
            added.map_err(membership_error)?;
        }
        let wanted: std::collections::BTreeSet<u64> = voters.iter().map(|(id, _)| *id).collect();
        if wanted != current {
            self.raft.change_membership(wanted, false).await.map_err(membership_error)?;
        }
        Ok(())
    }

    /// Makes `id` the voter of the broker `name` in place of the node id it
    /// had (a replica that came back without its files): the rest of the
    /// group stays.
    pub async fn replace_voter(&self, name: &str, id: u64) -> Result<(), AppendError> {
        let mut voters: Vec<(u64, String)> = self.voters().into_iter().filter(|(_, voter)| voter != name).collect();
        voters.push((id, name.to_string()));
        self.change_voters(&voters).await
    }

    /// The last committed (and applied) stream sequence.
    pub fn committed_seq(&self) -> u64 {
        self.state.applied_seq()
    }

    /// The group as this replica sees it now.
    pub fn status(&self) -> ReplicaStatus {
        let metrics = self.raft.metrics().borrow().clone();
        let replicated_index = metrics
            .replication
            .iter()
            .flatten()
            .map(|(member, matched)| (*member, matched.map(|log_id| log_id.index)))
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
            last_index: metrics.last_log_index,
            committed_seq: self.committed_seq(),
            replicated_index,
            members,
        }
    }

    /// Stops the node.
    pub async fn shutdown(&self) -> Result<(), String> {
        self.raft.shutdown().await.map_err(|error| error.to_string())
    }
}

/// What a membership change's failure means for the caller.
fn membership_error(error: RaftError<u64, ClientWriteError<u64, BasicNode>>) -> AppendError {
    match error {
        RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
            AppendError::NotLeader { leader: forward.leader_id }
        }
        other => AppendError::Failed(other.to_string()),
    }
}
