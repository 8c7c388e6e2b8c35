//! One client connection: its shared state, its handshake, and the reader
//! loop that turns frames into actions.
//!
//! A connection runs as three tasks. The reader (this module) decodes frames
//! and acts on them: a publish is matched and queued straight into the
//! subscribers' outboxes from here, so a message takes one hop from the
//! publisher's socket to the subscribers' queues. The writer
//! ([`crate::writer`]) drains this connection's outbox to its socket in
//! batches. The redelivery timer requeues reliable deliveries whose ack is
//! late. All three stop when the connection closes.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use sift_proto::{
    DecodeError, Decoder, ErrorCode, ErrorFrame, Frame, Hello, TimeReply, Welcome, PROTOCOL_VERSION,
    PROTOCOL_VERSION_MIN,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

use crate::door::{Door, Origin};
use crate::outbox::{Outbox, ReportEvent};
use crate::publish::Publisher;
use crate::server::BrokerShared;
use crate::stats::{add, bump};
use crate::subscription::SubRef;

/// Longest client name accepted in `HELLO`. The name is stamped on every
/// message as its publisher, so it must stay small.
pub const CLIENT_NAME_BYTES_MAX: usize = 256;

/// Why a connection's reader stopped.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The socket failed.
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer broke the protocol; an `ERROR` was sent.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// No `HELLO` within the handshake timeout.
    #[error("no HELLO within {0:?}")]
    HandshakeTimeout(Duration),
}

/// State of a connection shared by its tasks and by other connections'
/// readers that queue deliveries into it.
#[derive(Debug)]
pub struct ConnShared {
    /// Connection id, unique within the broker run.
    pub id: u64,
    /// Client name from `HELLO`.
    pub name: Arc<str>,
    /// The protocol it came in by.
    pub door: Door,
    /// True for a local session: its control frames are queued as values.
    takes_values: bool,
    /// Where the connection comes from: the client's `ip:port` (the
    /// protocol client's, for a front-end's session), or `in-process`.
    pub peer: Arc<str>,
    outbox: Mutex<Outbox>,
    /// Wakes the writer when the outbox gains something to write.
    pub writer_wake: Notify,
    /// Wakes publishers waiting for space in this connection's queues.
    pub space: Notify,
    closing: AtomicBool,
    /// What `ADMIN subscriptions` shows of each open subscription, by id:
    /// its description as JSON, fixed when it opened.
    listed: Mutex<std::collections::BTreeMap<u32, serde_json::Value>>,
    /// Set when responses piled up past the limit and closed the connection.
    overflowed: AtomicBool,
    close_signal: watch::Sender<bool>,
}

impl ConnShared {
    /// Connection state with an empty outbox.
    pub fn new(
        id: u64,
        name: Arc<str>,
        (door, takes_values): (Door, bool),
        peer: Arc<str>,
        (max_pending_bytes, budget): (u64, Arc<crate::budget::MemoryBudget>),
    ) -> Arc<ConnShared> {
        let (close_signal, _) = watch::channel(false);
        Arc::new(ConnShared {
            id,
            name,
            door,
            takes_values,
            peer,
            outbox: Mutex::new(Outbox::with_budget(max_pending_bytes, budget)),
            writer_wake: Notify::new(),
            space: Notify::new(),
            closing: AtomicBool::new(false),
            listed: Mutex::new(std::collections::BTreeMap::new()),
            overflowed: AtomicBool::new(false),
            close_signal,
        })
    }

    /// Locks the outbox. Outbox methods do not panic midway through an
    /// update, so a poisoned lock still guards consistent data.
    pub fn lock(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records an open subscription for `ADMIN subscriptions`.
    pub(crate) fn list_subscription(&self, sub_id: u32, description: serde_json::Value) {
        self.listed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(sub_id, description);
    }

    /// Forgets a closed subscription.
    pub(crate) fn unlist_subscription(&self, sub_id: u32) {
        self.listed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&sub_id);
    }

