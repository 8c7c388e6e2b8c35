//! The GES thesis's persistent clients with singular and double
//! replication (§8.3.4, Figs. 8.3.6 and 8.3.7): latency of delivery to a
//! persistent client when each event is stored on one, two or three
//! brokers before it is delivered.
//!
//! In GES an event was stored at the level-3 stable store of node 1 and
//! again at SC-6's before clients there got it (granularity r_2). Here each
//! replication degree `R` is a stream of `R` replicas placed on the
//! publisher's broker and the brokers nearest to it (`R` = 1: a stream of
//! the publisher's broker alone; `R` > 1: a Raft group that confirms once a
//! quorum has the event on disk, fsync always). The persistent client is a
//! durable subscription on that stream at the publisher's broker (a member
//! for every `R`), with its broker's profile as content filter. Events are
//! published persistent and confirmed, one at a time, at a fixed rate; the
//! run reports each degree's confirm latency (publish to confirm: stored at
//! a quorum) and delivery latency (publish to the persistent client's
//! receipt), on one clock in this process.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use serde_json::{json, Value};
use sift_client::{Client, ClientOptions, FilterKind, ManageOp, PublishOptions, StartPosition, SubscribeOptions};
use sift_core::workload::GesWorkload;
use sift_core::{DeliveryMode, TopicName};

use crate::error::BenchError;
use crate::network::TopologyNetwork;
use crate::report::Table;
use crate::stamp::{nanos_since, sent_at_ns, write_stamp};
use crate::stats::Samples;

/// Replication degrees of the run.
pub const REPLICATION_FULL: [u32; 3] = [1, 2, 3];
/// Events per degree.
pub const EVENTS_FULL: u64 = 2_000;
/// ... with `--quick`.
pub const EVENTS_QUICK: u64 = 200;
/// Publish rate, events per second: well under a confirm round at every
/// degree, so that latency is not queueing behind the publisher.
const RATE_PER_S: f64 = 100.0;
/// Event size, bytes (the middle of the thesis's 30 to 500).
const EVENT_BYTES: usize = 250;
/// Longest wait for a stream's group, or for an event.
const PATIENCE: Duration = Duration::from_secs(60);

/// One degree's measures.
struct Measured {
    members: Vec<String>,
    received: u64,
    confirm_ns: Samples,
    delivery_ns: Samples,
}

/// Runs every degree of `replications` with the publisher and the
/// persistent client at `publisher`.
pub async fn run(
    network: &TopologyNetwork,
    publisher: &str,
    replications: &[u32],
    events: u64,
    seed: u64,
) -> Result<Table, BenchError> {
    let mut table = Table::new(
        "replicated",
        "§8.3.4 persistent clients with singular and double replication: events stored on R brokers before delivery",
        &[
            ("replicas", ""),
            ("members", ""),
            ("events", ""),
            ("received", ""),
            ("confirm mean", "ms"),
            ("confirm p99", "ms"),
            ("delivery mean", "ms"),
            ("delivery min", "ms"),
            ("delivery p50", "ms"),
            ("delivery p99", "ms"),
            ("delivery max", "ms"),
        ],
    );
    for &replicas in replications {
        let measured = run_degree(network, publisher, replicas, events, seed).await?;
        let (Some(confirm), Some(delivery)) = (measured.confirm_ns.summary(), measured.delivery_ns.summary()) else {
            return Err(BenchError::Timeout(format!("replicas = {replicas}: no event was confirmed and delivered")));
        };
        let ms = |ns: f64| ns / 1e6;
        table.push_row(vec![
            replicas.into(),
            measured.members.join(" ").into(),
            events.into(),
            measured.received.into(),
            ms(confirm.mean).into(),
            ms(confirm.p99).into(),
            ms(delivery.mean).into(),
            ms(delivery.min).into(),
            ms(delivery.p50).into(),
            ms(delivery.p99).into(),
            ms(delivery.max).into(),
        ])?;
    }
    Ok(table)
}

async fn connect(address: &str, name: &str) -> Result<Client, BenchError> {
    let options = ClientOptions { name: name.into(), reconnect: false, ..ClientOptions::default() };
    Ok(Client::connect(address, options).await?)
}

