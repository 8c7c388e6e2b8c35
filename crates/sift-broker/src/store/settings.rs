//! The settings of storage, read before any stream opens: the `[storage]`
//! section, stream definitions and their names, and what storage reports
//! when it cannot do something. They sit below the store itself so that
//! the broker's configuration can hold them without naming the store.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sift_core::TopicFilter;
use sift_store::FsyncPolicy;

use super::lock::LockError;

/// Name of the stream that keeps persistent messages no named stream holds.
pub const DEFAULT_STREAM: &str = "default";

/// Longest stream or durable subscription name.
pub const NAME_BYTES_MAX: usize = 128;

/// File holding a stream's definition, in its directory.
pub const DEFINITION_FILE: &str = "stream.json";

/// A stream as configured: in `[[streams]]`, by `sift stream add`, or in
/// its `stream.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamDefinition {
    /// The stream's name: letters, digits, `-`, `_` and `.`.
    pub name: String,
    /// Topic filters whose messages it stores (every mode).
    #[serde(default)]
    pub topics: Vec<String>,
    /// Messages older than this are removed (whole segments); 0 = no limit.
    #[serde(default)]
    pub max_age_ms: u64,
    /// Stored bytes kept at most (whole segments); 0 = no limit.
    #[serde(default)]
    pub max_bytes: u64,
    /// Messages kept at most (whole segments); 0 = no limit.
    #[serde(default)]
    pub max_msgs: u64,
    /// `always`, `every:MS` or `os`; empty = `storage.fsync_default`.
    #[serde(default)]
    pub fsync: String,
    /// Brokers that keep the stream: 1 (this broker alone), or up to
    /// [`REPLICAS_MAX`], a Raft group of that many replicas (an odd number
    /// is best: an even group tolerates no more failures than the odd one
    /// below it, but keeps a copy more).
    #[serde(default = "one_replica", skip_serializing_if = "is_one_replica")]
    pub replicas: u32,
    /// The brokers of a replicated stream's group, by network name; as
    /// many as `replicas`, and the same list on each of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
}

/// Most replicas a stream may have.
pub const REPLICAS_MAX: u32 = 7;

fn one_replica() -> u32 {
    1
}

fn is_one_replica(replicas: &u32) -> bool {
    *replicas == 1
}

/// Checks a stream or durable subscription name, which becomes a directory name.
pub fn check_name(kind: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > NAME_BYTES_MAX {
        return Err(format!("{kind} name {name:?} must be 1 to {NAME_BYTES_MAX} bytes"));
    }
    if name.starts_with('.') {
        return Err(format!("{kind} name {name:?} must not start with '.'"));
    }
    match name.char_indices().find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        Some((position, c)) => {
            Err(format!("{kind} name {name:?} has {c:?} at byte {position}; use letters, digits, '-', '_' and '.'"))
        }
        None => Ok(()),
    }
}

impl StreamDefinition {
    /// The definition of the `default` stream.
    pub fn default_stream(config: &StorageConfig) -> StreamDefinition {
        StreamDefinition {
            name: DEFAULT_STREAM.to_string(),
            topics: Vec::new(),
            max_age_ms: config.default_max_age_ms,
            max_bytes: config.default_max_bytes,
            max_msgs: config.default_max_msgs,
            fsync: String::new(),
            replicas: 1,
            members: Vec::new(),
        }
    }

    /// True when the stream is kept by a Raft group of brokers.
    pub fn is_replicated(&self) -> bool {
        self.replicas > 1
    }

    /// Checks what a replicated stream needs: at most [`REPLICAS_MAX`] replicas,
    /// as many distinct members, `always` as its policy (a confirm means
    /// on disk at a quorum), and no retention (not yet applied through the
    /// group's log).
    fn check_replication(&self, fsync: FsyncPolicy) -> Result<(), String> {
        let name = &self.name;
        if self.replicas == 0 || self.replicas > REPLICAS_MAX {
            return Err(format!("stream {name}: replicas = {} must be 1 to {REPLICAS_MAX}", self.replicas));
        }
        if !self.is_replicated() {
            return match self.members.is_empty() {
                true => Ok(()),
                false => Err(format!("stream {name}: members are for a replicated stream (replicas > 1)")),
            };
        }
        if self.name == DEFAULT_STREAM {
            return Err("the default stream is this broker's own; it cannot be replicated".into());
        }
        let distinct: std::collections::BTreeSet<&String> = self.members.iter().collect();
        if distinct.len() != self.members.len() || self.members.len() != self.replicas as usize {
            return Err(format!(
                "stream {name}: replicas = {} needs as many distinct broker names in members, not {:?}",
                self.replicas, self.members
            ));
        }
        if fsync != FsyncPolicy::Always {
            return Err(format!("stream {name}: a replicated stream confirms once a quorum has a message on disk; its fsync must be always, not {fsync}"));
        }
        if self.max_age_ms != 0 || self.max_bytes != 0 || self.max_msgs != 0 {
            return Err(format!(
                "stream {name}: retention (max_age_ms, max_bytes, max_msgs) is not offered on a replicated stream yet"
            ));
        }
        Ok(())
    }

