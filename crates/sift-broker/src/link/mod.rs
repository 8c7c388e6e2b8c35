//! Broker links (`docs/PROTOCOL.md` §10): brokers of one cluster connect,
//! keep their links up and agree on the topology.
//!
//! - [`listener`] accepts links on `network.link_listen`;
//! - [`dialer`] keeps each configured link (`network.links`) up, redialling
//!   with exponential back-off;
//! - [`handshake`] runs `LINK_HELLO` / `LINK_WELCOME` with the version,
//!   cluster and name checks;
//! - [`session`] runs a link that is up: pings, liveness, link states,
//!   interest;
//! - [`network`] holds the up links and the [`sift_net::Topology`];
//!   [`topology`] originates, applies and floods link-state records;
//! - [`interest`] originates this broker's interest from its local
//!   subscriptions and applies, floods and resyncs everyone's
//!   ([`interest_wire`] is its wire form, [`bracket`] reads resyncs);
//! - [`forward`] sends published messages down the origin's tree to the
//!   brokers that want them, and [`deliver`] hands received ones to local
//!   subscribers; [`retransmit`] keeps reliable ones until acknowledged and
//!   re-routes them when a link goes down; [`groups`] assigns queue groups
//!   spanning brokers; [`report_route`] carries delivery reports back to
//!   the origin.

mod bracket;
mod congestion;
mod deliver;
mod dialer;
mod error;
mod forward;
mod frames;
mod groups;
mod handshake;
mod hop_cache;
mod interest;
mod interest_wire;
mod listener;
pub(crate) mod network;
mod raft_route;
mod report_route;
mod retransmit;
mod routes;
mod session;
mod topology;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::shared::BrokerShared;

pub use error::LinkError;
pub use forward::LinkTraffic;
pub(crate) use forward::{Forwarded, LocalForward};
pub use listener::LINK_CONNECTIONS_MAX;
pub use network::{AdvertisedInterest, ContentText, LinkFailure, LinkInfo, LinkNetwork, RemoteInterest};
pub use routes::RouteInfo;
pub use session::SILENT_INTERVALS;

/// Dials `target` for as long as the broker runs (or the task is aborted).
pub(crate) async fn dial_target(target: crate::config::LinkTarget, shared: Arc<BrokerShared>) {
    dialer::run(target, shared).await;
}

/// Runs the link listener (when there is one) and one dialer per configured
/// link until the broker shuts down; returns once they all ended, or after
/// `grace`.
pub(crate) async fn run(listener: Option<TcpListener>, shared: Arc<BrokerShared>, grace: Duration) {
    let mut tasks = JoinSet::new();
    if let Some(listener) = listener {
        tasks.spawn(listener::run(listener, shared.clone(), grace));
    }
    for target in shared.config.network.links.clone() {
        tasks.spawn(dialer::run(target, shared.clone()));
    }
    let mut shutdown = shared.shutdown_watch();
    if !shared.is_shutting_down() {
        let _ = shutdown.changed().await;
    }
    let drained = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tasks.abort_all();
    }
}
