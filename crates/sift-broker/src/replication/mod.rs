//! Replicated streams: a stream kept by a Raft group of brokers, so that a
//! confirmed persistent message survives the loss of its broker.
//!
//! openraft (`sift-raft`) does the consensus; the stream's own segment log
//! is the group's Raft log, so a message is written once on each replica,
//! by the same appender and group commit as any stream's. The path of a
//! persistent publish to a replicated stream:
//!
//! 1. the publishing broker's pipeline hands it to [`Replication`] (instead
//!    of appending it to a log of its own);
//! 2. [`Replication::append_anywhere`] appends it on the replica here when
//!    it leads, else forwards it to the leader over the broker links
//!    ([`forward`], [`calls`]);
//! 3. the leader's openraft appends it to its log (returning at once; the
//!    appender's next fsync covers every append queued meanwhile) and
//!    replicates it to the followers, which do the same;
//! 4. once a quorum has it on disk it is committed and applied; the
//!    publisher's confirm carries its stream sequence (its Raft index + 1);
//! 5. each replica's consumers read their own log up to the committed
//!    sequence ([`crate::store::stream_reader`]), so a durable subscriber
//!    on any replica gets the same messages in the same order.
//!
//! Each broker's node id is a hash of its network name; the group's
//! membership keeps each id's name, which is where its calls go.

pub mod calls;
pub mod durables;
pub mod forward;
pub mod identity;
pub mod members;
pub mod place;
pub mod rejoin;
pub mod serve;
pub mod submit;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use sift_proto::ErrorCode;
use sift_raft::log_store::SegmentLogStore;
use sift_raft::network::GroupNetwork;
use sift_raft::replica::{node_id_of, Replica};
use sift_raft::state_machine::AppliedState;
use sift_store::Log;
use tokio::sync::Notify;

pub use calls::{LinkTransport, RaftCalls, PUBLISH_KIND};

use crate::store::gate::ConfirmGate;
use crate::store::settings::{StorageConfig, StreamDefinition};

/// The key that tells a message apart from one sent again: its
/// `Sift-Msg-Id` when the publisher gave one (so that the publisher's own
/// retry is stored once), else the broker it was published at and the id
/// that broker gave it (so that this broker's retries are).
pub fn message_key(own_name: &str, message: &sift_core::Message) -> u64 {
    match message.property(sift_core::MSG_ID_PROPERTY) {
        Some(id) => sift_raft::fnv1a(&[b"msg-id", id.to_string().as_bytes()]),
        None => sift_raft::fnv1a(&[b"origin", own_name.as_bytes(), &message.id.to_be_bytes()]),
    }
    .max(1)
}

/// Election timeouts a new group's other members wait for word from its
/// first member before they form the group themselves.
const FORMING_PATIENCE_ELECTIONS: u32 = 3;

/// The file in a replica's directory that says it joins a group that
/// exists (`sift stream move`): it waits for the leader's log and never
/// forms a group of its own.
pub const JOINING_FILE: &str = "joining";

/// The sink that applies a replica's state changes to `storage`.
pub fn storage_sink(storage: &Arc<crate::store::Storage>) -> StateSink {
    let storage = Arc::downgrade(storage);
    Arc::new(move |stream: &str, state: Bytes| {
        if let (Some(storage), Some(change)) = (storage.upgrade(), durables::StateChange::decode(&state)) {
            storage.apply_replicated(stream, change);
        }
    })
}

/// The settings a replicated stream runs with, from `[storage]`.
#[derive(Debug, Clone)]
pub struct ReplicationSettings {
    /// `storage.replicated_append_ms_max`.
    pub append_wait: Duration,
    /// `storage.raft_election_ms_max`: how long to wait for a new leader
    /// before trying the old one again.
    pub election_wait: Duration,
    /// `storage.replicated_keys_max`.
    pub keys_max: usize,
    /// `storage.raft_calls_max`: appends nobody waits for under way at once.
    pub background_max: usize,
    /// The Raft timers.
    pub raft: Arc<sift_raft::openraft::Config>,
}

