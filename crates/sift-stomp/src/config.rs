//! `[stomp]`: the STOMP front-end's address and limits.
//!
//! This crate owns its section of the configuration file: the broker's
//! `Config` lets `[stomp]` through unread, and [`StompConfig::from_toml`] reads
//! it from the same text. Every limit has a default a user can run with.

use std::net::SocketAddr;

use serde::Deserialize;
use sift_broker::ConfigError;

/// Address the STOMP front-end listens on by default (STOMP's usual port).
pub const DEFAULT_STOMP_LISTEN: &str = "127.0.0.1:61613";

/// The STOMP front-end's configuration (`[stomp]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StompConfig {
    /// Serve STOMP at all.
    pub enabled: bool,
    /// Address to listen on.
    pub listen: SocketAddr,
    /// TLS (`[stomp.tls]`: `cert`, `key`, `client_ca`); the broker's
    /// `[tls]` when not given. With it the port speaks only TLS.
    pub tls: Option<sift_broker::tls::TlsFiles>,
    /// Most STOMP connections open at once; more are refused with an ERROR.
    pub max_connections: u32,
    /// Largest frame accepted: command, headers and body.
    pub max_frame_bytes: usize,
    /// Most headers in one frame.
    pub max_headers: usize,
    /// Longest command or header line.
    pub max_header_line_bytes: usize,
    /// Time a connection may take to send its CONNECT.
    pub connect_timeout_ms: u64,
    /// The heart-beat interval the server offers and asks for; 0 = none.
    pub heart_beat_ms: u64,
    /// Frames one transaction may hold before COMMIT.
    pub max_transaction_frames: usize,
    /// Frames queued towards one client (deliveries and answers) before
    /// its subscriptions wait.
    pub outgoing_frames: usize,
    /// Batches of MESSAGE frames (each up to about twice
    /// `delivery.write_batch_bytes`) written by the broker and not yet
    /// sent to one client; past it the broker's writer of the session
    /// waits, and the session's queues and policies take over.
    pub delivery_batches: usize,
    /// The stream durable subscriptions read unless SUBSCRIBE names one
    /// (`sift-stream`); the default stream holds the persistent messages
    /// no named stream holds, as a JMS durable subscriber expects.
    pub durable_stream: String,
}

impl Default for StompConfig {
    fn default() -> Self {
        StompConfig {
            enabled: true,
            listen: DEFAULT_STOMP_LISTEN.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 61613))),
            tls: None,
            max_connections: 4_096,
            max_frame_bytes: 8 * 1024 * 1024,
            max_headers: 128,
            max_header_line_bytes: 16 * 1024,
            connect_timeout_ms: 10_000,
            heart_beat_ms: 10_000,
            max_transaction_frames: 10_000,
            outgoing_frames: 1_024,
            delivery_batches: 4,
            durable_stream: "default".to_string(),
        }
    }
}

impl StompConfig {
    /// Checks the limits; the error names the option.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("stomp.max_connections", self.max_connections as u64),
            ("stomp.max_frame_bytes", self.max_frame_bytes as u64),
            ("stomp.max_headers", self.max_headers as u64),
            ("stomp.max_header_line_bytes", self.max_header_line_bytes as u64),
            ("stomp.connect_timeout_ms", self.connect_timeout_ms),
            ("stomp.max_transaction_frames", self.max_transaction_frames as u64),
            ("stomp.outgoing_frames", self.outgoing_frames as u64),
            ("stomp.delivery_batches", self.delivery_batches as u64),
        ];
        sift_broker::config::require_positive(&positive)
    }
}

/// A configuration file as this front-end reads it: its own section only;
/// the rest belongs to the broker and the other front-ends.
#[derive(Deserialize)]
struct OwnSection {
    #[serde(default)]
    stomp: StompConfig,
}

impl StompConfig {
    /// Reads and checks `[stomp]` from a configuration file's text; the
    /// defaults when the file has no such section.
    pub fn from_toml(text: &str) -> Result<StompConfig, ConfigError> {
        let file: OwnSection = toml::from_str(text)?;
        file.stomp.validate().map_err(ConfigError::Invalid)?;
        Ok(file.stomp)
    }

    /// The defaults on a free loopback port: for front-ends embedded in
    /// tests and benchmarks.
    pub fn scratch() -> StompConfig {
        StompConfig { listen: ([127, 0, 0, 1], 0).into(), ..StompConfig::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_file_documents_the_defaults() {
        let text = include_str!("../../../sift.example.toml");
        let parsed = StompConfig::from_toml(text).expect("the example's [stomp] parses");
        assert_eq!(format!("{parsed:?}"), format!("{:?}", StompConfig::default()));
    }

    #[test]
    fn a_misspelt_key_is_an_error_that_names_its_line() {
        let text = "name = \"b\"\n\n[stomp]\nmax_frame_bytess = 1\n";
        let error = StompConfig::from_toml(text).expect_err("unknown key").to_string();
        assert!(error.contains("max_frame_bytess") && error.contains("line 4"), "{error}");
    }

    #[test]
    fn a_file_without_the_section_gives_the_defaults() {
        let parsed = StompConfig::from_toml("name = \"b\"\n").expect("parses");
        assert_eq!(format!("{parsed:?}"), format!("{:?}", StompConfig::default()));
    }
}
