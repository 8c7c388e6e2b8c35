//! The STOMP listener: accepts connections under `stomp.max_connections`
//! and serves each with a [`crate::session`], and stops with the broker.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::StompConfig;
use bytes::BytesMut;
use sift_broker::front_end::{Accepted, BindError, FrontEnd, Incoming, Listening};
use sift_broker::InProcessConnector;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::frame::{Command, Frame};

/// Why the STOMP front-end could not start.
#[derive(Debug, thiserror::Error)]
pub enum StompError {
    /// The address could not be bound.
    #[error("cannot serve STOMP: {0}")]
    Bind(#[from] BindError),
    /// The TLS files could not be read.
    #[error("cannot serve STOMP over TLS: {0}")]
    Tls(#[from] sift_broker::tls::TlsError),
}

sift_broker::door_counters! {
    /// Counters of the STOMP front-end.
    StompCounters {
        /// Connections accepted.
        connections_accepted,
        /// Connections refused by `stomp.max_connections`.
        connections_refused,
        /// ERROR frames sent (each closes its connection).
        errors_sent,
        /// SEND frames taken.
        messages_sent,
        /// MESSAGE frames written.
        messages_delivered,
    }
}

/// What every session shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: StompConfig,
    pub connector: InProcessConnector,
    pub counters: Arc<StompCounters>,
}

/// A running STOMP front-end.
#[derive(Debug)]
pub struct StompFrontEnd {
    listening: Listening,
    shared: Arc<Shared>,
}

impl FrontEnd for StompFrontEnd {
    type Config = StompConfig;
    type Counters = StompCounters;
    type Error = StompError;

    fn listen_address(config: &StompConfig) -> SocketAddr {
        config.listen
    }

    async fn start_on(
        listener: TcpListener,
        config: StompConfig,
        connector: InProcessConnector,
    ) -> Result<StompFrontEnd, StompError> {
        let counters = Arc::new(StompCounters::default());
        connector.register_door(sift_broker::door::Door::Stomp, counters.clone());
        let tls = config.tls.clone().map(sift_broker::tls::ServerTls::load).transpose()?;
        let shared = Arc::new(Shared { config, connector, counters });
        let admitting = shared.clone();
        let (stop, _) = watch::channel(false);
        let door = (sift_broker::door::Door::Stomp, &shared.connector);
        let listening = Listening::serve(door, listener, tls, stop, move |accepted| admit(accepted, &admitting))?;
        Ok(StompFrontEnd { listening, shared })
    }

    fn listening(&self) -> &Listening {
        &self.listening
    }

    fn counters(&self) -> &StompCounters {
        &self.shared.counters
    }

    /// Stops accepting and closes every session.
    async fn shutdown(self) {
        self.listening.stop().await;
    }
}

/// Serves an accepted connection, or refuses it when `stomp.max_connections`
/// are open.
fn admit(accepted: Accepted<'_>, shared: &Arc<Shared>) {
    if accepted.tasks.len() >= shared.config.max_connections as usize {
        StompCounters::bump(&shared.counters.connections_refused);
        accepted.tasks.spawn(refuse(accepted.stream, shared.config.max_connections));
        return;
    }
    StompCounters::bump(&shared.counters.connections_accepted);
    let session = crate::session::serve(accepted.stream, accepted.peer, shared.clone(), accepted.closing.clone());
    accepted.tasks.spawn(session);
}

/// What a client that speaks plain text to a TLS port is told.
pub(crate) const PLAIN_TEXT_REFUSAL: &[u8] =
    b"ERROR\nmessage:this port speaks TLS\ncontent-type:text/plain\n\nconnect with TLS (stomp+ssl)\0";

async fn refuse(incoming: Incoming, limit: u32) {
    let Some(mut stream) = incoming.open(PLAIN_TEXT_REFUSAL).await else { return };
    let frame =
        Frame::new(Command::Error).header("message", "too many connections").header("content-type", "text/plain");
    let frame =
        Frame { body: format!("the broker serves stomp.max_connections = {limit} STOMP connections").into(), ..frame };
    let mut bytes = BytesMut::new();
    frame.encode(&mut bytes);
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&bytes)).await;
    let _ = stream.shutdown().await;
}
