//! A whole broker network started from a topology file (`--topology FILE`,
//! `--variant NAME`), in this process on loopback, and waited for until its
//! brokers agree on every shortest path and, later, on each other's interest.
//!
//! Scenarios that measure a network name the brokers they attach clients
//! to; [`TopologyNetwork::require`] refuses a file without them, naming the
//! missing broker, before anything starts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sift_broker::topology_file::TopologyFile;
use sift_broker::RunningBroker;

use crate::brokers::poll_until;
use crate::error::BenchError;

/// How long the brokers of a started topology may take to agree on every
/// shortest path (22 brokers take well under a second on loopback).
const CONVERGENCE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long subscriptions may take to reach, or leave, every broker.
const INTEREST_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a wait looks again.
const NETWORK_POLL: Duration = Duration::from_millis(20);

/// Where a scenario's topology comes from: a file the user named, or a
/// text built into the binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologySource {
    /// `--topology FILE`.
    File(PathBuf),
    /// The scenario's own topology: a name for messages, and the TOML text.
    Builtin {
        /// What to call it in messages (`ges22`).
        name: &'static str,
        /// The topology file's text.
        text: &'static str,
    },
}

impl TopologySource {
    /// The file given, or else the built-in topology.
    pub fn from_option(file: Option<&Path>, name: &'static str, text: &'static str) -> TopologySource {
        match file {
            Some(path) => TopologySource::File(path.to_path_buf()),
            None => TopologySource::Builtin { name, text },
        }
    }

    /// How messages and reports name the topology: the file's path or the
    /// built-in name.
    pub fn label(&self) -> String {
        match self {
            TopologySource::File(path) => path.display().to_string(),
            TopologySource::Builtin { name, .. } => (*name).to_string(),
        }
    }

    /// Reads and checks the topology.
    pub fn load(&self) -> Result<TopologyFile, BenchError> {
        match self {
            TopologySource::File(path) => Ok(TopologyFile::load(path)?),
            TopologySource::Builtin { text, .. } => Ok(TopologyFile::parse(text)?),
        }
    }
}

/// The running brokers of one topology (base links or one variant).
pub struct TopologyNetwork {
    brokers: Vec<RunningBroker>,
    variant: Option<String>,
}

