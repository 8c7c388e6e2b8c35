//! Behaviours found wrong in review, each pinned by a test.

use std::time::Duration;

use sift_client::{AckPolicy, ClientError, PublishOptions, QueuePolicy, SubscribeOptions};
use sift_proto::{AckMode, ErrorCode, Frame, Subscribe};

use crate::common::*;

/// A connection that publishes reliable messages into its own full `block`
/// queue must still have its acks read, or it waits on itself forever.
#[tokio::test]
async fn a_connection_blocked_on_its_own_queue_still_gets_its_acks_read() {
    let broker = broker().await;
    let both = client(&broker, "both").await;
    let options = SubscribeOptions::new("loop")
        .policy(QueuePolicy::Block)
        .queue_capacity(2)
        .max_unacked(2)
        .ack(AckPolicy::Manual);
    let mut subscription = both.subscribe(options).await.expect("subscribe");
    let mut confirms = Vec::new();
    for index in 0..20 {
        confirms
            .push(both.start_confirmed(reliable("loop", &index.to_string()), Default::default()).await.expect("send"));
    }
    for index in 0..20 {
        let delivery = next(&mut subscription).await;
        assert_eq!(text(&delivery), index.to_string());
        delivery.ack().expect("ack");
    }
    for confirm in confirms {
        tokio::time::timeout(PATIENCE, confirm).await.expect("confirmed in time").expect("answer").expect("ok");
    }
    assert!(broker.stats().publisher_blocked > 0, "the queue did fill");
    // And the connection still answers.
    both.ping().await.expect("ping");
    broker.shutdown().await;
}

#[tokio::test]
async fn each_queue_group_takes_turns_on_its_own() {
    let broker = broker().await;
    let mut members = Vec::new();
    for group in ["g1", "g2"] {
        for index in 0..2 {
            let member = client(&broker, &format!("{group}-{index}")).await;
            let subscription = member.subscribe(SubscribeOptions::new("work").queue_group(group)).await.expect("sub");
            members.push((member, subscription));
        }
    }
    let publisher = client(&broker, "pub").await;
    for index in 0..10 {
        publisher.publish(message("work", &index.to_string())).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
    for (_, subscription) in &mut members {
        assert_eq!(texts(subscription, 5).await.len(), 5, "every member gets half of its group's messages");
    }
    // Sentinels from the same publisher, one at a time to each group until
    // every member has had one: then no member has anything more coming.
    let sentinel = message("work", SENTINEL);
    for group in members.chunks_mut(2) {
        let [first, second] = group else { panic!("two members per group") };
        let (received, _) =
            group_texts_until_sentinels(&mut [&mut first.1, &mut second.1], &publisher, &sentinel).await;
        assert_eq!(received, [Vec::<String>::new(), Vec::new()], "nothing more than half each");
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn flow_on_a_subscription_without_credit_mode_is_refused() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("t")).await.expect("subscribe");
    subscription.grant(1).expect("sent");
    subscriber.ping().await.expect("ping");
    let publisher = client(&broker, "pub").await;
    for index in 0..3 {
        publisher.publish(message("t", &index.to_string())).await.expect("publish");
    }
    assert_eq!(texts(&mut subscription, 3).await, ["0", "1", "2"], "still not limited by credit");
    assert_eq!(broker.stats().errors_sent, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn keep_last_zero_is_refused_on_the_wire() {
    let broker = broker().await;
    let mut raw = Raw::handshake(&broker).await;
    let mut request = Subscribe::new(7, "t");
    request.policy = Some(QueuePolicy::KeepLast(0));
    raw.send(&Frame::Subscribe(request)).await;
    match raw.recv().await {
        Some(Frame::Error(error)) => {
            assert_eq!((error.code, error.reference, error.fatal), (ErrorCode::InvalidField, 7, false));
            assert!(error.message.contains("keep-last"), "{}", error.message);
        }
        other => panic!("expected an error, got {other:?}"),
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn nothing_follows_the_brokers_close() {
    let broker = broker().await;
    let mut raw = Raw::handshake(&broker).await;
    let mut request = Subscribe::new(1, "feed");
    request.ack_mode = AckMode::Auto;
    raw.subscribe(request).await;
    let publisher = client(&broker, "pub").await;
    for index in 0..3000 {
        publisher.publish(message("feed", &index.to_string())).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
    raw.send(&Frame::Close).await;
    let frames = raw.recv_until_closed().await;
    assert_eq!(frames.last(), Some(&Frame::Close), "CLOSE is the last frame");
    broker.shutdown().await;
}

#[tokio::test]
async fn subscriptions_without_a_policy_get_the_brokers_default() {
    let broker = broker_with(|config| config.delivery.policy_default = "drop-new".into()).await;
    let subscriber = client(&broker, "sub").await;
    let mut options = SubscribeOptions::new("t").queue_capacity(5);
    options.credit = Some(0);
    let _subscription = subscriber.subscribe(options).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    for index in 0..10 {
        publisher.publish(message("t", &index.to_string())).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
    assert_eq!(broker.stats().dropped_queue_full, 5);
    broker.shutdown().await;
}

#[tokio::test]
async fn overlong_client_names_are_refused_in_the_handshake() {
    let broker = broker().await;
    let options = sift_client::ClientOptions { name: "n".repeat(300), reconnect: false, ..Default::default() };
    match sift_client::Client::connect(broker.local_addr().to_string(), options).await {
        Err(ClientError::Connect { reason, .. }) => assert!(reason.contains("client_name"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn a_blocked_publisher_that_disconnects_is_noticed() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut options = SubscribeOptions::new("t").policy(QueuePolicy::Block).queue_capacity(1);
    options.credit = Some(0);
    let _stalled = subscriber.subscribe(options).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    for index in 0..3 {
        let _ = publisher.start_confirmed(reliable("t", &index.to_string()), PublishOptions::default()).await;
    }
    let deadline = std::time::Instant::now() + PATIENCE;
    while broker.stats().publisher_blocked == 0 {
        assert!(std::time::Instant::now() < deadline, "publisher never blocked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    publisher.close().await;
    let deadline = std::time::Instant::now() + PATIENCE;
    while broker.stats().connections_current != 1 {
        assert!(std::time::Instant::now() < deadline, "the blocked publisher's connection was never released");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    broker.shutdown().await;
}

/// A broker shut down before its tasks first ran (here on the test's single
/// thread, right after `start`) must still stop: its accept loop subscribed
/// to the shutdown signal only after it was sent, and waited for ever.
#[tokio::test]
async fn a_broker_shut_down_at_once_after_starting_stops() {
    let started = broker().await;
    tokio::time::timeout(PATIENCE, started.shutdown()).await.expect("the broker stops in time");
}
