//! One STOMP connection: the CONNECT handshake, the reader that turns
//! frames into calls on a local broker session, the door writer that
//! writes its deliveries as MESSAGE frames (`crate::door`), and the
//! writer with its heart-beats.
//!
//! Every frame the client is sent goes through one bounded channel
//! (`stomp.outgoing_frames`) to the writer; a client that does not read
//! holds the broker's writer of its session, and through it the broker's
//! queues and their policies, exactly as a slow native client would.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use sift_broker::front_end::Incoming;
use sift_broker::tls::{DoorReadHalf, DoorWriteHalf};
use sift_client::{
    durable_name_part, AckPolicy, Client, ClientOptions, DeclaredQueues, FilterKind, ManageOp, PublishOptions,
    StartPosition, SubscribeOptions, Subscription,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};

use crate::door::{Outstanding, Served, StompDoor};
use crate::frame::{Command, Decoded, Decoder, Frame, Limits};
use crate::mapping::{encode_message_frame, message_of_send, Destination};
use crate::server::{Shared, StompCounters};

/// Protocol versions served, oldest first.
const VERSIONS: [&str; 3] = ["1.0", "1.1", "1.2"];
/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// SUBSCRIBE headers that name a durable subscription (ActiveMQ's, and
/// the names Artemis and Apollo use).
const DURABLE_HEADERS: [&str; 3] = ["activemq.subscriptionName", "durable-subscription-name", "subscription-name"];
/// Most frames the writer gathers into one write.
const WRITE_BATCH_FRAMES: usize = 256;

/// What the writer sends: a frame, or a last frame after which it closes.
pub(crate) enum Outgoing {
    Frame(Frame),
    /// A MESSAGE frame a subscription's forwarder encoded and counted.
    Message(bytes::Bytes),
    /// MESSAGE frames the door writer encoded and counted, a batch.
    Batch(sift_broker::door_writer::DoorBatch),
    Last(Frame),
}

/// Why a session ends with an ERROR: the message header and the body.
struct Failure {
    message: String,
    detail: String,
    receipt: Option<String>,
    /// The versions this broker speaks, for a CONNECT that offered none of
    /// them (STOMP 1.2: the ERROR then carries a `version` header).
    versions: Option<String>,
}

impl Failure {
    fn new(message: &str, detail: impl Into<String>, frame: Option<&Frame>) -> Failure {
        let receipt = frame.and_then(|frame| frame.get("receipt")).map(str::to_string);
        Failure { message: message.to_string(), detail: detail.into(), receipt, versions: None }
    }

    fn frame(self) -> Frame {
        let mut frame = Frame::new(Command::Error).header("message", self.message).header("content-type", "text/plain");
        if let Some(receipt) = self.receipt {
            frame = frame.header("receipt-id", receipt);
        }
        if let Some(versions) = self.versions {
            frame = frame.header("version", versions);
        }
        Frame { body: self.detail.into(), ..frame }
    }
}

