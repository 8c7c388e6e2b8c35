//! Measured runs: P publishers → S subscribers on one topic, as fast as
//! possible or paced ([`throughput`]), or one message in flight at a time
//! ([`one_in_flight`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sift_core::{DeliveryMode, TopicName};

use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::publisher::{connect, publish_share, share_of, Pace};
use crate::stamp::{nanos_since, sent_at_ns, MessageMaker, STAMP_BYTES};
use crate::stats::Samples;
use crate::subscriber::{next_delivery, receive, subscribe_all, subscribe_options};

/// A subscriber that receives nothing for this long has everything it will get.
pub const IDLE_END_DEFAULT: Duration = Duration::from_secs(3);

/// What a run sends, and to how many.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Topic published on and subscribed to.
    pub topic: String,
    /// Publishers, one connection each.
    pub publishers: usize,
    /// Subscribers, one connection each; each gets every message.
    pub subscribers: usize,
    /// Payload bytes per message, at least [`STAMP_BYTES`].
    pub payload_bytes: usize,
    /// Messages published in all, split across the publishers.
    pub messages: u64,
    /// Delivery mode of every message.
    pub mode: DeliveryMode,
    /// Messages per second in all, for a paced run; `None` for as fast as possible.
    pub rate: Option<u64>,
    /// How long a subscriber waits for the next delivery before it stops.
    pub idle_end: Duration,
}

impl Workload {
    /// One best-effort publisher to one subscriber, unpaced, `messages` of
    /// `payload_bytes` on `topic`.
    pub fn new(topic: &str, payload_bytes: usize, messages: u64) -> Workload {
        Workload {
            topic: topic.to_string(),
            publishers: 1,
            subscribers: 1,
            payload_bytes,
            messages,
            mode: DeliveryMode::BestEffort,
            rate: None,
            idle_end: IDLE_END_DEFAULT,
        }
    }

    /// Checks what the runs need: a payload that holds the stamp, a
    /// publisher, a rate above zero, a mode that is available.
    pub fn validate(&self) -> Result<TopicName, BenchError> {
        if self.payload_bytes < STAMP_BYTES {
            return Err(BenchError::Usage(format!(
                "--size must be at least {STAMP_BYTES} bytes (the send time rides in the payload)"
            )));
        }
        if self.publishers == 0 {
            return Err(BenchError::Usage("--pubs must be at least 1".into()));
        }
        if self.rate == Some(0) {
            return Err(BenchError::Usage("--rate must be at least 1 message per second".into()));
        }
        if self.mode == DeliveryMode::Persistent {
            return Err(BenchError::Usage("--mode persistent is not available yet".into()));
        }
        TopicName::new(&self.topic).map_err(|error| BenchError::Usage(format!("topic {}: {error}", self.topic)))
    }
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Messages published.
    pub published: u64,
    /// Deliveries counted by all subscribers together.
    pub delivered: u64,
    /// From the first publish until every publisher was done.
    pub publish_seconds: f64,
    /// From the first publish until the last delivery.
    pub seconds: f64,
    /// Publish-to-delivery time of the stamped messages, in nanoseconds.
    pub latency_ns: Samples,
}

impl RunResult {
    /// Messages published per second.
    pub fn publish_msgs_per_s(&self) -> f64 {
        per_second(self.published, self.publish_seconds)
    }

    /// Deliveries per second, all subscribers together.
    pub fn delivered_msgs_per_s(&self) -> f64 {
        per_second(self.delivered, self.seconds)
    }
}

