//! Strategies shared by the codec property tests.

use bytes::Bytes;
use proptest::prelude::*;
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};

pub fn topic_strategy() -> impl Strategy<Value = TopicName> {
    prop::collection::vec("[a-z0-9_-]{1,8}", 1..5)
        .prop_map(|tokens| TopicName::new(tokens.join(".")).expect("generated topics are valid"))
}

pub fn value_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        // NaN never equals itself, so it is left out of equality checks.
        any::<f64>().prop_filter("not NaN", |float| !float.is_nan()).prop_map(Value::Float),
        ".{0,20}".prop_map(|text: String| Value::Str(text.into())),
    ]
}

pub fn message_strategy() -> impl Strategy<Value = Message> {
    (
        topic_strategy(),
        prop::collection::vec(("[a-zA-Z_][a-zA-Z0-9_]{0,10}", value_strategy()), 0..6),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
        prop::collection::vec(any::<u8>(), 0..256),
        (any::<u64>(), ".{0,12}", any::<u64>(), any::<u64>()),
        (0u8..=9, any::<u64>(), 0u8..=2, any::<u8>()),
        prop_oneof![Just(0u32), any::<u32>()],
    )
        .prop_map(|(topic, properties, metadata, payload, system, qos, time_error_ns)| {
            let (id, publisher, sequence, timestamp_ns) = system;
            let (priority, expiry_ns, mode, hop_count) = qos;
            Message {
                topic,
                properties,
                metadata: metadata.map(Bytes::from),
                payload: Bytes::from(payload),
                id,
                publisher: publisher.into(),
                sequence,
                timestamp_ns,
                time_error_ns,
                priority: Priority::new(priority).expect("0-9"),
                expiry_ns,
                delivery_mode: DeliveryMode::from_code(mode).expect("0-2"),
                hop_count,
            }
        })
}
