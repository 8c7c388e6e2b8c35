//! The time differential service on a stream with known gaps: the
//! subscriber's deliveries pass through Toxiproxy, which adds latency and
//! jitter, and the TDS releases each message once, in order, no earlier
//! than it arrived. How well it restores the publisher's spacing is a
//! measurement, not a test: `sift bench nb tds` (docs/BENCHMARKS.md), which
//! a busy test machine cannot disturb into a failure.

use std::sync::mpsc;
use std::time::Duration;

use sift_client::{Client, ClientOptions, SubscribeOptions, TdsConfig, TimeDifferential};

use crate::common::{broker, message, next};
use crate::toxiproxy::{self, server_or_skip};

/// Gaps between consecutive publishes, cycled: uneven on purpose.
const GAPS_MS: [u64; 4] = [10, 25, 15, 40];
/// Messages in the stream.
const MESSAGES: usize = 40;
/// Latency and jitter Toxiproxy adds towards the subscriber.
const LATENCY_MS: u64 = 20;
const JITTER_MS: u64 = 10;
/// The TDS playout delay: above latency plus jitter, so nothing is late.
const MAX_DELAY_MS: u64 = 150;
#[tokio::test]
async fn the_tds_releases_every_message_once_in_order_after_it_arrived() {
    let Some(binary) = server_or_skip() else { return };
    let toxiproxy = toxiproxy::start(&binary).await;
    let broker = broker().await;
    let jittery = toxiproxy.proxy("jittery", broker.local_addr()).await.expect("proxy created");
    toxiproxy.add_jittery_latency("jittery", LATENCY_MS, JITTER_MS).await.expect("latency added");
    let receiver_options = ClientOptions { name: "tds-sub".into(), reconnect: false, ..ClientOptions::default() };
    let receiver = Client::connect(jittery.to_string(), receiver_options).await.expect("connects through the proxy");
    receiver.sync_clock(4).await.expect("clock synchronised");
    let mut subscription = receiver.subscribe(SubscribeOptions::new("tds.frames")).await.expect("subscribe");
    let publisher_options =
        ClientOptions { name: "tds-pub".into(), reconnect: false, publisher_time: true, ..ClientOptions::default() };
    let publisher = Client::connect(broker.local_addr().to_string(), publisher_options).await.expect("connects");

    let (released_sender, released) = mpsc::channel();
    let config = TdsConfig { max_delay: Duration::from_millis(MAX_DELAY_MS), ..TdsConfig::default() };
    let tds = TimeDifferential::spawn(config, receiver.clock(), move |index: usize, release| {
        let _ = released_sender.send((index, release));
    })
    .expect("the TDS thread starts");

    let publishing = tokio::spawn(async move {
        for index in 0..MESSAGES {
            publisher.publish(message("tds.frames", &index.to_string())).await.expect("publish");
            // Pacing the publishes is the workload: the TDS must restore
            // these gaps. Nothing is asserted after this wait.
            tokio::time::sleep(Duration::from_millis(GAPS_MS[index % GAPS_MS.len()])).await;
        }
        publisher
    });
    // The estimate the whole stream is mapped with: one offset for all, so
    // that spacing is not disturbed by a later sample.
    let estimate = receiver.clock_estimate().expect("synchronised");
    let mut sent_ns = Vec::with_capacity(MESSAGES);
    let mut arrived_ns = Vec::with_capacity(MESSAGES);
    for index in 0..MESSAGES {
        let delivery = next(&mut subscription).await;
        arrived_ns.push(receiver.now_ns());
        assert_eq!(delivery.message.payload, index.to_string().as_bytes(), "in order, once");
        let local_ns = estimate.to_local(delivery.message.timestamp_ns);
        sent_ns.push(local_ns);
        tds.submit(index, local_ns);
    }
    let counters = tds.finish();
    let releases: Vec<_> = released.iter().collect();
    assert_eq!(releases.iter().map(|(index, _)| *index).collect::<Vec<_>>(), (0..MESSAGES).collect::<Vec<_>>());
    assert_eq!(counters.released, MESSAGES as u64, "each message released once: {counters:?}");
    for ((index, release), arrival_ns) in releases.iter().zip(&arrived_ns) {
        assert!(release.released_ns >= *arrival_ns, "message {index} released before it arrived");
        assert!(release.released_ns >= sent_ns[*index], "message {index} released before it was sent");
    }
    publishing.await.expect("publisher done").close().await;
    receiver.close().await;
    broker.shutdown().await;
}
