//! The broker's streams and durable subscriptions, opened at start and
//! changed at run time.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use sift_core::{TopicFilter, TopicName};
use sift_filter::ContentFilter;
use sift_proto::{ErrorCode, FilterKind, StartPosition};

use super::consumer::{Consumer, MemberOptions};
use super::cursor::{Cursor, StoredPosition};
use super::durable::{DurableDefinition, DurableRecord};
use super::queue_depth::QueueDepth;
use super::settings::{check_name, StreamDefinition, DEFAULT_STREAM, DEFINITION_FILE};
use super::settings::{StorageConfig, StorageError};
use super::stream::Stream;
use super::DataDirLock;
use crate::subscription::SubRef;

/// A refusal to send back to a client: its code and what, where, why.
pub type Refusal = (ErrorCode, String);

/// Position of the fsync maximum in [`Storage::totals`].
const FSYNC_MAX_INDEX: usize = 5;

/// Directory of the streams, under `data_dir`.
const STREAMS_DIR: &str = "streams";
/// Where a damaged replica's files are set aside (never read again).
const DAMAGED_DIR: &str = "damaged";
/// Directory of the durable subscriptions, under `data_dir`.
pub(crate) const DURABLES_DIR: &str = "durables";

/// Every stream and durable subscription of one broker.
#[derive(Debug)]
pub struct Storage {
    root: PathBuf,
    config: StorageConfig,
    named: RwLock<Vec<Arc<Stream>>>,
    /// True when at least one named stream exists: lets the publish path
    /// skip the stream table for non-persistent messages otherwise.
    any_named: AtomicBool,
    default: Arc<Stream>,
    durables: Mutex<BTreeMap<String, Arc<Consumer>>>,
    /// What each declared queue holds, by its topic.
    queue_depths: RwLock<HashMap<String, Arc<QueueDepth>>>,
    /// True once a queue is declared: lets the publish path skip the table.
    any_queue: AtomicBool,
    /// The data directory's lock, held from before anything under it is
    /// opened until [`Storage::release`].
    lock: Mutex<Option<DataDirLock>>,
}

/// A durable subscription opened for a subscriber.
#[derive(Debug)]
pub struct OpenedDurable {
    /// Its consumer.
    pub consumer: Arc<Consumer>,
    /// True when no task runs the consumer: the caller starts one.
    pub start_task: bool,
    /// True when the durable was created now.
    pub created: bool,
}

/// What [`Storage::declare_queue`] found or made.
#[derive(Debug)]
pub struct DeclaredQueue {
    /// The queue's shared durable subscription.
    pub consumer: Arc<Consumer>,
    /// The stream that holds the queue's messages.
    pub stream: Arc<Stream>,
    /// True when the stream was created now.
    pub stream_created: bool,
    /// The topic added to the stream now, if it was not there.
    pub topic_added: Option<TopicFilter>,
    /// True when the durable subscription was created now.
    pub durable_created: bool,
}

/// What a subscriber asks of a durable subscription.
#[derive(Debug)]
pub struct DurableRequest<'a> {
    /// Its name.
    pub name: &'a str,
    /// The stream it asks for; empty = the one whose topics cover its topic filter, else `default`.
    pub stream: &'a str,
    /// Its topic filter.
    pub topic_filter: &'a TopicFilter,
    /// Its content filter language.
    pub filter_kind: FilterKind,
    /// Its content filter text.
    pub filter: &'a str,
    /// The parsed content filter.
    pub content: Option<Arc<ContentFilter>>,
    /// True for a shared durable.
    pub shared: bool,
    /// Where a new durable starts.
    pub start: StartPosition,
    /// How the subscriber takes part (`CAUGHT_UP`, its own filter).
    pub member: MemberOptions,
}

/// The first sequence a consumer starting at `start` reads.
pub fn start_seq(stream: &Stream, start: &StartPosition) -> Result<u64, sift_store::StoreError> {
    let log = &stream.log;
    let last_seq = stream.readable_seq();
    Ok(match start {
        StartPosition::New => last_seq + 1,
        StartPosition::First => log.first_seq(),
        StartPosition::Last(count) => (last_seq + 1).saturating_sub(*count).max(log.first_seq()),
        StartPosition::Seq(seq) => (*seq).max(1),
        StartPosition::Time(timestamp_ns) => log.seq_at_or_after_time(*timestamp_ns)?,
    })
}

