//! How STOMP frames map onto Sift messages and subscriptions, both ways
//! (`docs/PROTOCOLS.md` states the same rules for users).
//!
//! - Destinations: `/topic/NAME` is the topic `NAME`; `/queue/NAME` is the
//!   topic `NAME` read by the queue group `NAME`, so each message goes to
//!   one of its consumers; anything else is taken as a topic as it is.
//!   Names use Sift's `.` separators and `*` / `>` wildcards (as
//!   ActiveMQ's STOMP destinations do).
//! - A SEND's headers other than the reserved ones become properties,
//!   typed by their form as on the command line (`42` an integer, `2.5` a
//!   float, `true` a boolean, anything else a string; a value in double
//!   quotes always a string), so that a selector such as `price > 100`
//!   compares numbers.
//! - `persistent:true` stores the message (mode `persistent`); `sift-mode`
//!   names any mode (`best-effort`, `reliable`, `persistent`); the default
//!   is reliable. `priority` (0-9) and `expires` (ms since the epoch, 0
//!   never) carry over; `AMQ_SCHEDULED_DELAY` (ms, as ActiveMQ reads it)
//!   sets `JMSDeliveryTime`, before which no subscriber gets the message.

use bytes::Bytes;
use sift_client::Delivery;
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};

use crate::frame::{Command, Frame};

/// STOMP headers that carry JMS header fields (as ActiveMQ maps them),
/// and the property each is kept in: a selector reads `JMSType` and
/// `JMSCorrelationID` by those names, whichever door the message came
/// through, and `JMSXGroupID` names a message group. Their values are text
/// as sent, never typed (a group `42` is the group named "42").
const JMS_HEADERS: [(&str, &str); 3] =
    [("type", "JMSType"), ("correlation-id", "JMSCorrelationID"), ("JMSXGroupID", "JMSXGroupID")];

/// The property a SEND header is kept in, and whether its value is typed.
fn property_of_header(header: &str) -> (&str, bool) {
    match JMS_HEADERS.iter().find(|(name, _)| *name == header) {
        Some((_, property)) => (property, false),
        None => (header, true),
    }
}

/// The MESSAGE header a property is written in.
fn header_of_property(property: &str) -> &str {
    JMS_HEADERS.iter().find(|(_, name)| *name == property).map_or(property, |(header, _)| header)
}

/// SEND headers that are not message properties.
const RESERVED: [&str; 10] = [
    "AMQ_SCHEDULED_DELAY",
    "destination",
    "receipt",
    "transaction",
    "content-length",
    "persistent",
    "priority",
    "expires",
    "sift-mode",
    "ack",
];

/// A destination: its topic (filter) and, for a queue, its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The topic name or filter.
    pub topic: String,
    /// The queue group, for `/queue/...`.
    pub queue_group: Option<String>,
    /// The prefix the destination was written with: `/topic/`, `/queue/`
    /// or none.
    pub prefix: &'static str,
}

impl Destination {
    /// Parses a destination header.
    pub fn parse(text: &str) -> Result<Destination, String> {
        let (topic, prefix) = match (text.strip_prefix("/topic/"), text.strip_prefix("/queue/")) {
            (Some(topic), _) => (topic, "/topic/"),
            (_, Some(queue)) => (queue, "/queue/"),
            _ => (text, ""),
        };
        if topic.is_empty() {
            return Err(format!("destination {text:?} names no topic"));
        }
        let queue_group = (prefix == "/queue/").then(|| topic.to_string());
        Ok(Destination { topic: topic.to_string(), queue_group, prefix })
    }
}