    /// Checks the definition and parses its topic filters and policy.
    pub fn parse(&self, config: &StorageConfig) -> Result<(Vec<TopicFilter>, FsyncPolicy), String> {
        check_name("stream", &self.name)?;
        if self.name != DEFAULT_STREAM && self.topics.is_empty() {
            return Err(format!("stream {} needs at least one topic filter", self.name));
        }
        if self.name == DEFAULT_STREAM && !self.topics.is_empty() {
            return Err(
                "the default stream takes the persistent messages no named stream holds; it has no topics".into()
            );
        }
        let topics = self
            .topics
            .iter()
            .map(|topic| {
                TopicFilter::new(topic.as_str())
                    .map_err(|error| format!("stream {}: topic filter {topic:?}: {error}", self.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let fsync_text = if self.fsync.is_empty() { config.fsync_default.as_str() } else { self.fsync.as_str() };
        let fsync_text = match (self.is_replicated(), self.fsync.is_empty()) {
            (true, true) => "always",
            _ => fsync_text,
        };
        let fsync = fsync_text
            .parse::<FsyncPolicy>()
            .map_err(|error| format!("stream {}: fsync {fsync_text:?}: {error}", self.name))?;
        self.check_replication(fsync)?;
        Ok((topics, fsync))
    }
}

/// Why storage could not be opened or changed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A definition or name is invalid.
    #[error("{0}")]
    Invalid(String),
    /// A stream's log could not be opened.
    #[error("cannot open stream {stream}: {source}")]
    Open {
        /// The stream.
        stream: String,
        /// Why.
        source: sift_store::StoreError,
    },
    /// Another broker holds the data directory, or it could not be locked.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The message log failed.
    #[error(transparent)]
    Store(#[from] sift_store::StoreError),
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// `[storage]`: where and how messages are stored.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// Fsync policy of streams that do not choose one: `always` (on disk
    /// before the confirm, concurrent publishes sharing one fsync),
    /// `every:MS` or `os`.
    pub fsync_default: String,
    /// Retention of the `default` stream by age; 0 = no limit.
    pub default_max_age_ms: u64,
    /// Retention of the `default` stream by bytes; 0 = no limit.
    pub default_max_bytes: u64,
    /// Retention of the `default` stream by message count; 0 = no limit.
    pub default_max_msgs: u64,
    /// Largest segment file; a stream starts a new one past it.
    pub segment_bytes_max: u64,
    /// Bytes of unconfirmed appends (best-effort and reliable messages on
    /// named streams) that may wait for a stream's appender; past it they
    /// are not stored, and counted. Persistent appends are bounded by the
    /// publishers' confirm windows instead.
    pub append_queue_bytes_max: u64,
    /// Queue bound (messages) of a stream subscription: how far a consumer
    /// reads ahead of its subscriber's acknowledgements.
    pub stream_queue_capacity: u32,
    /// Records a consumer reads from the log at a time.
    pub read_batch_records: usize,
    /// Bytes a consumer reads from the log at a time.
    pub read_batch_bytes: usize,
    /// Interval of the position sync: durable positions are written to the
    /// operating system on every change and synced to disk this often.
    pub position_sync_ms: u64,
    /// Bytes of archive query results that may wait unsent on a connection;
    /// the query waits for the client to read them.
    pub query_pending_bytes_max: u64,
    /// Durable subscriptions a broker keeps at most.
    pub durables_max: usize,
    /// Streams a broker keeps at most (besides `default`).
    pub streams_max: usize,
    /// The stream that holds the queues' messages (STOMP `/queue/`, JMS
    /// queues), created when the first queue is declared: every mode is
    /// stored, so what is sent to a queue waits for its consumer.
    pub queue_stream: String,
    /// Message groups (`JMSXGroupID`) whose member a durable subscription
    /// shared by several subscribers remembers; past it the oldest
    /// assignment is forgotten (counted), and that group's next message
    /// picks a member afresh.
    pub message_groups_max: usize,
    /// Messages a shared durable holds back because no subscriber's own
    /// filter passes them (a JMS queue whose consumers all have
    /// selectors); past it the durable reads no further until a subscriber
    /// comes, and they wait in the stream.
    pub parked_max: usize,
    /// Messages one queue may hold waiting for a consumer; a publish past
    /// it is refused (`queue_full`) and not stored.
    pub queue_max_msgs: u64,
    /// Interval of a replicated stream's leader's heartbeats.
    pub raft_heartbeat_ms: u64,
    /// A follower that hears no leader for a random time between this and
    /// `raft_election_ms_max` starts an election.
    pub raft_election_ms_min: u64,
    /// See `raft_election_ms_min`.
    pub raft_election_ms_max: u64,
    /// Longest a persistent publish to a replicated stream waits for a
    /// quorum (through elections and forwarding to the leader) before it
    /// is refused with `no_quorum`.
    pub replicated_append_ms_max: u64,
    /// Keys of the last messages each replicated stream remembers, so that
    /// a publish sent again is stored once.
    pub replicated_keys_max: usize,
    /// Calls between replicas (and publishes forwarded to leaders) this
    /// broker waits for the answer of at once; past it a call fails at
    /// once (counted) and is tried again by its caller.
    pub raft_calls_max: usize,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            fsync_default: "always".to_string(),
            default_max_age_ms: 0,
            default_max_bytes: 0,
            default_max_msgs: 0,
            segment_bytes_max: sift_store::SEGMENT_BYTES_MAX_DEFAULT,
            append_queue_bytes_max: sift_store::APPEND_QUEUE_BYTES_MAX_DEFAULT,
            stream_queue_capacity: 1_024,
            read_batch_records: 512,
            read_batch_bytes: 1024 * 1024,
            position_sync_ms: 1_000,
            query_pending_bytes_max: 4 * 1024 * 1024,
            durables_max: 10_000,
            streams_max: 1_000,
            queue_stream: "queues".to_string(),
            message_groups_max: 65_536,
            parked_max: 10_000,
            queue_max_msgs: 1_000_000,
            raft_heartbeat_ms: 100,
            raft_election_ms_min: 600,
            raft_election_ms_max: 1_200,
            replicated_append_ms_max: 10_000,
            replicated_keys_max: 100_000,
            raft_calls_max: 16_384,
        }
    }
}

impl StorageConfig {
    /// Checks the values that must be positive or parse.
    pub fn validate(&self) -> Result<(), String> {
        self.fsync_default
            .parse::<sift_store::FsyncPolicy>()
            .map_err(|error| format!("storage.fsync_default: {error}"))?;
        check_name("stream", &self.queue_stream).map_err(|error| format!("storage.queue_stream: {error}"))?;
        let positive = [
            ("storage.segment_bytes_max", self.segment_bytes_max),
            ("storage.append_queue_bytes_max", self.append_queue_bytes_max),
            ("storage.stream_queue_capacity", u64::from(self.stream_queue_capacity)),
            ("storage.read_batch_records", self.read_batch_records as u64),
            ("storage.read_batch_bytes", self.read_batch_bytes as u64),
            ("storage.position_sync_ms", self.position_sync_ms),
            ("storage.query_pending_bytes_max", self.query_pending_bytes_max),
            ("storage.message_groups_max", self.message_groups_max as u64),
            ("storage.parked_max", self.parked_max as u64),
            ("storage.queue_max_msgs", self.queue_max_msgs),
            ("storage.raft_heartbeat_ms", self.raft_heartbeat_ms),
            ("storage.replicated_append_ms_max", self.replicated_append_ms_max),
            ("storage.raft_calls_max", self.raft_calls_max as u64),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("{name} must be greater than 0"));
        }
        if !(self.raft_heartbeat_ms < self.raft_election_ms_min
            && self.raft_election_ms_min < self.raft_election_ms_max)
        {
            return Err(format!(
                "storage.raft_heartbeat_ms ({}) < raft_election_ms_min ({}) < raft_election_ms_max ({}) must hold",
                self.raft_heartbeat_ms, self.raft_election_ms_min, self.raft_election_ms_max
            ));
        }
        Ok(())
    }
}
