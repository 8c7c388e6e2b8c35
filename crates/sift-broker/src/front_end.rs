//! The accept loop that the protocol front-ends (HTTP, STOMP) share: it
//! accepts connections until the front-end or the broker stops, lets the
//! front-end admit or refuse each, and at the end tells the connections
//! to close and waits for them, boundedly.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Pause after a failed accept (out of file descriptors), rather than spin.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(50);

/// What a front-end's admit function is given with each accepted connection.
pub struct Accepted<'a> {
    /// The connection.
    pub stream: TcpStream,
    /// Where it came from.
    pub peer: SocketAddr,
    /// Turns true when the front-end stops: each connection's task watches
    /// it to close in good order.
    pub closing: &'a watch::Receiver<bool>,
    /// The connection tasks; `len()` is how many are open.
    pub tasks: &'a mut JoinSet<()>,
}

/// Accepts on `listener` until `stopped` or `broker_stopping` changes,
/// handing each connection to `admit` (which spawns its task into
/// `tasks`, or a refusal); then signals `closing` and waits up to `grace`
/// for the tasks, aborting those left. `what` names the front-end in logs.
pub async fn accept_connections(
    what: &str,
    listener: TcpListener,
    mut stopped: watch::Receiver<bool>,
    mut broker_stopping: watch::Receiver<bool>,
    grace: Duration,
    mut admit: impl FnMut(Accepted<'_>),
) {
    let mut tasks = JoinSet::new();
    let (closing, closing_watch) = watch::channel(false);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => admit(Accepted { stream, peer, closing: &closing_watch, tasks: &mut tasks }),
                Err(error) => {
                    tracing::warn!(%error, "{what} accept failed");
                    tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            _ = stopped.changed() => break,
            _ = broker_stopping.changed() => break,
        }
    }
    drop(listener);
    closing.send_replace(true);
    let drained = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} });
    if drained.await.is_err() {
        tasks.abort_all();
    }
}
