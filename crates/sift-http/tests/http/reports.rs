//! `GET /v1/admin/*` and `GET /metrics`.

use sift_client::{FilterKind, SubscribeOptions};

use crate::common::*;

#[tokio::test]
async fn admin_reports_are_the_brokers_with_every_doors_counters_in_stats() {
    let served = served().await;
    let subscriber = native(&served, "watcher").await;
    let options = SubscribeOptions::new("a.>").filter(FilterKind::Regex, "^a\\.b");
    let _subscription = subscriber.subscribe(options).await.expect("subscribe");
    let published = request(served.http_addr(), "POST", "/v1/messages?topic=a.b", &[], b"x").await;
    assert_eq!(published.status, 200);

    let stats = get(served.http_addr(), "/v1/admin/stats").await;
    assert_eq!(stats.status, 200);
    assert_eq!(stats.json()["query"], "stats");
    assert!(stats.json()["counters"]["messages_published"].as_u64() >= Some(1), "{}", stats.text());
    assert_eq!(stats.json()["doors"]["http"]["messages_published"], 1);

    let subscriptions = get(served.http_addr(), "/v1/admin/subscriptions").await.json();
    let connections = subscriptions["connections"].as_array().expect("connections");
    let watcher = connections.iter().find(|connection| connection["client"] == "watcher").expect("watcher listed");
    assert_eq!(watcher["subscriptions"][0]["content"]["language"], "regex");

    for query in ["links", "routes"] {
        let reply = get(served.http_addr(), &format!("/v1/admin/{query}")).await;
        assert_eq!(reply.status, 200, "{query}");
        assert_eq!(reply.json()["query"], query);
    }
    let unknown = get(served.http_addr(), "/v1/admin/everything").await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["error"], "not_found");
    served.stop().await;
}

#[tokio::test]
async fn metrics_expose_counters_and_gauges_in_the_prometheus_text_format() {
    let served = served().await;
    let subscriber = native(&served, "watcher").await;
    let options = SubscribeOptions::new("m").filter(FilterKind::Sql, "n > 1");
    let mut subscription = subscriber.subscribe(options).await.expect("subscribe");
    for _ in 0..3 {
        request(served.http_addr(), "POST", "/v1/messages?topic=m", &[("sift-prop-n", "2")], b"x").await;
        next(&mut subscription).await;
    }
    // Publishing sessions add their counts to the broker's after each read:
    // scrape until the third publish is counted.
    let reply = tokio::time::timeout(PATIENCE, async {
        loop {
            let reply = get(served.http_addr(), "/metrics").await;
            if reply.text().lines().any(|line| line == "sift_messages_published_total 3") {
                return reply;
            }
        }
    })
    .await
    .expect("the publishes are counted");
    assert_eq!(reply.status, 200);
    assert!(reply.header("content-type").is_some_and(|value| value.starts_with("text/plain")));
    let text = reply.text();
    let lines: Vec<&str> = text.lines().collect();
    for expected in [
        "# TYPE sift_messages_published_total counter",
        "sift_messages_published_total 3",
        "sift_messages_delivered_total 3",
        "# TYPE sift_connections_current gauge",
        "sift_subscriptions{filter=\"sql\"} 1",
        "sift_subscriptions{filter=\"tags\"} 0",
        "sift_http_messages_published_total 3",
        "# TYPE sift_deliver_latency_seconds histogram",
        "sift_deliver_latency_seconds_bucket{le=\"+Inf\"} 3",
        "sift_deliver_latency_seconds_count 3",
        "# TYPE sift_fsync_latency_seconds histogram",
    ] {
        assert!(lines.contains(&expected), "missing {expected:?} in:\n{text}");
    }
    served.stop().await;
}

#[tokio::test]
async fn the_openapi_document_names_every_route() {
    let served = served().await;
    let reply = get(served.http_addr(), "/v1/openapi.yaml").await;
    assert_eq!(reply.status, 200);
    let text = reply.text();
    for path in [
        "/v1/messages:",
        "/v1/subscriptions:",
        "/v1/subscriptions/{id}/events:",
        "/v1/ws:",
        "/v1/admin/{query}:",
        "/metrics:",
    ] {
        assert!(text.contains(path), "{path} is described");
    }
    served.stop().await;
}
