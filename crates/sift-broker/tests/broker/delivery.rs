//! Acknowledgement modes, credit mode and clean shutdown.

use sift_client::{AckPolicy, PublishOptions, SubscribeOptions};

use crate::common::*;

#[tokio::test]
async fn on_write_acks_need_no_client_ack() {
    let broker = broker_with(|config| config.delivery.ack_timeout_ms = 100).await;
    let subscriber = client(&broker, "sub").await;
    let mut subscription =
        subscriber.subscribe(SubscribeOptions::new("t").ack(AckPolicy::OnWrite)).await.expect("subscribe");
    // A witness on the same connection that is never acknowledged: its
    // redelivery shows that the ack timeout has passed.
    let mut witness =
        subscriber.subscribe(SubscribeOptions::new("witness").ack(AckPolicy::Manual)).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    publisher.publish_confirmed(reliable("t", "once"), PublishOptions::default()).await.expect("confirm");
    let delivery = next(&mut subscription).await;
    assert_eq!(delivery.delivery_tag, 0, "no ack expected");
    publisher.publish_confirmed(reliable("witness", SENTINEL), PublishOptions::default()).await.expect("confirm");
    assert!(!assert_next_is(&mut witness, SENTINEL, "the witness arrives").await.redelivered);
    assert!(assert_next_is(&mut witness, SENTINEL, "the witness comes back").await.redelivered);
    // The connection's redelivery timer requeues the oldest first and the
    // client hands out frames in the order they arrive: had "once" been
    // awaiting an ack, having been sent before the witness, it would have
    // come back before the witness did.
    assert!(subscription.try_next().is_none(), "never redelivered");
    broker.shutdown().await;
}

#[tokio::test]
async fn best_effort_deliveries_carry_no_tag() {
    let broker = broker().await;
    let subscriber = client(&broker, "sub").await;
    let mut subscription =
        subscriber.subscribe(SubscribeOptions::new("t").ack(AckPolicy::Manual)).await.expect("subscribe");
    let publisher = client(&broker, "pub").await;
    publisher.publish(message("t", "x")).await.expect("publish");
    assert_eq!(next(&mut subscription).await.delivery_tag, 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_clients_cleanly() {
    let broker = broker().await;
    let user = client(&broker, "user").await;
    let _subscription = user.subscribe(SubscribeOptions::new("t")).await.expect("subscribe");
    let stats = broker.shutdown().await;
    assert_eq!(stats.connections_accepted, 1);
    tokio::time::timeout(PATIENCE, async {
        while user.is_connected() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the client sees the close");
}
