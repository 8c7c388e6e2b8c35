//! `sift bench`: throughput and latency of publish-subscribe runs, driven as
//! real clients over the wire, against an embedded or a running broker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use clap::{Args, Subcommand};
use hdrhistogram::Histogram;
use sift_broker::config::LinkTarget;
use sift_broker::{Config, RunningBroker};
use sift_client::{AckPolicy, Client, ClientOptions, PublishOptions, SubscribeOptions};
use sift_core::{DeliveryMode, Message, TopicName};

use crate::CliError;

/// Topic the bench publishes on.
const BENCH_TOPIC: &str = "bench.pubsub";
/// A run ends when subscribers receive nothing for this long.
const IDLE_END: Duration = Duration::from_secs(3);
/// Latency histogram bounds: 1 ns to 60 s, 3 significant digits.
const LATENCY_NS_MAX: u64 = 60_000_000_000;

/// Arguments of `sift bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// P publishers → S subscribers on one topic: throughput and latency.
    Pubsub(PubsubArgs),
}

/// Arguments of `sift bench pubsub`.
#[derive(Debug, Args, Clone)]
pub struct PubsubArgs {
    /// Broker to measure; without it an embedded broker is started.
    #[arg(long)]
    server: Option<String>,
    /// Publishers, one connection each.
    #[arg(long, default_value_t = 1)]
    pubs: usize,
    /// Subscribers, one connection each; each gets every message.
    #[arg(long, default_value_t = 1)]
    subs: usize,
    /// Payload bytes per message (at least 8: the send time rides in it).
    #[arg(long, default_value_t = 128)]
    size: usize,
    /// Messages published in all (split across publishers).
    #[arg(long, default_value_t = 1_000_000)]
    count: u64,
    /// best-effort or reliable (reliable publishes are confirmed, pipelined
    /// within the broker's publish window, and acknowledged by subscribers).
    #[arg(long, default_value = "best-effort")]
    mode: String,
    /// One message in flight at a time: measures latency, not throughput.
    #[arg(long)]
    latency: bool,
    /// Publish at this many messages per second in all (each message then
    /// carries its send time), instead of as fast as possible.
    #[arg(long)]
    rate: Option<u64>,
    /// Embedded brokers linked in a chain: publishers connect to the first,
    /// subscribers to the last, so that every message crosses `chain - 1`
    /// broker links. Not with `--server`.
    #[arg(long, default_value_t = 1)]
    chain: usize,
    /// With `--server`: where subscribers connect (another broker of the
    /// same network); publishers stay on `--server`.
    #[arg(long, requires = "server")]
    sub_server: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the chosen scenario.
pub async fn run(args: BenchArgs) -> Result<(), CliError> {
    match args.scenario {
        Scenario::Pubsub(args) => pubsub(args).await,
    }
}

/// What one run measured.
#[derive(Debug, serde::Serialize)]
struct PubsubResult {
    pubs: usize,
    subs: usize,
    size: usize,
    mode: String,
    latency_mode: bool,
    /// Brokers the messages crossed (1 without links).
    chain: usize,
    /// Paced publish rate in messages per second, when one was set.
    rate: Option<u64>,
    published: u64,
    delivered: u64,
    seconds: f64,
    publish_msgs_per_s: f64,
    delivered_msgs_per_s: f64,
    delivered_mb_per_s: f64,
    latency_us_p50: f64,
    latency_us_p90: f64,
    latency_us_p99: f64,
    latency_us_p999: f64,
    latency_us_max: f64,
}

async fn pubsub(args: PubsubArgs) -> Result<(), CliError> {
    if args.size < 8 {
        return Err(CliError::Usage("--size must be at least 8 bytes (the send time rides in the payload)".into()));
    }
    let mode: DeliveryMode = args.mode.parse().map_err(|error| CliError::Usage(format!("--mode: {error}")))?;
    if mode == DeliveryMode::Persistent {
        return Err(CliError::Usage("--mode persistent is not available yet".into()));
    }
    if args.rate == Some(0) {
        return Err(CliError::Usage("--rate must be at least 1 message per second".into()));
    }
    let endpoints = match &args.server {
        Some(address) if args.chain == 1 => Endpoints::remote(address, args.sub_server.as_deref()),
        Some(_) => {
            return Err(CliError::Usage("--chain starts its own brokers; it cannot be used with --server".into()))
        }
        None => Endpoints::chain(args.chain).await?,
    };
    let result = if args.latency {
        latency_run(&args, &endpoints, mode).await
    } else {
        throughput_run(&args, &endpoints, mode).await
    };
    endpoints.shutdown().await;
    print_result(&result?, args.json);
    Ok(())
}

/// Where publishers and subscribers connect, and the brokers the bench
/// started itself.
struct Endpoints {
    publish: String,
    subscribe: String,
    embedded: Vec<RunningBroker>,
}

/// How long embedded brokers may take to link up and share interest.
const NETWORK_READY_TIMEOUT: Duration = Duration::from_secs(10);

impl Endpoints {
    fn remote(publish: &str, subscribe: Option<&str>) -> Endpoints {
        let subscribe = subscribe.unwrap_or(publish).to_string();
        Endpoints { publish: publish.to_string(), subscribe, embedded: Vec::new() }
    }

