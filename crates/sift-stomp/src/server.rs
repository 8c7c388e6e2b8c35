//! The STOMP listener: accepts connections under `stomp.max_connections`
//! and serves each with a [`crate::session`], and stops with the broker.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use sift_broker::config::StompConfig;
use sift_broker::front_end::accept_connections;
use sift_broker::InProcessConnector;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::frame::{Command, Frame};

/// How long shutdown waits for sessions to close.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Why the STOMP front-end could not start.
#[derive(Debug, thiserror::Error)]
pub enum StompError {
    /// The address could not be bound.
    #[error("cannot serve STOMP on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Counters of the STOMP front-end.
#[derive(Debug, Default)]
pub struct StompCounters {
    /// Connections accepted.
    pub connections_accepted: AtomicU64,
    /// Connections refused by `stomp.max_connections`.
    pub connections_refused: AtomicU64,
    /// ERROR frames sent (each closes its connection).
    pub errors_sent: AtomicU64,
    /// SEND frames taken.
    pub messages_sent: AtomicU64,
    /// MESSAGE frames written.
    pub messages_delivered: AtomicU64,
}

impl StompCounters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Name and value of every counter.
    pub fn entries(&self) -> Vec<(&'static str, u64)> {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        vec![
            ("connections_accepted", load(&self.connections_accepted)),
            ("connections_refused", load(&self.connections_refused)),
            ("errors_sent", load(&self.errors_sent)),
            ("messages_sent", load(&self.messages_sent)),
            ("messages_delivered", load(&self.messages_delivered)),
        ]
    }
}

/// What every session shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: StompConfig,
    pub connector: InProcessConnector,
    pub counters: StompCounters,
}

/// A running STOMP front-end.
#[derive(Debug)]
pub struct StompFrontEnd {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    accept_task: tokio::task::JoinHandle<()>,
}

impl StompFrontEnd {
    /// Binds `config.listen` and serves the broker behind `connector`.
    pub async fn start(config: StompConfig, connector: InProcessConnector) -> Result<StompFrontEnd, StompError> {
        let address = config.listen;
        let listener = TcpListener::bind(address).await.map_err(|source| StompError::Bind { address, source })?;
        Self::start_on(listener, config, connector).await
    }

    /// Serves the broker behind `connector` on a listener already bound
    /// (to `config.listen`): a broker binds every door before it opens
    /// its data directory.
    pub async fn start_on(
        listener: TcpListener,
        config: StompConfig,
        connector: InProcessConnector,
    ) -> Result<StompFrontEnd, StompError> {
        let address = config.listen;
        let local_addr = listener.local_addr().map_err(|source| StompError::Bind { address, source })?;
        let broker_stopping = connector.shutdown_watch();
        let shared = Arc::new(Shared { config, connector, counters: StompCounters::default() });
        let (stop, stopped) = watch::channel(false);
        let accept_task = tokio::spawn(accept_loop(listener, shared.clone(), stopped, broker_stopping));
        Ok(StompFrontEnd { local_addr, shared, stop, accept_task })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The front-end's counters.
    pub fn counters(&self) -> &StompCounters {
        &self.shared.counters
    }

    /// Stops accepting and closes every session.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        let _ = self.accept_task.await;
    }
}

/// Accepts and serves connections until the front-end or the broker stops.
async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    stopped: watch::Receiver<bool>,
    broker_stopping: watch::Receiver<bool>,
) {
    accept_connections("STOMP", listener, stopped, broker_stopping, SHUTDOWN_GRACE, |accepted| {
        if accepted.tasks.len() >= shared.config.max_connections as usize {
            StompCounters::bump(&shared.counters.connections_refused);
            accepted.tasks.spawn(refuse(accepted.stream, shared.config.max_connections));
            return;
        }
        StompCounters::bump(&shared.counters.connections_accepted);
        let _ = accepted.stream.set_nodelay(true);
        let session = crate::session::serve(accepted.stream, accepted.peer, shared.clone(), accepted.closing.clone());
        accepted.tasks.spawn(session);
    })
    .await;
}

async fn refuse(mut stream: TcpStream, limit: u32) {
    let frame =
        Frame::new(Command::Error).header("message", "too many connections").header("content-type", "text/plain");
    let frame =
        Frame { body: format!("the broker serves stomp.max_connections = {limit} STOMP connections").into(), ..frame };
    let mut bytes = BytesMut::new();
    frame.encode(&mut bytes);
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&bytes)).await;
    let _ = stream.shutdown().await;
}
