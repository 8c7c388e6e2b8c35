//! The stages every message passes through on its way into this broker,
//! whether a client published it here or a link forwarded it from another
//! broker.
//!
//! The path, top to bottom:
//!
//! 1. **validate** ([`validate`]): the checks at ingress (payload size,
//!    well-formed metadata). Only local publishes: a forwarded message was
//!    validated by the broker it was published at.
//! 2. **stamp**: id, publisher and time, by the publisher's session
//!    ([`crate::publish`]). Forwarded messages keep their origin's stamp.
//! 3. **encode** ([`Pipeline::encode`]): the message is encoded once, in the
//!    body form a `DELIVER` carries and a stream record stores, and checked
//!    against `max_frame_bytes`, before anything is stored, forwarded or
//!    queued, so that a refused message goes nowhere.
//! 4. **store** ([`store_unconfirmed`], and the confirm gate of
//!    [`crate::store::gate`] for a local persistent publish): appended to
//!    every stream that holds it.
//! 5. **route** ([`Pipeline::route`], [`Pipeline::pick_member`]): the topic
//!    through the match cache and the trie, the content filters through
//!    their index, then one member of each queue group served here.
//! 6. **forward**: to the brokers whose interest it meets (local publishes;
//!    a forwarded message travels on inside [`crate::link`]).
//! 7. **deliver** ([`crate::delivery::push_to`]): one shared copy into the
//!    outbox of each target, where the subscription's queue applies its
//!    policy.
//! 8. **confirm**: to the publisher, or a delivery report to the origin.
//!
//! [`Pipeline`] holds what a reader keeps between messages for these
//! stages: the match cache, the content index's scratch space, the turns of
//! queue groups, the encode arena and counters batched per read. Each
//! reader (a client connection or a link session) has its own, so the hot
//! path shares nothing between cores but the router and the outboxes.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sift_core::{MatchCache, MatchResult, Message};
use sift_filter::{IndexScratch, XmlDocument};
use sift_proto::{encode_message, encoded_deliver_len, ErrorCode};

use crate::config::Config;
use crate::router::{Route, Router};
use crate::stats::{LocalCounters, Stats};
use crate::store::stream::Stream;
use crate::subscription::SubRef;

/// Room reserved per message beyond its topic, metadata and payload: the
/// fixed fields, the publisher name and a few properties.
const ENCODED_OVERHEAD_BYTES: usize = 128;

/// Why a message was refused at a stage: the error code and the text the
/// publisher is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The `ERROR` code.
    pub code: ErrorCode,
    /// What was wrong, where and why.
    pub text: String,
}

/// Stage 1: the checks at ingress. The payload must be within
/// `max_payload_bytes`, and metadata, when present, a well-formed XML
/// document: XPath subscriptions are matched against it, and a publisher
/// learns at once that it sent something no XPath filter could read.
pub(crate) fn validate(config: &Config, message: &Message) -> Result<(), Refusal> {
    let max_payload_bytes = config.limits.max_payload_bytes;
    if message.payload.len() > max_payload_bytes as usize {
        let text = format!("payload is {} bytes; max_payload_bytes = {max_payload_bytes}", message.payload.len());
        return Err(Refusal { code: ErrorCode::PayloadTooLarge, text });
    }
    if let Some(metadata) = &message.metadata {
        if let Err(error) = XmlDocument::parse(metadata) {
            let text = format!("metadata is not a well-formed XML document: {error}");
            return Err(Refusal { code: ErrorCode::InvalidField, text });
        }
    }
    Ok(())
}

/// Stage 4 for a message whose store nobody waits for (not persistent, or
/// forwarded: the publisher's confirm came from the broker it was published
/// at, after its own store): hands the encoded message to every stream.
/// `key` is the replication key of a message published here; a forwarded
/// one has none, and replicated streams leave it to the group.
pub(crate) fn store_unconfirmed(streams: &[Arc<Stream>], message: &Message, encoded: &Bytes, key: Option<u64>) {
    for stream in streams {
        stream.append_unconfirmed(message.timestamp_ns, encoded.clone(), key);
    }
}

/// One reader's state for the stages of [`self`](crate::pipeline).
#[derive(Debug)]
pub(crate) struct Pipeline {
    cache: MatchCache<Route>,
    /// Per-message working space of the content index.
    index_scratch: IndexScratch,
    counters: LocalCounters,
    /// Round-robin turn of each queue group this reader delivered to.
    group_turns: HashMap<Arc<str>, usize>,
    /// Where messages are encoded: each encoding is split off a shared
    /// chunk, so that a message costs a reference count rather than an
    /// allocation (and a free on another thread).
    encode_arena: BytesMut,
    /// `delivery.encode_arena_bytes`: the size of each arena chunk.
    encode_arena_bytes: usize,
    /// `limits.max_frame_bytes`: the largest `DELIVER` an encoding may make.
    max_frame_bytes: u32,
}

