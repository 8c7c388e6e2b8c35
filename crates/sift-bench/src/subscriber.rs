//! Bench subscribers: real clients that count deliveries and record the
//! latency of the stamped ones, until they have everything or go idle.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sift_client::{AckPolicy, Client, Delivery, SubscribeOptions, Subscription};
use sift_core::DeliveryMode;

use crate::error::BenchError;
use crate::publisher::connect;
use crate::stamp::{nanos_since, sent_at_ns};
use crate::stats::Samples;

/// Queue bound a bench subscription asks of the broker: deep enough that a
/// best-effort subscriber keeping up on average loses nothing to bursts.
pub const SUBSCRIPTION_QUEUE_CAPACITY: u32 = 1_048_576;

/// Reliable deliveries a bench subscription lets be unacknowledged.
pub const SUBSCRIPTION_UNACKED_MAX: u32 = 65_536;

/// Subscribe options of a bench subscriber on `topic_filter` for `mode`:
/// reliable messages are acknowledged as they are handed over, best-effort
/// ones count as acknowledged once written.
pub fn subscribe_options(topic_filter: &str, mode: DeliveryMode) -> SubscribeOptions {
    let ack = if mode.needs_ack() { AckPolicy::Auto } else { AckPolicy::OnWrite };
    SubscribeOptions::new(topic_filter)
        .ack(ack)
        .max_unacked(SUBSCRIPTION_UNACKED_MAX)
        .queue_capacity(SUBSCRIPTION_QUEUE_CAPACITY)
}

/// Connects `count` subscribers to `address`, one connection each, each
/// subscribed with `options(index)`.
pub async fn subscribe_all(
    address: &str,
    count: usize,
    options: impl Fn(usize) -> SubscribeOptions,
) -> Result<Vec<(Client, Subscription)>, BenchError> {
    let mut subscribers = Vec::with_capacity(count);
    for index in 0..count {
        let client = connect(address, format!("bench-sub-{index}")).await?;
        let subscription = client.subscribe(options(index)).await?;
        subscribers.push((client, subscription));
    }
    Ok(subscribers)
}

/// The next delivery: at once when one is waiting (no timer to arm), else
/// waiting up to `idle`; `None` when nothing came.
pub async fn next_delivery(subscription: &mut Subscription, idle: Duration) -> Option<Delivery> {
    if let Some(delivery) = subscription.try_next() {
        return Some(delivery);
    }
    tokio::time::timeout(idle, subscription.next()).await.ok().flatten()
}

/// What one subscriber received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Deliveries counted.
    pub count: u64,
    /// Latency of the stamped ones, in nanoseconds.
    pub latency_ns: Samples,
}

/// Receives until `expected` deliveries arrived or none came for `idle`,
/// recording the latency of stamped ones against `epoch` and raising
/// `last_receive_ns` to the time of the last delivery; then closes the client.
pub async fn receive(
    client: Client,
    mut subscription: Subscription,
    expected: u64,
    idle: Duration,
    epoch: Instant,
    last_receive_ns: Arc<AtomicU64>,
) -> Received {
    let mut latency_ns = Samples::new();
    let mut count = 0u64;
    while count < expected {
        let Some(delivery) = next_delivery(&mut subscription, idle).await else {
            break;
        };
        // Deliveries already waiting arrived with this one (one socket
        // read), so one clock reading stamps them all.
        let now_ns = nanos_since(epoch);
        let mut batch = Some(delivery);
        while let Some(delivery) = batch {
            let sent_ns = sent_at_ns(&delivery.message.payload);
            if sent_ns != 0 {
                latency_ns.record(now_ns.saturating_sub(sent_ns).max(1));
            }
            count += 1;
            batch = if count < expected { subscription.try_next() } else { None };
        }
        last_receive_ns.fetch_max(now_ns, Ordering::Relaxed);
    }
    client.close().await;
    Received { count, latency_ns }
}
