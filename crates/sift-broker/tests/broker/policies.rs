//! Slow subscribers: each queue policy while a fast subscriber keeps up, and
//! priority order. A subscription in credit mode with no credit is a slow
//! subscriber whose queue fills deterministically.

use std::time::Duration;

use sift_client::{PublishOptions, QueuePolicy, SubscribeOptions};
use sift_core::Priority;
use sift_proto::{AckMode, ErrorCode, Subscribe};

use crate::common::*;

fn stalled(policy: QueuePolicy, capacity: u32) -> SubscribeOptions {
    let mut options = SubscribeOptions::new("feed").policy(policy).queue_capacity(capacity);
    options.credit = Some(0);
    options
}

/// Publishes `count` best-effort messages "0".."count-1" and waits until the broker routed them.
async fn publish_numbers(publisher: &sift_client::Client, count: usize) {
    for index in 0..count {
        publisher.publish(message("feed", &index.to_string())).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
}

fn numbers(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|index| index.to_string()).collect()
}

#[tokio::test]
async fn drop_new_keeps_the_oldest_and_the_fast_subscriber_gets_everything() {
    let broker = broker().await;
    let slow_client = client(&broker, "slow").await;
    let slow = slow_client.subscribe(stalled(QueuePolicy::DropNew, 10)).await.expect("subscribe");
    let fast_client = client(&broker, "fast").await;
    let mut fast = fast_client.subscribe(SubscribeOptions::new("feed")).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    publish_numbers(&publisher, 100).await;
    assert_eq!(texts(&mut fast, 100).await, numbers(0..100));
    let mut slow = slow;
    slow.grant(1000).expect("grant");
    assert_eq!(texts(&mut slow, 10).await, numbers(0..10));
    // The queue has room again; a sentinel from the same publisher comes
    // next only if none of the dropped messages is still queued before it.
    publisher.publish(message("feed", SENTINEL)).await.expect("publish");
    assert_next_is(&mut slow, SENTINEL, "the newer messages were dropped").await;
    assert_eq!(broker.stats().dropped_queue_full, 90);
    broker.shutdown().await;
}

#[tokio::test]
async fn keep_last_keeps_the_newest() {
    let broker = broker().await;
    let slow_client = client(&broker, "slow").await;
    let mut slow = slow_client.subscribe(stalled(QueuePolicy::KeepLast(5), 100)).await.expect("subscribe");
    let fast_client = client(&broker, "fast").await;
    let mut fast = fast_client.subscribe(SubscribeOptions::new("feed")).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    publish_numbers(&publisher, 50).await;
    assert_eq!(texts(&mut fast, 50).await, numbers(0..50));
    slow.grant(1000).expect("grant");
    assert_eq!(texts(&mut slow, 5).await, numbers(45..50));
    // A sentinel from the same publisher comes next only if none of the
    // evicted messages is still queued before it.
    publisher.publish(message("feed", SENTINEL)).await.expect("publish");
    assert_next_is(&mut slow, SENTINEL, "the older messages were evicted").await;
    assert_eq!(broker.stats().dropped_keep_last, 45);
    broker.shutdown().await;
}

