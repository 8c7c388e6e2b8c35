//! How an MQTT PUBLISH maps onto a Sift message and back
//! (`docs/PROTOCOLS.md` states the same rules for users).
//!
//! - The topic maps as [`crate::topic`] says; the payload is carried as is.
//! - Every QoS is a reliable message (so that a full queue holds the
//!   publisher back rather than dropping, as Mosquitto drops nothing for
//!   a connected subscriber); the user property `sift-mode` names another
//!   mode (`persistent` stores it) and `sift-priority` (0-9) sets the
//!   priority.
//! - Other MQTT 5 user properties become Sift properties, typed by their
//!   form as STOMP headers are (`12.5` a float, `3` an integer, `true` a
//!   boolean, anything else a string), so that a selector `price > 10`
//!   compares numbers. Content Type, Response Topic and Correlation Data
//!   become the properties `content-type`, `response-topic` and
//!   `correlation-data`; the Message Expiry Interval the message's expiry.
//! - Three properties carry what Sift has no field for: `mqtt-qos` (0 or
//!   2 for a QoS 0 or 2 publish, so that subscribers get it at that QoS),
//!   `mqtt-retain` (true on a retained publish, for Retain As Published)
//!   and `mqtt-payload-utf8` (the Payload Format Indicator). MQTT
//!   subscribers never see them as user properties.

use base64::Engine;
use bytes::Bytes;
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};

use crate::codec::{InboundPublish, PublishProperties};
use crate::topic::topic_to_sift;

/// The user property that names the delivery mode.
const MODE_PROPERTY: &str = "sift-mode";
/// The user property that sets the priority.
const PRIORITY_PROPERTY: &str = "sift-priority";
/// The property that marks a QoS 2 publish.
const QOS_PROPERTY: &str = "mqtt-qos";
/// The property that marks a retained publish.
const RETAIN_PROPERTY: &str = "mqtt-retain";
/// The property that carries MQTT 5's Payload Format Indicator (UTF-8).
const UTF8_PROPERTY: &str = "mqtt-payload-utf8";
/// Properties that carry MQTT 5's own publish properties.
const CONTENT_TYPE: &str = "content-type";
const RESPONSE_TOPIC: &str = "response-topic";
const CORRELATION_DATA: &str = "correlation-data";
/// How correlation data that is not UTF-8 is written as a string.
const BASE64_PREFIX: &str = "base64:";

/// Why a PUBLISH cannot become a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishError {
    /// The topic name cannot be a Sift topic (or has wildcards).
    Topic(String),
    /// A reserved user property has a bad value.
    Property(String),
}

impl std::fmt::Display for PublishError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PublishError::Topic(detail) | PublishError::Property(detail) => formatter.write_str(detail),
        }
    }
}

/// The Sift message of a PUBLISH received at `now_ns`.
pub fn message_of_publish(publish: &InboundPublish, now_ns: u64) -> Result<Message, PublishError> {
    let topic = topic_to_sift(&publish.topic).map_err(PublishError::Topic)?;
    message_on_topic(publish, topic, now_ns)
}

