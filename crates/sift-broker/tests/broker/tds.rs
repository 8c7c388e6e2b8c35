//! The time differential service on a stream with known gaps: the
//! subscriber's deliveries pass through Toxiproxy, which adds latency and
//! jitter, and the TDS puts the publisher's spacing back.

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
/// Largest difference allowed between a released gap and its sent gap.
/// The TDS does far better (BENCHMARKS.md); this only has to tell its
/// output from the jittered input on a busy test machine.
const SPACING_ERROR_MAX_NS: i64 = 3_000_000;

/// Largest |gap(b) − gap(a)| over consecutive pairs of two time series.
fn spacing_error_max_ns(sent: &[u64], seen: &[u64]) -> i64 {
    (1..sent.len())
        .map(|index| {
            let sent_gap = sent[index] as i64 - sent[index - 1] as i64;
            let seen_gap = seen[index] as i64 - seen[index - 1] as i64;
            (seen_gap - sent_gap).abs()
        })
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn the_tds_restores_the_spacing_that_jitter_took_away() {
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
    assert_eq!(counters.late, 0, "every message arrived within the playout delay");
    let released_ns: Vec<u64> = releases.iter().map(|(_, release)| release.released_ns).collect();
    let input_error_ns = spacing_error_max_ns(&sent_ns, &arrived_ns);
    let output_error_ns = spacing_error_max_ns(&sent_ns, &released_ns);
    assert!(
        output_error_ns < SPACING_ERROR_MAX_NS,
        "released gaps are off their sent gaps by up to {output_error_ns} ns (input: {input_error_ns} ns)"
    );
    assert!(
        output_error_ns < input_error_ns,
        "the TDS output ({output_error_ns} ns) is steadier than its jittered input ({input_error_ns} ns)"
    );
    publishing.await.expect("publisher done").close().await;
    receiver.close().await;
    broker.shutdown().await;
}
