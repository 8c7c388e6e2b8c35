//! Reliable delivery: acks, redelivery, queue-group failover, publisher
//! order, await=delivered reports, and client reconnection.

use std::time::Duration;

use sift_client::{AckPolicy, Client, ClientOptions, ConfirmStatus, PublishOptions, SubscribeOptions};

use crate::common::*;

#[tokio::test]
async fn unacked_deliveries_are_redelivered_after_the_ack_timeout() {
    let broker = broker_with(|config| config.delivery.ack_timeout_ms = 200).await;
    let subscriber = client(&broker, "sub").await;
    let mut subscription =
        subscriber.subscribe(SubscribeOptions::new("jobs").ack(AckPolicy::Manual)).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    publisher.publish_confirmed(reliable("jobs", "job-1"), PublishOptions::default()).await.expect("confirm");
    let first = next(&mut subscription).await;
    assert!(!first.redelivered);
    // Not acknowledged: it comes back, marked.
    let again = next(&mut subscription).await;
    assert_eq!(text(&again), "job-1");
    assert!(again.redelivered);
    again.ack().expect("ack");
    // The ping's answer shows the ack was handled. A witness sent after it
    // on the same subscription and never acknowledged comes back after the
    // ack timeout; redelivery takes the oldest first, so had "job-1" still
    // been awaiting an ack, it would have come back before the witness.
    subscriber.ping().await.expect("ping");
    publisher.publish_confirmed(reliable("jobs", SENTINEL), PublishOptions::default()).await.expect("confirm");
    assert!(!assert_next_is(&mut subscription, SENTINEL, "the witness arrives").await.redelivered);
    let witness_again = assert_next_is(&mut subscription, SENTINEL, "acknowledged: no more redelivery").await;
    assert!(witness_again.redelivered);
    assert!(broker.stats().redelivered >= 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_dead_subscribers_unacked_messages_go_to_another_group_member() {
    let broker = broker().await;
    let doomed = client(&broker, "doomed").await;
    let mut doomed_subscription = doomed
        .subscribe(SubscribeOptions::new("jobs").queue_group("g").ack(AckPolicy::Manual))
        .await
        .expect("subscribe");
    let publisher = client(&broker, "pub").await;
    for index in 0..5 {
        publisher.publish_confirmed(reliable("jobs", &index.to_string()), PublishOptions::default()).await.expect("ok");
    }
    // The only member holds all five, unacknowledged.
    assert_eq!(texts(&mut doomed_subscription, 5).await.len(), 5);
    let survivor = client(&broker, "survivor").await;
    let mut survivor_subscription =
        survivor.subscribe(SubscribeOptions::new("jobs").queue_group("g")).await.expect("subscribe");
    doomed.close().await;
    let mut taken_over = Vec::new();
    for _ in 0..5 {
        let delivery = next(&mut survivor_subscription).await;
        assert!(delivery.redelivered, "handed-over messages are marked redelivered");
        taken_over.push(text(&delivery));
    }
    assert_eq!(taken_over, ["0", "1", "2", "3", "4"], "in publisher order");
    broker.shutdown().await;
}

#[tokio::test]
async fn nack_with_requeue_redelivers_at_once() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut subscription =
        subscriber.subscribe(SubscribeOptions::new("jobs").ack(AckPolicy::Manual)).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    publisher.publish_confirmed(reliable("jobs", "j"), PublishOptions::default()).await.expect("confirm");
    next(&mut subscription).await.nack(true).expect("nack");
    let again = next(&mut subscription).await;
    assert!(again.redelivered);
    again.nack(false).expect("nack");
    // The ping's answer shows the nack was handled; a requeue would have
    // put "j" back at once, ahead of the sentinel published afterwards.
    subscriber.ping().await.expect("ping");
    publisher.publish_confirmed(reliable("jobs", SENTINEL), PublishOptions::default()).await.expect("confirm");
    assert_next_is(&mut subscription, SENTINEL, "nack without requeue drops").await;
    assert_eq!(broker.stats().dropped_rejected, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn reliable_messages_keep_publisher_order_per_subscriber() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("seq")).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    let mut confirms = Vec::new();
    for index in 0..2000 {
        confirms.push(
            publisher.start_confirmed(reliable("seq", &index.to_string()), Default::default()).await.expect("send"),
        );
    }
    for confirm in confirms {
        assert_eq!(confirm.await.expect("answer").expect("confirm").status, ConfirmStatus::Accepted);
    }
    let mut previous_sequence = 0;
    for index in 0..2000 {
        let delivery = next(&mut subscription).await;
        assert_eq!(text(&delivery), index.to_string());
        assert!(delivery.message.sequence > previous_sequence);
        previous_sequence = delivery.message.sequence;
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn await_delivered_confirms_after_every_ack_or_names_who_did_not() {
    let broker = broker().await;
    let acker = client(&broker, "acker").await;
    let mut acking = acker.subscribe(SubscribeOptions::new("sync")).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    let options = PublishOptions { await_delivered: true, await_timeout: Some(Duration::from_secs(5)) };
    let (confirm, _) = tokio::join!(publisher.publish_confirmed(reliable("sync", "a"), options), next(&mut acking));
    let confirm = confirm.expect("confirm");
    assert_eq!((confirm.status, confirm.matched, confirm.acked), (ConfirmStatus::Delivered, 1, 1));
    // A second subscriber that never acknowledges.
    let silent = client(&broker, "silent").await;
    let _silent_subscription =
        silent.subscribe(SubscribeOptions::new("sync").ack(AckPolicy::Manual)).await.expect("subscribe");
    let options = PublishOptions { await_delivered: true, await_timeout: Some(Duration::from_millis(300)) };
    let (confirm, _) = tokio::join!(publisher.publish_confirmed(message("sync", "b"), options), next(&mut acking));
    let confirm = confirm.expect("confirm");
    assert_eq!((confirm.status, confirm.matched, confirm.acked), (ConfirmStatus::Incomplete, 2, 1));
    assert_eq!(confirm.pending.len(), 1);
    assert!(confirm.pending[0].starts_with("silent#"), "{:?}", confirm.pending);
    let none = publisher.publish_confirmed(message("nobody", "c"), options).await.expect("confirm");
    assert_eq!(none.status, ConfirmStatus::NoSubscribers);
    broker.shutdown().await;
}

#[tokio::test]
async fn expired_messages_are_not_delivered() {
    // The broker reads a manual clock: the test moves time past the expiry
    // instead of waiting for it.
    let (clock, time) = sift_core::Clock::manual(sift_core::system_now_ns());
    let broker = sift_broker::RunningBroker::start_with_clock(sift_broker::Config::scratch(), clock)
        .await
        .expect("broker starts");
    let subscriber = client(&broker, "sub").await;
    let mut options = SubscribeOptions::new("t");
    options.credit = Some(0);
    let mut subscription = subscriber.subscribe(options).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    let mut short_lived = message("t", "expired");
    short_lived.expiry_ns = time.now_ns() + 50_000_000;
    let mut long_lived = message("t", "kept");
    long_lived.expiry_ns = time.now_ns() + 3_600_000_000_000;
    publisher.publish(short_lived).await.expect("publish");
    publisher.publish(long_lived).await.expect("publish");
    publisher.ping().await.expect("ping");
    time.advance(Duration::from_secs(1));
    subscription.grant(10).expect("grant");
    assert_eq!(texts(&mut subscription, 1).await, ["kept"]);
    assert_eq!(broker.stats().dropped_expired, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn clients_reconnect_resubscribe_and_resend_unconfirmed_reliable_publishes() {
    let first = broker().await;
    let address = first.local_addr();
    let options =
        ClientOptions { reconnect: true, reconnect_delay_max: Duration::from_millis(100), ..Default::default() };
    let subscriber = Client::connect(address.to_string(), options.clone()).await.expect("connect");
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("t")).await.expect("subscribe");
    let publisher = Client::connect(address.to_string(), options).await.expect("connect");
    publisher.publish_confirmed(reliable("t", "before"), PublishOptions::default()).await.expect("confirm");
    assert_eq!(texts(&mut subscription, 1).await, ["before"]);
    first.shutdown().await;
    // The same address again: clients find it and restore their state.
    let second = broker_with(|config| config.listen = address).await;
    let confirm =
        tokio::time::timeout(PATIENCE, publisher.publish_confirmed(reliable("t", "after"), Default::default()))
            .await
            .expect("confirmed after reconnecting")
            .expect("confirm");
    // The subscription may be restored just after the publish; publish until it is seen.
    let mut seen = confirm.matched == 1;
    for attempt in 0..50 {
        if seen {
            break;
        }
        // A bounded retry loop, not a wait before an assertion: each attempt
        // publishes again and checks whether the restored subscription matched.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let retry = publisher.publish_confirmed(reliable("t", "after"), Default::default()).await.expect("confirm");
        seen = retry.matched == 1;
        assert!(attempt < 49, "subscription never restored");
    }
    assert_eq!(text(&next(&mut subscription).await), "after");
    second.shutdown().await;
}

#[tokio::test]
async fn a_client_notices_a_broker_gone_silent_and_comes_back_through_a_new_connection() {
    let broker = broker().await;
    let proxy = crate::cut_proxy::CutProxy::start(broker.local_addr()).await;
    // The clock exchanges would show the broker alive: only PINGs here.
    let options = ClientOptions {
        reconnect_delay_max: Duration::from_millis(100),
        connect_timeout: Duration::from_millis(500),
        clock_sync_interval: None,
        ping_interval: Some(Duration::from_millis(50)),
        ..ClientOptions::default()
    };
    let subscriber = Client::connect(proxy.address().to_string(), options).await.expect("connect");
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("t")).await.expect("subscribe");
    let mut connection = subscriber.connection_changes();
    connection.mark_unchanged();
    // A silent broker closes nothing: only the unanswered PINGs tell.
    proxy.black_hole();
    tokio::time::timeout(PATIENCE, connection.wait_for(|connected| !connected)).await.expect("loss noticed").ok();
    proxy.restore();
    tokio::time::timeout(PATIENCE, connection.wait_for(|connected| *connected)).await.expect("reconnected").ok();
    // The subscription came back with the connection: a message published
    // until one reaches it (it may be restored just after a publish).
    let publisher = client(&broker, "pub").await;
    let received = async {
        loop {
            let confirm =
                publisher.publish_confirmed(reliable("t", "after"), Default::default()).await.expect("confirm");
            if confirm.matched == 1 {
                return next(&mut subscription).await;
            }
            publisher.ping().await.expect("pong");
        }
    };
    let delivery = tokio::time::timeout(PATIENCE, received).await.expect("the subscription came back");
    assert_eq!(text(&delivery), "after");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_from_an_ended_session_never_acknowledges_a_delivery_of_the_next() {
    let broker = broker().await;
    let proxy = crate::cut_proxy::CutProxy::start(broker.local_addr()).await;
    let options = ClientOptions {
        reconnect_delay_max: Duration::from_millis(100),
        connect_timeout: Duration::from_millis(500),
        ..ClientOptions::default()
    };
    let subscriber = Client::connect(proxy.address().to_string(), options).await.expect("connect");
    let durable =
        || SubscribeOptions::new("t").ack(AckPolicy::Manual).durable("audit", "", sift_client::StartPosition::First);
    let mut subscription = subscriber.subscribe(durable()).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    for payload in ["m1", "m2"] {
        publisher
            .publish_confirmed(crate::persist::persistent("t", payload), Default::default())
            .await
            .expect("stored");
    }
    let (first, second) = (next(&mut subscription).await, next(&mut subscription).await);
    assert_eq!((text(&first), text(&second)), ("m1".to_string(), "m2".to_string()));

    // The connection ends; the broker gives both again on the next one,
    // under the same tags (tags are numbered per session).
    let mut connection = subscriber.connection_changes();
    connection.mark_unchanged();
    proxy.restore();
    tokio::time::timeout(PATIENCE, connection.wait_for(|connected| !connected)).await.expect("loss noticed").ok();
    tokio::time::timeout(PATIENCE, connection.wait_for(|connected| *connected)).await.expect("reconnected").ok();
    let (again_first, again_second) = (next(&mut subscription).await, next(&mut subscription).await);
    assert_eq!((text(&again_first), text(&again_second)), ("m1".to_string(), "m2".to_string()));

    // Acknowledging the first session's m2 now must not acknowledge what
    // its tag names in this session; m1 is acknowledged in this one.
    second.ack().expect("an ended session's acknowledgement is dropped, not refused");
    first.ack().expect("dropped too");
    again_first.ack().expect("acknowledged");
    subscriber.ping().await.expect("pong");
    drop(subscription);
    subscriber.close().await;

    // m2 was never acknowledged: the durable gives it again, before the
    // sentinel published after it.
    publisher.publish_confirmed(crate::persist::persistent("t", "sentinel"), Default::default()).await.expect("stored");
    let resumed = client(&broker, "resumed").await;
    let mut subscription = resumed.subscribe(durable()).await.expect("resubscribe");
    let mut seen = Vec::new();
    while seen.last().map(String::as_str) != Some("sentinel") {
        let delivery = next(&mut subscription).await;
        seen.push(text(&delivery));
        delivery.ack().expect("acknowledged");
    }
    assert!(seen.contains(&"m2".to_string()), "m2 comes again: {seen:?}");
    broker.shutdown().await;
}