/// Serves one accepted connection until it closes.
pub(crate) async fn serve(incoming: Incoming, peer: SocketAddr, shared: Arc<Shared>, closing: watch::Receiver<bool>) {
    let Some(stream) = incoming.open(crate::server::PLAIN_TEXT_REFUSAL).await else { return };
    let certified = stream.peer_identity();
    let (mut reader, mut writer) = stream.into_split();
    let limits = Limits {
        frame_bytes_max: shared.config.max_frame_bytes,
        headers_max: shared.config.max_headers,
        header_line_bytes_max: shared.config.max_header_line_bytes,
    };
    let decoder = Decoder::new(limits);
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let connect = match connect_frame(&mut reader, &mut buf, &decoder, &shared).await {
        Ok(connect) => connect,
        Err(failure) => return fail_before_session(&mut writer, failure, &shared).await,
    };
    let negotiated = match negotiate(&connect, shared.config.heart_beat_ms) {
        Ok(negotiated) => negotiated,
        Err(failure) => return fail_before_session(&mut writer, failure, &shared).await,
    };
    let name = connect.get("login").map_or_else(|| format!("stomp-{peer}"), |login| format!("stomp-{login}"));
    let (out, to_write) = mpsc::channel(shared.config.outgoing_frames);
    let door = Arc::new(StompDoor::new(out.clone(), shared.counters.clone(), shared.config.delivery_batches));
    // A login wins; without one, a client certificate signs its name in.
    let credentials = sift_client::Credentials::from_door(connect.get("login"), connect.get("passcode"))
        .or_else(|| certified.map(sift_client::Credentials::certified));
    if credentials.is_none() && shared.connector.requires_sign_in() {
        let failure =
            Failure::new("authentication required", "this broker requires login and passcode", Some(&connect));
        return fail_before_session(&mut writer, failure, &shared).await;
    }
    let client = match open_session(&shared, (name, credentials), peer, door.clone()).await {
        Ok(client) => client,
        Err(failure) => return fail_before_session(&mut writer, failure, &shared).await,
    };
    let writer_task = tokio::spawn(write_loop(writer, to_write, negotiated.send_every, shared.clone()));
    // The session id names this connection's broker session, as the
    // broker's reports show it.
    let session_id = client.server_info().map_or(0, |welcome| welcome.connection_id);
    let connected = negotiated.connected.header("session", format!("sift-{session_id}"));
    let _ = out.send(Outgoing::Frame(connected)).await;
    let client_id = connect.get("client-id").or(connect.get("login")).map(str::to_string);
    let mut session = Session::new(shared.clone(), (client, door), client_id, out, negotiated.version);
    session.read_loop(&mut reader, &mut buf, &decoder, negotiated.expect_every, closing).await;
    session.close().await;
    let _ = writer_task.await;
}

async fn fail_before_session(writer: &mut DoorWriteHalf, failure: Failure, shared: &Shared) {
    StompCounters::bump(&shared.counters.errors_sent);
    let mut bytes = BytesMut::new();
    failure.frame().encode(&mut bytes);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer.write_all(&bytes)).await;
    let _ = writer.shutdown().await;
}

/// The first frame, which must be CONNECT or STOMP, within the timeout.
async fn connect_frame(
    reader: &mut DoorReadHalf,
    buf: &mut BytesMut,
    decoder: &Decoder,
    shared: &Shared,
) -> Result<Frame, Failure> {
    let limit = Duration::from_millis(shared.config.connect_timeout_ms);
    let first = tokio::time::timeout(limit, async {
        loop {
            match decoder.decode(buf) {
                Ok(Some(Decoded::Frame(frame))) => return Ok(frame),
                Ok(Some(Decoded::HeartBeat)) => continue,
                Ok(None) => {}
                Err(error) => return Err(Failure::new("malformed frame", error.to_string(), None)),
            }
            match reader.read_buf(buf).await {
                Ok(0) | Err(_) => return Err(Failure::new("closed", "the connection closed before CONNECT", None)),
                Ok(_) => {}
            }
        }
    })
    .await
    .map_err(|_| {
        Failure::new("no CONNECT", format!("no CONNECT within stomp.connect_timeout_ms = {}", limit.as_millis()), None)
    })??;
    match first.command {
        Command::Connect | Command::Stomp => Ok(first),
        other => Err(Failure::new(
            "expected CONNECT",
            format!("the first frame must be CONNECT or STOMP, not {}", other.name()),
            Some(&first),
        )),
    }
}

/// The outcome of CONNECT's negotiation.
struct Negotiated {
    version: &'static str,
    send_every: Option<Duration>,
    expect_every: Option<Duration>,
    connected: Frame,
}

