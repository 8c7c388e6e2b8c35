//! Time services over real sockets: clock offsets found against a client
//! whose clock is shifted (the clock is injected; the machine's is left
//! alone), publisher timestamps carried into a receiver's clock with a
//! bound that holds, over one broker and across a link, and a publisher
//! whose timestamp is too far off refused.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use sift_broker::RunningBroker;
use sift_client::{system_now_ns, Client, ClientError, ClientOptions, ClockSource, SubscribeOptions};
use sift_proto::ErrorCode;

use crate::common::{broker, message, next};
use crate::network_support::{converged, eventually, link_addr, node, shutdown_all};

/// Three seconds, in nanoseconds.
const SHIFT_NS: i64 = 3_000_000_000;

/// A client reading `clock`, stamping its publishes when `publisher_time`.
async fn timed_client(broker: &RunningBroker, name: &str, clock: ClockSource, publisher_time: bool) -> Client {
    let options =
        ClientOptions { name: name.into(), reconnect: false, clock, publisher_time, ..ClientOptions::default() };
    Client::connect(broker.local_addr().to_string(), options).await.expect("client connects")
}

/// Asserts that `value` is within `bound` of `truth`.
fn within(what: &str, value: i128, truth: i128, bound: i128) {
    assert!(
        (value - truth).abs() <= bound,
        "{what}: {value} is {} from {truth}, beyond the bound {bound}",
        value - truth
    );
}

#[tokio::test]
async fn a_shifted_client_clock_is_found_within_the_bound() {
    let broker = broker().await;
    let ahead = timed_client(&broker, "ahead", ClockSource::shifted(SHIFT_NS), false).await;
    let behind = timed_client(&broker, "behind", ClockSource::shifted(-SHIFT_NS), false).await;
    for (client, shift) in [(&ahead, SHIFT_NS), (&behind, -SHIFT_NS)] {
        let estimate = client.sync_clock(8).await.expect("exchanges complete");
        // The broker reads the true clock: it is `shift` behind this client's.
        within("offset", estimate.offset_ns.into(), (-shift).into(), estimate.error_ns.into());
        assert!(estimate.error_ns >= estimate.round_trip_ns / 2, "the bound covers half the round trip");
        assert_eq!(estimate.samples, 8);
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn a_publisher_timestamp_reaches_another_clock_within_its_bound() {
    let broker = broker().await;
    let publisher = timed_client(&broker, "pub", ClockSource::shifted(-SHIFT_NS), true).await;
    let receiver = timed_client(&broker, "sub", ClockSource::shifted(SHIFT_NS), false).await;
    receiver.sync_clock(4).await.expect("receiver synchronised");
    let mut subscription = receiver.subscribe(SubscribeOptions::new("time.t")).await.expect("subscribe");
    let before_ns = system_now_ns();
    publisher.publish(message("time.t", "stamped")).await.expect("publish");
    let after_ns = system_now_ns();
    let delivery = next(&mut subscription).await;
    assert!(delivery.message.time_error_ns > 0, "a publisher's timestamp carries its bound");
    let local = receiver.local_time(&delivery.message).expect("receiver has an estimate");
    // The receiver's clock is SHIFT ahead of the true one: so is the send time in it.
    let sent_from = i128::from(before_ns) + i128::from(SHIFT_NS);
    let sent_to = i128::from(after_ns) + i128::from(SHIFT_NS);
    let stamped = i128::from(local.timestamp_ns);
    let bound = i128::from(local.error_ns);
    assert!(
        stamped >= sent_from - bound && stamped <= sent_to + bound,
        "send time {stamped} outside [{sent_from}, {sent_to}] ± {bound}"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_publisher_timestamp_beyond_the_skew_limit_is_refused() {
    let broker = broker().await;
    // A clock that jumps two hours after the client synchronised: its
    // publishes then carry a timestamp two hours off the broker's.
    let jump_ns = Arc::new(AtomicI64::new(0));
    let read_jump = jump_ns.clone();
    let clock = ClockSource::from_fn(move || system_now_ns().saturating_add_signed(read_jump.load(Ordering::Relaxed)));
    let publisher = timed_client(&broker, "jumpy", clock, true).await;
    jump_ns.store(2 * 3_600 * 1_000_000_000, Ordering::Relaxed);
    let refused = publisher.publish_confirmed(message("time.t", "late"), Default::default()).await;
    match refused {
        Err(ClientError::Refused { code: ErrorCode::InvalidField, message }) => {
            assert!(message.contains("publisher_time_skew_ms_max"), "{message}");
        }
        other => panic!("expected invalid_field, got {other:?}"),
    }
    // The connection stays usable.
    jump_ns.store(0, Ordering::Relaxed);
    publisher.publish_confirmed(message("time.t", "fine"), Default::default()).await.expect("accepted");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_forwarded_timestamp_gains_the_link_bound() {
    let first = node("t1", &[]).await;
    let second = node("t2", &[link_addr(&first)]).await;
    converged(&[&first, &second], &["t1", "t2"]).await;
    // Each broker has sampled the other's clock once the links say so.
    for broker in [&first, &second] {
        eventually("the link clock is sampled", || broker.links().iter().all(|link| link.clock.is_some())).await;
    }
    let receiver = timed_client(&second, "far", ClockSource::shifted(SHIFT_NS), false).await;
    receiver.sync_clock(4).await.expect("receiver synchronised");
    let mut subscription = receiver.subscribe(SubscribeOptions::new("time.far")).await.expect("subscribe");
    eventually("t1 sees t2's interest", || !first.remote_interest().is_empty()).await;
    let publisher = timed_client(&first, "near", ClockSource::shifted(-SHIFT_NS), true).await;
    let publisher_error_ns = publisher.clock_estimate().expect("synchronised at connect").error_ns;
    let before_ns = system_now_ns();
    publisher.publish(message("time.far", "across")).await.expect("publish");
    let after_ns = system_now_ns();
    let delivery = next(&mut subscription).await;
    let link_error_ns = second.links()[0].clock.expect("sampled").error_ns;
    assert!(
        u64::from(delivery.message.time_error_ns) >= link_error_ns,
        "the bound {} includes the link's {link_error_ns} (and the publisher's {publisher_error_ns})",
        delivery.message.time_error_ns
    );
    let local = receiver.local_time(&delivery.message).expect("receiver has an estimate");
    let bound = i128::from(local.error_ns);
    let stamped = i128::from(local.timestamp_ns) - i128::from(SHIFT_NS);
    assert!(
        stamped >= i128::from(before_ns) - bound && stamped <= i128::from(after_ns) + bound,
        "send time {stamped} outside [{before_ns}, {after_ns}] ± {bound}"
    );
    shutdown_all(vec![first, second]).await;
}
