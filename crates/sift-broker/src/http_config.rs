//! `[http]`: the HTTP front-end's address and limits.
//!
//! The front-end itself lives in the `sift-http` crate; its configuration
//! lives here so that one TOML file and one [`crate::Config`] describe the
//! whole broker. Every limit has a default that a user can run with.

use std::net::SocketAddr;

use serde::Deserialize;

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
            listen: DEFAULT_HTTP_LISTEN.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 7480))),
            max_connections: 4_096,
            max_body_bytes: 8 * 1024 * 1024,
            max_header_bytes: 16 * 1024,
            header_timeout_ms: 60_000,
            body_timeout_ms: 30_000,
            publish_sessions: 2,
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
            ("http.max_subscriptions", u64::from(self.max_subscriptions)),
            ("http.subscription_idle_ms", self.subscription_idle_ms),
            ("http.event_buffer", self.event_buffer as u64),
            ("http.slow_client_timeout_ms", self.slow_client_timeout_ms),
            ("http.callback_timeout_ms", self.callback_timeout_ms),
            ("http.callback_backoff_max_ms", self.callback_backoff_max_ms),
            ("http.max_ws_message_bytes", self.max_ws_message_bytes as u64),
        ];
        crate::config::require_positive(&positive)?;
        if self.max_header_bytes < 8192 {
            return Err(format!("http.max_header_bytes is {}; it must be at least 8192", self.max_header_bytes));
        }
        Ok(())
    }
}
