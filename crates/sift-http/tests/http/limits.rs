//! Malformed input and every HTTP limit: each gets a clear answer (or a
//! closed connection where HTTP has no answer) and the server goes on.

use serde_json::json;
use sift_broker::front_end::FrontEnd;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::common::*;

#[tokio::test]
async fn malformed_publishes_get_400_with_what_and_where() {
    let served = served().await;
    let address = served.http_addr();
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        ("application/json", b"{\"topic\": \"t\",".to_vec(), "bad_json", "line 1 column"),
        ("application/json", br#"{"topic":"t","colour":"red"}"#.to_vec(), "bad_json", "unknown field `colour`"),
        ("application/json", br#"{"topic":"a..b"}"#.to_vec(), "invalid_topic", "topic"),
        ("application/json", br#"{"topic":"t","properties":{"x":[1]}}"#.to_vec(), "invalid_field", "is an array"),
        (
            "application/json",
            br#"{"topic":"t","payload":"a","payload_base64":"YQ=="}"#.to_vec(),
            "invalid_field",
            "not both",
        ),
        ("application/json", br#"{"topic":"t","payload_base64":"!!"}"#.to_vec(), "invalid_field", "payload_base64"),
        ("application/json", br#"{"topic":"t","mode":"eventually"}"#.to_vec(), "invalid_field", "eventually"),
        ("application/json", br#"{"topic":"t","priority":12}"#.to_vec(), "invalid_field", "priority 12"),
        ("application/json", br#"{"topic":"t","await":"forever"}"#.to_vec(), "invalid_field", "delivered"),
        ("text/plain", b"no topic".to_vec(), "invalid_topic", "?topic="),
    ];
    for (content_type, body, code, says) in cases {
        let reply = request(address, "POST", "/v1/messages", &[("Content-Type", content_type)], &body).await;
        assert_eq!(reply.status, 400, "{}: {}", String::from_utf8_lossy(&body), reply.text());
        assert_eq!(reply.json()["error"], code, "{}", reply.text());
        let message = reply.json()["message"].as_str().unwrap_or_default().to_string();
        assert!(message.contains(says), "{message} should say {says}");
    }
    let unknown_param = request(address, "POST", "/v1/messages?topic=t&colour=red", &[], b"x").await;
    assert_eq!(unknown_param.status, 400, "{}", unknown_param.text());
    served.stop().await;
}

#[tokio::test]
async fn bad_metadata_is_refused_by_the_broker_with_its_byte_position() {
    let served = served().await;
    let envelope = json!({ "topic": "t", "metadata": "<order><line></order>" });
    let reply = post_json(served.http_addr(), "/v1/messages", &envelope).await;
    assert_eq!(reply.status, 400, "{}", reply.text());
    assert_eq!(reply.json()["error"], "invalid_field");
    assert!(reply.json()["position"].is_u64(), "{}", reply.text());
    // The same session goes on serving.
    let good = post_json(served.http_addr(), "/v1/messages", &json!({ "topic": "t", "metadata": "<order/>" })).await;
    assert_eq!(good.status, 404, "{}", good.text());
    served.stop().await;
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_whether_declared_or_streamed() {
    let served = served_with(|config| config.max_body_bytes = 1024).await;
    let address = served.http_addr();
    let declared = request(address, "POST", "/v1/messages?topic=t", &[], &[b'x'; 2048]).await;
    assert_eq!(declared.status, 413);
    assert_eq!(declared.json()["error"], "max_body_bytes");

    let mut stream = TcpStream::connect(address).await.expect("connect");
    let head = "POST /v1/messages?topic=t HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    stream.write_all(head.as_bytes()).await.expect("head");
    for _ in 0..3 {
        stream.write_all(format!("200\r\n{}\r\n", "y".repeat(0x200)).as_bytes()).await.expect("chunk");
    }
    let streamed = read_reply(&mut stream).await.expect("an answer");
    assert_eq!(streamed.status, 413);
    assert_eq!(streamed.json()["error"], "max_body_bytes");
    served.stop().await;
}

#[tokio::test]
async fn payloads_over_the_brokers_limit_get_413_named_by_the_broker() {
    let served = served_with_broker(|config| config.limits.max_payload_bytes = 100, |_| {}).await;
    let reply = request(served.http_addr(), "POST", "/v1/messages?topic=t", &[], &[b'z'; 200]).await;
    assert_eq!(reply.status, 413, "{}", reply.text());
    assert_eq!(reply.json()["error"], "max_payload_bytes");
    served.stop().await;
}

#[tokio::test]
async fn request_heads_over_the_limit_get_431() {
    let served = served_with(|config| config.max_header_bytes = 8192).await;
    let huge = "v".repeat(16 * 1024);
    let reply = request(served.http_addr(), "GET", "/v1/admin/stats", &[("x-filler", &huge)], b"").await;
    assert_eq!(reply.status, 431);
    served.stop().await;
}

#[tokio::test]
async fn idle_and_silent_connections_are_closed_after_the_header_timeout() {
    let served = served_with(|config| config.header_timeout_ms = 200).await;
    let address = served.http_addr();
    // Never says anything.
    let mut silent = TcpStream::connect(address).await.expect("connect");
    read_until_closed(&mut silent).await;
    // Says one request, keeps the connection, then goes quiet.
    let mut idle = TcpStream::connect(address).await.expect("connect");
    idle.write_all(b"GET /v1/admin/links HTTP/1.1\r\nHost: t\r\n\r\n").await.expect("request");
    assert_eq!(read_reply(&mut idle).await.expect("an answer").status, 200);
    read_until_closed(&mut idle).await;
    served.stop().await;
}

#[tokio::test]
async fn a_body_that_stalls_gets_408_after_the_body_timeout() {
    let served = served_with(|config| config.body_timeout_ms = 200).await;
    let mut stream = TcpStream::connect(served.http_addr()).await.expect("connect");
    let head = "POST /v1/messages?topic=t HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789";
    stream.write_all(head.as_bytes()).await.expect("part of a request");
    let reply = read_reply(&mut stream).await.expect("an answer");
    assert_eq!(reply.status, 408);
    assert_eq!(reply.json()["error"], "body_timeout");
    assert_eq!(served.http.counters().body_timeouts.load(std::sync::atomic::Ordering::Relaxed), 1);
    served.stop().await;
}

#[tokio::test]
async fn connections_over_the_limit_are_closed_and_counted() {
    let served = served_with(|config| config.max_connections = 1).await;
    let address = served.http_addr();
    let mut first = TcpStream::connect(address).await.expect("connect");
    first.write_all(b"GET /v1/admin/links HTTP/1.1\r\nHost: t\r\n\r\n").await.expect("request");
    assert_eq!(read_reply(&mut first).await.expect("the first is served").status, 200);
    let mut second = TcpStream::connect(address).await.expect("the kernel accepts");
    assert!(read_until_closed(&mut second).await.is_empty(), "closed without an answer");
    let refused = served.http.counters().connections_refused.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(refused, 1);
    drop(first);
    served.stop().await;
}