    /// The open subscriptions' descriptions, each with its queue depth now.
    pub fn listed_subscriptions(&self) -> Vec<serde_json::Value> {
        let listed = self.listed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let outbox = self.lock();
        listed
            .into_iter()
            .map(|(sub_id, mut description)| {
                if let serde_json::Value::Object(fields) = &mut description {
                    fields.insert("queued".into(), outbox.queued(sub_id).into());
                }
                description
            })
            .collect()
    }

    /// True once the connection has started closing.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// A receiver that turns true when the connection starts closing.
    pub fn close_watch(&self) -> watch::Receiver<bool> {
        self.close_signal.subscribe()
    }

    /// Queues a response frame for the writer. A connection whose responses
    /// pile up past `max_pending_bytes` is not reading them; it is closed.
    pub fn send_control(&self, frame: &Frame) {
        if self.takes_values {
            // A local session gets the frame itself: nothing to encode here
            // and decode there.
            let frame_bytes = frame.approximate_bytes() as u64;
            return self.queue_control(|outbox| outbox.push_control_frame(frame.clone(), frame_bytes));
        }
        let mut bytes = BytesMut::new();
        if let Err(error) = frame.encode(&mut bytes) {
            tracing::error!(connection = self.id, %error, "cannot encode {}", frame.name());
            return;
        }
        self.send_encoded(&bytes);
    }

    /// Queues already encoded response frames (whole frames, in order), as
    /// [`ConnShared::send_control`] does.
    pub fn send_encoded(&self, bytes: &[u8]) {
        if self.takes_values {
            for frame in crate::local::decode_whole_frames(bytes) {
                self.send_control(&frame);
            }
            return;
        }
        self.queue_control(|outbox| outbox.push_control(bytes));
    }

    /// Queues control with `push` (false when control alone passed
    /// `max_pending_bytes`), wakes the writer, and closes a connection
    /// that is not reading its responses.
    fn queue_control(&self, push: impl FnOnce(&mut Outbox) -> bool) {
        let (within_limit, wake) = {
            let mut outbox = self.lock();
            if outbox.is_closed() {
                return;
            }
            (push(&mut outbox), outbox.take_wake())
        };
        if wake {
            self.writer_wake.notify_one();
        }
        if !within_limit {
            self.overflowed.store(true, Ordering::Release);
            self.close(Some(error_frame(
                ErrorCode::PendingBytesExceeded,
                0,
                true,
                "responses queued for this connection exceed max_pending_bytes_per_connection; read them".into(),
            )));
        }
    }

    /// Starts closing: queues `last` (an `ERROR` or `CLOSE`) after what is
    /// already queued, refuses new deliveries and tells every task to stop.
    /// Returns true for the call that started the close, false afterwards.
    pub fn close(&self, last: Option<Frame>) -> bool {
        if self.closing.swap(true, Ordering::AcqRel) {
            return false;
        }
        {
            // One step: the last frame is queued and the outbox closed under
            // the same lock, so nothing can be queued after the last frame.
            let mut outbox = self.lock();
            match last {
                Some(frame) if self.takes_values => {
                    let frame_bytes = frame.approximate_bytes() as u64;
                    outbox.push_control_frame(frame, frame_bytes);
                }
                Some(frame) => {
                    let mut bytes = BytesMut::new();
                    if frame.encode(&mut bytes).is_ok() {
                        outbox.push_control(&bytes);
                    }
                }
                None => {}
            }
            outbox.close();
        }
        self.close_signal.send_replace(true);
        self.writer_wake.notify_one();
        self.space.notify_waiters();
        true
    }
}

/// An `ERROR` frame.
pub fn error_frame(code: ErrorCode, reference: u64, fatal: bool, message: String) -> Frame {
    Frame::Error(ErrorFrame { code, reference, fatal, message })
}

/// Applies what an ack, nack or timeout scan changed: wakes the writer,
/// counts, and settles reports. Called after the outbox lock is released.
pub fn apply_settled(conn: &ConnShared, stats: &crate::stats::Stats, settled: crate::outbox::Settled) {
    if settled.wake_writer {
        conn.writer_wake.notify_one();
    }
    add(&stats.redelivered, settled.requeued);
    add(&stats.dropped_rejected, settled.rejected);
    // A tag can be unknown for a good reason (its delivery timed out and was
    // requeued), so unknown tags are counted, not refused.
    add(&stats.unknown_delivery_tags, settled.unknown_tags);
    apply_events(settled.events);
}

