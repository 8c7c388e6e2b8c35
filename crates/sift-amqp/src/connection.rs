//! One AMQP connection: its protocol header and SASL, the native session
//! it is carried on, and its AMQP sessions, each served by
//! [`crate::session`] until the client closes or the broker stops.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fe2o3_amqp::acceptor::{ConnectionAcceptor, ListenerConnectionHandle, SessionAcceptor};
use fe2o3_amqp::transaction::coordinator::ControlLinkAcceptor;
use fe2o3_amqp::types::definitions::{ConnectionError as AmqpConnectionError, Error as AmqpErrorValue};
use sift_broker::front_end::Incoming;
use sift_broker::tls::DoorStream;
use sift_client::{Client, ClientError, ClientOptions, Credentials, DeclaredQueues};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::commits::Commits;
use crate::drain::Drains;
use crate::sasl::{self, Header, SaslError, SignIn};
use crate::server::{AmqpCounters, Shared, PLAIN_TEXT_REFUSAL};
use crate::stream::{ClientOpen, Rewound, StreamLimits};

/// What a message may carry besides its payload (header, annotations,
/// properties) within the broker's `max_payload_bytes`.
const MESSAGE_SECTIONS_BYTES_MAX: usize = 1024 * 1024;

/// What every session and link of one connection shares.
#[derive(Debug)]
pub(crate) struct ConnectionContext {
    pub shared: Arc<Shared>,
    /// The connection's native session.
    pub client: Client,
    /// The client's container id (its JMS client id).
    pub container_id: String,
    /// The native session's connection id: names temporary nodes.
    pub connection_id: u64,
    /// The native session's name, which the broker stamps on what it
    /// publishes: no-local consumers skip their own connection's messages.
    pub native_name: String,
    /// Temporary nodes made so far.
    pub temporary_nodes: AtomicU64,
    /// Queues this connection declared (each is declared once).
    pub declared_queues: DeclaredQueues,
    /// The consumer links' drain signals, shared with the stream check.
    pub drains: Arc<Drains>,
    /// The commits whose answer waits for their messages, shared with the
    /// stream check.
    pub commits: Arc<Commits>,
}

impl ConnectionContext {
    /// Declares the queue `name` at the broker, once per connection: what
    /// is sent to it then waits for a consumer.
    pub async fn declare_queue(&self, name: &str) -> Result<(), ClientError> {
        self.client.declare_queue_once(&self.declared_queues, name).await
    }
}

/// How much longer than `amqp.drain_wait_ms_max` a drain flow may be held
/// before it goes on to the library whatever its consumer does.
const DRAIN_HOLD_MARGIN_MS: u64 = 1_000;

