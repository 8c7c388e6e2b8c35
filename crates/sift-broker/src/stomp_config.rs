//! `[stomp]`: the STOMP front-end's address and limits (the front-end is
//! the `sift-stomp` crate; its configuration lives with the broker's).

use std::net::SocketAddr;

use serde::Deserialize;

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
            max_connections: 4_096,
            max_frame_bytes: 8 * 1024 * 1024,
            max_headers: 128,
            max_header_line_bytes: 16 * 1024,
            connect_timeout_ms: 10_000,
            heart_beat_ms: 10_000,
            max_transaction_frames: 10_000,
            outgoing_frames: 1_024,
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
        ];
        crate::config::require_positive(&positive)
    }
}
