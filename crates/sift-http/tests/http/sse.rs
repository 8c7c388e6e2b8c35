//! HTTP subscriptions read as server-sent events.

use serde_json::json;
use sift_broker::front_end::FrontEnd;
use sift_core::Value;

use crate::common::*;

#[tokio::test]
async fn each_filter_language_delivers_exactly_what_matches() {
    let served = served().await;
    let address = served.http_addr();
    let filters = [
        ("tags", json!("sym=\"IBM\"")),
        ("sql", json!("sym = 'IBM' AND price > 10")),
        ("xpath", json!("/quote[@sym='IBM']")),
        ("regex", json!("^quotes\\.ibm$")),
    ];
    let mut streams = Vec::new();
    for (language, filter) in &filters {
        let mut spec = json!({ "topic": "quotes.*" });
        spec[*language] = filter.clone();
        let id = create_subscription(address, spec).await;
        let stream =
            EventStream::open(address, &format!("/v1/subscriptions/{id}/events"), &[]).await.expect("a stream");
        streams.push((language, stream));
    }
    let publisher = native(&served, "publisher").await;
    let quote = |topic: &str, sym: &str, price: i64| {
        let mut message =
            sift_core::Message::new(sift_core::TopicName::new(topic).expect("topic"), format!("{sym}@{price}"));
        message.properties = vec![("sym".into(), Value::Str(sym.into())), ("price".into(), Value::Int(price))];
        message.metadata = Some(format!("<quote sym=\"{sym}\"/>").into());
        message
    };
    // A miss for every language, then the match every language takes.
    for message in [quote("quotes.msft", "MSFT", 5), quote("quotes.ibm", "IBM", 12)] {
        publisher.publish_confirmed(message, Default::default()).await.expect("confirmed");
    }
    for (language, stream) in &mut streams {
        let event = stream.next().await;
        assert_eq!(event.payload(), "IBM@12", "{language}");
        assert_eq!(event.json()["topic"], "quotes.ibm");
        assert_eq!(event.json()["properties"]["price"], 12);
        assert!(event.id.is_some(), "events carry ids");
    }
    served.stop().await;
}

#[tokio::test]
async fn a_durable_event_stream_resumes_after_last_event_id_without_duplicates() {
    let served = served().await;
    let address = served.http_addr();
    let id = create_subscription(address, json!({ "topic": "audit.>", "durable": "auditor" })).await;
    let path = format!("/v1/subscriptions/{id}/events");
    let publisher = native(&served, "publisher").await;
    let persistent = |payload: &str| {
        let mut message =
            sift_core::Message::new(sift_core::TopicName::new("audit.login").expect("topic"), payload.to_string());
        message.delivery_mode = sift_core::DeliveryMode::Persistent;
        message
    };
    let mut first = EventStream::open(address, &path, &[]).await.expect("a stream");
    for payload in ["one", "two", "three"] {
        publisher.publish_confirmed(persistent(payload), Default::default()).await.expect("stored");
    }
    let mut last_id = String::new();
    for expected in ["one", "two", "three"] {
        let event = first.next().await;
        assert_eq!(event.payload(), expected);
        assert_eq!(event.json()["stream_seq"].to_string(), event.id.clone().expect("id"));
        last_id = event.id.expect("id");
    }
    drop(first);
    for payload in ["four", "five"] {
        publisher.publish_confirmed(persistent(payload), Default::default()).await.expect("stored");
    }
    // Reconnect as an EventSource would, with the last id it saw: the new
    // stream takes over from the old connection.
    let mut second = EventStream::open(address, &path, &[("Last-Event-ID", &last_id)]).await.expect("a stream");
    assert_eq!(second.next().await.payload(), "four");
    assert_eq!(second.next().await.payload(), "five");
    served.stop().await;
}

