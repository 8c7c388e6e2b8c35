//! What every protocol front-end (HTTP, STOMP, MQTT) shares: the
//! [`FrontEnd`] life (bind, start, address, counters, stop) written once;
//! the accept loop, which accepts connections until the front-end or the
//! broker stops, lets the front-end admit or refuse each (as an
//! [`Incoming`] connection whose TLS handshake, when the door has TLS, runs
//! in the connection's own task), and at the end
//! tells the connections to close and waits for them, boundedly; and
//! [`Listening`], the running listener a front-end holds, with its bound
//! address and the way to stop it. A front-end writes only what differs:
//! how it starts on a bound listener, how it admits a connection and what
//! it closes when it stops.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sift_tls::ServerTls;

pub use crate::incoming::Incoming;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// A protocol front-end as the broker's assembly starts, reads and stops
/// it. Each front-end crate implements the parts that differ; binding and
/// the bound address are written here once.
pub trait FrontEnd: Sized + Send {
    /// Its section of the configuration file (`[http]`, `[stomp]`...).
    type Config: Send;
    /// Its counters, which it registers with the broker under its door.
    type Counters: crate::door::DoorCounters;
    /// Why it could not start.
    type Error: From<BindError> + From<sift_tls::TlsError> + Send;

    /// Where `config` says to listen.
    fn listen_address(config: &Self::Config) -> SocketAddr;

    /// Serves the broker behind `connector` on a listener already bound to
    /// [`FrontEnd::listen_address`]: a broker binds every door before it
    /// opens its data directory.
    fn start_on(
        listener: TcpListener,
        config: Self::Config,
        connector: crate::InProcessConnector,
    ) -> impl Future<Output = Result<Self, Self::Error>> + Send;

    /// Its running listener.
    fn listening(&self) -> &Listening;

    /// Its counters.
    fn counters(&self) -> &Self::Counters;

    /// Stops accepting, closes its sessions and waits for them (boundedly).
    fn shutdown(self) -> impl Future<Output = ()> + Send;

    /// Binds `config`'s address and serves the broker behind `connector`.
    fn start(
        config: Self::Config,
        connector: crate::InProcessConnector,
    ) -> impl Future<Output = Result<Self, Self::Error>> + Send {
        async move {
            let address = Self::listen_address(&config);
            let listener = TcpListener::bind(address).await.map_err(|source| BindError { address, source })?;
            Self::start_on(listener, config, connector).await
        }
    }

    /// The address actually bound (useful with port 0).
    fn local_addr(&self) -> SocketAddr {
        self.listening().local_addr()
    }
}

/// A front-end's address could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {address}: {source}")]
pub struct BindError {
    /// The address.
    pub address: SocketAddr,
    /// Why.
    pub source: std::io::Error,
}

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
    tls: Option<Arc<ServerTls>>,
    stop: watch::Sender<bool>,
    accept_task: JoinHandle<()>,
}

impl Listening {
    /// Serves `listener` for `door`, handing each connection to `admit`,
    /// until `stop` is sent or the broker behind `connector` stops. `stop`
    /// is made by the caller so that tasks of its own (WebSockets, reapers)
    /// can watch it too. With `tls`, every connection must speak TLS, and
    /// the TLS counters join the door's in the broker's reports.
    pub fn serve<F>(
        (door, connector): (crate::door::Door, &crate::InProcessConnector),
        listener: TcpListener,
        tls: Option<Arc<ServerTls>>,
        stop: watch::Sender<bool>,
        admit: F,
    ) -> Result<Listening, BindError>
    where
        F: FnMut(Accepted<'_>) + Send + 'static,
    {
        let local_addr = listener.local_addr().map_err(|source| {
            let address = SocketAddr::from(([0, 0, 0, 0], 0));
            BindError { address, source }
        })?;
        if let Some(tls) = &tls {
            connector.register_door_tls(door, tls.clone());
        }
        let stopping = (stop.subscribe(), connector.shutdown_watch());
        let accept_task =
            tokio::spawn(accept_connections(door.name(), listener, tls.clone(), stopping, SHUTDOWN_GRACE, admit));
        Ok(Listening { local_addr, tls, stop, accept_task })
    }

    /// The door's TLS (its counters, and its reload on SIGHUP), if it has
    /// TLS.
    pub fn tls(&self) -> Option<&Arc<ServerTls>> {
        self.tls.as_ref()
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
    /// The connection, before its TLS handshake.
    pub stream: Incoming,
    /// Where it came from.
    pub peer: SocketAddr,
    /// Turns true when the front-end stops: each connection's task watches
    /// it to close in good order.
    pub closing: &'a watch::Receiver<bool>,
    /// The connection tasks; `len()` is how many are open.
    pub tasks: &'a mut JoinSet<()>,
}

/// Accepts on `listener` until either of `stopping` (the front-end's stop
/// and the broker's) changes, handing each connection (to be opened with
/// `tls`, if given) to `admit`, which spawns its task into `tasks`, or a
/// refusal; then signals `closing` and waits up to `grace` for the tasks,
/// aborting those left. `what` names the front-end in logs.
pub async fn accept_connections(
    what: &str,
    listener: TcpListener,
    tls: Option<Arc<ServerTls>>,
    stopping: (watch::Receiver<bool>, watch::Receiver<bool>),
    grace: Duration,
    mut admit: impl FnMut(Accepted<'_>),
) {
    let (mut stopped, mut broker_stopping) = stopping;
    let mut tasks = JoinSet::new();
    let (closing, closing_watch) = watch::channel(false);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let stream = Incoming::new(stream, tls.clone());
                    admit(Accepted { stream, peer, closing: &closing_watch, tasks: &mut tasks });
                }
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
