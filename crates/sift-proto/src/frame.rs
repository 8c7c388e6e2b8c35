//! The frames of protocol v1 and the fields they carry.

use sift_core::Message;

use crate::{AdminQuery, ErrorCode, GapReason, ManageOp, Query, StreamSource};

/// Frame type codes (the byte after the length prefix).
pub mod frame_type {
    /// Client → server: open the session.
    pub const HELLO: u8 = 0x01;
    /// Server → client: the session is open; here are the limits.
    pub const WELCOME: u8 = 0x02;
    /// Either way: are you there?
    pub const PING: u8 = 0x03;
    /// Either way: the answer to a ping.
    pub const PONG: u8 = 0x04;
    /// Either way: what time is it on your clock? (`request_id`, `origin_ns`)
    pub const TIME: u8 = 0x06;
    /// Either way: the answer to `TIME`, with the replier's receive and
    /// transmit times.
    pub const TIME_REPLY: u8 = 0x07;
    /// Client → server: sign in as a user (see [`Auth`](crate::Auth)).
    pub const AUTH: u8 = 0x08;
    /// Server → client: signed in; the session now has the user's
    /// permissions.
    pub const AUTH_OK: u8 = 0x09;
    /// Either way: closing. The broker writes the responses it owes (not the
    /// queued deliveries) and answers `CLOSE` as its last frame.
    pub const CLOSE: u8 = 0x05;
    /// Client → server: publish one message.
    pub const PUBLISH: u8 = 0x10;
    /// Server → client: the outcome of a publish.
    pub const CONFIRM: u8 = 0x11;
    /// Client → server: open a subscription.
    pub const SUBSCRIBE: u8 = 0x20;
    /// Server → client: the subscription is live.
    pub const SUBSCRIBED: u8 = 0x21;
    /// Client → server: close a subscription.
    pub const UNSUBSCRIBE: u8 = 0x22;
    /// Server → client: a message for a subscription.
    pub const DELIVER: u8 = 0x30;
    /// Client → server: deliveries processed.
    pub const ACK: u8 = 0x31;
    /// Client → server: a delivery was not processed.
    pub const NACK: u8 = 0x32;
    /// Client → server: more delivery credit for a subscription.
    pub const FLOW: u8 = 0x33;
    /// Server → client: stored messages a stream subscription will never get.
    pub const GAP: u8 = 0x34;
    /// Server → client: a stream subscription has read the whole stream;
    /// the last stored message it was given.
    pub const CAUGHT_UP: u8 = 0x35;
    /// Client → server: an archive query of a stream. The query frames sit
    /// after `MANAGE` in the `0x60` block of requests answered by request
    /// id, because `0x40..=0x5F` belongs to the broker link protocol and a
    /// code shared by both would make a misdirected connection harder to
    /// recognise.
    pub const QUERY: u8 = 0x63;
    /// Server → client: one stored message a query selected.
    pub const QUERY_RESULT: u8 = 0x64;
    /// Server → client: a query ended.
    pub const QUERY_DONE: u8 = 0x65;
    /// Client → server: describe the broker (links, routes or counters).
    pub const ADMIN: u8 = 0x60;
    /// Server → client: the answer to an `ADMIN` or `MANAGE`, as JSON.
    pub const ADMIN_REPLY: u8 = 0x61;
    /// Client → server: add, list, describe or remove streams and durables.
    pub const MANAGE: u8 = 0x62;
    /// Either way: something was refused.
    pub const ERROR: u8 = 0x7F;
}

/// `HELLO`: the client's first frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Hello {
    /// Lowest protocol version the client speaks.
    pub version_min: u16,
    /// Highest protocol version the client speaks.
    pub version_max: u16,
    /// Client name, stamped as `publisher` on its messages.
    pub client_name: String,
}

/// How an `AUTH` proves who the client is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// `user` with its password as `secret`.
    Password,
    /// A bearer token (a JWT the broker verifies) as `secret`; `user` may be
    /// empty, the token names the user.
    Token,
    /// The name `user` that the client's TLS certificate proves, as a
    /// protocol front-end in the broker's own process asserts it after its
    /// TLS handshake checked the certificate; `secret` is empty. A broker
    /// refuses it from a socket, where anyone could claim any name.
    Certificate,
}