/// Applies report events collected under an outbox lock. Stream consumers
/// whose position moved store it once for the whole batch and are woken
/// (their subscriber's window opened).
pub fn apply_events(events: Vec<ReportEvent>) {
    let mut consumers: Vec<Arc<crate::store::consumer::Consumer>> = Vec::new();
    for event in events {
        if let ReportEvent::StreamDone(consumer, _) = &event {
            if !consumers.iter().any(|known| Arc::ptr_eq(known, consumer)) {
                consumers.push(consumer.clone());
            }
        }
        event.apply();
    }
    for consumer in consumers {
        consumer.persist();
        consumer.cursor.wake.notify_one();
    }
}

/// Serves one accepted connection until it closes.
pub async fn serve(stream: TcpStream, shared: Arc<BrokerShared>, id: u64) {
    // Small frames (acks, confirms, one-in-flight latency tests) must not wait
    // for Nagle's algorithm; the writer batches on its own.
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().map_or_else(|_| "unknown".to_string(), |address| address.to_string());
    let (reader, writer) = stream.into_split();
    serve_halves(reader, writer, shared, id, Door::Native, peer).await;
}

/// Serves one in-process connection (see
/// [`crate::server::BrokerShared::connect_in_process`]) until it closes:
/// the same session as a socket's, over an in-memory pipe.
pub async fn serve_in_process(stream: tokio::io::DuplexStream, shared: Arc<BrokerShared>, id: u64) {
    let origin = Origin::EMBEDDED;
    let (reader, writer) = tokio::io::split(stream);
    serve_halves(reader, writer, shared, id, origin.door, origin.peer_text()).await;
}

/// Serves a connection given as its two halves: the handshake, then the
/// reader loop here and the writer and redelivery tasks beside it.
async fn serve_halves<R, W>(mut reader: R, mut writer: W, shared: Arc<BrokerShared>, id: u64, door: Door, peer: String)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut decoder = Decoder::new(shared.config.limits.max_frame_bytes);
    let mut buf = BytesMut::with_capacity(shared.config.delivery.read_buffer_bytes);
    let hello = match handshake(&mut reader, &mut buf, &mut decoder, &shared).await {
        Ok(hello) => hello,
        Err(failure) => {
            let (error, reply) = *failure;
            tracing::debug!(connection = id, %peer, %error, "connection refused at its handshake");
            if let Some(reply) = reply {
                bump(&shared.stats.errors_sent);
                let mut bytes = BytesMut::new();
                if reply.encode(&mut bytes).is_ok() {
                    let _ = writer.write_all(&bytes).await;
                }
            }
            let _ = writer.shutdown().await;
            return;
        }
    };
    let conn = open_connection(&shared, id, &hello, (door, false), &peer);
    let writer_task =
        tokio::spawn(crate::writer::run(conn.clone(), crate::writer::SocketOutlet(writer), shared.clone()));
    decoder.set_max_frame_bytes(shared.config.limits.max_frame_bytes);
    let inbound = SocketInbound { reader, buf, decoder, shared: shared.clone() };
    run_session(conn, shared, inbound, writer_task, &peer).await;
}

/// Registers the connection a checked `HELLO` opened and queues its
/// `WELCOME`.
pub(crate) fn open_connection(
    shared: &BrokerShared,
    id: u64,
    hello: &Hello,
    (door, takes_values): (Door, bool),
    peer: &str,
) -> Arc<ConnShared> {
    let conn = ConnShared::new(
        id,
        Arc::from(hello.client_name.as_str()),
        (door, takes_values),
        Arc::from(peer),
        (shared.config.limits.max_pending_bytes_per_connection, shared.memory.clone()),
    );
    shared.register(conn.clone());
    tracing::debug!(connection = id, %door, %peer, client = %hello.client_name, "connection opened");
    conn.send_control(&Frame::Welcome(welcome(shared, id)));
    conn
}

