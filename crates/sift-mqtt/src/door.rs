//! The MQTT front-end's door writer: QoS 0 deliveries of a session that
//! ends with its connection (session expiry 0), written as PUBLISH packets
//! by the broker's writer task of the session as it drains the outbox
//! (`sift_broker::door_writer`), and handed to the connection a batch at a
//! time.
//!
//! Every other delivery takes the session's usual path (the subscription's
//! forwarder, the session's buffer, the connection's codec): QoS 1 and 2
//! need the connection's packet ids and in-flight window, and a session
//! that outlives its connection must buffer what arrives while it has
//! none. A session that another connection takes over stops using the
//! door (it is detached at the first connection's end and never attached
//! again), so that what its buffer holds is never overtaken.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use bytes::{BufMut, BytesMut};
use sift_broker::door_writer::{BatchPool, DoorBatch, DoorDelivery, DoorWriter};
use tokio::sync::mpsc;

use crate::codec::{PublishProperties, Version};
use crate::message::{publish_properties, published_retained};
use crate::server::MqttCounters;
use crate::subscriptions::Route;
use crate::topic::topic_to_mqtt;

/// The connection a door writes to.
#[derive(Debug, Clone)]
pub(crate) struct Attached {
    /// Where batches go: the connection's loop writes them.
    pub out: mpsc::Sender<DoorBatch>,
    /// The protocol version of the connection.
    pub version: Version,
    /// The client's Maximum Packet Size (MQTT 5), else unlimited.
    pub max_packet_bytes: u32,
}

/// The door writer of one MQTT session.
pub(crate) struct MqttDoor {
    /// QoS 0 subscriptions, by the id the session's broker client gave them.
    served: RwLock<HashMap<u32, Arc<Route>>>,
    /// The connection, while one is attached.
    attached: RwLock<Option<Attached>>,
    /// The session's native client name, for MQTT 5 No Local.
    native_name: Arc<str>,
    counters: Arc<MqttCounters>,
    /// Batches written and not yet sent (`mqtt.delivery_batches`).
    batches: Arc<BatchPool>,
}

impl MqttDoor {
    pub(crate) fn new(native_name: Arc<str>, counters: Arc<MqttCounters>, batches: usize) -> MqttDoor {
        MqttDoor {
            served: RwLock::new(HashMap::new()),
            attached: RwLock::new(None),
            native_name,
            counters,
            batches: BatchPool::new(batches),
        }
    }

    /// Writes the deliveries of broker subscription `sub_id` by `route`.
    pub(crate) fn register(&self, sub_id: u32, route: Arc<Route>) {
        self.served.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(sub_id, route);
    }

    /// Stops writing `sub_id`'s deliveries.
    pub(crate) fn unregister(&self, sub_id: u32) {
        self.served.write().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&sub_id);
    }

    /// Writes to `connection` from now on.
    pub(crate) fn attach(&self, connection: Attached) {
        *self.attached.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(connection);
    }

    /// Stops writing: deliveries take the session's usual path again.
    pub(crate) fn detach(&self) {
        *self.attached.write().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    fn connection(&self) -> Option<Attached> {
        self.attached.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl DoorWriter for MqttDoor {
    fn encode(&self, delivery: &DoorDelivery<'_>, out: &mut BytesMut) -> bool {
        let served = self.served.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(route) = served.get(&delivery.sub_id) else { return false };
        let attached = self.attached.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(connection) = attached.as_ref() else { return false };
        let message = delivery.message;
        let asked = &route.description;
        // Skipped as the session's own path skips them: the client's own
        // messages under No Local, `$` topics under a wildcard filter.
        if asked.no_local && message.publisher.as_ref() == self.native_name.as_ref() {
            return true;
        }
        let topic = topic_to_mqtt(message.topic.as_str());
        if route.skip_dollar_topics && topic.starts_with('$') {
            return true;
        }
        let retain = asked.retain_as_published && published_retained(message);
        let mut properties = match connection.version {
            Version::V5 => publish_properties(message, sift_core::system_now_ns()),
            Version::V3 => PublishProperties::default(),
        };
        properties.subscription_ids.extend(asked.subscription_id);
        let packet = Qos0Publish { topic: &topic, payload: &message.payload, retain, properties: &properties };
        match packet.encode(connection.version, connection.max_packet_bytes, out) {
            Ok(()) => MqttCounters::bump(&self.counters.messages_delivered),
            Err(why) => {
                MqttCounters::bump(&self.counters.messages_oversized);
                tracing::debug!(topic = %topic, "mqtt delivery not written: {why}");
            }
        }
        true
    }

    fn send(&self, batch: DoorBatch) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async move {
            // A connection that went away takes its QoS 0 deliveries with
            // it (the batch, dropped, gives its room back).
            if let Some(connection) = self.connection() {
                let _ = connection.out.send(batch).await;
            }
            true
        })
    }

    fn pool(&self) -> &Arc<BatchPool> {
        &self.batches
    }
}

