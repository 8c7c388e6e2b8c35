//! One MQTT connection: CONNECT, then one loop that reads packets, writes
//! deliveries, answers confirmed publishes in order and keeps the
//! keep-alive, until the client leaves, the session is taken over or the
//! broker stops.
//!
//! The codec crate keeps the protocol state ([`Wire`]); the loop turns
//! its packets into calls on the session's native client and the
//! session's buffered deliveries into PUBLISH packets. Writes happen in
//! the loop, so a client that does not read stops the loop from taking
//! more deliveries, and the broker's queues and policies take over.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures_util::stream::{FuturesOrdered, StreamExt};
use mqtt_protocol_core::mqtt::connection::{ConnectionOptions, Event, TimerKind};
use mqtt_protocol_core::mqtt::result_code::{
    ConnectReasonCode, DisconnectReasonCode, PubackReasonCode, PubrecReasonCode, SubackReasonCode, UnsubackReasonCode,
};
use mqtt_protocol_core::mqtt::{role, Connection as Codec, Version as CodecVersion};
use sift_broker::door_writer::DoorBatch;
use sift_broker::front_end::Incoming;
use sift_broker::tls::{DoorReadHalf, DoorWriteHalf};
use sift_client::{ClientError, Confirm, PublishOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::codec::{
    self, ConnackProperties, ConnectRequest, Inbound, InboundPublish, OutboundPublish, Packet, SubscribeEntry,
    SubscribeRequest, Version, Will,
};
use crate::door::{publish_packet_bytes, Attached};
use crate::message::{
    message_of_publish, message_on_topic, message_qos, publish_properties, published_retained, PublishError,
};
use crate::publish::{publish_will, retain};
use crate::server::{MqttCounters, Shared};
use crate::sessions::{CodecState, Kick, Parked, SessionState};
use crate::subscriptions::{Routed, SubscriptionDescription, FILTER_PROPERTIES};
use crate::topic::{Filter, TopicCache};

/// The first byte of a CONNECT: packet type 1, no flags.
const CONNECT_FIRST_BYTE: u8 = 0x10;
/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Most deliveries turned into packets before the next write.
const WRITE_BATCH_DELIVERIES: usize = 256;

/// The codec's connection with what its events asked for.
struct Wire {
    codec: Codec<role::Server>,
    out: BytesMut,
    received: VecDeque<Packet>,
    keep_alive_ms: Option<u64>,
    keep_alive_reset: bool,
    keep_alive_deadline: Option<Instant>,
    close_requested: bool,
    /// The codec reported an error (before CONNECT it may not ask to
    /// close, but nothing more can come of the connection).
    failed: bool,
    /// The client's CONNECT said Topic Alias Maximum 0 (patched for the
    /// codec, see [`codec::patch_connect`]): never send it aliases.
    refuses_topic_aliases: bool,
}

impl Wire {
    fn new(max_packet_bytes: u32, receive_maximum: u16) -> Wire {
        let options =
            ConnectionOptions::new().maximum_packet_size_recv(max_packet_bytes).receive_maximum(receive_maximum);
        let mut codec = Codec::<role::Server>::with_options(CodecVersion::Undetermined, options);
        // PUBACK and PUBREC wait for the broker's confirm; PUBCOMP and
        // PUBREL are sent by the session too, so that all four follow the
        // same path.
        codec.set_auto_pub_response(false);
        codec.set_auto_ping_response(true);
        Wire {
            codec,
            out: BytesMut::new(),
            received: VecDeque::new(),
            keep_alive_ms: None,
            keep_alive_reset: false,
            keep_alive_deadline: None,
            close_requested: false,
            failed: false,
            refuses_topic_aliases: false,
        }
    }

    fn absorb(&mut self, events: Vec<Event>) {
        for event in events {
            match event {
                Event::RequestSendPacket { packet, .. } => {
                    use mqtt_protocol_core::mqtt::packet::GenericPacketTrait;
                    for slice in packet.to_buffers() {
                        self.out.extend_from_slice(&slice);
                    }
                }
                Event::NotifyPacketReceived(packet) => self.received.push_back(packet),
                // Reset on every packet received: the deadline is computed
                // once per batch (`keep_alive`), not per packet.
                Event::RequestTimerReset { kind: TimerKind::PingreqRecv, duration_ms } => {
                    self.keep_alive_ms = Some(duration_ms);
                    self.keep_alive_reset = true;
                }
                Event::RequestTimerCancel(TimerKind::PingreqRecv) => {
                    self.keep_alive_ms = None;
                    self.keep_alive_reset = true;
                }
                Event::NotifyError(error) => {
                    tracing::debug!("mqtt codec: {error:?}");
                    self.failed = true;
                }
                Event::RequestClose => self.close_requested = true,
                _ => {}
            }
        }
    }

    /// Feeds received bytes to the codec; packets land in `received`.
    fn feed(&mut self, bytes: &[u8]) {
        let mut cursor = mqtt_protocol_core::mqtt::common::Cursor::new(bytes);
        while (cursor.position() as usize) < bytes.len() && !self.close_requested && !self.failed {
            // The codec asserts some invariants of its own; should one
            // fail on what a client sent, the connection fails, and the
            // session is handed on as after any protocol error.
            let received = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.codec.recv(&mut cursor)));
            match received {
                Ok(events) => self.absorb(events),
                Err(_) => {
                    tracing::warn!("mqtt codec panicked on received bytes; closing the connection");
                    self.failed = true;
                }
            }
        }
    }

    /// When the client must have sent something by: reset by what the
    /// codec asked since the last call.
    fn keep_alive(&mut self) -> Option<Instant> {
        if std::mem::take(&mut self.keep_alive_reset) {
            self.keep_alive_deadline = self.keep_alive_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        }
        self.keep_alive_deadline
    }

    fn send(&mut self, packet: Result<Packet, codec::BuildError>) {
        match packet {
            Ok(packet) => {
                let events = self.codec.send(packet);
                self.absorb(events);
            }
            Err(error) => tracing::warn!("mqtt packet not built: {error:?}"),
        }
    }

    async fn flush(&mut self, writer: &mut DoorWriteHalf) -> bool {
        if self.out.is_empty() {
            return true;
        }
        let written = writer.write_all(&self.out).await.is_ok();
        self.out.clear();
        written
    }
}

