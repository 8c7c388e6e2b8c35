//! Callback subscriptions: the broker POSTs deliveries to a listener the
//! test runs, retrying reliable ones until the listener answers 2xx.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::common::*;

/// A callback listener: answers 503 to its first `failures` requests,
/// then 200, and hands over the bodies it accepted.
struct Listener {
    address: SocketAddr,
    bodies: mpsc::UnboundedReceiver<Value>,
    refused: Arc<AtomicU32>,
}

impl Listener {
    async fn start(failures: u32) -> Listener {
        Listener::on(TcpListener::bind("127.0.0.1:0").await.expect("bind"), failures)
    }

    fn on(socket: TcpListener, failures: u32) -> Listener {
        let address = socket.local_addr().expect("address");
        let (sender, bodies) = mpsc::unbounded_channel();
        let failures_left = Arc::new(AtomicU32::new(failures));
        let refused = Arc::new(AtomicU32::new(0));
        let counted = refused.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = socket.accept().await {
                tokio::spawn(answer(stream, sender.clone(), failures_left.clone(), counted.clone()));
            }
        });
        Listener { address, bodies, refused }
    }

    async fn next(&mut self) -> Value {
        tokio::time::timeout(PATIENCE, self.bodies.recv()).await.expect("a callback in time").expect("listening")
    }
}

/// Serves one kept-alive connection of callback POSTs.
async fn answer(
    mut stream: TcpStream,
    bodies: mpsc::UnboundedSender<Value>,
    failures_left: Arc<AtomicU32>,
    refused: Arc<AtomicU32>,
) {
    let mut buffer = Vec::new();
    loop {
        let Some(head_end) = find(&buffer, b"\r\n\r\n") else {
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(read) => buffer.extend_from_slice(&chunk[..read]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:").map(|value| value.trim().to_string()))
            .and_then(|value| value.parse().ok())
            .unwrap_or(0);
        if buffer.len() < head_end + 4 + length {
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(read) => buffer.extend_from_slice(&chunk[..read]),
            }
            continue;
        }
        let body: Vec<u8> = buffer.drain(..head_end + 4 + length).skip(head_end + 4).collect();
        let fail = failures_left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| left.checked_sub(1)).is_ok();
        let status = if fail {
            refused.fetch_add(1, Ordering::SeqCst);
            "503 Service Unavailable"
        } else {
            let _ = bodies.send(serde_json::from_slice(&body).expect("a JSON callback body"));
            "200 OK"
        };
        let reply = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
        if stream.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn reliable(topic: &str, payload: &str) -> sift_core::Message {
    let mut message = sift_core::Message::new(sift_core::TopicName::new(topic).expect("topic"), payload.to_string());
    message.delivery_mode = sift_core::DeliveryMode::Reliable;
    message
}

#[tokio::test]
async fn deliveries_are_posted_to_the_callback_in_order() {
    let served = served().await;
    let mut listener = Listener::start(0).await;
    let callback = format!("http://{}/hooks/quotes", listener.address);
    let id =
        create_subscription(served.http_addr(), json!({ "topic": "q.>", "tags": "hot=true", "callback": callback }))
            .await;
    let publisher = native(&served, "publisher").await;
    publish_native(&publisher, "q.a", "cold", &[("hot", sift_core::Value::Bool(false))]).await;
    publish_native(&publisher, "q.a", "first", &[("hot", sift_core::Value::Bool(true))]).await;
    let over_http =
        request(served.http_addr(), "POST", "/v1/messages?topic=q.b", &[("sift-prop-hot", "true")], b"second").await;
    assert_eq!(over_http.status, 200);
    let first = listener.next().await;
    assert_eq!((first["payload"].clone(), first["subscription"].clone()), (json!("first"), json!(id)));
    assert_eq!(listener.next().await["payload"], "second");
    // An event stream cannot take a callback subscription.
    let refused = EventStream::open(served.http_addr(), &format!("/v1/subscriptions/{id}/events"), &[]).await;
    assert_eq!(refused.err().expect("refused").status, 409);
    served.stop().await;
}

#[tokio::test]
async fn reliable_deliveries_are_retried_until_the_listener_recovers() {
    let served = served_with(|config| config.callback_backoff_max_ms = 20).await;
    let mut listener = Listener::start(3).await;
    let callback = format!("http://{}/hook", listener.address);
    create_subscription(served.http_addr(), json!({ "topic": "jobs", "callback": callback })).await;
    let publisher = native(&served, "publisher").await;
    for payload in ["one", "two"] {
        publisher.publish_confirmed(reliable("jobs", payload), Default::default()).await.expect("confirmed");
    }
    assert_eq!(listener.next().await["payload"], "one");
    assert_eq!(listener.next().await["payload"], "two");
    assert_eq!(listener.refused.load(Ordering::SeqCst), 3);
    let stats = get(served.http_addr(), "/v1/admin/stats").await.json();
    assert_eq!(stats["doors"]["http"]["callbacks_failed"], 3);
    assert_eq!(stats["doors"]["http"]["callbacks_delivered"], 2);
    served.stop().await;
}

#[tokio::test]
async fn a_callback_listener_that_is_down_gets_its_deliveries_once_it_is_up() {
    let served = served_with(|config| config.callback_backoff_max_ms = 20).await;
    // Take a free port, then free it: nothing listens there yet.
    let reserved = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = reserved.local_addr().expect("address");
    drop(reserved);
    create_subscription(served.http_addr(), json!({ "topic": "jobs", "callback": format!("http://{address}/") })).await;
    let publisher = native(&served, "publisher").await;
    publisher.publish_confirmed(reliable("jobs", "waited"), Default::default()).await.expect("confirmed");
    tokio::time::timeout(PATIENCE, async {
        loop {
            let stats = get(served.http_addr(), "/v1/admin/stats").await.json();
            if stats["doors"]["http"]["callbacks_failed"].as_u64() >= Some(1) {
                return;
            }
        }
    })
    .await
    .expect("the first attempt fails");
    let mut listener = Listener::on(TcpListener::bind(address).await.expect("the port is free again"), 0);
    assert_eq!(listener.next().await["payload"], "waited");
    served.stop().await;
}