/// Picks the highest common version and the heart-beat intervals.
fn negotiate(connect: &Frame, heart_beat_ms: u64) -> Result<Negotiated, Failure> {
    let offered = connect.get("accept-version").unwrap_or("1.0");
    let version =
        VERSIONS.iter().rev().find(|version| offered.split(',').any(|given| given.trim() == **version)).ok_or_else(
            || Failure {
                versions: Some(VERSIONS.join(",")),
                ..Failure::new(
                    "unsupported version",
                    format!("supported protocol versions are {}", VERSIONS.join(",")),
                    Some(connect),
                )
            },
        )?;
    let (client_sends, client_wants) = match connect.get("heart-beat") {
        Some(text) => {
            let parts: Vec<Option<u64>> = text.split(',').map(|part| part.trim().parse().ok()).collect();
            match parts.as_slice() {
                [Some(sends), Some(wants)] => (*sends, *wants),
                _ => {
                    return Err(Failure::new(
                        "bad heart-beat",
                        format!("heart-beat {text:?}: expected two integers, cx,cy"),
                        Some(connect),
                    ))
                }
            }
        }
        None => (0, 0),
    };
    let interval = |one: u64, other: u64| (one > 0 && other > 0).then(|| Duration::from_millis(one.max(other)));
    let connected = Frame::new(Command::Connected)
        .header("version", *version)
        .header("heart-beat", format!("{heart_beat_ms},{heart_beat_ms}"))
        .header("server", concat!("Sift/", env!("CARGO_PKG_VERSION")));
    Ok(Negotiated {
        version,
        send_every: interval(heart_beat_ms, client_wants),
        expect_every: interval(client_sends, heart_beat_ms),
        connected,
    })
}

/// The connection's broker session, whose deliveries `door` writes.
/// It signs in with CONNECT's `login` and `passcode` when given; a refused
/// sign-in ends the connection with an ERROR, as STOMP brokers do.
async fn open_session(
    shared: &Shared,
    (name, credentials): (String, Option<sift_client::Credentials>),
    peer: SocketAddr,
    door: Arc<StompDoor>,
) -> Result<Client, Failure> {
    let options =
        ClientOptions { name, reconnect: false, clock_sync_interval: None, credentials, ..ClientOptions::default() };
    let origin = sift_broker::door::Origin { door: sift_broker::door::Door::Stomp, peer: Some(peer) };
    Client::connect_local(shared.connector.local_opener_writing(origin, door), options).await.map_err(|error| {
        match error {
            sift_client::ClientError::Refused { message, .. } => Failure::new("authentication failed", message, None),
            other => Failure::new("broker unavailable", other.to_string(), None),
        }
    })
}

/// Writes outgoing frames in batches, and a heart-beat EOL whenever
/// nothing was written for `send_every`.
async fn write_loop(
    mut writer: DoorWriteHalf,
    mut to_write: mpsc::Receiver<Outgoing>,
    send_every: Option<Duration>,
    shared: Arc<Shared>,
) {
    let mut bytes = BytesMut::new();
    loop {
        let next = match send_every {
            Some(every) => match tokio::time::timeout(every, to_write.recv()).await {
                Ok(next) => next,
                Err(_) => {
                    if writer.write_all(b"\n").await.is_err() {
                        return;
                    }
                    continue;
                }
            },
            None => to_write.recv().await,
        };
        let Some(first) = next else { break };
        let mut last = false;
        let mut batch = vec![first];
        while batch.len() < WRITE_BATCH_FRAMES {
            match to_write.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        for outgoing in batch {
            let frame = match outgoing {
                Outgoing::Frame(frame) => frame,
                Outgoing::Message(encoded) => {
                    bytes.extend_from_slice(&encoded);
                    continue;
                }
                Outgoing::Batch(batch) => {
                    // A batch goes out as it is, after what was gathered
                    // before it, rather than copied; dropped once written,
                    // it gives its buffer back to the door.
                    if !bytes.is_empty() && writer.write_all(&bytes).await.is_err() {
                        return;
                    }
                    bytes.clear();
                    if writer.write_all(&batch).await.is_err() {
                        return;
                    }
                    continue;
                }
                Outgoing::Last(frame) => {
                    last = true;
                    frame
                }
            };
            match frame.command {
                Command::Message => StompCounters::bump(&shared.counters.messages_delivered),
                Command::Error => StompCounters::bump(&shared.counters.errors_sent),
                _ => {}
            }
            frame.encode(&mut bytes);
            if last {
                break;
            }
        }
        if writer.write_all(&bytes).await.is_err() {
            return;
        }
        bytes.clear();
        if last {
            break;
        }
    }
    let _ = writer.shutdown().await;
}

/// How a subscription's client acknowledges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckMode {
    Auto,
    Client,
    ClientIndividual,
}

