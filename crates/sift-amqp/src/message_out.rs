//! A delivery to an AMQP consumer: the Sift message as the AMQP message a
//! JMS client reads (the reverse of [`crate::message_in`]).
//!
//! A message that came from another door has no `sift.jms.type`: it goes
//! out as a TextMessage when its payload is UTF-8 text (what STOMP, MQTT
//! and HTTP clients mostly send), else as a BytesMessage. Its id is
//! `ID:` and the broker's id, as STOMP's `message-id` and a selector's
//! `JMSMessageID` read it.

use fe2o3_amqp::types::messaging::{
    AmqpValue as AmqpValueSection, ApplicationProperties, Body, Data, Header, Message as AmqpMessage,
    MessageAnnotations, MessageId, Properties,
};
use fe2o3_amqp::types::primitives::{Binary, SimpleValue, Symbol, Timestamp, Value as AmqpValue};
use sift_core::{DeliveryMode, Message, Value};

use crate::jms::{self, BodyType, NodeType};

/// Properties the AMQP sections carry: not application properties.
const MAPPED: [&str; 12] = [
    jms::BODY_TYPE,
    jms::DELIVERY_TIME,
    jms::REPLY_TO_TYPE,
    jms::PROPERTY_TYPES,
    jms::MESSAGE_ID,
    jms::CORRELATION_ID,
    jms::TYPE,
    jms::REPLY_TO,
    jms::GROUP_ID,
    jms::GROUP_SEQUENCE,
    jms::USER_ID,
    jms::CONTENT_TYPE,
];

/// The AMQP message of `message`, delivered `redeliveries` times before,
/// to a consumer of a node of kind `node`.
pub fn amqp_message_of(message: &Message, redeliveries: u32, node: NodeType) -> AmqpMessage<Body<AmqpValue>> {
    let text = |name: &str| match message.property(name) {
        Some(Value::Str(text)) => Some(text.to_string()),
        _ => None,
    };
    let declared = text(jms::BODY_TYPE).and_then(|name| BodyType::of_name(&name));
    let (body, body_type) = body_of(message, declared);
    let mut annotations = MessageAnnotations::builder()
        .insert("x-opt-jms-msg-type", AmqpValue::Byte(body_type.code()))
        .insert("x-opt-jms-dest", AmqpValue::Byte(node.code()));
    if text(jms::REPLY_TO).is_some() {
        let kind = text(jms::REPLY_TO_TYPE).and_then(|name| NodeType::of_capability(&name)).unwrap_or(NodeType::Queue);
        annotations = annotations.insert("x-opt-jms-reply-to", AmqpValue::Byte(kind.code()));
    }
    if let Some(Value::Int(time_ms)) = message.property(jms::DELIVERY_TIME) {
        annotations =
            annotations.insert("x-opt-delivery-time", AmqpValue::Timestamp(Timestamp::from_milliseconds(*time_ms)));
    }
    let header = Header {
        durable: message.delivery_mode == DeliveryMode::Persistent,
        priority: message.priority.level().into(),
        ttl: None,
        first_acquirer: redeliveries == 0,
        delivery_count: redeliveries,
    };
    AmqpMessage::builder()
        .header(header)
        .message_annotations(annotations.build())
        .properties(properties_of(message, &text, body_type))
        .application_properties(application_properties_of(message))
        .body(body)
        .build()
}

/// The body section, and the JMS kind it is.
fn body_of(message: &Message, declared: Option<BodyType>) -> (Body<AmqpValue>, BodyType) {
    let payload = &message.payload;
    let data = || Body::Data(vec![Data(Binary::from(payload.to_vec()))].into());
    let value = |value: AmqpValue| Body::Value(AmqpValueSection(value));
    let kind = declared.unwrap_or_else(|| match std::str::from_utf8(payload) {
        Ok(_) => BodyType::Text,
        Err(_) => BodyType::Bytes,
    });
    match kind {
        BodyType::Message => (Body::Empty, kind),
        BodyType::Text => (value(AmqpValue::String(String::from_utf8_lossy(payload).into_owned())), kind),
        BodyType::Bytes | BodyType::Object => (data(), kind),
        BodyType::Map | BodyType::Stream => match serde_amqp::from_slice::<AmqpValue>(payload) {
            Ok(decoded) => (value(decoded), kind),
            // Not an AMQP value after all (another door wrote the kind): bytes.
            Err(_) => (data(), BodyType::Bytes),
        },
    }
}

/// The `properties` section: the JMS header fields.
fn properties_of(message: &Message, text: &dyn Fn(&str) -> Option<String>, body_type: BodyType) -> Properties {
    let id = text(jms::MESSAGE_ID).unwrap_or_else(|| format!("ID:{}", message.id));
    let group_sequence = match message.property(jms::GROUP_SEQUENCE) {
        Some(Value::Int(number)) => u32::try_from(*number).ok(),
        _ => None,
    };
    let content_type = text(jms::CONTENT_TYPE).or_else(|| match body_type {
        BodyType::Bytes => Some("application/octet-stream".to_string()),
        BodyType::Object => Some("application/x-java-serialized-object".to_string()),
        _ => None,
    });
    let milliseconds = |ns: u64| Timestamp::from_milliseconds(i64::try_from(ns / 1_000_000).unwrap_or(i64::MAX));
    Properties {
        message_id: Some(MessageId::String(id)),
        user_id: text(jms::USER_ID).map(|user| Binary::from(user.into_bytes())),
        to: Some(message.topic.as_str().to_string()),
        subject: text(jms::TYPE),
        reply_to: text(jms::REPLY_TO),
        correlation_id: text(jms::CORRELATION_ID).map(MessageId::String),
        content_type: content_type.map(Symbol::from),
        content_encoding: None,
        absolute_expiry_time: (message.expiry_ns != 0).then(|| milliseconds(message.expiry_ns)),
        creation_time: (message.timestamp_ns != 0).then(|| milliseconds(message.timestamp_ns)),
        group_id: text(jms::GROUP_ID),
        group_sequence,
        reply_to_group_id: None,
    }
}