impl AuthMethod {
    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            AuthMethod::Password => 1,
            AuthMethod::Token => 2,
            AuthMethod::Certificate => 3,
        }
    }

    /// The method for a wire value.
    pub fn from_code(code: u8) -> Option<AuthMethod> {
        match code {
            1 => Some(AuthMethod::Password),
            2 => Some(AuthMethod::Token),
            3 => Some(AuthMethod::Certificate),
            _ => None,
        }
    }
}

/// `AUTH`: sign in. Sent after `HELLO` (it may follow it at once, before
/// `WELCOME` arrives); until it is answered by `AUTH_OK` the session has
/// the permissions of anonymous access, or none.
#[derive(Clone, PartialEq)]
pub struct Auth {
    /// Client-chosen id that the `AUTH_OK` or `ERROR` will carry.
    pub request_id: u64,
    /// How `secret` proves the identity.
    pub method: AuthMethod,
    /// The user name (empty for a token that names its user).
    pub user: String,
    /// The password or token.
    pub secret: String,
}

impl std::fmt::Debug for Auth {
    /// Never prints the secret: frames end up in logs.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Auth")
            .field("request_id", &self.request_id)
            .field("method", &self.method)
            .field("user", &self.user)
            .field("secret", &"<hidden>")
            .finish()
    }
}

/// `WELCOME`: the server's answer to `HELLO`, with its limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Welcome {
    /// The version both sides now speak.
    pub version: u16,
    /// The broker's name.
    pub server_name: String,
    /// Connection id, unique within the broker run.
    pub connection_id: u64,
    /// Largest frame the broker accepts (length prefix value).
    pub max_frame_bytes: u32,
    /// Largest payload the broker accepts.
    pub max_payload_bytes: u32,
    /// Most subscriptions one connection may hold.
    pub max_subscriptions: u32,
    /// Longest content filter accepted, in bytes.
    pub max_filter_bytes: u32,
    /// Most confirmed publishes a client may have unconfirmed at once.
    pub publish_window: u32,
    /// How long a reliable delivery may stay unacknowledged before redelivery.
    pub ack_timeout_ms: u32,
}

/// Flags of a `PUBLISH`.
pub mod publish_flags {
    /// Send a `CONFIRM` for this publish (always on for reliable messages
    /// with a request id; a fire-and-forget publish, request id 0, gets none).
    pub const CONFIRM: u8 = 0x01;
    /// Confirm only when every matched subscriber acknowledged (JBI sync).
    pub const AWAIT_DELIVERED: u8 = 0x02;
    /// The message's `timestamp_ns` (and `time_error_ns`) are the
    /// publisher's own, already carried into the broker's clock: keep them
    /// instead of stamping the time of acceptance.
    pub const PUBLISHER_TIME: u8 = 0x04;
}

/// Bits of the flags byte inside an encoded message.
pub mod message_flags {
    /// A `metadata` field is present.
    pub const METADATA: u8 = 0x01;
    /// A `time_error_ns` (`u32`) follows `expiry_ns`.
    pub const TIME_ERROR: u8 = 0x02;
}

/// `TIME_REPLY`: the four timestamps of a clock exchange, less the arrival
/// time that the requester reads itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeReply {
    /// The `TIME` request's id.
    pub request_id: u64,
    /// The requester's clock when it sent `TIME`, echoed.
    pub origin_ns: u64,
    /// The replier's clock when `TIME` arrived.
    pub receive_ns: u64,
    /// The replier's clock when the reply left.
    pub transmit_ns: u64,
}

/// `PUBLISH`: one message.
#[derive(Debug, Clone, PartialEq)]
pub struct Publish {
    /// Client-chosen id that the `CONFIRM` or `ERROR` will carry.
    pub request_id: u64,
    /// [`publish_flags`].
    pub flags: u8,
    /// With `AWAIT_DELIVERED`: how long to wait for acks; 0 = server default.
    pub await_timeout_ms: u32,
    /// The message.
    pub message: Box<Message>,
}

/// Outcome reported by a `CONFIRM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmStatus {
    /// Accepted and queued for `matched` subscriptions.
    Accepted,
    /// Accepted, but no subscription wanted it (JBI's 404).
    NoSubscribers,
    /// Every matched subscriber acknowledged it.
    Delivered,
    /// The await timed out or a subscriber went away; `pending` lists who.
    Incomplete,
}

