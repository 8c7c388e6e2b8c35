//! Options of the client, its publishes and its subscriptions.

use std::time::Duration;

use sift_proto::{AuthMethod, FilterKind, QueuePolicy, StartPosition, StreamSource};

use crate::time::ClockSource;

/// Default interval between background `TIME` exchanges.
pub const CLOCK_SYNC_INTERVAL_DEFAULT: Duration = Duration::from_secs(5);
/// Default [`ClientOptions::ping_interval`]: a silent broker is noticed
/// within 45 s (NATS clients take 2 minutes and then 2 pings; a subscriber
/// told of the loss sooner misses less).
pub const PING_INTERVAL_DEFAULT: Duration = Duration::from_secs(15);
/// Default [`ClientOptions::pings_outstanding_max`].
pub const PINGS_OUTSTANDING_MAX_DEFAULT: u32 = 2;

/// Options of a client connection.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Name sent in `HELLO`; the broker stamps it as the publisher.
    pub name: String,
    /// Reconnect when the connection drops.
    pub reconnect: bool,
    /// Longest pause between reconnect attempts (backoff doubles up to it).
    pub reconnect_delay_max: Duration,
    /// Time allowed for connecting and the handshake.
    pub connect_timeout: Duration,
    /// Bytes of unsent frames after which publishers wait for the writer.
    pub write_buffer_bytes_max: usize,
    /// Batches of deliveries (each at most one socket read's worth) buffered
    /// per subscription before the reader waits.
    pub subscription_batches: usize,
    /// The clock this client reads (the system's, unless a test injects one).
    pub clock: ClockSource,
    /// Interval between `TIME` exchanges that keep the estimate of the
    /// broker's clock fresh; `None` makes none in the background.
    pub clock_sync_interval: Option<Duration>,
    /// Stamp each publish with this client's clock carried into the
    /// broker's (`PUBLISHER_TIME`), so that receivers order and space
    /// messages by when they were sent rather than when they arrived.
    pub publisher_time: bool,
    /// Who to sign in as (`AUTH`, sent with `HELLO` on every connect and
    /// reconnect); `None` connects anonymously.
    pub credentials: Option<Credentials>,
    /// TLS to the broker (`--tls-ca`, and `--tls-cert`/`--tls-key` for a
    /// client certificate); `None` speaks plain text.
    pub tls: Option<sift_tls::ClientTls>,
    /// Give each persistent publish that has none a `Sift-Msg-Id` of this
    /// client's (its own random prefix and a count), kept when the publish
    /// is sent again after a reconnect: a replicated stream then stores a
    /// publish once even when the client resends it to another broker of
    /// the group after a failover (docs/STORAGE.md, "Replicated streams").
    pub msg_ids: bool,
    /// After this long without a byte from the broker the client sends a
    /// `PING`; `None` never does, and then only a closed connection shows
    /// the broker lost ([`crate::Client::connection_changes`]).
    pub ping_interval: Option<Duration>,
    /// Intervals of silence after the first `PING` before the connection
    /// counts as lost and the client reconnects: a broker that stopped
    /// without closing its sockets is noticed within
    /// `(pings_outstanding_max + 1) × ping_interval`.
    pub pings_outstanding_max: u32,
}

/// A user name and password, or a bearer token, to sign in with.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// How `secret` proves the identity.
    pub method: AuthMethod,
    /// The user name (empty with a token that names its user).
    pub user: String,
    /// The password or token.
    pub secret: String,
}

impl Credentials {
    /// A user name and its password.
    pub fn password(user: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials { method: AuthMethod::Password, user: user.into(), secret: password.into() }
    }

    /// The name a client's TLS certificate proves, for a protocol
    /// front-end of the broker's process to sign its client in with (a
    /// broker refuses it from a socket).
    pub fn certified(name: impl Into<String>) -> Credentials {
        Credentials { method: AuthMethod::Certificate, user: name.into(), secret: String::new() }
    }

    /// A bearer token.
    pub fn token(token: impl Into<String>) -> Credentials {
        Credentials { method: AuthMethod::Token, user: String::new(), secret: token.into() }
    }