/// Why a connection ended before its AMQP `open` was answered.
#[derive(Debug, thiserror::Error)]
enum OpenError {
    #[error(transparent)]
    Sasl(#[from] SaslError),
    #[error("sign-in refused: {0}")]
    SignIn(ClientError),
    #[error("this broker admits only signed-in clients, and the client skipped SASL")]
    SaslRequired,
    #[error("AMQP open failed: {0}")]
    Open(String),
}

/// Serves an accepted connection until it closes.
pub(crate) async fn serve(incoming: Incoming, peer: SocketAddr, shared: Arc<Shared>, closing: watch::Receiver<bool>) {
    let Some(stream) = incoming.open(PLAIN_TEXT_REFUSAL).await else { return };
    let limit = Duration::from_millis(shared.config.connect_timeout_ms);
    let opened = match tokio::time::timeout(limit, open(stream, peer, &shared)).await {
        Ok(Ok(opened)) => opened,
        Ok(Err(error)) => {
            AmqpCounters::bump(&shared.counters.connections_failed);
            tracing::debug!(%peer, %error, "AMQP connection refused");
            return;
        }
        Err(_) => {
            AmqpCounters::bump(&shared.counters.connections_failed);
            tracing::debug!(%peer, "AMQP connection gave no open within amqp.connect_timeout_ms");
            return;
        }
    };
    run(opened, closing).await;
}

/// A connection whose `open` was answered.
struct Opened {
    connection: ListenerConnectionHandle,
    context: Arc<ConnectionContext>,
}

/// The header, SASL and the `open`: signs the native session in with what
/// SASL presented (or the client certificate's name), then lets the AMQP
/// library take the stream.
async fn open(mut stream: DoorStream, peer: SocketAddr, shared: &Arc<Shared>) -> Result<Opened, OpenError> {
    let certified = stream.peer_identity();
    let anonymous = !shared.connector.requires_sign_in() || certified.is_some();
    let ((client, native_name), replay) = match sasl::read_header(&mut stream).await? {
        Header::Sasl => {
            let credentials = match sasl::read_sign_in(&mut stream, anonymous).await? {
                SignIn::Plain { user, password } => Credentials::from_door(Some(&user), Some(&password)),
                SignIn::Anonymous => certified.map(Credentials::certified),
            };
            match open_session(shared, peer, credentials).await {
                Ok(client) => {
                    sasl::write_outcome(&mut stream, true).await?;
                    (client, Vec::new())
                }
                Err(error) => {
                    AmqpCounters::bump(&shared.counters.sign_in_refusals);
                    sasl::write_outcome(&mut stream, false).await?;
                    return Err(OpenError::SignIn(error));
                }
            }
        }
        Header::Amqp if anonymous => {
            let client =
                open_session(shared, peer, certified.map(Credentials::certified)).await.map_err(OpenError::SignIn)?;
            (client, sasl::AMQP_HEADER.to_vec())
        }
        Header::Amqp => {
            // The specification's answer to a header the server will not
            // take: the one it will, then close.
            stream.write_all(&sasl::SASL_HEADER).await.map_err(SaslError::Io)?;
            stream.flush().await.map_err(SaslError::Io)?;
            return Err(OpenError::SaslRequired);
        }
    };
    let noticed = Arc::new(Mutex::new(None));
    let max_payload_bytes = client.server_info().map_or(0, |welcome| welcome.max_payload_bytes as usize);
    let limits = StreamLimits {
        max_frame_bytes: shared.config.max_frame_bytes as usize,
        max_message_bytes: max_payload_bytes + MESSAGE_SECTIONS_BYTES_MAX,
        transaction_bytes_max: shared.config.transaction_bytes_max as usize,
        // The consumer gives up waiting after drain_wait_ms_max; the hold
        // ends a little later whatever happened to the consumer.
        drain_hold_max: Duration::from_millis(shared.config.drain_wait_ms_max.saturating_add(DRAIN_HOLD_MARGIN_MS)),
        commit_wait_max: Duration::from_millis(shared.config.commit_wait_ms_max),
        links_max: usize::from(shared.config.max_sessions).saturating_mul(shared.config.max_links_per_session as usize),
    };
    let drains = Arc::new(Drains::default());
    let commits = Arc::new(Commits::default());
    let rewound =
        Rewound::new(stream, replay, limits, noticed.clone()).with_drains(drains.clone()).with_commits(commits.clone());
    let broker_name = client.server_info().map_or_else(|| "sift".to_string(), |welcome| welcome.server_name);
    let connection =
        acceptor(shared, &broker_name).accept(rewound).await.map_err(|error| OpenError::Open(error.to_string()))?;
    let ClientOpen { container_id } =
        noticed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take().unwrap_or_default();
    let connection_id = client.server_info().map_or(0, |welcome| welcome.connection_id);
    let context = ConnectionContext {
        shared: shared.clone(),
        client,
        container_id,
        connection_id,
        native_name,
        temporary_nodes: AtomicU64::new(0),
        declared_queues: DeclaredQueues::default(),
        drains,
        commits,
    };
    Ok(Opened { connection, context: Arc::new(context) })
}

/// The AMQP library's acceptor with this front-end's limits and offer:
/// anonymous relay (one producer link for every destination, each message
/// naming its own in `to`).
fn acceptor(shared: &Shared, broker_name: &str) -> ConnectionAcceptor<(), ()> {
    let config = &shared.config;
    ConnectionAcceptor::builder()
        .container_id(broker_name)
        .max_frame_size(config.max_frame_bytes)
        .channel_max(config.max_sessions.saturating_sub(1))
        .idle_time_out(config.idle_timeout_ms)
        .add_offered_capabilities("ANONYMOUS-RELAY")
        .add_offered_capabilities("SHARED-SUBS")
        .add_offered_capabilities("DELAYED_DELIVERY")
        .build()
}

/// The connection's native session, signed in with `credentials`, and its
/// name.
async fn open_session(
    shared: &Shared,
    peer: SocketAddr,
    credentials: Option<Credentials>,
) -> Result<(Client, String), ClientError> {
    // Unique per connection (the peer's port), since no-local consumers
    // tell their own connection's messages by it.
    let name = match &credentials {
        Some(credentials) if !credentials.user.is_empty() => format!("amqp-{}@{peer}", credentials.user),
        _ => format!("amqp-{peer}"),
    };
    let options = ClientOptions {
        name: name.clone(),
        reconnect: false,
        clock_sync_interval: None,
        credentials,
        ..ClientOptions::default()
    };
    let origin = sift_broker::door::Origin { door: sift_broker::door::Door::Amqp, peer: Some(peer) };
    let client = Client::connect_local(shared.connector.local_opener(origin), options).await?;
    Ok((client, name))
}

/// Serves the connection's sessions until the client closes it, the
/// native session ends, or the broker stops.
async fn run(opened: Opened, mut closing: watch::Receiver<bool>) {
    let Opened { mut connection, context } = opened;
    // The library serves each session's transaction coordinator: it holds
    // a transaction's transfers and dispositions and hands them to the
    // links only when the transaction commits (dropping them on rollback),
    // so producers and consumers see committed work as plain sends and
    // acknowledgements. Its buffer is bounded by the stream check
    // (`amqp.transaction_messages_max`).
    let session_acceptor = SessionAcceptor::builder().control_link_acceptor(ControlLinkAcceptor::default()).build();
    let mut sessions = JoinSet::new();
    let mut broker_closed = context.client.connection_changes();
    loop {
        tokio::select! {
            incoming = connection.next_incoming_session() => {
                let Some(incoming) = incoming else { break };
                match session_acceptor.accept_incoming_session(incoming, &mut connection).await {
                    Ok(session) => {
                        sessions.spawn(crate::session::serve(session, context.clone()));
                    }
                    Err(error) => {
                        tracing::debug!(%error, "AMQP session not begun");
                        break;
                    }
                }
            }
            Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
            _ = closing.changed() => {
                let forced = AmqpErrorValue::new(AmqpConnectionError::ConnectionForced, Some("the broker is stopping".to_string()), None);
                let _ = tokio::time::timeout(Duration::from_secs(1), connection.close_with_error(forced)).await;
                break;
            }
            changed = broker_closed.changed() => {
                if changed.is_err() || !*broker_closed.borrow() {
                    let forced = AmqpErrorValue::new(
                        AmqpConnectionError::ConnectionForced,
                        Some("the broker ended this connection's session".to_string()),
                        None,
                    );
                    let _ = tokio::time::timeout(Duration::from_secs(1), connection.close_with_error(forced)).await;
                    break;
                }
            }
        }
    }
    // Sessions end with the connection; their links settle what they can.
    while tokio::time::timeout(Duration::from_secs(5), sessions.join_next()).await.ok().flatten().is_some() {}
    sessions.abort_all();
    let _ = tokio::time::timeout(Duration::from_secs(1), connection.close()).await;
    context.client.close().await;
}