impl ConfirmStatus {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            ConfirmStatus::Accepted => 0,
            ConfirmStatus::NoSubscribers => 1,
            ConfirmStatus::Delivered => 2,
            ConfirmStatus::Incomplete => 3,
        }
    }

    /// Status for a wire code.
    pub fn from_code(code: u8) -> Option<ConfirmStatus> {
        match code {
            0 => Some(ConfirmStatus::Accepted),
            1 => Some(ConfirmStatus::NoSubscribers),
            2 => Some(ConfirmStatus::Delivered),
            3 => Some(ConfirmStatus::Incomplete),
            _ => None,
        }
    }
}

/// `CONFIRM`: the outcome of a publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirm {
    /// The publish's request id.
    pub request_id: u64,
    /// What happened.
    pub status: ConfirmStatus,
    /// Subscriptions the message matched (one per queue group).
    pub matched: u32,
    /// Subscriptions that acknowledged it (await=delivered only).
    pub acked: u32,
    /// Subscribers that had not acknowledged when the await ended.
    pub pending: Vec<String>,
    /// The stream a persistent message was stored in; empty otherwise.
    ///
    /// A persistent publish is confirmed only once it is stored under its
    /// stream's fsync policy, and the confirm says where, so that a
    /// publisher can later replay or query exactly what it published.
    pub stream: String,
    /// Its sequence in that stream; 0 when not stored (sequences start at 1).
    pub stream_seq: u64,
}

/// Content filter language of a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKind {
    /// No content filter: the topic filter decides alone.
    None,
    /// `name op value` conjunction over properties.
    Tags,
    /// JMS message selector.
    Sql,
    /// XPath 1.0 over the metadata.
    Xpath,
    /// Regular expression over the topic.
    Regex,
}

impl FilterKind {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            FilterKind::None => 0,
            FilterKind::Tags => 1,
            FilterKind::Sql => 2,
            FilterKind::Xpath => 3,
            FilterKind::Regex => 4,
        }
    }

    /// Kind for a wire code.
    pub fn from_code(code: u8) -> Option<FilterKind> {
        match code {
            0 => Some(FilterKind::None),
            1 => Some(FilterKind::Tags),
            2 => Some(FilterKind::Sql),
            3 => Some(FilterKind::Xpath),
            4 => Some(FilterKind::Regex),
            _ => None,
        }
    }

    /// Name as used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FilterKind::None => "none",
            FilterKind::Tags => "tags",
            FilterKind::Sql => "sql",
            FilterKind::Xpath => "xpath",
            FilterKind::Regex => "regex",
        }
    }
}

/// How deliveries of a subscription are acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckMode {
    /// The broker counts a delivery as acknowledged once written to the socket.
    Auto,
    /// The client sends `ACK` for every reliable delivery.
    Client,
}

/// What a full subscription queue does with the next message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueuePolicy {
    /// Hold reliable publishers back (flow control); drop best-effort.
    Block,
    /// Keep the newest N: the oldest queued message makes room.
    KeepLast(u32),
    /// Drop the new message.
    DropNew,
    /// Close the subscriber's connection with `SLOW_CONSUMER`.
    Disconnect,
}

/// Wire code of "the broker's default policy" in a `SUBSCRIBE`.
pub const POLICY_BROKER_DEFAULT: u8 = 0xFF;

impl QueuePolicy {
    /// Wire code and argument.
    pub fn to_wire(self) -> (u8, u32) {
        match self {
            QueuePolicy::Block => (0, 0),
            QueuePolicy::KeepLast(count) => (1, count),
            QueuePolicy::DropNew => (2, 0),
            QueuePolicy::Disconnect => (3, 0),
        }
    }

    /// Policy for a wire code and argument.
    pub fn from_wire(code: u8, argument: u32) -> Option<QueuePolicy> {
        match code {
            0 => Some(QueuePolicy::Block),
            1 => Some(QueuePolicy::KeepLast(argument)),
            2 => Some(QueuePolicy::DropNew),
            3 => Some(QueuePolicy::Disconnect),
            _ => None,
        }
    }
}

impl std::str::FromStr for QueuePolicy {
    type Err = String;

