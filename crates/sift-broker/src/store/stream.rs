//! A stream: a named, stored log of the messages published on some topics.
//!
//! The definition (name, topics, retention, fsync policy) is kept beside the
//! segments as `stream.json`, written atomically, so that a stream added at
//! run time comes back after a restart. The log itself is `sift-store`'s.
//! A replicated stream's log is also its Raft group's log
//! ([`crate::replication`]): messages reach it through the group, and its
//! readers stop at the committed sequence.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use serde_json::{json, Value};
use sift_core::{TopicFilter, TopicName};
use sift_proto::ErrorCode;
use sift_store::{FsyncPolicy, Log, LogConfig, Recovery, Retention, StoreError};
use tokio::sync::Notify;

use super::gate::ConfirmGate;
use super::settings::{StorageConfig, StreamDefinition};
use super::stream_reader::StreamReader;
use crate::replication::{Replication, ReplicationSettings};

/// One open stream.
#[derive(Debug)]
pub struct Stream {
    /// Its definition.
    pub definition: StreamDefinition,
    /// Its parsed topic filters, as opened.
    pub topics: Vec<TopicFilter>,
    /// Topic filters added since it was opened (the queues stream's, one
    /// per queue declared): stored in its definition file at once, and
    /// among `topics` after a restart.
    added_topics: RwLock<Vec<TopicFilter>>,
    /// Its directory, where its definition file is rewritten.
    dir: PathBuf,
    /// Its policy, parsed.
    pub fsync: FsyncPolicy,
    /// The message log (a replicated stream's Raft log).
    pub log: Arc<Log>,
    /// This broker's part in the stream's group, when replicated.
    replication: Option<Arc<Replication>>,
    /// Notified each time the appender made more messages readable.
    pub appended: Arc<Notify>,
    /// How the last persistent append fared.
    health: Arc<WriteHealth>,
}

/// How long after a failed write persistent publishes are refused at once
/// instead of queued for a disk that refuses them; the first one after it
/// is let through to find out whether space came back.
pub const FAILED_WRITE_HOLD_NS: u64 = 250_000_000;

/// The outcome of the last persistent append of a stream.
#[derive(Debug, Default)]
struct WriteHealth {
    /// When the last append failed (ns since the epoch), 0 when it succeeded.
    failed_at_ns: AtomicU64,
    /// True when that failure was a full disk.
    full: AtomicBool,
}

impl WriteHealth {
    fn record(&self, result: &Result<u64, StoreError>) {
        match result {
            Ok(_) => self.failed_at_ns.store(0, Ordering::Relaxed),
            Err(error) => {
                self.full.store(error.is_full(), Ordering::Relaxed);
                self.failed_at_ns.store(sift_core::system_now_ns().max(1), Ordering::Relaxed);
            }
        }
    }
}

impl Stream {
    /// Opens (or creates) the stream in `dir`, recovering its log.
    pub fn open(
        dir: &Path,
        definition: StreamDefinition,
        config: &StorageConfig,
    ) -> Result<(Stream, Recovery), super::StorageError> {
        let (topics, fsync) = definition.parse(config).map_err(super::StorageError::Invalid)?;
        let appended = Arc::new(Notify::new());
        let hook_target = appended.clone();
        let log_config = LogConfig {
            fsync,
            retention: Retention {
                max_age_ns: definition.max_age_ms.saturating_mul(1_000_000),
                max_bytes: definition.max_bytes,
                max_msgs: definition.max_msgs,
            },
            segment_bytes_max: config.segment_bytes_max,
            append_queue_bytes_max: config.append_queue_bytes_max,
            ..LogConfig::default()
        };
        let (log, recovery) = Log::open(dir, log_config, Box::new(move |_| hook_target.notify_waiters()))
            .map_err(|source| super::StorageError::Open { stream: definition.name.clone(), source })?;
        let log = Arc::new(log);
        let replication = match definition.is_replicated() {
            true => {
                let settings = ReplicationSettings::of(config).map_err(super::StorageError::Invalid)?;
                Some(Arc::new(Replication::new(&definition, dir, log.clone(), appended.clone(), settings)))
            }
            false => None,
        };
        let stream = Stream {
            definition,
            topics,
            added_topics: RwLock::default(),
            dir: dir.to_path_buf(),
            fsync,
            log,
            replication,
            appended,
            health: Arc::default(),
        };
        Ok((stream, recovery))
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.definition.name
    }

    /// This broker's part in the stream's group, when replicated.
    pub fn replication(&self) -> Option<&Arc<Replication>> {
        self.replication.as_ref()
    }

    /// The last sequence readers may read: the log's last, or for a
    /// replicated stream the committed one (an entry past it may still be
    /// overruled by a new leader).
    pub fn readable_seq(&self) -> u64 {
        match &self.replication {
            Some(replication) => replication.committed_seq().min(self.log.last_seq()),
            None => self.log.last_seq(),
        }
    }

    /// A reader of the stream's messages (see [`StreamReader`]).
    pub fn reader(&self) -> StreamReader {
        StreamReader::new(self.log.reader(), self.replication.is_some())
    }

