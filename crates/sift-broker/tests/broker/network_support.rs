//! Helpers shared by the broker-network tests: brokers that accept links on
//! ephemeral loopback ports with short timers, and bounded polling.

use std::net::SocketAddr;
use std::time::Duration;

use sift_broker::config::{LinkTarget, RoutingMode};
use sift_broker::RunningBroker;

use crate::common::{broker_with, PATIENCE};

/// How often a bounded wait looks again.
pub const POLL: Duration = Duration::from_millis(20);
/// Ping interval of the test brokers: short, so that silence is noticed fast.
pub const PING_MS: u64 = 100;
/// The cluster every test broker joins unless a test needs another.
pub const CLUSTER: &str = "test";

/// A broker named `name` in `cluster`, accepting links on an ephemeral port
/// (or on `listen`), dialling `dials` and routing by `routing`, with short
/// timers.
pub async fn linked_broker(
    name: &str,
    cluster: &str,
    listen: Option<SocketAddr>,
    dials: &[SocketAddr],
    routing: RoutingMode,
) -> RunningBroker {
    linked_broker_with(name, cluster, listen, dials, routing, |_| {}).await
}

/// [`linked_broker`], with `adjust` applied to the configuration last.
pub async fn linked_broker_with(
    name: &str,
    cluster: &str,
    listen: Option<SocketAddr>,
    dials: &[SocketAddr],
    routing: RoutingMode,
    adjust: impl FnOnce(&mut sift_broker::Config),
) -> RunningBroker {
    broker_with(|config| {
        config.network.name = name.to_string();
        config.network.cluster = cluster.to_string();
        config.network.link_listen = Some(listen.unwrap_or_else(|| ([127, 0, 0, 1], 0).into()));
        config.network.links = dials.iter().map(|address| LinkTarget::new(address.to_string())).collect();
        config.network.link_ping_interval_ms = PING_MS;
        config.network.link_reconnect_delay_min_ms = 20;
        config.network.link_reconnect_delay_max_ms = 100;
        config.network.link_handshake_timeout_ms = 2_000;
        config.network.routing = routing;
        adjust(config);
    })
    .await
}

/// A broker of [`CLUSTER`] named `name`, dialling `dials`, routing by interest.
pub async fn node(name: &str, dials: &[SocketAddr]) -> RunningBroker {
    linked_broker(name, CLUSTER, None, dials, RoutingMode::Interest).await
}

/// The address `broker` accepts links on.
pub fn link_addr(broker: &RunningBroker) -> SocketAddr {
    broker.link_addr().expect("broker accepts links")
}

/// Polls `check` until it holds, failing the test after [`PATIENCE`].
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// `list` as owned strings.
pub fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|name| name.to_string()).collect()
}

/// Waits until every broker knows exactly the brokers `expected`.
pub async fn converged(brokers: &[&RunningBroker], expected: &[&str]) {
    let expected = names(expected);
    eventually("every broker knows the whole topology", || {
        brokers.iter().all(|broker| broker.topology_brokers() == expected)
    })
    .await;
}

/// Shuts every broker down, in the order given.
pub async fn shutdown_all(brokers: Vec<RunningBroker>) {
    for broker in brokers {
        broker.shutdown().await;
    }
}
