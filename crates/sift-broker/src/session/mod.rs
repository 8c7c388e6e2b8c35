//! The session machine: one client session, whatever door it came by.
//!
//! A session opens with a checked `HELLO` ([`check_hello`],
//! [`open_connection`]), then its read loop takes frames from an
//! [`Inbound`] and hands each to [`Session::handle`], the one door into the
//! core: publishes go down the pipeline ([`crate::publish`]), subscribes,
//! acknowledgements, admin requests, stream management and archive
//! queries are answered by this module tree (one file per group of
//! requests). Two adapters feed it: a socket reader that decodes bytes
//! (`crate::connection`) and a local session that passes frame values
//! (`crate::local`); the session cannot tell them apart, so limits,
//! back-pressure, acknowledgements and slow-consumer policies are the same
//! code for every door.

mod access;
mod admin;
mod stream_manage;
mod stream_query;
mod stream_subscribe;
mod subscribe;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sift_proto::{DecodeError, ErrorCode, Frame, Hello, TimeReply, Welcome, PROTOCOL_VERSION, PROTOCOL_VERSION_MIN};

use crate::conn::{apply_settled, error_frame, send_refusal, ConnShared};
use crate::door::Door;
use crate::publish::Publisher;
use crate::shared::BrokerShared;
use crate::stats::bump;
use crate::subscription::SubRef;

/// Shortest interval between two scans for late acknowledgements.
const REDELIVERY_SCAN_MIN: Duration = Duration::from_millis(5);
/// Longest interval between two scans for late acknowledgements.
const REDELIVERY_SCAN_MAX: Duration = Duration::from_secs(1);

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
    let timer_task = tokio::spawn(redelivery_timer(conn.clone(), shared.clone()));
    let mut session = Session::new(conn.clone(), shared.clone());
    let outcome = match session.take_usage() {
        true => session.read_loop(&mut inbound).await,
        false => Ok(()),
    };
    match &outcome {
        Err(error) => tracing::debug!(connection = id, %peer, %error, "connection closed"),
        Ok(()) => tracing::debug!(connection = id, %peer, "connection closed"),
    }
    conn.close(None);
    if conn.overflowed() {
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

/// How long a parked publish waits for a wake-up before it looks again; the
/// subscriber's writer normally wakes it sooner.
const BLOCKED_RECHECK: Duration = Duration::from_millis(50);

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
    /// Who the session acts as, and so what it may do.
    pub(crate) standing: crate::access::Standing,
    /// An `AUTH` the read loop checks before it handles anything else.
    pending_auth: Option<sift_proto::Auth>,
    /// The session's share of its user's limits (a limited user only).
    pub(crate) usage: Option<crate::usage::UsageGuard>,
    /// A publish past its user's rate, and how long the session waits
    /// before it goes on and reads more.
    throttled: Option<(std::time::Duration, sift_proto::Publish)>,
}

impl Session {
    fn new(conn: Arc<ConnShared>, shared: Arc<BrokerShared>) -> Session {
        let certified = conn.certified().and_then(|name| shared.access.certified(name));
        Session {
            standing: certified.unwrap_or_else(|| shared.access.initial()),
            pending_auth: None,
            usage: None,
            throttled: None,
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
            if let Some(auth) = self.pending_auth.take() {
                if !self.sign_in(auth).await {
                    return Ok(());
                }
                // Frames that followed the AUTH may be waiting already.
                continue;
            }
            if let Some((wait, publish)) = self.throttled.take() {
                bump(&self.shared.stats.publishes_throttled);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = close_watch.changed() => return Ok(()),
                }
                self.publisher.begin_read();
                self.publisher.publish(publish);
                self.publisher.end_read();
                continue;
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
                    if self.throttled.is_some() {
                        return Ok(true);
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
                    if self.pending_auth.is_some() || self.throttled.is_some() {
                        // Nothing after an AUTH is handled before its
                        // outcome, nor after a throttled publish before it.
                        return Ok(true);
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
        if matches!(self.standing, crate::access::Standing::MustSignIn) && !access::allowed_before_sign_in(&frame) {
            return self.refuse_unsigned(&frame);
        }
        match frame {
            Frame::Publish(publish) => {
                if self.permits(access::Action::Publish(&publish.message.topic), publish.request_id)
                    && self.signed_as_required(&publish)
                {
                    let bytes = publish.message.payload.len();
                    match self.usage.as_ref().and_then(|usage| usage.publish(bytes, std::time::Instant::now())) {
                        None => self.publisher.publish(publish),
                        Some(wait) => self.throttled = Some((wait, publish)),
                    }
                }
                true
            }
            Frame::Auth(auth) => {
                self.pending_auth = Some(auth);
                true
            }
            Frame::Subscribe(subscribe) => self.subscribe(subscribe),
            Frame::Unsubscribe { sub_id } => self.unsubscribe(sub_id),
            Frame::Ack { delivery_tags } => self.ack(&delivery_tags),
            Frame::Nack { delivery_tag, requeue } => self.nack(delivery_tag, requeue),
            Frame::Flow { sub_id, credit } => self.flow(sub_id, credit),
            Frame::Admin { request_id, query } => {
                if self.permits(access::Action::Admin, request_id) {
                    self.admin(request_id, query);
                }
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
                let receive_ns = sift_core::system_now_ns();
                let reply = TimeReply { request_id, origin_ns, receive_ns, transmit_ns: sift_core::system_now_ns() };
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
            | Frame::AuthOk { .. }
            | Frame::Deliver(_)
            | Frame::AdminReply { .. }
            | Frame::Gap { .. }
            | Frame::CaughtUp { .. }
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
        send_refusal(&self.shared.stats, &self.conn, code, reference, message);
    }
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

/// Requeues reliable deliveries whose acknowledgement is later than
/// `ack_timeout_ms`, so that they are sent again.
pub async fn redelivery_timer(conn: Arc<ConnShared>, shared: Arc<BrokerShared>) {
    let delivery = &shared.config.delivery;
    let ack_timeout = Duration::from_millis(u64::from(delivery.ack_timeout_ms));
    let scan_every = (ack_timeout / 4).clamp(REDELIVERY_SCAN_MIN, REDELIVERY_SCAN_MAX);
    let mut close_watch = conn.close_watch();
    let mut ticker = tokio::time::interval(scan_every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = close_watch.changed() => return,
        }
        let settled = {
            let mut outbox = conn.lock();
            if outbox.unacked_count() == 0 {
                continue;
            }
            outbox.requeue_expired(Instant::now(), ack_timeout, delivery.max_redeliveries)
        };
        apply_settled(&conn, &shared.stats, settled);
    }
}