    /// `length` embedded brokers, each linked to the previous one, once
    /// every one of them knows the whole chain.
    async fn chain(length: usize) -> Result<Endpoints, CliError> {
        if length == 0 {
            return Err(CliError::Usage("--chain must be at least 1".into()));
        }
        let mut embedded: Vec<RunningBroker> = Vec::with_capacity(length);
        for index in 0..length {
            let mut config = Config { listen: ([127, 0, 0, 1], 0).into(), ..Config::default() };
            if length > 1 {
                config.network.name = format!("bench-{index}");
                config.network.link_listen = Some(([127, 0, 0, 1], 0).into());
                let previous = embedded.last().and_then(RunningBroker::link_addr);
                config.network.links =
                    previous.map(|address| LinkTarget::new(address.to_string())).into_iter().collect();
            }
            embedded.push(RunningBroker::start(config).await?);
        }
        let endpoints = Endpoints {
            publish: embedded[0].local_addr().to_string(),
            subscribe: embedded[length - 1].local_addr().to_string(),
            embedded,
        };
        endpoints
            .wait_until("the chain's brokers know each other", |first| first.topology_brokers().len() == length)
            .await?;
        Ok(endpoints)
    }

    /// Waits until the first embedded broker holds the subscribers' interest
    /// (nothing to wait for with one broker or a running network).
    async fn interest_ready(&self) -> Result<(), CliError> {
        if self.embedded.len() < 2 {
            return Ok(());
        }
        self.wait_until("the subscribers' interest reaches the publishers' broker", |first| {
            !first.remote_interest().is_empty()
        })
        .await
    }

