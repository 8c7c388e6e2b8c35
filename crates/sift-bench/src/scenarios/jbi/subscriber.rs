//! A JBI subscriber: one connection holding L XPath subscriptions per
//! object type it wants, whose deliveries meet in one receive loop (the
//! report's one client listener with callbacks, §5.1.3) that counts them,
//! passes them through the slow link when it has one, and acknowledges.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sift_client::{AckPolicy, Client, ClientOptions, Delivery, FilterKind, SubscribeOptions, Subscription};
use sift_core::workload::JbiWorkload;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use super::link::{self, SlowLink};
use super::plan::Source;
use crate::error::BenchError;
use crate::publisher::client_options;
use crate::subscriber::{SUBSCRIPTION_QUEUE_CAPACITY, SUBSCRIPTION_UNACKED_MAX};

/// Subscribe requests one subscriber has in flight while it registers its
/// subscriptions: enough to hide the round trips, few enough to be polite.
pub const SUBSCRIBES_IN_FLIGHT_MAX: usize = 128;

/// Batches of deliveries the client buffers per subscription. Small, so
/// that a subscriber that falls behind (the slow one, with best-effort
/// delivery) holds its connection back instead of buffering without end.
pub const SUBSCRIPTION_BATCHES_JBI: usize = 4;

/// Deliveries waiting for the receive loop, from all subscriptions together.
pub const RECEIVE_QUEUE_CAPACITY: usize = 1024;

/// Counts shared by all subscribers of a run: deliveries received, and
/// when the last one was handled.
#[derive(Debug)]
pub struct Tally {
    epoch: Instant,
    delivered: AtomicU64,
    last_ns: AtomicU64,
}

impl Tally {
    /// A tally whose times count from now.
    pub fn new() -> Tally {
        Tally { epoch: Instant::now(), delivered: AtomicU64::new(0), last_ns: AtomicU64::new(0) }
    }

    /// Nanoseconds since the tally began.
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Deliveries so far.
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Acquire)
    }

    /// When the last delivery was handled, in nanoseconds since the tally began.
    pub fn last_ns(&self) -> u64 {
        self.last_ns.load(Ordering::Acquire)
    }

    /// Counts one delivery handled now.
    pub(super) fn record(&self) {
        self.last_ns.fetch_max(self.now_ns(), Ordering::AcqRel);
        self.delivered.fetch_add(1, Ordering::AcqRel);
    }
}

impl Default for Tally {
    fn default() -> Tally {
        Tally::new()
    }
}

/// A subscriber whose subscriptions are live and whose receive loop runs.
/// It stays connected for every setup that shares its subscriptions; its
/// link is set per setup.
pub struct RunningSubscriber {
    client: Client,
    link: Arc<Mutex<Option<SlowLink>>>,
    handled: Arc<AtomicU64>,
    receive_loop: JoinHandle<()>,
    forwarders: Vec<JoinHandle<()>>,
}

impl RunningSubscriber {
    /// Puts the subscriber behind a slow link of `bits_per_s`, or on
    /// loopback with `None`.
    pub fn set_link(&self, bits_per_s: Option<f64>) {
        *lock(&self.link) = bits_per_s.map(SlowLink::new);
    }

    /// Deliveries it handled so far.
    pub fn handled(&self) -> u64 {
        self.handled.load(Ordering::Acquire)
    }

    /// Closes the connection and waits until its tasks ended.
    pub async fn stop(self) -> Result<(), BenchError> {
        self.client.close().await;
        for forwarder in self.forwarders {
            forwarder.await.map_err(|error| task_error(&error))?;
        }
        self.receive_loop.await.map_err(|error| task_error(&error))
    }
}

/// The link, even if a panicking holder poisoned its lock (the link is
/// plain data, consistent after any update).
fn lock(link: &Mutex<Option<SlowLink>>) -> std::sync::MutexGuard<'_, Option<SlowLink>> {
    link.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn task_error(error: &tokio::task::JoinError) -> BenchError {
    BenchError::Task { role: "subscriber", reason: error.to_string() }
}

/// The client options of a JBI subscriber.
fn options(name: String) -> ClientOptions {
    ClientOptions { subscription_batches: SUBSCRIPTION_BATCHES_JBI, ..client_options(name) }
}

