//! The listener: accepts connections, enforces `max_connections`, and shuts
//! everything down in order when asked.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use sift_proto::{ErrorCode, Frame};
use tokio::io::{AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::Config;
use crate::conn::{error_frame, ConnShared};
use crate::connection::{serve, serve_in_process};
use crate::door::Origin;
use crate::door_writer::DoorWriter;
use crate::link::{AdvertisedInterest, LinkFailure, LinkInfo, RemoteInterest};
use crate::local::{LocalLink, LocalRequest};
use crate::shared::BrokerShared;
use crate::stats::{bump, StatsSnapshot};
use crate::store::Storage;

/// How long shutdown waits for connections to flush and close.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The listen address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The link listen address could not be bound.
    #[error("cannot listen for broker links on {address}: {source}")]
    BindLinks {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// Another process holds the data directory.
    #[error(transparent)]
    DataDirInUse(crate::store::LockError),
    /// A certificate or key file of `[tls]` (`--tls-cert`...) is missing
    /// or wrong.
    #[error("cannot set up TLS for {0}")]
    Tls(#[from] crate::broker_tls::BrokerTlsError),
    /// The users file (`auth.users_file`) could not be read.
    #[error("cannot read the users file {}: {source}", path.display())]
    ReadUsers {
        /// The file.
        path: Box<std::path::Path>,
        /// Why.
        source: std::io::Error,
    },
    /// The users file is wrong; the error names the user, field and line.
    #[error("{} : {source}", path.display())]
    Users {
        /// The file.
        path: Box<std::path::Path>,
        /// What is wrong.
        source: Box<sift_auth::UsersError>,
    },
    /// The streams or durable subscriptions could not be opened.
    #[error("cannot open storage in {}: {source}", data_dir.display())]
    Storage {
        /// The data directory.
        data_dir: Box<std::path::Path>,
        /// Why.
        source: Box<crate::store::StorageError>,
    },
}

/// In-process connections waiting for the accept loop to admit them.
pub const IN_PROCESS_BACKLOG: usize = 1024;

/// An in-process connection on its way to the accept loop: a pipe that
/// carries the native protocol, or a local session's frame channels.
enum InProcess {
    Pipe(DuplexStream),
    Local(LocalRequest),
}

/// The accept loop's end of the in-process connections' queue.
type InProcessQueue = tokio::sync::mpsc::Receiver<InProcess>;

/// Why an in-process connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum InProcessError {
    /// The broker is shutting down or has stopped.
    #[error("the broker is shutting down")]
    ShuttingDown,
    /// More than `IN_PROCESS_BACKLOG` connections wait for admission.
    #[error("{IN_PROCESS_BACKLOG} in-process connections already wait to be admitted")]
    Backlog,
}

/// Opens connections to one broker inside the process; cheap to clone. It
/// keeps the broker's shared state alive, not the broker: once the broker
/// shuts down, [`InProcessConnector::connect`] fails.
#[derive(Debug, Clone)]
pub struct InProcessConnector {
    shared: Arc<BrokerShared>,
    /// In-process connections on their way to the accept loop.
    in_process: tokio::sync::mpsc::Sender<InProcess>,
}

impl InProcessConnector {
    /// True when a session must sign in before it may do anything (the
    /// broker has users and no anonymous access), so that a front-end can
    /// refuse a connection without credentials at once, in its own words.
    pub fn requires_sign_in(&self) -> bool {
        matches!(self.shared.access.initial(), crate::access::Standing::MustSignIn)
    }

    /// True when the broker has no users file: everyone may do everything.
    pub fn is_open(&self) -> bool {
        self.shared.access.is_open()
    }

    /// Checks credentials as an `AUTH` would be checked, for a front-end
    /// that hands an existing session to a reconnecting client (an MQTT
    /// session resumed): the user name on success. A refusal is slowed and
    /// counted like a refused `AUTH`.
    pub async fn check_credentials(&self, auth: sift_proto::Auth) -> Result<String, crate::access::SignInError> {
        let standing = self.shared.check_sign_in(auth).await?;
        Ok(standing.user().unwrap_or_default().to_string())
    }

    /// Opens a connection to this broker inside the process: the returned
    /// end of an in-memory pipe speaks the native protocol (`HELLO` first),
    /// and the broker serves the other end exactly as it serves a socket,
    /// admitted under `max_connections` by the same accept loop. Front-ends
    /// that translate another protocol (HTTP, WebSocket) use it, so that
    /// their messages are matched, queued and acknowledged by the same
    /// session code as native clients'.
    pub fn connect_in_process(&self) -> Result<DuplexStream, InProcessError> {
        if self.shared.is_shutting_down() {
            return Err(InProcessError::ShuttingDown);
        }
        let (client_end, broker_end) = tokio::io::duplex(self.shared.config.delivery.in_process_pipe_bytes);
        self.queue_in_process(InProcess::Pipe(broker_end))?;
        Ok(client_end)
    }

    /// Opens a local session (`crate::local`): a protocol front-end's
    /// session that exchanges frame values with the session machine instead
    /// of bytes through a pipe. Admitted by the accept loop under
    /// `max_connections`, as any connection.
    pub fn connect_local(&self, origin: Origin) -> Result<LocalLink, InProcessError> {
        self.connect_local_writing(origin, None)
    }

    /// [`InProcessConnector::connect_local`] for a front-end that writes
    /// its deliveries itself: `door_writer` encodes each one in the
    /// door's protocol as the broker drains the session's outbox
    /// (`crate::door_writer`).
    pub fn connect_local_writing(
        &self,
        origin: Origin,
        door_writer: Option<Arc<dyn DoorWriter>>,
    ) -> Result<LocalLink, InProcessError> {
        if self.shared.is_shutting_down() {
            return Err(InProcessError::ShuttingDown);
        }
        let batches = self.shared.config.delivery.local_batches.max(1);
        let (to_broker, requests) = tokio::sync::mpsc::channel(batches);
        let (replies, from_broker) = tokio::sync::mpsc::channel(batches);
        self.queue_in_process(InProcess::Local(LocalRequest { requests, replies, origin, door_writer }))?;
        Ok((to_broker, from_broker))
    }

    fn queue_in_process(&self, connection: InProcess) -> Result<(), InProcessError> {
        self.in_process.try_send(connection).map_err(|error| match error {
            tokio::sync::mpsc::error::TrySendError::Full(_) => InProcessError::Backlog,
            tokio::sync::mpsc::error::TrySendError::Closed(_) => InProcessError::ShuttingDown,
        })
    }

    /// A new connection's client end, for an embedding application; see
    /// [`InProcessConnector::connect_in_process`].
    pub fn connect(&self) -> Result<DuplexStream, InProcessError> {
        self.connect_in_process()
    }

    /// A function that opens a new local session from `origin` each time it
    /// is called ([`InProcessConnector::connect_local`]), with refusals as I/O
    /// errors: the form a client that reconnects takes
    /// (`sift_client::Client::connect_local`).
    pub fn local_opener(&self, origin: Origin) -> Arc<dyn Fn() -> std::io::Result<LocalLink> + Send + Sync> {
        let connector = self.clone();
        Arc::new(move || connector.connect_local(origin).map_err(std::io::Error::other))
    }

    /// [`InProcessConnector::local_opener`] for sessions whose deliveries
    /// `door_writer` writes ([`InProcessConnector::connect_local_writing`]).
    pub fn local_opener_writing(
        &self,
        origin: Origin,
        door_writer: Arc<dyn DoorWriter>,
    ) -> Arc<dyn Fn() -> std::io::Result<LocalLink> + Send + Sync> {
        let connector = self.clone();
        Arc::new(move || {
            connector.connect_local_writing(origin, Some(door_writer.clone())).map_err(std::io::Error::other)
        })
    }

    /// Registers a front-end's counters: the broker's `stats` report
    /// carries them under `doors`, by door name.
    pub fn register_door(&self, door: crate::door::Door, counters: Arc<dyn crate::door::DoorCounters>) {
        self.shared.doors.register(door, counters);
    }

    /// Registers `door`'s TLS, whose counters join the door's in reports.
    pub fn register_door_tls(&self, door: crate::door::Door, tls: Arc<sift_tls::ServerTls>) {
        self.shared.doors.register_tls(door.name(), tls);
    }

    /// A receiver that turns true when the broker starts shutting down.
    pub fn shutdown_watch(&self) -> watch::Receiver<bool> {
        self.shared.shutdown_watch()
    }

    /// The broker's data directory, where a front-end keeps what it
    /// journals (MQTT's retained messages and sessions).
    pub fn data_dir(&self) -> &std::path::Path {
        &self.shared.config.data_dir
    }

    /// A function that opens a new connection each time it is called, with
    /// refusals as I/O errors: the form a client that reconnects takes
    /// (`sift_client::Client::connect_in_process`).
    pub fn opener(&self) -> Arc<dyn Fn() -> std::io::Result<DuplexStream> + Send + Sync> {
        let connector = self.clone();
        Arc::new(move || connector.connect().map_err(std::io::Error::other))
    }
}

/// A link dialled at run time ([`RunningBroker::dial`]); dropping it stops
/// dialling (a link that is up stays until it fails or the peer closes it).
#[derive(Debug)]
pub struct DialHandle(tokio::task::JoinHandle<()>);

impl Drop for DialHandle {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A running broker. Dropping it does not stop it; call [`RunningBroker::shutdown`].
#[derive(Debug)]
pub struct RunningBroker {
    local_addr: SocketAddr,
    link_addr: Option<SocketAddr>,
    shared: Arc<BrokerShared>,
    /// In-process connections on their way to the accept loop.
    in_process: tokio::sync::mpsc::Sender<InProcess>,
    accept_task: tokio::task::JoinHandle<()>,
    link_task: tokio::task::JoinHandle<()>,
}

/// The users file of `auth`, read and checked (an open broker without
/// one), and its grants for linked brokers.
fn load_access(
    auth: &crate::config::AuthConfig,
) -> Result<(crate::access::Access, Vec<sift_auth::BrokerGrant>), BrokerError> {
    let Some(path) = &auth.users_file else { return Ok((crate::access::Access::open(auth.clone()), Vec::new())) };
    let file = read_users(path)?;
    let grants = file.brokers.clone();
    Ok((crate::access::Access::with_users(auth.clone(), file), grants))
}

/// The users file at `path`, read and checked.
fn read_users(path: &std::path::Path) -> Result<sift_auth::UsersFile, BrokerError> {
    let text = std::fs::read_to_string(path).map_err(|source| BrokerError::ReadUsers { path: path.into(), source })?;
    sift_auth::UsersFile::parse(&text)
        .map_err(|source| BrokerError::Users { path: path.into(), source: Box::new(source) })
}

impl RunningBroker {
    /// Binds the listen address and starts serving.
    pub async fn start(config: Config) -> Result<RunningBroker, BrokerError> {
        RunningBroker::start_with_clock(config, sift_core::Clock::system()).await
    }

    /// As [`RunningBroker::start`], with message stamps and expiry read from
    /// `clock`: tests of time-to-live move a manual clock instead of waiting.
    pub async fn start_with_clock(config: Config, clock: sift_core::Clock) -> Result<RunningBroker, BrokerError> {
        config.validate()?;
        let (access, broker_grants) = load_access(&config.auth)?;
        let tls = crate::broker_tls::BrokerTls::load(&config)?;
        let address = config.listen;
        let listener = TcpListener::bind(address).await.map_err(|source| BrokerError::Bind { address, source })?;
        let local_addr = listener.local_addr().map_err(|source| BrokerError::Bind { address, source })?;
        let (link_listener, link_addr) = match config.network.link_listen {
            Some(address) => {
                let (bound, local) = bind_links(address).await?;
                (Some(bound), Some(local))
            }
            None => (None, None),
        };
        // Every listener is bound before this line: a broker that cannot
        // start leaves the data directory as it found it.
        let storage =
            Storage::open(&config.data_dir, &config.storage, &config.streams).map_err(|source| match source {
                crate::store::StorageError::Lock(error @ crate::store::LockError::InUse { .. }) => {
                    BrokerError::DataDirInUse(error)
                }
                source => BrokerError::Storage { data_dir: config.data_dir.clone().into(), source: Box::new(source) },
            })?;
        let data_ids = crate::replication::identity::DataIds::open(&config.data_dir).map_err(|error| {
            let source = Box::new(crate::store::StorageError::Invalid(format!("the data ids: {error}")));
            BrokerError::Storage { data_dir: config.data_dir.clone().into(), source }
        })?;
        let shared = BrokerShared::new(config, storage, clock, access, tls, data_ids);
        shared.links.set_broker_grants(broker_grants);
        for (name, door_tls) in [("native", &shared.tls.native), ("links", &shared.tls.links_in)] {
            if let Some(door_tls) = door_tls {
                shared.doors.register_tls(name, door_tls.clone());
            }
        }
        let (in_process, in_process_queue) = tokio::sync::mpsc::channel(IN_PROCESS_BACKLOG);
        for stream in shared.storage.streams() {
            shared.links.stream_interest(&stream, true, &shared.stats);
        }
        for consumer in shared.storage.durables() {
            shared.links.durable_interest(&consumer, true, &shared.stats);
        }
        tokio::spawn(crate::store::sync_positions(shared.storage.clone(), shared.shutdown_watch()));
        tokio::spawn(crate::scheduler::run(shared.clone()));
        // The links first: a replica with no files asks the other members
        // whether this broker lost its data directory before it starts.
        let link_task = tokio::spawn(crate::link::run(link_listener, shared.clone(), SHUTDOWN_GRACE));
        start_replicas(&shared).await?;
        let accept_task = tokio::spawn(accept_loop(listener, in_process_queue, shared.clone()));
        Ok(RunningBroker { local_addr, link_addr, shared, in_process, accept_task, link_task })
    }

    /// Opens in-process connections to this broker (front-ends use it).
    pub fn connector(&self) -> InProcessConnector {
        InProcessConnector { shared: self.shared.clone(), in_process: self.in_process.clone() }
    }

    /// The configuration the broker runs with.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The link listener's address actually bound, when links are accepted.
    pub fn link_addr(&self) -> Option<SocketAddr> {
        self.link_addr
    }

    /// Keeps a link to `target` up (dialling again after failures, as a
    /// configured link) until the returned handle is dropped: for peers
    /// learnt at run time, such as gateways from a registry.
    pub fn dial(&self, target: crate::config::LinkTarget) -> DialHandle {
        DialHandle(tokio::spawn(crate::link::dial_target(target, self.shared.clone())))
    }

    /// Reads the users file again (SIGHUP) and puts it in force for every
    /// sign-in from now on; signed-in sessions keep their standing. Returns
    /// how many users it names, or `None` on a broker started without a
    /// users file (which stays open). On an error the previous users stay.
    pub fn reload_users(&self) -> Result<Option<usize>, BrokerError> {
        let Some(path) = &self.shared.config.auth.users_file else { return Ok(None) };
        let file = read_users(path)?;
        let count = file.users.len();
        self.shared.links.set_broker_grants(file.brokers.clone());
        match self.shared.access.replace(file) {
            Ok(()) => Ok(Some(count)),
            Err(crate::access::StartedOpen) => Ok(None),
        }
    }

    /// The native door's and the links' TLS (their counters).
    pub fn tls(&self) -> &crate::broker_tls::BrokerTls {
        &self.shared.tls
    }

    /// Reads the native door's and the links' certificate files again
    /// (SIGHUP); returns what failed to load, which keeps its previous
    /// certificates.
    pub fn reload_tls(&self) -> Vec<crate::broker_tls::BrokerTlsError> {
        self.shared.tls.reload()
    }

    /// This broker's name on the broker network.
    pub fn network_name(&self) -> &str {
        self.shared.links.name()
    }

    /// The links to other brokers that are up, by neighbour name.
    pub fn links(&self) -> Vec<LinkInfo> {
        self.shared.links.links()
    }

    /// The last failure of each configured link that is not up.
    pub fn link_failures(&self) -> Vec<LinkFailure> {
        self.shared.links.failures_snapshot()
    }

    /// Names of the brokers in the topology with a path of links that both
    /// ends advertise from this broker (itself included), sorted.
    pub fn topology_brokers(&self) -> Vec<String> {
        self.shared.links.reachable_brokers()
    }

    /// Links on the shortest path from this broker to `broker`; `None` when
    /// it cannot be reached.
    pub fn shortest_path_hops(&self, broker: &str) -> Option<u32> {
        self.shared.links.shortest_path_hops(broker)
    }

    /// Every other broker's interest known here, as (broker, topic filter,
    /// content filter as (language, text)), sorted.
    pub fn remote_interest(&self) -> Vec<RemoteInterest> {
        self.shared.links.remote_interest()
    }

    /// What this broker advertises for its own subscriptions, after the
    /// summary rule, as (topic filter, content filter), sorted.
    pub fn advertised_interest(&self) -> Vec<AdvertisedInterest> {
        self.shared.links.advertised_interest()
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A copy of the counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.stats.snapshot()
    }

    /// Bytes queued towards clients now, against `limits.memory_bytes_max`:
    /// outboxes, and door writers' batches not yet sent.
    pub fn memory_bytes(&self) -> u64 {
        self.shared.memory.used_bytes()
    }

    /// Subscriptions currently registered.
    pub fn subscription_count(&self) -> usize {
        self.shared.router.len()
    }

    /// Stops accepting, closes every connection after flushing what it was
    /// owed, and returns when all connection tasks ended (or the grace period
    /// ran out).
    pub async fn shutdown(self) -> StatsSnapshot {
        self.shared.begin_shutdown();
        let _ = self.accept_task.await;
        for stream in self.shared.storage.streams() {
            if let Some(replication) = stream.replication() {
                replication.stop().await;
            }
        }
        let _ = self.link_task.await;
        self.shared.storage.sync_positions();
        self.shared.storage.release();
        let stats = self.shared.stats.snapshot();
        if self.shared.config.remove_data_dir_on_shutdown {
            // Consumers still hold their logs open; unlinking is fine.
            if let Err(error) = std::fs::remove_dir_all(&self.shared.config.data_dir) {
                tracing::debug!(%error, "scratch data directory not removed");
            }
        }
        stats
    }
}

/// Starts this broker's replica of each replicated stream, its calls
/// going over the broker links.
async fn start_replicas(shared: &Arc<BrokerShared>) -> Result<(), BrokerError> {
    let own_name = shared.links.name().to_string();
    for stream in shared.storage.streams() {
        let Some(replication) = stream.replication() else { continue };
        let context = crate::replication::place::start_context(shared, crate::replication::rejoin::Arrival::Booted);
        if let Err(why) = replication.start(&own_name, context).await {
            let source = Box::new(crate::store::StorageError::Invalid(why));
            return Err(BrokerError::Storage { data_dir: shared.config.data_dir.clone().into(), source });
        }
    }
    Ok(())
}

/// Binds the link listener, returning it with the address actually bound.
async fn bind_links(address: SocketAddr) -> Result<(TcpListener, SocketAddr), BrokerError> {
    let bound = TcpListener::bind(address).await.map_err(|source| BrokerError::BindLinks { address, source })?;
    let local = bound.local_addr().map_err(|source| BrokerError::BindLinks { address, source })?;
    Ok((bound, local))
}

/// Accepts socket and in-process connections, admits each under
/// `max_connections`, and on shutdown closes them all.
async fn accept_loop(listener: TcpListener, mut in_process: InProcessQueue, shared: Arc<BrokerShared>) {
    let mut tasks = JoinSet::new();
    let mut shutdown = shared.shutdown_watch();
    let mut next_id: u64 = 1;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let id = next_id;
                    next_id += 1;
                    admit(Accepted::Socket(stream), id, &shared, &mut tasks);
                }
                // Accept errors (out of file descriptors) are transient:
                // back off briefly rather than spin or stop serving.
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(connection) = in_process.recv() => {
                let id = next_id;
                next_id += 1;
                bump(&shared.stats.connections_in_process);
                let accepted = match connection {
                    InProcess::Pipe(pipe) => Accepted::InProcess(pipe),
                    InProcess::Local(request) => Accepted::Local(request),
                };
                admit(accepted, id, &shared, &mut tasks);
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    // Pipes still queued are dropped: their clients see the pipe close.
    in_process.close();
    let open: Vec<Arc<ConnShared>> = shared.connections().values().cloned().collect();
    for conn in open {
        conn.close(Some(error_frame(ErrorCode::ShuttingDown, 0, true, "broker is shutting down".into())));
    }
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tasks.abort_all();
    }
}

/// A connection the accept loop took: from the listener or from
/// [`InProcessConnector::connect_in_process`].
enum Accepted {
    Socket(TcpStream),
    InProcess(DuplexStream),
    Local(LocalRequest),
}

fn admit(accepted: Accepted, id: u64, shared: &Arc<BrokerShared>, tasks: &mut JoinSet<()>) {
    let open = shared.stats.connections_current.load(Ordering::Relaxed);
    // Connections still in their handshake are not registered yet; count the
    // tasks too so that a burst of handshakes cannot exceed the limit.
    let limit = u64::from(shared.config.limits.max_connections);
    if open.max(tasks.len() as u64) >= limit {
        tracing::warn!(connection = id, limit, "connection refused: the broker already serves max_connections");
        bump(&shared.stats.connections_refused);
        bump(&shared.stats.errors_sent);
        match accepted {
            Accepted::Socket(stream) => {
                let shared = shared.clone();
                tasks.spawn(async move {
                    if let Some(stream) = crate::connection::open_socket(stream, &shared).await {
                        refuse(stream, limit).await;
                    }
                })
            }
            Accepted::InProcess(pipe) => tasks.spawn(refuse(pipe, limit)),
            Accepted::Local(request) => tasks.spawn(refuse_local(request, limit)),
        };
        return;
    }
    bump(&shared.stats.connections_accepted);
    match accepted {
        Accepted::Socket(stream) => tasks.spawn(serve(stream, shared.clone(), id)),
        Accepted::InProcess(pipe) => tasks.spawn(serve_in_process(pipe, shared.clone(), id)),
        Accepted::Local(request) => tasks.spawn(crate::local::serve_local(request, shared.clone(), id)),
    };
}

/// The `ERROR` that refuses a connection past `max_connections`.
fn too_many_connections(limit: u64) -> Frame {
    let message = format!("broker already serves max_connections = {limit} connections");
    error_frame(ErrorCode::TooManyConnections, 0, true, message)
}

async fn refuse_local(request: LocalRequest, limit: u64) {
    let _ = request.replies.send(vec![too_many_connections(limit)]).await;
}

async fn refuse(mut stream: impl AsyncWrite + Unpin, limit: u64) {
    let mut bytes = BytesMut::new();
    if too_many_connections(limit).encode(&mut bytes).is_ok() {
        let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&bytes)).await;
    }
    let _ = stream.shutdown().await;
}