/// Runs a registered connection's session until it ends, then releases
/// what it held and waits (boundedly) for its writer to flush: the part of
/// a connection's life that a socket and a local session share.
pub(crate) async fn run_session(
    conn: Arc<ConnShared>,
    shared: Arc<BrokerShared>,
    mut inbound: impl Inbound,
    writer_task: tokio::task::JoinHandle<()>,
    peer: &str,
) {
    let id = conn.id;
    let timer_task = tokio::spawn(crate::writer::redelivery_timer(conn.clone(), shared.clone()));
    let mut session = Session::new(conn.clone(), shared.clone());
    let outcome = session.read_loop(&mut inbound).await;
    match &outcome {
        Err(error) => tracing::debug!(connection = id, %peer, %error, "connection closed"),
        Ok(()) => tracing::debug!(connection = id, %peer, "connection closed"),
    }
    conn.close(None);
    if conn.overflowed.load(Ordering::Acquire) {
        bump(&shared.stats.slow_consumer_disconnects);
    }
    session.abandon_held_publishes();
    session.release_subscriptions();
    // The writer flushes what is queued (a final ERROR or CLOSE) and stops.
    let _ = tokio::time::timeout(Duration::from_secs(5), writer_task).await;
    timer_task.abort();
    shared.unregister(id);
}

/// Where a session's frames come from: a socket's bytes through the
/// decoder ([`SocketInbound`]), or a local session's frame values
/// (`crate::local`). The session's read loop is the same for both.
pub(crate) trait Inbound: Send {
    /// The next whole frame already received; `Ok(None)` when the session
    /// must wait for more.
    fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError>;

    /// Waits until more has arrived; false when the other side is gone.
    /// Cancel-safe: the read loop drops it when another event comes first.
    fn receive(&mut self) -> impl std::future::Future<Output = Result<bool, ConnectionError>> + Send;
}

/// A socket's (or pipe's) reading half, its read buffer and its decoder.
pub(crate) struct SocketInbound<R> {
    reader: R,
    buf: BytesMut,
    decoder: Decoder,
    shared: Arc<BrokerShared>,
}

impl<R: AsyncRead + Unpin + Send> Inbound for SocketInbound<R> {
    fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        self.decoder.decode(&mut self.buf)
    }

    async fn receive(&mut self) -> Result<bool, ConnectionError> {
        let read_size = self.shared.config.delivery.read_buffer_bytes;
        if self.buf.capacity() - self.buf.len() < read_size / 4 {
            self.buf.reserve(read_size);
        }
        // At most one read buffer per read: the link congestion wait of the
        // read loop counts on it.
        let mut limited = (&mut self.buf).limit(read_size);
        let read = self.reader.read_buf(&mut limited).await?;
        add(&self.shared.stats.bytes_received, read as u64);
        Ok(read > 0)
    }
}

fn welcome(shared: &BrokerShared, id: u64) -> Welcome {
    let config = &shared.config;
    Welcome {
        version: PROTOCOL_VERSION,
        server_name: config.name.clone(),
        connection_id: id,
        max_frame_bytes: config.limits.max_frame_bytes,
        max_payload_bytes: config.limits.max_payload_bytes,
        max_subscriptions: config.limits.max_subscriptions_per_connection,
        max_filter_bytes: config.limits.max_filter_bytes,
        publish_window: config.delivery.publish_window,
        ack_timeout_ms: config.delivery.ack_timeout_ms,
    }
}

/// Why a handshake failed, and the `ERROR` to send back if any.
pub(crate) type HandshakeFailure = Box<(ConnectionError, Option<Frame>)>;

/// Reads the `HELLO` within the handshake timeout and checks versions.
async fn handshake(
    reader: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
    decoder: &mut Decoder,
    shared: &BrokerShared,
) -> Result<Hello, HandshakeFailure> {
    let limit = Duration::from_millis(shared.config.limits.handshake_timeout_ms);
    let first = tokio::time::timeout(limit, read_frame(reader, buf, decoder, shared)).await;
    let frame = match first {
        Err(_) => {
            let message = format!("no HELLO within handshake_timeout_ms = {}", limit.as_millis());
            let reply = error_frame(ErrorCode::HandshakeTimeout, 0, true, message);
            return Err(Box::new((ConnectionError::HandshakeTimeout(limit), Some(reply))));
        }
        Ok(Err(failure)) => return Err(failure),
        Ok(Ok(frame)) => frame,
    };
    check_hello(frame)
}

