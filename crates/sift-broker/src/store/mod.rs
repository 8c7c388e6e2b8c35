//! Persistent delivery: streams, durable subscriptions, replay and archive
//! queries, on the message log of `sift-store`.
//!
//! [`Storage`] owns every open stream and durable subscription of a broker.
//! A published message is stored in every named stream whose topics hold
//! it, whatever its mode; a `persistent` message that no named stream holds
//! goes to the `default` stream. The publisher of a persistent message is
//! confirmed once it is stored ([`gate`]). Stream subscriptions (replays and
//! durables) read the log through a [`consumer::Consumer`], so old and live
//! messages come the same way.
//!
//! On disk, under `data_dir`: `streams/NAME/` (a `stream.json` definition and
//! the segment files, `docs/STORAGE.md`) and `durables/NAME/` (a
//! `durable.json` definition and a position log), and `broker.lock`, held
//! by the one broker that owns the directory ([`lock`]).

pub mod consumer;
pub mod cursor;
pub mod durable;
pub mod gate;
pub mod lock;
pub mod manage;
pub mod query;
mod ranges;
pub mod registry;
pub mod stream;
pub mod subscribe;

use std::path::PathBuf;

use serde::Deserialize;

pub use lock::{DataDirLock, LockError, LockState};
pub use registry::Storage;
pub use stream::{StreamDefinition, DEFAULT_STREAM};

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
        }
    }
}

impl StorageConfig {
    /// Checks the values that must be positive or parse.
    pub fn validate(&self) -> Result<(), String> {
        self.fsync_default
            .parse::<sift_store::FsyncPolicy>()
            .map_err(|error| format!("storage.fsync_default: {error}"))?;
        let positive = [
            ("storage.segment_bytes_max", self.segment_bytes_max),
            ("storage.append_queue_bytes_max", self.append_queue_bytes_max),
            ("storage.stream_queue_capacity", u64::from(self.stream_queue_capacity)),
            ("storage.read_batch_records", self.read_batch_records as u64),
            ("storage.read_batch_bytes", self.read_batch_bytes as u64),
            ("storage.position_sync_ms", self.position_sync_ms),
            ("storage.query_pending_bytes_max", self.query_pending_bytes_max),
        ];
        match positive.iter().find(|(_, value)| *value == 0) {
            Some((name, _)) => Err(format!("{name} must be greater than 0")),
            None => Ok(()),
        }
    }
}

/// Syncs durable positions to disk every `storage.position_sync_ms` until
/// the broker shuts down (positions reach the operating system on every
/// change already; this bounds what a power loss can take back).
pub async fn sync_positions(shared: std::sync::Arc<crate::server::BrokerShared>) {
    let every = std::time::Duration::from_millis(shared.config.storage.position_sync_ms);
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = shared.shutdown_watch();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.changed() => return,
        }
        let syncing = shared.clone();
        // fsync blocks; keep it off the runtime's workers.
        let _ = tokio::task::spawn_blocking(move || syncing.storage.sync_positions()).await;
    }
}
