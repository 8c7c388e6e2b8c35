//! The MQTT listener: accepts connections under `mqtt.max_connections`,
//! serves each with a [`crate::session`], and stops with the broker.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sift_broker::config::MqttConfig;
use sift_broker::front_end::accept_connections;
use sift_broker::InProcessConnector;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::retained::RetainedStore;
use crate::sessions::Registry;

/// How long shutdown waits for sessions to close.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Why the MQTT front-end could not start.
#[derive(Debug, thiserror::Error)]
pub enum MqttError {
    /// The address could not be bound.
    #[error("cannot serve MQTT on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Counters of the MQTT front-end.
#[derive(Debug, Default)]
pub struct MqttCounters {
    /// Connections accepted.
    pub connections_accepted: AtomicU64,
    /// Connections refused by `mqtt.max_connections`.
    pub connections_refused: AtomicU64,
    /// Connections closed for a protocol error, a bad packet or a limit.
    pub protocol_errors: AtomicU64,
    /// Connections closed because the keep-alive passed in silence.
    pub keep_alive_timeouts: AtomicU64,
    /// PUBLISH packets taken from clients.
    pub messages_received: AtomicU64,
    /// PUBLISH packets refused (bad topic or property).
    pub messages_refused: AtomicU64,
    /// PUBLISH packets sent to clients.
    pub messages_delivered: AtomicU64,
    /// Sessions resumed by a returning client.
    pub sessions_resumed: AtomicU64,
    /// Sessions taken over by a second connection with the same client id.
    pub sessions_taken_over: AtomicU64,
    /// Parked sessions that expired.
    pub sessions_expired: AtomicU64,
    /// Wills published.
    pub wills_published: AtomicU64,
    /// Retained messages not kept: over `mqtt.max_retained(_bytes)`.
    pub retained_refused: AtomicU64,
}

impl MqttCounters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Name and value of every counter.
    pub fn entries(&self) -> Vec<(&'static str, u64)> {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        vec![
            ("connections_accepted", load(&self.connections_accepted)),
            ("connections_refused", load(&self.connections_refused)),
            ("protocol_errors", load(&self.protocol_errors)),
            ("keep_alive_timeouts", load(&self.keep_alive_timeouts)),
            ("messages_received", load(&self.messages_received)),
            ("messages_refused", load(&self.messages_refused)),
            ("messages_delivered", load(&self.messages_delivered)),
            ("sessions_resumed", load(&self.sessions_resumed)),
            ("sessions_taken_over", load(&self.sessions_taken_over)),
            ("sessions_expired", load(&self.sessions_expired)),
            ("wills_published", load(&self.wills_published)),
            ("retained_refused", load(&self.retained_refused)),
        ]
    }
}

/// What every connection shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: MqttConfig,
    pub connector: InProcessConnector,
    pub counters: MqttCounters,
    pub registry: Registry,
    pub retained: Mutex<RetainedStore>,
}

/// A running MQTT front-end.
#[derive(Debug)]
pub struct MqttFrontEnd {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    accept_task: tokio::task::JoinHandle<()>,
}

impl MqttFrontEnd {
    /// Binds `config.listen` and serves the broker behind `connector`.
    pub async fn start(config: MqttConfig, connector: InProcessConnector) -> Result<MqttFrontEnd, MqttError> {
        let address = config.listen;
        let listener = TcpListener::bind(address).await.map_err(|source| MqttError::Bind { address, source })?;
        let local_addr = listener.local_addr().map_err(|source| MqttError::Bind { address, source })?;
        let broker_stopping = connector.shutdown_watch();
        let retained = Mutex::new(RetainedStore::new(config.max_retained, config.max_retained_bytes));
        let shared = Arc::new(Shared {
            config,
            connector,
            counters: MqttCounters::default(),
            registry: Registry::default(),
            retained,
        });
        let (stop, stopped) = watch::channel(false);
        let accept_task = tokio::spawn(accept_loop(listener, shared.clone(), stopped, broker_stopping));
        Ok(MqttFrontEnd { local_addr, shared, stop, accept_task })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The front-end's counters.
    pub fn counters(&self) -> &MqttCounters {
        &self.shared.counters
    }

    /// Stops accepting, closes every connection, then every parked session.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        let _ = self.accept_task.await;
        self.shared.registry.close_all().await;
    }
}

/// Accepts and serves connections until the front-end or the broker stops.
async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    stopped: watch::Receiver<bool>,
    broker_stopping: watch::Receiver<bool>,
) {
    accept_connections("MQTT", listener, stopped, broker_stopping, SHUTDOWN_GRACE, |accepted| {
        let refused = accepted.tasks.len() >= shared.config.max_connections as usize;
        let counter =
            if refused { &shared.counters.connections_refused } else { &shared.counters.connections_accepted };
        MqttCounters::bump(counter);
        let _ = accepted.stream.set_nodelay(true);
        let session = crate::session::serve(accepted.stream, shared.clone(), accepted.closing.clone(), refused);
        accepted.tasks.spawn(session);
    })
    .await;
}
