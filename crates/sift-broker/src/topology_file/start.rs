//! Starting every broker of a topology file in one process, each on
//! ephemeral loopback ports.
//!
//! Brokers start in file order. A link is dialled by its later broker only,
//! towards the earlier one's real link address: the earlier broker is
//! already listening, so the link comes up at the first attempt, and no two
//! brokers dial each other at once (a second handshake between the same two
//! brokers is refused as a duplicate and only retried after a back-off). A
//! link is symmetric once up, so dialling from one end is enough.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};

use crate::config::{Config, LinkTarget, NetworkConfig};
use crate::server::RunningBroker;

use super::{NetworkStartError, TopologyFile, TopologyLink};

/// Where every broker of a started topology listens: loopback, port chosen
/// by the system.
const EPHEMERAL_LOOPBACK: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

impl TopologyFile {
    /// The configuration of `broker` within a network joined by `links`,
    /// where `started` holds the link address of each broker started
    /// before it: it listens for clients and links on ephemeral loopback
    /// ports and dials each neighbour found in `started`, with the link's
    /// cost. The other settings are the defaults.
    pub fn broker_config(&self, broker: &str, links: &[TopologyLink], started: &HashMap<String, SocketAddr>) -> Config {
        let dials = links
            .iter()
            .filter_map(|link| {
                let address = started.get(link.other_end(broker)?)?;
                Some(LinkTarget { address: address.to_string(), cost: link.cost })
            })
            .collect();
        Config {
            name: broker.to_string(),
            listen: EPHEMERAL_LOOPBACK,
            network: NetworkConfig {
                name: broker.to_string(),
                cluster: self.network_cluster.clone(),
                link_listen: Some(EPHEMERAL_LOOPBACK),
                links: dials,
                ..NetworkConfig::default()
            },
            ..Config::scratch()
        }
    }

    /// Starts every broker of the base topology (`None`) or of `variant`,
    /// in file order, with `adjust` applied to each configuration built by
    /// [`TopologyFile::broker_config`] (timers, routing mode, limits), and
    /// returns them in file order. The caller shuts them down. When one
    /// fails to start, the ones already started are shut down first.
    pub async fn start_network(
        &self,
        variant: Option<&str>,
        adjust: impl Fn(&mut Config),
    ) -> Result<Vec<RunningBroker>, NetworkStartError> {
        let links = self.links(variant)?;
        let mut started: HashMap<String, SocketAddr> = HashMap::new();
        let mut running: Vec<RunningBroker> = Vec::with_capacity(self.brokers.len());
        for broker in &self.brokers {
            let mut config = self.broker_config(&broker.name, &links, &started);
            adjust(&mut config);
            match RunningBroker::start(config).await {
                Ok(started_broker) => {
                    if let Some(address) = started_broker.link_addr() {
                        started.insert(broker.name.clone(), address);
                    }
                    running.push(started_broker);
                }
                Err(source) => {
                    for earlier in running.into_iter().rev() {
                        earlier.shutdown().await;
                    }
                    return Err(NetworkStartError::Broker { broker: broker.name.clone(), source });
                }
            }
        }
        Ok(running)
    }
}
