//! In-process connections: the same session as a socket's, over a pipe.

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
