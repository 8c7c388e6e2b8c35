//! `[http]`: the HTTP front-end's address and limits.
//!
//! This crate owns its section of the configuration file: the broker's
//! `Config` lets `[http]` through unread, and [`HttpConfig::from_toml`] reads
//! it from the same text. Every limit has a default a user can run with.

use std::net::SocketAddr;

use serde::Deserialize;
use sift_broker::ConfigError;

/// Address the HTTP front-end listens on by default.
pub const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:7480";

/// The HTTP front-end's configuration (`[http]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Serve HTTP at all.
    pub enabled: bool,
    /// Address to listen on.
    pub listen: SocketAddr,
    /// TLS (`[http.tls]`: `cert`, `key`, `client_ca`); the broker's
    /// `[tls]` when not given. With it the port speaks only TLS.
    pub tls: Option<sift_broker::tls::TlsFiles>,
    /// Most HTTP connections open at once; more are closed on accept.
    pub max_connections: u32,
    /// Largest request body accepted (413 above it).
    pub max_body_bytes: usize,
    /// Bytes a connection may buffer while reading a request's head: the
    /// bound on the request line and headers (431 above it). At least 8192.
    pub max_header_bytes: usize,
    /// Time a connection may take to send a request's head, counted from
    /// the end of the previous response on a kept-alive connection: the
    /// idle timeout.
    pub header_timeout_ms: u64,
    /// Time a request may take to send its body (408 after it).
    pub body_timeout_ms: u64,
    /// In-process broker sessions that carry `POST /v1/messages`.
    pub publish_sessions: u32,
    /// Signed-in broker sessions kept for callers that send
    /// `Authorization` (one per user, reused while the credentials stay
    /// the same; the oldest is closed to make room).
    pub signed_in_sessions_max: u32,
    /// Most HTTP subscriptions (`POST /v1/subscriptions`) at once.
    pub max_subscriptions: u32,
    /// An HTTP subscription with neither an event stream attached nor a
    /// callback is deleted after this long.
    pub subscription_idle_ms: u64,
    /// Events a server-sent-event or WebSocket stream buffers for its client.
    pub event_buffer: usize,
    /// A client that reads none of its events for this long is disconnected
    /// (server-sent events and WebSocket).
    pub slow_client_timeout_ms: u64,
    /// Time a callback POST may take before it counts as failed.
    pub callback_timeout_ms: u64,
    /// Longest pause between retries of a failed callback (backoff doubles up to it).
    pub callback_backoff_max_ms: u64,
    /// Largest WebSocket message accepted from a client.
    pub max_ws_message_bytes: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            enabled: true,
            tls: None,
            listen: DEFAULT_HTTP_LISTEN.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 7480))),
            max_connections: 4_096,
            max_body_bytes: 8 * 1024 * 1024,
            max_header_bytes: 16 * 1024,
            header_timeout_ms: 60_000,
            body_timeout_ms: 30_000,
            publish_sessions: 2,
            signed_in_sessions_max: 1_024,
            max_subscriptions: 10_000,
            subscription_idle_ms: 60_000,
            event_buffer: 1_024,
            slow_client_timeout_ms: 30_000,
            callback_timeout_ms: 5_000,
            callback_backoff_max_ms: 30_000,
            max_ws_message_bytes: 8 * 1024 * 1024,
        }
    }
}

impl HttpConfig {
    /// Checks the limits; the error names the option.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("http.max_connections", u64::from(self.max_connections)),
            ("http.max_body_bytes", self.max_body_bytes as u64),
            ("http.header_timeout_ms", self.header_timeout_ms),
            ("http.body_timeout_ms", self.body_timeout_ms),
            ("http.publish_sessions", u64::from(self.publish_sessions)),
            ("http.signed_in_sessions_max", u64::from(self.signed_in_sessions_max)),
            ("http.max_subscriptions", u64::from(self.max_subscriptions)),
            ("http.subscription_idle_ms", self.subscription_idle_ms),
            ("http.event_buffer", self.event_buffer as u64),
            ("http.slow_client_timeout_ms", self.slow_client_timeout_ms),
            ("http.callback_timeout_ms", self.callback_timeout_ms),
            ("http.callback_backoff_max_ms", self.callback_backoff_max_ms),
            ("http.max_ws_message_bytes", self.max_ws_message_bytes as u64),
        ];
        sift_broker::config::require_positive(&positive)?;
        if self.max_header_bytes < 8192 {
            return Err(format!("http.max_header_bytes is {}; it must be at least 8192", self.max_header_bytes));
        }
        Ok(())
    }
}

/// A configuration file as this front-end reads it: its own section only;
/// the rest belongs to the broker and the other front-ends.
#[derive(Deserialize)]
struct OwnSection {
    #[serde(default)]
    http: HttpConfig,
}

impl HttpConfig {
    /// Reads and checks `[http]` from a configuration file's text; the
    /// defaults when the file has no such section.
    pub fn from_toml(text: &str) -> Result<HttpConfig, ConfigError> {
        let file: OwnSection = toml::from_str(text)?;
        file.http.validate().map_err(ConfigError::Invalid)?;
        Ok(file.http)
    }

    /// The defaults on a free loopback port: for front-ends embedded in
    /// tests and benchmarks.
    pub fn scratch() -> HttpConfig {
        HttpConfig { listen: ([127, 0, 0, 1], 0).into(), ..HttpConfig::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_file_documents_the_defaults() {
        let text = include_str!("../../../sift.example.toml");
        let parsed = HttpConfig::from_toml(text).expect("the example's [http] parses");
        assert_eq!(format!("{parsed:?}"), format!("{:?}", HttpConfig::default()));
    }

    #[test]
    fn a_misspelt_key_is_an_error_that_names_its_line() {
        let text = "name = \"b\"\n\n[http]\nmax_body_bytess = 1\n";
        let error = HttpConfig::from_toml(text).expect_err("unknown key").to_string();
        assert!(error.contains("max_body_bytess") && error.contains("line 4"), "{error}");
    }

    #[test]
    fn a_file_without_the_section_gives_the_defaults() {
        let parsed = HttpConfig::from_toml("name = \"b\"\n").expect("parses");
        assert_eq!(format!("{parsed:?}"), format!("{:?}", HttpConfig::default()));
    }
}
