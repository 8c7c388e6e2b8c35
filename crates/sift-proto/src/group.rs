//! The message group a stored or routed message belongs to, read straight
//! from its encoding ([§5] of `docs/PROTOCOL.md`) without decoding the rest.
//!
//! A message group is JMS's `JMSXGroupID`: every message of one group goes
//! to the same member of a queue group (or of a shared durable
//! subscription), so that one consumer sees the group's messages in order.
//! The broker looks the group up for every message a queue group or a
//! shared consumer hands out, so it reads only as far as the property.

use sift_core::GROUP_PROPERTY;

/// Bytes from the end of the topic to the publisher field: priority,
/// mode, hop count, flags, then id, sequence, timestamp and expiry.
const FIXED_AFTER_TOPIC_BYTES: usize = 4 + 4 * 8;

/// Message flags bit 1: a `time_error_ns` (`u32`) follows `expiry_ns`.
const TIME_ERROR_FLAG: u8 = 0x02;

/// The value of the message's first `JMSXGroupID` property when it is a
/// string; `None` when it has none, it is not a string, or the encoding is
/// cut short.
pub fn group_of_encoding(encoded: &[u8]) -> Option<&str> {
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
    for _ in 0..count {
        let name_len = scan.u16()? as usize;
        let name = scan.take(name_len)?;
        let kind = scan.take(1)?[0];
        let value = match kind {
            0 => scan.take(1).map(|_| None)?,
            1 | 2 => scan.take(8).map(|_| None)?,
            3 => {
                let len = scan.u32()? as usize;
                Some(scan.take(len)?)
            }
            _ => return None,
        };
        if name == GROUP_PROPERTY.as_bytes() {
            return value.and_then(|text| std::str::from_utf8(text).ok());
        }
    }
    None
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
        assert_eq!(group_of_encoding(&encoded(&grouped)), Some("cart-7"), "the first one counts");
        grouped.metadata = Some(bytes::Bytes::from_static(b"<m/>"));
        grouped.time_error_ns = 12;
        grouped.publisher = "alice".into();
        assert_eq!(group_of_encoding(&encoded(&grouped)), Some("cart-7"));
    }

    #[test]
    fn no_group_when_absent_not_a_string_or_cut_short() {
        assert_eq!(group_of_encoding(&encoded(&message(vec![("sym", Value::Str("IBM".into()))]))), None);
        assert_eq!(group_of_encoding(&encoded(&message(vec![(GROUP_PROPERTY, Value::Int(7))]))), None);
        let whole = encoded(&message(vec![(GROUP_PROPERTY, Value::Str("cart-7".into()))]));
        for cut in 0..whole.len() - 8 {
            assert_eq!(group_of_encoding(&whole[..cut]), None, "cut at {cut}");
        }
    }
}