/// [`message_of_publish`] with the Sift topic already mapped.
pub fn message_on_topic(publish: &InboundPublish, topic: TopicName, now_ns: u64) -> Result<Message, PublishError> {
    let mut message = Message::new(topic, publish.payload.clone());
    // Every QoS is a reliable message, so that a full subscriber queue
    // holds the publisher back (through its session, down to its socket)
    // instead of dropping: Mosquitto drops nothing for a connected QoS 0
    // subscriber either. `mqtt-qos` keeps the QoS for MQTT subscribers.
    message.delivery_mode = DeliveryMode::Reliable;
    let properties = &publish.properties;
    for (name, value) in &properties.user {
        match name.as_str() {
            MODE_PROPERTY => {
                message.delivery_mode = value.parse().map_err(|_| {
                    PublishError::Property(format!(
                        "user property {MODE_PROPERTY} {value:?}: expected best-effort, reliable or persistent"
                    ))
                })?
            }
            PRIORITY_PROPERTY => {
                let bad =
                    || PublishError::Property(format!("user property {PRIORITY_PROPERTY} {value:?}: expected 0 to 9"));
                let level: u8 = value.trim().parse().map_err(|_| bad())?;
                message.priority = Priority::new(level).map_err(|_| bad())?;
            }
            QOS_PROPERTY | RETAIN_PROPERTY | UTF8_PROPERTY => {}
            _ if message.properties.iter().any(|(known, _)| known == name) => {}
            _ => message.properties.push((name.clone(), Value::parse_typed(value))),
        }
    }
    let mut push = |name: &str, value: Value| message.properties.push((name.to_string(), value));
    if let Some(content_type) = &properties.content_type {
        push(CONTENT_TYPE, Value::Str(content_type.as_str().into()));
    }
    if let Some(response_topic) = &properties.response_topic {
        push(RESPONSE_TOPIC, Value::Str(response_topic.as_str().into()));
    }
    if let Some(correlation) = &properties.correlation_data {
        push(CORRELATION_DATA, Value::Str(correlation_text(correlation).into()));
    }
    if publish.qos != 1 {
        push(QOS_PROPERTY, Value::Int(i64::from(publish.qos)));
    }
    if publish.retain {
        push(RETAIN_PROPERTY, Value::Bool(true));
    }
    if properties.payload_utf8 {
        push(UTF8_PROPERTY, Value::Bool(true));
    }
    if let Some(expiry_s) = properties.expiry_s {
        message.expiry_ns = now_ns.saturating_add(u64::from(expiry_s) * 1_000_000_000);
    }
    Ok(message)
}

/// Correlation data as a property string: the text when it is UTF-8 (and
/// does not look encoded), else `base64:` and its encoding.
fn correlation_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.starts_with(BASE64_PREFIX) => text.to_string(),
        _ => format!("{BASE64_PREFIX}{}", base64::engine::general_purpose::STANDARD.encode(bytes)),
    }
}

fn correlation_bytes(text: &str) -> Bytes {
    text.strip_prefix(BASE64_PREFIX)
        .and_then(|encoded| base64::engine::general_purpose::STANDARD.decode(encoded).ok())
        .map_or_else(|| Bytes::copy_from_slice(text.as_bytes()), Bytes::from)
}

/// The highest QoS a message can be delivered at: its MQTT QoS when an
/// MQTT client published it, else 0 for best-effort and 1 for reliable
/// and persistent messages.
pub fn message_qos(message: &Message) -> u8 {
    match message.delivery_mode {
        DeliveryMode::BestEffort => 0,
        _ => match message.property(QOS_PROPERTY) {
            Some(Value::Int(0)) => 0,
            Some(Value::Int(2)) => 2,
            _ => 1,
        },
    }
}

/// Whether the message was published with the retain flag.
pub fn published_retained(message: &Message) -> bool {
    message.property(RETAIN_PROPERTY) == Some(&Value::Bool(true))
}

/// A property's value as user property text.
fn value_text(value: &Value) -> String {
    match value {
        Value::Bool(flag) => flag.to_string(),
        Value::Int(int) => int.to_string(),
        Value::Float(float) => float.to_string(),
        Value::Str(text) => text.to_string(),
    }
}