    /// Parses `block`, `keep-last:N`, `drop-new` or `disconnect`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "block" => Ok(QueuePolicy::Block),
            "drop-new" => Ok(QueuePolicy::DropNew),
            "disconnect" => Ok(QueuePolicy::Disconnect),
            other => match other.strip_prefix("keep-last:").map(str::parse::<u32>) {
                Some(Ok(count)) if count > 0 => Ok(QueuePolicy::KeepLast(count)),
                _ => Err(format!(
                    "unknown policy {other:?}: expected block, keep-last:N (N > 0), drop-new or disconnect"
                )),
            },
        }
    }
}

impl std::fmt::Display for QueuePolicy {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueuePolicy::Block => formatter.write_str("block"),
            QueuePolicy::KeepLast(count) => write!(formatter, "keep-last:{count}"),
            QueuePolicy::DropNew => formatter.write_str("drop-new"),
            QueuePolicy::Disconnect => formatter.write_str("disconnect"),
        }
    }
}

/// Flags of a `SUBSCRIBE`.
pub mod subscribe_flags {
    /// Deliveries need credit granted by `FLOW` frames (pull-style flow control).
    pub const CREDIT_MODE: u8 = 0x01;
    /// A stream source section follows: a replay or a durable subscription.
    pub const STREAM_SOURCE: u8 = 0x02;
    /// With a durable: share it with other consumers (JMS 2.0 shared durable).
    pub const SHARED: u8 = 0x04;
    /// With a durable: read a copy of what it holds, from its position on,
    /// without taking anything from it (a JMS queue browser).
    pub const BROWSE: u8 = 0x08;
    /// With a stream source: send `CAUGHT_UP` each time the subscription
    /// has been given everything stored.
    pub const CAUGHT_UP: u8 = 0x10;
    /// With `SHARED`: the content filter is this subscriber's own, not the
    /// durable's; it gets only the durable's messages that pass it, and a
    /// message no subscriber's filter passes waits for one that does (a
    /// JMS queue consumer with a selector).
    pub const MEMBER_FILTER: u8 = 0x20;
}

/// `SUBSCRIBE`: open a subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscribe {
    /// Client-chosen id, unique on the connection; deliveries carry it.
    pub sub_id: u32,
    /// Topic filter (`a.*.c`, `a.>`).
    pub topic_filter: String,
    /// Queue group; empty for none.
    pub queue_group: String,
    /// Content filter language.
    pub filter_kind: FilterKind,
    /// Content filter text; empty with [`FilterKind::None`].
    pub filter: String,
    /// How deliveries are acknowledged.
    pub ack_mode: AckMode,
    /// What a full queue does; `None` = the broker's `policy_default`.
    pub policy: Option<QueuePolicy>,
    /// Queue bound in messages; 0 = server default.
    pub queue_capacity: u32,
    /// Most reliable deliveries in flight unacknowledged; 0 = server default.
    pub max_unacked: u32,
    /// [`subscribe_flags`].
    pub flags: u8,
    /// With `CREDIT_MODE`: deliveries allowed before the first `FLOW`.
    pub initial_credit: u32,
    /// Read a stream (`STREAM_SOURCE`): a replay or a durable subscription.
    pub source: Option<StreamSource>,
}

impl Subscribe {
    /// A subscription to `topic_filter` with default options.
    pub fn new(sub_id: u32, topic_filter: impl Into<String>) -> Subscribe {
        Subscribe {
            sub_id,
            topic_filter: topic_filter.into(),
            queue_group: String::new(),
            filter_kind: FilterKind::None,
            filter: String::new(),
            ack_mode: AckMode::Client,
            policy: None,
            queue_capacity: 0,
            max_unacked: 0,
            flags: 0,
            initial_credit: 0,
            source: None,
        }
    }
}

/// Flags of a `DELIVER`.
pub mod deliver_flags {
    /// The message was delivered before and not acknowledged.
    pub const REDELIVERED: u8 = 0x01;
    /// A u64 stream sequence follows the flags: a stored message.
    pub const STREAM_SEQ: u8 = 0x02;
}

/// `DELIVER`: a message for one subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Deliver {
    /// The subscription it is for.
    pub sub_id: u32,
    /// Tag to acknowledge; 0 when no acknowledgement is expected.
    pub delivery_tag: u64,
    /// [`deliver_flags`].
    pub flags: u8,
    /// The stream sequence of a stored message (`STREAM_SEQ`); 0 otherwise.
    ///
    /// Encoding sets `STREAM_SEQ` exactly when this is not 0, whatever
    /// `flags` says, so that the flag cannot promise a field that is absent.
    /// It lets a stream subscriber see its position and spot a `GAP`.
    pub stream_seq: u64,
    /// The message.
    pub message: Box<Message>,
}

