//! Running the grid: subscribers register their subscriptions (not timed,
//! as in §6: "the results ignore the subscription times"), then each setup
//! that shares them runs: the publishers publish all at once, each one
//! object at a time, and the round ends when every owed delivery arrived.
//!
//! Setups with the same subscriptions (same level and seeds; they differ in
//! payload, confirmation or the slow link) share one registration, and run
//! their rounds back to back on it: registering thousands of XPath
//! subscriptions costs the broker far more than a round does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sift_client::Client;
use sift_core::Message;

use super::over_http::{self, HttpSubscriber};
use super::plan::{Plan, Setup};
use super::publisher::{self, Confirmed};
use super::subscriber::{self, RunningSubscriber, Tally};
use super::Via;
use crate::brokers::Endpoints;
use crate::error::BenchError;
use crate::progress::Progress;
use crate::publisher::connect;

/// Best-effort deliveries still missing after this long without a new one
/// are lost.
pub const DELIVERY_IDLE_END: Duration = Duration::from_secs(2);
/// How often the count is checked while deliveries are awaited.
const DELIVERY_POLL: Duration = Duration::from_millis(5);

/// What one round of a setup measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RoundResult {
    /// Objects published.
    pub published: u64,
    /// Deliveries owed: the subscriptions each object matched, summed.
    pub owed: u64,
    /// Deliveries the subscribers received (the report's objects delivered).
    pub delivered: u64,
    /// Of those, deliveries to slow subscribers.
    pub delivered_slow: u64,
    /// Objects that matched no subscription.
    pub unmatched: u64,
    /// Sync objects whose acknowledgements did not all come in time.
    pub incomplete: u64,
    /// From the first publish to the last delivery or confirm, in seconds.
    pub time_s: f64,
}

impl RoundResult {
    /// Owed deliveries that never came.
    pub fn lost(&self) -> u64 {
        self.owed.saturating_sub(self.delivered)
    }

    /// Objects delivered per second, all subscribers together.
    pub fn delivered_per_s(&self) -> f64 {
        if self.time_s > 0.0 {
            self.delivered as f64 / self.time_s
        } else {
            0.0
        }
    }

    /// Milliseconds per delivered object, as §7.5.3 and §7.6.3 count them.
    pub fn ms_per_object(&self) -> Option<f64> {
        (self.delivered > 0).then(|| self.time_s * 1e3 / self.delivered as f64)
    }
}

/// How long a group's subscriptions took to register and to close.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Registration {
    /// Index of the group's first setup, whose audience it registered.
    pub setup: usize,
    /// From the first subscribe request to the last subscription live.
    pub register_s: f64,
    /// Closing the subscribers, which removes their subscriptions.
    pub close_s: f64,
}

/// A subscriber of either kind.
pub enum Audience {
    /// On the native protocol.
    Native(RunningSubscriber),
    /// An HTTP listener with callback subscriptions.
    Http(HttpSubscriber),
}

impl Audience {
    fn set_link(&self, bits_per_s: Option<f64>) {
        match self {
            Audience::Native(subscriber) => subscriber.set_link(bits_per_s),
            Audience::Http(subscriber) => subscriber.set_link(bits_per_s),
        }
    }

    fn handled(&self) -> u64 {
        match self {
            Audience::Native(subscriber) => subscriber.handled(),
            Audience::Http(subscriber) => subscriber.handled(),
        }
    }

    async fn stop(self) -> Result<(), BenchError> {
        match self {
            Audience::Native(subscriber) => subscriber.stop().await,
            Audience::Http(subscriber) => subscriber.stop().await,
        }
    }
}

/// What the whole plan measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// Each setup's rounds.
    pub rounds: Vec<Vec<RoundResult>>,
    /// Each group's registration.
    pub registrations: Vec<Registration>,
}

