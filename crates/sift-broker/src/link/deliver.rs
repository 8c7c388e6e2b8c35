//! Delivering a message received in a `FORWARD` to this broker's own
//! subscribers, through the same router, match cache and content index as a
//! local publish.
//!
//! Like the local publish path it never waits: a `block` queue that is full
//! drops the copy (counted in `dropped_queue_full`), since a link session
//! cannot park the way a publisher's connection does and forwarding is
//! best-effort for now. Queue groups are not served here: a group is served
//! by the broker the message was published to (see [`super::forward`]).

use std::sync::Arc;

use bytes::BytesMut;
use sift_core::{MatchCache, Message};
use sift_filter::IndexScratch;
use sift_proto::{encode_message, encoded_deliver_len};

use crate::connection::LocalCounters;
use crate::delivery::{push_to, Pushed};
use crate::outbox::{Entry, Routed};
use crate::router::Route;
use crate::server::BrokerShared;
use crate::stats::bump;

/// A link session's matching state, kept across the messages it receives.
#[derive(Debug)]
pub(crate) struct RemoteDelivery {
    cache: MatchCache<Route>,
    scratch: IndexScratch,
    counters: LocalCounters,
}

impl RemoteDelivery {
    pub(crate) fn new(shared: &BrokerShared) -> RemoteDelivery {
        RemoteDelivery {
            cache: MatchCache::new(shared.config.delivery.match_cache_entries_max),
            scratch: IndexScratch::default(),
            counters: LocalCounters::default(),
        }
    }

    /// Queues `message` for every local plain subscription it matches.
    pub(crate) fn deliver(&mut self, shared: &BrokerShared, message: &Message) {
        let route = shared.router.route(&message.topic, &mut self.cache, &mut self.counters);
        let matches = if route.is_topic_only() {
            route.matches.clone()
        } else {
            Arc::new(shared.router.select(&route, message, &mut self.scratch))
        };
        if matches.plain.is_empty() {
            self.counters.flush(&shared.stats);
            return;
        }
        let mut encoded = BytesMut::new();
        if let Err(error) = encode_message(&mut encoded, message) {
            tracing::warn!(%error, "forwarded message cannot be encoded for delivery");
            return;
        }
        let max_frame_bytes = shared.config.limits.max_frame_bytes as usize;
        if encoded_deliver_len(encoded.len()) > max_frame_bytes {
            tracing::warn!(bytes = encoded.len(), "forwarded message over max_frame_bytes not delivered");
            return;
        }
        let routed = Arc::new(Routed::new(message, encoded.freeze(), None));
        for target in &matches.plain {
            match push_to(shared, target, Entry::new(routed.clone())) {
                Pushed::Done => {}
                Pushed::Full => bump(&shared.stats.dropped_queue_full),
                Pushed::Gone => self.counters.subscriber_gone += 1,
            }
        }
        self.counters.flush(&shared.stats);
    }
}