/// A live subscription: what stops its forwarder, and the delivery tags
/// written and not yet acknowledged, oldest first (for `client` acks,
/// which acknowledge everything up to the one named).
struct Subscribed {
    /// The broker session's id of the subscription.
    sub_id: u32,
    /// Stops the forwarder; with `true` its durable subscription is
    /// removed too.
    stop: oneshot::Sender<bool>,
    /// The forwarder's task, awaited when a durable is removed: the
    /// receipt must follow the removal.
    forwarder: tokio::task::JoinHandle<()>,
    mode: AckMode,
    outstanding: Outstanding,
}

/// The reader's state.
struct Session {
    shared: Arc<Shared>,
    client: Client,
    /// Writes the MESSAGE frames of the subscriptions.
    door: Arc<StompDoor>,
    /// CONNECT's `client-id` (else `login`): durable subscription names
    /// are kept per client, as ActiveMQ keeps them.
    client_id: Option<String>,
    out: mpsc::Sender<Outgoing>,
    version: &'static str,
    subscriptions: HashMap<String, Subscribed>,
    transactions: HashMap<String, Vec<Frame>>,
    /// `/queue/` destinations this connection declared (each once).
    declared_queues: DeclaredQueues,
}

/// What handling a frame decided.
enum Next {
    Continue,
    Stop,
}

impl Session {
    fn new(
        shared: Arc<Shared>,
        (client, door): (Client, Arc<StompDoor>),
        client_id: Option<String>,
        out: mpsc::Sender<Outgoing>,
        version: &'static str,
    ) -> Session {
        let (subscriptions, transactions) = (HashMap::new(), HashMap::new());
        let declared_queues = DeclaredQueues::default();
        Session { shared, client, door, client_id, out, version, subscriptions, transactions, declared_queues }
    }

    /// The durable subscription a SUBSCRIBE or UNSUBSCRIBE names (header
    /// `activemq.subscriptionName`, `durable-subscription-name` or
    /// `subscription-name`), as a store name: `stomp.CLIENT.NAME`, with
    /// characters a store name cannot hold as `_`.
    fn durable_name(&self, frame: &Frame) -> Option<String> {
        let name = DURABLE_HEADERS.iter().find_map(|header| frame.get(header))?;
        let client = self.client_id.as_deref().unwrap_or("anonymous");
        Some(format!("stomp.{}.{}", durable_name_part(client), durable_name_part(name)))
    }

    async fn read_loop(
        &mut self,
        reader: &mut DoorReadHalf,
        buf: &mut BytesMut,
        decoder: &Decoder,
        expect_every: Option<Duration>,
        mut closing: watch::Receiver<bool>,
    ) {
        // A client that promised heart-beats and sends nothing for twice
        // the interval is gone.
        let silence_max = expect_every.map(|every| every * 2);
        loop {
            loop {
                match decoder.decode(buf) {
                    Ok(Some(Decoded::Frame(frame))) => match self.handle(frame).await {
                        Ok(Next::Continue) => {}
                        Ok(Next::Stop) => return,
                        Err(failure) => return self.fail(failure).await,
                    },
                    Ok(Some(Decoded::HeartBeat)) => {}
                    Ok(None) => break,
                    Err(error) => return self.fail(Failure::new("malformed frame", error.to_string(), None)).await,
                }
            }
            let read = async {
                match silence_max {
                    Some(limit) => tokio::time::timeout(limit, reader.read_buf(buf)).await.ok(),
                    None => Some(reader.read_buf(buf).await),
                }
            };
            tokio::select! {
                read = read => match read {
                    None => return self.fail(Failure::new("heart-beat missed", "no frame or heart-beat within twice the agreed interval", None)).await,
                    Some(Ok(0)) | Some(Err(_)) => return,
                    Some(Ok(_)) => {}
                },
                _ = closing.changed() => return self.fail(Failure::new("shutting down", "the broker is shutting down", None)).await,
            }
        }
    }

