//! The properties that steer a stored message's delivery, read straight
//! from its encoding ([§5] of `docs/PROTOCOL.md`) without decoding the rest.
//!
//! - The message group is JMS's `JMSXGroupID`: every message of one group
//!   goes to the same member of a queue group (or of a shared durable
//!   subscription), so that one consumer sees the group's messages in order.
//! - The delivery time is JMS's `JMSDeliveryTime` (milliseconds since the
//!   epoch): no subscriber gets the message before it.
//!
//! A stream consumer looks both up for every stored message it hands out,
//! so one pass over the properties reads them, and nothing else.

use sift_core::{DELIVERY_TIME_PROPERTY, GROUP_PROPERTY};

/// What a message's properties say about its delivery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoutingProperties<'a> {
    /// Its message group: the first `JMSXGroupID`, when it is a string.
    pub group: Option<&'a str>,
    /// Its delivery time in milliseconds since the epoch: the first
    /// `JMSDeliveryTime`, when it is an integer.
    pub delivery_time_ms: Option<i64>,
}

/// Bytes from the end of the topic to the publisher field: priority,
/// mode, hop count, flags, then id, sequence, timestamp and expiry.
const FIXED_AFTER_TOPIC_BYTES: usize = 4 + 4 * 8;

/// Message flags bit 1: a `time_error_ns` (`u32`) follows `expiry_ns`.
const TIME_ERROR_FLAG: u8 = 0x02;

/// The group and delivery time of an encoded message; either is `None`
/// when absent, of another type, or past where the encoding is cut short.
pub fn routing_properties(encoded: &[u8]) -> RoutingProperties<'_> {
    let mut found = RoutingProperties::default();
    let _ = scan_properties(encoded, &mut found);
    found
}

/// Reads the properties into `found`; `None` where the encoding ends early.
fn scan_properties<'a>(encoded: &'a [u8], found: &mut RoutingProperties<'a>) -> Option<()> {
    let mut scan = Scan { bytes: encoded, offset: 0 };
    let topic_len = scan.u16()? as usize;
    scan.skip(topic_len)?;
    let flags = *encoded.get(scan.offset + 3)?;
    scan.skip(FIXED_AFTER_TOPIC_BYTES)?;
    if flags & TIME_ERROR_FLAG != 0 {
        scan.skip(4)?;
    }
    let publisher_len = scan.u16()? as usize;
    scan.skip(publisher_len)?;
    let count = scan.u16()?;
    let (mut group_seen, mut time_seen) = (false, false);
    for _ in 0..count {
        let name_len = scan.u16()? as usize;
        let name = scan.take(name_len)?;
        let kind = scan.take(1)?[0];
        let value = match kind {
            0 => scan.take(1)?,
            1 | 2 => scan.take(8)?,
            3 => {
                let len = scan.u32()? as usize;
                scan.take(len)?
            }
            _ => return None,
        };
        if name == GROUP_PROPERTY.as_bytes() && !group_seen {
            group_seen = true;
            found.group = (kind == 3).then(|| std::str::from_utf8(value).ok()).flatten();
        } else if name == DELIVERY_TIME_PROPERTY.as_bytes() && !time_seen {
            time_seen = true;
            found.delivery_time_ms = (kind == 1).then(|| value.try_into().ok().map(i64::from_be_bytes)).flatten();
        }
        if group_seen && time_seen {
            break;
        }
    }
    Some(())
}

/// A cursor over an encoding that stops (`None`) at its end.
struct Scan<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Scan<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let taken = self.bytes.get(self.offset..self.offset.checked_add(len)?)?;
        self.offset += len;
        Some(taken)
    }

    fn skip(&mut self, len: usize) -> Option<()> {
        self.take(len).map(|_| ())
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|bytes| u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|bytes| u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use sift_core::{Message, TopicName, Value};

    fn encoded(message: &Message) -> Vec<u8> {
        let mut out = BytesMut::new();
        crate::encode_message(&mut out, message).expect("encodes");
        out.to_vec()
    }

    fn message(properties: Vec<(&str, Value)>) -> Message {
        let mut message = Message::new(TopicName::new("orders.eu").expect("a topic"), &b"body"[..]);
        message.properties = properties.into_iter().map(|(name, value)| (name.to_string(), value)).collect();
        message
    }

    #[test]
    fn the_group_is_read_past_other_properties_metadata_and_time_error() {
        let mut grouped = message(vec![
            ("qty", Value::Int(3)),
            ("firm", Value::Bool(true)),
            ("price", Value::Float(2.5)),
            ("sym", Value::Str("IBM".into())),
            (GROUP_PROPERTY, Value::Str("cart-7".into())),
            (GROUP_PROPERTY, Value::Str("second".into())),
        ]);
        assert_eq!(routing_properties(&encoded(&grouped)).group, Some("cart-7"), "the first one counts");
        grouped.metadata = Some(bytes::Bytes::from_static(b"<m/>"));
        grouped.time_error_ns = 12;
        grouped.publisher = "alice".into();
        assert_eq!(routing_properties(&encoded(&grouped)).group, Some("cart-7"));
    }

    #[test]
    fn the_delivery_time_is_read_beside_the_group() {
        let both = message(vec![
            ("sym", Value::Str("IBM".into())),
            (DELIVERY_TIME_PROPERTY, Value::Int(1_700_000_000_123)),
            (GROUP_PROPERTY, Value::Str("cart-7".into())),
        ]);
        let bytes = encoded(&both);
        let found = routing_properties(&bytes);
        assert_eq!((found.group, found.delivery_time_ms), (Some("cart-7"), Some(1_700_000_000_123)));
        let text_time = encoded(&message(vec![(DELIVERY_TIME_PROPERTY, Value::Str("soon".into()))]));
        assert_eq!(routing_properties(&text_time), RoutingProperties::default(), "only an integer is a time");
    }

    #[test]
    fn no_group_when_absent_not_a_string_or_cut_short() {
        assert_eq!(routing_properties(&encoded(&message(vec![("sym", Value::Str("IBM".into()))]))).group, None);
        assert_eq!(routing_properties(&encoded(&message(vec![(GROUP_PROPERTY, Value::Int(7))]))).group, None);
        let whole = encoded(&message(vec![(GROUP_PROPERTY, Value::Str("cart-7".into()))]));
        for cut in 0..whole.len() - 8 {
            assert_eq!(routing_properties(&whole[..cut]).group, None, "cut at {cut}");
        }
    }
}
