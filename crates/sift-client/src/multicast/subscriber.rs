//! The multicast subscriber: every message of the group, decoded, matched
//! against the local subscriptions, put back in each publisher's order.

use std::time::Instant;

use sift_core::{Message, TopicFilter};
use sift_filter::ContentFilter;

use super::announce::{self, Announced, ANNOUNCE_INTERVAL};
use super::sleep_until;
use super::{LocalInterest, MulticastError, MulticastOptions, Ordered, Reorder, MODE_INTEREST};

/// What a multicast subscriber hands the application.
#[derive(Debug, PartialEq)]
pub enum MulticastEvent {
    /// A message and the local subscriptions it matched.
    Message {
        /// The subscriptions, by the ids [`MulticastSubscriber::subscribe`] gave.
        subscriptions: Vec<u32>,
        /// The message.
        message: Box<Message>,
    },
    /// Messages `first ..= last` of a publisher never arrived (sent before
    /// this receiver joined, lost best-effort, or beyond repair).
    Missed {
        /// The publisher's NORM node id.
        publisher: u32,
        /// First sequence missed.
        first: u64,
        /// Last sequence missed.
        last: u64,
    },
    /// This subscriber took messages more slowly than the group sent them:
    /// `messages` more were dropped since the last report, its queue
    /// ([`MulticastOptions::rx_queue_bytes_max`]) being full. A gap they
    /// leave is also reported as [`MulticastEvent::Missed`] once a later
    /// message of the same publisher shows it.
    Overflowed {
        /// Messages dropped since the last such event.
        messages: u64,
    },
}

/// Counters of a subscriber.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubscriberCounters {
    /// Messages received whole from the group.
    pub received: u64,
    /// Messages that matched at least one local subscription.
    pub matched: u64,
    /// Objects that were no Sift message (foreign or malformed), dropped.
    pub invalid: u64,
    /// Messages the library could not complete.
    pub lost: u64,
    /// Messages received whole but dropped because this subscriber took
    /// them more slowly than the group sent them (its queue was full).
    pub overflowed: u64,
}

/// Receives a multicast group with no broker.
pub struct MulticastSubscriber {
    session: sift_norm::Session,
    interest: LocalInterest,
    next_id: u32,
    reorder: Reorder,
    ready: std::collections::VecDeque<MulticastEvent>,
    counters: SubscriberCounters,
    /// The session's overflow count when last reported.
    overflow_reported: u64,
    /// What this subscriber announces to the LAN's gateway, and when next.
    announced: Vec<Announced>,
    next_announce: Option<Instant>,
}

impl MulticastSubscriber {
    /// Joins `options.group` as a receiver.
    pub fn open(options: &MulticastOptions) -> Result<MulticastSubscriber, MulticastError> {
        // One session both ways: it receives, and sends the announcements
        // (a second socket on the port would share the group's packets).
        let session = sift_norm::Session::open(&options.session(), true, true)?;
        Ok(MulticastSubscriber {
            session,
            interest: LocalInterest::new(),
            next_id: 1,
            reorder: Reorder::new(options.reorder_wait),
            ready: std::collections::VecDeque::new(),
            counters: SubscriberCounters::default(),
            overflow_reported: 0,
            announced: Vec::new(),
            next_announce: None,
        })
    }

    /// Adds a local subscription; returns its id.
    pub fn subscribe(&mut self, topic_filter: &TopicFilter, content: Option<&ContentFilter>) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        self.interest.insert(id, topic_filter, content);
        self.announced.push(Announced {
            topic: topic_filter.as_str().to_string(),
            kind: content.map_or("none".to_string(), |filter| filter.language().to_string()),
            filter: content.map_or(String::new(), |filter| filter.to_string()),
        });
        self.next_announce = Some(Instant::now());
        id
    }

    /// Multicasts this subscriber's subscriptions for the LAN's gateway.
    async fn announce(&mut self) -> Result<(), MulticastError> {
        let data = super::object_data(MODE_INTEREST, &announce::encode(&self.announced));
        // Ahead of any message this node publishes: announcements are small and steer gateways.
        self.session.send(u8::MAX, bytes::Bytes::new(), data).await;
        self.next_announce = Some(Instant::now() + ANNOUNCE_INTERVAL);
        Ok(())
    }

    /// What the subscriber has seen.
    pub fn counters(&self) -> SubscriberCounters {
        let session = self.session.counters();
        let overflowed = session.overflowed.load(std::sync::atomic::Ordering::Relaxed);
        // Objects that were no sequence of frames never became messages: invalid too.
        let invalid = self.counters.invalid + session.malformed.load(std::sync::atomic::Ordering::Relaxed);
        SubscriberCounters { overflowed, invalid, ..self.counters }
    }

    /// The next matched message or missed range; `None` when the session ends.
    pub async fn next(&mut self) -> Option<MulticastEvent> {
        loop {
            let overflowed = self.session.counters().overflowed.load(std::sync::atomic::Ordering::Relaxed);
            if overflowed > self.overflow_reported {
                let messages = overflowed - self.overflow_reported;
                self.overflow_reported = overflowed;
                return Some(MulticastEvent::Overflowed { messages });
            }
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            let deadline = self.reorder.next_deadline();
            let event = tokio::select! {
                event = self.session.next_event() => event?,
                () = sleep_until(self.next_announce) => {
                    if let Err(error) = self.announce().await {
                        tracing::warn!(%error, "cannot announce the subscriptions");
                        self.next_announce = Some(Instant::now() + ANNOUNCE_INTERVAL);
                    }
                    continue;
                }
                () = sleep_until(deadline) => {
                    let mut out = Vec::new();
                    self.reorder.expire(Instant::now(), &mut out);
                    self.release(out);
                    continue;
                }
            };
            self.take(event);
        }
    }

    /// Acts on one NORM event.
    fn take(&mut self, event: sift_norm::Event) {
        match event {
            sift_norm::Event::Message { sender, data, .. } => {
                let Some((mode, body)) = super::split_object(&data) else {
                    self.counters.invalid += 1;
                    return;
                };
                if mode == MODE_INTEREST {
                    return; // Another subscriber's announcement, for gateways.
                }
                self.counters.received += 1;
                let Ok(message) = sift_proto::decode_message(&body) else {
                    self.counters.invalid += 1;
                    return;
                };
                let mut out = Vec::new();
                self.reorder.push(sender, Box::new(message), Instant::now(), &mut out);
                self.release(out);
            }
            sift_norm::Event::Lost { sender } => {
                self.counters.lost += 1;
                let mut out = Vec::new();
                self.reorder.lost(sender, Instant::now(), &mut out);
                self.release(out);
            }
            _ => {}
        }
    }

    /// Matches what the reorder stage let out and queues it.
    fn release(&mut self, out: Vec<Ordered>) {
        for item in out {
            match item {
                Ordered::Message(message) => {
                    let subscriptions = self.interest.matching(&message);
                    if !subscriptions.is_empty() {
                        self.counters.matched += 1;
                        self.ready.push_back(MulticastEvent::Message { subscriptions, message });
                    }
                }
                Ordered::Missed { publisher, first, last } => {
                    self.ready.push_back(MulticastEvent::Missed { publisher, first, last });
                }
            }
        }
    }
}