fn per_second(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// Subscribers first, then publishers as fast as they can (or paced); ends
/// when every subscriber has every message or has been idle for
/// `workload.idle_end`.
pub async fn throughput(endpoints: &Endpoints, workload: &Workload) -> Result<RunResult, BenchError> {
    let topic = workload.validate()?;
    let mode = workload.mode;
    let subscribers =
        subscribe_all(endpoints.subscribe_addr(), workload.subscribers, |_| subscribe_options(&workload.topic, mode))
            .await?;
    endpoints.interest_ready().await?;
    let epoch = Instant::now();
    let last_receive_ns = Arc::new(AtomicU64::new(0));
    let receivers: Vec<_> = subscribers
        .into_iter()
        .map(|(client, subscription)| {
            let (expected, idle, last) = (workload.messages, workload.idle_end, last_receive_ns.clone());
            tokio::spawn(receive(client, subscription, expected, idle, epoch, last))
        })
        .collect();
    let started_ns = nanos_since(epoch);
    let mut publishers = Vec::with_capacity(workload.publishers);
    for index in 0..workload.publishers {
        let share = share_of(workload.messages, workload.publishers, index);
        let client = connect(endpoints.publish_addr(), format!("bench-pub-{index}")).await?;
        let rate = workload.rate.map(|rate| (rate / workload.publishers as u64).max(1));
        let pace = Pace { size: workload.payload_bytes, rate };
        publishers.push(tokio::spawn(publish_share(client, topic.clone(), share, mode, pace, epoch)));
    }
    let mut published = 0;
    for publisher in publishers {
        let joined = publisher.await.map_err(|error| BenchError::Task { role: "publisher", reason: error.to_string() });
        published += joined??;
    }
    let publish_seconds = nanos_since(epoch).saturating_sub(started_ns) as f64 / 1e9;
    let (mut delivered, mut latency_ns) = (0, Samples::new());
    for receiver in receivers {
        let received =
            receiver.await.map_err(|error| BenchError::Task { role: "subscriber", reason: error.to_string() })?;
        delivered += received.count;
        latency_ns.merge(&received.latency_ns);
    }
    let seconds = last_receive_ns.load(Ordering::Relaxed).saturating_sub(started_ns) as f64 / 1e9;
    // The receivers closed their clients; the next run starts clean.
    endpoints.interest_gone().await?;
    Ok(RunResult { published, delivered, publish_seconds, seconds, latency_ns })
}

/// One publisher sends `workload.messages` one at a time, each only after
/// every subscriber received the previous: the latency of an idle system.
pub async fn one_in_flight(endpoints: &Endpoints, workload: &Workload) -> Result<RunResult, BenchError> {
    let topic = workload.validate()?;
    let mode = workload.mode;
    let mut subscribers =
        subscribe_all(endpoints.subscribe_addr(), workload.subscribers, |_| subscribe_options(&workload.topic, mode))
            .await?;
    endpoints.interest_ready().await?;
    let publisher = connect(endpoints.publish_addr(), "bench-pub-latency".into()).await?;
    let epoch = Instant::now();
    let mut latency_ns = Samples::new();
    let mut maker = MessageMaker::new(topic, mode, workload.payload_bytes);
    let mut delivered = 0;
    for sequence in 0..workload.messages {
        let message = maker.message(nanos_since(epoch));
        if mode.needs_ack() {
            publisher.start_confirmed(message, sift_client::PublishOptions::default()).await?;
        } else {
            publisher.publish(message).await?;
        }
        for (_, subscription) in subscribers.iter_mut() {
            let Some(delivery) = next_delivery(subscription, workload.idle_end).await else {
                let idle = workload.idle_end.as_secs_f64();
                return Err(BenchError::Timeout(format!("a subscriber received message {sequence} (idle {idle} s)")));
            };
            latency_ns.record(nanos_since(epoch).saturating_sub(sent_at_ns(&delivery.message.payload)).max(1));
            delivered += 1;
        }
    }
    let seconds = epoch.elapsed().as_secs_f64();
    publisher.close().await;
    for (client, _) in subscribers {
        client.close().await;
    }
    endpoints.interest_gone().await?;
    Ok(RunResult { published: workload.messages, delivered, publish_seconds: seconds, seconds, latency_ns })
}
