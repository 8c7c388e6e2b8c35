//! The client's connection: shared state, the supervisor that connects and
//! reconnects, the reader that dispatches frames, and the writer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sift_core::{ClockFilter, Message, TopicName};
use sift_proto::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, Notify, Semaphore};

use crate::options::{AckPolicy, ClientOptions, PublishOptions, SubscribeOptions};
use crate::outgoing::{Outgoing, Publishing};
use crate::query::QuerySender;
use crate::subscription::{Batch, Delivery, Gap, Settle, Subscription};
use crate::transport::{Endpoint, Link, LocalOpener, PipeOpener, TransportRead, TransportWrite};
use crate::ClientError;

/// Request ids start here so that an `ERROR`'s reference tells a publish
/// (≥ 2³²) from a subscription id (< 2³²).
const REQUEST_ID_BASE: u64 = 1 << 32;
/// Most tags in one `ACK` frame.
const ACK_BATCH_MAX: usize = 1024;
/// Most deliveries a new batch reserves room for up front.
const STAGED_BATCH_CAPACITY_MAX: usize = 4096;
/// First pause before a reconnect attempt.
const RECONNECT_DELAY_MIN: Duration = Duration::from_millis(50);

type ConfirmSender = oneshot::Sender<Result<Confirm, ClientError>>;

/// Where the JSON text of an `ADMIN_REPLY` goes.
pub(crate) type AdminReceiver = oneshot::Receiver<Result<String, ClientError>>;

/// A confirmed `PUBLISH` kept to resend after a reconnect: encoded for a
/// byte stream, the frame itself for a local session.
enum Resend {
    Encoded(Bytes),
    Frame(Frame),
}

struct PendingPublish {
    sender: ConfirmSender,
    /// The `PUBLISH`, kept to resend after a reconnect (reliable only).
    frame: Option<Resend>,
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

struct SubEntry {
    request: Subscribe,
    sender: mpsc::Sender<Batch>,
    ready: Option<oneshot::Sender<Result<(), ClientError>>>,
}

#[derive(Default)]
struct State {
    out: Outgoing,
    acks: Vec<u64>,
    connected: bool,
    /// Counts the sessions with the broker (one per connect and
    /// reconnect): a delivery tag means something only in the session
    /// that gave it, since each session numbers its deliveries afresh.
    session: u64,
    closed: bool,
    next_request_id: u64,
    next_sub_id: u32,
    next_sequence: u64,
    pending: HashMap<u64, PendingPublish>,
    subs: HashMap<u32, SubEntry>,
    pings: HashMap<u64, oneshot::Sender<()>>,
    /// `TIME` requests waiting for their reply, by request id.
    time_waiters: HashMap<u64, oneshot::Sender<()>>,
    /// Samples of the broker's clock.
    clock: ClockFilter,
    /// `ADMIN` requests waiting for their reply, by request id.
    admins: HashMap<u64, oneshot::Sender<Result<String, ClientError>>>,
    /// Archive queries whose results are coming, by request id.
    queries: HashMap<u64, QuerySender>,
    close_ack: Option<oneshot::Sender<()>>,
    welcome: Option<Welcome>,
    /// The user the broker's `AUTH_OK` named, when the client signed in.
    user: Option<String>,
}

struct Inner {
    endpoint: Endpoint,
    options: ClientOptions,
    state: Mutex<State>,
    writer_wake: Notify,
    space: Notify,
    window: Arc<Semaphore>,
    /// True while connected: watched by applications that report a lost
    /// and a regained broker ([`Client::connection_changes`]).
    connected_watch: tokio::sync::watch::Sender<bool>,
    /// The prefix of the `Sift-Msg-Id`s this client gives
    /// ([`ClientOptions::msg_ids`]): random, so that no two clients share it.
    msg_id_prefix: String,
    /// Reads of the connection, for the liveness watcher
    /// ([`crate::liveness`]).
    reads: crate::liveness::ReadCounter,
}

/// A random prefix for a client's message ids: the process's random hash
/// keys (a fresh pair per call), the time and the process id, mixed.
fn random_msg_id_prefix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(sift_core::system_now_ns());
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish())
}

impl State {
    /// True while the session numbered `session` is the one connected: a
    /// delivery tag it gave still names that delivery.
    fn is_session(&self, session: u64) -> bool {
        self.connected && self.session == session
    }
}

/// A connection to a Sift broker. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Client").field("endpoint", &self.inner.endpoint).finish()
    }
}

impl Client {
    /// Connects and completes the handshake; then keeps the connection up in
    /// the background.
    pub async fn connect(address: impl Into<String>, options: ClientOptions) -> Result<Client, ClientError> {
        Client::connect_to(Endpoint::Tcp(address.into()), options).await
    }

    /// Connects to a broker in this process through the local sessions
    /// `open` returns (one per connect and reconnect): frames go to the
    /// broker's session machine as values and come back as values, with no
    /// encoding, pipe or decoding between. What protocol front-ends use.
    pub async fn connect_local(open: LocalOpener, options: ClientOptions) -> Result<Client, ClientError> {
        Client::connect_to(Endpoint::Local(open), options).await
    }

    /// Connects to a broker in this process through the pipes `open` makes
    /// (one per connect and reconnect), speaking the native protocol's bytes.
    pub async fn connect_in_process(open: PipeOpener, options: ClientOptions) -> Result<Client, ClientError> {
        Client::connect_to(Endpoint::InProcess(open), options).await
    }

