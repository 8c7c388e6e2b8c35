//! The persistent-client experiment of the GES thesis (§8.3.4): clients
//! with stable storage go away for an epoch, events are published
//! meanwhile, and when they come back they receive everything they missed.
//!
//! Here each persistent client is a durable subscription on the `default`
//! stream of a measuring broker, with its broker's profile as content
//! filter. Its interest is advertised while it is away, so the events it
//! wants are forwarded to its broker and stored there. The client then
//! reconnects, and the run reports what it missed, what it received and
//! the recovery time: from the resubscribe to the last missed event.

use std::time::{Duration, Instant};

use serde_json::json;
use sift_client::{Client, ClientOptions, FilterKind, ManageOp, PublishOptions, StartPosition, SubscribeOptions};
use sift_core::workload::ges::GES_TOPIC;
use sift_core::workload::GesWorkload;
use sift_core::DeliveryMode;

use crate::error::BenchError;
use crate::network::TopologyNetwork;
use crate::report::Table;

/// Events published while the persistent clients are away.
pub const EPOCH_EVENTS_FULL: u64 = 10_000;
/// ... with `--quick`.
pub const EPOCH_EVENTS_QUICK: u64 = 500;
/// Longest wait for storage or recovery.
const PATIENCE: Duration = Duration::from_secs(120);

async fn connect(address: &str, name: &str) -> Result<Client, BenchError> {
    let options = ClientOptions { name: name.into(), reconnect: false, ..ClientOptions::default() };
    Ok(Client::connect(address, options).await?)
}

/// Runs the epoch on `network`: persistent clients at `measuring`
/// (broker, server hops), events from `publisher`, 100 % matching.
pub async fn run(
    network: &TopologyNetwork,
    publisher: &str,
    measuring: &[(String, u32)],
    events: u64,
    seed: u64,
) -> Result<Table, BenchError> {
    let workload = GesWorkload::new(seed, 100).map_err(|error| BenchError::Usage(format!("matching rate: {error}")))?;
    let (topic, language, filter) = workload.subscription(0);
    let kind = if language == "tags" { FilterKind::Tags } else { FilterKind::Sql };
    let options = |broker: &str| {
        SubscribeOptions::new(topic.as_str()).filter(kind, filter.clone()).durable(
            format!("ges-persistent-{broker}"),
            "",
            StartPosition::New,
        )
    };
    // Each client subscribes once (its durable is created) and goes away.
    for (broker, _) in measuring {
        let client = connect(&network.address(broker)?, "ges-persistent").await?;
        client.subscribe(options(broker)).await?.unsubscribe().await?;
        client.close().await;
    }
    wait_for_interest(network, publisher, measuring).await?;
    let sender = connect(&network.address(publisher)?, "ges-persistent-publisher").await?;
    for index in 0..events {
        let mut event = workload.event(index);
        event.delivery_mode = DeliveryMode::Persistent;
        sender.publish_confirmed(event, PublishOptions::default()).await?;
    }
    sender.close().await;
    let mut table = Table::new(
        "persistent",
        "§8.3.4 persistent clients: events missed during an epoch away, received on return, and the recovery time",
        &[
            ("broker", ""),
            ("server hops", ""),
            ("missed", ""),
            ("received", ""),
            ("recovery", "ms"),
            ("events/s", "1/s"),
        ],
    );
    for (broker, hops) in measuring {
        let address = network.address(broker)?;
        let client = connect(&address, "ges-persistent").await?;
        wait_for_stored(&client, events).await?;
        let started = Instant::now();
        let mut subscription = client.subscribe(options(broker)).await?;
        let mut received = 0u64;
        while received < events {
            let next = tokio::time::timeout(PATIENCE, subscription.next()).await;
            let Ok(Some(_)) = next else { break };
            received += 1;
        }
        let seconds = started.elapsed().as_secs_f64();
        subscription.unsubscribe().await?;
        client.manage(ManageOp::DurableRm, json!({ "name": format!("ges-persistent-{broker}") })).await?;
        client.close().await;
        let row = vec![
            broker.as_str().into(),
            (*hops).into(),
            events.into(),
            received.into(),
            (seconds * 1_000.0).into(),
            (received as f64 / seconds).into(),
        ];
        table.push_row(row)?;
    }
    Ok(table)
}

/// Waits until the publisher's broker holds the interest of every other
/// measuring broker's durable.
async fn wait_for_interest(
    network: &TopologyNetwork,
    publisher: &str,
    measuring: &[(String, u32)],
) -> Result<(), BenchError> {
    let broker = network.broker(publisher)?;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let remote = broker.remote_interest();
        let known = |name: &str| {
            remote
                .iter()
                .any(|(holder, topic, content)| holder == name && topic.as_str() == GES_TOPIC && content.is_some())
        };
        if measuring.iter().all(|(name, _)| name == publisher || known(name)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Timeout("the persistent clients' interest did not reach the publisher".into()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the client's broker stored `events` messages in `default`.
async fn wait_for_stored(client: &Client, events: u64) -> Result<(), BenchError> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let info = client.manage(ManageOp::StreamInfo, json!({ "name": "default" })).await?;
        if info["messages"].as_u64() >= Some(events) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Timeout(format!("the persistent clients' broker stored only {info}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