impl Storage {
    /// Opens every stream and durable under `data_dir`, adding the streams
    /// of the configuration (whose definitions win over stored ones).
    pub fn open(
        data_dir: &Path,
        config: &StorageConfig,
        configured: &[StreamDefinition],
    ) -> Result<Storage, StorageError> {
        config.validate().map_err(StorageError::Invalid)?;
        let lock = DataDirLock::acquire(data_dir)?;
        let root = data_dir.to_path_buf();
        for dir in [STREAMS_DIR, DURABLES_DIR] {
            let path = root.join(dir);
            std::fs::create_dir_all(&path).map_err(|source| StorageError::Io { path, source })?;
        }
        let mut definitions = stored_stream_definitions(&root.join(STREAMS_DIR))?;
        for definition in configured {
            definitions.insert(definition.name.clone(), definition.clone());
        }
        definitions.insert(DEFAULT_STREAM.to_string(), StreamDefinition::default_stream(config));
        let mut named = Vec::new();
        let mut default = None;
        for (name, definition) in definitions {
            let stream = Arc::new(open_stream(&root, definition, config)?);
            match name == DEFAULT_STREAM {
                true => default = Some(stream),
                false => named.push(stream),
            }
        }
        let default = default.ok_or_else(|| StorageError::Invalid("the default stream did not open".into()))?;
        let storage = Storage {
            any_named: AtomicBool::new(!named.is_empty()),
            named: RwLock::new(named),
            default,
            durables: Mutex::new(BTreeMap::new()),
            queue_depths: RwLock::new(HashMap::new()),
            any_queue: AtomicBool::new(false),
            lock: Mutex::new(Some(lock)),
            config: config.clone(),
            root,
        };
        storage.load_durables()?;
        storage.count_queue_depths();
        Ok(storage)
    }

    /// Gives up the data directory's lock, once the broker that owns this
    /// storage has stopped: another broker may then open the directory
    /// while tasks of this one still hold references to it.
    pub fn release(&self) {
        let lock = self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        drop(lock);
    }