/// `ERROR`: a refusal.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorFrame {
    /// What went wrong.
    pub code: ErrorCode,
    /// The request id or subscription id it concerns; 0 for the connection.
    pub reference: u64,
    /// True when the sender closes the connection after this frame.
    pub fatal: bool,
    /// A human-readable explanation: what, where, why.
    pub message: String,
}

/// One frame of protocol v1.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// See [`Hello`].
    Hello(Hello),
    /// See [`Welcome`].
    Welcome(Welcome),
    /// Liveness probe carrying a nonce that the `PONG` echoes.
    Ping {
        /// Echoed in the answer.
        nonce: u64,
    },
    /// Answer to `PING`.
    Pong {
        /// The ping's nonce.
        nonce: u64,
    },
    /// A clock exchange request: the sender's clock reading.
    Time {
        /// Echoed in the reply.
        request_id: u64,
        /// The sender's clock when it sent the request.
        origin_ns: u64,
    },
    /// See [`TimeReply`].
    TimeReply(TimeReply),
    /// See [`Auth`].
    Auth(Auth),
    /// The answer to a successful `AUTH`.
    AuthOk {
        /// The `AUTH`'s request id.
        request_id: u64,
        /// The user the session now acts as.
        user: String,
    },
    /// Orderly close.
    Close,
    /// See [`Publish`].
    Publish(Publish),
    /// See [`Confirm`].
    Confirm(Confirm),
    /// See [`Subscribe`].
    Subscribe(Subscribe),
    /// The subscription with this id is live.
    Subscribed {
        /// Its id.
        sub_id: u32,
    },
    /// Close a subscription.
    Unsubscribe {
        /// Its id.
        sub_id: u32,
    },
    /// See [`Deliver`].
    Deliver(Deliver),
    /// Acknowledge deliveries by tag.
    Ack {
        /// Tags of processed deliveries.
        delivery_tags: Vec<u64>,
    },
    /// Refuse a delivery: requeue it at the front of the same subscription's
    /// queue (`requeue`) or drop it.
    Nack {
        /// Its tag.
        delivery_tag: u64,
        /// Redeliver at once, from the front of the same queue, instead of dropping.
        requeue: bool,
    },
    /// Grant more delivery credit to a subscription in credit mode.
    Flow {
        /// The subscription.
        sub_id: u32,
        /// Additional deliveries allowed.
        credit: u32,
    },
    /// Ask the broker to describe itself.
    Admin {
        /// Client-chosen id that the `ADMIN_REPLY` or `ERROR` will carry.
        request_id: u64,
        /// What to describe.
        query: AdminQuery,
    },
    /// The answer to an `ADMIN`.
    AdminReply {
        /// The `ADMIN`'s request id.
        request_id: u64,
        /// A JSON document; its schema depends on the query (`docs/PROTOCOL.md` §6.16).
        json: String,
    },
    /// See [`ErrorFrame`].
    Error(ErrorFrame),
    /// Stored messages a stream subscription will never get.
    Gap {
        /// The subscription.
        sub_id: u32,
        /// First sequence missed.
        first_seq: u64,
        /// Consecutive sequences missed.
        count: u64,
        /// Why.
        reason: GapReason,
    },
    /// A stream subscription that asked for it (`CAUGHT_UP` in its flags)
    /// has been given everything stored so far that it is to get.
    CaughtUp {
        /// The subscription.
        sub_id: u32,
        /// The highest stream sequence given to it so far (0 for none):
        /// once the client has read the delivery of that sequence, it has
        /// everything stored before the broker sent this frame.
        last_seq: u64,
    },
    /// See [`Query`].
    Query(Query),
    /// One stored message a query selected.
    QueryResult {
        /// The query's request id.
        request_id: u64,
        /// The message's stream sequence.
        stream_seq: u64,
        /// The message.
        message: Box<Message>,
    },
    /// The end of a query.
    QueryDone {
        /// The query's request id.
        request_id: u64,
        /// Results sent.
        matched: u64,
        /// Stored messages scanned.
        scanned: u64,
        /// Stored messages in range that could not be read.
        missed: u64,
    },
    /// Streams and durable subscriptions: add, list, describe, remove.
    Manage {
        /// Client-chosen id that the `ADMIN_REPLY` or `ERROR` will carry.
        request_id: u64,
        /// What to do.
        op: ManageOp,
        /// The request as JSON (`docs/PROTOCOL.md` §6.17).
        body: String,
    },
}