    /// True when one of the stream's topic filters matches `topic`.
    pub fn holds(&self, topic: &TopicName) -> bool {
        self.topics.iter().any(|filter| filter.matches(topic))
            || self.added().iter().any(|filter| filter.matches(topic))
    }

    /// True when every topic `filter` matches is held by this stream.
    pub fn covers(&self, filter: &TopicFilter) -> bool {
        self.topics.iter().any(|topic| topic.covers(filter)) || self.added().iter().any(|topic| topic.covers(filter))
    }

    /// Every topic filter it holds: those it opened with and those added.
    pub fn topic_filters(&self) -> Vec<TopicFilter> {
        self.topics.iter().cloned().chain(self.added().iter().cloned()).collect()
    }

    fn added(&self) -> std::sync::RwLockReadGuard<'_, Vec<TopicFilter>> {
        self.added_topics.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds `filter` to the topics the stream holds, storing its definition
    /// again (atomically) first; false when it held it already.
    pub fn add_topic(&self, filter: TopicFilter) -> Result<bool, super::StorageError> {
        let mut added = self.added_topics.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.topics.contains(&filter) || added.contains(&filter) {
            return Ok(false);
        }
        let mut definition = self.definition.clone();
        definition.topics.extend(added.iter().chain(std::iter::once(&filter)).map(|topic| topic.as_str().to_string()));
        let text =
            serde_json::to_vec_pretty(&definition).map_err(|error| super::StorageError::Invalid(error.to_string()))?;
        sift_store::write_file_atomically(&self.dir.join(super::settings::DEFINITION_FILE), &text)?;
        added.push(filter);
        Ok(true)
    }

    /// True unless the last persistent append failed.
    pub fn is_writable(&self) -> bool {
        self.health.failed_at_ns.load(Ordering::Relaxed) == 0
    }

    /// The refusal for a persistent publish while the stream's last append
    /// failed less than [`FAILED_WRITE_HOLD_NS`] ago.
    pub fn refusal_while_failing(&self, now_ns: u64) -> Option<(ErrorCode, String)> {
        let failed_at_ns = self.health.failed_at_ns.load(Ordering::Relaxed);
        if failed_at_ns == 0 || now_ns.saturating_sub(failed_at_ns) >= FAILED_WRITE_HOLD_NS {
            return None;
        }
        let (code, why) = match self.health.full.load(Ordering::Relaxed) {
            true => (ErrorCode::StorageFull, "its disk is full"),
            false => (ErrorCode::StorageError, "its last write failed"),
        };
        Some((
            code,
            format!("persistent message not stored: stream {} refuses writes ({why}); retry later", self.name()),
        ))
    }

    /// Stores a message whose publisher waits for nothing. A full append
    /// queue drops it, counted by the log. A replicated stream stores only
    /// messages published at this broker, keyed by `key`: a copy forwarded
    /// by another broker was stored by the group already.
    pub fn append_unconfirmed(&self, timestamp_ns: u64, encoded: Bytes, key: Option<u64>) {
        if let Some(replication) = &self.replication {
            if let Some(key) = key {
                replication.append_in_background(sift_raft::Append { timestamp_ns, key, body: encoded });
            }
            return;
        }
        if let Err(error) = self.log.append(timestamp_ns, encoded, None) {
            tracing::debug!(stream = %self.name(), %error, "message not stored");
        }
    }

    /// Stores a persistent message; `gate` hears the outcome. `key` tells
    /// a replicated stream's group the message apart from one sent again.
    pub fn append_confirmed(&self, timestamp_ns: u64, encoded: Bytes, key: u64, gate: Arc<ConfirmGate>) {
        if let Some(replication) = &self.replication {
            let append = sift_raft::Append { timestamp_ns, key, body: encoded };
            return replication.append_for(append, gate);
        }
        let name = self.name().to_string();
        let health = self.health.clone();
        let completion_gate = gate.clone();
        let completion: sift_store::Completion = Box::new(move |result| {
            health.record(&result);
            completion_gate.stored(&name, result);
        });
        // A refused append never runs its completion: the gate hears it here.
        if let Err(error) = self.log.append(timestamp_ns, encoded, Some(completion)) {
            let result = Err(error);
            self.health.record(&result);
            gate.stored(self.name(), result);
        }
    }

    /// The stream as the `stream_info` JSON of `docs/PROTOCOL.md` §6.17.
    pub fn info_json(&self) -> Value {
        let stats = self.log.stats();
        json!({
            "name": self.definition.name,
            "topics": self.topic_filters().iter().map(TopicFilter::as_str).collect::<Vec<_>>(),
            "fsync": self.fsync.to_string(),
            "max_age_ms": self.definition.max_age_ms,
            "max_bytes": self.definition.max_bytes,
            "max_msgs": self.definition.max_msgs,
            "first_seq": stats.first_seq,
            "last_seq": stats.last_seq,
            "messages": stats.messages,
            "bytes": stats.bytes,
            "segments": stats.segments,
            "damaged_records": stats.damaged_records,
            "fsyncs": stats.fsyncs,
            "write_errors": stats.write_errors,
            "writable": self.is_writable(),
            "replicas": self.definition.replicas,
            "replication": self.replication.as_ref().map(|replication| replication.info_json()),
        })
    }
}
