//! `POST /v1/messages`: raw and JSON publishes reach native subscribers
//! with everything they carried; the answers follow the broker's confirm.

use serde_json::json;
use sift_client::{AckPolicy, FilterKind, SubscribeOptions};
use sift_core::{DeliveryMode, Value};

use crate::common::*;

#[tokio::test]
async fn a_raw_publish_with_property_headers_passes_a_sql_filter() {
    let served = served().await;
    let subscriber = native(&served, "sub").await;
    let options = SubscribeOptions::new("quotes.*").filter(FilterKind::Sql, "price > 10 AND sym = 'IBM'");
    let mut subscription = subscriber.subscribe(options).await.expect("subscribe");
    let headers = [("sift-prop-price", "12.5"), ("sift-prop-sym", "IBM"), ("Content-Type", "text/plain")];
    let reply = request(served.http_addr(), "POST", "/v1/messages?topic=quotes.ibm", &headers, b"tick").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["matched"], 1);
    assert_eq!(reply.json()["status"], "accepted");
    let delivery = next(&mut subscription).await;
    assert_eq!(&delivery.message.payload[..], b"tick");
    assert_eq!(delivery.message.property("price"), Some(&Value::Float(12.5)));
    assert_eq!(&*delivery.message.publisher, "http-publish-0");
    served.stop().await;
}

#[tokio::test]
async fn a_json_envelope_carries_properties_metadata_binary_payload_mode_and_priority() {
    let served = served().await;
    let subscriber = native(&served, "sub").await;
    let options =
        SubscribeOptions::new("orders.>").filter(FilterKind::Xpath, "/order[@qty > 5]").ack(AckPolicy::Manual);
    let mut subscription = subscriber.subscribe(options).await.expect("subscribe");
    let envelope = json!({
        "topic": "orders.new",
        "properties": { "customer": "acme", "lines": 3, "urgent": true, "total": 99.5 },
        "metadata": "<order qty=\"7\"/>",
        "payload_base64": "AAEC/w==",
        "mode": "reliable",
        "priority": 7,
    });
    let reply = post_json(served.http_addr(), "/v1/messages", &envelope).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let delivery = next(&mut subscription).await;
    let message = &delivery.message;
    assert_eq!(&message.payload[..], &[0, 1, 2, 255]);
    assert_eq!(message.property("customer"), Some(&Value::Str("acme".into())));
    assert_eq!(message.property("lines"), Some(&Value::Int(3)));
    assert_eq!(message.property("urgent"), Some(&Value::Bool(true)));
    assert_eq!(message.property("total"), Some(&Value::Float(99.5)));
    assert_eq!(message.metadata.as_deref(), Some(&b"<order qty=\"7\"/>"[..]));
    assert_eq!(message.delivery_mode, DeliveryMode::Reliable);
    assert_eq!(message.priority.level(), 7);
    assert!(delivery.delivery_tag != 0, "reliable deliveries are acknowledged");
    delivery.ack().expect("ack");
    served.stop().await;
}

#[tokio::test]
async fn a_publish_nobody_wants_answers_404_no_subscribers() {
    let served = served().await;
    let subscriber = native(&served, "sub").await;
    let options = SubscribeOptions::new("t").filter(FilterKind::Tags, "sym=\"IBM\"");
    let _subscription = subscriber.subscribe(options).await.expect("subscribe");
    let reply =
        post_json(served.http_addr(), "/v1/messages", &json!({ "topic": "t", "properties": { "sym": "MSFT" } })).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json(), json!({ "error": "no_subscribers", "matched": 0, "status": "no_subscribers" }));
    served.stop().await;
}

#[tokio::test]
async fn await_delivered_answers_once_the_subscriber_acknowledged() {
    let served = served().await;
    let subscriber = native(&served, "sub").await;
    let mut subscription =
        subscriber.subscribe(SubscribeOptions::new("jobs").ack(AckPolicy::Manual)).await.expect("subscribe");
    let address = served.http_addr();
    let publish = tokio::spawn(async move {
        post_json(address, "/v1/messages", &json!({ "topic": "jobs", "payload": "run", "await": "delivered" })).await
    });
    let delivery = next(&mut subscription).await;
    assert!(!publish.is_finished(), "the answer waits for the ack");
    delivery.ack().expect("ack");
    let reply = tokio::time::timeout(PATIENCE, publish).await.expect("answered").expect("task");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["status"], "delivered");
    assert_eq!(reply.json()["acked"], 1);
    served.stop().await;
}

#[tokio::test]
async fn await_delivered_that_times_out_answers_202_with_who_is_pending() {
    let served = served().await;
    let subscriber = native(&served, "slow").await;
    let mut subscription =
        subscriber.subscribe(SubscribeOptions::new("jobs").ack(AckPolicy::Manual)).await.expect("subscribe");
    let envelope = json!({ "topic": "jobs", "await": "delivered", "await_timeout_ms": 50 });
    let reply = post_json(served.http_addr(), "/v1/messages", &envelope).await;
    assert_eq!(reply.status, 202, "{}", reply.text());
    assert_eq!(reply.json()["status"], "incomplete");
    let pending = reply.json()["pending"].to_string();
    assert!(pending.contains("slow"), "{pending}");
    next(&mut subscription).await.ack().expect("ack");
    served.stop().await;
}

#[tokio::test]
async fn a_persistent_publish_answers_with_its_stream_and_sequence() {
    let served = served().await;
    let envelope = json!({ "topic": "audit.login", "payload": "alice", "mode": "persistent" });
    let first = post_json(served.http_addr(), "/v1/messages", &envelope).await;
    let second = post_json(served.http_addr(), "/v1/messages", &envelope).await;
    // Stored, so confirmed, even though no subscriber matched.
    assert_eq!(first.json()["stream"], "default", "{}", first.text());
    let (first_seq, second_seq) = (first.json()["stream_seq"].as_u64(), second.json()["stream_seq"].as_u64());
    assert_eq!(second_seq, first_seq.map(|seq| seq + 1));
    served.stop().await;
}

#[tokio::test]
async fn messages_published_natively_and_over_http_interleave_for_one_subscriber() {
    let served = served().await;
    let subscriber = native(&served, "sub").await;
    let mut subscription = subscriber.subscribe(SubscribeOptions::new("mixed")).await.expect("subscribe");
    let publisher = native(&served, "native-pub").await;
    let reply = request(served.http_addr(), "POST", "/v1/messages?topic=mixed", &[], b"over http").await;
    assert_eq!(reply.status, 200);
    let topic = sift_core::TopicName::new("mixed").expect("topic");
    publisher.publish_confirmed(sift_core::Message::new(topic, "native"), Default::default()).await.expect("confirmed");
    let payloads = [next(&mut subscription).await, next(&mut subscription).await]
        .map(|delivery| String::from_utf8_lossy(&delivery.message.payload).into_owned());
    assert_eq!(payloads, ["over http".to_string(), "native".to_string()]);
    served.stop().await;
}