    async fn wait_until(&self, what: &str, ready: impl Fn(&RunningBroker) -> bool) -> Result<(), CliError> {
        let Some(first) = self.embedded.first() else { return Ok(()) };
        let deadline = Instant::now() + NETWORK_READY_TIMEOUT;
        while !ready(first) {
            if Instant::now() > deadline {
                return Err(CliError::Usage(format!("timed out waiting until {what}")));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    async fn shutdown(self) {
        for broker in self.embedded.into_iter().rev() {
            broker.shutdown().await;
        }
    }
}

fn client_options(name: String) -> ClientOptions {
    ClientOptions { name, reconnect: false, subscription_batches: 1024, ..ClientOptions::default() }
}

/// Payload bytes carved per allocation: publishers take many small payloads
/// from one buffer instead of allocating each.
const PAYLOAD_ARENA_BYTES: usize = 256 * 1024;

/// In throughput runs one message in this many carries its send time. The
/// percentiles of such a run are queueing delay anyway; sampling keeps two
/// clock readings per message off the measured path. `--latency` runs stamp
/// every message.
const THROUGHPUT_LATENCY_SAMPLE: u64 = 16;

/// A message whose payload starts with its send time in nanoseconds since
/// `epoch`, or 0 when `stamp` is false; carved from `arena`.
fn bench_message(
    arena: &mut BytesMut,
    topic: &TopicName,
    mode: DeliveryMode,
    size: usize,
    epoch: Instant,
    stamp: bool,
) -> Message {
    if arena.capacity() < size {
        *arena = BytesMut::with_capacity(PAYLOAD_ARENA_BYTES.max(size));
    }
    arena.put_u64(if stamp { (epoch.elapsed().as_nanos() as u64).max(1) } else { 0 });
    arena.resize(size, b'x');
    let mut message = Message::new(topic.clone(), arena.split().freeze());
    message.delivery_mode = mode;
    message
}

fn bench_topic() -> TopicName {
    TopicName::new(BENCH_TOPIC).unwrap_or_else(|_| unreachable!("constant topic is valid"))
}

/// The next delivery: at once when one is waiting (no timer to arm), else
/// waiting up to [`IDLE_END`].
async fn next_delivery(subscription: &mut sift_client::Subscription) -> Option<sift_client::Delivery> {
    if let Some(delivery) = subscription.try_next() {
        return Some(delivery);
    }
    tokio::time::timeout(IDLE_END, subscription.next()).await.ok().flatten()
}

fn sent_at_ns(payload: &[u8]) -> u64 {
    payload.get(..8).map_or(0, |head| u64::from_be_bytes(head.try_into().unwrap_or([0; 8])))
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).unwrap_or_else(|_| unreachable!("constant bounds are valid"))
}

async fn subscribe_all(
    args: &PubsubArgs,
    address: &str,
    mode: DeliveryMode,
) -> Result<Vec<(Client, sift_client::Subscription)>, CliError> {
    let mut subscribers = Vec::with_capacity(args.subs);
    for index in 0..args.subs {
        let client = Client::connect(address, client_options(format!("bench-sub-{index}"))).await?;
        let ack = if mode.needs_ack() { AckPolicy::Auto } else { AckPolicy::OnWrite };
        let options = SubscribeOptions::new(BENCH_TOPIC).ack(ack).max_unacked(65_536).queue_capacity(1_048_576);
        let subscription = client.subscribe(options).await?;
        subscribers.push((client, subscription));
    }
    Ok(subscribers)
}

async fn throughput_run(
    args: &PubsubArgs,
    endpoints: &Endpoints,
    mode: DeliveryMode,
) -> Result<PubsubResult, CliError> {
    let subscribers = subscribe_all(args, &endpoints.subscribe, mode).await?;
    endpoints.interest_ready().await?;
    let epoch = Instant::now();
    let expected = args.count;
    let delivered = Arc::new(AtomicU64::new(0));
    let last_receive_ns = Arc::new(AtomicU64::new(0));
    let mut receivers = Vec::new();
    for (client, mut subscription) in subscribers {
        let delivered = delivered.clone();
        let last_receive_ns = last_receive_ns.clone();
        receivers.push(tokio::spawn(async move {
            let mut histogram = new_histogram();
            let mut received = 0u64;
            while received < expected {
                let Some(delivery) = next_delivery(&mut subscription).await else {
                    break;
                };
                // Deliveries already waiting arrived with this one (one
                // socket read), so one clock reading stamps them all.
                let now_ns = epoch.elapsed().as_nanos() as u64;
                let mut batch = Some(delivery);
                while let Some(delivery) = batch {
                    let sent_ns = sent_at_ns(&delivery.message.payload);
                    if sent_ns != 0 {
                        let _ = histogram.record(now_ns.saturating_sub(sent_ns).max(1));
                    }
                    received += 1;
                    batch = if received < expected { subscription.try_next() } else { None };
                }
                last_receive_ns.fetch_max(now_ns, Ordering::Relaxed);
            }
            delivered.fetch_add(received, Ordering::Relaxed);
            client.close().await;
            histogram
        }));
    }
    let started_ns = epoch.elapsed().as_nanos() as u64;
    let mut publishers = Vec::new();
    for index in 0..args.pubs {
        let share = args.count / args.pubs as u64 + u64::from((index as u64) < args.count % args.pubs as u64);
        let client = Client::connect(&endpoints.publish, client_options(format!("bench-pub-{index}"))).await?;
        let pace = Pace { size: args.size, rate: args.rate.map(|rate| (rate / args.pubs as u64).max(1)) };
        publishers.push(tokio::spawn(async move { publish_share(client, share, mode, pace, epoch).await }));
    }
    let mut published = 0;
    for publisher in publishers {
        published += publisher.await.map_err(|error| CliError::Usage(format!("publisher task failed: {error}")))??;
    }
    let publish_seconds = (epoch.elapsed().as_nanos() as u64 - started_ns) as f64 / 1e9;
    let mut histogram = new_histogram();
    for receiver in receivers {
        if let Ok(part) = receiver.await {
            let _ = histogram.add(&part);
        }
    }
    let seconds = (last_receive_ns.load(Ordering::Relaxed).saturating_sub(started_ns)) as f64 / 1e9;
    let delivered = delivered.load(Ordering::Relaxed);
    Ok(summarize(args, published, delivered, publish_seconds, seconds, &histogram))
}

/// Payload size and, for a paced run, one publisher's messages per second.
#[derive(Debug, Clone, Copy)]
struct Pace {
    size: usize,
    rate: Option<u64>,
}

impl Pace {
    /// Waits until message `sent` is due (paced runs only).
    async fn wait_turn(&self, sent: u64, started: tokio::time::Instant) {
        let Some(rate) = self.rate else { return };
        let due = started + Duration::from_nanos(sent.saturating_mul(1_000_000_000) / rate);
        // Sleeping has millisecond granularity: publish what is due and
        // sleep only when a whole millisecond ahead.
        if due > tokio::time::Instant::now() + Duration::from_millis(1) {
            tokio::time::sleep_until(due).await;
        }
    }
}

async fn publish_share(
    client: Client,
    share: u64,
    mode: DeliveryMode,
    pace: Pace,
    epoch: Instant,
) -> Result<u64, CliError> {
    let mut confirms = std::collections::VecDeque::new();
    let topic = bench_topic();
    let mut arena = BytesMut::new();
    let size = pace.size;
    // Best-effort messages go out through `publish_payload`, from one
    // payload buffer whose first eight bytes are rewritten per message.
    let mut payload = vec![b'x'; size];
    let started = tokio::time::Instant::now();
    for sent in 0..share {
        pace.wait_turn(sent, started).await;
        // A paced run stamps every message: its latencies are the point.
        let stamp = pace.rate.is_some() || sent.is_multiple_of(THROUGHPUT_LATENCY_SAMPLE);
        if !mode.needs_ack() {
            let sent_ns = if stamp { (epoch.elapsed().as_nanos() as u64).max(1) } else { 0 };
            payload[..8].copy_from_slice(&sent_ns.to_be_bytes());
            client.publish_payload(&topic, &payload).await?;
            continue;
        }
        let message = bench_message(&mut arena, &topic, mode, size, epoch, stamp);
        confirms.push_back(client.start_confirmed(message, PublishOptions::default()).await?);
        // Keep the window full but collect confirms as they come.
        while confirms.len() > 512 {
            if let Some(confirm) = confirms.pop_front() {
                let _ = confirm.await;
            }
        }
    }
    for confirm in confirms {
        let _ = confirm.await;
    }
    client.ping().await?;
    client.close().await;
    Ok(share)
}

async fn latency_run(args: &PubsubArgs, endpoints: &Endpoints, mode: DeliveryMode) -> Result<PubsubResult, CliError> {
    let mut subscribers = subscribe_all(args, &endpoints.subscribe, mode).await?;
    endpoints.interest_ready().await?;
    let publisher = Client::connect(&endpoints.publish, client_options("bench-pub-latency".into())).await?;
    let epoch = Instant::now();
    let mut histogram = new_histogram();
    let started = Instant::now();
    let mut delivered = 0;
    let topic = bench_topic();
    let mut arena = BytesMut::new();
    for _ in 0..args.count {
        let message = bench_message(&mut arena, &topic, mode, args.size, epoch, true);
        if mode.needs_ack() {
            publisher.start_confirmed(message, PublishOptions::default()).await?;
        } else {
            publisher.publish(message).await?;
        }
        for (_, subscription) in subscribers.iter_mut() {
            let Some(delivery) = next_delivery(subscription).await else {
                return Err(CliError::Usage("a subscriber received nothing for 3 s; is the broker overloaded?".into()));
            };
            let now_ns = epoch.elapsed().as_nanos() as u64;
            let _ = histogram.record(now_ns.saturating_sub(sent_at_ns(&delivery.message.payload)).max(1));
            delivered += 1;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    publisher.close().await;
    for (client, _) in subscribers {
        client.close().await;
    }
    Ok(summarize(args, args.count, delivered, seconds, seconds, &histogram))
}

fn summarize(
    args: &PubsubArgs,
    published: u64,
    delivered: u64,
    publish_seconds: f64,
    seconds: f64,
    histogram: &Histogram<u64>,
) -> PubsubResult {
    let per_second = |count: u64, over: f64| if over > 0.0 { count as f64 / over } else { 0.0 };
    let micros = |quantile: f64| histogram.value_at_quantile(quantile) as f64 / 1000.0;
    PubsubResult {
        pubs: args.pubs,
        subs: args.subs,
        size: args.size,
        mode: args.mode.clone(),
        latency_mode: args.latency,
        chain: args.chain,
        rate: args.rate,
        published,
        delivered,
        seconds,
        publish_msgs_per_s: per_second(published, publish_seconds),
        delivered_msgs_per_s: per_second(delivered, seconds),
        delivered_mb_per_s: per_second(delivered, seconds) * args.size as f64 / 1e6,
        latency_us_p50: micros(0.5),
        latency_us_p90: micros(0.9),
        latency_us_p99: micros(0.99),
        latency_us_p999: micros(0.999),
        latency_us_max: histogram.max() as f64 / 1000.0,
    }
}

fn print_result(result: &PubsubResult, json: bool) {
    if json {
        println!("{}", serde_json::to_string(result).unwrap_or_default());
        return;
    }
    let chain = if result.chain > 1 { format!(", through {} brokers", result.chain) } else { String::new() };
    let rate = result.rate.map(|rate| format!(", paced at {rate} msgs/s")).unwrap_or_default();
    println!(
        "pubsub {} pub → {} sub, {} B, {}{}{chain}{rate}",
        result.pubs,
        result.subs,
        result.size,
        result.mode,
        if result.latency_mode { ", one in flight" } else { "" }
    );
    println!(
        "  published {} ({:.0} msgs/s), delivered {} in {:.3} s: {:.0} msgs/s, {:.1} MB/s",
        result.published,
        result.publish_msgs_per_s,
        result.delivered,
        result.seconds,
        result.delivered_msgs_per_s,
        result.delivered_mb_per_s
    );
    println!(
        "  latency µs: p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
        result.latency_us_p50,
        result.latency_us_p90,
        result.latency_us_p99,
        result.latency_us_p999,
        result.latency_us_max
    );
}
