//! Brokerless publish/subscribe over NORM reliable multicast (FJM2): a
//! transport beside the TCP one, with the same message model.
//!
//! A publisher sends each message as one NORM data object: the object's
//! data is `[WIRE_VERSION, mode]` followed by the message in the native
//! protocol's message encoding (PROTOCOL §5), so that a receiver, a gateway
//! or a broker reads it with the same decoder. NORM segments large
//! messages into packets and reassembles them; a reliable message is
//! repaired on NACK (NORM's suppression, back-off and GRTT), a best-effort
//! one is not: it alone also carries the two bytes as NORM info, from
//! which receivers switch repair off before its data arrives. (Info costs
//! a packet per object, so a reliable object goes without.) Each
//! receiver gets every message of the group and keeps those its local
//! subscriptions match ([`LocalInterest`]: the broker's topic trie and
//! content index), in each publisher's order ([`Reorder`]), and is told of
//! what it missed.

pub mod announce;
mod gateway;
mod interest;
mod order;
mod publisher;
mod subscriber;

use std::net::SocketAddrV4;
use std::time::Duration;

pub use gateway::{Gateway, GatewayCounters, GATEWAY_DELIVERIES_MAX, GATEWAY_PROPERTY, RECENT_IDS_MAX};
pub use interest::LocalInterest;
pub use order::{Ordered, Reorder, REORDER_HELD_BYTES_MAX, REORDER_HELD_MAX};
pub use publisher::MulticastPublisher;
pub use subscriber::{MulticastEvent, MulticastSubscriber, SubscriberCounters};

/// Version byte that starts a multicast object's data.
pub const WIRE_VERSION: u8 = 1;
/// Info mode byte: best-effort (not repaired).
pub const MODE_BEST_EFFORT: u8 = 0;
/// Info mode byte: reliable (repaired on NACK).
pub const MODE_RELIABLE: u8 = 1;
/// Info mode byte: a subscriber's interest announcement ([`announce`]).
pub const MODE_INTEREST: u8 = 2;

/// Default time a receiver holds a publisher's later messages for a
/// missing one that NORM neither delivered nor reported lost: repairs on a
/// loaded LAN take seconds at worst.
pub const REORDER_WAIT_DEFAULT: Duration = Duration::from_secs(5);

/// Default time a publisher serves repairs after its flush.
pub const LINGER_DEFAULT: Duration = Duration::from_secs(1);

/// Largest message a multicast publisher sends or a receiver accepts.
pub const MULTICAST_MESSAGE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// How to join a group.
#[derive(Debug, Clone)]
pub struct MulticastOptions {
    /// Group and port.
    pub group: SocketAddrV4,
    /// Interface to use (`None`: the routing table's choice).
    pub interface: Option<String>,
    /// This node's NORM id (unique in the group; random by default).
    pub node_id: u32,
    /// Transmit rate, bits per second.
    pub tx_rate_bps: f64,
    /// Transmit buffer: how much a sender keeps for repairs.
    pub tx_buffer_bytes: u32,
    /// Receive buffer per remote sender.
    pub rx_buffer_bytes: u32,
    /// Received message bytes queued for the application, at most; more
    /// are dropped and counted (a subscriber slower than the group).
    pub rx_queue_bytes_max: u64,
    /// Also receive this host's own sends (several nodes on one host).
    pub loopback: bool,
    /// How long a receiver holds later messages for a missing one.
    pub reorder_wait: Duration,
    /// How long a publisher keeps serving repairs after its flush, for
    /// receivers whose last requests come late (a busy host).
    pub linger: Duration,
    /// NORM's test hook: drop this share of sent packets (percent).
    pub tx_loss_percent: f64,
    /// NORM's test hook: drop this share of received packets (percent).
    pub rx_loss_percent: f64,
}

impl MulticastOptions {
    /// Defaults for `group`.
    pub fn new(group: SocketAddrV4) -> MulticastOptions {
        MulticastOptions {
            group,
            interface: None,
            node_id: random_node_id(),
            tx_rate_bps: sift_norm::TX_RATE_BPS_DEFAULT,
            tx_buffer_bytes: sift_norm::TX_BUFFER_BYTES_DEFAULT,
            rx_buffer_bytes: sift_norm::RX_BUFFER_BYTES_DEFAULT,
            rx_queue_bytes_max: sift_norm::SESSION_QUEUED_BYTES_MAX_DEFAULT,
            loopback: false,
            reorder_wait: REORDER_WAIT_DEFAULT,
            linger: LINGER_DEFAULT,
            tx_loss_percent: 0.0,
            rx_loss_percent: 0.0,
        }
    }

    /// The NORM session options these give.
    pub(crate) fn session(&self) -> sift_norm::SessionOptions {
        sift_norm::SessionOptions {
            interface: self.interface.clone(),
            tx_rate_bps: self.tx_rate_bps,
            tx_buffer_bytes: self.tx_buffer_bytes,
            rx_buffer_bytes: self.rx_buffer_bytes,
            queued_bytes_max: self.rx_queue_bytes_max,
            loopback: self.loopback,
            tx_loss_percent: self.tx_loss_percent,
            rx_loss_percent: self.rx_loss_percent,
            repair_filter: Some(wants_repair),
            ..sift_norm::SessionOptions::new(*self.group.ip(), self.group.port(), self.node_id)
        }
    }
}

/// Sleeps until a std `deadline`, or for ever without one.
pub(crate) async fn sleep_until(deadline: Option<std::time::Instant>) {
    crate::sleep_until(deadline.map(tokio::time::Instant::from_std)).await;
}

/// A receiver asks for repairs of reliable messages only (the objects
/// with no info, or info of another mode).
fn wants_repair(info: &[u8]) -> bool {
    info.get(1) != Some(&MODE_BEST_EFFORT)
}

/// An object's data: its two-byte header, then `body`.
pub(crate) fn object_data(mode: u8, body: &[u8]) -> bytes::Bytes {
    let mut data = bytes::BytesMut::with_capacity(2 + body.len());
    data.extend_from_slice(&[WIRE_VERSION, mode]);
    data.extend_from_slice(body);
    data.freeze()
}

/// Splits a received object's data into its mode and body; `None` when
/// it does not start with this version's header.
pub(crate) fn split_object(data: &bytes::Bytes) -> Option<(u8, bytes::Bytes)> {
    match data.first() {
        Some(&WIRE_VERSION) if data.len() >= 2 => Some((data[1], data.slice(2..))),
        _ => None,
    }
}

/// A node id from the clock and the process id; NORM ids need only be
/// unique within a group.
fn random_node_id() -> u32 {
    let nanos = crate::system_now_ns();
    ((nanos as u32) ^ (nanos >> 32) as u32 ^ std::process::id().rotate_left(13)).max(1)
}

/// Why a multicast call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MulticastError {
    /// NORM refused.
    #[error(transparent)]
    Norm(#[from] sift_norm::NormError),
    /// The message cannot be sent.
    #[error("cannot send: {0}")]
    Encode(String),
}