impl Pipeline {
    /// An empty pipeline state, with the match cache sized by the config.
    pub(crate) fn new(config: &Config) -> Pipeline {
        Pipeline {
            cache: MatchCache::new(config.delivery.match_cache_entries_max),
            index_scratch: IndexScratch::default(),
            counters: LocalCounters::default(),
            group_turns: HashMap::new(),
            encode_arena: BytesMut::new(),
            encode_arena_bytes: config.delivery.encode_arena_bytes,
            max_frame_bytes: config.limits.max_frame_bytes,
        }
    }

    /// The counters of the current read.
    pub(crate) fn counters(&mut self) -> &mut LocalCounters {
        &mut self.counters
    }

    /// Adds the counters of the current read to the broker's.
    pub(crate) fn flush_counters(&mut self, stats: &Stats) {
        self.counters.flush(stats);
    }

    /// Stage 3: encodes `message` once for all its stores and deliveries,
    /// in the next slice of the encode arena (a fresh chunk when the
    /// current one is full), and checks the size of its `DELIVER` frame.
    pub(crate) fn encode(&mut self, message: &Message) -> Result<Bytes, Refusal> {
        let metadata_len = message.metadata.as_ref().map_or(0, |metadata| metadata.len());
        let needed = ENCODED_OVERHEAD_BYTES + message.topic.as_str().len() + metadata_len + message.payload.len();
        if self.encode_arena.capacity() < needed {
            let chunk_bytes = self.encode_arena_bytes;
            self.encode_arena = BytesMut::with_capacity(chunk_bytes.max(needed));
            self.counters.encode_arena_chunks += 1;
        }
        if let Err(error) = encode_message(&mut self.encode_arena, message) {
            self.encode_arena.clear();
            return Err(Refusal { code: ErrorCode::InvalidField, text: error.to_string() });
        }
        let encoded = self.encode_arena.split().freeze();
        let max_frame_bytes = self.max_frame_bytes;
        let deliver_bytes = encoded_deliver_len(encoded.len());
        if deliver_bytes > max_frame_bytes as usize {
            let text = format!("the delivery would be {deliver_bytes} bytes; max_frame_bytes = {max_frame_bytes}");
            return Err(Refusal { code: ErrorCode::FrameTooLarge, text });
        }
        Ok(encoded)
    }

    /// Stage 5: the local subscriptions that want `message`. The topic goes
    /// through the match cache; the content index runs only when the route
    /// names filter partitions.
    pub(crate) fn route(&mut self, router: &Router, message: &Message) -> Arc<MatchResult<SubRef>> {
        let route = router.route(&message.topic, &mut self.cache, &mut self.counters);
        if route.is_topic_only() {
            route.matches.clone()
        } else {
            Arc::new(router.select(&route, message, &mut self.index_scratch))
        }
    }

    /// Stage 5, queue groups: the next member of `group` in turn, `None`
    /// when the group has no members left. Each group takes turns on its
    /// own, per reader. A message in a message group (`message_group`) goes
    /// to the member the group hashes to instead, whichever connection
    /// publishes it ([`member_of_message_group`]).
    pub(crate) fn pick_member(
        &mut self,
        group: &str,
        members: &[SubRef],
        message_group: Option<&str>,
    ) -> Option<SubRef> {
        if members.is_empty() {
            return None;
        }
        if let Some(message_group) = message_group {
            return Some(member_of_message_group(members, message_group).clone());
        }
        let turn = match self.group_turns.get_mut(group) {
            Some(turn) => turn,
            None => self.group_turns.entry(Arc::from(group)).or_insert(0),
        };
        *turn = turn.wrapping_add(1);
        Some(members[*turn % members.len()].clone())
    }
}

/// The message group (`JMSXGroupID`, a string) `message` is in, if any.
pub(crate) fn message_group_of(message: &Message) -> Option<&str> {
    match message.property(sift_core::GROUP_PROPERTY) {
        Some(sift_core::Value::Str(name)) => Some(name),
        _ => None,
    }
}

/// The member a message group goes to: the one whose key hashed with the
/// group's name is highest (rendezvous hashing). Every publisher and
/// every broker reader agrees on it with no shared state, and it stays the
/// same while that member stays; a member that joins takes over only the
/// groups it now wins, and those of one that leaves spread over the rest.
/// `members` is not empty.
pub(crate) fn member_of_message_group<'a>(members: &'a [SubRef], message_group: &str) -> &'a SubRef {
    debug_assert!(!members.is_empty(), "a queue group with members");
    let weight = |member: &SubRef| {
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&(message_group, member.key), &mut hasher);
        std::hash::Hasher::finish(&hasher)
    };
    let mut best = &members[0];
    let mut best_weight = weight(best);
    for member in &members[1..] {
        let member_weight = weight(member);
        if member_weight > best_weight {
            (best, best_weight) = (member, member_weight);
        }
    }
    best
}