    /// Sends `failure` as the last frame.
    async fn fail(&mut self, failure: Failure) {
        let _ = self.out.send(Outgoing::Last(failure.frame())).await;
    }

    /// Ends the session: subscriptions, then the broker session.
    async fn close(mut self) {
        for (_, subscribed) in self.subscriptions.drain() {
            self.door.unregister(subscribed.sub_id);
            let _ = subscribed.stop.send(false);
        }
        self.client.close().await;
    }

    async fn send_frame(&self, frame: Frame) {
        let _ = self.out.send(Outgoing::Frame(frame)).await;
    }

    /// Sends a RECEIPT when `frame` asked for one.
    async fn receipt(&self, frame: &Frame) {
        if let Some(receipt) = frame.get("receipt") {
            self.send_frame(Frame::new(Command::Receipt).header("receipt-id", receipt)).await;
        }
    }

    async fn handle(&mut self, frame: Frame) -> Result<Next, Failure> {
        if let Some(transaction) = frame.get("transaction").map(str::to_string) {
            if matches!(frame.command, Command::Send | Command::Ack | Command::Nack) {
                return self.hold(transaction, frame).await;
            }
        }
        match frame.command {
            Command::Send => self.send(frame).await,
            Command::Subscribe => self.subscribe(frame).await,
            Command::Unsubscribe => self.unsubscribe(frame).await,
            Command::Ack | Command::Nack => self.acknowledge(&frame).await,
            Command::Begin | Command::Commit | Command::Abort => self.transaction(frame).await,
            Command::Disconnect => {
                if let Some(receipt) = frame.get("receipt") {
                    let _ =
                        self.out.send(Outgoing::Last(Frame::new(Command::Receipt).header("receipt-id", receipt))).await;
                }
                return Ok(Next::Stop);
            }
            other => {
                let detail = format!("{} is not a client frame, or not after CONNECT", other.name());
                return Err(Failure::new("unexpected frame", detail, Some(&frame)));
            }
        }?;
        Ok(Next::Continue)
    }

    /// A SEND: published at once, or once the broker confirmed it when the
    /// client asked for a receipt (the receipt follows the confirm).
    /// Declares the queue `name` once per connection: what is sent to a
    /// `/queue/` then waits there for a consumer, as STOMP users of
    /// ActiveMQ expect.
    async fn declare_queue(&self, name: &str, frame: &Frame) -> Result<(), Failure> {
        self.client
            .declare_queue_once(&self.declared_queues, name)
            .await
            .map_err(|error| Failure::new("bad queue", error.to_string(), Some(frame)))
    }

    async fn send(&mut self, frame: Frame) -> Result<(), Failure> {
        let message = message_of_send(&frame).map_err(|detail| Failure::new("bad SEND", detail, Some(&frame)))?;
        let destination = frame.get("destination").map(Destination::parse);
        if let Some(Ok(Destination { queue_group: Some(queue), .. })) = destination {
            self.declare_queue(&queue, &frame).await?;
        }
        StompCounters::bump(&self.shared.counters.messages_sent);
        let Some(receipt) = frame.get("receipt").map(str::to_string) else {
            return self
                .client
                .publish(message)
                .await
                .map_err(|error| Failure::new("send failed", error.to_string(), Some(&frame)));
        };
        let confirming = self
            .client
            .start_confirmed(message, PublishOptions::default())
            .await
            .map_err(|error| Failure::new("send failed", error.to_string(), Some(&frame)))?;
        let out = self.out.clone();
        tokio::spawn(async move {
            let reply = match confirming.await {
                Ok(Ok(_)) => Outgoing::Frame(Frame::new(Command::Receipt).header("receipt-id", receipt)),
                Ok(Err(error)) => Outgoing::Last(
                    Failure {
                        message: "send refused".into(),
                        detail: error.to_string(),
                        receipt: Some(receipt),
                        versions: None,
                    }
                    .frame(),
                ),
                Err(_) => return,
            };
            let _ = out.send(reply).await;
        });
        Ok(())
    }

