//! What a publisher thread and a subscriber thread do at one point:
//! connect, wait at the gate, publish paced or receive, read their own
//! thread's CPU time around that, report, and close when let.

use std::time::{Duration, Instant};

use sift_client::{Client, Subscription};
use sift_core::TopicName;

use super::plan::Point;
use super::threads::Links;
use crate::error::BenchError;
use crate::publisher::{connect, StampedSender};
use crate::stamp::{nanos_since, sent_at_ns};
use crate::stats::Samples;
use crate::subscriber::{next_delivery, subscribe_options};
use sift_client::cpu::{elapsed_ns, thread_cpu_ns};

/// A subscriber that receives nothing for this long has all it will get
/// (messages a `keep-last` queue overwrote never come)…
const IDLE_END_MIN: Duration = Duration::from_millis(500);
/// …or for this many publish periods, when that is longer.
const IDLE_END_PERIODS: u32 = 5;

/// What one publisher of a point is to do.
#[derive(Debug, Clone)]
pub struct PublisherJob {
    /// Broker address.
    pub address: String,
    /// Client name.
    pub name: String,
    /// Topic published on.
    pub topic: TopicName,
    /// The point.
    pub point: Point,
    /// Delay of this publisher's first message after the start, so that
    /// several publishers do not send in lockstep.
    pub offset: Duration,
    /// The run's clock origin, shared by every thread for the send stamps.
    pub epoch: Instant,
}

/// What one publisher measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Published {
    /// Messages published.
    pub messages: u64,
    /// Seconds from its first publish until the broker had them all.
    pub seconds: f64,
    /// CPU time of its thread meanwhile, in nanoseconds.
    pub cpu_ns: Option<u64>,
}

/// A publisher thread's body.
pub async fn publisher(job: PublisherJob, mut links: Links<Published>) {
    let client = match connect(&job.address, job.name.clone()).await {
        Ok(client) => client,
        Err(error) => return links.report(Err(error)),
    };
    if links.ready_then_wait_for_run().await {
        links.report(publish_paced(&client, &job).await);
        links.wait_for_close().await;
    }
    client.close().await;
}

/// Publishes the point's share at its rate, each message stamped as it
/// leaves; returns once the broker has handled every message (reliable
/// ones confirmed, then a ping answered).
async fn publish_paced(client: &Client, job: &PublisherJob) -> Result<Published, BenchError> {
    let point = &job.point;
    let cpu_before = thread_cpu_ns();
    let started = Instant::now() + job.offset;
    let period = Duration::from_secs_f64(1.0 / point.rate_hz as f64);
    let mut sender = StampedSender::new(job.topic.clone(), point.qos.mode, point.size);
    for sent in 0..point.messages_per_publisher {
        wait_until(started + period.mul_f64(sent as f64)).await;
        sender.send(client, nanos_since(job.epoch)).await?;
    }
    sender.finish().await;
    // The answer to a ping comes after the broker has read every publish
    // before it: the messages are then queued for the subscribers.
    client.ping().await?;
    let seconds = Instant::now().saturating_duration_since(started).as_secs_f64();
    let cpu_ns = elapsed_ns(cpu_before, thread_cpu_ns());
    Ok(Published { messages: point.messages_per_publisher, seconds, cpu_ns })
}

/// Waits until `due`, to the precision of a thread sleep rather than
/// tokio's millisecond timer wheel: at a millisecond's granularity,
/// messages due within one millisecond would leave together, and a
/// `keep-last:1` queue would then overwrite all but the last of each such
/// burst, which would measure the pacing rather than the broker.
///
/// The publisher's runtime is its own, so blocking its thread holds up
/// only its own connection; it first yields once, so that the connection's
/// writer sends what was published before the thread sleeps.
async fn wait_until(due: Instant) {
    tokio::task::yield_now().await;
    let now = Instant::now();
    if due > now {
        std::thread::sleep(due - now);
    }
}

/// What one subscriber is to do.
#[derive(Debug, Clone)]
pub struct SubscriberJob {
    /// Broker address.
    pub address: String,
    /// Client name.
    pub name: String,
    /// Topic subscribed to.
    pub topic: String,
    /// The point.
    pub point: Point,
    /// The run's clock origin.
    pub epoch: Instant,
}

/// What one subscriber measured.
#[derive(Debug, Clone)]
pub struct Received {
    /// Deliveries received.
    pub count: u64,
    /// Publish-to-delivery latency of each, in nanoseconds.
    pub latency_ns: Samples,
    /// CPU time of its thread from the start until it stopped receiving, in nanoseconds.
    pub cpu_ns: Option<u64>,
}

/// A subscriber thread's body.
pub async fn subscriber(job: SubscriberJob, mut links: Links<Received>) {
    let client = match connect(&job.address, job.name.clone()).await {
        Ok(client) => client,
        Err(error) => return links.report(Err(error)),
    };
    let options = subscribe_options(&job.topic, job.point.qos.mode).policy(job.point.qos.policy);
    let subscription = match client.subscribe(options).await {
        Ok(subscription) => subscription,
        Err(error) => {
            links.report(Err(error.into()));
            return client.close().await;
        }
    };
    if links.ready_then_wait_for_run().await {
        links.report(Ok(receive(subscription, &job).await));
        links.wait_for_close().await;
    }
    client.close().await;
}

/// Receives until every message came or none came for a while.
async fn receive(mut subscription: Subscription, job: &SubscriberJob) -> Received {
    let cpu_before = thread_cpu_ns();
    let expected = job.point.messages();
    let period = Duration::from_secs_f64(1.0 / job.point.rate_hz as f64);
    let idle = IDLE_END_MIN.max(period * IDLE_END_PERIODS);
    let (mut count, mut latency_ns) = (0, Samples::new());
    while count < expected {
        let Some(delivery) = next_delivery(&mut subscription, idle).await else { break };
        // Paced messages mostly come one per read, so each gets its own
        // clock reading.
        let now_ns = nanos_since(job.epoch);
        latency_ns.record(now_ns.saturating_sub(sent_at_ns(&delivery.message.payload)).max(1));
        count += 1;
    }
    // Read once at the end: a reading per delivery would cost more than
    // the delivery. Waiting out an idle end is one timer sleep, which costs
    // next to nothing.
    Received { count, latency_ns, cpu_ns: elapsed_ns(cpu_before, thread_cpu_ns()) }
}