/// Runs every setup of `plan` `plan.rounds` times. A slow subscriber's
/// link carries `link_bits_per_s`.
pub async fn run_plan(
    endpoints: &Endpoints,
    via: Via,
    plan: &Plan,
    link_bits_per_s: f64,
    progress: &Progress,
) -> Result<Measured, BenchError> {
    let mut measured = Measured { rounds: vec![Vec::new(); plan.setups.len()], registrations: Vec::new() };
    for group in plan.groups() {
        let setups: Vec<&Setup> = group.iter().map(|&index| &plan.setups[index]).collect();
        let (rounds, registration) = run_group(endpoints, via, &setups, plan.rounds, link_bits_per_s, progress).await?;
        for (&index, results) in group.iter().zip(rounds) {
            measured.rounds[index] = results;
        }
        measured.registrations.push(Registration { setup: group[0], ..registration });
    }
    Ok(measured)
}

/// Registers the subscriptions `setups` share, runs each setup `rounds`
/// times (all setups in turn, round after round) and closes the
/// subscribers; returns each setup's rounds and the registration's times.
pub async fn run_group(
    endpoints: &Endpoints,
    via: Via,
    setups: &[&Setup],
    rounds: u32,
    link_bits_per_s: f64,
    progress: &Progress,
) -> Result<(Vec<Vec<RoundResult>>, Registration), BenchError> {
    let Some(first) = setups.first() else { return Ok((Vec::new(), Registration::default())) };
    let tally = Arc::new(Tally::new());
    let mut running = Vec::with_capacity(first.subscribers.len());
    let mut results = vec![Vec::new(); setups.len()];
    let registering = Instant::now();
    let mut outcome = start_subscribers(endpoints, via, first, &tally, &mut running).await;
    let register_s = registering.elapsed().as_secs_f64();
    for round in 1..=rounds {
        for (setup, results) in setups.iter().zip(results.iter_mut()) {
            if outcome.is_err() {
                break;
            }
            progress.begin(&format!("{} (round {round})", setup.label()));
            match run_round(endpoints, via, setup, &running, &tally, link_bits_per_s).await {
                Ok(result) => results.push(result),
                Err(error) => outcome = Err(error),
            }
            progress.advance();
        }
    }
    let closing = Instant::now();
    for subscriber in running {
        let stopped = subscriber.stop().await;
        outcome = outcome.and(stopped);
    }
    let close_s = closing.elapsed().as_secs_f64();
    outcome.map(|()| (results, Registration { setup: 0, register_s, close_s }))
}

async fn start_subscribers(
    endpoints: &Endpoints,
    via: Via,
    setup: &Setup,
    tally: &Arc<Tally>,
    running: &mut Vec<Audience>,
) -> Result<(), BenchError> {
    for (index, spec) in setup.subscribers.iter().enumerate() {
        let name = format!("jbi-sub-{index}");
        let (interests, tally) = (&spec.interests, tally.clone());
        running.push(match via {
            Via::Native => {
                let address = endpoints.subscribe_addr();
                Audience::Native(subscriber::start(address, name, interests, setup.level, tally).await?)
            }
            Via::Http(http) => Audience::Http(HttpSubscriber::start(http, name, interests, setup.level, tally).await?),
        });
    }
    endpoints.interest_ready().await
}

/// One round of `setup` on the `running` subscribers of its audience.
async fn run_round(
    endpoints: &Endpoints,
    via: Via,
    setup: &Setup,
    running: &[Audience],
    tally: &Arc<Tally>,
    link_bits_per_s: f64,
) -> Result<RoundResult, BenchError> {
    let objects = setup
        .publishers
        .iter()
        .map(|source| publisher::objects(*source, setup.level, setup.payload_bytes, setup.confirmation))
        .collect::<Result<Vec<_>, _>>()?;
    for (spec, subscriber) in setup.subscribers.iter().zip(running) {
        subscriber.set_link(spec.slow.then_some(link_bits_per_s));
    }
    let slow_handled = || -> u64 {
        let slow = setup.subscribers.iter().zip(running).filter(|(spec, _)| spec.slow);
        slow.map(|(_, subscriber)| subscriber.handled()).sum()
    };
    let slow_before = slow_handled();
    let result = measure(endpoints, via, setup, objects, tally).await?;
    Ok(RoundResult { delivered_slow: slow_handled() - slow_before, ..result })
}

