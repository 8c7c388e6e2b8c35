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
/// Wait used to check that something does not happen.
pub const QUIET: Duration = Duration::from_millis(300);

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

/// True when nothing arrives within [`QUIET`].
pub async fn stays_quiet(subscription: &mut Subscription) -> bool {
    tokio::time::timeout(QUIET, subscription.next()).await.is_err()
}

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