/// The `HELLO` a session must open with, checked: its client name's length
/// and a version both sides speak.
pub(crate) fn check_hello(frame: Frame) -> Result<Hello, HandshakeFailure> {
    let Frame::Hello(hello) = frame else {
        let message = format!("expected HELLO as the first frame, got {}", frame.name());
        let reply = error_frame(ErrorCode::UnexpectedFrame, 0, true, message.clone());
        return Err(Box::new((ConnectionError::Protocol(message), Some(reply))));
    };
    if hello.client_name.len() > CLIENT_NAME_BYTES_MAX {
        let message = format!(
            "client_name is {} bytes; the limit is {CLIENT_NAME_BYTES_MAX} (it is stamped on every message)",
            hello.client_name.len()
        );
        let reply = error_frame(ErrorCode::InvalidField, 0, true, message.clone());
        return Err(Box::new((ConnectionError::Protocol(message), Some(reply))));
    }
    if hello.version_max < PROTOCOL_VERSION_MIN || hello.version_min > PROTOCOL_VERSION {
        let message = format!(
            "client speaks versions {}-{}, this broker {}-{}",
            hello.version_min, hello.version_max, PROTOCOL_VERSION_MIN, PROTOCOL_VERSION
        );
        let reply = error_frame(ErrorCode::UnsupportedVersion, 0, true, message.clone());
        return Err(Box::new((ConnectionError::Protocol(message), Some(reply))));
    }
    Ok(hello)
}

async fn read_frame(
    reader: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
    decoder: &mut Decoder,
    shared: &BrokerShared,
) -> Result<Frame, HandshakeFailure> {
    loop {
        match decoder.decode(buf) {
            Ok(Some(frame)) => return Ok(frame),
            Ok(None) => {}
            Err(error) => {
                let reply = error_frame(error.code(), error.reference(), true, error.to_string());
                return Err(Box::new((ConnectionError::Protocol(error.to_string()), Some(reply))));
            }
        }
        let read = reader.read_buf(buf).await.map_err(|error| Box::new((ConnectionError::Io(error), None)))?;
        if read == 0 {
            let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed before HELLO");
            return Err(Box::new((ConnectionError::Io(eof), None)));
        }
        add(&shared.stats.bytes_received, read as u64);
    }
}

/// How long a parked publish waits for a wake-up before it looks again; the
/// subscriber's writer normally wakes it sooner.
const BLOCKED_RECHECK: Duration = Duration::from_millis(50);

/// Counters a reader updates per message, kept locally and added to the
/// broker-wide [`crate::stats::Stats`] once per read, so that the hot path
/// does not bounce shared cache lines between cores.
#[derive(Debug, Default)]
pub struct LocalCounters {
    /// Messages accepted.
    pub published: u64,
    /// Publishes that matched nothing.
    pub unmatched: u64,
    /// Match lookups answered by the cache.
    pub cache_hits: u64,
    /// Match lookups that walked the trie.
    pub cache_misses: u64,
    /// Copies lost because their subscriber went away.
    pub subscriber_gone: u64,
    /// Encode-arena chunks allocated.
    pub encode_arena_chunks: u64,
    /// Persistent messages handed to their streams.
    pub persistent_stored: u64,
}

impl LocalCounters {
    pub(crate) fn flush(&mut self, stats: &crate::stats::Stats) {
        let taken = std::mem::take(self);
        for (counter, amount) in [
            (&stats.messages_published, taken.published),
            (&stats.messages_unmatched, taken.unmatched),
            (&stats.match_cache_hits, taken.cache_hits),
            (&stats.match_cache_misses, taken.cache_misses),
            (&stats.dropped_subscriber_gone, taken.subscriber_gone),
            (&stats.encode_arena_chunks, taken.encode_arena_chunks),
            (&stats.persistent_published, taken.persistent_stored),
        ] {
            if amount != 0 {
                add(counter, amount);
            }
        }
    }
}

