//! The link listener: accepts links from other brokers of the cluster.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::shared::BrokerShared;

use super::{handshake, session};

/// Most accepted link connections (in their handshake or up) at once. Far
/// above any real number of neighbours; it bounds what a flood of
/// connections to the link port can cost.
pub const LINK_CONNECTIONS_MAX: usize = 1_024;

/// Pause after a failed `accept` (out of file descriptors), so as not to spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Accepts links until the broker shuts down, then waits for them to close.
pub(crate) async fn run(listener: TcpListener, shared: Arc<BrokerShared>, grace: Duration) {
    let mut tasks = JoinSet::new();
    let mut shutdown = shared.shutdown_watch();
    while !shared.is_shutting_down() {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) if tasks.len() < LINK_CONNECTIONS_MAX => {
                    tasks.spawn(serve(stream, peer.to_string(), shared.clone()));
                }
                Ok((_, peer)) => tracing::warn!(%peer, "link refused: {LINK_CONNECTIONS_MAX} link connections open"),
                Err(error) => {
                    tracing::warn!(%error, "link accept failed");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tasks.abort_all();
    }
}

/// Runs the TLS handshake (when links are under TLS) and the link
/// handshake of one accepted connection and, when both succeed, the link.
async fn serve(stream: TcpStream, address: String, shared: Arc<BrokerShared>) {
    let incoming = crate::incoming::Incoming::new(stream, shared.tls.links_in.clone());
    // A plain-text peer on a TLS link port is closed without a word: links
    // are configured by operators, and the dialler logs its TLS error.
    let Some(stream) = incoming.open(&[]).await else { return };
    match handshake::accept(stream.into(), address.clone(), &shared).await {
        Ok(link) => session::run(link, shared).await,
        Err(error) if error.is_configuration_error() => {
            let network = &shared.config.network;
            tracing::warn!(%address, broker = %network.name, cluster = %network.cluster, %error, "link refused");
        }
        Err(error) => tracing::debug!(%address, %error, "link handshake failed"),
    }
}