    /// What a protocol that carries only a user name and a password (STOMP
    /// `login`/`passcode`, MQTT) presents: a password that is a JWT (three
    /// base64url parts, the first a JSON header) is a bearer token, for the
    /// user named if one is; otherwise a user name and password. `None`
    /// when neither a user nor a token is given.
    pub fn from_door(user: Option<&str>, secret: Option<&str>) -> Option<Credentials> {
        match (user, secret) {
            (user, Some(secret)) if is_bearer_token(secret) => {
                Some(Credentials { user: user.unwrap_or_default().to_string(), ..Credentials::token(secret) })
            }
            (Some(user), secret) => Some(Credentials::password(user, secret.unwrap_or_default())),
            (None, _) => None,
        }
    }

    /// The `AUTH` frame body that presents these credentials.
    pub fn auth(&self, request_id: u64) -> sift_proto::Auth {
        sift_proto::Auth { request_id, method: self.method, user: self.user.clone(), secret: self.secret.clone() }
    }
}

/// True for text shaped as a JWT: three base64url parts, the first of
/// which starts as a JSON object does (`eyJ`, base64 of `{"`).
pub fn is_bearer_token(text: &str) -> bool {
    let base64url = |part: &str| {
        !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
    };
    let parts: Vec<&str> = text.split('.').collect();
    parts.len() == 3 && text.starts_with("eyJ") && parts.iter().all(|part| base64url(part))
}

impl std::fmt::Debug for Credentials {
    /// Never prints the secret.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Credentials").field("method", &self.method).field("user", &self.user).finish()
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            name: format!("sift-client-{}", std::process::id()),
            reconnect: true,
            reconnect_delay_max: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(5),
            write_buffer_bytes_max: 4 * 1024 * 1024,
            subscription_batches: 64,
            clock: ClockSource::system(),
            clock_sync_interval: Some(CLOCK_SYNC_INTERVAL_DEFAULT),
            publisher_time: false,
            credentials: None,
            tls: None,
            msg_ids: false,
            ping_interval: Some(PING_INTERVAL_DEFAULT),
            pings_outstanding_max: PINGS_OUTSTANDING_MAX_DEFAULT,
        }
    }
}

/// Options of one confirmed publish.
#[derive(Debug, Clone, Copy, Default)]
pub struct PublishOptions {
    /// Confirm only when every matched subscriber acknowledged (JBI sync).
    pub await_delivered: bool,
    /// How long the broker waits for those acks; `None` = broker default.
    pub await_timeout: Option<Duration>,
}

/// How the application acknowledges deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AckPolicy {
    /// The client acknowledges each delivery when it hands it over.
    #[default]
    Auto,
    /// The application calls [`crate::Delivery::ack`].
    Manual,
    /// The broker counts a delivery as acknowledged once written (fastest,
    /// at-most-once for reliable messages if the client dies).
    OnWrite,
}

/// What to subscribe to and how.
#[derive(Debug, Clone)]
pub struct SubscribeOptions {
    /// Topic filter (`a.*.c`, `a.>`).
    pub topic_filter: String,
    /// Queue group; one member of the group gets each message.
    pub queue_group: Option<String>,
    /// Content filter language and text.
    pub filter: Option<(FilterKind, String)>,
    /// How deliveries are acknowledged.
    pub ack: AckPolicy,
    /// What a full queue at the broker does; `None` = the broker's default.
    pub policy: Option<QueuePolicy>,
    /// Queue bound at the broker; `None` = broker default.
    pub queue_capacity: Option<u32>,
    /// Reliable deliveries in flight; `None` = broker default.
    pub max_unacked: Option<u32>,
    /// Credit mode with this initial credit: more comes from [`crate::Subscription::grant`].
    pub credit: Option<u32>,
    /// Read a stream instead of live messages only: a replay from a start
    /// position, or a durable subscription (`docs/PROTOCOL.md` §6.6).
    pub source: Option<StreamSource>,
    /// With a durable: share it with other consumers (JMS 2.0 shared
    /// durable), each message going to one of them.
    pub shared: bool,
    /// With a durable: browse it, reading a copy of what it holds without
    /// taking anything (a JMS queue browser).
    pub browse: bool,
    /// With a stream source: be told each time everything stored has been
    /// given ([`crate::Subscription::is_caught_up`]).
    pub caught_up_markers: bool,
    /// With a shared durable: the content filter is this subscriber's own
    /// (`MEMBER_FILTER`), so a queue consumer with a selector takes only
    /// the queue's messages that pass it.
    pub member_filter: bool,
}

