//! The `[network]` section of the configuration: this broker's name and
//! cluster on the broker network, where it listens for links, which brokers
//! it dials, and the link timers. Re-exported by [`crate::config`].

use std::net::SocketAddr;

use serde::Deserialize;
use sift_net::BROKER_NAME_BYTES_MAX;

use crate::config::ConfigError;

/// Broker name on the network when none is configured. A fixed word, not the
/// host name, so that a configuration means the same on every machine; a
/// cluster of several brokers must give each its own name.
pub const DEFAULT_NETWORK_NAME: &str = "sift";
/// Cluster name when none is configured.
pub const DEFAULT_CLUSTER: &str = "sift";
/// Cost of a configured link that does not name one.
pub const DEFAULT_LINK_COST: u32 = 1;
/// First wait before dialling a link again after a failure.
pub const DEFAULT_LINK_RECONNECT_DELAY_MIN_MS: u64 = 100;
/// Longest wait between attempts; the wait doubles from the minimum up to this.
pub const DEFAULT_LINK_RECONNECT_DELAY_MAX_MS: u64 = 10_000;
/// Time allowed to connect and exchange `LINK_HELLO` / `LINK_WELCOME`.
pub const DEFAULT_LINK_HANDSHAKE_TIMEOUT_MS: u64 = 5_000;
/// Interval between `LINK_PING`s; a link silent for three intervals is down.
pub const DEFAULT_LINK_PING_INTERVAL_MS: u64 = 1_000;
/// Encoded frames queued towards one link before the link is dropped as
/// unable to keep up (a reconnection then resends everything it needs).
pub const DEFAULT_LINK_SEND_QUEUE_FRAMES: usize = 8_192;
/// Reliable `FORWARD`s kept per neighbour until acknowledged, and reliable
/// messages stranded by failed links in all (§10.8). At 64 Ki frames of a
/// few hundred bytes this is tens of MiB at most.
pub const DEFAULT_LINK_UNACKED_FRAMES_MAX: usize = 65_536;
/// How long a reliable message stranded by a failed link waits for a path
/// to its brokers before it is dropped.
pub const DEFAULT_STRANDED_EXPIRY_MS: u64 = 60_000;
/// Longest a reader feeding the broker links waits, per read, while a link
/// send queue is nearly full (see `link::congestion`); 0 never waits.
pub const DEFAULT_LINK_STALL_MS_MAX: u64 = 100;
/// Await=delivered messages this broker forwarded whose remote reports it
/// is waiting for.
pub const DEFAULT_AWAITED_REPORTS_MAX: usize = 65_536;

/// How a broker chooses the links a message is forwarded on (§10.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoutingMode {
    /// Only towards brokers whose interest matches the message.
    #[default]
    Interest,
    /// To every broker of the origin's tree, whatever its interest: for
    /// comparison with interest routing.
    Flood,
}

impl std::str::FromStr for RoutingMode {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<RoutingMode, ConfigError> {
        match text {
            "interest" => Ok(RoutingMode::Interest),
            "flood" => Ok(RoutingMode::Flood),
            other => Err(ConfigError::Invalid(format!("network.routing must be interest or flood, not {other:?}"))),
        }
    }
}

/// Links to other brokers of the cluster.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkConfig {
    /// This broker's name on the network, unique within the cluster.
    pub name: String,
    /// The cluster; brokers link only with brokers of the same cluster.
    pub cluster: String,
    /// Address to accept links from other brokers on; none accepts no links.
    pub link_listen: Option<SocketAddr>,
    /// Brokers to dial, and keep dialling while their link is down.
    pub links: Vec<LinkTarget>,
    /// First wait before redialling after a failure, in milliseconds.
    pub link_reconnect_delay_min_ms: u64,
    /// Longest wait between dial attempts, in milliseconds.
    pub link_reconnect_delay_max_ms: u64,
    /// Time allowed for connecting and the link handshake, in milliseconds.
    pub link_handshake_timeout_ms: u64,
    /// Interval between pings on a link, in milliseconds; three silent
    /// intervals take the link down.
    pub link_ping_interval_ms: u64,
    /// Frames queued towards one link before it is dropped as too slow.
    pub link_send_queue_frames: usize,
    /// Interest routing, or flooding every message for comparison.
    pub routing: RoutingMode,
    /// Reliable frames kept per neighbour until acknowledged, and reliable
    /// messages stranded by failed links in all.
    pub link_unacked_frames_max: usize,
    /// How long a stranded reliable message waits for a path, in milliseconds.
    pub stranded_expiry_ms: u64,
    /// Await=delivered messages whose remote delivery reports are awaited.
    pub awaited_reports_max: usize,
    /// Longest wait per read of a reader feeding a nearly full link queue,
    /// in milliseconds; 0 never waits (best-effort frames are then dropped).
    pub link_stall_ms_max: u64,
}

/// One broker to dial.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkTarget {
    /// `host:port` of the other broker's link listener.
    pub address: String,
    /// The cost this broker gives the link (the larger of both ends' counts).
    #[serde(default = "default_link_cost")]
    pub cost: u32,
}

