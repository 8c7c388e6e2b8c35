//! `ADMIN`: two linked brokers describe their links, routes and counters
//! to a client, as JSON.

use serde_json::Value;
use sift_broker::config::RoutingMode;
use sift_broker::RunningBroker;
use sift_client::{AdminQuery, Client, SubscribeOptions};
use sift_proto::{ErrorCode, Frame};

use crate::common::{client, message, texts, Raw, PATIENCE};
use crate::network_support::{link_addr, linked_broker, POLL};

/// A broker named `name` in cluster `admin`, dialling `dials`.
async fn node(name: &str, dials: &[std::net::SocketAddr]) -> RunningBroker {
    linked_broker(name, "admin", None, dials, RoutingMode::Interest).await
}

/// Asks `client` for `query` until `check` holds on the reply, failing the
/// test after [`PATIENCE`]; returns the reply that passed.
async fn admin_until(client: &Client, query: AdminQuery, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let reply = client.admin(query).await.expect("admin reply");
        if check(&reply) {
            return reply;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}: last reply {reply}");
        tokio::time::sleep(POLL).await;
    }
}

/// The entry of `list` whose `key` is `value`.
fn find<'a>(list: &'a Value, key: &str, value: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|entry| entry[key] == value)
}

/// Two linked brokers, a subscriber on `b` and a publisher on `a` that has
/// sent three messages to it through the link.
async fn linked_pair_with_traffic() -> (RunningBroker, RunningBroker, Client) {
    let first = node("a", &[]).await;
    let second = node("b", &[link_addr(&first)]).await;
    let subscriber = client(&second, "subscriber").await;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("orders.>")).await.expect("subscribe");
    let publisher = client(&first, "publisher").await;
    admin_until(&publisher, AdminQuery::Routes, "a holds b's interest", |reply| {
        find(&reply["remote_interest"], "broker", "b").is_some()
    })
    .await;
    for index in 0..3 {
        publisher.publish(message("orders.new", &format!("m{index}"))).await.expect("publish");
    }
    assert_eq!(texts(&mut subscription, 3).await, ["m0", "m1", "m2"]);
    (first, second, publisher)
}

#[tokio::test]
async fn links_show_the_neighbour_and_its_forwarded_traffic() {
    let (first, second, publisher) = linked_pair_with_traffic().await;
    let reply = publisher.admin(AdminQuery::Links).await.expect("links");
    assert_eq!((reply["broker"].as_str(), reply["cluster"].as_str()), (Some("a"), Some("admin")));
    let link = find(&reply["links"], "neighbour", "b").expect("a link to b");
    assert_eq!(link["messages_forwarded"], 3, "{reply}");
    assert!(link["bytes_forwarded"].as_u64() > Some(0), "{reply}");
    assert_eq!(link["cost"], 1);
    assert!(link["address"].is_string() && link["connected_for_ms"].is_u64(), "{reply}");
    let other_side = client(&second, "operator").await;
    let reply = other_side.admin(AdminQuery::Links).await.expect("links of b");
    let link = find(&reply["links"], "neighbour", "a").expect("a link to a");
    assert_eq!(link["messages_received"], 3, "{reply}");
    first.shutdown().await;
    second.shutdown().await;
}

#[tokio::test]
async fn routes_show_the_other_broker_one_hop_away_and_its_interest() {
    let (first, second, publisher) = linked_pair_with_traffic().await;
    let reply = publisher.admin(AdminQuery::Routes).await.expect("routes");
    let route = find(&reply["routes"], "broker", "b").expect("a route to b");
    assert_eq!((route["hops"].as_u64(), route["next_hop"].as_str()), (Some(1), Some("b")), "{reply}");
    let own = find(&reply["routes"], "broker", "a").expect("itself");
    assert_eq!((own["hops"].as_u64(), own["next_hop"].is_null()), (Some(0), true), "{reply}");
    let interest = find(&reply["remote_interest"], "broker", "b").expect("b's interest");
    assert_eq!((interest["topic"].as_str(), interest["content"].is_null()), (Some("orders.>"), true));
    let other_side = client(&second, "operator").await;
    let reply = other_side.admin(AdminQuery::Routes).await.expect("routes of b");
    assert!(find(&reply["advertised"], "topic", "orders.>").is_some(), "b advertises its subscription: {reply}");
    first.shutdown().await;
    second.shutdown().await;
}