    /// Connects to `endpoint` and completes the handshake.
    pub async fn connect_to(endpoint: Endpoint, options: ClientOptions) -> Result<Client, ClientError> {
        let (stream, Greeted { welcome, user }) = open(&endpoint, &options).await?;
        let window = Arc::new(Semaphore::new(welcome.publish_window.max(1) as usize));
        let out = match endpoint {
            Endpoint::Local(_) => Outgoing::Frames(crate::outgoing::FrameBatches::default()),
            _ => Outgoing::default(),
        };
        let state = State { out, next_request_id: REQUEST_ID_BASE, next_sub_id: 1, ..State::default() };
        let inner = Arc::new(Inner {
            endpoint,
            options,
            state: Mutex::new(state),
            writer_wake: Notify::new(),
            space: Notify::new(),
            window,
            connected_watch: tokio::sync::watch::Sender::new(false),
            msg_id_prefix: random_msg_id_prefix(),
            reads: crate::liveness::ReadCounter::default(),
        });
        let client = Client { inner };
        {
            let mut state = client.lock();
            state.welcome = Some(welcome);
            state.user = user;
        }
        // Live before `connect` returns, so that a publish right after it is
        // written on this connection rather than treated as disconnected.
        client.resume();
        tokio::spawn(client.clone().supervise(stream));
        if let Some(interval) = client.inner.options.clock_sync_interval {
            tokio::spawn(client.clone().clock_sync_loop(interval));
        }
        if client.inner.options.publisher_time {
            // Publishes are stamped from the first one on.
            client.sync_clock(crate::time::CLOCK_SYNC_BURST).await?;
        }
        Ok(client)
    }

    /// The options the client was made with.
    pub(crate) fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// True once the client is closed (by [`Client::close`] or for good).
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Runs `read` on the clock filter.
    pub(crate) fn with_clock<T>(&self, read: impl FnOnce(&ClockFilter) -> T) -> T {
        read(&self.lock().clock)
    }

    /// Numbers a `TIME` request and keeps its waiter.
    pub(crate) fn register_time_request(&self, waiter: oneshot::Sender<()>) -> Result<u64, ClientError> {
        let mut state = self.lock();
        if state.closed {
            return Err(ClientError::Closed);
        }
        state.next_request_id += 1;
        let request_id = state.next_request_id;
        state.time_waiters.insert(request_id, waiter);
        Ok(request_id)
    }

    /// Adds a clock sample; returns the waiter of its request, if any.
    pub(crate) fn add_time_sample(
        &self,
        request_id: u64,
        exchange: sift_core::TimeExchange,
    ) -> Option<oneshot::Sender<()>> {
        let mut state = self.lock();
        state.clock.add_exchange(exchange);
        state.time_waiters.remove(&request_id)
    }

    /// The publisher's own timestamp for a publish: `timestamp_ns` (a
    /// reading of this client's clock; 0 = now) carried into the broker's
    /// clock, and its error bound.
    fn publisher_time(&self, state: &State, timestamp_ns: u64) -> Result<(u64, u32), ClientError> {
        let now_ns = self.inner.options.clock.now_ns();
        let estimate = state.clock.estimate(now_ns).ok_or(ClientError::NoClockEstimate)?;
        let local_ns = if timestamp_ns == 0 { now_ns } else { timestamp_ns };
        Ok((estimate.to_peer(local_ns), u32::try_from(estimate.error_ns).unwrap_or(u32::MAX)))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The broker's `WELCOME` (its limits) from the latest handshake.
    pub fn server_info(&self) -> Option<Welcome> {
        self.lock().welcome.clone()
    }

    /// The user the broker signed this client in as (its `AUTH_OK`), or
    /// `None` when the client did not sign in.
    pub fn user(&self) -> Option<String> {
        self.lock().user.clone()
    }

    /// True while connected.
    pub fn is_connected(&self) -> bool {
        self.lock().connected
    }

    /// A receiver that sees each change between connected (`true`) and
    /// disconnected (`false`): the client reconnects by itself, and an
    /// application may tell its user when the broker is lost and back.
    pub fn connection_changes(&self) -> tokio::sync::watch::Receiver<bool> {
        self.inner.connected_watch.subscribe()
    }

    /// Queues a frame for the writer and wakes it.
    pub(crate) fn send_frame(&self, frame: Frame) -> Result<(), ClientError> {
        let mut state = self.lock();
        if state.closed {
            return Err(ClientError::Closed);
        }
        state.out.push(frame)?;
        drop(state);
        self.inner.writer_wake.notify_one();
        Ok(())
    }

    /// Acknowledges the delivery with `tag` (for callers that keep tags
    /// rather than [`crate::Delivery`] values, such as protocol gateways).
    pub fn ack_tag(&self, tag: u64) -> Result<(), ClientError> {
        self.queue_ack(tag)
    }

    /// Refuses the delivery with `tag`: redelivered (`requeue`) or dropped.
    pub fn nack_tag(&self, tag: u64, requeue: bool) -> Result<(), ClientError> {
        self.send_frame(Frame::Nack { delivery_tag: tag, requeue })
    }

    /// Refuses `tag`, given in `session`; dropped when that session has
    /// ended (as [`Client::queue_ack_in`] drops an acknowledgement).
    pub(crate) fn nack_in(&self, session: u64, tag: u64, requeue: bool) -> Result<(), ClientError> {
        let current = self.lock().is_session(session);
        match current {
            true => self.nack_tag(tag, requeue),
            false => Ok(()),
        }
    }

    pub(crate) fn queue_ack(&self, tag: u64) -> Result<(), ClientError> {
        self.queue_ack_in(None, tag)
    }

    /// Queues an acknowledgement of `tag`, given in `session` (any, for
    /// `None`). One given in an earlier session is dropped: that session's
    /// broker returned the delivery when it ended and gives it again, and
    /// its tag now names another delivery of the new session.
    pub(crate) fn queue_ack_in(&self, session: Option<u64>, tag: u64) -> Result<(), ClientError> {
        let mut state = self.lock();
        if state.closed {
            return Err(ClientError::Closed);
        }
        if session.is_some_and(|session| !state.is_session(session)) {
            return Ok(());
        }
        state.acks.push(tag);
        drop(state);
        self.inner.writer_wake.notify_one();
        Ok(())
    }

    /// Waits while the unsent buffer is over its bound.
    async fn wait_for_space(&self) -> Result<(), ClientError> {
        let limit = self.inner.options.write_buffer_bytes_max;
        // Fast path: no wake-up registration (it takes a lock) when there is room.
        {
            let state = self.lock();
            if state.closed {
                return Err(ClientError::Closed);
            }
            if state.out.len() < limit {
                return Ok(());
            }
        }
        loop {
            let space = self.inner.space.notified();
            tokio::pin!(space);
            space.as_mut().enable();
            {
                let state = self.lock();
                if state.closed {
                    return Err(ClientError::Closed);
                }
                if state.out.len() < limit {
                    return Ok(());
                }
            }
            space.await;
        }
    }

    /// Publishes without waiting for a confirm (fire-and-forget). The
    /// returned future resolves once the message is buffered for sending.
    ///
    /// The message is encoded before the future is built: a message is a
    /// few hundred bytes, and a future that held it would be copied around.
    pub fn publish(&self, message: Message) -> impl std::future::Future<Output = Result<(), ClientError>> + '_ {
        let queued = match self.inner.endpoint {
            // A local session takes the message itself: nothing to encode.
            Endpoint::Local(_) => self.queue_publish(Publishing::Owned(message)),
            _ => {
                let queued = self.queue_publish(Publishing::Borrowed(MessageRef::of(&message)));
                drop(message);
                queued
            }
        };
        self.finish_publish(queued)
    }