/// The message a SEND carries.
pub fn message_of_send(frame: &Frame) -> Result<Message, String> {
    let destination = frame.get("destination").ok_or("SEND needs a destination header")?;
    let destination = Destination::parse(destination)?;
    let topic = TopicName::new(&destination.topic).map_err(|error| format!("destination: {error}"))?;
    let mut message = Message::new(topic, frame.body.clone());
    // Reliable unless asked otherwise: a full `block` queue then holds the
    // publisher back (through its session, down to its socket) instead of
    // dropping the message, which is what STOMP users of ActiveMQ expect.
    message.delivery_mode = DeliveryMode::Reliable;
    for (header, value) in &frame.headers {
        let (name, typed) = property_of_header(header);
        let seen_before = message.properties.iter().any(|(known, _)| known == name);
        if !RESERVED.contains(&header.as_str()) && !seen_before {
            let value = if typed { Value::parse_typed(value) } else { Value::Str(value.as_str().into()) };
            message.properties.push((name.to_string(), value));
        }
    }
    if frame.get("persistent") == Some("true") {
        message.delivery_mode = DeliveryMode::Persistent;
    }
    if let Some(mode) = frame.get("sift-mode") {
        message.delivery_mode =
            mode.parse().map_err(|_| format!("sift-mode {mode:?}: expected best-effort, reliable or persistent"))?;
    }
    if let Some(priority) = frame.get("priority") {
        let level: u8 = priority.trim().parse().map_err(|_| format!("priority {priority:?}: expected 0 to 9"))?;
        message.priority = Priority::new(level).map_err(|_| format!("priority {priority:?}: expected 0 to 9"))?;
    }
    // ActiveMQ's delay header: the message reaches no subscriber until
    // that many milliseconds from now (JMS's delivery delay).
    if let Some(delay) = frame.get("AMQ_SCHEDULED_DELAY") {
        let delay_ms: i64 =
            delay.trim().parse().map_err(|_| format!("AMQ_SCHEDULED_DELAY {delay:?}: expected milliseconds"))?;
        let now_ms = i64::try_from(sift_client::system_now_ns() / 1_000_000).unwrap_or(i64::MAX);
        let time = Value::Int(now_ms.saturating_add(delay_ms.max(0)));
        message.properties.retain(|(name, _)| name != sift_core::DELIVERY_TIME_PROPERTY);
        message.properties.push((sift_core::DELIVERY_TIME_PROPERTY.to_string(), time));
    }
    if let Some(expires) = frame.get("expires") {
        let expires_ms: u64 =
            expires.trim().parse().map_err(|_| format!("expires {expires:?}: expected milliseconds"))?;
        message.expiry_ns = expires_ms.saturating_mul(1_000_000);
    }
    Ok(message)
}

/// A property's value as header text.
fn header_text(value: &Value) -> String {
    match value {
        Value::Bool(flag) => flag.to_string(),
        Value::Int(int) => int.to_string(),
        Value::Float(float) => float.to_string(),
        Value::Str(text) => text.to_string(),
    }
}

