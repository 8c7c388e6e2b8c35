//! The shared run helpers against real embedded brokers: every message
//! reaches every subscriber, in both modes, through one broker and a chain.

use sift_bench::{one_in_flight, throughput, Endpoints, Workload};
use sift_core::DeliveryMode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throughput_run_delivers_every_message_to_every_subscriber_in_both_modes() {
    let endpoints = Endpoints::chain(1).await.expect("broker starts");
    for mode in [DeliveryMode::BestEffort, DeliveryMode::Reliable] {
        let workload = Workload { publishers: 2, subscribers: 2, mode, ..Workload::new("bench.test", 64, 1_001) };
        let result = throughput(&endpoints, &workload).await.expect("run");
        assert_eq!((result.published, result.delivered), (1_001, 2_002), "{mode:?}");
        assert!(result.seconds > 0.0 && result.delivered_msgs_per_s() > 0.0);
        // One message in 16 of each publisher's share carries its send time, for each subscriber.
        let stamped = 2 * (501_u64.div_ceil(16) + 500_u64.div_ceil(16));
        assert_eq!(result.latency_ns.count(), stamped, "{mode:?}");
    }
    endpoints.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_in_flight_through_a_chain_times_every_message() {
    let endpoints = Endpoints::chain(2).await.expect("chain starts");
    assert_ne!(endpoints.publish_addr(), endpoints.subscribe_addr());
    let result = one_in_flight(&endpoints, &Workload::new("bench.chain", 32, 50)).await;
    endpoints.shutdown().await;
    let result = result.expect("run");
    assert_eq!(result.delivered, 50);
    let latency = result.latency_ns.summary().expect("samples");
    assert_eq!(latency.count, 50);
    assert!(latency.min > 0.0 && latency.min <= latency.p50 && latency.p50 <= latency.max);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_the_runs_cannot_carry_are_refused() {
    let endpoints = Endpoints::remote("127.0.0.1:1", None);
    let too_small = Workload::new("bench.test", 4, 10);
    assert!(throughput(&endpoints, &too_small).await.is_err());
    let no_rate = Workload { rate: Some(0), ..Workload::new("bench.test", 64, 10) };
    assert!(throughput(&endpoints, &no_rate).await.is_err());
    let persistent = Workload { mode: DeliveryMode::Persistent, ..Workload::new("bench.test", 64, 10) };
    assert!(one_in_flight(&endpoints, &persistent).await.is_err());
}