    async fn subscribe(&mut self, frame: Frame) -> Result<(), Failure> {
        let fail = |detail: String| Failure::new("bad SUBSCRIBE", detail, Some(&frame));
        let destination_text =
            frame.get("destination").ok_or_else(|| fail("SUBSCRIBE needs a destination header".into()))?;
        let destination = Destination::parse(destination_text).map_err(fail)?;
        let id = match (frame.get("id"), self.version) {
            (Some(id), _) => id.to_string(),
            (None, "1.0") => destination_text.to_string(),
            (None, _) => return Err(fail("SUBSCRIBE needs an id header".into())),
        };
        if self.subscriptions.contains_key(&id) {
            return Err(fail(format!("subscription id {id:?} is in use on this connection")));
        }
        let mode = match frame.get("ack").unwrap_or("auto") {
            "auto" => AckMode::Auto,
            "client" => AckMode::Client,
            "client-individual" => AckMode::ClientIndividual,
            other => return Err(fail(format!("ack {other:?}: expected auto, client or client-individual"))),
        };
        let mut options = SubscribeOptions::new(destination.topic.clone()).ack(if mode == AckMode::Auto {
            AckPolicy::OnWrite
        } else {
            AckPolicy::Manual
        });
        let is_queue = destination.queue_group.is_some();
        let selector = frame.get("selector").filter(|selector| !selector.trim().is_empty());
        match (destination.queue_group, selector) {
            // A queue (one topic) takes from what the queue keeps: with a
            // selector, what passes it.
            (Some(queue), selector) if !queue.contains(['*', '>']) => {
                self.declare_queue(&queue, &frame).await?;
                let queue_options = match selector {
                    Some(selector) => SubscribeOptions::queue_selecting(&queue, FilterKind::Sql, selector),
                    None => SubscribeOptions::queue(&queue),
                };
                options = queue_options.ack(options.ack);
            }
            // A wildcard over many queues reads the live messages in the
            // queue group.
            (Some(group), None) => options = options.queue_group(group),
            (Some(group), Some(selector)) => options = options.queue_group(group).filter(FilterKind::Sql, selector),
            (None, Some(selector)) => options = options.filter(FilterKind::Sql, selector),
            (None, None) => {}
        }
        let durable = self.durable_name(&frame);
        if let Some(name) = &durable {
            if is_queue {
                return Err(fail("a durable subscription reads a /topic/, not a /queue/".into()));
            }
            let stream = frame.get("sift-stream").unwrap_or(&self.shared.config.durable_stream).to_string();
            options = options.durable(name.clone(), stream, StartPosition::New);
        }
        let outstanding = Arc::new(Mutex::new(VecDeque::new()));
        let served =
            Served { id: id.clone(), destination_prefix: destination.prefix, mode, outstanding: outstanding.clone() };
        // The door writes this subscription's deliveries from the first:
        // it learns the id before the request leaves.
        let mut registered = 0;
        let subscribed = self
            .client
            .subscribe_registered(options, |sub_id| {
                registered = sub_id;
                self.door.register(sub_id, served);
            })
            .await;
        let subscription = match subscribed {
            Ok(subscription) => subscription,
            Err(error) => {
                self.door.unregister(registered);
                return Err(fail(error.to_string()));
            }
        };
        let (stop, stopped) = oneshot::channel();
        let forwarder = Forwarder {
            id: id.clone(),
            destination_prefix: destination.prefix,
            mode,
            outstanding: outstanding.clone(),
            out: self.out.clone(),
            durable,
            client: self.client.clone(),
            counters: self.shared.counters.clone(),
        };
        let sub_id = subscription.id();
        let forwarder = tokio::spawn(forwarder.run(subscription, stopped));
        self.subscriptions.insert(id, Subscribed { sub_id, stop, forwarder, mode, outstanding });
        self.receipt(&frame).await;
        Ok(())
    }