impl ReplicationSettings {
    /// How long to wait before trying a batch again: for a new leader when
    /// none is known (an election), else a few heartbeats (a leader that
    /// knows it lost its place, or a call that got no answer, is heard of
    /// by then).
    pub fn retry_wait(&self, leader_known: bool) -> Duration {
        match leader_known {
            true => Duration::from_millis(self.raft.heartbeat_interval.saturating_mul(2)),
            false => self.election_wait,
        }
    }

    /// The settings of `config` (validated: the timers are in order).
    pub fn of(config: &StorageConfig) -> Result<ReplicationSettings, String> {
        let raft = sift_raft::openraft::Config {
            cluster_name: "sift".into(),
            heartbeat_interval: config.raft_heartbeat_ms,
            election_timeout_min: config.raft_election_ms_min,
            election_timeout_max: config.raft_election_ms_max,
            // Logs are not purged yet: no snapshot is ever needed but the
            // (tiny) one a new member may be sent.
            snapshot_policy: sift_raft::openraft::SnapshotPolicy::Never,
            ..sift_raft::openraft::Config::default()
        };
        let raft = raft.validate().map_err(|error| format!("storage raft timers: {error}"))?;
        Ok(ReplicationSettings {
            append_wait: Duration::from_millis(config.replicated_append_ms_max),
            election_wait: Duration::from_millis(config.raft_election_ms_max),
            keys_max: config.replicated_keys_max,
            background_max: config.raft_calls_max,
            raft: Arc::new(raft),
        })
    }
}

/// What a replica starts with besides its broker's name.
pub struct StartContext {
    /// Where its calls go.
    pub transport: LinkTransport,
    /// Where its applied state changes go.
    pub sink: StateSink,
    /// The broker's data id and the ones it heard.
    pub data_ids: Arc<identity::DataIds>,
    /// How it came to start.
    pub arrival: rejoin::Arrival,
}

/// A started replica and the transport its publishes are forwarded on.
pub(crate) struct Started {
    pub(crate) replica: Replica,
    pub(crate) transport: LinkTransport,
    /// Where messages queue for the submitter ([`submit`]).
    pub(crate) queue: submit::Queue,
}

/// This broker's part in a replicated stream.
pub struct Replication {
    stream: String,
    members: Vec<String>,
    dir: PathBuf,
    log: Arc<Log>,
    /// Woken when more is committed (the stream's consumers wait on it).
    appended: Arc<Notify>,
    committed_seq: Arc<AtomicU64>,
    started: OnceLock<Started>,
    settings: ReplicationSettings,
    /// State changes under way that nobody waits for, against
    /// `settings.background_max`.
    background: Arc<AtomicUsize>,
    /// Messages in the submitter's queue.
    queued: AtomicUsize,
    /// Durable positions waiting to be proposed ([`durables`]).
    positions: durables::PositionSlots,
    /// Set when the replica stops: its background tasks end.
    stopped: AtomicBool,
}

/// Where a replica's applied state changes go, with the stream's name:
/// the broker's storage, which makes and moves durables by them.
pub type StateSink = Arc<dyn Fn(&str, Bytes) + Send + Sync>;

impl std::fmt::Debug for Replication {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Replication")
            .field("stream", &self.stream)
            .field("members", &self.members)
            .field("committed_seq", &self.committed_seq())
            .finish_non_exhaustive()
    }
}

impl Replication {
    /// The replication of the stream `definition` whose log is `log` in
    /// `dir`; its replica starts with [`Replication::start`].
    pub fn new(
        definition: &StreamDefinition,
        dir: &Path,
        log: Arc<Log>,
        appended: Arc<Notify>,
        settings: ReplicationSettings,
    ) -> Replication {
        Replication {
            stream: definition.name.clone(),
            members: definition.members.clone(),
            dir: dir.to_path_buf(),
            log,
            appended,
            committed_seq: Arc::default(),
            started: OnceLock::new(),
            settings,
            background: Arc::default(),
            queued: AtomicUsize::new(0),
            positions: durables::PositionSlots::default(),
            stopped: AtomicBool::new(false),
        }
    }