/// Serves one accepted connection until it closes; `refused` answers its
/// CONNECT with "server busy" (`mqtt.max_connections`).
pub(crate) async fn serve(incoming: Incoming, shared: Arc<Shared>, closing: watch::Receiver<bool>, refused: bool) {
    let peer = incoming.tcp().peer_addr().ok();
    // MQTT has no way to say "wrong port" before CONNECT: a plain-text
    // client is closed, and its library reports the closed connection.
    let Some(stream) = incoming.open(&[]).await else { return };
    let certified = stream.peer_identity();
    let (mut reader, mut writer) = stream.into_split();
    let mut wire = Wire::new(shared.config.max_packet_bytes, shared.config.max_inflight);
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let Some(connect) = read_connect(&mut reader, &mut buf, &mut wire, &shared).await else {
        MqttCounters::bump(&shared.counters.protocol_errors);
        let _ = wire.flush(&mut writer).await;
        return;
    };
    if refused {
        let reason = format!("the broker serves mqtt.max_connections = {} connections", shared.config.max_connections);
        return refuse(&mut wire, &mut writer, &connect, ConnectReasonCode::ServerBusy, reason).await;
    }
    if let Err((code, reason)) = check_connect(&connect) {
        MqttCounters::bump(&shared.counters.protocol_errors);
        return refuse(&mut wire, &mut writer, &connect, code, reason).await;
    }
    let generation = shared.registry.generation();
    let assigned =
        connect.client_id.is_empty().then(|| format!("sift-{generation}-{}", peer.map_or(0, |at| at.port())));
    let client_id = assigned.clone().unwrap_or_else(|| connect.client_id.clone());
    let (kick, kicked) = mpsc::channel(1);
    let previous = shared.registry.claim(&shared.counters, &client_id, generation, kick).await;
    let (expiry_s, capped) = session_expiry(&shared, &connect);
    let fresh = (connect.clean_start, expiry_s == 0);
    let password = connect.password.as_ref().map(|password| password.0.as_str());
    // A user name wins; without one, a client certificate signs its name in.
    let credentials = sift_client::Credentials::from_door(connect.user_name.as_deref(), password)
        .or_else(|| certified.map(sift_client::Credentials::certified));
    let settled = settle_session(&shared, &client_id, previous, fresh, (peer, credentials)).await;
    let (state, session_present) = match settled {
        Ok(settled) => settled,
        Err((code, reason)) => {
            shared.registry.release(&client_id, generation);
            return refuse(&mut wire, &mut writer, &connect, code, reason).await;
        }
    };
    // The codec gives topics it sends again an alias, within the client's
    // Topic Alias Maximum: fewer bytes for a client that allows them.
    if connect.version == Version::V5 && !wire.refuses_topic_aliases {
        wire.codec.set_auto_map_topic_alias_send(true);
    }
    let door_batches = attach_door(&state, &connect, shared.config.delivery_batches);
    let mut connection = Connection {
        shared: shared.clone(),
        wire,
        version: connect.version,
        state,
        will: connect.will.clone(),
        expiry_s,
        confirms: FuturesOrdered::new(),
        ended: Ended::Open,
        topics: TopicCache::default(),
        door_batches,
        client_max_packet_bytes: connect.max_packet_bytes.unwrap_or(u32::MAX),
    };
    connection.restore_codec_state();
    let properties = ConnackProperties {
        assigned_client_id: assigned,
        session_expiry_s: capped.then_some(expiry_s),
        receive_maximum: shared.config.max_inflight,
        topic_alias_max: shared.config.topic_alias_max,
        max_packet_bytes: shared.config.max_packet_bytes,
        server_keep_alive_s: server_keep_alive(&shared, &connect),
        reason: None,
    };
    connection.wire.send(codec::connack(connect.version, session_present, ConnectReasonCode::Success, &properties));
    connection.journal();
    connection.run(&mut reader, &mut writer, &mut buf, kicked, closing).await;
    connection.finish(&mut writer, &client_id, generation).await;
    linger(&mut reader, &mut buf).await;
}

