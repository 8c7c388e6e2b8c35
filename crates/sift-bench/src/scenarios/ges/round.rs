//! One matching rate on a running network: the subscribers (the background
//! clients on every broker and the measuring ones), then its points one
//! after the other, then every client closed.
//!
//! As in the thesis and in the broker's GES test, every broker's clients
//! share one profile, the broker's: the workload's profile of the broker's
//! position in the topology file, so that each client receives exactly one
//! event in `K` and different brokers want different events. A measuring
//! subscriber takes its broker's profile too, so it receives what the
//! broker's background clients receive.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use sift_client::{Client, FilterKind, Subscription};
use sift_core::workload::GesWorkload;
use sift_core::{DeliveryMode, Message};
use tokio::task::JoinHandle;

use super::plan::Point;
use crate::error::BenchError;
use crate::network::TopologyNetwork;
use crate::publisher::{connect, Pace};
use crate::stamp::{nanos_since, sent_at_ns, write_stamp};
use crate::stats::Samples;
use crate::subscriber::{next_delivery, subscribe_options};

/// A measuring subscriber that receives nothing for this long has all it
/// will get, unless the point's events are further apart than a third of it.
const IDLE_END_MIN: Duration = Duration::from_secs(3);
/// How long the background clients may take to receive their events once
/// the measuring subscribers have theirs, without receiving anything.
const BACKGROUND_IDLE_END: Duration = Duration::from_secs(3);
/// How often the background count is looked at while waiting for it.
const BACKGROUND_POLL: Duration = Duration::from_millis(10);
/// How long a background client's task may take to end once its client closed.
const BACKGROUND_TASK_END: Duration = Duration::from_secs(5);

/// Who publishes and who measures in a round.
#[derive(Debug, Clone, PartialEq)]
pub struct Roles {
    /// The broker the publisher is attached to.
    pub publisher: String,
    /// The brokers of the measuring subscribers, with their server hops
    /// from the publisher's broker.
    pub measuring: Vec<(String, u32)>,
    /// Background clients on every broker.
    pub per_broker: usize,
}

/// What one measuring subscriber saw at one point.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Its broker.
    pub broker: String,
    /// Brokers an event passes through to reach it, the publisher's included.
    pub server_hops: u32,
    /// Events it should receive.
    pub expected: u64,
    /// Events it received.
    pub received: u64,
    /// Publish-to-delivery times, nanoseconds.
    pub latency_ns: Samples,
    /// Events received per second, from the first publish to its last delivery.
    pub throughput_msgs_per_s: f64,
}

/// Everything one point measured.
#[derive(Debug, Clone)]
pub struct PointResult {
    /// Events published.
    pub published: u64,
    /// Publish rate achieved: events after the first over the time to the last.
    pub publish_rate_msgs_per_s: f64,
    /// One per measuring subscriber, in the order of [`Roles::measuring`].
    pub measured: Vec<Measured>,
    /// Events the background clients should have received together.
    pub background_expected: u64,
    /// Events they received.
    pub background_received: u64,
}

/// One measuring subscriber between points.
struct Measuring {
    broker: String,
    server_hops: u32,
    client: Client,
    subscription: Option<Subscription>,
}

/// The clients of one matching rate.
pub struct Round {
    workload: GesWorkload,
    footprints: u64,
    publisher: Option<Client>,
    measuring: Vec<Measuring>,
    background: Vec<Client>,
    drains: Vec<JoinHandle<()>>,
    background_received: Arc<AtomicU64>,
    next_event: u64,
}

impl Round {
    /// Connects every subscriber and the publisher, and waits until every
    /// broker holds every subscribing broker's interest. Closes what it
    /// opened when something fails.
    pub async fn open(network: &TopologyNetwork, workload: GesWorkload, roles: &Roles) -> Result<Round, BenchError> {
        let footprints = u64::from(workload.footprint_count());
        let mut round = Round {
            workload,
            footprints,
            publisher: None,
            measuring: Vec::new(),
            background: Vec::new(),
            drains: Vec::new(),
            background_received: Arc::new(AtomicU64::new(0)),
            next_event: 0,
        };
        match round.connect(network, roles).await {
            Ok(()) => Ok(round),
            Err(error) => {
                round.close_clients().await;
                Err(error)
            }
        }
    }

