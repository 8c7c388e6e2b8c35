//! In-process connections: the same session as a socket's, over a pipe or
//! as a local session (frames as values).

use sift_broker::door::{Door, Origin};
use sift_client::{Client, ClientError, ClientOptions, PublishOptions, SubscribeOptions};

use crate::common::*;

async fn in_process_client(broker: &sift_broker::RunningBroker, name: &str) -> Result<Client, ClientError> {
    let options = ClientOptions { name: name.into(), reconnect: false, ..ClientOptions::default() };
    Client::connect_in_process(broker.connector().opener(), options).await
}

#[tokio::test]
async fn messages_cross_between_socket_and_in_process_clients_both_ways() {
    let broker = broker().await;
    let inside = in_process_client(&broker, "inside").await.expect("in-process client connects");
    let outside = client(&broker, "outside").await;
    let mut inside_sub = inside.subscribe(SubscribeOptions::new("to.inside")).await.expect("subscribe");
    let mut outside_sub = outside.subscribe(SubscribeOptions::new("to.outside")).await.expect("subscribe");

    let confirm = outside.publish_confirmed(reliable("to.inside", "hello"), PublishOptions::default()).await;
    assert_eq!(confirm.expect("confirmed").matched, 1);
    let delivery = next(&mut inside_sub).await;
    assert_eq!(text(&delivery), "hello");
    assert_eq!(&*delivery.message.publisher, "outside");

    let confirm = inside.publish_confirmed(reliable("to.outside", "back"), PublishOptions::default()).await;
    assert_eq!(confirm.expect("confirmed").matched, 1);
    let delivery = next(&mut outside_sub).await;
    assert_eq!(text(&delivery), "back");
    assert_eq!(&*delivery.message.publisher, "inside");

    let stats = broker.stats();
    assert_eq!(stats.connections_in_process, 1);
    assert_eq!(stats.connections_current, 2);
    broker.shutdown().await;
}

#[tokio::test]
async fn in_process_connections_count_against_max_connections() {
    let broker = broker_with(|config| config.limits.max_connections = 1).await;
    let _first = in_process_client(&broker, "first").await.expect("first connects");
    match in_process_client(&broker, "second").await {
        Err(ClientError::Connect { reason, .. }) => assert!(reason.contains("max_connections"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(broker.stats().connections_refused, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_stopped_broker_refuses_in_process_connections() {
    let broker = broker().await;
    let connector = broker.connector();
    broker.shutdown().await;
    assert!(connector.connect().is_err(), "no pipe into a stopped broker");
}

/// A local session (a front-end's): frames cross as values.
async fn local_client(broker: &sift_broker::RunningBroker, name: &str) -> Result<Client, ClientError> {
    let options = ClientOptions { name: name.into(), reconnect: false, ..ClientOptions::default() };
    let origin = Origin { door: Door::Stomp, peer: Some(([127, 0, 0, 1], 4242).into()) };
    Client::connect_local(broker.connector().local_opener(origin), options).await
}

#[tokio::test]
async fn local_sessions_publish_subscribe_acknowledge_and_are_redelivered_as_a_sockets() {
    let broker = broker_with(|config| config.delivery.ack_timeout_ms = 100).await;
    let local = local_client(&broker, "local").await.expect("local session opens");
    let outside = client(&broker, "outside").await;
    let mut local_sub = local
        .subscribe(SubscribeOptions::new("to.local").ack(sift_client::AckPolicy::Manual))
        .await
        .expect("subscribe");
    let mut outside_sub = outside.subscribe(SubscribeOptions::new("to.outside")).await.expect("subscribe");

    let confirm = outside.publish_confirmed(reliable("to.local", "hello"), PublishOptions::default()).await;
    assert_eq!(confirm.expect("confirmed").matched, 1);
    let first = next(&mut local_sub).await;
    assert_eq!((text(&first).as_str(), &*first.message.publisher, first.redelivered), ("hello", "outside", false));
    // Not acknowledged: the same outbox redelivers it, as it would to a socket.
    let again = next(&mut local_sub).await;
    assert_eq!((text(&again).as_str(), again.redelivered), ("hello", true));
    again.ack().expect("acknowledged");

    let confirm = local.publish_confirmed(reliable("to.outside", "back"), PublishOptions::default()).await;
    assert_eq!(confirm.expect("confirmed").matched, 1);
    local.publish(reliable("to.outside", "fire-and-forget")).await.expect("queued");
    assert_eq!(text(&next(&mut outside_sub).await), "back");
    assert_eq!(text(&next(&mut outside_sub).await), "fire-and-forget");

    let report = outside.admin(sift_client::AdminQuery::Subscriptions).await.expect("report");
    let connections = report["connections"].as_array().expect("connections");
    let described = connections.iter().find(|connection| connection["client"] == "local").expect("listed");
    assert_eq!((&described["door"], &described["peer"]), (&"stomp".into(), &"127.0.0.1:4242".into()));
    broker.shutdown().await;
}

#[tokio::test]
async fn local_sessions_count_against_max_connections_and_a_stopped_broker_refuses_them() {
    let broker = broker_with(|config| config.limits.max_connections = 1).await;
    let _first = local_client(&broker, "first").await.expect("first opens");
    match local_client(&broker, "second").await {
        Err(ClientError::Connect { reason, .. }) => assert!(reason.contains("max_connections"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(broker.stats().connections_refused, 1);
    let connector = broker.connector();
    broker.shutdown().await;
    assert!(connector.local_opener(Origin::EMBEDDED)().is_err(), "no local session into a stopped broker");
}