    /// Stores a persistent message on the group, after those queued
    /// before it; `gate` hears the outcome.
    pub(crate) fn append_for(&self, append: sift_raft::Append, gate: Arc<ConfirmGate>) {
        self.submit(append, submit::Done::Gate(gate));
    }

    /// Stores a message nobody waits for on the group, in its order;
    /// dropped (counted) while `storage.raft_calls_max` messages wait in
    /// the queue (persistent ones are bounded by their publishers' windows).
    pub(crate) fn append_in_background(&self, append: sift_raft::Append) {
        if self.queued.load(Ordering::Acquire) >= self.settings.background_max {
            if let Some(started) = self.started.get() {
                crate::stats::bump(&started.transport.stats().replicated_unconfirmed_dropped);
            }
            return;
        }
        self.submit(append, submit::Done::Nothing);
    }

    /// Counts a state change proposed in the background; false (counted)
    /// past `storage.raft_calls_max` of them under way.
    fn begin_background(&self) -> bool {
        if self.background.fetch_add(1, Ordering::AcqRel) >= self.settings.background_max {
            self.background.fetch_sub(1, Ordering::AcqRel);
            if let Some(started) = self.started.get() {
                crate::stats::bump(&started.transport.stats().replicated_unconfirmed_dropped);
            }
            return false;
        }
        true
    }

    fn end_background(&self) {
        self.background.fetch_sub(1, Ordering::AcqRel);
    }

    /// The brokers of the group as configured (when it was formed or
    /// this broker joined it).
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// The brokers of the group now: its voters as the replica knows them
    /// (they change with `sift stream move`), else as configured.
    pub fn voters(&self) -> Vec<String> {
        match self.started.get() {
            Some(started) => started.replica.voters().into_iter().map(|(_, name)| name).collect(),
            None => self.members.clone(),
        }
    }

    /// Chooses this replica's incarnation as one that joins a group that
    /// exists, before it starts: see [`JOINING_FILE`].
    pub fn mark_joining(&self) -> Result<(), String> {
        rejoin::new_incarnation(&self.dir, false)
            .map(|_| ())
            .map_err(|error| format!("stream {}: cannot mark its replica as joining: {error}", self.stream))
    }

    /// The committed sequence: how far this replica's consumers read.
    pub fn committed_seq(&self) -> u64 {
        self.committed_seq.load(Ordering::Acquire)
    }

    /// The replica, once started.
    pub fn replica(&self) -> Option<&Replica> {
        self.started.get().map(|started| &started.replica)
    }

    pub(crate) fn started_or_refusal(&self) -> Result<&Started, forward::AppendRefusal> {
        self.started.get().ok_or_else(|| {
            (ErrorCode::NoQuorum, format!("stream {}: this broker's replica is starting; retry", self.stream))
        })
    }

    /// Starts the replica of the broker named `own_name`, its calls going
    /// over `transport`, as the incarnation [`rejoin`] decides; a group
    /// that has no log yet is made of the configured members (each member
    /// does so alike, which Raft allows), unless the replica joins or
    /// rejoins a group that exists.
    pub async fn start(self: &Arc<Self>, own_name: &str, context: StartContext) -> Result<(), String> {
        if self.started.get().is_some() {
            return Ok(());
        }
        if !self.members.iter().any(|member| member == own_name) {
            return Err(format!(
                "stream {}: broker {own_name} is not among its members {:?}",
                self.stream, self.members
            ));
        }
        let StartContext { transport, sink, data_ids, arrival } = context;
        let fresh = self.log.last_seq() == 0 && !self.dir.join(sift_raft::log_store::META_FILE).exists();
        let incarnation = self.incarnation(own_name, &transport, &data_ids, arrival, fresh).await?;
        let store = SegmentLogStore::on_log(self.log.clone(), &self.dir).map_err(|error| error.to_string())?;
        let state = AppliedState::with_hook(self.on_applied(sink), self.settings.keys_max);
        let network = GroupNetwork::new(transport.clone(), &self.stream);
        let id = node_id_of(own_name, incarnation);
        let replica = Replica::start(id, store, state, self.settings.raft.clone(), network)
            .await
            .map_err(|error| format!("stream {}: {error}", self.stream))?;
        let rejoining = self.dir.join(rejoin::REJOIN_FILE).exists();
        if fresh && !rejoining && !self.dir.join(JOINING_FILE).exists() {
            self.form_group(&replica, own_name).await?;
        }
        let (queue, queued) = tokio::sync::mpsc::unbounded_channel();
        if self.started.set(Started { replica, transport: transport.clone(), queue }).is_ok() {
            tokio::spawn(self.clone().run_submitter(queued));
            self.introduce_in_background(own_name, transport.clone(), data_ids.own());
            if rejoining {
                self.rejoin_in_background(own_name, id, transport);
            }
        }
        Ok(())
    }