#[tokio::test]
async fn stats_name_every_counter() {
    let (first, second, publisher) = linked_pair_with_traffic().await;
    let reply = publisher.admin(AdminQuery::Stats).await.expect("stats");
    let counters = &reply["counters"];
    assert_eq!(counters["messages_published"], 3, "{reply}");
    assert_eq!(counters["messages_forwarded"], 3, "{reply}");
    // Every broker counter, plus the storage totals summed over the streams.
    let storage_totals = ["stored_bytes", "stored_messages", "fsyncs", "fsync_us_max", "streams", "durables"];
    for name in storage_totals {
        assert!(counters.get(name).is_some(), "{name} in {reply}");
    }
    for (name, _) in first.stats().entries() {
        assert!(counters.get(name).is_some(), "{name} in {reply}");
    }
    assert_eq!(reply["streams"][0]["name"], "default", "{reply}");
    first.shutdown().await;
    second.shutdown().await;
}

#[tokio::test]
async fn an_unknown_query_is_refused_without_closing_the_connection() {
    let broker = node("solo", &[]).await;
    let mut raw = Raw::handshake(&broker).await;
    // An ADMIN with request id 5 and query code 9: no such query.
    raw.send_bytes(&[0, 0, 0, 10, 0x60, 0, 0, 0, 0, 0, 0, 0, 5, 9]).await;
    raw.send(&Frame::Admin { request_id: 6, query: AdminQuery::Stats }).await;
    let Some(Frame::Error(error)) = raw.recv().await else { panic!("expected an ERROR") };
    assert_eq!((error.code, error.reference, error.fatal), (ErrorCode::InvalidField, 5, false));
    let Some(Frame::AdminReply { request_id, json }) = raw.recv().await else { panic!("expected an ADMIN_REPLY") };
    assert_eq!(request_id, 6);
    let reply: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(reply["broker"], "solo");
    broker.shutdown().await;
}

#[tokio::test]
async fn subscriptions_show_each_connection_with_its_filters_and_queue_depth() {
    let broker = crate::common::broker().await;
    let subscriber = client(&broker, "watcher").await;
    let mut options =
        SubscribeOptions::new("quotes.>").filter(sift_client::FilterKind::Sql, "price > 10").queue_group("workers");
    options.credit = Some(0);
    let _held = subscriber.subscribe(options).await.expect("subscribe");
    let publisher = client(&broker, "publisher").await;
    let mut quote = message("quotes.ibm", "x");
    quote.properties.push(("price".into(), sift_core::Value::Int(12)));
    publisher.publish_confirmed(quote, Default::default()).await.expect("confirmed");
    let reply = publisher.admin(AdminQuery::Subscriptions).await.expect("subscriptions");
    assert_eq!(reply["query"], "subscriptions");
    let connections = reply["connections"].as_array().expect("connections");
    let watcher = connections.iter().find(|connection| connection["client"] == "watcher").expect("the watcher");
    let subscription = &watcher["subscriptions"][0];
    assert_eq!(subscription["topic"], "quotes.>");
    assert_eq!(subscription["content"]["language"], "sql");
    assert_eq!(subscription["queue_group"], "workers");
    // No credit was granted: the matched message waits in the queue.
    assert_eq!(subscription["queued"], 1, "{reply}");
    let own = connections.iter().find(|connection| connection["client"] == "publisher").expect("the publisher");
    assert_eq!(own["subscriptions"].as_array().map(Vec::len), Some(0));
    broker.shutdown().await;
}