/// The reader's state: this connection's subscriptions, match cache, and
/// the publish it may be holding back.
pub struct Session {
    pub(crate) conn: Arc<ConnShared>,
    pub(crate) shared: Arc<BrokerShared>,
    pub(crate) subscriptions: HashMap<u32, SubRef>,
    /// The publishing side: pipeline state, a parked publish, staged copies.
    pub(crate) publisher: Publisher,
    /// The consumer of each stream subscription (replay or durable), by id;
    /// these subscriptions are in `subscriptions` too, but not in the router.
    pub(crate) stream_subs: HashMap<u32, Arc<crate::store::consumer::Consumer>>,
    /// Publishes that arrived while one was parked, in arrival order.
    deferred: VecDeque<Frame>,
    deferred_bytes: usize,
}

impl Session {
    fn new(conn: Arc<ConnShared>, shared: Arc<BrokerShared>) -> Session {
        Session {
            publisher: Publisher::new(conn.clone(), shared.clone()),
            conn,
            shared,
            subscriptions: HashMap::new(),
            stream_subs: HashMap::new(),
            deferred: VecDeque::new(),
            deferred_bytes: 0,
        }
    }

    async fn read_loop(&mut self, inbound: &mut impl Inbound) -> Result<(), ConnectionError> {
        let mut close_watch = self.conn.close_watch();
        let read_ahead_max = self.shared.config.delivery.blocked_read_ahead_bytes;
        loop {
            self.publisher.begin_read();
            let keep_going = self.process_frames(inbound);
            self.publisher.end_read();
            if !keep_going? || *close_watch.borrow() {
                return Ok(());
            }
            // A publisher whose messages fill a broker link waits (boundedly)
            // before reading more, as it would for a slow subscriber.
            self.shared.links.wait_while_congested(&self.shared.stats).await;
            let more = match self.publisher.blocked_on() {
                None => tokio::select! {
                    more = inbound.receive() => more?,
                    _ = close_watch.changed() => return Ok(()),
                },
                Some(blocked_conn) => {
                    let space = blocked_conn.space.notified();
                    tokio::pin!(space);
                    space.as_mut().enable();
                    if self.publisher.retry_parked() {
                        continue;
                    }
                    let may_read = self.deferred_bytes < read_ahead_max;
                    tokio::select! {
                        more = inbound.receive(), if may_read => more?,
                        _ = &mut space => continue,
                        _ = tokio::time::sleep(BLOCKED_RECHECK) => continue,
                        _ = close_watch.changed() => return Ok(()),
                    }
                }
            };
            if !more {
                return Ok(());
            }
        }
    }

    /// Handles deferred publishes (when nothing is parked) and every whole
    /// frame in `buf`. While a publish is parked, later publishes are set
    /// aside, up to `blocked_read_ahead_bytes`; everything else is handled.
    /// Returns false when the reader must stop.
    fn process_frames(&mut self, inbound: &mut impl Inbound) -> Result<bool, ConnectionError> {
        let read_ahead_max = self.shared.config.delivery.blocked_read_ahead_bytes;
        loop {
            if !self.publisher.is_parked() {
                if let Some(frame) = self.deferred.pop_front() {
                    self.deferred_bytes -= frame.approximate_bytes();
                    if !is_plain_best_effort(&frame) {
                        self.publisher.flush_staged();
                    }
                    if !self.handle(frame) {
                        return Ok(false);
                    }
                    continue;
                }
            } else if self.deferred_bytes >= read_ahead_max {
                return Ok(true);
            }
            match inbound.next_frame() {
                Ok(Some(frame)) => {
                    // Staged best-effort copies go out before anything that
                    // is not itself a best-effort publish, to keep order.
                    if !is_plain_best_effort(&frame) {
                        self.publisher.flush_staged();
                    }
                    if self.publisher.is_parked() && matches!(frame, Frame::Publish(_)) {
                        self.deferred_bytes += frame.approximate_bytes();
                        self.deferred.push_back(frame);
                    } else if !self.handle(frame) {
                        return Ok(false);
                    }
                }
                Ok(None) => return Ok(true),
                Err(error) => {
                    bump(&self.shared.stats.errors_sent);
                    tracing::debug!(connection = self.conn.id, %error, "frame refused");
                    let fatal = error.is_fatal();
                    let reply = error_frame(error.code(), error.reference(), fatal, error.to_string());
                    if fatal {
                        self.conn.close(Some(reply));
                        return Err(ConnectionError::Protocol(error.to_string()));
                    }
                    self.conn.send_control(&reply);
                }
            }
        }
    }

