//! The broker's state, assembled from its parts: the configuration, the
//! router, the counters, the stream store, the link network, the memory
//! budget, the clock and the table of open connections.
//!
//! Sessions and the link sessions hold the whole of it; the layers below
//! them (store, delivery, pipeline, link routing state) are handed only the
//! parts they use, so that they can be read and tested without a broker.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::config::Config;
use crate::conn::ConnShared;
use crate::link::LinkNetwork;
use crate::router::Router;
use crate::stats::Stats;
use crate::store::Storage;

/// A forwarded message's delivery report goes back over the links.
impl crate::report::ReportRoute for BrokerShared {
    fn reporter(&self) -> sift_net::BrokerName {
        self.links.name().clone()
    }

    fn route_report(&self, frame: sift_proto::link::DeliveryReportFrame) {
        self.links.route_report(frame, &self.stats);
    }
}

/// State shared by every connection of one broker.
#[derive(Debug)]
pub struct BrokerShared {
    /// The configuration in force.
    pub config: Config,
    /// Subscriptions by topic filter.
    pub router: Router,
    /// Counters.
    pub stats: Arc<Stats>,
    /// Next message id; starts at the start time so that ids differ across restarts.
    pub next_message_id: AtomicU64,
    /// Next subscription key.
    pub next_subscription_key: AtomicU64,
    /// Links to other brokers and the cluster's topology.
    pub links: Arc<LinkNetwork>,
    /// Streams and durable subscriptions.
    pub storage: Arc<Storage>,
    /// Messages held for a later delivery time.
    pub scheduler: crate::scheduler::Scheduler,
    /// Time from a message's stamp to the write of a delivery of it,
    /// sampled once per write batch of each connection.
    pub deliver_latency: sift_core::LatencyHistogram,
    connections: Mutex<HashMap<u64, Arc<ConnShared>>>,
    shutdown: watch::Sender<bool>,
    /// The counters each protocol front-end registered.
    pub doors: crate::door::DoorRegistry,
    /// Bytes queued towards clients across every outbox, against
    /// `limits.memory_bytes_max`.
    pub memory: Arc<crate::budget::MemoryBudget>,
    /// The clock that stamps messages and decides their expiry: the
    /// system's, or one a test moves (`RunningBroker::start_with_clock`).
    pub clock: sift_core::Clock,
    /// The users and what each may do (an open broker without a users
    /// file).
    pub access: crate::access::Access,
    /// The native door's TLS and the links' (none on a plain broker).
    pub tls: crate::broker_tls::BrokerTls,
    /// What each limited user holds and sends across its sessions.
    pub usage: crate::usage::Usage,
    /// Calls between the replicas of replicated streams.
    pub raft_calls: Arc<crate::replication::RaftCalls>,
    /// This broker's data id and the ones it heard from the others.
    pub data_ids: Arc<crate::replication::identity::DataIds>,
}

impl BrokerShared {
    /// The state of a broker about to start, around its opened storage.
    pub(crate) fn new(
        config: Config,
        storage: Storage,
        clock: sift_core::Clock,
        access: crate::access::Access,
        tls: crate::broker_tls::BrokerTls,
        data_ids: crate::replication::identity::DataIds,
    ) -> Arc<BrokerShared> {
        let (shutdown, _) = watch::channel(false);
        let first_id = sift_core::system_now_ns();
        let stats = Arc::new(Stats::default());
        let raft_calls = Arc::new(crate::replication::RaftCalls::new(
            &config.network.name,
            config.storage.raft_calls_max,
            stats.clone(),
        ));
        Arc::new(BrokerShared {
            router: Router::default(),
            stats,
            raft_calls,
            data_ids: Arc::new(data_ids),
            next_message_id: AtomicU64::new(first_id),
            next_subscription_key: AtomicU64::new(1),
            // Link-state sequences start at the start time too (§10.5).
            links: Arc::new(LinkNetwork::new(&config, first_id)),
            storage: Arc::new(storage),
            scheduler: crate::scheduler::Scheduler::new(config.limits.scheduled_max),
            deliver_latency: sift_core::LatencyHistogram::default(),
            connections: Mutex::new(HashMap::new()),
            shutdown,
            doors: crate::door::DoorRegistry::default(),
            memory: Arc::new(crate::budget::MemoryBudget::new(config.limits.memory_bytes_max)),
            clock,
            access,
            tls,
            usage: crate::usage::Usage::default(),
            config,
        })
    }

    /// Checks an `AUTH` off the async threads (argon2id costs tens of
    /// milliseconds). A refusal is counted in `auth_failures` and returned
    /// only after its delay, which grows with the recent failures on the
    /// name; every sign-in, by a session or a front-end, passes here.
    pub(crate) async fn check_sign_in(
        self: &Arc<Self>,
        auth: sift_proto::Auth,
    ) -> Result<crate::access::Standing, crate::access::SignInError> {
        let user = auth.user.clone();
        let shared = self.clone();
        let now_s = self.clock.now_ns() / 1_000_000_000;
        let refusal = match tokio::task::spawn_blocking(move || shared.access.sign_in(&auth, now_s)).await {
            Ok(Ok(standing)) => return Ok(standing),
            Ok(Err(refusal)) => refusal,
            Err(error) => crate::access::SignInError::CheckFailed(error.to_string()),
        };
        crate::stats::bump(&self.stats.auth_failures);
        tokio::time::sleep(self.access.failed(&user)).await;
        Err(refusal)
    }

    pub(crate) fn connections(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<ConnShared>>> {
        self.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The open connections, in no order.
    pub fn connection_list(&self) -> Vec<Arc<ConnShared>> {
        self.connections().values().cloned().collect()
    }

    /// Records an open connection.
    pub fn register(&self, conn: Arc<ConnShared>) {
        self.connections().insert(conn.id, conn);
        self.stats.connections_current.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets a closed connection.
    pub fn unregister(&self, id: u64) {
        if self.connections().remove(&id).is_some() {
            self.stats.connections_current.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Begins shutdown: every task that watches for it stops.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// True once shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// A receiver that turns true when shutdown begins. One taken after
    /// shutdown began reports a change at once: a fresh receiver counts the
    /// current value as seen, so a task spawned just before
    /// `RunningBroker::shutdown` but first run after it would otherwise
    /// wait for a change that never comes.
    pub fn shutdown_watch(&self) -> watch::Receiver<bool> {
        let mut receiver = self.shutdown.subscribe();
        if *receiver.borrow() {
            receiver.mark_changed();
        }
        receiver
    }

    /// The handles a stream consumer task runs with.
    pub fn consumer_context(&self) -> crate::store::consumer::ConsumerContext {
        crate::store::consumer::ConsumerContext {
            stats: self.stats.clone(),
            clock: self.clock.clone(),
            read_batch_records: self.config.storage.read_batch_records,
            read_batch_bytes: self.config.storage.read_batch_bytes,
            message_groups_max: self.config.storage.message_groups_max,
            parked_max: self.config.storage.parked_max,
            shutdown: self.shutdown_watch(),
        }
    }
}