    async fn connect(&mut self, network: &TopologyNetwork, roles: &Roles) -> Result<(), BenchError> {
        let mut subscribing = BTreeSet::new();
        for (position, broker) in network.brokers().iter().enumerate() {
            let name = broker.network_name();
            let address = broker.local_addr().to_string();
            for number in 0..roles.per_broker {
                let (client, subscription) = self.subscribe(&address, format!("ges-{name}-{number}"), position).await?;
                self.background.push(client);
                let received = self.background_received.clone();
                self.drains.push(tokio::spawn(drain(subscription, received)));
            }
            for (measured, server_hops) in roles.measuring.iter().filter(|(measured, _)| measured == name) {
                let (client, subscription) = self.subscribe(&address, format!("ges-measure-{name}"), position).await?;
                let subscription = Some(subscription);
                self.measuring.push(Measuring {
                    broker: measured.clone(),
                    server_hops: *server_hops,
                    client,
                    subscription,
                });
            }
            if roles.per_broker > 0 || roles.measuring.iter().any(|(measured, _)| measured == name) {
                subscribing.insert(name.to_string());
            }
        }
        // Measuring subscribers in the order the roles list them.
        self.measuring.sort_by_key(|measuring| roles.measuring.iter().position(|(name, _)| *name == measuring.broker));
        self.publisher = Some(connect(&network.address(&roles.publisher)?, "ges-publisher".into()).await?);
        network.interest_ready(&subscribing).await
    }

    /// A client named `name` at `address` subscribed with the profile of
    /// the broker at `position`.
    async fn subscribe(
        &self,
        address: &str,
        name: String,
        position: usize,
    ) -> Result<(Client, Subscription), BenchError> {
        let (topic, _, filter) = self.workload.subscription(position as u64);
        let client = connect(address, name).await?;
        let options = subscribe_options(&topic, DeliveryMode::BestEffort).filter(FilterKind::Tags, filter);
        match client.subscribe(options).await {
            Ok(subscription) => Ok((client, subscription)),
            Err(error) => {
                client.close().await;
                Err(error.into())
            }
        }
    }

    /// Publishes the point's events at its rate, each stamped with its send
    /// time, and collects what every subscriber received.
    pub async fn run_point(&mut self, point: &Point) -> Result<PointResult, BenchError> {
        let events = self.events(point);
        let per_subscriber = point.events / self.footprints;
        let background_before = self.background_received.load(Ordering::Relaxed);
        let epoch = Instant::now();
        let idle = IDLE_END_MIN.max(Duration::from_secs_f64(3.0 * self.footprints as f64 / point.rate.max(1) as f64));
        let mut receivers = Vec::with_capacity(self.measuring.len());
        for measuring in &mut self.measuring {
            let subscription = measuring.subscription.take().ok_or_else(|| lost_subscription(&measuring.broker))?;
            receivers.push(tokio::spawn(receive(subscription, per_subscriber, idle, epoch)));
        }
        let publisher = self.publisher.as_ref().ok_or_else(|| lost_subscription("the publisher"))?;
        let published = publish(publisher, events, point.rate, epoch).await;
        let mut measured = Vec::with_capacity(receivers.len());
        for (measuring, receiver) in self.measuring.iter_mut().zip(receivers) {
            let joined =
                receiver.await.map_err(|error| BenchError::Task { role: "subscriber", reason: error.to_string() })?;
            measuring.subscription = Some(joined.subscription);
            let seconds =
                joined.last_receive_ns.saturating_sub(published.as_ref().map_or(0, |p| p.first_ns)) as f64 / 1e9;
            measured.push(Measured {
                broker: measuring.broker.clone(),
                server_hops: measuring.server_hops,
                expected: per_subscriber,
                received: joined.count,
                latency_ns: joined.latency_ns,
                throughput_msgs_per_s: if seconds > 0.0 { joined.count as f64 / seconds } else { 0.0 },
            });
        }
        let published = published?;
        let background_expected = per_subscriber * self.background.len() as u64;
        let background_received = self.wait_for_background(background_before, background_expected).await;
        Ok(PointResult {
            published: published.count,
            publish_rate_msgs_per_s: published.rate_msgs_per_s,
            measured,
            background_expected,
            background_received,
        })
    }

