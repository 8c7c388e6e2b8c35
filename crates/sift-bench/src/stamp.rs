//! Send times carried in payloads: the publisher writes the time since a
//! shared epoch into the first [`STAMP_BYTES`] bytes, the subscriber
//! subtracts it from its own reading of the same clock. Publishers and
//! subscribers share one process, so one monotonic clock serves both.

use std::time::Instant;

use bytes::{BufMut, BytesMut};
use sift_core::{DeliveryMode, Message, TopicName};

/// Bytes at the start of every bench payload that carry its send time
/// (big-endian nanoseconds since the run's epoch; 0 = not stamped).
pub const STAMP_BYTES: usize = 8;

/// Payload bytes carved per allocation: publishers take many small payloads
/// from one buffer instead of allocating each.
const PAYLOAD_ARENA_BYTES: usize = 256 * 1024;

/// Filler for the rest of a payload.
const PAYLOAD_FILL: u8 = b'x';

/// Nanoseconds since `epoch`, never 0 (0 means "not stamped").
pub fn nanos_since(epoch: Instant) -> u64 {
    (epoch.elapsed().as_nanos() as u64).max(1)
}

/// Writes `sent_ns` into the stamp of `payload` (at least [`STAMP_BYTES`] long).
pub fn write_stamp(payload: &mut [u8], sent_ns: u64) {
    if let Some(head) = payload.get_mut(..STAMP_BYTES) {
        head.copy_from_slice(&sent_ns.to_be_bytes());
    }
}

/// The send time stamped in `payload`; 0 when it carries none.
pub fn sent_at_ns(payload: &[u8]) -> u64 {
    payload.get(..STAMP_BYTES).and_then(|head| head.try_into().ok()).map_or(0, u64::from_be_bytes)
}

/// A payload of `size` bytes carrying no stamp yet.
pub fn blank_payload(size: usize) -> Vec<u8> {
    let mut payload = vec![PAYLOAD_FILL; size.max(STAMP_BYTES)];
    write_stamp(&mut payload, 0);
    payload
}

/// Builds whole [`Message`]s with stamped payloads carved from one arena.
#[derive(Debug)]
pub struct MessageMaker {
    arena: BytesMut,
    topic: TopicName,
    mode: DeliveryMode,
    size: usize,
}

impl MessageMaker {
    /// Messages on `topic` in `mode` with `size`-byte payloads.
    pub fn new(topic: TopicName, mode: DeliveryMode, size: usize) -> MessageMaker {
        MessageMaker { arena: BytesMut::new(), topic, mode, size: size.max(STAMP_BYTES) }
    }

    /// The next message, stamped with `sent_ns` (0 for none).
    pub fn message(&mut self, sent_ns: u64) -> Message {
        if self.arena.capacity() < self.size {
            self.arena = BytesMut::with_capacity(PAYLOAD_ARENA_BYTES.max(self.size));
        }
        self.arena.put_u64(sent_ns);
        self.arena.resize(self.size, PAYLOAD_FILL);
        let mut message = Message::new(self.topic.clone(), self.arena.split().freeze());
        message.delivery_mode = self.mode;
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back_and_short_payloads_have_none() {
        let mut payload = blank_payload(64);
        assert_eq!(payload.len(), 64);
        assert_eq!(sent_at_ns(&payload), 0);
        write_stamp(&mut payload, 123_456_789);
        assert_eq!(sent_at_ns(&payload), 123_456_789);
        assert_eq!(sent_at_ns(&payload[..4]), 0);
    }

    #[test]
    fn made_messages_have_the_size_mode_and_stamp_asked_for() {
        let topic = TopicName::new("bench.stamp").expect("topic");
        let mut maker = MessageMaker::new(topic, DeliveryMode::Reliable, 100);
        let first = maker.message(42);
        let second = maker.message(43);
        assert_eq!(first.payload.len(), 100);
        assert_eq!(first.delivery_mode, DeliveryMode::Reliable);
        assert_eq!((sent_at_ns(&first.payload), sent_at_ns(&second.payload)), (42, 43));
        assert!(first.payload[STAMP_BYTES..].iter().all(|byte| *byte == PAYLOAD_FILL));
    }
}