impl Frame {
    /// About how many bytes the frame takes encoded, without encoding it:
    /// exact enough to bound a buffer of frames kept as values (a local
    /// session's batches, a broker's held-back publishes).
    pub fn approximate_bytes(&self) -> usize {
        /// Fixed fields and length prefixes of a frame or a message.
        const OVERHEAD_BYTES: usize = 64;
        let message_bytes = |message: &Message| {
            let properties: usize = message.properties.iter().map(|(name, _)| name.len() + 16).sum();
            message.topic.as_str().len()
                + properties
                + message.metadata.as_ref().map_or(0, |metadata| metadata.len())
                + message.payload.len()
        };
        match self {
            Frame::Publish(publish) => OVERHEAD_BYTES + message_bytes(&publish.message),
            Frame::Deliver(deliver) => OVERHEAD_BYTES + message_bytes(&deliver.message),
            Frame::Ack { delivery_tags } => OVERHEAD_BYTES + 8 * delivery_tags.len(),
            _ => OVERHEAD_BYTES,
        }
    }

    /// The frame's type code.
    pub fn type_code(&self) -> u8 {
        use frame_type::*;
        match self {
            Frame::Hello(_) => HELLO,
            Frame::Welcome(_) => WELCOME,
            Frame::Ping { .. } => PING,
            Frame::Pong { .. } => PONG,
            Frame::Time { .. } => TIME,
            Frame::TimeReply(_) => TIME_REPLY,
            Frame::Auth(_) => AUTH,
            Frame::AuthOk { .. } => AUTH_OK,
            Frame::Close => CLOSE,
            Frame::Publish(_) => PUBLISH,
            Frame::Confirm(_) => CONFIRM,
            Frame::Subscribe(_) => SUBSCRIBE,
            Frame::Subscribed { .. } => SUBSCRIBED,
            Frame::Unsubscribe { .. } => UNSUBSCRIBE,
            Frame::Deliver(_) => DELIVER,
            Frame::Ack { .. } => ACK,
            Frame::Nack { .. } => NACK,
            Frame::Flow { .. } => FLOW,
            Frame::Admin { .. } => ADMIN,
            Frame::AdminReply { .. } => ADMIN_REPLY,
            Frame::Error(_) => ERROR,
            Frame::Gap { .. } => GAP,
            Frame::CaughtUp { .. } => CAUGHT_UP,
            Frame::Query(_) => QUERY,
            Frame::QueryResult { .. } => QUERY_RESULT,
            Frame::QueryDone { .. } => QUERY_DONE,
            Frame::Manage { .. } => MANAGE,
        }
    }

    /// The frame's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        frame_name(self.type_code())
    }
}

/// The name of a frame type code, or `"UNKNOWN"`.
pub fn frame_name(code: u8) -> &'static str {
    use frame_type::*;
    match code {
        HELLO => "HELLO",
        WELCOME => "WELCOME",
        PING => "PING",
        PONG => "PONG",
        TIME => "TIME",
        TIME_REPLY => "TIME_REPLY",
        AUTH => "AUTH",
        AUTH_OK => "AUTH_OK",
        CLOSE => "CLOSE",
        PUBLISH => "PUBLISH",
        CONFIRM => "CONFIRM",
        SUBSCRIBE => "SUBSCRIBE",
        SUBSCRIBED => "SUBSCRIBED",
        UNSUBSCRIBE => "UNSUBSCRIBE",
        DELIVER => "DELIVER",
        ACK => "ACK",
        NACK => "NACK",
        FLOW => "FLOW",
        ADMIN => "ADMIN",
        ADMIN_REPLY => "ADMIN_REPLY",
        ERROR => "ERROR",
        GAP => "GAP",
        CAUGHT_UP => "CAUGHT_UP",
        QUERY => "QUERY",
        QUERY_RESULT => "QUERY_RESULT",
        QUERY_DONE => "QUERY_DONE",
        MANAGE => "MANAGE",
        _ => "UNKNOWN",
    }
}