/// Bytes of a PUBLISH of `payload_bytes` on `topic` with `properties` at
/// `qos`, as sent: for the client's Maximum Packet Size, which a server
/// must not exceed (MQTT 5 §3.1.2.25: the packet is discarded instead).
pub(crate) fn publish_packet_bytes(
    version: Version,
    topic: &str,
    payload_bytes: usize,
    properties: &PublishProperties,
    qos: u8,
) -> usize {
    let properties_part = match version {
        Version::V5 => {
            let mut encoded = BytesMut::new();
            // A property too long to encode fails the send anyway.
            let _ = put_properties(properties, &mut encoded);
            variable_length(encoded.len()) + encoded.len()
        }
        Version::V3 => 0,
    };
    let packet_id = if qos > 0 { 2 } else { 0 };
    let remaining = 2 + topic.len() + packet_id + properties_part + payload_bytes;
    1 + variable_length(remaining) + remaining
}

/// A QoS 0 PUBLISH as the door writes it (MQTT 3.1.1 §3.3, 5.0 §3.3).
struct Qos0Publish<'a> {
    topic: &'a str,
    payload: &'a [u8],
    retain: bool,
    properties: &'a PublishProperties,
}

/// PUBLISH, QoS 0, without DUP: the retain flag is bit 0.
const PUBLISH_FIRST_BYTE: u8 = 0x30;
/// Largest string or binary field.
const FIELD_BYTES_MAX: usize = u16::MAX as usize;
/// Largest Remaining Length a packet can state.
const REMAINING_LENGTH_MAX: usize = 268_435_455;

impl Qos0Publish<'_> {
    /// Appends the packet to `out`, or leaves `out` as it was and says why
    /// it cannot be sent: a field too long for the protocol, or a packet
    /// larger than the client takes (MQTT 5 §3.1.2.25: such a packet is
    /// discarded).
    fn encode(&self, version: Version, max_packet_bytes: u32, out: &mut BytesMut) -> Result<(), &'static str> {
        let mut properties = BytesMut::new();
        if version == Version::V5 {
            put_properties(self.properties, &mut properties)?;
        }
        if self.topic.len() > FIELD_BYTES_MAX {
            return Err("the topic is longer than 65 535 bytes");
        }
        let properties_part = match version {
            Version::V5 => variable_length(properties.len()) + properties.len(),
            Version::V3 => 0,
        };
        let remaining = 2 + self.topic.len() + properties_part + self.payload.len();
        if remaining > REMAINING_LENGTH_MAX {
            return Err("the packet is larger than MQTT can carry");
        }
        let packet_bytes = 1 + variable_length(remaining) + remaining;
        if packet_bytes > max_packet_bytes as usize {
            return Err("the packet is larger than the client's Maximum Packet Size");
        }
        out.reserve(packet_bytes);
        out.put_u8(PUBLISH_FIRST_BYTE | u8::from(self.retain));
        put_variable(out, remaining);
        out.put_u16(self.topic.len() as u16);
        out.put_slice(self.topic.as_bytes());
        if version == Version::V5 {
            put_variable(out, properties.len());
            out.put_slice(&properties);
        }
        out.put_slice(self.payload);
        Ok(())
    }
}