    /// What the replica does with each applied entry: the state changes
    /// to `sink`, then the committed sequence raised and its readers woken.
    fn on_applied(&self, sink: StateSink) -> Arc<dyn Fn(u64, Vec<Bytes>) + Send + Sync> {
        let committed = self.committed_seq.clone();
        let appended = self.appended.clone();
        let stream = self.stream.clone();
        Arc::new(move |applied_seq: u64, states: Vec<Bytes>| {
            // The state first: a durable made at a sequence exists before a
            // consumer can read past it.
            for state in states {
                sink(&stream, state);
            }
            committed.fetch_max(applied_seq, Ordering::AcqRel);
            appended.notify_waiters();
        })
    }

    /// Forms a new group: its first member at once; each other member only
    /// if it has heard nothing of the group after a few election timeouts
    /// (its first member down). Members that all stood at once would split
    /// the first votes, and the loser's candidacy would unseat the winner a
    /// moment later.
    async fn form_group(&self, replica: &Replica, own_name: &str) -> Result<(), String> {
        if self.members.first().map(String::as_str) == Some(own_name) {
            return replica.initialize(&self.members).await.map_err(|error| format!("stream {}: {error}", self.stream));
        }
        let (replica, members, stream) = (replica.clone(), self.members.clone(), self.stream.clone());
        let patience = self.settings.election_wait.saturating_mul(FORMING_PATIENCE_ELECTIONS);
        tokio::spawn(async move {
            tokio::time::sleep(patience).await;
            if replica.raft().is_initialized().await.unwrap_or(true) {
                return;
            }
            tracing::info!(%stream, "no word from the group's first member: forming the group from here");
            if let Err(error) = replica.initialize(&members).await {
                tracing::warn!(%stream, %error, "the group was not formed");
            }
        });
        Ok(())
    }

    /// Stops the replica.
    pub async fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        if let Some(started) = self.started.get() {
            let _ = started.replica.shutdown().await;
        }
    }

    /// The group as `sift stream info` shows it: leader, term, and each
    /// member's replicated sequence and lag (as the leader knows them).
    pub fn info_json(&self) -> Value {
        let Some(started) = self.started.get() else {
            return json!({ "members": self.members, "state": "starting" });
        };
        let status = started.replica.status();
        let name_of = |id: u64| status.members.get(&id).cloned().unwrap_or_else(|| id.to_string());
        // Lag in Raft entries (a batch of messages is one), as the leader
        // knows it; a follower knows only its own place.
        let replicas: Vec<Value> = status
            .members
            .iter()
            .map(|(id, name)| {
                let replicated_index = status.replicated_index.get(id).copied().flatten();
                let lag = status.last_index.zip(replicated_index).map(|(last, matched)| last.saturating_sub(matched));
                json!({
                    "broker": name,
                    "node_id": id,
                    "role": if status.leader == Some(*id) { "leader" } else { "follower" },
                    "replicated_index": replicated_index,
                    "lag_entries": lag,
                })
            })
            .collect();
        json!({
            "members": self.voters(),
            "leader": status.leader.map(name_of),
            "term": status.term,
            "this_broker": name_of(status.id),
            "last_index": status.last_index,
            "committed_seq": status.committed_seq,
            "replicas": replicas,
        })
    }
}