#[tokio::test]
async fn disconnect_closes_the_slow_subscriber_only() {
    let broker = broker().await;
    let mut raw = Raw::handshake(&broker).await;
    let mut request = Subscribe::new(1, "feed");
    request.policy = Some(QueuePolicy::Disconnect);
    request.queue_capacity = 5;
    request.ack_mode = AckMode::Auto;
    request.flags = sift_proto::subscribe_flags::CREDIT_MODE;
    raw.subscribe(request).await;
    let fast_client = client(&broker, "fast").await;
    let mut fast = fast_client.subscribe(SubscribeOptions::new("feed")).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    publish_numbers(&publisher, 20).await;
    assert_eq!(texts(&mut fast, 20).await, numbers(0..20));
    let frames = raw.recv_until_closed().await;
    let errors = errors(&frames);
    assert_eq!(errors.len(), 1, "{frames:?}");
    assert_eq!(errors[0].code, ErrorCode::SlowConsumer);
    assert!(errors[0].fatal);
    assert_eq!(broker.stats().slow_consumer_disconnects, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn block_holds_reliable_publishers_back_and_not_other_publishers() {
    let broker = broker().await;
    let slow_client = client(&broker, "slow").await;
    let mut slow = slow_client.subscribe(stalled(QueuePolicy::Block, 3).max_unacked(1000)).await.expect("subscribe");
    let fast_client = client(&broker, "fast").await;
    let mut fast_other = fast_client.subscribe(SubscribeOptions::new("other")).await.expect("subscribe");
    let reliable_publisher = client(&broker, "reliable-pub").await;
    let held = tokio::spawn({
        let publisher = reliable_publisher.clone();
        async move {
            for index in 0..6 {
                publisher
                    .publish_confirmed(reliable("feed", &index.to_string()), PublishOptions::default())
                    .await
                    .expect("confirm");
            }
        }
    });
    // Wait until the broker reports the publisher blocked.
    let deadline = std::time::Instant::now() + PATIENCE;
    while broker.stats().publisher_blocked == 0 {
        assert!(std::time::Instant::now() < deadline, "publisher never blocked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!held.is_finished(), "confirms are held while the queue is full");
    // Another publisher, to a subscriber that keeps up, is not held back.
    let other_publisher = client(&broker, "other-pub").await;
    for index in 0..50 {
        other_publisher.publish(message("other", &index.to_string())).await.expect("publish");
    }
    assert_eq!(texts(&mut fast_other, 50).await, numbers(0..50));
    // Best-effort messages to the full queue are dropped, never blocking.
    other_publisher.publish(message("feed", "best-effort")).await.expect("publish");
    other_publisher.ping().await.expect("ping");
    // Credit lets the subscriber drain; the publisher completes, nothing lost.
    slow.grant(1000).expect("grant");
    let got = texts(&mut slow, 6).await;
    assert_eq!(got, numbers(0..6));
    tokio::time::timeout(PATIENCE, held).await.expect("publisher unblocks").expect("task");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_does_not_stall_a_fast_one() {
    let broker = broker().await;
    // A raw subscriber that never reads: TCP buffers fill, then its queue.
    let mut raw = Raw::handshake(&broker).await;
    let mut request = Subscribe::new(1, "feed");
    request.policy = Some(QueuePolicy::DropNew);
    request.queue_capacity = 100;
    request.ack_mode = AckMode::Auto;
    raw.subscribe(request).await;
    let fast_client = client(&broker, "fast").await;
    let mut fast = fast_client.subscribe(SubscribeOptions::new("feed")).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    let payload = "x".repeat(1000);
    let count = 20_000;
    let receiver = tokio::spawn(async move {
        let mut received = 0;
        while received < count {
            next(&mut fast).await;
            received += 1;
        }
        received
    });
    for _ in 0..count {
        publisher.publish(message("feed", &payload)).await.expect("publish");
    }
    assert_eq!(tokio::time::timeout(PATIENCE, receiver).await.expect("fast keeps up").expect("task"), count);
    assert!(broker.stats().dropped_queue_full > 0, "the stalled subscriber's queue overflowed");
    drop(raw);
    broker.shutdown().await;
}

#[tokio::test]
async fn higher_priority_is_delivered_first() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut options = SubscribeOptions::new("feed");
    options.credit = Some(0);
    let mut subscription = subscriber.subscribe(options).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    for (priority, text) in [(0, "low-1"), (4, "normal-1"), (9, "urgent-1"), (0, "low-2"), (9, "urgent-2")] {
        let mut sent = message("feed", text);
        sent.priority = Priority::new(priority).expect("0-9");
        publisher.publish(sent).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
    subscription.grant(10).expect("grant");
    assert_eq!(texts(&mut subscription, 5).await, ["urgent-1", "urgent-2", "normal-1", "low-1", "low-2"]);
    broker.shutdown().await;
}