/// MQTT 5 PUBLISH properties (§3.3.2.3), in property-identifier order.
fn put_properties(properties: &PublishProperties, out: &mut BytesMut) -> Result<(), &'static str> {
    if properties.payload_utf8 {
        out.put_slice(&[0x01, 1]);
    }
    if let Some(expiry_s) = properties.expiry_s {
        out.put_u8(0x02);
        out.put_u32(expiry_s);
    }
    if let Some(content_type) = &properties.content_type {
        out.put_u8(0x03);
        put_field(out, content_type.as_bytes())?;
    }
    if let Some(response_topic) = &properties.response_topic {
        out.put_u8(0x08);
        put_field(out, response_topic.as_bytes())?;
    }
    if let Some(correlation_data) = &properties.correlation_data {
        out.put_u8(0x09);
        put_field(out, correlation_data)?;
    }
    for subscription_id in &properties.subscription_ids {
        out.put_u8(0x0B);
        put_variable(out, *subscription_id as usize);
    }
    for (name, value) in &properties.user {
        out.put_u8(0x26);
        put_field(out, name.as_bytes())?;
        put_field(out, value.as_bytes())?;
    }
    Ok(())
}

/// A string or binary field: its length in two bytes, then the bytes.
fn put_field(out: &mut BytesMut, field: &[u8]) -> Result<(), &'static str> {
    if field.len() > FIELD_BYTES_MAX {
        return Err("a property is longer than 65 535 bytes");
    }
    out.put_u16(field.len() as u16);
    out.put_slice(field);
    Ok(())
}

/// Bytes of `value` as a Variable Byte Integer.
fn variable_length(value: usize) -> usize {
    match value {
        0..=127 => 1,
        128..=16_383 => 2,
        16_384..=2_097_151 => 3,
        _ => 4,
    }
}

/// Appends `value` as a Variable Byte Integer (§1.5.5).
fn put_variable(out: &mut BytesMut, mut value: usize) {
    debug_assert!(value <= REMAINING_LENGTH_MAX, "a variable byte integer holds at most 268 435 455");
    loop {
        let mut byte = (value % 128) as u8;
        value /= 128;
        if value > 0 {
            byte |= 0x80;
        }
        out.put_u8(byte);
        if value == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v3_publish_is_laid_out_as_the_specification_says() {
        let properties = PublishProperties::default();
        let packet = Qos0Publish { topic: "a/b", payload: b"hello", retain: true, properties: &properties };
        let mut out = BytesMut::new();
        packet.encode(Version::V3, u32::MAX, &mut out).expect("fits");
        let expected: &[u8] = &[0x31, 10, 0, 3, b'a', b'/', b'b', b'h', b'e', b'l', b'l', b'o'];
        assert_eq!(&out[..], expected);
    }

    #[test]
    fn a_v5_publish_carries_its_properties() {
        let properties = PublishProperties {
            expiry_s: Some(30),
            payload_utf8: true,
            content_type: Some("t".into()),
            user: vec![("k".into(), "v".into())],
            subscription_ids: vec![200],
            ..PublishProperties::default()
        };
        let packet = Qos0Publish { topic: "q", payload: b"x", retain: false, properties: &properties };
        let mut out = BytesMut::new();
        packet.encode(Version::V5, u32::MAX, &mut out).expect("fits");
        let property_block: &[u8] =
            &[0x01, 1, 0x02, 0, 0, 0, 30, 0x03, 0, 1, b't', 0x0B, 0xC8, 0x01, 0x26, 0, 1, b'k', 0, 1, b'v'];
        let mut expected = vec![0x30, (3 + 1 + property_block.len() + 1) as u8, 0, 1, b'q'];
        expected.push(property_block.len() as u8);
        expected.extend_from_slice(property_block);
        expected.push(b'x');
        assert_eq!(&out[..], &expected[..]);
    }

    #[test]
    fn a_packet_over_the_clients_maximum_is_not_written() {
        let properties = PublishProperties::default();
        let packet = Qos0Publish { topic: "t", payload: &[7u8; 100], retain: false, properties: &properties };
        let mut out = BytesMut::from(&b"before"[..]);
        assert!(packet.encode(Version::V5, 50, &mut out).is_err());
        assert_eq!(&out[..], b"before", "nothing written");
    }

    #[test]
    fn variable_byte_integers_take_one_to_four_bytes() {
        for (value, encoded) in [
            (0usize, vec![0x00]),
            (127, vec![0x7F]),
            (128, vec![0x80, 0x01]),
            (16_383, vec![0xFF, 0x7F]),
            (16_384, vec![0x80, 0x80, 0x01]),
            (268_435_455, vec![0xFF, 0xFF, 0xFF, 0x7F]),
        ] {
            let mut out = BytesMut::new();
            put_variable(&mut out, value);
            assert_eq!((&out[..], variable_length(value)), (&encoded[..], encoded.len()), "{value}");
        }
    }
}