/// The properties no AMQP section carries, typed back as they were sent.
fn application_properties_of(message: &Message) -> ApplicationProperties {
    let narrow_types: Vec<(String, String)> = match message.property(jms::PROPERTY_TYPES) {
        Some(Value::Str(list)) => list
            .split(',')
            .filter_map(|pair| pair.split_once('='))
            .map(|(name, kind)| (name.to_string(), kind.to_string()))
            .collect(),
        _ => Vec::new(),
    };
    let narrow = |name: &str| narrow_types.iter().find(|(known, _)| known == name).map(|(_, kind)| kind.as_str());
    let mut properties = ApplicationProperties::builder();
    for (name, value) in &message.properties {
        if MAPPED.contains(&name.as_str()) || name.starts_with("sift.") {
            continue;
        }
        properties = properties.insert(name.clone(), simple_value_of(value, narrow(name)));
    }
    properties.build()
}

/// A property's AMQP value: a long, double, boolean or string, or the
/// narrower type it was sent as.
fn simple_value_of(value: &Value, narrow: Option<&str>) -> SimpleValue {
    match (value, narrow) {
        (Value::Bool(flag), _) => SimpleValue::Bool(*flag),
        (Value::Int(number), Some("byte")) => {
            i8::try_from(*number).map_or(SimpleValue::Long(*number), SimpleValue::Byte)
        }
        (Value::Int(number), Some("short")) => {
            i16::try_from(*number).map_or(SimpleValue::Long(*number), SimpleValue::Short)
        }
        (Value::Int(number), Some("int")) => {
            i32::try_from(*number).map_or(SimpleValue::Long(*number), SimpleValue::Int)
        }
        (Value::Int(number), _) => SimpleValue::Long(*number),
        (Value::Float(number), Some("float")) => SimpleValue::Float((*number as f32).into()),
        (Value::Float(number), _) => SimpleValue::Double((*number).into()),
        (Value::Str(text), Some("char")) if text.chars().count() == 1 => {
            text.chars().next().map_or(SimpleValue::String(text.to_string()), SimpleValue::Char)
        }
        (Value::Str(text), _) => SimpleValue::String(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use fe2o3_amqp::types::primitives::OrderedMap;
    use sift_core::TopicName;

    use super::*;
    use crate::message_in::message_of;

    fn topic() -> TopicName {
        TopicName::new("orders").expect("valid")
    }

    #[test]
    fn a_map_message_and_its_narrow_properties_come_back_as_they_were_sent() {
        let mut map = OrderedMap::new();
        map.insert(AmqpValue::String("qty".into()), AmqpValue::Int(3));
        let sent = AmqpMessage::builder()
            .message_annotations(MessageAnnotations::builder().insert("x-opt-jms-msg-type", AmqpValue::Byte(2)).build())
            .properties(Properties::builder().message_id(MessageId::String("ID:m-1".into())).build())
            .application_properties(
                ApplicationProperties::builder()
                    .insert("small", SimpleValue::Short(7))
                    .insert("big", SimpleValue::Long(1 << 40))
                    .insert("ratio", SimpleValue::Float(0.5.into()))
                    .build(),
            )
            .body(Body::Value(AmqpValueSection(AmqpValue::Map(map.clone()))))
            .build();
        let message = message_of(sent, topic()).expect("maps");
        let received = amqp_message_of(&message, 0, NodeType::Queue);
        assert_eq!(received.body, Body::Value(AmqpValueSection(AmqpValue::Map(map))));
        let properties = received.application_properties.expect("present").0;
        assert_eq!(properties.get("small"), Some(&SimpleValue::Short(7)));
        assert_eq!(properties.get("big"), Some(&SimpleValue::Long(1 << 40)));
        assert_eq!(properties.get("ratio"), Some(&SimpleValue::Float(0.5.into())));
        assert_eq!(properties.get(jms::PROPERTY_TYPES), None, "kept out of the application properties");
        let ids = received.properties.expect("present");
        assert_eq!(ids.message_id, Some(MessageId::String("ID:m-1".into())), "the sender's JMSMessageID");
        assert_eq!(ids.to.as_deref(), Some("orders"));
    }

    #[test]
    fn messages_from_other_doors_read_as_text_or_bytes() {
        let mut text = Message::new(topic(), Bytes::from_static(b"hello"));
        text.id = 42;
        let delivered = amqp_message_of(&text, 1, NodeType::Topic);
        assert_eq!(delivered.body, Body::Value(AmqpValueSection(AmqpValue::String("hello".into()))));
        assert_eq!(delivered.header.as_ref().map(|header| header.delivery_count), Some(1));
        let id = delivered.properties.and_then(|properties| properties.message_id);
        assert_eq!(id, Some(MessageId::String("ID:42".into())));
        let binary = Message::new(topic(), Bytes::from_static(&[0xff, 0xfe]));
        let delivered = amqp_message_of(&binary, 0, NodeType::Topic);
        assert!(matches!(delivered.body, Body::Data(_)));
    }
}