/// Connects a subscriber, registers `level` subscriptions per interest
/// and starts its receive loop, which records into `tally`.
pub async fn start(
    address: &str,
    name: String,
    interests: &[Source],
    level: u64,
    tally: Arc<Tally>,
) -> Result<RunningSubscriber, BenchError> {
    let client = Client::connect(address, options(name)).await?;
    let subscriptions = match subscribe(&client, interests, level).await {
        Ok(subscriptions) => subscriptions,
        Err(error) => {
            client.close().await;
            return Err(error);
        }
    };
    let (sender, receiver) = mpsc::channel(RECEIVE_QUEUE_CAPACITY);
    let forwarders =
        subscriptions.into_iter().map(|subscription| tokio::spawn(forward(subscription, sender.clone()))).collect();
    let link = Arc::new(Mutex::new(None));
    let handled = Arc::new(AtomicU64::new(0));
    let receive_loop = tokio::spawn(receive(receiver, link.clone(), tally, handled.clone()));
    Ok(RunningSubscriber { client, link, handled, receive_loop, forwarders })
}

/// Registers the subscriptions, [`SUBSCRIBES_IN_FLIGHT_MAX`] at a time.
async fn subscribe(client: &Client, interests: &[Source], level: u64) -> Result<Vec<Subscription>, BenchError> {
    // Reliable deliveries are acknowledged by the receive loop, after the
    // slow link; best-effort ones carry no tag and need no acknowledgement.
    let ack = AckPolicy::Manual;
    let mut requests = Vec::new();
    for interest in interests {
        let workload = JbiWorkload::new(interest.seed).map_err(|error| BenchError::Usage(error.to_string()))?;
        for index in 0..level {
            let (topic, _, filter) = workload.subscription_of(interest.object_type, index);
            let options = SubscribeOptions::new(topic)
                .filter(FilterKind::Xpath, filter)
                .ack(ack)
                .max_unacked(SUBSCRIPTION_UNACKED_MAX)
                .queue_capacity(SUBSCRIPTION_QUEUE_CAPACITY);
            requests.push(options);
        }
    }
    let mut subscriptions = Vec::with_capacity(requests.len());
    let mut in_flight = JoinSet::new();
    for request in requests {
        if in_flight.len() >= SUBSCRIBES_IN_FLIGHT_MAX {
            subscriptions.push(joined(in_flight.join_next().await)?);
        }
        let client = client.clone();
        in_flight.spawn(async move { client.subscribe(request).await });
    }
    while let Some(result) = in_flight.join_next().await {
        subscriptions.push(joined(Some(result))?);
    }
    Ok(subscriptions)
}

type SubscribeResult = Result<Result<Subscription, sift_client::ClientError>, tokio::task::JoinError>;

fn joined(result: Option<SubscribeResult>) -> Result<Subscription, BenchError> {
    match result {
        Some(Ok(subscribed)) => Ok(subscribed?),
        Some(Err(error)) => Err(task_error(&error)),
        None => Err(BenchError::Task { role: "subscriber", reason: "no subscribe in flight".into() }),
    }
}

/// A delivery and when the subscriber's client handed it over.
struct Arrival {
    delivery: Delivery,
    at: Instant,
}

/// Passes one subscription's deliveries to the receive loop until the
/// subscription ends.
async fn forward(mut subscription: Subscription, sender: mpsc::Sender<Arrival>) {
    while let Some(delivery) = subscription.next().await {
        if sender.send(Arrival { delivery, at: Instant::now() }).await.is_err() {
            return;
        }
    }
}

/// Carries each delivery over the slow link if there is one, counts it and
/// acknowledges it, until every subscription ended.
async fn receive(
    mut receiver: mpsc::Receiver<Arrival>,
    link: Arc<Mutex<Option<SlowLink>>>,
    tally: Arc<Tally>,
    handled: Arc<AtomicU64>,
) {
    let verifier = crate::signing::verifier();
    while let Some(arrival) = receiver.recv().await {
        let message = &arrival.delivery.message;
        // Verified as the application would before using it; a failure
        // fails the run at its end.
        crate::signing::verify(verifier.as_ref(), message);
        let bytes = message.payload.len() + message.metadata.as_ref().map_or(0, |metadata| metadata.len());
        let departure = lock(&link).as_mut().map(|link| link.departure(bytes, arrival.at));
        if let Some(departure) = departure {
            link::wait_until(departure).await;
        }
        handled.fetch_add(1, Ordering::AcqRel);
        // Recorded before the acknowledgement, so that a sync publisher's
        // last confirm finds every delivery counted.
        tally.record();
        // A failed ack means the connection is closing at the end of the run.
        let _ = arrival.delivery.ack();
    }
}