    /// Publishes `payload` on `topic` best-effort, with no properties and
    /// default priority, without building a [`Message`]: the cheapest way
    /// to publish at a high rate. The payload is copied into the send
    /// buffer before this returns.
    pub fn publish_payload(
        &self,
        topic: &TopicName,
        payload: &[u8],
    ) -> impl std::future::Future<Output = Result<(), ClientError>> + '_ {
        let queued = self.queue_publish(Publishing::Borrowed(MessageRef::payload_only(topic, payload)));
        self.finish_publish(queued)
    }

    /// Numbers and encodes a fire-and-forget publish into the send buffer,
    /// or, when the buffer is over its bound, into a frame of its own that
    /// [`Client::finish_publish`] appends once there is room.
    fn queue_publish(&self, mut message: Publishing<'_>) -> Result<Option<Outgoing>, ClientError> {
        let mut state = self.lock();
        if state.closed {
            return Err(ClientError::Closed);
        }
        let mut flags = 0;
        let mut time = None;
        if self.inner.options.publisher_time {
            time = Some(self.publisher_time(&state, message.timestamp_ns())?);
            flags = publish_flags::PUBLISHER_TIME;
        }
        state.next_sequence += 1;
        message.stamp(state.next_sequence, time);
        if state.out.len() < self.inner.options.write_buffer_bytes_max {
            // The common case: room in the buffer, one lock.
            state.out.push_publish(flags, message)?;
            drop(state);
            self.inner.writer_wake.notify_one();
            return Ok(None);
        }
        let mut frame = state.out.empty_like();
        frame.push_publish(flags, message)?;
        Ok(Some(frame))
    }

    async fn finish_publish(&self, queued: Result<Option<Outgoing>, ClientError>) -> Result<(), ClientError> {
        let Some(frame) = queued? else { return Ok(()) };
        self.wait_for_space().await?;
        let mut state = self.lock();
        if state.closed {
            return Err(ClientError::Closed);
        }
        state.out.append(frame);
        drop(state);
        self.inner.writer_wake.notify_one();
        Ok(())
    }

    /// Gives a persistent message without a `Sift-Msg-Id` one of this
    /// client's, when [`ClientOptions::msg_ids`] asks for it.
    fn stamp_msg_id(&self, message: &mut Message) {
        let wanted = self.inner.options.msg_ids && message.delivery_mode == sift_core::DeliveryMode::Persistent;
        if wanted && message.property(sift_core::MSG_ID_PROPERTY).is_none() {
            let id = format!("{}-{}", self.inner.msg_id_prefix, message.sequence);
            message.properties.push((sift_core::MSG_ID_PROPERTY.to_string(), sift_core::Value::Str(id.into())));
        }
    }

    /// Publishes and waits for the broker's confirm: the matched count, "no
    /// subscribers", or with `await_delivered` the acknowledgement outcome.
    /// Reliable publishes are resent after a reconnect until confirmed.
    pub async fn publish_confirmed(&self, message: Message, options: PublishOptions) -> Result<Confirm, ClientError> {
        let receiver = self.start_confirmed(message, options).await?;
        receiver.await.map_err(|_| ClientError::Closed)?
    }

    /// Sends a confirmed publish and returns the channel its confirm will
    /// arrive on, so that many confirmed publishes can be in flight at once
    /// (up to the broker's publish window).
    pub async fn start_confirmed(
        &self,
        mut message: Message,
        options: PublishOptions,
    ) -> Result<oneshot::Receiver<Result<Confirm, ClientError>>, ClientError> {
        let permit = self.inner.window.clone().acquire_owned().await.map_err(|_| ClientError::Closed)?;
        self.wait_for_space().await?;
        let mut flags = publish_flags::CONFIRM;
        if options.await_delivered {
            flags |= publish_flags::AWAIT_DELIVERED;
        }
        let timeout_ms = options.await_timeout.map_or(0, |timeout| timeout.as_millis().min(u32::MAX as u128) as u32);
        let (sender, receiver) = oneshot::channel();
        let mut state = self.lock();
        if state.closed {
            return Err(ClientError::Closed);
        }
        if self.inner.options.publisher_time {
            (message.timestamp_ns, message.time_error_ns) = self.publisher_time(&state, message.timestamp_ns)?;
            flags |= publish_flags::PUBLISHER_TIME;
        }
        state.next_sequence += 1;
        message.sequence = state.next_sequence;
        self.stamp_msg_id(&mut message);
        let request_id = state.next_request_id;
        state.next_request_id += 1;
        let resend = message.delivery_mode.needs_ack() || options.await_delivered;
        if !state.connected && !resend {
            // Best-effort publishes are not kept across a disconnection.
            return Err(ClientError::Disconnected);
        }
        let connected = state.connected;
        let kept = match &mut state.out {
            Outgoing::Encoded(out) => {
                let mut frame = BytesMut::new();
                encode_publish(&mut frame, request_id, flags, timeout_ms, &message)
                    .map_err(|error| ClientError::Encode(error.to_string()))?;
                let frame = frame.freeze();
                if connected {
                    out.extend_from_slice(&frame);
                }
                resend.then_some(Resend::Encoded(frame))
            }
            Outgoing::Frames(_) => {
                let publish = Publish { request_id, flags, await_timeout_ms: timeout_ms, message: Box::new(message) };
                let frame = Frame::Publish(publish);
                match (connected, resend) {
                    (true, true) => {
                        state.out.push(frame.clone())?;
                        Some(Resend::Frame(frame))
                    }
                    (true, false) => {
                        state.out.push(frame)?;
                        None
                    }
                    (false, _) => Some(Resend::Frame(frame)),
                }
            }
        };
        let pending = PendingPublish { sender, frame: kept, _permit: Some(permit) };
        state.pending.insert(request_id, pending);
        drop(state);
        self.inner.writer_wake.notify_one();
        Ok(receiver)
    }

    /// Opens a subscription and waits until the broker confirms it is live.
    pub async fn subscribe(&self, options: SubscribeOptions) -> Result<Subscription, ClientError> {
        self.subscribe_registered(options, |_| {}).await
    }

    /// [`Client::subscribe`], calling `register` with the subscription's id
    /// before the request leaves: a front-end whose deliveries the broker
    /// writes (`sift_broker::door_writer`) learns the id of each delivery's
    /// subscription before the first one can come.
    pub async fn subscribe_registered(
        &self,
        options: SubscribeOptions,
        register: impl FnOnce(u32),
    ) -> Result<Subscription, ClientError> {
        let (sender, receiver) = mpsc::channel(self.inner.options.subscription_batches.max(1));
        let (ready_sender, ready) = oneshot::channel();
        let sub_id = {
            let mut state = self.lock();
            if state.closed {
                return Err(ClientError::Closed);
            }
            let sub_id = state.next_sub_id;
            state.next_sub_id += 1;
            register(sub_id);
            let request = subscribe_frame(sub_id, &options);
            if state.connected {
                state.out.push(Frame::Subscribe(request.clone()))?;
            }
            state.subs.insert(sub_id, SubEntry { request, sender, ready: Some(ready_sender) });
            sub_id
        };
        self.inner.writer_wake.notify_one();
        match ready.await {
            Ok(Ok(())) => Ok(Subscription {
                sub_id,
                receiver,
                buffered: std::collections::VecDeque::new(),
                gaps: Vec::new(),
                caught_up_through: None,
                taken_stream_seq_max: 0,
                client: self.clone(),
                ack: options.ack,
            }),
            Ok(Err(error)) => {
                self.lock().subs.remove(&sub_id);
                Err(error)
            }
            Err(_) => Err(ClientError::Closed),
        }
    }

    pub(crate) fn unsubscribe(&self, sub_id: u32) -> Result<(), ClientError> {
        self.lock().subs.remove(&sub_id);
        self.send_frame(Frame::Unsubscribe { sub_id })
    }

    /// Round trip to the broker; when it returns, the broker has read
    /// everything sent before it and handled it, except publishes it holds
    /// back behind one waiting for space in a full `block` queue.
    pub async fn ping(&self) -> Result<Duration, ClientError> {
        let started = std::time::Instant::now();
        let (sender, receiver) = oneshot::channel();
        let nonce = {
            let mut state = self.lock();
            state.next_request_id += 1;
            let nonce = state.next_request_id;
            state.pings.insert(nonce, sender);
            nonce
        };
        self.send_frame(Frame::Ping { nonce })?;
        receiver.await.map_err(|_| ClientError::Disconnected)?;
        Ok(started.elapsed())
    }

    /// Sends an `ADMIN` and returns the channel its reply's JSON text will
    /// arrive on. Not resent after a reconnect: the answer would describe a
    /// later moment than the one asked about.
    pub(crate) fn start_admin(&self, query: AdminQuery) -> Result<AdminReceiver, ClientError> {
        self.start_json_request(|request_id| Frame::Admin { request_id, query })
    }

    /// Sends the frame `build` makes for a new request id, whose answer is
    /// an `ADMIN_REPLY` (or an `ERROR`): `ADMIN` and `MANAGE`.
    pub(crate) fn start_json_request(&self, build: impl FnOnce(u64) -> Frame) -> Result<AdminReceiver, ClientError> {
        let (sender, receiver) = oneshot::channel();
        self.send_request(build, |state, request_id| {
            state.admins.insert(request_id, sender);
        })?;
        Ok(receiver)
    }

    /// Sends `QUERY` with a new request id; its results go to `sender`.
    pub(crate) fn start_query(&self, build: impl FnOnce(u64) -> Frame, sender: QuerySender) -> Result<(), ClientError> {
        self.send_request(build, |state, request_id| {
            state.queries.insert(request_id, sender);
        })
    }

    /// Queues the frame `build` makes for a new request id, and lets
    /// `register` note where its answer goes, under the same lock (so that
    /// the answer cannot come first).
    fn send_request(
        &self,
        build: impl FnOnce(u64) -> Frame,
        register: impl FnOnce(&mut State, u64),
    ) -> Result<(), ClientError> {
        let mut state = self.lock();
        if state.closed {
            return Err(ClientError::Closed);
        }
        if !state.connected {
            return Err(ClientError::Disconnected);
        }
        let request_id = state.next_request_id;
        state.out.push(build(request_id))?;
        state.next_request_id += 1;
        register(&mut state, request_id);
        drop(state);
        self.inner.writer_wake.notify_one();
        Ok(())
    }

    /// Closes cleanly: sends what is buffered, says `CLOSE`, waits for the
    /// broker's `CLOSE` (bounded by the connect timeout), and stops.
    pub async fn close(&self) {
        let (sender, receiver) = oneshot::channel();
        let connected = {
            let mut state = self.lock();
            if state.closed {
                return;
            }
            state.close_ack = Some(sender);
            state.connected
        };
        if connected && self.send_frame(Frame::Close).is_ok() {
            let _ = tokio::time::timeout(self.inner.options.connect_timeout, receiver).await;
        }
        self.shut_down();
    }

    fn shut_down(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.connected = false;
        for (_, pending) in state.pending.drain() {
            let _ = pending.sender.send(Err(ClientError::Closed));
        }
        state.subs.clear();
        state.pings.clear();
        state.time_waiters.clear();
        for (_, admin) in state.admins.drain() {
            let _ = admin.send(Err(ClientError::Closed));
        }
        state.queries.clear();
        drop(state);
        self.inner.window.close();
        self.inner.writer_wake.notify_one();
        self.inner.space.notify_waiters();
    }
}