impl TopologyNetwork {
    /// Checks that `file` has every broker of `needed` (the ones a scenario
    /// attaches clients to), saying which is missing and where it looked.
    pub fn require(file: &TopologyFile, source: &TopologySource, needed: &[&str]) -> Result<(), BenchError> {
        let names = file.broker_names();
        for broker in needed {
            if !names.contains(broker) {
                return Err(BenchError::Usage(format!(
                    "topology {} has no broker {broker:?}, where the scenario attaches clients (its brokers: {})",
                    source.label(),
                    names.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Starts every broker of `file` with the base links (`variant` `None`)
    /// or a variant's, and waits until each of them computes the shortest
    /// paths the file implies. Brokers that started are shut down on error.
    pub async fn start(file: &TopologyFile, variant: Option<&str>) -> Result<TopologyNetwork, BenchError> {
        let topology = file.routing_topology(variant)?;
        let brokers = file.start_network(variant, |_| {}).await?;
        let network = TopologyNetwork { brokers, variant: variant.map(str::to_string) };
        let names = file.broker_names();
        let agreed = |broker: &RunningBroker| {
            let tree = topology.tree(broker.network_name());
            names.iter().all(|name| broker.shortest_path_hops(name) == tree.hops(name))
        };
        let what = "every broker of the topology agrees on every shortest path (are all its brokers connected?)";
        match network.wait_until(what, CONVERGENCE_TIMEOUT, |brokers| brokers.iter().all(agreed)).await {
            Ok(()) => Ok(network),
            Err(error) => {
                network.shutdown().await;
                Err(error)
            }
        }
    }

    /// The variant running, `None` for the base links.
    pub fn variant(&self) -> Option<&str> {
        self.variant.as_deref()
    }

    /// Every broker, in file order.
    pub fn brokers(&self) -> &[RunningBroker] {
        &self.brokers
    }

    /// The broker called `name`.
    pub fn broker(&self, name: &str) -> Result<&RunningBroker, BenchError> {
        self.brokers
            .iter()
            .find(|broker| broker.network_name() == name)
            .ok_or_else(|| BenchError::Usage(format!("the network has no broker {name:?}")))
    }

    /// The client address of the broker called `name`.
    pub fn address(&self, name: &str) -> Result<String, BenchError> {
        Ok(self.broker(name)?.local_addr().to_string())
    }

    /// The thesis's "server hops" from broker `from` to broker `to`: the
    /// brokers an event passes through on the shortest path, both ends
    /// included (links crossed + 1); `None` when `to` is unreachable.
    pub fn server_hops(&self, from: &str, to: &str) -> Result<Option<u32>, BenchError> {
        Ok(self.broker(from)?.shortest_path_hops(to).map(|links| links + 1))
    }

    /// Waits until every broker holds the interest of every broker of
    /// `origins` other than itself: relays decide by their own tables, so
    /// all must be complete before publishing.
    pub async fn interest_ready(&self, origins: &BTreeSet<String>) -> Result<(), BenchError> {
        let complete = |broker: &RunningBroker| {
            let held: BTreeSet<String> = broker.remote_interest().into_iter().map(|entry| entry.0).collect();
            origins.iter().filter(|origin| **origin != broker.network_name()).all(|origin| held.contains(origin))
        };
        let what = "every broker holds every subscribing broker's interest";
        self.wait_until(what, INTEREST_TIMEOUT, |brokers| brokers.iter().all(complete)).await
    }

    /// Waits until no broker holds a subscription or any other broker's
    /// interest, so that the next round starts from nothing.
    pub async fn interest_gone(&self) -> Result<(), BenchError> {
        let empty = |broker: &RunningBroker| broker.subscription_count() == 0 && broker.remote_interest().is_empty();
        let what = "every broker forgot the closed subscribers' interest";
        self.wait_until(what, INTEREST_TIMEOUT, |brokers| brokers.iter().all(empty)).await
    }

    async fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&[RunningBroker]) -> bool,
    ) -> Result<(), BenchError> {
        poll_until(what, timeout, NETWORK_POLL, || ready(&self.brokers)).await
    }

    /// Stops every broker, last started first.
    pub async fn shutdown(self) {
        for broker in self.brokers.into_iter().rev() {
            broker.shutdown().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRIANGLE: &str = r#"
        brokers = [{ name = "a" }, { name = "b" }, { name = "c" }]
        links = [{ between = ["a", "b"] }, { between = ["b", "c"] }]
        [variants.closed]
        add = [{ between = ["a", "c"] }]
    "#;

    #[test]
    fn a_missing_broker_is_named_with_the_ones_there_are() {
        let source = TopologySource::Builtin { name: "triangle", text: TRIANGLE };
        let file = source.load().expect("valid");
        TopologyNetwork::require(&file, &source, &["a", "c"]).expect("both there");
        let error = TopologyNetwork::require(&file, &source, &["a", "22"]).expect_err("22 is missing");
        assert_eq!(
            error.to_string(),
            r#"topology triangle has no broker "22", where the scenario attaches clients (its brokers: a, b, c)"#
        );
    }

    #[test]
    fn unreadable_and_invalid_topologies_are_errors_that_say_where() {
        let missing = TopologySource::File(PathBuf::from("no/such/topology.toml"));
        assert!(missing.load().expect_err("missing").to_string().contains("no/such/topology.toml"));
        let bad = TopologySource::Builtin { name: "bad", text: "brokers = []" };
        assert!(bad.load().expect_err("no brokers").to_string().contains("no brokers"), "{:?}", bad.load().err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_started_variant_agrees_on_its_paths_and_counts_server_hops() {
        let source = TopologySource::Builtin { name: "triangle", text: TRIANGLE };
        let file = source.load().expect("valid");
        let base = TopologyNetwork::start(&file, None).await.expect("starts");
        assert_eq!(base.server_hops("a", "c").expect("a is there"), Some(3));
        assert_eq!(base.server_hops("a", "a").expect("a is there"), Some(1));
        base.shutdown().await;
        let closed = TopologyNetwork::start(&file, Some("closed")).await.expect("starts");
        assert_eq!(closed.variant(), Some("closed"));
        assert_eq!(closed.server_hops("a", "c").expect("a is there"), Some(2));
        assert!(closed.broker("d").is_err());
        closed.shutdown().await;
        let unknown = TopologyNetwork::start(&file, Some("open")).await.err().expect("no such variant");
        assert!(unknown.to_string().contains("no variant \"open\""), "{unknown}");
    }
}