    async fn unsubscribe(&mut self, frame: Frame) -> Result<(), Failure> {
        let id = frame.get("id").or(frame.get("destination")).unwrap_or_default().to_string();
        let subscribed = self
            .subscriptions
            .remove(&id)
            .ok_or_else(|| Failure::new("unknown subscription", format!("no subscription {id:?}"), Some(&frame)))?;
        // UNSUBSCRIBE naming the durable subscription ends it; a plain one
        // leaves it to collect until the client subscribes again.
        let forget = self.durable_name(&frame).is_some();
        self.door.unregister(subscribed.sub_id);
        let _ = subscribed.stop.send(forget);
        if forget {
            let _ = subscribed.forwarder.await;
        }
        self.receipt(&frame).await;
        Ok(())
    }

    /// ACK or NACK. The id is the MESSAGE's `ack` header (1.2) or its
    /// `message-id` (1.0, 1.1), found among the outstanding deliveries of
    /// the subscription the frame names (of every one, when it names none).
    /// A `client` ACK acknowledges every earlier delivery of its
    /// subscription too.
    async fn acknowledge(&mut self, frame: &Frame) -> Result<(), Failure> {
        let id = frame.get("id").or(frame.get("message-id")).unwrap_or_default();
        let named = frame.get("subscription");
        let positive = frame.command == Command::Ack;
        for (name, subscribed) in &self.subscriptions {
            if named.is_some_and(|named| named != name.as_str()) && !id.starts_with('t') {
                continue;
            }
            if let Some(tag) = outstanding_tag(subscribed, id) {
                let covered = take_acknowledged(subscribed, tag, positive);
                for covered_tag in covered {
                    let sent = match positive {
                        true => self.client.ack_tag(covered_tag),
                        false => self.client.nack_tag(covered_tag, true),
                    };
                    sent.map_err(|error| Failure::new("ack failed", error.to_string(), Some(frame)))?;
                }
                if !id.starts_with('t') {
                    break; // a message id names one delivery: the first subscription's
                }
            }
        }
        self.receipt(frame).await;
        Ok(())
    }

    async fn transaction(&mut self, frame: Frame) -> Result<(), Failure> {
        let name = frame
            .get("transaction")
            .ok_or_else(|| {
                Failure::new(
                    "bad transaction",
                    format!("{} needs a transaction header", frame.command.name()),
                    Some(&frame),
                )
            })?
            .to_string();
        match frame.command {
            Command::Begin => {
                if self.transactions.contains_key(&name) {
                    return Err(Failure::new(
                        "bad transaction",
                        format!("transaction {name:?} is already open"),
                        Some(&frame),
                    ));
                }
                self.transactions.insert(name, Vec::new());
            }
            _ => {
                let held = self.transactions.remove(&name).ok_or_else(|| {
                    Failure::new("bad transaction", format!("no open transaction {name:?}"), Some(&frame))
                })?;
                if frame.command == Command::Commit {
                    for held_frame in held {
                        Box::pin(self.apply_held(held_frame)).await?;
                    }
                }
            }
        }
        self.receipt(&frame).await;
        Ok(())
    }

    /// Applies a frame held by a committed transaction.
    async fn apply_held(&mut self, mut frame: Frame) -> Result<(), Failure> {
        frame.headers.retain(|(name, _)| name != "transaction");
        match frame.command {
            Command::Send => self.send(frame).await,
            _ => self.acknowledge(&frame).await,
        }
    }

    /// Holds a SEND, ACK or NACK in its transaction until COMMIT.
    async fn hold(&mut self, transaction: String, frame: Frame) -> Result<Next, Failure> {
        let limit = self.shared.config.max_transaction_frames;
        let held = self.transactions.get_mut(&transaction).ok_or_else(|| {
            Failure::new("bad transaction", format!("no open transaction {transaction:?}"), Some(&frame))
        })?;
        if held.len() >= limit {
            return Err(Failure::new(
                "transaction too large",
                format!("a transaction holds at most stomp.max_transaction_frames = {limit} frames"),
                Some(&frame),
            ));
        }
        let receipt_frame = frame.clone();
        held.push(frame);
        self.receipt(&receipt_frame).await;
        Ok(Next::Continue)
    }
}