impl SubscribeOptions {
    /// Default options for `topic_filter`.
    pub fn new(topic_filter: impl Into<String>) -> SubscribeOptions {
        SubscribeOptions {
            topic_filter: topic_filter.into(),
            queue_group: None,
            filter: None,
            ack: AckPolicy::Auto,
            policy: None,
            queue_capacity: None,
            max_unacked: None,
            credit: None,
            source: None,
            shared: false,
            browse: false,
            caught_up_markers: false,
            member_filter: false,
        }
    }

    /// Replays `stream` (empty: the stream that holds the topic filter's
    /// topics, else `default`) from `start`, then follows live messages.
    pub fn replay(mut self, stream: impl Into<String>, start: StartPosition) -> Self {
        self.source = Some(StreamSource { stream: stream.into(), durable: String::new(), start });
        self
    }

    /// Creates or resumes the durable subscription `name`; a new one starts
    /// at `start` (usually [`StartPosition::New`]) in `stream` (empty: the
    /// broker picks as for [`SubscribeOptions::replay`]).
    pub fn durable(mut self, name: impl Into<String>, stream: impl Into<String>, start: StartPosition) -> Self {
        self.source = Some(StreamSource { stream: stream.into(), durable: name.into(), start });
        self
    }

    /// A consumer of the declared queue `name` ([`crate::Client::declare_queue`]):
    /// one of the consumers of its shared durable subscription, which
    /// takes each message the queue holds once.
    pub fn queue(name: &str) -> SubscribeOptions {
        SubscribeOptions::new(name).durable(queue_durable_name(name), "", StartPosition::New).shared()
    }

    /// Takes from the queue `name` the messages that pass `filter` (a JMS
    /// queue consumer with a selector): the filter is this consumer's own,
    /// and what no consumer's filter passes waits in the queue.
    pub fn queue_selecting(name: &str, kind: FilterKind, filter: impl Into<String>) -> SubscribeOptions {
        let mut options = SubscribeOptions::queue(name).filter(kind, filter);
        options.member_filter = true;
        options
    }

    /// Browses the queue `name`: a copy of the messages it holds now and
    /// receives later, taking none of them from its consumers.
    pub fn queue_browser(name: &str) -> SubscribeOptions {
        let mut options = SubscribeOptions::new(name).durable(queue_durable_name(name), "", StartPosition::New);
        options.browse = true;
        options
    }

    /// Asks to be told when everything stored has been given (a stream
    /// subscription: a durable, a queue, a browser or a replay), which
    /// [`crate::Subscription::is_caught_up`] then reports.
    pub fn caught_up_markers(mut self) -> Self {
        self.caught_up_markers = true;
        self
    }

    /// Shares the durable subscription with other consumers.
    pub fn shared(mut self) -> Self {
        self.shared = true;
        self
    }

    /// Joins queue group `group`.
    pub fn queue_group(mut self, group: impl Into<String>) -> Self {
        self.queue_group = Some(group.into());
        self
    }

    /// Sets the acknowledgement policy.
    pub fn ack(mut self, ack: AckPolicy) -> Self {
        self.ack = ack;
        self
    }

    /// Sets the full-queue policy.
    pub fn policy(mut self, policy: QueuePolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Sets the queue bound.
    pub fn queue_capacity(mut self, capacity: u32) -> Self {
        self.queue_capacity = Some(capacity);
        self
    }

    /// Sets the window of unacknowledged reliable deliveries.
    pub fn max_unacked(mut self, max_unacked: u32) -> Self {
        self.max_unacked = Some(max_unacked);
        self
    }

    /// Sets a content filter.
    pub fn filter(mut self, kind: FilterKind, text: impl Into<String>) -> Self {
        self.filter = Some((kind, text.into()));
        self
    }
}

/// `text` as a part of a durable subscription's name (which the broker
/// keeps as a directory name): characters other than ASCII letters,
/// digits, `-` and `_` become `_`.
pub fn durable_name_part(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// The shared durable subscription that holds the queue `name`.
pub fn queue_durable_name(name: &str) -> String {
    format!("queue.{name}")
}
