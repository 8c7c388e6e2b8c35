//! Helpers shared by the integration tests.

use std::time::Duration;

use bytes::BytesMut;
use sift_broker::{Config, RunningBroker};
use sift_client::{Client, ClientOptions, Delivery, Subscription};
use sift_core::{DeliveryMode, Message, TopicName};
use sift_proto::{Decoder, Frame, Hello, DEFAULT_MAX_FRAME_BYTES, PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest wait for something that should happen.
pub const PATIENCE: Duration = Duration::from_secs(10);
/// Payload of the message a test publishes after the messages that must not
/// arrive, to show that they did not.
pub const SENTINEL: &str = "sentinel";

/// A broker on an ephemeral loopback port, with `adjust` applied to the defaults.
pub async fn broker_with(adjust: impl FnOnce(&mut Config)) -> RunningBroker {
    let mut config = Config::scratch();
    adjust(&mut config);
    RunningBroker::start(config).await.expect("broker starts")
}

/// A broker with default settings.
pub async fn broker() -> RunningBroker {
    broker_with(|_| {}).await
}

/// A client named `name` that does not reconnect.
pub async fn client(broker: &RunningBroker, name: &str) -> Client {
    let options = ClientOptions { name: name.into(), reconnect: false, ..ClientOptions::default() };
    Client::connect(broker.local_addr().to_string(), options).await.expect("client connects")
}

/// A message on `topic` carrying `payload`.
pub fn message(topic: &str, payload: &str) -> Message {
    Message::new(TopicName::new(topic).expect("valid topic"), payload.to_string())
}

/// A reliable message on `topic` carrying `payload`.
pub fn reliable(topic: &str, payload: &str) -> Message {
    let mut message = message(topic, payload);
    message.delivery_mode = DeliveryMode::Reliable;
    message
}

/// The next delivery, failing the test after [`PATIENCE`].
pub async fn next(subscription: &mut Subscription) -> Delivery {
    tokio::time::timeout(PATIENCE, subscription.next())
        .await
        .expect("a delivery arrives in time")
        .expect("subscription is open")
}

/// The payload of a delivery as text.
pub fn text(delivery: &Delivery) -> String {
    String::from_utf8(delivery.message.payload.to_vec()).expect("utf-8 payload")
}

/// The next `count` payloads.
pub async fn texts(subscription: &mut Subscription, count: usize) -> Vec<String> {
    let mut received = Vec::with_capacity(count);
    for _ in 0..count {
        received.push(text(&next(subscription).await));
    }
    received
}

/// Reads the next delivery and asserts that it carries `expected`, the
/// payload of a sentinel published after messages that must not reach
/// `subscription`. Deliveries keep the order of one publisher along one
/// path, so when the sentinel comes next, nothing unwanted that was
/// published before it along that path is still on its way. `why` names
/// what this shows. Returns the sentinel's delivery.
pub async fn assert_next_is(subscription: &mut Subscription, expected: &str, why: &str) -> Delivery {
    let delivery = next(subscription).await;
    assert_eq!(text(&delivery), expected, "{why}: the sentinel comes next");
    delivery
}

/// The payloads that arrive before the one carrying `sentinel`, which ends
/// the read: everything `subscription` received before that sentinel.
pub async fn texts_until(subscription: &mut Subscription, sentinel: &str) -> Vec<String> {
    let mut received = Vec::new();
    loop {
        let payload = text(&next(subscription).await);
        if payload == sentinel {
            return received;
        }
        received.push(payload);
    }
}

/// Reads the members of one queue group until each has received a sentinel,
/// and returns what each received before its sentinel. A group hands each
/// message to one member only, so sentinels (copies of `sentinel`) are
/// published from `publisher` one at a time, each after the previous one
/// arrived, until every member has had one; they follow everything
/// `publisher` sent before, so a member's sentinel shows that nothing else
/// is still on its way to it. Returns the number of sentinels published.
/// Fails the test when a member gets anything but a sentinel after its
/// first, or after [`PATIENCE`].
pub async fn group_texts_until_sentinels(
    members: &mut [&mut Subscription],
    publisher: &Client,
    sentinel: &Message,
) -> (Vec<Vec<String>>, usize) {
    let sentinel_text = String::from_utf8(sentinel.payload.to_vec()).expect("utf-8 payload");
    let mut received = vec![Vec::new(); members.len()];
    let mut finished = vec![false; members.len()];
    let mut published = 0;
    let mut in_flight = false;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        for (index, member) in members.iter_mut().enumerate() {
            while let Some(delivery) = member.try_next() {
                let payload = text(&delivery);
                if payload == sentinel_text {
                    finished[index] = true;
                    in_flight = false;
                } else {
                    assert!(!finished[index], "member {index} got {payload} after its sentinel");
                    received[index].push(payload);
                }
            }
        }
        if finished.iter().all(|done| *done) && !in_flight {
            return (received, published);
        }
        if !in_flight {
            publisher.publish(sentinel.clone()).await.expect("publish the sentinel");
            published += 1;
            in_flight = true;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for the sentinels: {received:?}");
        // A bounded polling loop: the members are read together, without
        // waiting on any one of them.
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// How often [`group_texts_until_sentinels`] looks at the members again.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// A raw protocol connection, for tests that must misbehave.
pub struct Raw {
    pub stream: TcpStream,
    pub buf: BytesMut,
    pub decoder: Decoder,
}

impl Raw {
    /// Connects without a handshake.
    pub async fn connect(broker: &RunningBroker) -> Raw {
        let stream = TcpStream::connect(broker.local_addr()).await.expect("tcp connect");
        Raw { stream, buf: BytesMut::new(), decoder: Decoder::new(DEFAULT_MAX_FRAME_BYTES) }
    }

    /// Connects and completes the handshake.
    pub async fn handshake(broker: &RunningBroker) -> Raw {
        let mut raw = Raw::connect(broker).await;
        let hello = Hello { version_min: 1, version_max: PROTOCOL_VERSION, client_name: "raw".into() };
        raw.send(&Frame::Hello(hello)).await;
        assert!(matches!(raw.recv().await, Some(Frame::Welcome(_))), "WELCOME after HELLO");
        raw
    }

    /// Opens a subscription and checks that the broker confirms it.
    pub async fn subscribe(&mut self, request: sift_proto::Subscribe) {
        let sub_id = request.sub_id;
        self.send(&Frame::Subscribe(request)).await;
        assert_eq!(self.recv().await, Some(Frame::Subscribed { sub_id }));
    }

    /// Sends one frame.
    pub async fn send(&mut self, frame: &Frame) {
        let mut bytes = BytesMut::new();
        frame.encode(&mut bytes).expect("encodable");
        self.stream.write_all(&bytes).await.expect("write");
    }

    /// Sends raw bytes; errors are ignored (the broker may have closed).
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes).await;
    }

    /// The next frame, or `None` when the broker closed the connection.
    pub async fn recv(&mut self) -> Option<Frame> {
        tokio::time::timeout(PATIENCE, async {
            loop {
                if let Some(frame) = self.decoder.decode(&mut self.buf).expect("broker sends valid frames") {
                    return Some(frame);
                }
                match self.stream.read_buf(&mut self.buf).await {
                    Ok(0) | Err(_) => return None,
                    Ok(_) => {}
                }
            }
        })
        .await
        .expect("the broker answers in time")
    }

    /// Frames until the connection closes; the last is usually an ERROR.
    pub async fn recv_until_closed(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.recv().await {
            frames.push(frame);
        }
        frames
    }
}

/// The ERROR frames in `frames`.
pub fn errors(frames: &[Frame]) -> Vec<sift_proto::ErrorFrame> {
    frames
        .iter()
        .filter_map(|frame| match frame {
            Frame::Error(error) => Some(error.clone()),
            _ => None,
        })
        .collect()
}
