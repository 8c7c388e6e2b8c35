//! The MQTT front-end over real sockets: bad input and every limit get
//! their reason code and a close, and never disturb other clients.
//!
//! Clients here are the codec crate's client role (packets it would not
//! send are written as raw bytes). Real third-party clients (paho-mqtt,
//! mosquitto_pub/sub) are exercised by `tests/python/test_mqtt.py`.

use sift_broker::front_end::FrontEnd;
use std::time::Duration;

use mqtt_protocol_core::mqtt::connection::Event;
use mqtt_protocol_core::mqtt::packet::{v5_0, GenericPacket, GenericPacketTrait, Qos, SubEntry, SubOpts};
use mqtt_protocol_core::mqtt::result_code::{ConnectReasonCode, DisconnectReasonCode, SubackReasonCode};
use mqtt_protocol_core::mqtt::{role, Connection, Version};
use sift_broker::{Config, RunningBroker};
use sift_mqtt::{MqttConfig, MqttFrontEnd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest wait for something that should happen.
const PATIENCE: Duration = Duration::from_secs(10);

async fn served(adjust: impl FnOnce(&mut MqttConfig)) -> (RunningBroker, MqttFrontEnd) {
    let mut mqtt_config = MqttConfig::scratch();
    adjust(&mut mqtt_config);
    let broker = RunningBroker::start(Config::scratch()).await.expect("broker starts");
    let mqtt = MqttFrontEnd::start(mqtt_config, broker.connector()).await.expect("MQTT starts");
    (broker, mqtt)
}

async fn stop(broker: RunningBroker, mqtt: MqttFrontEnd) {
    mqtt.shutdown().await;
    broker.shutdown().await;
}

/// An MQTT 5 client on a socket.
struct TestClient {
    stream: TcpStream,
    codec: Connection<role::Client>,
    received: Vec<GenericPacket<u16>>,
}

impl TestClient {
    async fn open(mqtt: &MqttFrontEnd) -> TestClient {
        let stream = TcpStream::connect(mqtt.local_addr()).await.expect("connect");
        TestClient { stream, codec: Connection::<role::Client>::new(Version::V5_0), received: Vec::new() }
    }

    /// Connects and returns the CONNACK's reason code.
    async fn connect(mqtt: &MqttFrontEnd, client_id: &str) -> (TestClient, Option<ConnectReasonCode>) {
        let mut client = TestClient::open(mqtt).await;
        let connect = v5_0::Connect::builder().client_id(client_id).expect("id").build().expect("connect");
        client.send(connect.into()).await;
        let code = match client.next().await {
            Some(GenericPacket::V5_0Connack(connack)) => Some(connack.reason_code()),
            _ => None,
        };
        (client, code)
    }

    async fn send(&mut self, packet: GenericPacket<u16>) {
        let events = self.codec.send(packet);
        self.handle(events).await;
    }

    async fn write_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    async fn handle(&mut self, events: Vec<Event>) {
        for event in events {
            match event {
                Event::RequestSendPacket { packet, .. } => {
                    self.stream.write_all(&packet.to_continuous_buffer()).await.expect("write");
                }
                Event::NotifyPacketReceived(packet) => self.received.push(packet),
                _ => {}
            }
        }
    }

    /// The next packet from the server; `None` once it closed.
    async fn next(&mut self) -> Option<GenericPacket<u16>> {
        tokio::time::timeout(PATIENCE, async {
            loop {
                if !self.received.is_empty() {
                    return Some(self.received.remove(0));
                }
                let mut bytes = vec![0u8; 64 * 1024];
                let read = match self.stream.read(&mut bytes).await {
                    Ok(0) | Err(_) => return None,
                    Ok(read) => read,
                };
                let mut cursor = mqtt_protocol_core::mqtt::common::Cursor::new(&bytes[..read]);
                while (cursor.position() as usize) < read {
                    let events = self.codec.recv(&mut cursor);
                    self.handle(events).await;
                }
            }
        })
        .await
        .expect("the server answers in time")
    }

    async fn subscribe(&mut self, filter: &str) -> SubackReasonCode {
        let packet_id = self.codec.acquire_packet_id().expect("packet id");
        let entry = SubEntry::new(filter, SubOpts::new().set_qos(Qos::AtMostOnce)).expect("entry");
        let subscribe =
            v5_0::Subscribe::builder().entries(vec![entry]).packet_id(packet_id).build().expect("subscribe");
        self.send(subscribe.into()).await;
        match self.next().await {
            Some(GenericPacket::V5_0Suback(suback)) => suback.reason_codes()[0],
            other => panic!("expected SUBACK, got {other:?}"),
        }
    }

    async fn publish(&mut self, topic: &str, payload: &[u8]) {
        let publish =
            v5_0::Publish::builder().topic_name(topic).expect("topic").payload(payload).build().expect("publish");
        self.send(publish.into()).await;
    }

    /// The payload of the next PUBLISH.
    async fn next_payload(&mut self) -> Vec<u8> {
        match self.next().await {
            Some(GenericPacket::V5_0Publish(publish)) => publish.payload().as_slice().to_vec(),
            other => panic!("expected PUBLISH, got {other:?}"),
        }
    }

    /// Reads until the server closes; returns the DISCONNECT reason it
    /// sent first, if any.
    async fn closed_with(&mut self) -> Option<DisconnectReasonCode> {
        let mut reason = None;
        while let Some(packet) = self.next().await {
            if let GenericPacket::V5_0Disconnect(disconnect) = packet {
                reason = disconnect.reason_code();
            }
        }
        reason
    }
}

/// A raw MQTT 5 CONNECT for client id `id` (no properties, keep-alive 0).
fn raw_connect(id: &str) -> Vec<u8> {
    let mut body = vec![0, 4, b'M', b'Q', b'T', b'T', 5, 0x02, 0, 0, 0];
    body.extend_from_slice(&(id.len() as u16).to_be_bytes());
    body.extend_from_slice(id.as_bytes());
    let mut packet = vec![0x10, body.len() as u8];
    packet.extend(body);
    packet
}

/// A subscriber that proves the broker still serves others: it gets a
/// sentinel published by a fresh client.
async fn others_still_served(mqtt: &MqttFrontEnd, subscriber: &mut TestClient) {
    let (mut publisher, code) = TestClient::connect(mqtt, "sentinel-publisher").await;
    assert_eq!(code, Some(ConnectReasonCode::Success));
    publisher.publish("watch/sentinel", b"still here").await;
    assert_eq!(subscriber.next_payload().await, b"still here");
}

#[tokio::test]
async fn garbage_closes_only_its_own_connection() {
    let (broker, mqtt) = served(|_| {}).await;
    let (mut watcher, _) = TestClient::connect(&mqtt, "watcher").await;
    assert_eq!(watcher.subscribe("watch/#").await, SubackReasonCode::GrantedQos0);
    // Not a CONNECT at all.
    let mut garbage = TestClient::open(&mqtt).await;
    garbage.write_raw(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).await;
    assert_eq!(garbage.closed_with().await, None);
    // A connected client that then sends a reserved packet type.
    let mut rude = TestClient::open(&mqtt).await;
    rude.write_raw(&raw_connect("rude")).await;
    assert!(matches!(rude.next().await, Some(GenericPacket::V5_0Connack(_))));
    rude.write_raw(&[0xf0, 0x00]).await;
    let reason = rude.closed_with().await;
    assert!(reason.is_none_or(|code| code as u8 >= 0x80), "{reason:?}");
    others_still_served(&mqtt, &mut watcher).await;
    stop(broker, mqtt).await;
}

#[tokio::test]
async fn a_topic_name_with_a_wildcard_is_refused() {
    let (broker, mqtt) = served(|_| {}).await;
    let (mut watcher, _) = TestClient::connect(&mqtt, "watcher").await;
    watcher.subscribe("watch/#").await;
    let mut bad = TestClient::open(&mqtt).await;
    bad.write_raw(&raw_connect("bad")).await;
    assert!(matches!(bad.next().await, Some(GenericPacket::V5_0Connack(_))));
    // PUBLISH QoS 0, topic "a/+", no properties, payload "x".
    bad.write_raw(&[0x30, 0x07, 0x00, 0x03, b'a', b'/', b'+', 0x00, b'x']).await;
    let reason = bad.closed_with().await;
    assert!(
        matches!(reason, Some(DisconnectReasonCode::TopicNameInvalid | DisconnectReasonCode::ProtocolError)),
        "{reason:?}"
    );
    others_still_served(&mqtt, &mut watcher).await;
    stop(broker, mqtt).await;
}

#[tokio::test]
async fn a_packet_over_the_limit_gets_0x95() {
    let (broker, mqtt) = served(|config| config.max_packet_bytes = 1_024).await;
    let (mut watcher, _) = TestClient::connect(&mqtt, "watcher").await;
    watcher.subscribe("watch/#").await;
    let (mut big, code) = TestClient::connect(&mqtt, "big").await;
    assert_eq!(code, Some(ConnectReasonCode::Success));
    // Written raw: the client codec knows the limit and would refuse.
    let mut packet = vec![0x30, 0xcc, 0x0f, 0x00, 0x01, b'a', 0x00];
    packet.resize(3 + 0x7cc, b'x');
    big.write_raw(&packet).await;
    assert_eq!(big.closed_with().await, Some(DisconnectReasonCode::PacketTooLarge));
    others_still_served(&mqtt, &mut watcher).await;
    stop(broker, mqtt).await;
}

#[tokio::test]
async fn connections_over_the_limit_get_server_busy() {
    let (broker, mqtt) = served(|config| config.max_connections = 1).await;
    let (_first, code) = TestClient::connect(&mqtt, "first").await;
    assert_eq!(code, Some(ConnectReasonCode::Success));
    let (mut second, code) = TestClient::connect(&mqtt, "second").await;
    assert_eq!(code, Some(ConnectReasonCode::ServerBusy));
    assert_eq!(second.closed_with().await, None);
    stop(broker, mqtt).await;
}

#[tokio::test]
async fn a_silent_connection_is_closed_after_the_connect_timeout() {
    let (broker, mqtt) = served(|config| config.connect_timeout_ms = 50).await;
    let mut silent = TestClient::open(&mqtt).await;
    assert_eq!(silent.closed_with().await, None);
    stop(broker, mqtt).await;
}

#[tokio::test]
async fn subscriptions_over_the_limit_get_quota_exceeded() {
    let (broker, mqtt) = served(|config| config.max_subscriptions = 1).await;
    let (mut client, _) = TestClient::connect(&mqtt, "greedy").await;
    assert_eq!(client.subscribe("a/#").await, SubackReasonCode::GrantedQos0);
    assert_eq!(client.subscribe("a/#").await, SubackReasonCode::GrantedQos0, "a replacement is not a new one");
    assert_eq!(client.subscribe("b/#").await, SubackReasonCode::QuotaExceeded);
    assert_eq!(client.subscribe("a/+/#/c").await, SubackReasonCode::TopicFilterInvalid);
    stop(broker, mqtt).await;
}