/// How long a closing connection's input is read and dropped.
const LINGER: Duration = Duration::from_secs(1);

/// Reads and drops what the client still sends, until it closes or for
/// [`LINGER`], after our side was shut down: closing with unread input
/// makes the kernel reset the connection, and a client still writing
/// (PUBRELs, say) would get the reset instead of reading the DISCONNECT
/// that tells it why.
async fn linger(reader: &mut DoorReadHalf, buf: &mut BytesMut) {
    let _ = tokio::time::timeout(LINGER, async {
        loop {
            buf.clear();
            match reader.read_buf(buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// The first packet, which must be CONNECT, within the timeout.
async fn read_connect(
    reader: &mut DoorReadHalf,
    buf: &mut BytesMut,
    wire: &mut Wire,
    shared: &Shared,
) -> Option<ConnectRequest> {
    let limit = Duration::from_millis(shared.config.connect_timeout_ms);
    let mut first_read = true;
    let first = tokio::time::timeout(limit, async {
        loop {
            if let Some(packet) = wire.received.pop_front() {
                return Some(packet);
            }
            if wire.close_requested || wire.failed {
                return None;
            }
            buf.clear();
            match reader.read_buf(buf).await {
                Ok(0) | Err(_) => return None,
                // A stream that does not start with CONNECT's first byte is
                // not MQTT (an HTTP request, say): no use waiting for the
                // length it seems to announce.
                Ok(_) if first_read && buf[0] != CONNECT_FIRST_BYTE => return None,
                Ok(_) => {
                    if first_read && codec::patch_connect(buf) {
                        wire.refuses_topic_aliases = true;
                    }
                    wire.feed(buf);
                }
            }
            first_read = false;
        }
    })
    .await
    .ok()??;
    match codec::inbound(first) {
        Inbound::Connect(connect) => Some(connect),
        _ => None,
    }
}

/// Refusals decided from CONNECT alone.
fn check_connect(connect: &ConnectRequest) -> Result<(), (ConnectReasonCode, String)> {
    if connect.client_id.is_empty() && connect.version == Version::V3 && !connect.clean_start {
        let reason = "an empty client id needs clean session 1".to_string();
        return Err((ConnectReasonCode::ClientIdentifierNotValid, reason));
    }
    if let Some(will) = &connect.will {
        message_of_publish(&will.publish, 0)
            .map_err(|error| (ConnectReasonCode::TopicNameInvalid, format!("will: {error}")))?;
    }
    Ok(())
}

async fn refuse(
    wire: &mut Wire,
    writer: &mut DoorWriteHalf,
    connect: &ConnectRequest,
    code: ConnectReasonCode,
    reason: String,
) {
    let properties = ConnackProperties { reason: Some(reason), ..ConnackProperties::default() };
    wire.send(codec::connack(connect.version, false, code, &properties));
    let _ = tokio::time::timeout(Duration::from_secs(1), wire.flush(writer)).await;
    let _ = writer.shutdown().await;
}

/// Attaches the connection to its session's door writer, when the session
/// has one (it ends with this connection, `crate::door`), and returns
/// where the door's batches arrive.
fn attach_door(state: &SessionState, connect: &ConnectRequest, batches: usize) -> Option<mpsc::Receiver<DoorBatch>> {
    let door = state.door.as_ref()?;
    let (out, batches_in) = mpsc::channel(batches.max(1));
    let max_packet_bytes = connect.max_packet_bytes.unwrap_or(u32::MAX);
    door.attach(Attached { out, version: connect.version, max_packet_bytes });
    Some(batches_in)
}

/// The session a connection continues or starts, and whether it existed.
/// A new session of a connection with clean start and session expiry 0
/// (`fresh`) gets a door writer.
async fn settle_session(
    shared: &Shared,
    client_id: &str,
    previous: Option<SessionState>,
    (clean_start, ends_with_connection): (bool, bool),
    (peer, credentials): (Option<std::net::SocketAddr>, Option<sift_client::Credentials>),
) -> Result<(SessionState, bool), (ConnectReasonCode, String)> {
    if credentials.is_none() && shared.connector.requires_sign_in() {
        return Err((ConnectReasonCode::NotAuthorized, "this broker requires a user name and password".into()));
    }
    match previous {
        Some(state) if !clean_start && may_resume(shared, &state, credentials.as_ref()).await? => {
            MqttCounters::bump(&shared.counters.sessions_resumed);
            Ok((state, true))
        }
        previous => {
            if let Some(state) = previous {
                state.close(shared, true).await;
            }
            let state = SessionState::open(shared, client_id, (peer, credentials), ends_with_connection)
                .await
                .map_err(|error| match error {
                    sift_client::ClientError::Refused { message, .. } => (ConnectReasonCode::NotAuthorized, message),
                    other => (ConnectReasonCode::ServerUnavailable, other.to_string()),
                })?;
            Ok((state, false))
        }
    }
}

/// Whether a reconnecting client may take over `state`: on a broker with
/// users, only as the user the session signed in as, with that user's
/// password checked again (the native session stays signed in, so the
/// check is the broker's, through the connector). A different user gets
/// a fresh session; wrong credentials are refused.
async fn may_resume(
    shared: &Shared,
    state: &SessionState,
    credentials: Option<&sift_client::Credentials>,
) -> Result<bool, (ConnectReasonCode, String)> {
    if shared.connector.is_open() {
        return Ok(true);
    }
    let Some(credentials) = credentials else { return Ok(state.user.is_none()) };
    // The user the broker names, not the one the client typed: a token
    // names its user itself, whatever the MQTT user name says.
    match shared.connector.check_credentials(credentials.auth(0)).await {
        Ok(user) => Ok(state.user.as_deref() == Some(user.as_str())),
        Err(refused) => Err((ConnectReasonCode::NotAuthorized, refused.to_string())),
    }
}

/// True when the broker refused because the user may not do it: MQTT 5
/// answers that with Not authorized (0x87).
fn denied(error: &ClientError) -> bool {
    matches!(error, ClientError::Refused { code: sift_proto::ErrorCode::PermissionDenied, .. })
}

/// The session expiry granted, and whether it is lower than asked.
fn session_expiry(shared: &Shared, connect: &ConnectRequest) -> (u32, bool) {
    let max = shared.config.session_expiry_max_s;
    match connect.session_expiry_s {
        Some(asked) => (asked.min(max), asked > max),
        None if connect.clean_start => (0, false),
        None => (max, false),
    }
}

/// The keep-alive an MQTT 5 client must use instead of its own, when
/// `mqtt.keep_alive_max_s` cuts it.
fn server_keep_alive(shared: &Shared, connect: &ConnectRequest) -> Option<u16> {
    let max = shared.config.keep_alive_max_s;
    let too_long = connect.keep_alive_s == 0 || connect.keep_alive_s > max;
    (connect.version == Version::V5 && max > 0 && too_long).then_some(max)
}

/// How the loop ended.
enum Ended {
    Open,
    /// DISCONNECT without a will.
    Normal,
    /// The connection broke, or DISCONNECT asked for the will.
    Abnormal,
    /// A newer connection claimed the session.
    TakenOver(Kick),
    /// The broker is stopping.
    Shutdown,
    /// A protocol error, after telling the client.
    Error,
}

/// A confirmed publish's answer: packet id, QoS, and the broker's verdict.
type Confirming = Pin<Box<dyn Future<Output = (u16, u8, Result<Confirm, ClientError>)> + Send>>;

/// What woke the loop.
enum Wake {
    Read(std::io::Result<usize>),
    Door(Option<DoorBatch>),
    Deliver(Option<Routed>),
    Confirmed(Option<(u16, u8, Result<Confirm, ClientError>)>),
    KeepAliveExpired,
    Kicked(Option<Kick>),
    Shutdown,
}

/// A connected session.
struct Connection {
    shared: Arc<Shared>,
    wire: Wire,
    version: Version,
    state: SessionState,
    will: Option<Will>,
    expiry_s: u32,
    confirms: FuturesOrdered<Confirming>,
    ended: Ended,
    topics: TopicCache,
    /// Batches of QoS 0 PUBLISH packets the session's door writer wrote.
    door_batches: Option<mpsc::Receiver<DoorBatch>>,
    /// The client's Maximum Packet Size (MQTT 5), else unlimited.
    client_max_packet_bytes: u32,
}

impl Connection {
    /// Gives the codec the exchanges the session had in flight, so that it
    /// resends them after CONNACK (same version only: the stored packets
    /// are typed by version; other versions get the broker's redelivery).
    fn restore_codec_state(&mut self) {
        let Some(saved) = self.state.codec.take() else { return };
        if saved.version == self.version {
            self.wire.codec.restore_packets(saved.stored);
            self.wire.codec.restore_qos2_publish_handled(saved.qos2_received.into_iter().collect());
            return;
        }
        for (_, tag) in std::mem::take(&mut self.state.inflight) {
            self.state.requeue(tag);
        }
    }

    async fn run(
        &mut self,
        reader: &mut DoorReadHalf,
        writer: &mut DoorWriteHalf,
        buf: &mut BytesMut,
        mut kicked: mpsc::Receiver<Kick>,
        mut closing: watch::Receiver<bool>,
    ) {
        while matches!(self.ended, Ended::Open) {
            if self.wire.close_requested {
                self.ended = Ended::Error;
                break;
            }
            if self.wire.failed {
                // The codec refused what it read without closing (a packet
                // type it does not know, for one): that is malformed input.
                self.protocol_error(DisconnectReasonCode::MalformedPacket, "a packet that does not parse");
                break;
            }
            if !self.wire.flush(writer).await {
                self.ended = Ended::Abnormal;
                break;
            }
            let can_deliver = self.can_deliver();
            let keep_alive = self.wire.keep_alive();
            buf.clear();
            let wake = tokio::select! {
                read = reader.read_buf(buf) => Wake::Read(read),
                routed = self.state.buffer_out.recv(), if can_deliver => Wake::Deliver(routed),
                confirmed = self.confirms.next(), if !self.confirms.is_empty() => Wake::Confirmed(confirmed),
                _ = sift_client::sleep_until(keep_alive), if keep_alive.is_some() => Wake::KeepAliveExpired,
                kick = kicked.recv() => Wake::Kicked(kick),
                _ = closing.changed() => Wake::Shutdown,
                batch = recv_batch(&mut self.door_batches), if self.door_batches.is_some() => Wake::Door(batch),
            };
            if let Wake::Door(batch) = wake {
                self.write_door_batch(batch, writer).await;
                continue;
            }
            self.handle(wake, buf).await;
        }
    }

    async fn handle(&mut self, wake: Wake, buf: &BytesMut) {
        match wake {
            Wake::Read(Ok(0)) | Wake::Read(Err(_)) => self.ended = Ended::Abnormal,
            Wake::Read(Ok(_)) => {
                self.wire.feed(buf);
                while let Some(packet) = self.wire.received.pop_front() {
                    self.on_packet(codec::inbound(packet)).await;
                    if !matches!(self.ended, Ended::Open) {
                        break;
                    }
                }
            }
            Wake::Deliver(Some(routed)) => {
                self.deliver(routed);
                for _ in 1..WRITE_BATCH_DELIVERIES {
                    if !self.can_deliver() {
                        break;
                    }
                    match self.state.buffer_out.try_recv() {
                        Ok(routed) => self.deliver(routed),
                        Err(_) => break,
                    }
                }
            }
            // The run loop writes door batches itself: it holds the socket.
            Wake::Deliver(None) | Wake::Confirmed(None) | Wake::Door(_) => {}
            Wake::Confirmed(Some((packet_id, qos, verdict))) => self.answer_publish(packet_id, qos, verdict),
            Wake::KeepAliveExpired => {
                MqttCounters::bump(&self.shared.counters.keep_alive_timeouts);
                self.wire.keep_alive_ms = None;
                self.wire.keep_alive_deadline = None;
                let events = self.wire.codec.notify_timer_fired(TimerKind::PingreqRecv);
                self.wire.absorb(events);
                self.ended = Ended::Abnormal;
            }
            Wake::Kicked(Some(kick)) => self.ended = Ended::TakenOver(kick),
            Wake::Kicked(None) => {}
            Wake::Shutdown => self.ended = Ended::Shutdown,
        }
    }

    /// Writes a batch of the door writer's PUBLISH packets, after what the
    /// connection's codec has queued, and gives the buffer back.
    async fn write_door_batch(&mut self, batch: Option<DoorBatch>, writer: &mut DoorWriteHalf) {
        let Some(batch) = batch else {
            self.door_batches = None;
            return;
        };
        if !self.wire.flush(writer).await || writer.write_all(&batch).await.is_err() {
            self.ended = Ended::Abnormal;
        }
    }

    /// Whether another QoS 1/2 delivery fits the client's Receive Maximum
    /// and `mqtt.max_inflight`.
    fn can_deliver(&self) -> bool {
        let client_room = self.wire.codec.get_receive_maximum_vacancy_for_send().is_none_or(|room| room > 0);
        client_room && self.state.inflight.len() < usize::from(self.shared.config.max_inflight)
    }

    async fn on_packet(&mut self, inbound: Inbound) {
        match inbound {
            Inbound::Publish(publish) => self.on_publish(publish).await,
            Inbound::Puback(packet_id) | Inbound::Pubcomp(packet_id) => self.settle_delivery(packet_id, true),
            Inbound::Pubrec(packet_id) => {
                self.settle_delivery(packet_id, false);
                self.wire.send(codec::pubrel(self.version, packet_id));
            }
            Inbound::Pubrel(packet_id) => self.wire.send(codec::pubcomp(self.version, packet_id)),
            Inbound::Subscribe(request) => self.on_subscribe(request).await,
            Inbound::Unsubscribe(packet_id, filters) => self.on_unsubscribe(packet_id, &filters).await,
            Inbound::Pingreq => {}
            Inbound::Disconnect { reason, session_expiry_s } => {
                if let Some(expiry) = session_expiry_s {
                    self.expiry_s = expiry.min(self.shared.config.session_expiry_max_s);
                }
                // 0x04: disconnect with will message.
                self.ended = if reason == 0x04 { Ended::Abnormal } else { Ended::Normal };
            }
            Inbound::Connect(_) => self.protocol_error(DisconnectReasonCode::ProtocolError, "a second CONNECT"),
            Inbound::Unexpected(what) => {
                let reason = format!("{what} is not taken here");
                self.protocol_error(DisconnectReasonCode::ProtocolError, &reason)
            }
        }
    }

    /// Ends the connection for a protocol error, telling an MQTT 5 client why.
    fn protocol_error(&mut self, code: DisconnectReasonCode, reason: &str) {
        MqttCounters::bump(&self.shared.counters.protocol_errors);
        if self.version == Version::V5 {
            self.wire.send(codec::disconnect(code, reason));
        }
        self.ended = Ended::Error;
    }

    async fn on_publish(&mut self, publish: InboundPublish) {
        MqttCounters::bump(&self.shared.counters.messages_received);
        let mapped = self.topics.sift(&publish.topic).map_err(PublishError::Topic);
        let message = match mapped.and_then(|topic| message_on_topic(&publish, topic, sift_core::system_now_ns())) {
            Ok(message) => message,
            Err(PublishError::Topic(detail)) => {
                MqttCounters::bump(&self.shared.counters.messages_refused);
                return self.protocol_error(DisconnectReasonCode::TopicNameInvalid, &detail);
            }
            Err(PublishError::Property(detail)) => {
                MqttCounters::bump(&self.shared.counters.messages_refused);
                tracing::debug!("mqtt publish refused: {detail}");
                return self.refuse_publish(&publish);
            }
        };
        retain(&self.shared, &publish, &message);
        let Some(packet_id) = publish.packet_id.filter(|_| publish.qos > 0) else {
            if self.state.client.publish(message).await.is_err() {
                self.ended = Ended::Abnormal;
            }
            return;
        };
        match self.state.client.start_confirmed(message, PublishOptions::default()).await {
            Ok(confirm) => {
                let qos = publish.qos;
                self.confirms.push_back(Box::pin(async move {
                    let verdict = confirm.await.unwrap_or(Err(ClientError::Closed));
                    (packet_id, qos, verdict)
                }));
            }
            Err(_) => self.ended = Ended::Abnormal,
        }
    }

    /// Answers a QoS 1/2 publish the session could not take.
    fn refuse_publish(&mut self, publish: &InboundPublish) {
        let Some(packet_id) = publish.packet_id else { return };
        match publish.qos {
            1 => self.wire.send(codec::puback(
                self.version,
                packet_id,
                Some(PubackReasonCode::ImplementationSpecificError),
            )),
            _ => self.wire.send(codec::pubrec(
                self.version,
                packet_id,
                Some(PubrecReasonCode::ImplementationSpecificError),
            )),
        }
    }

    /// PUBACK or PUBREC once the broker confirmed (or refused) a publish;
    /// they go out in the order the publishes came, as MQTT requires.
    fn answer_publish(&mut self, packet_id: u16, qos: u8, verdict: Result<Confirm, ClientError>) {
        let failure = match &verdict {
            Ok(_) => None,
            Err(error) => {
                tracing::debug!("mqtt publish not confirmed: {error}");
                if self.version == Version::V3 {
                    // MQTT 3.1.1 has no way to refuse a publish but to close.
                    self.ended = Ended::Error;
                    return;
                }
                Some(denied(error))
            }
        };
        match qos {
            1 => self.wire.send(codec::puback(
                self.version,
                packet_id,
                failure.map(|denied| match denied {
                    true => PubackReasonCode::NotAuthorized,
                    false => PubackReasonCode::UnspecifiedError,
                }),
            )),
            _ => self.wire.send(codec::pubrec(
                self.version,
                packet_id,
                failure.map(|denied| match denied {
                    true => PubrecReasonCode::NotAuthorized,
                    false => PubrecReasonCode::UnspecifiedError,
                }),
            )),
        }
    }

    /// A QoS 1/2 delivery acknowledged by the client (`complete`: PUBACK
    /// or PUBCOMP; else PUBREC, which acknowledges it to the broker and
    /// leaves the packet id in flight until PUBCOMP).
    fn settle_delivery(&mut self, packet_id: u16, complete: bool) {
        let tag = match complete {
            true => self.state.inflight.remove(&packet_id),
            false => self.state.inflight.get_mut(&packet_id).map(std::mem::take),
        };
        if let Some(tag) = tag {
            self.state.ack(tag);
        }
    }

    /// Writes one delivery as a PUBLISH.
    fn deliver(&mut self, routed: Routed) {
        let Routed { route, delivery } = routed;
        let message = &delivery.message;
        let tag = delivery.delivery_tag;
        // It may have waited in the session's buffer past its expiry.
        if message.expiry_ns != 0 && message.expiry_ns <= sift_core::system_now_ns() {
            return self.state.ack(tag);
        }
        // The cache is taken out for the call: `write_publish` needs the
        // whole connection, and the topic it borrows lives in the cache.
        let mut topics = std::mem::take(&mut self.topics);
        let topic = topics.mqtt(&message.topic);
        let asked = &route.description;
        let own = asked.no_local && message.publisher.as_ref() == self.state.native_name.as_ref();
        if own || (route.skip_dollar_topics && topic.starts_with('$')) {
            self.state.ack(tag);
        } else {
            let qos = asked.qos.min(message_qos(message));
            let retain = asked.retain_as_published && published_retained(message);
            self.write_publish(topic, message, qos, retain, tag, asked.subscription_id);
        }
        self.topics = topics;
    }

    /// Writes a PUBLISH of `message`, in flight under `tag` at QoS 1/2.
    /// Its DUP flag is 0 even for a native redelivery: DUP marks a resend
    /// of the same packet id, which the codec does for a resumed session.
    fn write_publish(
        &mut self,
        topic: &str,
        message: &sift_core::Message,
        qos: u8,
        retain: bool,
        tag: u64,
        subscription_id: Option<u32>,
    ) {
        if qos == 0 {
            self.state.ack(tag);
        }
        let mut properties = match self.version {
            Version::V5 => publish_properties(message, sift_core::system_now_ns()),
            Version::V3 => Default::default(),
        };
        properties.subscription_ids.extend(subscription_id);
        let packet_bytes = publish_packet_bytes(self.version, topic, message.payload.len(), &properties, qos);
        if packet_bytes > self.client_max_packet_bytes as usize {
            // Sending it would break the client's limit; MQTT 5 says to
            // discard it (a codec error here would end the connection).
            MqttCounters::bump(&self.shared.counters.messages_oversized);
            return self.state.ack(tag);
        }
        let packet_id = match qos {
            0 => None,
            _ => match self.wire.codec.acquire_packet_id() {
                Ok(packet_id) => Some(packet_id),
                Err(_) => return self.state.requeue(tag),
            },
        };
        if let Some(packet_id) = packet_id {
            self.state.inflight.insert(packet_id, tag);
        }
        let outbound =
            OutboundPublish { topic, payload: &message.payload, qos, retain, packet_id, properties: &properties };
        self.wire.send(codec::publish(self.version, &outbound));
        MqttCounters::bump(&self.shared.counters.messages_delivered);
    }

    async fn on_subscribe(&mut self, request: SubscribeRequest) {
        let mut codes = Vec::with_capacity(request.entries.len());
        let mut reasons = Vec::new();
        let mut retained = Vec::new();
        for entry in &request.entries {
            let (code, filter, is_new) = match self.subscribe_entry(entry, &request).await {
                Ok(granted) => granted,
                Err((code, reason)) => {
                    reasons.push(format!("{}: {reason}", entry.filter));
                    (code, None, false)
                }
            };
            codes.push(code);
            let wants_retained = match entry.retain_handling {
                0 => true,
                1 => is_new,
                _ => false,
            };
            if let Some(filter) = filter.filter(|filter| wants_retained && filter.share_group.is_none()) {
                retained.push((filter, granted_qos(code), request.subscription_id));
            }
        }
        let reason = (!reasons.is_empty()).then(|| reasons.join("; "));
        self.wire.send(codec::suback(self.version, request.packet_id, &codes, reason.as_deref()));
        self.journal();
        for (filter, qos, subscription_id) in retained {
            let now = sift_core::system_now_ns();
            let kept = self
                .shared
                .retained
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .matching(&filter.mqtt, now);
            for (topic, message) in kept {
                let qos = qos.min(message_qos(&message));
                self.write_publish(&topic, &message, qos, true, 0, subscription_id);
            }
        }
    }

    /// Subscribes one SUBSCRIBE entry: its SUBACK code, its filter, and
    /// whether the subscription is new (not a replacement); or the failure
    /// code and why, for the SUBACK's reason string.
    async fn subscribe_entry(
        &mut self,
        entry: &SubscribeEntry,
        request: &SubscribeRequest,
    ) -> Result<(SubackReasonCode, Option<Filter>, bool), (SubackReasonCode, String)> {
        let filter =
            Filter::parse(&entry.filter).map_err(|error| (SubackReasonCode::TopicFilterInvalid, error.to_string()))?;
        if filter.share_group.is_some() && entry.no_local {
            let reason = "a shared subscription cannot be no-local".to_string();
            return Err((SubackReasonCode::TopicFilterInvalid, reason));
        }
        let replaces = self.state.subscriptions.contains_key(&filter.text);
        if !replaces && self.state.subscriptions.len() >= self.shared.config.max_subscriptions {
            let reason = format!("at most {} subscriptions per session", self.shared.config.max_subscriptions);
            return Err((SubackReasonCode::QuotaExceeded, reason));
        }
        let content_filter = FILTER_PROPERTIES.iter().find_map(|(name, _)| {
            request.user.iter().find(|(key, _)| key == name).map(|(key, text)| (key.clone(), text.clone()))
        });
        let description = SubscriptionDescription {
            qos: entry.qos.min(2),
            no_local: entry.no_local,
            retain_as_published: entry.retain_as_published,
            subscription_id: request.subscription_id,
            content_filter,
        };
        let qos = description.qos;
        match self.state.subscribe(&self.shared, &filter, description, self.expiry_s > 0).await {
            Ok(is_new) => {
                let code = match qos {
                    0 => SubackReasonCode::GrantedQos0,
                    1 => SubackReasonCode::GrantedQos1,
                    _ => SubackReasonCode::GrantedQos2,
                };
                Ok((code, Some(filter), is_new))
            }
            Err(error) => {
                tracing::info!(client = %self.state.client_id, filter = %filter.text, "MQTT subscription refused: {error}");
                let code = match denied(&error) {
                    true => SubackReasonCode::NotAuthorized,
                    false => SubackReasonCode::ImplementationSpecificError,
                };
                Err((code, error.to_string()))
            }
        }
    }

    async fn on_unsubscribe(&mut self, packet_id: u16, filters: &[String]) {
        let mut codes = Vec::with_capacity(filters.len());
        for filter in filters {
            codes.push(match self.state.unsubscribe(filter).await {
                true => UnsubackReasonCode::Success,
                false => UnsubackReasonCode::NoSubscriptionExisted,
            });
        }
        self.wire.send(codec::unsuback(self.version, packet_id, &codes));
        self.journal();
    }

    /// Records the session in the journal when it outlives its connection.
    fn journal(&self) {
        if self.expiry_s > 0 {
            self.shared.journal_session(&self.state.client_id, Some(&self.state.describe(self.expiry_s)));
        }
    }

    /// After the loop: tells the client why when it should know, hands the
    /// session on (to a taker, to the registry, or to its end) and
    /// publishes the will when the connection ended without DISCONNECT.
    async fn finish(mut self, writer: &mut DoorWriteHalf, client_id: &str, generation: u64) {
        // The door writes to this connection only: a session taken over
        // goes on through its buffer (`crate::door`).
        if let Some(door) = &self.state.door {
            door.detach();
        }
        self.door_batches = None;
        let farewell = match &self.ended {
            Ended::TakenOver(_) => {
                Some((DisconnectReasonCode::SessionTakenOver, "another connection took the session"))
            }
            Ended::Shutdown => Some((DisconnectReasonCode::ServerShuttingDown, "the broker is shutting down")),
            _ => None,
        };
        if let Some((code, reason)) = farewell.filter(|_| self.version == Version::V5) {
            self.wire.send(codec::disconnect(code, reason));
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.wire.flush(writer)).await;
        let _ = writer.shutdown().await;
        self.state.codec = Some(CodecState {
            version: self.version,
            stored: self.wire.codec.get_stored_packets(),
            qos2_received: self.wire.codec.get_qos2_publish_handled().into_iter().collect(),
        });
        let shared = self.shared.clone();
        let will = match self.ended {
            Ended::Abnormal | Ended::Error | Ended::Shutdown => self.will.take(),
            _ => None,
        };
        if let Ended::TakenOver(kick) = std::mem::replace(&mut self.ended, Ended::Normal) {
            if let Err(Some(state)) = kick.send(Some(self.state)) {
                // The taker gave up waiting and started afresh, with its
                // own journal record and the same durable names.
                state.close(&shared, false).await;
            }
            return;
        }
        self.journal();
        // A will waits with its parked session only when it has a delay;
        // one without is published now.
        let (will_now, will_later) = match will {
            Some(will) if will.delay_s > 0 && self.expiry_s > 0 => (None, Some(will)),
            will => (will, None),
        };
        if let Some(will) = &will_now {
            publish_will(&shared, &self.state.client, will).await;
        }
        let parked = Box::new(Parked { state: self.state, will: will_later });
        let parked = match self.expiry_s {
            0 => parked,
            expiry_s => match shared.registry.park(&shared, client_id, generation, parked, expiry_s) {
                Ok(()) => return,
                Err(returned) => returned,
            },
        };
        shared.registry.release(client_id, generation);
        if let Some(will) = &parked.will {
            publish_will(&shared, &parked.state.client, will).await;
        }
        parked.state.close(&shared, true).await;
    }
}

fn granted_qos(code: SubackReasonCode) -> u8 {
    match code {
        SubackReasonCode::GrantedQos2 => 2,
        SubackReasonCode::GrantedQos1 => 1,
        _ => 0,
    }
}

/// The next batch of a door writer's packets; never, without a door.
async fn recv_batch(batches: &mut Option<mpsc::Receiver<DoorBatch>>) -> Option<DoorBatch> {
    match batches {
        Some(batches) => batches.recv().await,
        None => std::future::pending().await,
    }
}
