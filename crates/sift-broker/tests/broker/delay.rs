//! Delayed links: a chain of three brokers whose links pass through
//! Toxiproxy, each adding a fixed latency to what the dialled broker sends.
//! A best-effort message published at one end reaches the other in about
//! the sum of the link delays: never less, and not much more.

use std::time::{Duration, Instant};

use sift_broker::RunningBroker;
use sift_client::{Client, SubscribeOptions, Subscription};

use crate::common::{client, message, next};
use crate::network_support::{converged, eventually, link_addr, node, shutdown_all};
use crate::toxiproxy::{self, server_or_skip};

/// Latency added to each link, in the direction the messages travel.
const LINK_DELAY_MS: u64 = 30;
/// Links between the publisher's broker and the subscriber's.
const LINKS: u64 = 2;
/// What the brokers, clients and loopback may add to the delays, at most,
/// for the median message.
const OVERHEAD_MAX_MS: u64 = 40;
/// Messages timed for each median.
const SAMPLES: usize = 15;

/// Publishes `SAMPLES` messages one at a time, each once the previous one
/// arrived, and returns the median time from publishing to receiving.
async fn median_latency(publisher: &Client, subscription: &mut Subscription) -> Duration {
    // One message first, so that nothing set up on first use is timed.
    publisher.publish(message("delay.probe", "warm-up")).await.expect("publish");
    next(subscription).await;
    let mut latencies = Vec::with_capacity(SAMPLES);
    for index in 0..SAMPLES {
        let sent = Instant::now();
        publisher.publish(message("delay.probe", &index.to_string())).await.expect("publish");
        let delivery = next(subscription).await;
        latencies.push(sent.elapsed());
        assert_eq!(delivery.message.payload, index.to_string().as_bytes(), "messages arrive in order, once");
    }
    latencies.sort_unstable();
    latencies[SAMPLES / 2]
}

/// The address `broker` dialled to reach `neighbour`, as its link reports.
fn dialled_address(broker: &RunningBroker, neighbour: &str) -> String {
    let links = broker.links();
    links.into_iter().find(|link| link.neighbour == neighbour).map(|link| link.address).expect("the link is up")
}

#[tokio::test]
async fn latency_across_delayed_links_is_their_sum() {
    let Some(binary) = server_or_skip() else { return };
    let toxiproxy = toxiproxy::start(&binary).await;
    // Each broker dials the previous one through a proxy, so the previous
    // one is the proxy's upstream and what it forwards is "downstream".
    let head = node("head", &[]).await;
    let to_head = toxiproxy.proxy("to-head", link_addr(&head)).await.expect("proxy created");
    let middle = node("middle", &[to_head]).await;
    let to_middle = toxiproxy.proxy("to-middle", link_addr(&middle)).await.expect("proxy created");
    let tail = node("tail", &[to_middle]).await;
    converged(&[&head, &middle, &tail], &["head", "middle", "tail"]).await;
    assert_eq!(dialled_address(&middle, "head"), to_head.to_string(), "the link goes through the proxy");
    assert_eq!(dialled_address(&tail, "middle"), to_middle.to_string(), "the link goes through the proxy");

    let subscriber = client(&tail, "far").await;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("delay.>")).await.expect("subscribes");
    eventually("the head holds the tail's interest", || !head.remote_interest().is_empty()).await;
    let publisher = client(&head, "near").await;
    let undelayed = median_latency(&publisher, &mut subscription).await;
    toxiproxy.add_latency("to-head", LINK_DELAY_MS).await.expect("latency added");
    toxiproxy.add_latency("to-middle", LINK_DELAY_MS).await.expect("latency added");
    let delayed = median_latency(&publisher, &mut subscription).await;

    let sum = Duration::from_millis(LINKS * LINK_DELAY_MS);
    let ceiling = sum + Duration::from_millis(OVERHEAD_MAX_MS);
    assert!(delayed >= sum, "median {delayed:?} is below the {sum:?} the links add (undelayed {undelayed:?})");
    assert!(delayed < ceiling, "median {delayed:?} exceeds {ceiling:?} (undelayed {undelayed:?})");
    publisher.close().await;
    subscriber.close().await;
    shutdown_all(vec![tail, middle, head]).await;
}
