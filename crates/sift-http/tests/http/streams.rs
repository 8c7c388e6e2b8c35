//! Streams, durable subscriptions and archive queries over HTTP.

use serde_json::json;

use crate::common::*;

fn persistent(topic: &str, payload: &str, sym: &str, price: i64) -> serde_json::Value {
    json!({ "topic": topic, "payload": payload, "mode": "persistent", "properties": { "sym": sym, "price": price } })
}

#[tokio::test]
async fn streams_are_added_listed_described_queried_and_removed() {
    let served = served().await;
    let address = served.http_addr();
    let added =
        post_json(address, "/v1/streams", &json!({ "name": "quotes", "topics": ["quotes.>"], "fsync": "os" })).await;
    assert_eq!(added.status, 201, "{}", added.text());
    assert_eq!(added.json()["name"], "quotes");
    let again = post_json(address, "/v1/streams", &json!({ "name": "quotes", "topics": ["quotes.>"] })).await;
    assert_eq!(again.status, 409, "{}", again.text());
    assert_eq!(again.json()["error"], "stream_exists");

    for (sym, price) in [("IBM", 90), ("IBM", 120), ("MSFT", 300)] {
        let reply = post_json(address, "/v1/messages", &persistent("quotes.nyse", sym, sym, price)).await;
        assert_eq!(reply.json()["stream"], "quotes", "{}", reply.text());
    }
    let listed = get(address, "/v1/streams").await.json();
    let names: Vec<&str> =
        listed["streams"].as_array().expect("streams").iter().filter_map(|s| s["name"].as_str()).collect();
    assert!(names.contains(&"quotes") && names.contains(&"default"), "{names:?}");
    assert_eq!(get(address, "/v1/streams/quotes").await.json()["messages"], 3);

    let query = get(address, "/v1/streams/quotes/messages?sql=sym%20%3D%20%27IBM%27%20AND%20price%20%3E%20100").await;
    assert_eq!(query.status, 200, "{}", query.text());
    assert_eq!(query.header("content-type"), Some("application/x-ndjson"));
    let lines: Vec<serde_json::Value> =
        query.text().lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["properties"]["price"], 120);
    assert_eq!(lines[0]["stream_seq"], 2);
    assert_eq!(lines[1]["done"]["matched"], 1);
    assert_eq!(lines[1]["done"]["scanned"], 3);

    let limited = get(address, "/v1/streams/quotes/messages?limit=2").await.text();
    assert_eq!(limited.lines().count(), 3, "two messages and the end: {limited}");
    let bad_filter = get(address, "/v1/streams/quotes/messages?xpath=%2Fa%5B").await;
    assert_eq!((bad_filter.status, bad_filter.json()["error"].clone()), (400, json!("invalid_filter")));
    let bad_time = get(address, "/v1/streams/quotes/messages?since=yesterday").await;
    assert_eq!(bad_time.status, 400);
    let unknown = get(address, "/v1/streams/nothing/messages").await;
    assert_eq!((unknown.status, unknown.json()["error"].clone()), (404, json!("unknown_stream")));

    let removed = request(address, "DELETE", "/v1/streams/quotes", &[], b"").await;
    assert_eq!(removed.status, 200, "{}", removed.text());
    assert_eq!(get(address, "/v1/streams/quotes").await.status, 404);
    served.stop().await;
}

#[tokio::test]
async fn durable_subscriptions_made_over_http_are_listed_and_removed() {
    let served = served().await;
    let address = served.http_addr();
    let id =
        create_subscription(address, json!({ "topic": "audit.>", "durable": "auditor", "sql": "level > 2" })).await;
    let listed = get(address, "/v1/durables").await.json();
    assert_eq!(listed["durables"][0]["name"], "auditor", "{listed}");
    let info = get(address, "/v1/durables/auditor").await;
    assert_eq!(info.json()["topic_filter"], "audit.>");
    // In use by the HTTP subscription's session: not removed under it.
    let busy = request(address, "DELETE", "/v1/durables/auditor", &[], b"").await;
    assert_eq!(busy.status, 409, "{}", busy.text());
    assert_eq!(request(address, "DELETE", &format!("/v1/subscriptions/{id}"), &[], b"").await.status, 204);
    let removed = tokio::time::timeout(PATIENCE, async {
        loop {
            let reply = request(address, "DELETE", "/v1/durables/auditor", &[], b"").await;
            if reply.status != 409 {
                return reply;
            }
        }
    })
    .await
    .expect("the durable is released once its session closed");
    assert_eq!(removed.status, 200, "{}", removed.text());
    assert_eq!(get(address, "/v1/durables/auditor").await.json()["error"], "unknown_durable");
    served.stop().await;
}