/// Appends the MESSAGE frame of a delivery straight to `out`, as
/// [`message_frame`] followed by [`Frame::encode`] would, without building
/// the frame's header list: a MESSAGE is the front-end's most frequent
/// frame, and its ten-odd headers would each be two allocations.
pub fn encode_message_frame(
    out: &mut bytes::BytesMut,
    (message, redelivered): (&Message, bool),
    subscription_id: &str,
    prefix: &str,
    ack: Option<&str>,
) {
    use bytes::BufMut;
    use std::fmt::Write;
    let header = |out: &mut bytes::BytesMut, name: &str, value: &str| {
        crate::frame::put_escaped(out, name, false);
        out.put_u8(b':');
        crate::frame::put_escaped(out, value, false);
        out.put_u8(b'\n');
    };
    out.put_slice(b"MESSAGE\n");
    header(out, "subscription", subscription_id);
    // The message's own id, the same on every redelivery (JMS's
    // JMSMessageID, which a selector reads as `ID:` and the id).
    out.put_slice(b"message-id:ID:");
    put_number(out, message.id);
    out.put_u8(b'\n');
    out.put_slice(b"destination:");
    crate::frame::put_escaped(out, prefix, false);
    crate::frame::put_escaped(out, message.topic.as_str(), false);
    out.put_slice(b"\npriority:");
    put_number(out, message.priority.level());
    out.put_slice(b"\ntimestamp:");
    put_number(out, message.timestamp_ns / 1_000_000);
    out.put_slice(b"\nexpires:");
    put_number(out, message.expiry_ns / 1_000_000);
    out.put_u8(b'\n');
    if let Some(ack) = ack {
        header(out, "ack", ack);
    }
    if message.delivery_mode == DeliveryMode::Persistent {
        out.put_slice(b"persistent:true\n");
    }
    if redelivered {
        out.put_slice(b"redelivered:true\n");
    }
    for (name, value) in &message.properties {
        crate::frame::put_escaped(out, header_of_property(name), false);
        out.put_u8(b':');
        match value {
            Value::Str(text) => crate::frame::put_escaped(out, text, false),
            Value::Bool(flag) => out.put_slice(if *flag { b"true" } else { b"false" }),
            Value::Int(int) => put_number(out, *int),
            Value::Float(float) => {
                let _ = write!(out, "{float}");
            }
        }
        out.put_u8(b'\n');
    }
    if !message.payload.is_empty() {
        out.put_slice(b"content-length:");
        put_number(out, message.payload.len());
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
    out.put_slice(&message.payload);
    out.put_u8(0);
}

/// Writes an integer in decimal: `itoa` rather than the formatting
/// machinery, since a MESSAGE carries four or five of them.
fn put_number(out: &mut bytes::BytesMut, number: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(number).as_bytes());
}

