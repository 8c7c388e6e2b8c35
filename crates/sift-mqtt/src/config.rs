//! `[mqtt]`: the MQTT front-end's address and limits.
//!
//! This crate owns its section of the configuration file: the broker's
//! `Config` lets `[mqtt]` through unread, and [`MqttConfig::from_toml`] reads
//! it from the same text. Every limit has a default a user can run with.

use std::net::SocketAddr;

use serde::Deserialize;
use sift_broker::ConfigError;

/// Address the MQTT front-end listens on by default (MQTT's usual port).
pub const DEFAULT_MQTT_LISTEN: &str = "127.0.0.1:1883";

/// The MQTT front-end's configuration (`[mqtt]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MqttConfig {
    /// Serve MQTT at all.
    pub enabled: bool,
    /// Address to listen on.
    pub listen: SocketAddr,
    /// TLS (`[mqtt.tls]`: `cert`, `key`, `client_ca`); the broker's
    /// `[tls]` when not given. With it the port speaks only TLS.
    pub tls: Option<sift_broker::tls::TlsFiles>,
    /// Most MQTT connections open at once; more get CONNACK "server busy".
    pub max_connections: u32,
    /// Largest packet accepted (MQTT 5's Maximum Packet Size, announced in
    /// CONNACK); a larger one closes the connection with reason 0x95.
    pub max_packet_bytes: u32,
    /// Time a connection may take to send its CONNECT.
    pub connect_timeout_ms: u64,
    /// Most subscriptions (topic filters) one session holds.
    pub max_subscriptions: usize,
    /// Most QoS 1 and 2 publishes the server has in flight towards one
    /// client (capped lower by the client's Receive Maximum), and most a
    /// client may have in flight towards the server (our Receive Maximum).
    pub max_inflight: u16,
    /// Topic aliases a client may set up (MQTT 5's Topic Alias Maximum).
    pub topic_alias_max: u16,
    /// Longest keep-alive an MQTT 5 client gets, in seconds (a longer one,
    /// or none, is cut to it with Server Keep Alive); 0 = the client's.
    pub keep_alive_max_s: u16,
    /// Longest session expiry interval granted, in seconds; an MQTT 3.1.1
    /// session with clean session 0 gets this one.
    pub session_expiry_max_s: u32,
    /// Most sessions kept for disconnected clients; beyond it a session
    /// ends with its connection.
    pub max_sessions: usize,
    /// Deliveries buffered between a session's subscriptions and its
    /// connection (or while it is disconnected); beyond it the broker's
    /// own queue and its policy take over.
    pub session_buffer_deliveries: usize,
    /// Batches of QoS 0 PUBLISH packets (each up to about twice
    /// `delivery.write_batch_bytes`) written by the broker for a session
    /// that ends with its connection, and not yet sent to the client;
    /// past it the broker's writer of the session waits.
    pub delivery_batches: usize,
    /// Most retained messages kept.
    pub max_retained: usize,
    /// Most bytes of retained payload kept.
    pub max_retained_bytes: u64,
    /// Keep retained messages and sessions that outlive their connection
    /// across broker restarts, in a journal under `DATA_DIR/mqtt`.
    pub persistence: bool,
    /// Sync the journal after each record (survives a power cut, not only
    /// a crash).
    pub journal_fsync: bool,
    /// Bytes of superseded records the journal may hold before it is
    /// rewritten compact.
    pub journal_compact_bytes: u64,
    /// A stream whose durable subscriptions carry the QoS 1 and 2
    /// subscriptions of sessions that outlive their connection, so that
    /// what is stored for them survives a restart; empty: none (they are
    /// live subscriptions, restored empty after a restart).
    pub session_stream: String,
}

impl Default for MqttConfig {
    fn default() -> Self {
        MqttConfig {
            enabled: true,
            tls: None,
            listen: DEFAULT_MQTT_LISTEN.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 1883))),
            max_connections: 4_096,
            max_packet_bytes: 8 * 1024 * 1024,
            connect_timeout_ms: 10_000,
            max_subscriptions: 1_024,
            max_inflight: 1_024,
            topic_alias_max: 64,
            keep_alive_max_s: 0,
            session_expiry_max_s: 7 * 24 * 3600,
            max_sessions: 100_000,
            session_buffer_deliveries: 1_024,
            delivery_batches: 4,
            max_retained: 100_000,
            max_retained_bytes: 256 * 1024 * 1024,
            persistence: true,
            journal_fsync: false,
            journal_compact_bytes: 64 * 1024 * 1024,
            session_stream: String::new(),
        }
    }
}

impl MqttConfig {
    /// Checks the limits; the error names the option.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("mqtt.max_connections", self.max_connections as u64),
            ("mqtt.max_packet_bytes", self.max_packet_bytes as u64),
            ("mqtt.connect_timeout_ms", self.connect_timeout_ms),
            ("mqtt.max_subscriptions", self.max_subscriptions as u64),
            ("mqtt.max_inflight", self.max_inflight as u64),
            ("mqtt.session_buffer_deliveries", self.session_buffer_deliveries as u64),
            ("mqtt.delivery_batches", self.delivery_batches as u64),
            ("mqtt.journal_compact_bytes", self.journal_compact_bytes),
        ];
        sift_broker::config::require_positive(&positive)
    }
}

/// A configuration file as this front-end reads it: its own section only;
/// the rest belongs to the broker and the other front-ends.
#[derive(Deserialize)]
struct OwnSection {
    #[serde(default)]
    mqtt: MqttConfig,
}

impl MqttConfig {
    /// Reads and checks `[mqtt]` from a configuration file's text; the
    /// defaults when the file has no such section.
    pub fn from_toml(text: &str) -> Result<MqttConfig, ConfigError> {
        let file: OwnSection = toml::from_str(text)?;
        file.mqtt.validate().map_err(ConfigError::Invalid)?;
        Ok(file.mqtt)
    }

    /// The defaults on a free loopback port: for front-ends embedded in
    /// tests and benchmarks.
    pub fn scratch() -> MqttConfig {
        MqttConfig { listen: ([127, 0, 0, 1], 0).into(), ..MqttConfig::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_file_documents_the_defaults() {
        let text = include_str!("../../../sift.example.toml");
        let parsed = MqttConfig::from_toml(text).expect("the example's [mqtt] parses");
        assert_eq!(format!("{parsed:?}"), format!("{:?}", MqttConfig::default()));
    }

    #[test]
    fn a_misspelt_key_is_an_error_that_names_its_line() {
        let text = "name = \"b\"\n\n[mqtt]\nmax_packet_bytess = 1\n";
        let error = MqttConfig::from_toml(text).expect_err("unknown key").to_string();
        assert!(error.contains("max_packet_bytess") && error.contains("line 4"), "{error}");
    }

    #[test]
    fn a_file_without_the_section_gives_the_defaults() {
        let parsed = MqttConfig::from_toml("name = \"b\"\n").expect("parses");
        assert_eq!(format!("{parsed:?}"), format!("{:?}", MqttConfig::default()));
    }
}
