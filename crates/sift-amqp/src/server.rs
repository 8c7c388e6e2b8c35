//! The AMQP listener: accepts connections under `amqp.max_connections`,
//! serves each with a [`crate::connection`], and stops with the broker.

use std::net::SocketAddr;
use std::sync::Arc;

use sift_broker::front_end::{Accepted, BindError, FrontEnd, Listening};
use sift_broker::InProcessConnector;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::AmqpConfig;

/// Why the AMQP front-end could not start.
#[derive(Debug, thiserror::Error)]
pub enum AmqpError {
    /// The address could not be bound.
    #[error("cannot serve AMQP: {0}")]
    Bind(#[from] BindError),
    /// The TLS files could not be read.
    #[error("cannot serve AMQP over TLS: {0}")]
    Tls(#[from] sift_broker::tls::TlsError),
}

sift_broker::door_counters! {
    /// Counters of the AMQP front-end.
    AmqpCounters {
        /// Connections accepted.
        connections_accepted,
        /// Connections refused by `amqp.max_connections`.
        connections_refused,
        /// Connections that ended before their `open`: a bad header or SASL
        /// frame, a timeout, or a refused sign-in.
        connections_failed,
        /// SASL sign-ins the broker refused.
        sign_in_refusals,
        /// Links attached (producers and consumers).
        links_attached,
        /// Links refused: an address, selector or permission the broker
        /// refused, or a feature this front-end does not serve.
        links_refused,
        /// Messages taken from producers and published.
        messages_received,
        /// Messages from producers the broker refused (rejected).
        messages_refused,
        /// Messages sent to consumers.
        messages_delivered,
    }
}

/// What every connection shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: AmqpConfig,
    pub connector: InProcessConnector,
    pub counters: Arc<AmqpCounters>,
}

/// A running AMQP front-end.
#[derive(Debug)]
pub struct AmqpFrontEnd {
    listening: Listening,
    shared: Arc<Shared>,
}

impl FrontEnd for AmqpFrontEnd {
    type Config = AmqpConfig;
    type Counters = AmqpCounters;
    type Error = AmqpError;

    fn listen_address(config: &AmqpConfig) -> SocketAddr {
        config.listen
    }

    async fn start_on(
        listener: TcpListener,
        config: AmqpConfig,
        connector: InProcessConnector,
    ) -> Result<AmqpFrontEnd, AmqpError> {
        let counters = Arc::new(AmqpCounters::default());
        connector.register_door(sift_broker::door::Door::Amqp, counters.clone());
        let tls = config.tls.clone().map(sift_broker::tls::ServerTls::load).transpose()?;
        let shared = Arc::new(Shared { config, connector, counters });
        let admitting = shared.clone();
        let (stop, _) = watch::channel(false);
        let door = (sift_broker::door::Door::Amqp, &shared.connector);
        let listening = Listening::serve(door, listener, tls, stop, move |accepted| admit(accepted, &admitting))?;
        Ok(AmqpFrontEnd { listening, shared })
    }

    fn listening(&self) -> &Listening {
        &self.listening
    }

    fn counters(&self) -> &AmqpCounters {
        &self.shared.counters
    }

    /// Stops accepting and closes every connection.
    async fn shutdown(self) {
        self.listening.stop().await;
    }
}

/// What a client that speaks plain AMQP to a TLS port is told: the header
/// of AMQP over TLS, which the specification has a server answer with the
/// protocol it speaks before it closes.
pub(crate) const PLAIN_TEXT_REFUSAL: &[u8] = b"AMQP\x02\x01\x00\x00";

/// Serves an accepted connection, or closes it when
/// `amqp.max_connections` are open (after the header that says which
/// protocol this is, so that the client reports a refusal, not garbage).
fn admit(accepted: Accepted<'_>, shared: &Arc<Shared>) {
    if accepted.tasks.len() >= shared.config.max_connections as usize {
        AmqpCounters::bump(&shared.counters.connections_refused);
        accepted.tasks.spawn(async move {
            if let Some(mut stream) = accepted.stream.open(PLAIN_TEXT_REFUSAL).await {
                let _ = stream.write_all(&crate::sasl::SASL_HEADER).await;
                let _ = stream.flush().await;
                let _ = stream.shutdown().await;
            }
        });
        return;
    }
    AmqpCounters::bump(&shared.counters.connections_accepted);
    let connection = crate::connection::serve(accepted.stream, accepted.peer, shared.clone(), accepted.closing.clone());
    accepted.tasks.spawn(connection);
}