/// Publishes every publisher's objects at once and waits for the deliveries.
async fn measure(
    endpoints: &Endpoints,
    via: Via,
    setup: &Setup,
    objects: Vec<Vec<Message>>,
    tally: &Arc<Tally>,
) -> Result<RoundResult, BenchError> {
    let tasks = match via {
        Via::Native => {
            let clients = connect_publishers(endpoints, objects.len()).await?;
            PublishTasks::start(tally, || {
                let publish =
                    |(client, objects)| publisher::publish(client, objects, setup.confirmation, tally.clone());
                clients.into_iter().zip(objects).map(|pair| tokio::spawn(publish(pair))).collect()
            })
        }
        Via::Http(http) => {
            let bodies: Vec<_> =
                objects.iter().map(|objects| over_http::envelopes(objects, setup.confirmation)).collect();
            PublishTasks::start(tally, || {
                bodies.into_iter().map(|bodies| tokio::spawn(over_http::publish(http, bodies, tally.clone()))).collect()
            })
        }
    };
    let (delivered_before, started_ns) = (tasks.delivered_before, tasks.started_ns);
    let tasks = tasks.handles;
    let mut confirmed = Confirmed::default();
    let mut failure = None;
    for task in tasks {
        match task.await {
            Ok(Ok(publisher)) => confirmed.add(&publisher),
            Ok(Err(error)) => failure = failure.or(Some(error)),
            Err(error) => {
                let error = BenchError::Task { role: "publisher", reason: error.to_string() };
                failure = failure.or(Some(error));
            }
        }
    }
    if let Some(error) = failure {
        return Err(error);
    }
    wait_for_deliveries(tally, delivered_before + confirmed.matched).await;
    let ended_ns = tally.last_ns().max(confirmed.last_confirm_ns);
    Ok(RoundResult {
        published: confirmed.objects,
        owed: confirmed.matched,
        delivered: tally.delivered() - delivered_before,
        delivered_slow: 0,
        unmatched: confirmed.unmatched,
        incomplete: confirmed.incomplete,
        time_s: ended_ns.saturating_sub(started_ns) as f64 / 1e9,
    })
}

/// The publishers' tasks of a round, started once the counts before it
/// were read.
struct PublishTasks {
    handles: Vec<tokio::task::JoinHandle<Result<Confirmed, BenchError>>>,
    delivered_before: u64,
    started_ns: u64,
}

impl PublishTasks {
    fn start(
        tally: &Tally,
        spawn: impl FnOnce() -> Vec<tokio::task::JoinHandle<Result<Confirmed, BenchError>>>,
    ) -> PublishTasks {
        let delivered_before = tally.delivered();
        let started_ns = tally.now_ns();
        PublishTasks { handles: spawn(), delivered_before, started_ns }
    }
}

/// Connects `count` publishers; none stays open if one fails.
async fn connect_publishers(endpoints: &Endpoints, count: usize) -> Result<Vec<Client>, BenchError> {
    let mut clients = Vec::with_capacity(count);
    for index in 0..count {
        match connect(endpoints.publish_addr(), format!("jbi-pub-{index}")).await {
            Ok(client) => clients.push(client),
            Err(error) => {
                for client in clients {
                    client.close().await;
                }
                return Err(error);
            }
        }
    }
    Ok(clients)
}

/// Waits until the tally counts `total` deliveries, or none came for
/// [`DELIVERY_IDLE_END`] (best-effort ones may be lost). Sync rounds have
/// them all by their last confirm.
async fn wait_for_deliveries(tally: &Tally, total: u64) {
    let mut seen = tally.delivered();
    let mut changed = Instant::now();
    while seen < total && changed.elapsed() < DELIVERY_IDLE_END {
        tokio::time::sleep(DELIVERY_POLL).await;
        let now = tally.delivered();
        if now != seen {
            seen = now;
            changed = Instant::now();
        }
    }
}
