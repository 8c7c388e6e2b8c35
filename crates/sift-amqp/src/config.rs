//! `[amqp]`: the AMQP 1.0 front-end's address and limits.
//!
//! This crate owns its section of the configuration file: the broker's
//! `Config` lets `[amqp]` through unread, and [`AmqpConfig::from_toml`]
//! reads it from the same text. Every limit has a default a user can run
//! with.

use std::net::SocketAddr;

use serde::Deserialize;
use sift_broker::ConfigError;

/// Address the AMQP front-end listens on by default (AMQP's usual port).
pub const DEFAULT_AMQP_LISTEN: &str = "127.0.0.1:5672";

/// The AMQP front-end's configuration (`[amqp]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AmqpConfig {
    /// Serve AMQP at all.
    pub enabled: bool,
    /// Address to listen on.
    pub listen: SocketAddr,
    /// TLS (`[amqp.tls]`: `cert`, `key`, `client_ca`); the broker's `[tls]`
    /// when not given. With it the port speaks only TLS (amqps).
    pub tls: Option<sift_broker::tls::TlsFiles>,
    /// Most AMQP connections open at once; more are refused with
    /// `amqp:resource-limit-exceeded`.
    pub max_connections: u32,
    /// Largest frame accepted (announced as `max-frame-size`); a message
    /// may span many frames.
    pub max_frame_bytes: u32,
    /// Sessions one connection may begin (announced as `channel-max` + 1).
    pub max_sessions: u16,
    /// Links one session may attach; more are refused with
    /// `amqp:resource-limit-exceeded`.
    pub max_links_per_session: u32,
    /// Time a connection may take from its first byte to its `open`,
    /// SASL included.
    pub connect_timeout_ms: u64,
    /// The idle timeout announced: a connection silent for this long is
    /// closed, and the broker sends an empty frame at half of the client's.
    pub idle_timeout_ms: u32,
    /// Credit a producer's link gets: messages it may send before the
    /// broker has published the earlier ones.
    pub producer_credit: u32,
    /// Deliveries a consumer's link has sent and not yet seen settled; past
    /// it the link waits, and the subscription's queue takes over.
    pub consumer_unsettled_max: u32,
    /// The longest a drained consumer's link (`receiveNoWait`, a browser's
    /// enumeration) that reads a stream waits for the broker to say it has
    /// given everything stored, before it answers with what came.
    pub drain_wait_ms_max: u64,
    /// The longest a commit's answer waits for the broker to confirm (and
    /// so, for persistent messages, store) the transaction's messages.
    pub commit_wait_ms_max: u64,
    /// Payload bytes a connection's open transactions may hold until they
    /// are committed or rolled back; past it the connection is closed.
    pub transaction_bytes_max: u64,
    /// The stream durable subscriptions read (the default stream holds the
    /// persistent messages no named stream holds, as a JMS durable
    /// subscriber expects).
    pub durable_stream: String,
}

impl Default for AmqpConfig {
    fn default() -> Self {
        AmqpConfig {
            enabled: true,
            listen: DEFAULT_AMQP_LISTEN.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 5672))),
            tls: None,
            max_connections: 4_096,
            max_frame_bytes: 1024 * 1024,
            max_sessions: 1_024,
            max_links_per_session: 1_024,
            connect_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            producer_credit: 1_000,
            consumer_unsettled_max: 1_000,
            drain_wait_ms_max: 1_000,
            commit_wait_ms_max: 30_000,
            transaction_bytes_max: 64 * 1024 * 1024,
            durable_stream: "default".to_string(),
        }
    }
}

/// The smallest frame AMQP allows (`MIN-MAX-FRAME-SIZE`).
const FRAME_BYTES_MIN: u64 = 512;

impl AmqpConfig {
    /// Checks the limits; the error names the option.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("amqp.max_connections", u64::from(self.max_connections)),
            ("amqp.max_sessions", u64::from(self.max_sessions)),
            ("amqp.max_links_per_session", u64::from(self.max_links_per_session)),
            ("amqp.connect_timeout_ms", self.connect_timeout_ms),
            ("amqp.idle_timeout_ms", u64::from(self.idle_timeout_ms)),
            ("amqp.producer_credit", u64::from(self.producer_credit)),
            ("amqp.consumer_unsettled_max", u64::from(self.consumer_unsettled_max)),
            ("amqp.drain_wait_ms_max", self.drain_wait_ms_max),
            ("amqp.commit_wait_ms_max", self.commit_wait_ms_max),
            ("amqp.transaction_bytes_max", self.transaction_bytes_max),
        ];
        sift_broker::config::require_positive(&positive)?;
        if u64::from(self.max_frame_bytes) < FRAME_BYTES_MIN {
            return Err(format!("amqp.max_frame_bytes must be at least {FRAME_BYTES_MIN} (AMQP's smallest frame)"));
        }
        Ok(())
    }
}

/// A configuration file as this front-end reads it: its own section only;
/// the rest belongs to the broker and the other front-ends.
#[derive(Deserialize)]
struct OwnSection {
    #[serde(default)]
    amqp: AmqpConfig,
}

impl AmqpConfig {
    /// Reads and checks `[amqp]` from a configuration file's text; the
    /// defaults when the file has no such section.
    pub fn from_toml(text: &str) -> Result<AmqpConfig, ConfigError> {
        let file: OwnSection = toml::from_str(text)?;
        file.amqp.validate().map_err(ConfigError::Invalid)?;
        Ok(file.amqp)
    }

    /// The defaults on a free loopback port: for front-ends embedded in
    /// tests and benchmarks.
    pub fn scratch() -> AmqpConfig {
        AmqpConfig { listen: ([127, 0, 0, 1], 0).into(), ..AmqpConfig::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_file_documents_the_defaults() {
        let text = include_str!("../../../sift.example.toml");
        let parsed = AmqpConfig::from_toml(text).expect("the example's [amqp] parses");
        assert_eq!(format!("{parsed:?}"), format!("{:?}", AmqpConfig::default()));
    }

    #[test]
    fn a_frame_limit_below_the_protocol_minimum_is_refused() {
        let error = AmqpConfig::from_toml("[amqp]\nmax_frame_bytes = 100\n").expect_err("too small").to_string();
        assert!(error.contains("amqp.max_frame_bytes"), "{error}");
    }
}
