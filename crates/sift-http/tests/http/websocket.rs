//! `GET /v1/ws`: subscribe, publish, deliver and ack as JSON messages.

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use sift_client::SubscribeOptions;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::common::*;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn open(served: &Served) -> Socket {
    let (socket, _) =
        tokio_tungstenite::connect_async(format!("ws://{}/v1/ws", served.http_addr())).await.expect("WebSocket opens");
    socket
}

async fn send(socket: &mut Socket, message: Value) {
    socket.send(WsMessage::Text(message.to_string().into())).await.expect("send");
}

/// The next JSON message from the server.
async fn receive(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(PATIENCE, socket.next()).await.expect("a message in time");
        match message.expect("socket open").expect("no error") {
            WsMessage::Text(text) => return serde_json::from_str(&text).expect("JSON"),
            WsMessage::Ping(_) | WsMessage::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The next message with `op`, skipping others (confirms interleave).
async fn receive_op(socket: &mut Socket, op: &str) -> Value {
    loop {
        let message = receive(socket).await;
        if message["op"] == op {
            return message;
        }
    }
}

#[tokio::test]
async fn messages_cross_between_websocket_and_native_clients_both_ways() {
    let served = served().await;
    let mut socket = open(&served).await;
    send(&mut socket, json!({ "op": "subscribe", "id": "prices", "topic": "px.*", "sql": "px > 100", "ack": "auto" }))
        .await;
    assert_eq!(receive(&mut socket).await, json!({ "op": "subscribed", "id": "prices" }));

    let native_client = native(&served, "native").await;
    let mut native_sub = native_client.subscribe(SubscribeOptions::new("orders")).await.expect("subscribe");
    publish_native(&native_client, "px.ibm", "low", &[("px", sift_core::Value::Int(90))]).await;
    publish_native(&native_client, "px.ibm", "high", &[("px", sift_core::Value::Int(120))]).await;
    let delivered = receive_op(&mut socket, "deliver").await;
    assert_eq!(delivered["id"], "prices");
    assert_eq!(delivered["message"]["payload"], "high");
    assert_eq!(delivered["tag"], Value::Null, "auto-acknowledged");

    send(
        &mut socket,
        json!({ "op": "publish", "request": "r1", "topic": "orders", "payload": "buy", "mode": "reliable" }),
    )
    .await;
    let confirm = receive_op(&mut socket, "confirm").await;
    assert_eq!(confirm["request"], "r1");
    assert_eq!(confirm["matched"], 1);
    assert_eq!(&next(&mut native_sub).await.message.payload[..], b"buy");

    send(&mut socket, json!({ "op": "publish", "request": "r2", "topic": "nobody.home" })).await;
    let unmatched = receive_op(&mut socket, "confirm").await;
    assert_eq!(unmatched["status"], "no_subscribers");
    served.stop().await;
}

#[tokio::test]
async fn reliable_deliveries_wait_for_the_clients_ack_and_a_nack_redelivers() {
    let served = served().await;
    let mut socket = open(&served).await;
    send(&mut socket, json!({ "op": "subscribe", "id": "jobs", "topic": "jobs" })).await;
    receive_op(&mut socket, "subscribed").await;
    let publisher = native(&served, "publisher").await;
    let mut job = sift_core::Message::new(sift_core::TopicName::new("jobs").expect("topic"), "run");
    job.delivery_mode = sift_core::DeliveryMode::Reliable;
    let publishing = tokio::spawn(async move {
        let options = sift_client::PublishOptions { await_delivered: true, await_timeout: None };
        publisher.publish_confirmed(job, options).await
    });
    let first = receive_op(&mut socket, "deliver").await;
    let tag = first["tag"].as_u64().expect("reliable deliveries carry a tag");
    send(&mut socket, json!({ "op": "nack", "tag": tag, "requeue": true })).await;
    let again = receive_op(&mut socket, "deliver").await;
    assert_eq!(again["message"]["redelivered"], true);
    send(&mut socket, json!({ "op": "ack", "tag": again["tag"] })).await;
    let confirm = tokio::time::timeout(PATIENCE, publishing).await.expect("in time").expect("task").expect("confirm");
    assert_eq!(confirm.status, sift_client::ConfirmStatus::Delivered);
    served.stop().await;
}

#[tokio::test]
async fn bad_messages_get_error_messages_and_the_socket_goes_on() {
    let served = served().await;
    let mut socket = open(&served).await;
    socket.send(WsMessage::Text("{not json".into())).await.expect("send");
    assert_eq!(receive(&mut socket).await["error"], "bad_json");
    send(&mut socket, json!({ "op": "dance" })).await;
    assert_eq!(receive(&mut socket).await["error"], "invalid_field");
    send(&mut socket, json!({ "op": "subscribe", "id": "x", "topic": "t", "xpath": "/a[" })).await;
    let refused = receive(&mut socket).await;
    assert_eq!(refused["error"], "invalid_filter", "{refused}");
    assert_eq!(refused["id"], "x");
    assert!(refused["position"].is_u64(), "{refused}");
    send(&mut socket, json!({ "op": "publish", "request": "p", "topic": "t", "priority": 99 })).await;
    let bad_publish = receive(&mut socket).await;
    assert_eq!((bad_publish["error"].clone(), bad_publish["request"].clone()), (json!("invalid_field"), json!("p")));
    send(&mut socket, json!({ "op": "unsubscribe", "id": "never" })).await;
    assert_eq!(receive(&mut socket).await["error"], "unknown_subscription");
    // Still serving.
    send(&mut socket, json!({ "op": "subscribe", "id": "ok", "topic": "t" })).await;
    assert_eq!(receive(&mut socket).await["op"], "subscribed");
    served.stop().await;
}

#[tokio::test]
async fn unsubscribe_stops_deliveries() {
    let served = served().await;
    let mut socket = open(&served).await;
    for id in ["a", "b"] {
        send(&mut socket, json!({ "op": "subscribe", "id": id, "topic": "t", "ack": "auto" })).await;
        receive_op(&mut socket, "subscribed").await;
    }
    send(&mut socket, json!({ "op": "unsubscribe", "id": "a" })).await;
    let publisher = native(&served, "publisher").await;
    // The unsubscribe is applied before the publish: wait until the broker
    // lists one subscription on the WebSocket's session.
    tokio::time::timeout(PATIENCE, async {
        loop {
            let report = get(served.http_addr(), "/v1/admin/subscriptions").await.json();
            let sessions = report["connections"].as_array().cloned().unwrap_or_default();
            let on_ws =
                sessions.iter().find(|session| session["client"].as_str().unwrap_or("").starts_with("http-ws-"));
            if on_ws.is_some_and(|session| session["subscriptions"].as_array().map(Vec::len) == Some(1)) {
                return;
            }
        }
    })
    .await
    .expect("unsubscribed");
    publish_native(&publisher, "t", "only-b", &[]).await;
    publish_native(&publisher, "t", "sentinel", &[]).await;
    let mut seen = Vec::new();
    loop {
        let delivered = receive_op(&mut socket, "deliver").await;
        seen.push((delivered["id"].clone(), delivered["message"]["payload"].clone()));
        if delivered["message"]["payload"] == "sentinel" {
            break;
        }
    }
    assert_eq!(seen, vec![(json!("b"), json!("only-b")), (json!("b"), json!("sentinel"))]);
    served.stop().await;
}

#[tokio::test]
async fn each_filter_language_delivers_exactly_what_matches_over_a_websocket() {
    let served = served().await;
    let mut socket = open(&served).await;
    let filters = [
        ("tags", json!("sym=\"IBM\"")),
        ("sql", json!("sym = 'IBM' AND price > 10")),
        ("xpath", json!("/quote[@sym='IBM']")),
        ("regex", json!("^quotes\\.ibm$")),
    ];
    for (language, filter) in &filters {
        let mut request = json!({ "op": "subscribe", "id": language, "topic": "quotes.*", "ack": "auto" });
        request[*language] = filter.clone();
        send(&mut socket, request).await;
        assert_eq!(receive_op(&mut socket, "subscribed").await["id"], *language);
    }
    // A miss for every language, then a match for all, then a sentinel every
    // language takes too: each subscription keeps its order, so once each
    // one delivered its sentinel, whatever it would have sent is in.
    for (topic, sym, price, payload) in
        [("quotes.msft", "MSFT", 5, "miss"), ("quotes.ibm", "IBM", 12, "match"), ("quotes.ibm", "IBM", 20, "sentinel")]
    {
        let envelope = json!({
            "op": "publish", "topic": topic, "payload": payload,
            "properties": { "sym": sym, "price": price },
            "metadata": format!("<quote sym=\"{sym}\"/>"),
        });
        send(&mut socket, envelope).await;
    }
    let mut seen: Vec<(String, String)> = Vec::new();
    while seen.iter().filter(|(_, payload)| payload == "sentinel").count() < filters.len() {
        let delivered = receive_op(&mut socket, "deliver").await;
        let id = delivered["id"].as_str().unwrap_or_default().to_string();
        seen.push((id, delivered["message"]["payload"].as_str().unwrap_or_default().to_string()));
    }
    seen.sort();
    let mut expected: Vec<(String, String)> = ["regex", "sql", "tags", "xpath"]
        .iter()
        .flat_map(|id| [(id.to_string(), "match".to_string()), (id.to_string(), "sentinel".to_string())])
        .collect();
    expected.sort();
    assert_eq!(seen, expected);
    served.stop().await;
}
