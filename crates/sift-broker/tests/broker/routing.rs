//! Topic wildcards, queue groups, confirms and unsubscribe, over the wire.

use sift_client::{ConfirmStatus, PublishOptions, SubscribeOptions, Subscription};

use crate::common::*;

#[tokio::test]
async fn wildcards_deliver_exactly_what_matches() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut one = subscriber.subscribe(SubscribeOptions::new("a.*")).await.expect("subscribe");
    let mut rest = subscriber.subscribe(SubscribeOptions::new("a.>")).await.expect("subscribe");
    let mut literal = subscriber.subscribe(SubscribeOptions::new("a.b.c")).await.expect("subscribe");
    let mut middle = subscriber.subscribe(SubscribeOptions::new("*.b.*")).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    for topic in ["a", "a.b", "a.b.c", "a.x.c", "x.b.y", "a.b.c.d"] {
        publisher.publish(message(topic, topic)).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
    assert_eq!(texts(&mut one, 1).await, ["a.b"]);
    assert_eq!(texts(&mut rest, 4).await, ["a.b", "a.b.c", "a.x.c", "a.b.c.d"]);
    assert_eq!(texts(&mut literal, 1).await, ["a.b.c"]);
    assert_eq!(texts(&mut middle, 2).await, ["a.b.c", "x.b.y"]);
    // Sentinels on a.b and a.b.c, from the same publisher after the rest:
    // each subscription matches at least one, and when the first comes next,
    // nothing published before it is still on its way.
    for topic in ["a.b", "a.b.c"] {
        publisher.publish(message(topic, SENTINEL)).await.expect("publish");
    }
    for subscription in [&mut one, &mut rest, &mut literal, &mut middle] {
        assert_next_is(subscription, SENTINEL, "no extra deliveries").await;
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn queue_group_members_share_and_plain_subscribers_get_all() {
    let broker = broker().await;
    let mut members = Vec::new();
    for index in 0..3 {
        let member = client(&broker, &format!("worker-{index}")).await;
        let subscription =
            member.subscribe(SubscribeOptions::new("jobs.>").queue_group("workers")).await.expect("subscribe");
        members.push((member, subscription));
    }
    let audit_client = client(&broker, "audit").await;
    let mut audit = audit_client.subscribe(SubscribeOptions::new("jobs.*")).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    for index in 0..30 {
        let confirm = publisher
            .publish_confirmed(message("jobs.new", &index.to_string()), PublishOptions::default())
            .await
            .expect("confirm");
        assert_eq!(confirm.matched, 2, "one per group plus the plain subscriber");
    }
    assert_eq!(texts(&mut audit, 30).await.len(), 30);
    // Sentinels from the same publisher, one at a time until every member
    // has had one: then no member has anything more coming.
    let mut subscriptions: Vec<&mut Subscription> = members.iter_mut().map(|(_, subscription)| subscription).collect();
    let (received, _) =
        group_texts_until_sentinels(&mut subscriptions, &publisher, &message("jobs.new", SENTINEL)).await;
    let mut total = 0;
    let mut all = Vec::new();
    for got in received {
        assert!(!got.is_empty(), "round-robin reaches every member");
        total += got.len();
        all.extend(got);
    }
    assert_eq!(total, 30, "each message to exactly one member");
    all.sort_by_key(|text| text.parse::<u32>().expect("number"));
    assert_eq!(all, (0..30).map(|index| index.to_string()).collect::<Vec<_>>());
    broker.shutdown().await;
}

#[tokio::test]
async fn confirms_report_matches_and_no_subscribers() {
    let broker = broker().await;
    let publisher = client(&broker, "pub").await;
    let confirm = publisher.publish_confirmed(message("nobody.home", "x"), PublishOptions::default()).await;
    let confirm = confirm.expect("confirm");
    assert_eq!((confirm.status, confirm.matched), (ConfirmStatus::NoSubscribers, 0));
    let subscriber = client(&broker, "sub").await;
    let _first = subscriber.subscribe(SubscribeOptions::new("some.>")).await.expect("subscribe");
    let _second = subscriber.subscribe(SubscribeOptions::new("some.topic")).await.expect("subscribe");
    let confirm = publisher.publish_confirmed(message("some.topic", "x"), PublishOptions::default()).await;
    let confirm = confirm.expect("confirm");
    assert_eq!((confirm.status, confirm.matched), (ConfirmStatus::Accepted, 2));
    assert_eq!(broker.stats().messages_unmatched, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn unsubscribe_stops_deliveries() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut kept = subscriber.subscribe(SubscribeOptions::new("t")).await.expect("subscribe");
    let dropped = subscriber.subscribe(SubscribeOptions::new("t")).await.expect("subscribe");
    assert_eq!(broker.subscription_count(), 2);
    dropped.unsubscribe().await.expect("unsubscribe");
    subscriber.ping().await.expect("ping");
    assert_eq!(broker.subscription_count(), 1);
    let publisher = client(&broker, "pub").await;
    let confirm = publisher.publish_confirmed(message("t", "x"), PublishOptions::default()).await.expect("confirm");
    assert_eq!(confirm.matched, 1);
    assert_eq!(texts(&mut kept, 1).await, ["x"]);
    broker.shutdown().await;
}

#[tokio::test]
async fn properties_metadata_and_binary_payloads_arrive_intact() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("data")).await.expect("subscribe");
    let publisher = client(&broker, "publisher-name").await;
    let mut sent = message("data", "");
    sent.payload = bytes::Bytes::from((0..=255u8).collect::<Vec<u8>>());
    sent.metadata = Some(bytes::Bytes::from_static(b"<metadata><ATO nickname='KTJR'/></metadata>"));
    sent.properties = vec![
        ("flag".into(), sift_core::Value::Bool(true)),
        ("count".into(), sift_core::Value::Int(-3)),
        ("price".into(), sift_core::Value::Float(2.5)),
        ("sym".into(), sift_core::Value::Str("IBM".into())),
    ];
    sent.priority = sift_core::Priority::new(7).expect("0-9");
    publisher.publish(sent.clone()).await.expect("publish");
    let got = next(&mut subscription).await.message;
    assert_eq!(got.payload, sent.payload);
    assert_eq!(got.metadata, sent.metadata);
    assert_eq!(got.properties, sent.properties);
    assert_eq!(got.priority, sent.priority);
    assert_eq!(&*got.publisher, "publisher-name", "the broker stamps the publisher");
    assert!(got.id != 0 && got.timestamp_ns != 0, "the broker stamps id and timestamp");
    broker.shutdown().await;
}

#[tokio::test]
async fn payload_only_publishes_arrive_stamped_and_in_order() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("fast.>")).await.expect("subscribe");
    let publisher = client(&broker, "fast-pub").await;
    let topic = sift_core::TopicName::new("fast.lane").expect("valid topic");
    // Mixed with ordinary publishes: both kinds share one sequence.
    for index in 0..100 {
        if index % 2 == 0 {
            publisher.publish_payload(&topic, format!("{index}").as_bytes()).await.expect("publish_payload");
        } else {
            publisher.publish(message("fast.lane", &format!("{index}"))).await.expect("publish");
        }
    }
    publisher.ping().await.expect("ping");
    let expected: Vec<String> = (0..100).map(|index| index.to_string()).collect();
    let mut sequences = Vec::new();
    for text_expected in &expected {
        let delivery = next(&mut subscription).await;
        assert_eq!(&text(&delivery), text_expected);
        assert_eq!(delivery.message.topic.as_str(), "fast.lane");
        assert_eq!(&*delivery.message.publisher, "fast-pub");
        assert!(delivery.message.timestamp_ns > 0, "the broker stamps the time");
        sequences.push(delivery.message.sequence);
    }
    assert!(sequences.windows(2).all(|pair| pair[0] < pair[1]), "sequence numbers rise: {sequences:?}");
    broker.shutdown().await;
}