    /// The point's events, numbered on from the last point's so that every
    /// point starts on a footprint block.
    fn events(&mut self, point: &Point) -> Vec<Message> {
        let workload = self.workload.clone().with_payload_bytes(point.size);
        let first = self.next_event;
        self.next_event += point.events;
        (first..self.next_event).map(|index| workload.event(index)).collect()
    }

    /// Waits until the background clients received `expected` more events
    /// than `before`, or received nothing for a while; returns how many
    /// they received.
    async fn wait_for_background(&self, before: u64, expected: u64) -> u64 {
        let received = || self.background_received.load(Ordering::Relaxed).saturating_sub(before);
        let (mut last, mut last_change) = (received(), Instant::now());
        while last < expected && last_change.elapsed() < BACKGROUND_IDLE_END {
            tokio::time::sleep(BACKGROUND_POLL).await;
            let now = received();
            if now != last {
                (last, last_change) = (now, Instant::now());
            }
        }
        last
    }

    /// Closes every client and waits until no broker holds any interest.
    pub async fn close(self, network: &TopologyNetwork) -> Result<(), BenchError> {
        self.close_clients().await;
        network.interest_gone().await
    }

    async fn close_clients(self) {
        if let Some(publisher) = &self.publisher {
            publisher.close().await;
        }
        for measuring in &self.measuring {
            measuring.client.close().await;
        }
        for client in &self.background {
            client.close().await;
        }
        for drain in self.drains {
            let abort = drain.abort_handle();
            if tokio::time::timeout(BACKGROUND_TASK_END, drain).await.is_err() {
                abort.abort();
            }
        }
    }
}

fn lost_subscription(whom: &str) -> BenchError {
    BenchError::Task { role: "subscriber", reason: format!("the client of {whom} is gone after a failed point") }
}

/// Counts a background client's deliveries until its client closes.
async fn drain(mut subscription: Subscription, received: Arc<AtomicU64>) {
    while subscription.next().await.is_some() {
        let mut count = 1;
        while subscription.try_next().is_some() {
            count += 1;
        }
        received.fetch_add(count, Ordering::Relaxed);
    }
}

/// What the publisher did at one point.
struct Published {
    count: u64,
    first_ns: u64,
    rate_msgs_per_s: f64,
}

/// Publishes `events` at `rate` per second, each stamped with the time
/// since `epoch` when it leaves, then waits until the broker has read them.
async fn publish(client: &Client, events: Vec<Message>, rate: u64, epoch: Instant) -> Result<Published, BenchError> {
    let pace = Pace { size: 0, rate: Some(rate) };
    let started = tokio::time::Instant::now();
    let (mut count, mut first_ns, mut last_ns) = (0u64, 0u64, 0u64);
    for mut event in events {
        pace.wait_turn(count, started).await;
        let sent_ns = nanos_since(epoch);
        let mut payload = BytesMut::from(&event.payload[..]);
        write_stamp(&mut payload, sent_ns);
        event.payload = payload.freeze();
        client.publish(event).await?;
        if count == 0 {
            first_ns = sent_ns;
        }
        (count, last_ns) = (count + 1, sent_ns);
    }
    client.ping().await?;
    let span_s = last_ns.saturating_sub(first_ns) as f64 / 1e9;
    let rate_msgs_per_s = if count > 1 && span_s > 0.0 { (count - 1) as f64 / span_s } else { rate as f64 };
    Ok(Published { count, first_ns, rate_msgs_per_s })
}

/// What a measuring subscriber received at one point.
struct Received {
    subscription: Subscription,
    count: u64,
    latency_ns: Samples,
    last_receive_ns: u64,
}

/// Receives until `expected` events came or none came for `idle`; each
/// delivery's latency is its receive time less its stamp.
async fn receive(mut subscription: Subscription, expected: u64, idle: Duration, epoch: Instant) -> Received {
    let (mut count, mut latency_ns, mut last_receive_ns) = (0, Samples::new(), 0);
    while count < expected {
        let Some(delivery) = next_delivery(&mut subscription, idle).await else { break };
        let now_ns = nanos_since(epoch);
        latency_ns.record(now_ns.saturating_sub(sent_at_ns(&delivery.message.payload)).max(1));
        (count, last_receive_ns) = (count + 1, now_ns);
    }
    Received { subscription, count, latency_ns, last_receive_ns }
}