/// Places the stream of `replicas`, measures it, and removes it from
/// every member.
async fn run_degree(
    network: &TopologyNetwork,
    publisher: &str,
    replicas: u32,
    events: u64,
    seed: u64,
) -> Result<Measured, BenchError> {
    let stream = format!("ges-r{replicas}");
    let topic = format!("ges.replicated.r{replicas}");
    let client = connect(&network.address(publisher)?, "ges-replicated").await?;
    let request = json!({ "name": stream, "topics": [topic], "replicas": replicas, "fsync": "always" });
    let info = client.manage(ManageOp::StreamAdd, request).await?;
    let members = members_of(&info, publisher);
    if replicas > 1 {
        crate::scenarios::persist::await_leader(&client, &stream).await?;
    }
    let workload = GesWorkload::new(seed, 100).map_err(|error| BenchError::Usage(format!("matching rate: {error}")))?;
    let (_, language, filter) = workload.subscription(0);
    let kind = if language == "tags" { FilterKind::Tags } else { FilterKind::Sql };
    let durable = format!("ges-replicated-{replicas}");
    let options = SubscribeOptions::new(topic.as_str()).filter(kind, filter).durable(
        durable.clone(),
        stream.clone(),
        StartPosition::New,
    );
    let mut subscription = client.subscribe(options).await?;
    let epoch = Instant::now();
    let topic_name = TopicName::new(topic.as_str()).map_err(|error| BenchError::Usage(error.to_string()))?;
    let receiver = tokio::spawn(async move {
        let mut delivery_ns = Samples::new();
        while delivery_ns.count() < events {
            let Ok(Some(delivery)) = tokio::time::timeout(PATIENCE, subscription.next()).await else { break };
            delivery_ns.record(nanos_since(epoch).saturating_sub(sent_at_ns(&delivery.message.payload)).max(1));
        }
        (subscription, delivery_ns)
    });
    let confirm_ns = publish(&client, &workload, &topic_name, events, epoch).await?;
    let (subscription, delivery_ns) = receiver.await.map_err(|error| BenchError::Usage(error.to_string()))?;
    subscription.unsubscribe().await?;
    client.manage(ManageOp::DurableRm, json!({ "name": durable })).await?;
    client.close().await;
    // The durable's removal reaches every member before any leaves.
    let mut addresses = Vec::new();
    for member in &members {
        addresses.push(network.address(member)?);
    }
    for address in &addresses {
        await_durable_gone(address, &durable).await?;
    }
    for address in &addresses {
        let admin = connect(address, "ges-replicated-admin").await?;
        admin.manage(ManageOp::StreamRm, json!({ "name": stream })).await?;
        admin.close().await;
    }
    Ok(Measured { members, received: delivery_ns.count(), confirm_ns, delivery_ns })
}

/// Waits until the durable's removal (a state change of the group, which
/// needs the group's quorum) has reached the broker at `address`.
async fn await_durable_gone(address: &str, durable: &str) -> Result<(), BenchError> {
    let admin = connect(address, "ges-replicated-admin").await?;
    let deadline = Instant::now() + PATIENCE;
    while admin.manage(ManageOp::DurableInfo, json!({ "name": durable })).await.is_ok() {
        if Instant::now() > deadline {
            return Err(BenchError::Timeout(format!("durable {durable} stayed at {address}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    admin.close().await;
    Ok(())
}

/// The brokers that keep the stream `info` describes.
fn members_of(info: &Value, publisher: &str) -> Vec<String> {
    match info["replication"]["members"].as_array() {
        Some(members) => members.iter().filter_map(|name| name.as_str().map(str::to_string)).collect(),
        None => vec![publisher.to_string()],
    }
}

/// Publishes `events` confirmed, one at a time at [`RATE_PER_S`], each
/// stamped when it leaves; the confirm latencies.
async fn publish(
    client: &Client,
    workload: &GesWorkload,
    topic: &TopicName,
    events: u64,
    epoch: Instant,
) -> Result<Samples, BenchError> {
    let interval = Duration::from_secs_f64(1.0 / RATE_PER_S);
    let started = tokio::time::Instant::now();
    let mut confirm_ns = Samples::new();
    for index in 0..events {
        tokio::time::sleep_until(started + interval.mul_f64(index as f64)).await;
        let mut event = workload.event(index);
        event.topic = topic.clone();
        event.delivery_mode = DeliveryMode::Persistent;
        let mut payload = BytesMut::zeroed(EVENT_BYTES.max(event.payload.len()));
        payload[..event.payload.len()].copy_from_slice(&event.payload);
        let sent_ns = nanos_since(epoch);
        write_stamp(&mut payload, sent_ns);
        event.payload = payload.freeze();
        client.publish_confirmed(event, PublishOptions::default()).await?;
        confirm_ns.record(nanos_since(epoch).saturating_sub(sent_ns).max(1));
    }
    Ok(confirm_ns)
}
