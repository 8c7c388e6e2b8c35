//! The MQTT listener: accepts connections under `mqtt.max_connections`,
//! serves each with a [`crate::session`], and stops with the broker.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::config::MqttConfig;
use sift_broker::front_end::{Accepted, BindError, FrontEnd, Listening};
use sift_broker::InProcessConnector;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::journal::{Journal, JournalError, Kind, Recovered};
use crate::retained::RetainedStore;
use crate::sessions::{Registry, SessionDescription, SessionState};
use crate::topic::Filter;

/// Why the MQTT front-end could not start.
#[derive(Debug, thiserror::Error)]
pub enum MqttError {
    /// The address could not be bound.
    #[error("cannot serve MQTT: {0}")]
    Bind(#[from] BindError),
    /// The TLS files could not be read.
    #[error("cannot serve MQTT over TLS: {0}")]
    Tls(#[from] sift_broker::tls::TlsError),
    /// The journal of retained messages and sessions could not be opened.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

sift_broker::door_counters! {
    /// Counters of the MQTT front-end.
    MqttCounters {
        /// Connections accepted.
        connections_accepted,
        /// Connections refused by `mqtt.max_connections`.
        connections_refused,
        /// Connections closed for a protocol error, a bad packet or a limit.
        protocol_errors,
        /// Connections closed because the keep-alive passed in silence.
        keep_alive_timeouts,
        /// PUBLISH packets taken from clients.
        messages_received,
        /// PUBLISH packets refused (bad topic or property).
        messages_refused,
        /// PUBLISH packets sent to clients.
        messages_delivered,
        /// Deliveries not sent: larger than the client's Maximum Packet
        /// Size (MQTT 5 says to discard them).
        messages_oversized,
        /// Sessions resumed by a returning client.
        sessions_resumed,
        /// Sessions taken over by a second connection with the same client id.
        sessions_taken_over,
        /// Parked sessions that expired.
        sessions_expired,
        /// Wills published.
        wills_published,
        /// Retained messages not kept: over `mqtt.max_retained(_bytes)`.
        retained_refused,
        /// Journal writes that failed (the change is kept in memory only).
        journal_errors,
        /// Sessions restored from the journal at start.
        sessions_restored,
    }
}

/// What every connection shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: MqttConfig,
    pub connector: InProcessConnector,
    pub counters: Arc<MqttCounters>,
    pub registry: Registry,
    pub retained: Mutex<RetainedStore>,
    /// Retained messages and persistent sessions on disk (`mqtt.persistence`).
    pub journal: Option<Mutex<Journal>>,
}

impl Shared {
    fn append(&self, kind: Kind, key: &str, value: &[u8]) {
        let Some(journal) = &self.journal else { return };
        let appended = journal.lock().unwrap_or_else(std::sync::PoisonError::into_inner).append(kind, key, value);
        if let Err(error) = appended {
            MqttCounters::bump(&self.counters.journal_errors);
            tracing::warn!("{error}");
        }
    }

    /// Records a session that outlives its connection, or (`None`) its end.
    pub fn journal_session(&self, client_id: &str, description: Option<&SessionDescription>) {
        match description.map(serde_json::to_vec) {
            Some(Ok(json)) => self.append(Kind::Session, client_id, &json),
            Some(Err(error)) => tracing::warn!("MQTT session {client_id:?} not journaled: {error}"),
            None => self.append(Kind::SessionRemoved, client_id, b""),
        }
    }

    /// Records a topic's retained message, or its removal (empty payload).
    pub fn journal_retained(&self, mqtt_topic: &str, message: &sift_core::Message) {
        if message.payload.is_empty() {
            return self.append(Kind::RetainedRemoved, mqtt_topic, b"");
        }
        let mut encoded = bytes::BytesMut::new();
        match sift_proto::encode_message(&mut encoded, message) {
            Ok(()) => self.append(Kind::Retained, mqtt_topic, &encoded),
            Err(error) => tracing::warn!("retained message of {mqtt_topic:?} not journaled: {error}"),
        }
    }
}

/// A running MQTT front-end.
#[derive(Debug)]
pub struct MqttFrontEnd {
    listening: Listening,
    shared: Arc<Shared>,
}

/// With `mqtt.persistence`, the front-end first restores the retained
/// messages and sessions journaled in the broker's `data_dir/mqtt`.
impl FrontEnd for MqttFrontEnd {
    type Config = MqttConfig;
    type Counters = MqttCounters;
    type Error = MqttError;

    fn listen_address(config: &MqttConfig) -> SocketAddr {
        config.listen
    }

    async fn start_on(
        listener: TcpListener,
        config: MqttConfig,
        connector: InProcessConnector,
    ) -> Result<MqttFrontEnd, MqttError> {
        let tls = config.tls.clone().map(sift_broker::tls::ServerTls::load).transpose()?;
        let data_dir = connector.data_dir().to_path_buf();
        let retained = Mutex::new(RetainedStore::new(config.max_retained, config.max_retained_bytes));
        let (journal, recovered) = match config.persistence {
            true => {
                let dir = data_dir.join("mqtt");
                let (journal, recovered) = Journal::open(&dir, config.journal_fsync, config.journal_compact_bytes)?;
                (Some(Mutex::new(journal)), recovered)
            }
            false => (None, Recovered::default()),
        };
        let counters = Arc::new(MqttCounters::default());
        connector.register_door(sift_broker::door::Door::Mqtt, counters.clone());
        let shared = Arc::new(Shared { config, connector, counters, registry: Registry::default(), retained, journal });
        restore(&shared, recovered).await;
        let admitting = shared.clone();
        let (stop, _) = watch::channel(false);
        let door = (sift_broker::door::Door::Mqtt, &shared.connector);
        let listening = Listening::serve(door, listener, tls, stop, move |accepted| admit(accepted, &admitting))?;
        Ok(MqttFrontEnd { listening, shared })
    }

    fn listening(&self) -> &Listening {
        &self.listening
    }

    fn counters(&self) -> &MqttCounters {
        &self.shared.counters
    }

    /// Stops accepting, closes every connection, then every parked session.
    async fn shutdown(self) {
        self.listening.stop().await;
        self.shared.registry.close_all(&self.shared).await;
    }
}

/// Puts back the retained messages and parked sessions of the last run.
/// A session's expiry interval starts again from now.
async fn restore(shared: &Arc<Shared>, recovered: Recovered) {
    {
        let mut retained = shared.retained.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (topic, encoded) in recovered.retained {
            match sift_proto::decode_message(&encoded) {
                Ok(message) => {
                    let _ = retained.set(&topic, message);
                }
                Err(error) => tracing::warn!("journaled retained message of {topic:?} dropped: {error}"),
            }
        }
    }
    for (client_id, json) in recovered.sessions {
        let description: SessionDescription = match serde_json::from_slice(&json) {
            Ok(description) => description,
            Err(error) => {
                tracing::warn!("journaled MQTT session {client_id:?} dropped: {error}");
                continue;
            }
        };
        // The broker's own journal vouches for the user, as a front-end's
        // TLS handshake vouches for a certificate's name: the session signs
        // in again as that user, with the permissions the users file gives
        // it now (a user since removed is refused, and the session dropped).
        let credentials = description.user.as_deref().map(sift_client::Credentials::certified);
        let mut state = match SessionState::open(shared, &client_id, (None, credentials), false).await {
            Ok(state) => state,
            Err(error) => {
                tracing::warn!("MQTT session {client_id:?} not restored: {error}");
                continue;
            }
        };
        for (filter_text, subscription) in description.subscriptions {
            let subscribed = match Filter::parse(&filter_text) {
                Ok(filter) => {
                    state.subscribe(shared, &filter, subscription, true).await.map_err(|error| error.to_string())
                }
                Err(error) => Err(error),
            };
            if let Err(error) = subscribed {
                tracing::warn!("MQTT session {client_id:?}: subscription {filter_text:?} not restored: {error}");
            }
        }
        MqttCounters::bump(&shared.counters.sessions_restored);
        shared.registry.park_restored(shared, state, description.expiry_s);
    }
}

/// Serves an accepted connection; past `mqtt.max_connections` its session
/// refuses it with a CONNACK that says why.
fn admit(accepted: Accepted<'_>, shared: &Arc<Shared>) {
    let refused = accepted.tasks.len() >= shared.config.max_connections as usize;
    let counter = if refused { &shared.counters.connections_refused } else { &shared.counters.connections_accepted };
    MqttCounters::bump(counter);
    let session = crate::session::serve(accepted.stream, shared.clone(), accepted.closing.clone(), refused);
    accepted.tasks.spawn(session);
}