fn subscribe_frame(sub_id: u32, options: &SubscribeOptions) -> Subscribe {
    let (filter_kind, filter) = options.filter.clone().unwrap_or((FilterKind::None, String::new()));
    Subscribe {
        sub_id,
        topic_filter: options.topic_filter.clone(),
        queue_group: options.queue_group.clone().unwrap_or_default(),
        filter_kind,
        filter,
        ack_mode: if options.ack == AckPolicy::OnWrite { AckMode::Auto } else { AckMode::Client },
        policy: options.policy,
        queue_capacity: options.queue_capacity.unwrap_or(0),
        max_unacked: options.max_unacked.unwrap_or(0),
        flags: subscribe_flags_of(options),
        initial_credit: options.credit.unwrap_or(0),
        source: options.source.clone(),
    }
}

fn subscribe_flags_of(options: &SubscribeOptions) -> u8 {
    let mut flags = 0;
    if options.credit.is_some() {
        flags |= subscribe_flags::CREDIT_MODE;
    }
    if options.source.is_some() {
        flags |= subscribe_flags::STREAM_SOURCE;
    }
    if options.shared {
        flags |= subscribe_flags::SHARED;
    }
    if options.browse {
        flags |= subscribe_flags::BROWSE;
    }
    if options.caught_up_markers {
        flags |= subscribe_flags::CAUGHT_UP;
    }
    if options.member_filter {
        flags |= subscribe_flags::MEMBER_FILTER;
    }
    flags
}

