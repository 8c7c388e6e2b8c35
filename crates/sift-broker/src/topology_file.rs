//! Topology files: a whole broker network in one TOML document, for tests,
//! experiments and demonstrations that start many linked brokers at once.
//!
//! A file lists the brokers (a name each, and optional `cluster` and
//! `super_cluster` labels that only document how the brokers are grouped),
//! the links between them (two broker names and an optional cost, 1 by
//! default), and named variants that remove and add links:
//!
//! ```toml
//! description = "a triangle that loses one side"
//! network_cluster = "demo"       # the [network] cluster of every broker
//! brokers = [
//!   { name = "a", cluster = "left" },
//!   { name = "b", cluster = "left" },
//!   { name = "c", cluster = "right", super_cluster = "east" },
//! ]
//! links = [
//!   { between = ["a", "b"] },
//!   { between = ["b", "c"], cost = 2 },
//! ]
//! [variants.closed]
//! description = "closes the triangle"
//! add = [{ between = ["a", "c"] }]
//! remove = []
//! ```
//!
//! Loading checks every name and link ([`TopologyError`] says what is wrong
//! and where). [`TopologyFile::start_network`] then starts the whole network
//! in one process on ephemeral loopback ports, each link dialled by the
//! later of its two brokers; [`TopologyFile::routing_topology`] gives the
//! trees and hop counts the brokers will agree on.

mod error;
mod start;
#[cfg(test)]
mod tests;
mod validate;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use sift_net::{LinkState, Topology};

use crate::config::{DEFAULT_CLUSTER, DEFAULT_LINK_COST};

pub use error::{NetworkStartError, TopologyError, TopologyFileError};

/// One broker of a topology file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyBroker {
    /// The broker's name on the network (and towards its clients).
    pub name: String,
    /// The cluster the broker belongs to, as a label: documentation and
    /// grouping only, it does not change how the broker links.
    #[serde(default)]
    pub cluster: Option<String>,
    /// The super-cluster of the broker's cluster, as a label.
    #[serde(default)]
    pub super_cluster: Option<String>,
}

/// A link between two brokers of a topology file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyLink {
    /// The two brokers' names.
    pub between: [String; 2],
    /// The cost of the link, 1 unless given.
    #[serde(default = "default_cost")]
    pub cost: u32,
}

fn default_cost() -> u32 {
    DEFAULT_LINK_COST
}

impl TopologyLink {
    /// A link of the default cost between `left` and `right`.
    pub fn new(left: &str, right: &str) -> TopologyLink {
        TopologyLink { between: [left.to_string(), right.to_string()], cost: DEFAULT_LINK_COST }
    }

    /// The other end when `broker` is one end of the link.
    pub fn other_end(&self, broker: &str) -> Option<&str> {
        match &self.between {
            [left, right] if left == broker => Some(right),
            [left, right] if right == broker => Some(left),
            _ => None,
        }
    }

    /// True when the link joins `left` and `right`, in either order.
    pub fn joins(&self, left: &str, right: &str) -> bool {
        self.other_end(left) == Some(right)
    }
}

/// A link a variant removes: only its two ends.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemovedLink {
    /// The two brokers' names.
    pub between: [String; 2],
}

/// A named change to the base links.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyVariant {
    /// What the variant is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Links added to the base topology.
    #[serde(default)]
    pub add: Vec<TopologyLink>,
    /// Links of the base topology taken away (before the additions).
    #[serde(default)]
    pub remove: Vec<RemovedLink>,
}

/// A validated topology file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyFile {
    /// What the topology models.
    #[serde(default)]
    description: Option<String>,
    /// The `[network] cluster` every broker of the file joins.
    #[serde(default = "default_network_cluster")]
    network_cluster: String,
    /// The brokers, in the order they are started.
    brokers: Vec<TopologyBroker>,
    /// The links of the base topology.
    #[serde(default)]
    links: Vec<TopologyLink>,
    /// The variants, by name.
    #[serde(default)]
    variants: BTreeMap<String, TopologyVariant>,
}

fn default_network_cluster() -> String {
    DEFAULT_CLUSTER.to_string()
}

impl TopologyFile {
    /// Parses and checks the text of a topology file.
    pub fn parse(text: &str) -> Result<TopologyFile, TopologyError> {
        let file: TopologyFile =
            toml::from_str(text).map_err(|source| TopologyError::Parse { source: Box::new(source) })?;
        validate::check(&file)?;
        Ok(file)
    }

    /// Reads, parses and checks the topology file at `path`.
    pub fn load(path: &Path) -> Result<TopologyFile, TopologyFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| TopologyFileError::Read { path: path.to_path_buf(), source })?;
        TopologyFile::parse(&text).map_err(|source| TopologyFileError::Invalid { path: path.to_path_buf(), source })
    }

    /// What the topology models, when the file says.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The `[network] cluster` every broker joins.
    pub fn network_cluster(&self) -> &str {
        &self.network_cluster
    }

    /// The brokers, in file order.
    pub fn brokers(&self) -> &[TopologyBroker] {
        &self.brokers
    }

    /// The brokers' names, in file order.
    pub fn broker_names(&self) -> Vec<&str> {
        self.brokers.iter().map(|broker| broker.name.as_str()).collect()
    }

    /// The names of the variants, sorted.
    pub fn variant_names(&self) -> Vec<&str> {
        self.variants.keys().map(String::as_str).collect()
    }

    /// The variant called `name`.
    pub fn variant(&self, name: &str) -> Result<&TopologyVariant, TopologyError> {
        self.variants.get(name).ok_or_else(|| TopologyError::UnknownVariant {
            name: name.to_string(),
            known: if self.variants.is_empty() { "none".to_string() } else { self.variant_names().join(", ") },
        })
    }

    /// The links of the base topology (`None`) or of a variant: the base
    /// links in file order less the variant's removals, then its additions.
    pub fn links(&self, variant: Option<&str>) -> Result<Vec<TopologyLink>, TopologyError> {
        let Some(name) = variant else {
            return Ok(self.links.clone());
        };
        let variant = self.variant(name)?;
        let kept = self
            .links
            .iter()
            .filter(|link| !variant.remove.iter().any(|removed| link.joins(&removed.between[0], &removed.between[1])));
        Ok(kept.chain(&variant.add).cloned().collect())
    }

    /// The link-state database the brokers agree on once every link of the
    /// base topology or of `variant` is up: ask it for shortest-path trees
    /// and hop counts exactly as the brokers compute them.
    pub fn routing_topology(&self, variant: Option<&str>) -> Result<Topology, TopologyError> {
        routing_topology_of(&self.broker_names(), &self.links(variant)?)
    }
}

/// The link-state database of `brokers` joined by `links`: one record per
/// broker listing every link it has, as each broker would advertise.
fn routing_topology_of(brokers: &[&str], links: &[TopologyLink]) -> Result<Topology, TopologyError> {
    let mut topology = Topology::new();
    for &broker in brokers {
        let neighbours =
            links.iter().filter_map(|link| Some((link.other_end(broker)?.into(), link.cost))).collect::<Vec<_>>();
        topology.apply(LinkState { origin: broker.into(), sequence: 1, links: neighbours })?;
    }
    Ok(topology)
}
