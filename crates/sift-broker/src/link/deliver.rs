//! Delivering a message received in a `FORWARD` to this broker's own
//! subscribers, through the same router, match cache and content index as a
//! local publish.
//!
//! It goes to every matching plain subscription, and to one member of each
//! queue group the origin assigned to this broker ([`super::groups`]); other
//! groups are served elsewhere. When the origin awaits a report, the copies
//! share a [`DeliveryReport`] whose sink is a `DELIVERY_REPORT` to the
//! origin.
//!
//! Like the local publish path it never waits: a `block` queue that is full
//! drops the copy (counted in `dropped_queue_full`, and reported as lost),
//! since a link session cannot park the way a publisher's connection does.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::BytesMut;
use sift_core::{MatchCache, MatchResult};
use sift_filter::IndexScratch;
use sift_proto::{encode_message, encoded_deliver_len};

use crate::connection::LocalCounters;
use crate::delivery::{push_to, Pushed};
use crate::outbox::{Entry, Routed};
use crate::report::{DeliveryReport, ReportSink};
use crate::router::Route;
use crate::server::BrokerShared;
use crate::stats::bump;
use crate::subscription::SubRef;

use super::forward::Travelling;

/// A link session's matching state, kept across the messages it receives.
#[derive(Debug)]
pub(crate) struct RemoteDelivery {
    cache: MatchCache<Route>,
    scratch: IndexScratch,
    counters: LocalCounters,
    /// Turns among the members of each queue group served here.
    group_turns: HashMap<String, usize>,
}

impl RemoteDelivery {
    pub(crate) fn new(shared: &BrokerShared) -> RemoteDelivery {
        RemoteDelivery {
            cache: MatchCache::new(shared.config.delivery.match_cache_entries_max),
            scratch: IndexScratch::default(),
            counters: LocalCounters::default(),
            group_turns: HashMap::new(),
        }
    }

    /// Queues `travelling` for every local subscription it goes to, and
    /// starts its delivery report when the origin awaits one.
    pub(crate) fn deliver(&mut self, shared: &Arc<BrokerShared>, travelling: &Travelling) {
        let message = &travelling.message;
        let route = shared.router.route(&message.topic, &mut self.cache, &mut self.counters);
        let matches = if route.is_topic_only() {
            route.matches.clone()
        } else {
            Arc::new(shared.router.select(&route, message, &mut self.scratch))
        };
        let targets = self.targets(&matches, travelling, shared.links.name());
        let report = travelling.awaits_report().then(|| self.start_report(shared, travelling, &targets));
        let streams = shared.storage.streams_for_forwarded(message);
        if targets.is_empty() && streams.is_empty() {
            self.counters.flush(&shared.stats);
            return;
        }
        let mut encoded = BytesMut::new();
        let max_frame_bytes = shared.config.limits.max_frame_bytes as usize;
        let encodable = encode_message(&mut encoded, message).is_ok();
        if !encodable || encoded_deliver_len(encoded.len()) > max_frame_bytes {
            tracing::warn!(
                bytes = encoded.len(),
                "forwarded message cannot be delivered: not encodable or over max_frame_bytes"
            );
            for target in &targets {
                if let Some(report) = &report {
                    report.failed(target.key);
                }
            }
            return;
        }
        let encoded = encoded.freeze();
        // Stored here for this broker's streams; the publisher's confirm
        // came from the broker it was published at, after its own store.
        for stream in &streams {
            stream.append_unconfirmed(message.timestamp_ns, encoded.clone());
        }
        let routed = Arc::new(Routed::new(message, encoded, report));
        for target in &targets {
            match push_to(shared, target, Entry::new(routed.clone())) {
                Pushed::Done => {}
                Pushed::Full => {
                    bump(&shared.stats.dropped_queue_full);
                    routed.report_lost(target.key);
                }
                Pushed::Gone => {
                    self.counters.subscriber_gone += 1;
                    routed.report_lost(target.key);
                }
            }
        }
        self.counters.flush(&shared.stats);
    }

    /// The plain subscriptions of `matches`, then one member of each queue
    /// group assigned to this broker (`own`).
    fn targets(&mut self, matches: &MatchResult<SubRef>, travelling: &Travelling, own: &str) -> Vec<SubRef> {
        let mut targets = matches.plain.clone();
        for assignment in travelling.groups.iter().filter(|assignment| assignment.broker == own) {
            let members =
                matches.groups.iter().find(|(name, _)| **name == *assignment.group).map(|(_, members)| members);
            match members.filter(|members| !members.is_empty()) {
                Some(members) => {
                    let turn = self.group_turns.entry(assignment.group.clone()).or_insert(0);
                    *turn = turn.wrapping_add(1);
                    targets.push(members[*turn % members.len()].clone());
                }
                // The member left after the origin chose this broker.
                None => self.counters.subscriber_gone += 1,
            }
        }
        targets
    }

    /// The report of this broker's copies, sent to the origin when settled
    /// or, at the latest, after three quarters of the origin's wait (so
    /// that it arrives while the origin still waits), and never later than
    /// `await_timeout_ms_max`.
    fn start_report(
        &self,
        shared: &Arc<BrokerShared>,
        travelling: &Travelling,
        targets: &[SubRef],
    ) -> Arc<DeliveryReport> {
        let sink = ReportSink::Origin {
            shared: Arc::downgrade(shared),
            origin: travelling.origin.clone(),
            origin_sequence: travelling.origin_sequence,
        };
        let report = DeliveryReport::new(sink, targets.len() as u32);
        for target in targets {
            report.expect(target.key, target.label.clone());
        }
        report.finish_if_empty();
        let timeout_ms = (travelling.await_timeout_ms / 4 * 3).clamp(1, shared.config.delivery.await_timeout_ms_max);
        report.time_out_after(timeout_ms, shared.shutdown_watch());
        report
    }
}