/// The request id of the `AUTH` a connection opens with.
const AUTH_REQUEST_ID: u64 = 1;

/// The handshake's frames: `HELLO`, and `AUTH` when signing in.
fn greeting(options: &ClientOptions) -> Vec<Frame> {
    let hello =
        Hello { version_min: PROTOCOL_VERSION_MIN, version_max: PROTOCOL_VERSION, client_name: options.name.clone() };
    let mut frames = vec![Frame::Hello(hello)];
    if let Some(credentials) = &options.credentials {
        frames.push(Frame::Auth(credentials.auth(AUTH_REQUEST_ID)));
    }
    frames
}

/// The answers the handshake waits for: `WELCOME`, then `AUTH_OK` when it
/// signs in. A refused sign-in is [`ClientError::Refused`] with the
/// broker's code (`auth_failed`), so that a front-end can answer in its
/// own words; any other failure is [`ClientError::Connect`].
struct Answers {
    welcome: Option<Welcome>,
    signing_in: bool,
    user: Option<String>,
}

/// What a completed handshake brought: the broker's `WELCOME`, and the
/// user its `AUTH_OK` named when the client signed in.
struct Greeted {
    welcome: Welcome,
    user: Option<String>,
}

impl Answers {
    fn new(options: &ClientOptions) -> Answers {
        Answers { welcome: None, signing_in: options.credentials.is_some(), user: None }
    }

    /// Takes one frame; the `WELCOME` once every answer has come.
    fn take(&mut self, frame: Frame, failure: &impl Fn(String) -> ClientError) -> Result<Option<Greeted>, ClientError> {
        match frame {
            Frame::Welcome(welcome) if self.welcome.is_none() => self.welcome = Some(welcome),
            Frame::AuthOk { request_id: AUTH_REQUEST_ID, user } if self.signing_in => {
                self.signing_in = false;
                self.user = Some(user);
            }
            Frame::Error(error) if matches!(error.code, ErrorCode::AuthFailed | ErrorCode::AuthRequired) => {
                return Err(ClientError::Refused { code: error.code, message: error.message });
            }
            Frame::Error(error) => return Err(failure(format!("{}: {}", error.code, error.message))),
            other => return Err(failure(format!("unexpected {} during the handshake", other.name()))),
        }
        if self.signing_in {
            return Ok(None);
        }
        Ok(self.welcome.take().map(|welcome| Greeted { welcome, user: self.user.take() }))
    }
}

/// Connects and runs the handshake.
async fn open(endpoint: &Endpoint, options: &ClientOptions) -> Result<(Link, Greeted), ClientError> {
    let failure = |reason: String| ClientError::Connect { address: endpoint.to_string(), reason };
    let attempt = async {
        let link = crate::transport::connect(endpoint, options.tls.as_ref())
            .await
            .map_err(|error| failure(error.to_string()))?;
        let (mut reader, mut writer) = match link {
            Link::Bytes(reader, writer) => (reader, writer),
            Link::Frames(to_broker, from_broker) => {
                return greet_local(to_broker, from_broker, options, &failure).await
            }
        };
        let mut buf = BytesMut::new();
        for frame in greeting(options) {
            frame.encode(&mut buf).map_err(|error| failure(error.to_string()))?;
        }
        writer.write_all(&buf).await.map_err(|error| failure(error.to_string()))?;
        buf.clear();
        let mut decoder = Decoder::new(DEFAULT_MAX_FRAME_BYTES);
        let mut answers = Answers::new(options);
        loop {
            while let Some(frame) = decoder.decode(&mut buf).map_err(|error| failure(error.to_string()))? {
                if let Some(greeted) = answers.take(frame, &failure)? {
                    return Ok((Link::Bytes(reader, writer), greeted));
                }
            }
            let read = reader.read_buf(&mut buf).await.map_err(|error| failure(error.to_string()))?;
            if read == 0 {
                return Err(failure("connection closed during the handshake".into()));
            }
        }
    };
    tokio::time::timeout(options.connect_timeout, attempt)
        .await
        .map_err(|_| failure(format!("no WELCOME within {:?}", options.connect_timeout)))?
}

