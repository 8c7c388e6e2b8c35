//! Delivering a message received in a `FORWARD` to this broker's own
//! streams and subscribers, through the same [`crate::pipeline`] stages as
//! a local publish.
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
//! The message is encoded here, once, in this reader's encode arena: the
//! `FORWARD` carries it in the link encoding, not the body form a stream
//! record and a `DELIVER` share.

use std::sync::Arc;

use sift_core::MatchResult;

use crate::delivery::{push_to, Pushed};
use crate::outbox::{Entry, Routed};
use crate::pipeline::{self, Pipeline};
use crate::report::{DeliveryReport, ReportSink};
use crate::scheduler::{self, GroupsHere};
use crate::shared::BrokerShared;
use crate::stats::bump;
use crate::subscription::SubRef;

use super::forward::Travelling;

/// A link session's pipeline state, kept across the messages it receives.
#[derive(Debug)]
pub(crate) struct RemoteDelivery {
    pipeline: Pipeline,
}

impl RemoteDelivery {
    pub(crate) fn new(shared: &BrokerShared) -> RemoteDelivery {
        RemoteDelivery { pipeline: Pipeline::new(&shared.config) }
    }

    /// Runs `travelling` through the pipeline from its encode stage on
    /// (its origin validated and stamped it, and forwards it on): store
    /// here, route, deliver to every local target, and start its delivery
    /// report when the origin awaits one.
    pub(crate) fn deliver(&mut self, shared: &Arc<BrokerShared>, travelling: &Travelling) {
        let message = &travelling.message;
        let streams = shared.storage.streams_for_forwarded(message);
        let matches = self.pipeline.route(&shared.router, message);
        // A message with a later delivery time is stored now and held for
        // this broker's subscribers until then (`crate::scheduler`).
        let release_ns = scheduler::release_ns_of(message, shared.clock.now_ns());
        let targets = match release_ns {
            Some(release_ns) => {
                self.hold(shared, travelling, release_ns);
                Vec::new()
            }
            None => self.targets(&matches, travelling, shared.links.name()),
        };
        let report = travelling.awaits_report().then(|| self.start_report(shared, travelling, &targets));
        if !targets.is_empty() || !streams.is_empty() {
            match self.pipeline.encode(message) {
                Ok(encoded) => {
                    pipeline::store_unconfirmed(&streams, message, &encoded, None);
                    // Accepted by another broker: counted, never refused here.
                    if let Some(depth) = shared.storage.queue_depth(&message.topic, &streams) {
                        depth.add();
                    }
                    let routed = Arc::new(Routed::new(message, encoded, report));
                    self.push_all(shared, &routed, &targets);
                }
                Err(refusal) => {
                    tracing::warn!(reason = %refusal.text, "forwarded message cannot be stored or delivered here");
                    for target in &targets {
                        if let Some(report) = &report {
                            report.failed(target.key);
                        }
                    }
                }
            }
        }
        self.pipeline.flush_counters(&shared.stats);
    }

    /// Holds a forwarded message for its delivery time, for the plain
    /// subscriptions here and the groups the origin assigned to this
    /// broker. Another broker accepted it: it is held even past
    /// `limits.scheduled_max`.
    fn hold(&mut self, shared: &BrokerShared, travelling: &Travelling, release_ns: u64) {
        let own = shared.links.name();
        let groups = travelling
            .groups
            .iter()
            .filter(|assignment| *assignment.broker == **own)
            .map(|assignment| Arc::<str>::from(&*assignment.group))
            .collect();
        shared.scheduler.hold(travelling.message.clone(), release_ns, GroupsHere::Only(groups));
        bump(&shared.stats.scheduled);
    }

    /// The deliver stage for a forwarded message. A link session cannot
    /// park the way a publisher's connection does, so a full `block` queue
    /// drops the copy (counted, and reported as lost).
    fn push_all(&mut self, shared: &BrokerShared, routed: &Arc<Routed>, targets: &[SubRef]) {
        for target in targets {
            match push_to(&shared.stats, target, Entry::new(routed.clone())) {
                Pushed::Done => {}
                Pushed::Full => {
                    bump(&shared.stats.dropped_queue_full);
                    routed.report_lost(target.key);
                }
                Pushed::Gone => {
                    self.pipeline.counters().subscriber_gone += 1;
                    routed.report_lost(target.key);
                }
            }
        }
    }

    /// The plain subscriptions of `matches`, then one member of each queue
    /// group assigned to this broker (`own`), chosen as a local publish
    /// chooses (by its message group when it has one).
    fn targets(&mut self, matches: &MatchResult<SubRef>, travelling: &Travelling, own: &str) -> Vec<SubRef> {
        let mut targets = matches.plain.clone();
        let message_group = crate::pipeline::message_group_of(&travelling.message);
        for assignment in travelling.groups.iter().filter(|assignment| assignment.broker == own) {
            let members =
                matches.groups.iter().find(|(name, _)| **name == *assignment.group).map(|(_, members)| members);
            match members.and_then(|members| self.pipeline.pick_member(&assignment.group, members, message_group)) {
                Some(member) => targets.push(member),
                // The member left after the origin chose this broker.
                None => self.pipeline.counters().subscriber_gone += 1,
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
        let broker = Arc::downgrade(shared);
        let route: std::sync::Weak<dyn crate::report::ReportRoute> = broker;
        let sink = ReportSink::Origin {
            route,
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
