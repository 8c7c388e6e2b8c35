//! Messages as JSON: the one representation that `sift sub --json`, `sift
//! query --format json`, the HTTP front-end's deliveries (server-sent
//! events, WebSocket, callbacks) and its publish envelope share.
//!
//! A delivered message is an object with `topic`, `properties` (JSON
//! booleans, integers, floats and strings), `metadata` (the XML text or
//! null), `payload` with `payload_encoding` (`utf8` when the payload is
//! UTF-8 text, else `base64`), and the broker's stamps (`timestamp_ns`,
//! `priority`, `delivery_mode`, `id`, `publisher`, `sequence`).

use base64::Engine;
use sift_core::{Message, Value};

/// A property value as JSON.
pub fn value_to_json(value: &Value) -> serde_json::Value {
    match value {
        Value::Bool(flag) => serde_json::Value::Bool(*flag),
        Value::Int(int) => serde_json::Value::from(*int),
        Value::Float(float) => serde_json::Value::from(*float),
        Value::Str(text) => serde_json::Value::String(text.to_string()),
    }
}

/// A property value from JSON: booleans, integers that fit in 64 bits,
/// other numbers as floats, strings. Null, arrays and objects have no
/// property type; the error says which JSON type was given.
pub fn value_from_json(value: &serde_json::Value) -> Result<Value, &'static str> {
    match value {
        serde_json::Value::Bool(flag) => Ok(Value::Bool(*flag)),
        serde_json::Value::Number(number) => match number.as_i64() {
            Some(int) => Ok(Value::Int(int)),
            None => number.as_f64().map(Value::Float).ok_or("a number out of range"),
        },
        serde_json::Value::String(text) => Ok(Value::Str(text.as_str().into())),
        serde_json::Value::Null => Err("null"),
        serde_json::Value::Array(_) => Err("an array"),
        serde_json::Value::Object(_) => Err("an object"),
    }
}

/// Bytes as text when they are UTF-8 (`utf8`), else as base64 (`base64`).
pub fn payload_text(bytes: &[u8]) -> (String, &'static str) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_string(), "utf8"),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(bytes), "base64"),
    }
}

/// A message as a JSON object, with `extra` fields added after its own.
pub fn message_json(message: &Message, extra: &[(&str, serde_json::Value)]) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> =
        message.properties.iter().map(|(name, value)| (name.clone(), value_to_json(value))).collect();
    let (payload, payload_encoding) = payload_text(&message.payload);
    let metadata = message.metadata.as_ref().map(|bytes| payload_text(bytes).0);
    let mut object = serde_json::json!({
        "topic": message.topic.as_str(),
        "properties": properties,
        "metadata": metadata,
        "payload": payload,
        "payload_encoding": payload_encoding,
        "timestamp_ns": message.timestamp_ns,
        "priority": message.priority.level(),
        "delivery_mode": message.delivery_mode.name(),
        "id": message.id,
        "publisher": &*message.publisher,
        "sequence": message.sequence,
    });
    if let serde_json::Value::Object(fields) = &mut object {
        for (name, value) in extra {
            fields.insert((*name).to_string(), value.clone());
        }
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_values_round_trip_and_unsupported_types_are_named() {
        for value in [Value::Bool(true), Value::Int(-7), Value::Float(2.5), Value::Str("IBM".into())] {
            assert_eq!(value_from_json(&value_to_json(&value)), Ok(value));
        }
        assert_eq!(value_from_json(&serde_json::json!(u64::MAX)), Ok(Value::Float(u64::MAX as f64)));
        assert_eq!(value_from_json(&serde_json::Value::Null), Err("null"));
        assert_eq!(value_from_json(&serde_json::json!([1])), Err("an array"));
    }

    #[test]
    fn payloads_are_text_when_utf8_and_base64_otherwise() {
        assert_eq!(payload_text(b"hello"), ("hello".to_string(), "utf8"));
        assert_eq!(payload_text(&[0xff, 0x00]), ("/wA=".to_string(), "base64"));
    }
}
