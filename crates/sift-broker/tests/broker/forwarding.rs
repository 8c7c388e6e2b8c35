//! Best-effort forwarding: messages published at one broker reach the
//! subscribers of others, along the origin's tree, exactly once, only where
//! there is interest (or everywhere in flood mode).

use std::net::SocketAddr;

use sift_broker::config::RoutingMode;
use sift_broker::{LinkInfo, RunningBroker};
use sift_client::{Client, SubscribeOptions, Subscription};
use sift_core::Value;
use sift_proto::FilterKind;

use crate::common::{assert_next_is, client, message, texts, SENTINEL};
use crate::network_support::{converged, eventually, link_addr, linked_broker, node, shutdown_all, CLUSTER};

/// A broker named `name` dialling `dials` and routing by `routing`.
async fn node_routed(name: &str, dials: &[SocketAddr], routing: RoutingMode) -> RunningBroker {
    linked_broker(name, CLUSTER, None, dials, routing).await
}

/// Waits until `broker` holds interest of each of `origins`.
async fn sees_interest(broker: &RunningBroker, origins: &[&str]) {
    eventually("the interest has spread", || {
        let held = broker.remote_interest();
        origins.iter().all(|origin| held.iter().any(|(broker, _, _)| broker == origin))
    })
    .await;
}

/// The link of `broker` to `neighbour`.
fn link_to(broker: &RunningBroker, neighbour: &str) -> LinkInfo {
    let links = broker.links();
    links.into_iter().find(|link| link.neighbour == neighbour).expect("the link is up")
}

