//! What every protocol front-end (HTTP, STOMP, MQTT) shares: the accept
//! loop, which accepts connections until the front-end or the broker
//! stops, lets the front-end admit or refuse each, and at the end tells
//! the connections to close and waits for them, boundedly; and
//! [`Listening`], the running listener a front-end holds, with its bound
//! address and the way to stop it. A front-end writes only what differs:
//! how it admits a connection and what it closes when it stops.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// Pause after a failed accept (out of file descriptors), rather than spin.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(50);

/// How long a stopping front-end waits for its connections to close
/// before it aborts them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A front-end's listener, served by [`accept_connections`] in a task of
/// its own until [`Listening::stop`] or the broker's shutdown.
#[derive(Debug)]
pub struct Listening {
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    accept_task: JoinHandle<()>,
}

impl Listening {
    /// Serves `listener`, handing each connection to `admit`, until `stop`
    /// is sent or the broker behind `broker_stopping` stops. `stop` is made
    /// by the caller so that tasks of its own (WebSockets, reapers) can
    /// watch it too; `what` names the front-end in logs.
    pub fn serve<F>(
        what: &'static str,
        listener: TcpListener,
        stop: watch::Sender<bool>,
        broker_stopping: watch::Receiver<bool>,
        admit: F,
    ) -> std::io::Result<Listening>
    where
        F: FnMut(Accepted<'_>) + Send + 'static,
    {
        let local_addr = listener.local_addr()?;
        let stopped = stop.subscribe();
        let accept_task =
            tokio::spawn(accept_connections(what, listener, stopped, broker_stopping, SHUTDOWN_GRACE, admit));
        Ok(Listening { local_addr, stop, accept_task })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting and tells every connection to close; [`Listening::join`]
    /// waits for them.
    pub fn stop_accepting(&self) {
        self.stop.send_replace(true);
    }

    /// Waits until the accept loop ended and its connections closed (or
    /// were aborted after [`SHUTDOWN_GRACE`]).
    pub async fn join(self) {
        let _ = self.accept_task.await;
    }

    /// [`Listening::stop_accepting`], then [`Listening::join`].
    pub async fn stop(self) {
        self.stop_accepting();
        self.join().await;
    }
}

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