    fn load_durables(&self) -> Result<(), StorageError> {
        let dir = self.root.join(DURABLES_DIR);
        for path in subdirectories(&dir)? {
            let (record, position) = match DurableRecord::load(&path) {
                Ok(loaded) => loaded,
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "a durable subscription cannot be loaded; left as it is");
                    continue;
                }
            };
            let definition = record.definition.clone();
            let Some(stream) = self.stream(&definition.stream) else {
                tracing::warn!(durable = %definition.name, stream = %definition.stream, "the durable's stream is gone; durable left as it is");
                continue;
            };
            let (topic_filter, content) = match parse_definition(&definition) {
                Ok(parsed) => parsed,
                Err(error) => {
                    tracing::warn!(durable = %definition.name, %error, "the durable's definition does not parse; left as it is");
                    continue;
                }
            };
            let cursor = Arc::new(Cursor::resuming(&position));
            let consumer = Consumer::new(stream, cursor, topic_filter, content, Some(record));
            self.durables_lock().insert(definition.name.clone(), Arc::new(consumer));
        }
        Ok(())
    }

    /// Counts what each queue's durable (loaded from disk) has not had
    /// acknowledged: the stored messages on its topic above its floor that
    /// it is not done with.
    fn count_queue_depths(&self) {
        for consumer in self.durables() {
            let Some(record) = &consumer.durable else { continue };
            let definition = &record.definition;
            let is_queue = definition.shared
                && definition.stream == self.config.queue_stream
                && definition.name == format!("queue.{}", definition.topic_filter);
            if is_queue {
                let waiting = waiting_in_queue(&consumer, &self.config);
                let depth = Arc::new(QueueDepth::new(waiting, self.config.queue_max_msgs));
                let _ = consumer.depth.set(depth.clone());
                self.queue_depths_mut().insert(definition.topic_filter.clone(), depth);
                self.any_queue.store(true, Ordering::Release);
            }
        }
    }

    fn queue_depths_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<QueueDepth>>> {
        self.queue_depths.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The count of the queue a message on `topic`, stored in `streams`,
    /// goes to: `None` when it goes to no queue.
    pub fn queue_depth(&self, topic: &TopicName, streams: &[Arc<Stream>]) -> Option<Arc<QueueDepth>> {
        if !self.any_queue.load(Ordering::Acquire)
            || !streams.iter().any(|stream| stream.name() == self.config.queue_stream)
        {
            return None;
        }
        let depths = self.queue_depths.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        depths.get(topic.as_str()).cloned()
    }

    /// The storage configuration.
    pub fn config(&self) -> &StorageConfig {
        &self.config
    }

    fn named(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Stream>>> {
        self.named.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The data directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn durables_lock(&self) -> MutexGuard<'_, BTreeMap<String, Arc<Consumer>>> {
        self.durables.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The streams that store a message on `topic`: every named stream
    /// whose topics hold it, else, for a persistent message, `default`.
    pub fn streams_for(&self, topic: &TopicName, persistent: bool) -> Vec<Arc<Stream>> {
        let mut found = Vec::new();
        if self.any_named.load(Ordering::Acquire) {
            found.extend(self.named().iter().filter(|stream| stream.holds(topic)).cloned());
        }
        if found.is_empty() && persistent {
            found.push(self.default.clone());
        }
        found
    }

    /// The streams that store a message forwarded from another broker:
    /// every named stream whose topics hold it, else, for a persistent
    /// message that a durable subscription of the `default` stream here
    /// wants, `default` (the broker it was published at stored it in its
    /// own `default`; this one keeps it for its own durables).
    pub fn streams_for_forwarded(&self, message: &sift_core::Message) -> Vec<Arc<Stream>> {
        let mut found = self.streams_for(&message.topic, false);
        if found.is_empty() && message.delivery_mode == sift_core::DeliveryMode::Persistent {
            let wanted = self.durables_lock().values().any(|consumer| {
                consumer.stream.name() == DEFAULT_STREAM
                    && consumer.topic_filter.matches(&message.topic)
                    && consumer.content.as_ref().is_none_or(|filter| filter.matches(message))
            });
            if wanted {
                found.push(self.default.clone());
            }
        }
        found
    }

    /// The stream called `name`.
    pub fn stream(&self, name: &str) -> Option<Arc<Stream>> {
        if name == DEFAULT_STREAM {
            return Some(self.default.clone());
        }
        self.named().iter().find(|stream| stream.name() == name).cloned()
    }

    /// Every stream, `default` first.
    pub fn streams(&self) -> Vec<Arc<Stream>> {
        std::iter::once(self.default.clone()).chain(self.named().iter().cloned()).collect()
    }

    /// The stream a subscription to `filter` reads when it names none: a
    /// named stream that holds every topic of the filter, else `default`.
    pub fn stream_covering(&self, filter: &TopicFilter) -> Arc<Stream> {
        self.named().iter().find(|stream| stream.covers(filter)).cloned().unwrap_or_else(|| self.default.clone())
    }

    /// Adds a stream at run time and stores its definition.
    pub fn add_stream(&self, definition: StreamDefinition) -> Result<Arc<Stream>, Refusal> {
        definition.parse(&self.config).map_err(|error| (ErrorCode::InvalidField, error))?;
        let mut named = self.named.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if definition.name == DEFAULT_STREAM || named.iter().any(|stream| stream.name() == definition.name) {
            return Err((ErrorCode::StreamExists, format!("stream {} already exists", definition.name)));
        }
        if named.len() >= self.config.streams_max {
            let message = format!("the broker already keeps storage.streams_max = {} streams", self.config.streams_max);
            return Err((ErrorCode::InvalidField, message));
        }
        let stream = open_stream(&self.root, definition, &self.config)
            .map_err(|error| (ErrorCode::StorageError, error.to_string()))?;
        let stream = Arc::new(stream);
        named.push(stream.clone());
        self.any_named.store(true, Ordering::Release);
        Ok(stream)
    }

    /// Whether the named stream may be removed: not the default stream,
    /// and no durable subscription reads it.
    pub fn may_remove_stream(&self, name: &str) -> Result<(), Refusal> {
        if name == DEFAULT_STREAM {
            return Err((ErrorCode::InvalidField, "the default stream cannot be removed".into()));
        }
        let users: Vec<String> = self
            .durables_lock()
            .values()
            .filter(|consumer| consumer.stream.name() == name)
            .filter_map(|consumer| consumer.durable.as_ref().map(|record| record.definition.name.clone()))
            .collect();
        if !users.is_empty() {
            let message =
                format!("stream {name} is read by durable subscriptions {}; remove them first", users.join(", "));
            return Err((ErrorCode::DurableInUse, message));
        }
        Ok(())
    }

    /// Removes a named stream and its files. Refused while a durable
    /// subscription reads it: remove those first. Returns what was removed.
    pub fn remove_stream(&self, name: &str) -> Result<Arc<Stream>, Refusal> {
        self.may_remove_stream(name)?;
        let mut named = self.named.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(index) = named.iter().position(|stream| stream.name() == name) else {
            return Err((ErrorCode::UnknownStream, format!("no stream {name}")));
        };
        let removed = named.remove(index);
        self.any_named.store(!named.is_empty(), Ordering::Release);
        drop(named);
        // Renamed first, so that a stream added again under the same name
        // never shares a directory with the old log's last writes.
        let dir = self.root.join(STREAMS_DIR).join(name);
        let doomed = self.root.join(STREAMS_DIR).join(format!(".removed-{name}-{}", sift_core::system_now_ns()));
        std::fs::rename(&dir, &doomed)
            .and_then(|()| std::fs::remove_dir_all(&doomed))
            .map_err(|error| (ErrorCode::StorageError, format!("{}: {error}", dir.display())))?;
        Ok(removed)
    }

    /// The durable subscription called `name`.
    pub fn durable(&self, name: &str) -> Option<Arc<Consumer>> {
        self.durables_lock().get(name).cloned()
    }

    /// Every durable subscription, by name.
    pub fn durables(&self) -> Vec<Arc<Consumer>> {
        self.durables_lock().values().cloned().collect()
    }

    /// Finds or creates the durable subscription of `request` and attaches
    /// `member` to it, under one lock so that two subscribers cannot both
    /// take an unshared durable. Refused when it exists with other filters,
    /// or has a consumer and is not shared.
    pub fn open_durable(&self, request: &DurableRequest<'_>, member: SubRef) -> Result<OpenedDurable, Refusal> {
        let mut durables = self.durables_lock();
        let (consumer, created) = self.find_or_create_durable(&mut durables, request)?;
        let start_task = consumer.attach(member, request.member);
        Ok(OpenedDurable { consumer, start_task, created })
    }

    /// The durable subscription of `request`, found, or created with no
    /// consumer; true when created now.
    fn find_or_create_durable(
        &self,
        durables: &mut BTreeMap<String, Arc<Consumer>>,
        request: &DurableRequest<'_>,
    ) -> Result<(Arc<Consumer>, bool), Refusal> {
        check_name("durable", request.name).map_err(|error| (ErrorCode::InvalidField, error))?;
        if let Some(existing) = durables.get(request.name) {
            check_resume(existing, request)?;
            return Ok((existing.clone(), false));
        }
        if durables.len() >= self.config.durables_max {
            let message =
                format!("the broker already keeps storage.durables_max = {} durables", self.config.durables_max);
            return Err((ErrorCode::InvalidField, message));
        }
        let stream = match request.stream {
            "" => self.stream_covering(request.topic_filter),
            name => self.stream(name).ok_or_else(|| (ErrorCode::UnknownStream, format!("no stream {name}")))?,
        };
        let first = start_seq(&stream, &request.start).map_err(|error| (ErrorCode::StorageError, error.to_string()))?;
        let start = StoredPosition { ack_floor: first.saturating_sub(1), done_above: Vec::new() };
        let definition = DurableDefinition {
            name: request.name.to_string(),
            stream: stream.name().to_string(),
            topic_filter: request.topic_filter.as_str().to_string(),
            filter_kind: request.filter_kind.name().to_string(),
            filter: request.filter.to_string(),
            shared: request.shared,
        };
        let dir = self.root.join(DURABLES_DIR).join(request.name);
        let record = DurableRecord::create(&dir, definition, &start)
            .map_err(|error| (ErrorCode::StorageError, error.to_string()))?;
        let cursor = Arc::new(Cursor::resuming(&start));
        let consumer = Arc::new(Consumer::new(
            stream,
            cursor,
            request.topic_filter.clone(),
            request.content.clone(),
            Some(record),
        ));
        durables.insert(request.name.to_string(), consumer.clone());
        if let (Some(replication), Some(record)) = (consumer.stream.replication(), &consumer.durable) {
            let definition = record.definition.clone();
            replication.propose(&crate::replication::durables::StateChange::Durable {
                definition,
                ack_floor: start.ack_floor,
            });
        }
        Ok((consumer, true))
    }

    /// Declares the queue `name` (`docs/PROTOCOL.md` §6.17, `queue_declare`):
    /// the stream `stream` holds its topic `name` from now on, whatever the
    /// delivery mode, and the shared durable subscription `queue.NAME`
    /// reads it, so that what is sent to the queue waits there until one
    /// of its consumers takes it. Creates the stream when missing; doing it
    /// again changes nothing.
    pub fn declare_queue(&self, name: &str, stream: &str) -> Result<DeclaredQueue, Refusal> {
        let topic =
            TopicFilter::new(name).map_err(|error| (ErrorCode::InvalidTopic, format!("queue {name:?}: {error}")))?;
        if topic.as_str().contains(['*', '>']) {
            return Err((ErrorCode::InvalidTopic, format!("queue {name:?}: a queue is one topic, without wildcards")));
        }
        let (queue_stream, stream_created) = match self.stream(stream) {
            Some(existing) => (existing, false),
            None => {
                let definition = StreamDefinition {
                    name: stream.to_string(),
                    topics: vec![name.to_string()],
                    max_age_ms: 0,
                    max_bytes: 0,
                    max_msgs: 0,
                    fsync: String::new(),
                    replicas: 1,
                    members: Vec::new(),
                };
                match self.add_stream(definition) {
                    Ok(created) => (created, true),
                    // Another session made it in between.
                    Err((ErrorCode::StreamExists, _)) => {
                        (self.stream(stream).ok_or((ErrorCode::UnknownStream, format!("no stream {stream}")))?, false)
                    }
                    Err(refusal) => return Err(refusal),
                }
            }
        };
        let topic_added = !stream_created
            && queue_stream.add_topic(topic.clone()).map_err(|error| (ErrorCode::StorageError, error.to_string()))?;
        let durable_name = format!("queue.{name}");
        let request = DurableRequest {
            name: &durable_name,
            stream,
            topic_filter: &topic,
            filter_kind: FilterKind::None,
            filter: "",
            content: None,
            shared: true,
            start: StartPosition::New,
            member: MemberOptions::default(),
        };
        let mut durables = self.durables_lock();
        let (consumer, durable_created) = self.find_or_create_durable(&mut durables, &request)?;
        drop(durables);
        if consumer.depth.get().is_none() {
            let depth = Arc::new(QueueDepth::new(0, self.config.queue_max_msgs));
            let depth = consumer.depth.get_or_init(|| depth).clone();
            self.queue_depths_mut().insert(name.to_string(), depth);
            self.any_queue.store(true, Ordering::Release);
        }
        Ok(DeclaredQueue {
            consumer,
            stream: queue_stream,
            stream_created,
            topic_added: topic_added.then_some(topic),
            durable_created,
        })
    }

    /// Removes a durable subscription and its files; refused while it has
    /// consumers. Returns what was removed.
    pub fn remove_durable(&self, name: &str) -> Result<Arc<Consumer>, Refusal> {
        let removed = self.remove_durable_here(name)?;
        if let Some(replication) = removed.stream.replication() {
            replication.propose(&crate::replication::durables::StateChange::DurableRemoved { name: name.to_string() });
        }
        Ok(removed)
    }

    /// Removes the durable subscription `name` from this broker alone.
    pub(crate) fn remove_durable_here(&self, name: &str) -> Result<Arc<Consumer>, Refusal> {
        let mut durables = self.durables_lock();
        let Some(consumer) = durables.get(name) else {
            return Err((ErrorCode::UnknownDurable, format!("no durable subscription {name}")));
        };
        if consumer.member_count() > 0 {
            let message =
                format!("durable subscription {name} has {} consumers; close them first", consumer.member_count());
            return Err((ErrorCode::DurableInUse, message));
        }
        let Some(removed) = durables.remove(name) else {
            return Err((ErrorCode::UnknownDurable, format!("no durable subscription {name}")));
        };
        drop(durables);
        if let Some(record) = &removed.durable {
            record.remove().map_err(|error| (ErrorCode::StorageError, error.to_string()))?;
        }
        Ok(removed)
    }

    /// Storage counters summed over every stream, by name, for `sift admin stats`.
    pub fn totals(&self) -> Vec<(&'static str, u64)> {
        let mut totals = [0u64; 12];
        let streams = self.streams();
        for stream in &streams {
            let stats = stream.log.stats();
            let values = [
                stats.bytes,
                stats.messages,
                stats.segments as u64,
                stats.fsyncs,
                stats.fsync_ns_total / 1_000,
                stats.fsync_ns_max / 1_000,
                stats.write_errors,
                stats.damaged_records,
                stats.torn_tails_cut,
                stats.appends_refused_queue_full,
                stats.retention_segments_removed,
                stats.retention_messages_removed,
            ];
            for (index, (total, value)) in totals.iter_mut().zip(values).enumerate() {
                // The fsync maximum is a maximum; everything else adds up.
                *total = if index == FSYNC_MAX_INDEX { (*total).max(value) } else { *total + value };
            }
        }
        let names = [
            "stored_bytes",
            "stored_messages",
            "stored_segments",
            "fsyncs",
            "fsync_us_total",
            "fsync_us_max",
            "store_write_errors",
            "store_damaged_records",
            "store_torn_tails_cut",
            "store_appends_dropped",
            "retention_segments_removed",
            "retention_messages_removed",
        ];
        let mut named: Vec<(&'static str, u64)> = names.into_iter().zip(totals).collect();
        named.push(("streams", streams.len() as u64));
        named.push(("durables", self.durables_lock().len() as u64));
        named
    }

    /// The fsync latencies of every stream, merged.
    pub fn fsync_latency(&self) -> sift_core::HistogramSnapshot {
        let mut merged = sift_core::HistogramSnapshot::default();
        for stream in self.streams() {
            merged.merge(&stream.log.stats().fsync_latency);
        }
        merged
    }

    /// Syncs every durable position written since the last sync.
    pub fn sync_positions(&self) {
        for consumer in self.durables() {
            consumer.persist();
            if let Some(record) = &consumer.durable {
                record.sync();
            }
        }
    }
}

/// A durable exists: resuming it must ask for what it reads, and an
/// unshared one takes one consumer at a time.
fn check_resume(existing: &Consumer, request: &DurableRequest<'_>) -> Result<(), Refusal> {
    let Some(record) = &existing.durable else { return Ok(()) };
    let definition = &record.definition;
    let stream_differs = !request.stream.is_empty() && request.stream != definition.stream;
    if stream_differs
        || request.topic_filter.as_str() != definition.topic_filter
        || request.filter_kind.name() != definition.filter_kind
        || request.filter != definition.filter
    {
        let message = format!(
            "durable subscription {} reads stream {} with topic filter {:?} and {} filter {:?}; remove it to change that",
            definition.name, definition.stream, definition.topic_filter, definition.filter_kind, definition.filter
        );
        return Err((ErrorCode::DurableMismatch, message));
    }
    if existing.member_count() > 0 && !(definition.shared && request.shared) {
        let message = match definition.shared {
            true => format!("durable subscription {} is shared; subscribe with shared", definition.name),
            false => format!("durable subscription {} already has a consumer and is not shared", definition.name),
        };
        return Err((ErrorCode::DurableInUse, message));
    }
    Ok(())
}

/// How many stored messages on a queue durable's topic it has not had
/// acknowledged: read from its floor to the end of its stream (once, when
/// the broker starts).
fn waiting_in_queue(consumer: &Consumer, config: &StorageConfig) -> u64 {
    let mut reader = consumer.stream.reader();
    let mut records = Vec::new();
    let mut next = consumer.cursor.ack_floor() + 1;
    let mut waiting = 0;
    let until = consumer.stream.readable_seq();
    while next <= until {
        records.clear();
        // Unreadable: what was counted stands; the consumer reports the gap.
        let Ok(outcome) = reader.read(next, until, config.read_batch_records, config.read_batch_bytes, &mut records)
        else {
            break;
        };
        for record in &records {
            let on_topic = crate::outbox::topic_of_encoding(&record.body)
                .is_some_and(|topic| consumer.topic_filter.matches(&topic));
            if on_topic && !consumer.cursor.is_done(record.seq) {
                waiting += 1;
            }
        }
        if outcome.next_seq <= next {
            break;
        }
        next = outcome.next_seq;
    }
    waiting
}

/// The topic and content filters of a stored durable definition.
pub(crate) fn parse_definition(
    definition: &DurableDefinition,
) -> Result<(TopicFilter, Option<Arc<ContentFilter>>), String> {
    let topic_filter = TopicFilter::new(definition.topic_filter.as_str()).map_err(|error| error.to_string())?;
    let kind = match definition.filter_kind.as_str() {
        "none" => FilterKind::None,
        "tags" => FilterKind::Tags,
        "sql" => FilterKind::Sql,
        "xpath" => FilterKind::Xpath,
        "regex" => FilterKind::Regex,
        other => return Err(format!("unknown filter kind {other:?}")),
    };
    let content = crate::subscription::parse_content_filter(kind, &definition.filter).map_err(|(_, error)| error)?;
    Ok((topic_filter, content))
}

fn open_stream(root: &Path, definition: StreamDefinition, config: &StorageConfig) -> Result<Stream, StorageError> {
    let dir = root.join(STREAMS_DIR).join(&definition.name);
    std::fs::create_dir_all(&dir).map_err(|source| StorageError::Io { path: dir.clone(), source })?;
    let text = serde_json::to_vec_pretty(&definition).map_err(|error| StorageError::Invalid(error.to_string()))?;
    sift_store::write_file_atomically(&dir.join(DEFINITION_FILE), &text)?;
    let (stream, recovery) = Stream::open(&dir, definition.clone(), config)?;
    if stream.replication().is_some() && !recovery.damaged.is_empty() {
        tracing::warn!(stream = %stream.name(), "damaged: {recovery}; the replica sets its files aside and rejoins its group");
        drop(stream);
        set_damaged_replica_aside(root, &dir)?;
        return open_stream(root, definition, config);
    }
    if recovery.torn_tail.is_some() || !recovery.damaged.is_empty() {
        tracing::warn!(stream = %stream.name(), "recovered: {recovery}");
    } else {
        tracing::info!(stream = %stream.name(), "recovered: {recovery}");
    }
    Ok(stream)
}

/// Moves a damaged replica's files under `damaged/` (kept for a look, never
/// read again) and marks its directory, empty again, as a replica that
/// rejoins its group as a new incarnation: the leader sends it the whole
/// log. A replica never serves a log with holes, and never counts as the
/// node that held what it lost.
fn set_damaged_replica_aside(root: &Path, dir: &Path) -> Result<(), StorageError> {
    let aside_root = root.join(DAMAGED_DIR);
    std::fs::create_dir_all(&aside_root).map_err(|source| StorageError::Io { path: aside_root.clone(), source })?;
    let name = dir.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let aside = aside_root.join(format!("{name}-{}", sift_core::system_now_ns()));
    std::fs::rename(dir, &aside).map_err(|source| StorageError::Io { path: aside.clone(), source })?;
    crate::replication::rejoin::new_incarnation(dir, true).map_err(StorageError::Invalid)?;
    Ok(())
}

/// The definitions stored under `streams/`.
fn stored_stream_definitions(dir: &Path) -> Result<BTreeMap<String, StreamDefinition>, StorageError> {
    let mut definitions = BTreeMap::new();
    for path in subdirectories(dir)? {
        let file = path.join(DEFINITION_FILE);
        let Ok(text) = std::fs::read(&file) else { continue };
        match serde_json::from_slice::<StreamDefinition>(&text) {
            Ok(definition) => {
                definitions.insert(definition.name.clone(), definition);
            }
            Err(error) => {
                return Err(StorageError::Invalid(format!("{}: {error}", file.display())));
            }
        }
    }
    Ok(definitions)
}

/// The subdirectories of `dir` whose names do not start with `.`, sorted.
fn subdirectories(dir: &Path) -> Result<Vec<PathBuf>, StorageError> {
    let io = |source| StorageError::Io { path: dir.to_path_buf(), source };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if !hidden && entry.file_type().map_err(io)?.is_dir() {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}