async fn publish_numbered(publisher: &Client, topic: &str, count: usize) {
    for index in 0..count {
        publisher.publish(message(topic, &format!("m{index}"))).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
}

fn numbered(count: usize) -> Vec<String> {
    (0..count).map(|index| format!("m{index}")).collect()
}

async fn subscribe(broker: &RunningBroker, name: &str, topic: &str) -> (Client, Subscription) {
    let subscriber = client(broker, name).await;
    let subscription = subscriber.subscribe(SubscribeOptions::new(topic)).await.expect("subscribes");
    (subscriber, subscription)
}

#[tokio::test]
async fn a_chain_of_five_delivers_once_and_spares_a_side_branch() {
    let first = node("b1", &[]).await;
    let second = node("b2", &[link_addr(&first)]).await;
    let third = node("b3", &[link_addr(&second)]).await;
    let fourth = node("b4", &[link_addr(&third)]).await;
    let fifth = node("b5", &[link_addr(&fourth)]).await;
    let side = node("side", &[link_addr(&third)]).await;
    let all = [&first, &second, &third, &fourth, &fifth, &side];
    converged(&all, &["b1", "b2", "b3", "b4", "b5", "side"]).await;
    let (subscriber, mut subscription) = subscribe(&fifth, "far", "orders.>").await;
    sees_interest(&first, &["b5"]).await;

    let publisher = client(&first, "near").await;
    publish_numbered(&publisher, "orders.new", 10).await;
    assert_eq!(texts(&mut subscription, 10).await, numbered(10));
    // A chain has one path from b1 to b5, and the sentinel takes it after the
    // numbered messages from the same publisher: when it comes next, no copy
    // of them is still on the way.
    publisher.publish(message("orders.new", SENTINEL)).await.expect("publish");
    assert_next_is(&mut subscription, SENTINEL, "each message arrives exactly once").await;
    // The ten numbered messages and the sentinel.
    let crossed = 10 + 1;
    assert_eq!(link_to(&third, "side").traffic.messages_forwarded, 0);
    assert_eq!(link_to(&side, "b3").traffic.messages_received, 0);
    assert_eq!(side.stats().forwards_received, 0);
    assert_eq!(link_to(&first, "b2").traffic.messages_forwarded, crossed);
    assert_eq!(link_to(&fifth, "b4").traffic.messages_received, crossed);
    assert!(link_to(&fifth, "b4").traffic.bytes_received > 0);
    assert_eq!(first.stats().messages_forwarded, crossed);
    assert_eq!(fifth.stats().forwards_received, crossed);
    for broker in all {
        assert_eq!(broker.stats().forward_duplicates_dropped, 0);
    }
    publisher.close().await;
    subscriber.close().await;
    shutdown_all(vec![side, fifth, fourth, third, second, first]).await;
}

#[tokio::test]
async fn a_ring_of_four_delivers_no_duplicates() {
    let first = node("a", &[]).await;
    let second = node("b", &[link_addr(&first)]).await;
    let third = node("c", &[link_addr(&second)]).await;
    let fourth = node("d", &[link_addr(&third), link_addr(&first)]).await;
    let all = [&first, &second, &third, &fourth];
    converged(&all, &["a", "b", "c", "d"]).await;
    let mut subscribers = Vec::new();
    for broker in [&second, &third, &fourth] {
        subscribers.push(subscribe(broker, "ring", "ring.>").await);
    }
    sees_interest(&first, &["b", "c", "d"]).await;
    sees_interest(&second, &["c", "d"]).await;
    sees_interest(&fourth, &["b", "c"]).await;

    let publisher = client(&first, "origin").await;
    publish_numbered(&publisher, "ring.x", 5).await;
    for (_, subscription) in &mut subscribers {
        assert_eq!(texts(subscription, 5).await, numbered(5));
    }
    // The sentinel follows the numbered messages from the same publisher
    // along a's tree, the path each subscriber's broker is fed by: when it
    // comes next, no duplicate is still on that path. A copy the other way
    // round the ring would have to cross into c over its second link, which
    // the count below rules out.
    publisher.publish(message("ring.x", SENTINEL)).await.expect("publish");
    for (_, subscription) in &mut subscribers {
        assert_next_is(subscription, SENTINEL, "no duplicate is delivered").await;
    }
    // The opposite broker hangs below one parent only: it received the five
    // numbered messages and the sentinel once each.
    let into_third = link_to(&third, "b").traffic.messages_received + link_to(&third, "d").traffic.messages_received;
    assert_eq!(into_third, 5 + 1);
    for broker in all {
        assert_eq!(broker.stats().forward_duplicates_dropped, 0);
    }
    publisher.close().await;
    for (subscriber, _) in subscribers {
        subscriber.close().await;
    }
    shutdown_all(vec![fourth, third, second, first]).await;
}

#[tokio::test]
async fn a_mesh_keeps_delivering_after_a_link_is_cut() {
    // A square: a-b-d and a-c-d; a's tree reaches d through b (name order).
    let first = node("a", &[]).await;
    let upper = node("b", &[link_addr(&first)]).await;
    let lower = node("c", &[link_addr(&first)]).await;
    let last = node("d", &[link_addr(&upper), link_addr(&lower)]).await;
    converged(&[&first, &upper, &lower, &last], &["a", "b", "c", "d"]).await;
    let (subscriber, mut subscription) = subscribe(&last, "far", "mesh").await;
    sees_interest(&first, &["d"]).await;
    let publisher = client(&first, "origin").await;
    publish_numbered(&publisher, "mesh", 3).await;
    assert_eq!(texts(&mut subscription, 3).await, numbered(3));
    assert_eq!(link_to(&first, "b").traffic.messages_forwarded, 3);

    upper.shutdown().await;
    converged(&[&first, &lower, &last], &["a", "c", "d"]).await;
    sees_interest(&first, &["d"]).await;
    publish_numbered(&publisher, "mesh", 3).await;
    assert_eq!(texts(&mut subscription, 3).await, numbered(3));
    assert_eq!(link_to(&first, "c").traffic.messages_forwarded, 3);
    // With b gone, a reaches d only through c; the sentinel takes that path
    // after the numbered messages from the same publisher, so when it comes
    // next, no copy of them is still on the way.
    publisher.publish(message("mesh", SENTINEL)).await.expect("publish");
    assert_next_is(&mut subscription, SENTINEL, "each message arrives once").await;
    publisher.close().await;
    subscriber.close().await;
    shutdown_all(vec![last, lower, first]).await;
}

#[tokio::test]
async fn only_messages_passing_a_remote_content_filter_cross() {
    let first = node("a", &[]).await;
    let second = node("b", &[link_addr(&first)]).await;
    converged(&[&first, &second], &["a", "b"]).await;
    let subscriber = client(&second, "picky").await;
    let options = SubscribeOptions::new("quotes").filter(FilterKind::Tags, "price > 100");
    let mut subscription = subscriber.subscribe(options).await.expect("subscribes");
    sees_interest(&first, &["b"]).await;

    let publisher = client(&first, "feed").await;
    for (payload, price) in [("cheap", 50), ("dear", 150), ("cheaper", 10)] {
        let mut quote = message("quotes", payload);
        quote.properties = vec![("price".to_string(), Value::Int(price))];
        publisher.publish(quote).await.expect("publish");
    }
    publisher.ping().await.expect("ping");
    assert_eq!(texts(&mut subscription, 1).await, ["dear"]);
    // A sentinel that passes the filter, from the same publisher over the
    // same link after the cheap quotes: when it comes next, none of them
    // crossed.
    let mut sentinel = message("quotes", SENTINEL);
    sentinel.properties = vec![("price".to_string(), Value::Int(200))];
    publisher.publish(sentinel).await.expect("publish");
    assert_next_is(&mut subscription, SENTINEL, "only the dear quote passes").await;
    // The dear quote and the sentinel.
    assert_eq!(link_to(&first, "b").traffic.messages_forwarded, 1 + 1);
    assert_eq!(second.stats().forwards_received, 1 + 1);
    publisher.close().await;
    subscriber.close().await;
    shutdown_all(vec![second, first]).await;
}

/// Publishes 5 messages at the head of a chain of three without any
/// subscriber and returns what each link carried: (head to middle, middle
/// to tail).
async fn chain_traffic_without_interest(routing: RoutingMode) -> (u64, u64) {
    let head = node_routed("a", &[], routing).await;
    let middle = node_routed("b", &[link_addr(&head)], routing).await;
    let tail = node_routed("c", &[link_addr(&middle)], routing).await;
    converged(&[&head, &middle, &tail], &["a", "b", "c"]).await;
    // A subscriber at the tail for the sentinel only, on another topic.
    let (watcher, mut sentinels) = subscribe(&tail, "watcher", "sentinel").await;
    sees_interest(&head, &["c"]).await;
    let publisher = client(&head, "feed").await;
    publish_numbered(&publisher, "nobody.listens", 5).await;
    // The sentinel crosses both links after the numbered messages from the
    // same publisher, so when it reaches the tail, whatever the links were
    // to carry of them has been counted.
    publisher.publish(message("sentinel", SENTINEL)).await.expect("publish");
    assert_next_is(&mut sentinels, SENTINEL, "the sentinel reaches the tail").await;
    // Less the sentinel, which crossed each link once.
    let traffic =
        (link_to(&head, "b").traffic.messages_forwarded - 1, link_to(&middle, "c").traffic.messages_forwarded - 1);
    watcher.close().await;
    publisher.close().await;
    shutdown_all(vec![tail, middle, head]).await;
    traffic
}

#[tokio::test]
async fn flood_mode_sends_where_interest_mode_does_not() {
    assert_eq!(chain_traffic_without_interest(RoutingMode::Flood).await, (5, 5));
    assert_eq!(chain_traffic_without_interest(RoutingMode::Interest).await, (0, 0));
}
