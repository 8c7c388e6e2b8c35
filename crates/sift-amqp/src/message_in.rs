//! An AMQP message from a producer, as the Sift message it is published as
//! (the JMS mapping of `docs/PROTOCOLS.md`, "AMQP 1.0").
//!
//! - The body goes in the payload: a string `amqp-value` (TextMessage) as
//!   UTF-8, `data` sections (BytesMessage, ObjectMessage) as their bytes,
//!   and any other `amqp-value` or `amqp-sequence` (MapMessage,
//!   StreamMessage) in its AMQP encoding, so that an AMQP consumer gets the
//!   same typed value back. The JMS kind is kept in `sift.jms.type`.
//! - `header.durable` makes the message persistent (stored before the
//!   producer's disposition); otherwise it is reliable. Priority and expiry
//!   carry over.
//! - The JMS header fields become the properties a selector and every door
//!   read them by (`JMSMessageID`, `JMSCorrelationID`, `JMSType`,
//!   `JMSReplyTo`, `JMSXGroupID`, `JMSXGroupSeq`, `JMSXUserID`,
//!   `content-type`), and the application properties become properties
//!   typed as numbers, booleans or strings.

use bytes::Bytes;
use fe2o3_amqp::types::messaging::{Body, Message as AmqpMessage, MessageId, Properties};
use fe2o3_amqp::types::primitives::{SimpleValue, Value as AmqpValue};
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};

use crate::jms::{self, BodyType, NodeType};