/// A local session's handshake: `HELLO` (and `AUTH`) out, `WELCOME` (and
/// `AUTH_OK`), or the `ERROR` that refuses the session, back, as values.
async fn greet_local(
    to_broker: mpsc::Sender<Vec<Frame>>,
    mut from_broker: mpsc::Receiver<Vec<Frame>>,
    options: &ClientOptions,
    failure: &impl Fn(String) -> ClientError,
) -> Result<(Link, Greeted), ClientError> {
    let closed = || failure("the local session closed during the handshake".into());
    to_broker.send(greeting(options)).await.map_err(|_| closed())?;
    let mut answers = Answers::new(options);
    loop {
        let batch = from_broker.recv().await.ok_or_else(closed)?;
        let mut frames = batch.into_iter();
        while let Some(frame) = frames.next() {
            if let Some(greeted) = answers.take(frame, failure)? {
                debug_assert!(frames.next().is_none(), "nothing but the handshake's answers comes before it ends");
                return Ok((Link::Frames(to_broker, from_broker), greeted));
            }
        }
    }
}

impl Client {
    /// Keeps the connection: runs it, and on loss reconnects with backoff.
    async fn supervise(self, first: Link) {
        let mut stream = Some(first);
        let mut delay = RECONNECT_DELAY_MIN;
        let mut reconnected = false;
        loop {
            if let Some(link) = stream.take() {
                if reconnected {
                    self.resume();
                }
                reconnected = true;
                let (max_frame, session) = {
                    let state = self.lock();
                    (state.welcome.as_ref().map_or(DEFAULT_MAX_FRAME_BYTES, |w| w.max_frame_bytes), state.session)
                };
                // A broker in this process cannot go silent without its
                // channels closing: only byte streams are watched.
                let (mut writer_task, mut reader_task, ping_interval) = match link {
                    Link::Bytes(reader, writer) => (
                        tokio::spawn(self.clone().write_loop(writer)),
                        tokio::spawn(self.clone().read_loop(reader, max_frame, session)),
                        self.inner.options.ping_interval,
                    ),
                    Link::Frames(to_broker, from_broker) => (
                        tokio::spawn(self.clone().write_frames_loop(to_broker)),
                        tokio::spawn(self.clone().read_frames_loop(from_broker, session)),
                        None,
                    ),
                };
                let pings_max = self.inner.options.pings_outstanding_max;
                tokio::select! {
                    _ = &mut writer_task => reader_task.abort(),
                    _ = &mut reader_task => writer_task.abort(),
                    () = crate::liveness::watch(&self, &self.inner.reads, ping_interval, pings_max) => {
                        reader_task.abort();
                        writer_task.abort();
                    }
                }
                self.suspend();
                delay = RECONNECT_DELAY_MIN;
            }
            if self.lock().closed || !self.inner.options.reconnect {
                self.shut_down();
                return;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(self.inner.options.reconnect_delay_max);
            match open(&self.inner.endpoint, &self.inner.options).await {
                Ok((new_stream, Greeted { welcome, user })) => {
                    let mut state = self.lock();
                    state.welcome = Some(welcome);
                    state.user = user;
                    drop(state);
                    stream = Some(new_stream);
                }
                Err(error) => tracing::debug!(%error, "reconnect failed"),
            }
        }
    }

    /// After a (re)connect: subscriptions first, then unconfirmed reliable
    /// publishes in their original order, then what was buffered meanwhile.
    fn resume(&self) {
        let mut state = self.lock();
        let mut prefix = state.out.empty_like();
        let mut sub_ids: Vec<u32> = state.subs.keys().copied().collect();
        sub_ids.sort_unstable();
        // The new session has no subscriptions: open them all again, under
        // the same ids, so that their streams carry on.
        for sub_id in sub_ids {
            if let Some(entry) = state.subs.get(&sub_id) {
                let _ = prefix.push(Frame::Subscribe(entry.request.clone()));
            }
        }
        let mut request_ids: Vec<u64> = state.pending.keys().copied().collect();
        request_ids.sort_unstable();
        for request_id in request_ids {
            match state.pending.get(&request_id).and_then(|pending| pending.frame.as_ref()) {
                Some(Resend::Encoded(frame)) => prefix.append(Outgoing::Encoded(BytesMut::from(&frame[..]))),
                Some(Resend::Frame(frame)) => {
                    let _ = prefix.push(frame.clone());
                }
                None => {}
            }
        }
        let buffered = std::mem::replace(&mut state.out, prefix);
        state.out.append(buffered);
        state.connected = true;
        state.session += 1;
        drop(state);
        self.inner.connected_watch.send_replace(true);
        self.inner.writer_wake.notify_one();
    }

    /// After a loss: drop unsent frames (they belong to the old session),
    /// fail what will not be resent, keep reliable publishes for resending.
    fn suspend(&self) {
        let mut state = self.lock();
        state.connected = false;
        state.out.clear();
        state.acks.clear();
        let lost: Vec<u64> =
            state.pending.iter().filter(|(_, pending)| pending.frame.is_none()).map(|(id, _)| *id).collect();
        for request_id in lost {
            if let Some(pending) = state.pending.remove(&request_id) {
                let _ = pending.sender.send(Err(ClientError::Disconnected));
            }
        }
        state.pings.clear();
        state.time_waiters.clear();
        for (_, admin) in state.admins.drain() {
            let _ = admin.send(Err(ClientError::Disconnected));
        }
        // Dropping a query's sender ends its results without `Done`: the
        // application sees that it was cut short.
        state.queries.clear();
        if let Some(close_ack) = state.close_ack.take() {
            let _ = close_ack.send(());
        }
        drop(state);
        self.inner.connected_watch.send_replace(false);
        self.inner.space.notify_waiters();
    }

    async fn write_loop(self, mut writer: TransportWrite) {
        let mut batch = BytesMut::new();
        loop {
            {
                let mut state = self.lock();
                for chunk in state.acks.chunks(ACK_BATCH_MAX) {
                    let _ = Frame::Ack { delivery_tags: chunk.to_vec() }.encode(&mut batch);
                }
                state.acks.clear();
                if let Outgoing::Encoded(out) = &mut state.out {
                    if batch.is_empty() {
                        // Take the whole buffer without copying; the emptied
                        // batch buffer goes back to collect the next frames.
                        std::mem::swap(&mut batch, out);
                    } else {
                        batch.extend_from_slice(out);
                        out.clear();
                    }
                }
                if batch.is_empty() && state.closed {
                    return;
                }
            }
            if batch.is_empty() {
                self.inner.writer_wake.notified().await;
                continue;
            }
            self.inner.space.notify_waiters();
            if writer.write_all(&batch).await.is_err() {
                return;
            }
            batch.clear();
        }
    }

    /// A local session's writer: takes the queued frames at each wake-up,
    /// acknowledgements first, as the byte writer does, and hands them over
    /// in the batches it was queued in (`outgoing::LOCAL_BATCH_BYTES` at most), so that the session's
    /// bounded channel bounds the bytes in flight as a pipe would.
    async fn write_frames_loop(self, to_broker: mpsc::Sender<Vec<Frame>>) {
        loop {
            let (acks, batches) = {
                let mut state = self.lock();
                let acks: Vec<Frame> = state
                    .acks
                    .chunks(ACK_BATCH_MAX)
                    .map(|chunk| Frame::Ack { delivery_tags: chunk.to_vec() })
                    .collect();
                state.acks.clear();
                let batches = match &mut state.out {
                    Outgoing::Frames(queued) => queued.take_batches(),
                    Outgoing::Encoded(_) => Vec::new(),
                };
                if acks.is_empty() && batches.is_empty() && state.closed {
                    return;
                }
                (acks, batches)
            };
            if acks.is_empty() && batches.is_empty() {
                self.inner.writer_wake.notified().await;
                continue;
            }
            self.inner.space.notify_waiters();
            let acks = (!acks.is_empty()).then_some(acks);
            for batch in acks.into_iter().chain(batches) {
                if to_broker.send(batch).await.is_err() {
                    return;
                }
            }
        }
    }
}

impl Client {
    /// A local session's reader: the broker's frames arrive as values, in
    /// batches; deliveries are staged per subscription as the byte reader
    /// stages them.
    async fn read_frames_loop(self, mut from_broker: mpsc::Receiver<Vec<Frame>>, session: u64) {
        let mut staged: Vec<(u32, Vec<Delivery>)> = Vec::new();
        let mut batch_capacity = 1;
        // One batch from the broker is at most one `write_batch_bytes`, as
        // a socket read is one read buffer: each is handed over on its own,
        // so that a subscription's channel bounds what waits in this client.
        while let Some(frames) = from_broker.recv().await {
            for frame in frames {
                match frame {
                    Frame::Deliver(deliver) => self.stage(&mut staged, deliver, batch_capacity, session),
                    frame => {
                        if !self.dispatch(frame).await {
                            return;
                        }
                    }
                }
            }
            batch_capacity = self.hand_over(&mut staged).await;
        }
    }