#[tokio::test]
async fn subscriptions_are_listed_consumed_once_deleted_and_expire_when_idle() {
    let served = served_with(|config| config.subscription_idle_ms = 300).await;
    let address = served.http_addr();
    let id = create_subscription(address, json!({ "topic": "t" })).await;
    let listed = get(address, "/v1/subscriptions").await.json();
    assert_eq!(listed["subscriptions"][0]["id"], id.as_str());
    assert_eq!(listed["subscriptions"][0]["request"]["topic"], "t");

    let path = format!("/v1/subscriptions/{id}/events");
    let mut first = EventStream::open(address, &path, &[]).await.expect("a stream");
    // A second stream takes over; the first ends.
    let _second = EventStream::open(address, &path, &[]).await.expect("a stream");
    assert!(tokio::time::timeout(PATIENCE, first.next_event()).await.expect("ends in time").is_none());
    assert_eq!(request(address, "DELETE", &format!("/v1/subscriptions/{id}"), &[], b"").await.status, 204);
    assert_eq!(request(address, "DELETE", &format!("/v1/subscriptions/{id}"), &[], b"").await.status, 404);
    let unknown = EventStream::open(address, "/v1/subscriptions/sub-999/events", &[]).await.err().expect("404");
    assert_eq!(unknown.status, 404);

    // Nobody attaches to this one: it is deleted after the idle time.
    let idle = create_subscription(address, json!({ "topic": "u" })).await;
    tokio::time::timeout(PATIENCE, async {
        while get(address, "/v1/subscriptions").await.text().contains(&idle) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the idle subscription is deleted");
    let stats = get(address, "/v1/admin/stats").await.json();
    assert_eq!(stats["doors"]["http"]["subscriptions_expired"], 1);
    served.stop().await;
}

#[tokio::test]
async fn bad_subscriptions_are_refused_with_the_filter_position() {
    let served = served().await;
    let address = served.http_addr();
    let bad_filter = post_json(address, "/v1/subscriptions", &json!({ "topic": "t", "sql": "price >" })).await;
    assert_eq!(bad_filter.status, 400, "{}", bad_filter.text());
    assert_eq!(bad_filter.json()["error"], "invalid_filter");
    assert!(bad_filter.json()["position"].is_u64(), "{}", bad_filter.text());
    let two_filters =
        post_json(address, "/v1/subscriptions", &json!({ "topic": "t", "sql": "a = 1", "tags": "a" })).await;
    assert_eq!(two_filters.status, 400);
    let bad_topic = post_json(address, "/v1/subscriptions", &json!({ "topic": "a..b" })).await;
    assert_eq!(bad_topic.json()["error"], "invalid_topic", "{}", bad_topic.text());
    let bad_policy = post_json(address, "/v1/subscriptions", &json!({ "topic": "t", "policy": "sometimes" })).await;
    assert_eq!(bad_policy.status, 400);
    let bad_callback = post_json(address, "/v1/subscriptions", &json!({ "topic": "t", "callback": "ftp://x/y" })).await;
    assert_eq!(bad_callback.status, 400);
    // None of them left a subscription behind.
    assert_eq!(get(address, "/v1/subscriptions").await.json()["subscriptions"], json!([]));
    served.stop().await;
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_off_and_the_broker_goes_on() {
    let served = served_with(|config| {
        config.slow_client_timeout_ms = 200;
        config.event_buffer = 4;
    })
    .await;
    let address = served.http_addr();
    let id =
        create_subscription(address, json!({ "topic": "flood", "policy": "drop-new", "queue_capacity": 64 })).await;
    // Opened and never read again.
    let stalled = EventStream::open(address, &format!("/v1/subscriptions/{id}/events"), &[]).await.expect("a stream");
    let publisher = native(&served, "publisher").await;
    let payload = "x".repeat(64 * 1024);
    let cut_off = tokio::time::timeout(PATIENCE, async {
        loop {
            publish_native(&publisher, "flood", &payload, &[]).await;
            let stats = served.http.counters().slow_clients_disconnected.load(std::sync::atomic::Ordering::Relaxed);
            if stats == 1 {
                break;
            }
        }
    })
    .await;
    assert!(cut_off.is_ok(), "the stalled client is cut off");
    // Everyone else is served as before.
    let other = native(&served, "other").await;
    let mut subscription = other.subscribe(sift_client::SubscribeOptions::new("after")).await.expect("subscribe");
    publish_native(&publisher, "after", "fine", &[]).await;
    assert_eq!(&next(&mut subscription).await.message.payload[..], b"fine");
    // A stalled connection would hold shutdown for its grace period.
    drop(stalled);
    served.stop().await;
}
