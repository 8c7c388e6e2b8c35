//! Retained messages: the last retained PUBLISH of each topic, sent to
//! every new subscription whose filter matches it.
//!
//! Bounded by `mqtt.max_retained` messages and `mqtt.max_retained_bytes`
//! of payload; a retained publish over either bound is still delivered
//! to current subscribers but not kept, and is counted.

use std::collections::HashMap;

use sift_core::Message;

use crate::topic::mqtt_matches;

/// Why a retained message was not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetainRefused {
    /// `mqtt.max_retained` messages are kept already.
    TooMany,
    /// Keeping it would pass `mqtt.max_retained_bytes`.
    TooLarge,
}

/// The retained messages, by MQTT topic name.
#[derive(Debug)]
pub struct RetainedStore {
    by_topic: HashMap<String, Message>,
    payload_bytes: u64,
    max_count: usize,
    max_bytes: u64,
}

impl RetainedStore {
    /// An empty store with these bounds.
    pub fn new(max_count: usize, max_bytes: u64) -> RetainedStore {
        RetainedStore { by_topic: HashMap::new(), payload_bytes: 0, max_count, max_bytes }
    }

    /// Keeps `message` as the retained message of `mqtt_topic`, or with an
    /// empty payload removes the one kept.
    pub fn set(&mut self, mqtt_topic: &str, message: Message) -> Result<(), RetainRefused> {
        let replaced_bytes = self.by_topic.get(mqtt_topic).map_or(0, |old| old.payload.len() as u64);
        if message.payload.is_empty() {
            if self.by_topic.remove(mqtt_topic).is_some() {
                self.payload_bytes -= replaced_bytes;
            }
            return Ok(());
        }
        let is_new = !self.by_topic.contains_key(mqtt_topic);
        if is_new && self.by_topic.len() >= self.max_count {
            return Err(RetainRefused::TooMany);
        }
        let bytes_after = self.payload_bytes - replaced_bytes + message.payload.len() as u64;
        if bytes_after > self.max_bytes {
            return Err(RetainRefused::TooLarge);
        }
        self.payload_bytes = bytes_after;
        self.by_topic.insert(mqtt_topic.to_string(), message);
        debug_assert_eq!(self.payload_bytes, self.by_topic.values().map(|kept| kept.payload.len() as u64).sum::<u64>());
        Ok(())
    }

    /// The retained messages whose topic `mqtt_filter` matches and that
    /// have not expired at `now_ns`, with their MQTT topics.
    pub fn matching(&self, mqtt_filter: &str, now_ns: u64) -> Vec<(String, Message)> {
        self.by_topic
            .iter()
            .filter(|(topic, message)| {
                (message.expiry_ns == 0 || message.expiry_ns > now_ns) && mqtt_matches(mqtt_filter, topic)
            })
            .map(|(topic, message)| (topic.clone(), message.clone()))
            .collect()
    }

    /// How many messages are kept.
    pub fn len(&self) -> usize {
        self.by_topic.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.by_topic.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::TopicName;

    fn message(payload: &'static [u8]) -> Message {
        Message::new(TopicName::new("a.b").expect("valid"), payload)
    }

    #[test]
    fn keeps_the_last_per_topic_within_bounds() {
        let mut store = RetainedStore::new(2, 10);
        store.set("a/b", message(b"one")).expect("kept");
        store.set("a/b", message(b"two")).expect("replaced");
        store.set("a/c", message(b"three")).expect("kept");
        assert_eq!(store.set("a/d", message(b"x")), Err(RetainRefused::TooMany));
        assert_eq!(store.set("a/b", message(b"much too long")), Err(RetainRefused::TooLarge));
        let mut matched: Vec<String> = store.matching("a/+", 0).into_iter().map(|(topic, _)| topic).collect();
        matched.sort();
        assert_eq!(matched, ["a/b", "a/c"]);
        store.set("a/b", message(b"")).expect("removed");
        assert_eq!(store.len(), 1);
        assert!(store.matching("#", 0).iter().all(|(topic, _)| topic == "a/c"));
    }
}