    async fn read_loop(self, mut reader: TransportRead, max_frame_bytes: u32, session: u64) {
        let mut decoder = Decoder::new(max_frame_bytes);
        let mut buf = BytesMut::with_capacity(64 * 1024);
        // Deliveries of one read, per subscription, handed over as batches:
        // one channel operation per read rather than per message.
        let mut staged: Vec<(u32, Vec<Delivery>)> = Vec::new();
        // A batch starts as large as the largest of the previous read, so
        // that a busy stream does not regrow (and copy) its batch each read.
        let mut batch_capacity = 1;
        loop {
            loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(Frame::Deliver(deliver))) => self.stage(&mut staged, deliver, batch_capacity, session),
                    Ok(Some(frame)) => {
                        if !self.dispatch(frame).await {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(error) if error.is_fatal() => {
                        tracing::warn!(%error, "broker sent an undecodable stream");
                        return;
                    }
                    Err(error) => tracing::warn!(%error, "skipping a malformed frame from the broker"),
                }
            }
            batch_capacity = self.hand_over(&mut staged).await;
            if buf.capacity() - buf.len() < 16 * 1024 {
                buf.reserve(64 * 1024);
            }
            match reader.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => self.inner.reads.count(),
            }
        }
    }

    fn stage(&self, staged: &mut Vec<(u32, Vec<Delivery>)>, deliver: Deliver, batch_capacity: usize, session: u64) {
        let delivery = Delivery {
            message: deliver.message,
            sub_id: deliver.sub_id,
            delivery_tag: deliver.delivery_tag,
            redelivered: deliver.flags & deliver_flags::REDELIVERED != 0,
            stream_seq: deliver.stream_seq,
            // Only deliveries that can be acknowledged hold the client: its
            // reference count is shared with other threads.
            settle: (deliver.delivery_tag != 0).then(|| Settle { client: self.clone(), session }),
        };
        match staged.iter_mut().find(|(sub_id, _)| *sub_id == deliver.sub_id) {
            Some((_, batch)) => batch.push(delivery),
            None => {
                let mut batch = Vec::with_capacity(batch_capacity);
                batch.push(delivery);
                staged.push((deliver.sub_id, batch));
            }
        }
    }

    /// Hands each subscription its batch. When the application is slow and
    /// its channel is full, this waits, which stops reading: the broker's
    /// queue for this connection fills and its policy applies.
    /// Returns how large the next read's batches start: as large as the
    /// largest of this one, so that a busy stream does not regrow (and
    /// copy) its batch each read.
    async fn hand_over(&self, staged: &mut Vec<(u32, Vec<Delivery>)>) -> usize {
        let next_capacity =
            staged.iter().map(|(_, batch)| batch.len()).max().unwrap_or(1).clamp(1, STAGED_BATCH_CAPACITY_MAX);
        for (sub_id, batch) in staged.drain(..) {
            let waiting = {
                let state = self.lock();
                // Deliveries can still arrive for a subscription just closed.
                let Some(entry) = state.subs.get(&sub_id) else { continue };
                match entry.sender.try_send(Batch::Deliveries(batch)) {
                    Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => continue,
                    Err(mpsc::error::TrySendError::Full(batch)) => (entry.sender.clone(), batch),
                }
            };
            let (sender, batch) = waiting;
            let _ = sender.send(batch).await;
        }
        next_capacity
    }

    /// Acts on one frame from the broker; false when the connection ends.
    async fn dispatch(&self, frame: Frame) -> bool {
        match frame {
            Frame::Deliver(_) => unreachable!("DELIVER frames are staged by the read loop"),
            Frame::Confirm(confirm) => {
                let pending = self.lock().pending.remove(&confirm.request_id);
                if let Some(pending) = pending {
                    let _ = pending.sender.send(Ok(confirm));
                }
            }
            Frame::Subscribed { sub_id } => {
                let ready = self.lock().subs.get_mut(&sub_id).and_then(|entry| entry.ready.take());
                if let Some(ready) = ready {
                    let _ = ready.send(Ok(()));
                }
            }
            Frame::Pong { nonce } => {
                if let Some(waiter) = self.lock().pings.remove(&nonce) {
                    let _ = waiter.send(());
                }
            }
            Frame::Ping { nonce } => {
                let _ = self.send_frame(Frame::Pong { nonce });
            }
            Frame::TimeReply(reply) => self.time_reply(reply),
            Frame::Time { request_id, origin_ns } => self.answer_time(request_id, origin_ns),
            Frame::AdminReply { request_id, json } => {
                if let Some(waiter) = self.lock().admins.remove(&request_id) {
                    let _ = waiter.send(Ok(json));
                }
            }
            Frame::Gap { sub_id, first_seq, count, reason } => {
                let sender = self.lock().subs.get(&sub_id).map(|entry| entry.sender.clone());
                if let Some(sender) = sender {
                    let _ = sender.send(Batch::Gap(Gap { first_seq, count, reason })).await;
                }
            }
            Frame::CaughtUp { sub_id, last_seq } => {
                let sender = self.lock().subs.get(&sub_id).map(|entry| entry.sender.clone());
                if let Some(sender) = sender {
                    let _ = sender.send(Batch::CaughtUp(last_seq)).await;
                }
            }
            Frame::QueryResult { request_id, stream_seq, message } => {
                let sender = self.lock().queries.get(&request_id).cloned();
                if let Some(sender) = sender {
                    let _ = sender.send(crate::QueryEvent::Message { stream_seq, message }).await;
                }
            }
            Frame::QueryDone { request_id, matched, scanned, missed } => {
                let sender = self.lock().queries.remove(&request_id);
                if let Some(sender) = sender {
                    let _ = sender.send(crate::QueryEvent::Done { matched, scanned, missed }).await;
                }
            }
            Frame::Error(error) => return self.refused(error),
            Frame::Close => {
                if let Some(close_ack) = self.lock().close_ack.take() {
                    let _ = close_ack.send(());
                }
                return false;
            }
            other => tracing::warn!("unexpected {} from the broker", other.name()),
        }
        true
    }

    /// Routes an `ERROR` to the request it refers to; false when fatal.
    fn refused(&self, error: ErrorFrame) -> bool {
        let failure = ClientError::Refused { code: error.code, message: error.message.clone() };
        let mut state = self.lock();
        if error.reference >= REQUEST_ID_BASE {
            if let Some(pending) = state.pending.remove(&error.reference) {
                let _ = pending.sender.send(Err(failure));
            } else if let Some(admin) = state.admins.remove(&error.reference) {
                let _ = admin.send(Err(failure));
            } else if let Some(query) = state.queries.remove(&error.reference) {
                // The reader must not wait here; a full channel means the
                // application stopped reading, and the query is over anyway.
                let _ = query.try_send(crate::QueryEvent::Failed(failure));
            }
        } else if error.reference != 0 {
            let sub_id = error.reference as u32;
            let failed_subscribe = state.subs.get_mut(&sub_id).and_then(|entry| entry.ready.take());
            match failed_subscribe {
                Some(ready) => {
                    let _ = ready.send(Err(failure));
                }
                // An error about a live subscription (refused when restored
                // after a reconnect, or closed as a slow consumer) ends its
                // stream, so that the application sees it is gone.
                None if error.code != ErrorCode::UnknownSubscription && error.code != ErrorCode::InvalidField => {
                    tracing::warn!(sub_id, code = %error.code, message = %error.message, "subscription closed");
                    state.subs.remove(&sub_id);
                }
                None => {}
            }
        }
        if error.fatal {
            tracing::warn!(code = %error.code, message = %error.message, "broker closed the connection");
        } else if error.reference == 0 {
            tracing::warn!(code = %error.code, message = %error.message, "broker reported an error");
        }
        !error.fatal
    }
}