/// The MESSAGE frame of a delivery to subscription `subscription_id`,
/// whose destination was written with `prefix` (`/topic/`, `/queue/` or
/// none). `ack` is the value a client acknowledges it with (STOMP 1.2's
/// `ack` header), when it needs one.
///
/// The frame's `destination` is the message's own topic under that prefix,
/// not the subscription's: STOMP 1.2 gives MESSAGE the destination the
/// message was sent to, and a subscriber to `/topic/quotes.>` must be able
/// to tell `/topic/quotes.nyse` from `/topic/quotes.lse`.
pub fn message_frame(delivery: &Delivery, subscription_id: &str, prefix: &str, ack: Option<String>) -> Frame {
    let message = &delivery.message;
    let mut frame = Frame::new(Command::Message)
        .header("subscription", subscription_id)
        .header("message-id", format!("ID:{}", message.id))
        .header("destination", format!("{prefix}{}", message.topic.as_str()))
        .header("priority", message.priority.level().to_string())
        .header("timestamp", (message.timestamp_ns / 1_000_000).to_string())
        .header("expires", (message.expiry_ns / 1_000_000).to_string());
    if let Some(ack) = ack {
        frame = frame.header("ack", ack);
    }
    if message.delivery_mode == DeliveryMode::Persistent {
        frame = frame.header("persistent", "true");
    }
    if delivery.redelivered {
        frame = frame.header("redelivered", "true");
    }
    for (name, value) in &message.properties {
        frame = frame.header(header_of_property(name), header_text(value));
    }
    Frame { body: Bytes::clone(&message.payload), ..frame }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_map_to_topics_and_queue_groups() {
        let queue = Destination::parse("/queue/orders.new").expect("valid");
        assert_eq!((queue.topic.as_str(), queue.queue_group.as_deref()), ("orders.new", Some("orders.new")));
        assert_eq!(Destination::parse("/topic/quotes.>").expect("valid").queue_group, None);
        assert_eq!(Destination::parse("plain.topic").expect("valid").topic, "plain.topic");
        assert!(Destination::parse("/topic/").is_err());
    }

    #[test]
    fn jms_header_fields_keep_their_jms_names_and_their_text() {
        let frame = Frame::new(Command::Send)
            .header("destination", "/queue/orders")
            .header("type", "12993")
            .header("correlation-id", "42");
        let message = message_of_send(&frame).expect("valid");
        assert_eq!(message.property("JMSType"), Some(&Value::Str("12993".into())));
        assert_eq!(message.property("JMSCorrelationID"), Some(&Value::Str("42".into())));
        assert_eq!(message.property("type"), None);
        let delivery = Delivery::detached(message, 1, 0, false, 0);
        let written = message_frame(&delivery, "sub-1", "/queue/", None);
        assert_eq!((written.get("type"), written.get("correlation-id")), (Some("12993"), Some("42")));
        assert_eq!(written.get("JMSType"), None);
    }

    #[test]
    fn send_headers_become_typed_properties_and_options() {
        let frame = Frame::new(Command::Send)
            .header("destination", "/topic/quotes.ibm")
            .header("price", "12.5")
            .header("lots", "3")
            .header("sym", "IBM")
            .header("quoted", "\"42\"")
            .header("priority", "7")
            .header("persistent", "true")
            .header("receipt", "r-1");
        let message = message_of_send(&frame).expect("valid");
        assert_eq!(message.topic.as_str(), "quotes.ibm");
        assert_eq!(message.property("price"), Some(&Value::Float(12.5)));
        assert_eq!(message.property("lots"), Some(&Value::Int(3)));
        assert_eq!(message.property("quoted"), Some(&Value::Str("42".into())));
        assert_eq!(message.property("receipt"), None, "reserved headers are not properties");
        assert_eq!((message.priority.level(), message.delivery_mode), (7, DeliveryMode::Persistent));
        let plain = Frame::new(Command::Send).header("destination", "/topic/a");
        assert_eq!(message_of_send(&plain).expect("valid").delivery_mode, DeliveryMode::Reliable, "the default");
        let best_effort = plain.clone().header("sift-mode", "best-effort");
        assert_eq!(message_of_send(&best_effort).expect("valid").delivery_mode, DeliveryMode::BestEffort);
        let bad = Frame::new(Command::Send).header("destination", "/topic/a").header("priority", "12");
        assert!(message_of_send(&bad).expect_err("refused").contains("priority"));
        assert!(message_of_send(&Frame::new(Command::Send)).is_err());
    }

    #[test]
    fn a_message_encoded_directly_reads_back_as_the_message_frame() {
        let topic = TopicName::new("quotes.nyse").expect("valid");
        let mut message = Message::new(topic, Bytes::from_static(b"tick\0with a nul"));
        message.id = 42;
        message.timestamp_ns = 1_700_000_000_123_000_000;
        message.delivery_mode = DeliveryMode::Persistent;
        message.properties = vec![
            ("sym".into(), Value::Str("I:B\nM".into())),
            ("price".into(), Value::Float(12.5)),
            ("lots".into(), Value::Int(-3)),
            ("firm".into(), Value::Bool(true)),
        ];
        let delivery = Delivery::detached(message, 1, 7, true, 0);
        let mut direct = bytes::BytesMut::new();
        encode_message_frame(&mut direct, (&delivery.message, delivery.redelivered), "sub:1", "/topic/", Some("t7"));
        let decoder = crate::frame::Decoder::new(crate::frame::Limits::default());
        let Ok(Some(crate::frame::Decoded::Frame(read))) = decoder.decode(&mut direct) else {
            panic!("the encoding reads back as one frame")
        };
        assert!(direct.is_empty(), "one whole frame");
        let expected = message_frame(&delivery, "sub:1", "/topic/", Some("t7".into()));
        let sorted = |frame: &Frame| {
            let mut headers = frame.headers.clone();
            headers.retain(|(name, _)| name != "content-length");
            headers.sort();
            headers
        };
        assert_eq!((read.command, sorted(&read), &read.body), (expected.command, sorted(&expected), &expected.body));
    }
}