/// The MQTT 5 properties of a message delivered at `now_ns`: its
/// properties as user properties, the publish properties back in their
/// own places, and the remaining expiry interval (rounded up).
pub fn publish_properties(message: &Message, now_ns: u64) -> PublishProperties {
    let mut properties = PublishProperties::default();
    for (name, value) in &message.properties {
        match (name.as_str(), value) {
            (QOS_PROPERTY | RETAIN_PROPERTY, _) => {}
            (UTF8_PROPERTY, value) => properties.payload_utf8 = *value == Value::Bool(true),
            (CONTENT_TYPE, Value::Str(text)) => properties.content_type = Some(text.to_string()),
            (RESPONSE_TOPIC, Value::Str(text)) => properties.response_topic = Some(text.to_string()),
            (CORRELATION_DATA, Value::Str(text)) => properties.correlation_data = Some(correlation_bytes(text)),
            _ => properties.user.push((name.clone(), value_text(value))),
        }
    }
    if message.priority != Priority::default() {
        properties.user.push((PRIORITY_PROPERTY.to_string(), message.priority.level().to_string()));
    }
    if message.expiry_ns != 0 {
        let remaining_ns = message.expiry_ns.saturating_sub(now_ns);
        properties.expiry_s = Some(remaining_ns.div_ceil(1_000_000_000).min(u64::from(u32::MAX)) as u32);
    }
    properties
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(qos: u8, user: &[(&str, &str)]) -> InboundPublish {
        InboundPublish {
            topic: "sensors/kitchen".into(),
            payload: Bytes::from_static(b"21.5"),
            qos,
            retain: false,
            packet_id: (qos > 0).then_some(1),
            properties: PublishProperties {
                user: user.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect(),
                ..PublishProperties::default()
            },
        }
    }

    #[test]
    fn user_properties_become_typed_properties_and_options() {
        let message = message_of_publish(
            &publish(1, &[("price", "12.5"), ("lots", "3"), ("sym", "IBM"), ("sift-priority", "7")]),
            0,
        )
        .expect("valid");
        assert_eq!(message.topic.as_str(), "sensors.kitchen");
        assert_eq!(message.property("price"), Some(&Value::Float(12.5)));
        assert_eq!(message.property("lots"), Some(&Value::Int(3)));
        assert_eq!(message.property("sift-priority"), None, "reserved");
        assert_eq!((message.priority.level(), message.delivery_mode), (7, DeliveryMode::Reliable));
        assert_eq!(message_qos(&message), 1);
        let at_most_once = message_of_publish(&publish(0, &[]), 0).expect("valid");
        assert_eq!((message_qos(&at_most_once), at_most_once.delivery_mode), (0, DeliveryMode::Reliable));
        let exactly_once = message_of_publish(&publish(2, &[]), 0).expect("valid");
        assert_eq!(message_qos(&exactly_once), 2);
        let persistent = message_of_publish(&publish(0, &[("sift-mode", "persistent")]), 0).expect("valid");
        assert_eq!(persistent.delivery_mode, DeliveryMode::Persistent);
        assert!(message_of_publish(&publish(1, &[("sift-priority", "12")]), 0).is_err());
        assert!(message_of_publish(&publish(1, &[("sift-mode", "loud")]), 0).is_err());
    }

    #[test]
    fn publish_properties_round_trip() {
        let mut inbound = publish(2, &[("price", "12.5"), ("note", "hi")]);
        inbound.retain = true;
        inbound.properties.content_type = Some("text/plain".into());
        inbound.properties.response_topic = Some("replies/1".into());
        inbound.properties.correlation_data = Some(Bytes::from_static(&[0, 255, 7]));
        inbound.properties.expiry_s = Some(60);
        inbound.properties.payload_utf8 = true;
        let now_ns = 1_000_000_000_000;
        let message = message_of_publish(&inbound, now_ns).expect("valid");
        assert!(published_retained(&message));
        let back = publish_properties(&message, now_ns + 500_000_000);
        assert_eq!(back.content_type.as_deref(), Some("text/plain"));
        assert_eq!(back.response_topic.as_deref(), Some("replies/1"));
        assert_eq!(back.correlation_data.as_deref(), Some(&[0u8, 255, 7][..]));
        assert_eq!(back.expiry_s, Some(60), "59.5 s left rounds up");
        assert!(back.payload_utf8);
        assert_eq!(back.user, [("price".to_string(), "12.5".to_string()), ("note".to_string(), "hi".to_string())]);
    }
}