fn default_link_cost() -> u32 {
    DEFAULT_LINK_COST
}

impl LinkTarget {
    /// A link to `address` with the default cost.
    pub fn new(address: impl Into<String>) -> LinkTarget {
        LinkTarget { address: address.into(), cost: DEFAULT_LINK_COST }
    }
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            name: DEFAULT_NETWORK_NAME.to_string(),
            cluster: DEFAULT_CLUSTER.to_string(),
            link_listen: None,
            links: Vec::new(),
            link_reconnect_delay_min_ms: DEFAULT_LINK_RECONNECT_DELAY_MIN_MS,
            link_reconnect_delay_max_ms: DEFAULT_LINK_RECONNECT_DELAY_MAX_MS,
            link_handshake_timeout_ms: DEFAULT_LINK_HANDSHAKE_TIMEOUT_MS,
            link_ping_interval_ms: DEFAULT_LINK_PING_INTERVAL_MS,
            link_send_queue_frames: DEFAULT_LINK_SEND_QUEUE_FRAMES,
            routing: RoutingMode::default(),
            link_unacked_frames_max: DEFAULT_LINK_UNACKED_FRAMES_MAX,
            stranded_expiry_ms: DEFAULT_STRANDED_EXPIRY_MS,
            awaited_reports_max: DEFAULT_AWAITED_REPORTS_MAX,
            link_stall_ms_max: DEFAULT_LINK_STALL_MS_MAX,
        }
    }
}

impl NetworkConfig {
    /// Checks names, timers and link entries.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_name("network.name", &self.name)?;
        check_name("network.cluster", &self.cluster)?;
        let positive = [
            ("network.link_reconnect_delay_min_ms", self.link_reconnect_delay_min_ms),
            ("network.link_handshake_timeout_ms", self.link_handshake_timeout_ms),
            ("network.link_ping_interval_ms", self.link_ping_interval_ms),
            ("network.link_send_queue_frames", self.link_send_queue_frames as u64),
            ("network.link_unacked_frames_max", self.link_unacked_frames_max as u64),
            ("network.stranded_expiry_ms", self.stranded_expiry_ms),
            ("network.awaited_reports_max", self.awaited_reports_max as u64),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(ConfigError::Invalid(format!("{name} must be greater than 0")));
        }
        if self.link_reconnect_delay_min_ms > self.link_reconnect_delay_max_ms {
            return Err(ConfigError::Invalid(
                "network.link_reconnect_delay_min_ms exceeds link_reconnect_delay_max_ms".into(),
            ));
        }
        for link in &self.links {
            if link.address.is_empty() {
                return Err(ConfigError::Invalid("network.links: address must not be empty".into()));
            }
            if link.cost == 0 {
                return Err(ConfigError::Invalid(format!(
                    "network.links: cost of {} must be at least 1",
                    link.address
                )));
            }
        }
        Ok(())
    }
}

/// Names travel as `str16` and identify brokers in every link frame; the
/// routing core refuses longer ones, so refuse them here, at start.
fn check_name(option: &str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || name.len() > BROKER_NAME_BYTES_MAX {
        return Err(ConfigError::Invalid(format!("{option} must be 1 to {BROKER_NAME_BYTES_MAX} bytes long")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn network_section_parses_links_with_default_costs() {
        let text = "[network]\nname = \"b1\"\ncluster = \"c\"\nlink_listen = \"127.0.0.1:7500\"\n\
                    links = [{ address = \"b2:7500\" }, { address = \"b3:7500\", cost = 5 }]\n";
        let config = Config::from_toml(text).expect("valid");
        assert_eq!(config.network.name, "b1");
        assert_eq!(config.network.links[0].cost, super::DEFAULT_LINK_COST);
        assert_eq!(config.network.links[1].cost, 5);
        assert_eq!(config.network.routing, super::RoutingMode::Interest);
        let flood = Config::from_toml("[network]\nrouting = \"flood\"\n").expect("valid");
        assert_eq!(flood.network.routing, super::RoutingMode::Flood);
        assert!(Config::from_toml("[network]\nrouting = \"spray\"\n").is_err());
        assert_eq!("flood".parse::<super::RoutingMode>().ok(), Some(super::RoutingMode::Flood));
    }

    #[test]
    fn bad_network_values_are_errors() {
        let unknown = Config::from_toml("[network]\nlinks = [{ adress = \"x:1\" }]\n").expect_err("unknown key");
        assert!(unknown.to_string().contains("adress"), "{unknown}");
        let empty = Config::from_toml("[network]\nname = \"\"\n").expect_err("empty name");
        assert!(empty.to_string().contains("network.name"), "{empty}");
        let delays = Config::from_toml("[network]\nlink_reconnect_delay_min_ms = 5\nlink_reconnect_delay_max_ms = 1\n");
        assert!(delays.is_err());
        let cost = Config::from_toml("[network]\nlinks = [{ address = \"x:1\", cost = 0 }]\n").expect_err("cost 0");
        assert!(cost.to_string().contains("cost"), "{cost}");
    }
}