/// Why a producer's message cannot be published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InboundError {
    /// The body could not be encoded again (it held a value the AMQP
    /// encoding refuses).
    #[error("the message body cannot be encoded: {0}")]
    Body(String),
    /// An application property has a type JMS does not allow.
    #[error("application property {name:?}: {problem}")]
    Property {
        /// The property's name.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// The Sift message, on `topic`, of an AMQP message.
pub fn message_of(amqp: AmqpMessage<Body<AmqpValue>>, topic: TopicName) -> Result<Message, InboundError> {
    let (payload, body_type) = payload_of(amqp.body)?;
    let mut message = Message::new(topic, payload);
    message.delivery_mode = DeliveryMode::Reliable;
    let annotated_type = amqp
        .message_annotations
        .as_ref()
        .and_then(|annotations| annotation_byte(&annotations.0, "x-opt-jms-msg-type").and_then(BodyType::of_code));
    let body_type = annotated_type.unwrap_or(body_type);
    message.properties.push((jms::BODY_TYPE.to_string(), Value::Str(body_type.name().into())));
    let reply_to_type = amqp
        .message_annotations
        .as_ref()
        .and_then(|annotations| annotation_byte(&annotations.0, "x-opt-jms-reply-to").and_then(NodeType::of_code));
    let delivery_time_ms = amqp.message_annotations.as_ref().and_then(|annotations| delivery_time_ms(&annotations.0));
    if let Some(time_ms) = delivery_time_ms {
        message.properties.push((jms::DELIVERY_TIME.to_string(), Value::Int(time_ms)));
    }
    if let Some(header) = &amqp.header {
        if header.durable {
            message.delivery_mode = DeliveryMode::Persistent;
        }
        // JMS priorities are 0-9; AMQP allows up to 255.
        message.priority = Priority::new(header.priority.0.min(9)).unwrap_or_default();
        if let Some(ttl_ms) = header.ttl {
            message.expiry_ns = sift_client::system_now_ns().saturating_add(u64::from(ttl_ms) * 1_000_000);
        }
    }
    if let Some(properties) = amqp.properties {
        put_amqp_properties(&mut message, properties, reply_to_type);
    }
    if let Some(application) = amqp.application_properties {
        put_application_properties(&mut message, application.0)?;
    }
    Ok(message)
}

/// The payload and the JMS kind a body reads as without annotations.
fn payload_of(body: Body<AmqpValue>) -> Result<(Bytes, BodyType), InboundError> {
    Ok(match body {
        Body::Empty => (Bytes::new(), BodyType::Message),
        Body::Value(value) => match value.0 {
            AmqpValue::String(text) => (Bytes::from(text), BodyType::Text),
            AmqpValue::Null => (Bytes::new(), BodyType::Text),
            AmqpValue::Binary(bytes) => (Bytes::from(bytes.into_vec()), BodyType::Bytes),
            map @ AmqpValue::Map(_) => (encode(&map)?, BodyType::Map),
            list @ AmqpValue::List(_) => (encode(&list)?, BodyType::Stream),
            other => (encode(&other)?, BodyType::Object),
        },
        Body::Data(sections) => {
            let mut bytes = Vec::new();
            for section in sections.iter() {
                bytes.extend_from_slice(&section.0);
            }
            (Bytes::from(bytes), BodyType::Bytes)
        }
        Body::Sequence(sequences) => {
            let items: Vec<AmqpValue> = sequences.into_iter().flat_map(|sequence| sequence.0).collect();
            (encode(&AmqpValue::List(items))?, BodyType::Stream)
        }
    })
}

/// A value in its AMQP encoding: how a map or list body is kept.
fn encode(value: &AmqpValue) -> Result<Bytes, InboundError> {
    serde_amqp::to_vec(value).map(Bytes::from).map_err(|error| InboundError::Body(error.to_string()))
}

/// The delivery time a JMS 2.0 producer with a delivery delay sets: the
/// annotation `x-opt-delivery-time` (milliseconds since the epoch), or
/// `x-opt-delivery-delay` (milliseconds from now).
fn delivery_time_ms(annotations: &fe2o3_amqp::types::messaging::annotations::Annotations) -> Option<i64> {
    let value = |name: &str| annotations.get(&fe2o3_amqp::types::messaging::annotations::OwnedKey::Symbol(name.into()));
    let milliseconds = |value: &AmqpValue| match value {
        AmqpValue::Timestamp(timestamp) => Some(timestamp.milliseconds()),
        AmqpValue::Long(ms) => Some(*ms),
        AmqpValue::Ulong(ms) => i64::try_from(*ms).ok(),
        AmqpValue::Int(ms) => Some(i64::from(*ms)),
        AmqpValue::Uint(ms) => Some(i64::from(*ms)),
        _ => None,
    };
    if let Some(time_ms) = value("x-opt-delivery-time").and_then(milliseconds) {
        return Some(time_ms);
    }
    let delay_ms = value("x-opt-delivery-delay").and_then(milliseconds)?;
    let now_ms = i64::try_from(sift_client::system_now_ns() / 1_000_000).ok()?;
    Some(now_ms.saturating_add(delay_ms))
}

/// The byte value of the annotation `name`, if it has one.
fn annotation_byte(annotations: &fe2o3_amqp::types::messaging::annotations::Annotations, name: &str) -> Option<i8> {
    let key = fe2o3_amqp::types::messaging::annotations::OwnedKey::Symbol(name.into());
    match annotations.get(&key)? {
        AmqpValue::Byte(code) => Some(*code),
        AmqpValue::Ubyte(code) => i8::try_from(*code).ok(),
        _ => None,
    }
}

/// The JMS header fields an AMQP `properties` section carries.
fn put_amqp_properties(message: &mut Message, properties: Properties, reply_to_type: Option<NodeType>) {
    let mut put = |name: &str, value: Value| message.properties.push((name.to_string(), value));
    if let Some(id) = properties.message_id {
        put(jms::MESSAGE_ID, Value::Str(message_id_text(&id).into()));
    }
    if let Some(id) = properties.correlation_id {
        put(jms::CORRELATION_ID, Value::Str(message_id_text(&id).into()));
    }
    if let Some(subject) = properties.subject {
        put(jms::TYPE, Value::Str(subject.into()));
    }
    if let Some(reply_to) = properties.reply_to {
        put(jms::REPLY_TO, Value::Str(reply_to.into()));
        let kind = reply_to_type.unwrap_or(NodeType::Queue);
        put(jms::REPLY_TO_TYPE, Value::Str(kind.capability().into()));
    }
    if let Some(group) = properties.group_id {
        put(jms::GROUP_ID, Value::Str(group.into()));
    }
    if let Some(sequence) = properties.group_sequence.filter(|sequence| *sequence != 0) {
        put(jms::GROUP_SEQUENCE, Value::Int(i64::from(sequence)));
    }
    if let Some(user) = properties.user_id {
        put(jms::USER_ID, Value::Str(String::from_utf8_lossy(&user).into()));
    }
    if let Some(content_type) = properties.content_type {
        put(jms::CONTENT_TYPE, Value::Str(content_type.0.into()));
    }
    if let Some(expiry) = properties.absolute_expiry_time {
        if let Ok(expiry_ms) = u64::try_from(expiry.milliseconds()) {
            message.expiry_ns = expiry_ms.saturating_mul(1_000_000);
        }
    }
}

/// A message id as JMS shows it: a string as it is, any other kind with
/// the prefix Qpid JMS gives it (`ID:AMQP_ULONG:42`), so that a reply's
/// correlation id compares equal to the request's id.
pub fn message_id_text(id: &MessageId) -> String {
    match id {
        MessageId::String(text) => text.clone(),
        MessageId::Ulong(number) => format!("ID:AMQP_ULONG:{number}"),
        MessageId::Uuid(uuid) => format!("ID:AMQP_UUID:{}", uuid_text(uuid.as_inner())),
        MessageId::Binary(bytes) => {
            let hex: String = bytes.iter().map(|byte| format!("{byte:02X}")).collect();
            format!("ID:AMQP_BINARY:{hex}")
        }
    }
}

fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// Application properties as typed properties; the AMQP types a Sift
/// value does not read back as are listed in `sift.jms.types`.
fn put_application_properties(
    message: &mut Message,
    properties: fe2o3_amqp::types::primitives::OrderedMap<String, SimpleValue>,
) -> Result<(), InboundError> {
    let mut narrow_types = Vec::new();
    for (name, value) in properties.into_iter() {
        let refused = |problem: &str| InboundError::Property { name: name.clone(), problem: problem.to_string() };
        let (value, amqp_type) = match value {
            SimpleValue::Null => continue,
            SimpleValue::Bool(flag) => (Value::Bool(flag), None),
            SimpleValue::Byte(number) => (Value::Int(i64::from(number)), Some("byte")),
            SimpleValue::Short(number) => (Value::Int(i64::from(number)), Some("short")),
            SimpleValue::Int(number) => (Value::Int(i64::from(number)), Some("int")),
            SimpleValue::Long(number) => (Value::Int(number), None),
            SimpleValue::Ubyte(number) => (Value::Int(i64::from(number)), Some("short")),
            SimpleValue::Ushort(number) => (Value::Int(i64::from(number)), Some("int")),
            SimpleValue::Uint(number) => (Value::Int(i64::from(number)), None),
            SimpleValue::Ulong(number) => {
                (Value::Int(i64::try_from(number).map_err(|_| refused("does not fit a long"))?), None)
            }
            SimpleValue::Float(number) => (Value::Float(f64::from(number.into_inner())), Some("float")),
            SimpleValue::Double(number) => (Value::Float(number.into_inner()), None),
            SimpleValue::Char(letter) => (Value::Str(letter.to_string().into()), Some("char")),
            SimpleValue::String(text) => (Value::Str(text.into()), None),
            SimpleValue::Symbol(symbol) => (Value::Str(symbol.0.into()), None),
            SimpleValue::Timestamp(time) => (Value::Int(time.milliseconds()), None),
            _ => return Err(refused("JMS properties are booleans, numbers and strings")),
        };
        if let Some(amqp_type) = amqp_type {
            narrow_types.push(format!("{name}={amqp_type}"));
        }
        message.properties.push((name, value));
    }
    if !narrow_types.is_empty() {
        message.properties.push((jms::PROPERTY_TYPES.to_string(), Value::Str(narrow_types.join(",").into())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use fe2o3_amqp::types::messaging::{ApplicationProperties, Header, MessageAnnotations};

    use super::*;

    fn topic() -> TopicName {
        TopicName::new("orders").expect("valid")
    }

    #[test]
    fn a_text_message_keeps_its_fields_and_typed_properties() {
        let amqp = AmqpMessage::builder()
            .header(Header { durable: true, priority: 7.into(), ..Header::default() })
            .message_annotations(MessageAnnotations::builder().insert("x-opt-jms-msg-type", AmqpValue::Byte(5)).build())
            .properties(
                Properties::builder()
                    .message_id(MessageId::String("ID:abc-1".into()))
                    .correlation_id(MessageId::Ulong(42))
                    .subject("order")
                    .reply_to("replies")
                    .group_id(Some("g1".to_string()))
                    .build(),
            )
            .application_properties(
                ApplicationProperties::builder()
                    .insert("qty", SimpleValue::Int(3))
                    .insert("price", SimpleValue::Double(9.5.into()))
                    .insert("rush", SimpleValue::Bool(true))
                    .build(),
            )
            .body(Body::Value(fe2o3_amqp::types::messaging::AmqpValue(AmqpValue::String("hello".into()))))
            .build();
        let message = message_of(amqp, topic()).expect("maps");
        assert_eq!(&message.payload[..], b"hello");
        assert_eq!((message.delivery_mode, message.priority.level()), (DeliveryMode::Persistent, 7));
        let property = |name: &str| message.property(name).cloned();
        assert_eq!(property(jms::BODY_TYPE), Some(Value::Str("text".into())));
        assert_eq!(property(jms::MESSAGE_ID), Some(Value::Str("ID:abc-1".into())));
        assert_eq!(property(jms::CORRELATION_ID), Some(Value::Str("ID:AMQP_ULONG:42".into())));
        assert_eq!(property(jms::TYPE), Some(Value::Str("order".into())));
        assert_eq!(property(jms::REPLY_TO_TYPE), Some(Value::Str("queue".into())));
        assert_eq!(property("qty"), Some(Value::Int(3)));
        assert_eq!(property("price"), Some(Value::Float(9.5)));
        assert_eq!(property(jms::PROPERTY_TYPES), Some(Value::Str("qty=int".into())));
    }

    #[test]
    fn bodies_without_annotations_read_as_their_jms_kind() {
        let cases: Vec<(Body<AmqpValue>, BodyType)> = vec![
            (Body::Empty, BodyType::Message),
            (Body::Data(vec![fe2o3_amqp::types::messaging::Data(vec![1u8, 2].into())].into()), BodyType::Bytes),
            (Body::Value(fe2o3_amqp::types::messaging::AmqpValue(AmqpValue::Map(Default::default()))), BodyType::Map),
            (Body::Value(fe2o3_amqp::types::messaging::AmqpValue(AmqpValue::List(vec![]))), BodyType::Stream),
        ];
        for (body, kind) in cases {
            let amqp = AmqpMessage::builder().body(body).build();
            let message = message_of(amqp, topic()).expect("maps");
            assert_eq!(message.property(jms::BODY_TYPE), Some(&Value::Str(kind.name().into())));
            assert_eq!(message.delivery_mode, DeliveryMode::Reliable, "not durable");
        }
    }
}