/// The delivery tag an ACK or NACK names in `subscribed`: `t` and the tag
/// (the `ack` header), or `ID:` and a message id (`message-id`), the
/// oldest outstanding delivery of that message.
fn outstanding_tag(subscribed: &Subscribed, id: &str) -> Option<u64> {
    if let Some(tag) = id.strip_prefix('t') {
        return tag.parse().ok();
    }
    let message_id: u64 = id.strip_prefix("ID:")?.parse().ok()?;
    let outstanding = subscribed.outstanding.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    outstanding.iter().find(|(_, known)| *known == message_id).map(|(tag, _)| *tag)
}

/// The tags an ACK or NACK of `tag` covers in `subscribed`, removed from
/// its outstanding ones: every earlier one too for a `client` ACK, else
/// just `tag`; none when `tag` is not this subscription's.
fn take_acknowledged(subscribed: &Subscribed, tag: u64, positive: bool) -> Vec<u64> {
    let mut outstanding = subscribed.outstanding.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(position) = outstanding.iter().position(|(known, _)| *known == tag) else { return Vec::new() };
    match (subscribed.mode, positive) {
        (AckMode::Client, true) => outstanding.drain(..=position).map(|(tag, _)| tag).collect(),
        _ => outstanding.remove(position).map(|(tag, _)| tag).into_iter().collect(),
    }
}

/// Holds one subscription for its connection: unsubscribes it (and removes
/// its durable subscription when told) when stopped. Its deliveries are
/// written by the door writer; one that reaches it still (none should: the
/// door learns each subscription before its first delivery) is written
/// here the same way.
struct Forwarder {
    id: String,
    /// How the subscription wrote its destination (`/topic/`, `/queue/`
    /// or none): each MESSAGE names its own topic the same way.
    destination_prefix: &'static str,
    mode: AckMode,
    outstanding: Outstanding,
    out: mpsc::Sender<Outgoing>,
    /// The durable subscription read, removed when the stop says so.
    durable: Option<String>,
    client: Client,
    counters: Arc<StompCounters>,
}

impl Forwarder {
    async fn run(self, mut subscription: Subscription, mut stopped: oneshot::Receiver<bool>) {
        // MESSAGE frames are encoded here, off the connection's writer, and
        // split off this buffer one by one.
        let mut encoded = bytes::BytesMut::new();
        loop {
            let delivery = tokio::select! {
                delivery = subscription.next() => delivery,
                forget = &mut stopped => {
                    let _ = subscription.unsubscribe().await;
                    if let Some(name) = self.durable.filter(|_| forget.unwrap_or(false)) {
                        let removed = self.client.manage(ManageOp::DurableRm, serde_json::json!({ "name": name })).await;
                        if let Err(error) = removed {
                            tracing::warn!(durable = %name, "STOMP durable subscription not removed: {error}");
                        }
                    }
                    return;
                }
            };
            let Some(delivery) = delivery else { return };
            // Deliveries that need an ack carry their tag; the others get an
            // id that acknowledges nothing (a client in client mode acks
            // every MESSAGE it gets).
            let ack = match (self.mode, delivery.delivery_tag) {
                (AckMode::Auto, _) => None,
                (_, 0) => Some(format!("n{}", delivery.message.id)),
                (_, tag) => {
                    let mut outstanding = self.outstanding.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    outstanding.push_back((tag, delivery.message.id));
                    Some(format!("t{tag}"))
                }
            };
            let message = (&*delivery.message, delivery.redelivered);
            encode_message_frame(&mut encoded, message, &self.id, self.destination_prefix, ack.as_deref());
            StompCounters::bump(&self.counters.messages_delivered);
            if self.out.send(Outgoing::Message(encoded.split().freeze())).await.is_err() {
                return;
            }
        }
    }
}