    /// Gives up what the session holds back (the connection is closing).
    pub(crate) fn abandon_held_publishes(&mut self) {
        self.publisher.abandon_parked();
        self.deferred.clear();
        self.deferred_bytes = 0;
    }

    /// Acts on one frame; false when the reader must stop.
    fn handle(&mut self, frame: Frame) -> bool {
        match frame {
            Frame::Publish(publish) => {
                self.publisher.publish(publish);
                true
            }
            Frame::Subscribe(subscribe) => self.subscribe(subscribe),
            Frame::Unsubscribe { sub_id } => self.unsubscribe(sub_id),
            Frame::Ack { delivery_tags } => self.ack(&delivery_tags),
            Frame::Nack { delivery_tag, requeue } => self.nack(delivery_tag, requeue),
            Frame::Flow { sub_id, credit } => self.flow(sub_id, credit),
            Frame::Admin { request_id, query } => {
                self.admin(request_id, query);
                true
            }
            Frame::Manage { request_id, op, body } => {
                self.manage(request_id, op, &body);
                true
            }
            Frame::Query(query) => {
                self.query(query);
                true
            }
            Frame::Ping { nonce } => {
                self.conn.send_control(&Frame::Pong { nonce });
                true
            }
            Frame::Pong { .. } => true,
            Frame::Time { request_id, origin_ns } => {
                let receive_ns = crate::publish::now_ns();
                let reply = TimeReply { request_id, origin_ns, receive_ns, transmit_ns: crate::publish::now_ns() };
                self.conn.send_control(&Frame::TimeReply(reply));
                true
            }
            Frame::Close => {
                self.conn.close(Some(Frame::Close));
                false
            }
            Frame::Error(error) => {
                tracing::debug!(connection = self.conn.id, code = %error.code, message = %error.message, "client error");
                true
            }
            other @ (Frame::Hello(_)
            | Frame::Welcome(_)
            | Frame::Confirm(_)
            | Frame::Subscribed { .. }
            | Frame::TimeReply(_)
            | Frame::Deliver(_)
            | Frame::AdminReply { .. }
            | Frame::Gap { .. }
            | Frame::QueryResult { .. }
            | Frame::QueryDone { .. }) => {
                let message = format!("{} is not allowed from a client after the handshake", other.name());
                self.refuse(ErrorCode::UnexpectedFrame, 0, message);
                true
            }
        }
    }

    /// Sends a non-fatal `ERROR`.
    pub(crate) fn refuse(&self, code: ErrorCode, reference: u64, message: String) {
        send_refusal(&self.shared, &self.conn, code, reference, message);
    }
}

/// Sends `conn` a non-fatal `ERROR` about the request `reference`.
pub(crate) fn send_refusal(shared: &BrokerShared, conn: &ConnShared, code: ErrorCode, reference: u64, message: String) {
    bump(&shared.stats.errors_sent);
    tracing::debug!(connection = conn.id, %code, reference, "request refused: {message}");
    conn.send_control(&error_frame(code, reference, false, message));
}

/// True for a best-effort publish without await=delivered: one whose copies
/// may be staged.
fn is_plain_best_effort(frame: &Frame) -> bool {
    match frame {
        Frame::Publish(publish) => {
            !publish.message.delivery_mode.needs_ack()
                && publish.flags & sift_proto::publish_flags::AWAIT_DELIVERED == 0
        }
        _ => false,
    }
}
