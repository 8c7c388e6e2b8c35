//! Delivery reports across the network (§10.8): the origin's registry of
//! await=delivered messages, and `DELIVERY_REPORT`s travelling back to it.
//!
//! A broker that receives a `FORWARD` with `AWAITS_REPORT` reports once its
//! own copies are settled (see [`crate::report`]). The report goes to the
//! origin hop by hop, each broker sending it to the first hop of its own
//! shortest path to the origin; with symmetric link costs that is the way
//! the message came, reversed. The origin adds the figures to the
//! publisher's report, which confirms when every broker the message went to
//! has reported (or the await times out).

use std::collections::HashMap;
use std::sync::Arc;

use sift_proto::link::{DeliveryReportFrame, LinkFrame};
use tokio::sync::mpsc::error::TrySendError;

use crate::report::DeliveryReport;
use crate::stats::{bump, Stats};

use super::frames::encode;
use super::network::{LinkNetwork, NetState};

/// Await=delivered reports of messages this broker published into the
/// network, by origin sequence, bounded by `awaited_reports_max`.
#[derive(Debug)]
pub(crate) struct ReportRegistry {
    awaited: HashMap<u64, Arc<DeliveryReport>>,
    awaited_max: usize,
}

impl ReportRegistry {
    pub(crate) fn new(awaited_max: usize) -> ReportRegistry {
        ReportRegistry { awaited: HashMap::new(), awaited_max }
    }

    /// Registers `report` for the message numbered `origin_sequence`. When
    /// the registry is full of unfinished reports the report is not
    /// registered (counted): the remote brokers are then not waited for and
    /// the await times out.
    pub(crate) fn insert(&mut self, origin_sequence: u64, report: Arc<DeliveryReport>, stats: &Stats) -> bool {
        if self.awaited.len() >= self.awaited_max {
            // Finished reports (confirmed, or timed out) are only removed
            // here and when their last broker reports; sweep them now.
            self.awaited.retain(|_, held| !held.is_finished());
        }
        if self.awaited.len() >= self.awaited_max {
            bump(&stats.awaited_reports_full);
            return false;
        }
        self.awaited.insert(origin_sequence, report);
        true
    }
}

impl LinkNetwork {
    /// Sends a `DELIVERY_REPORT` of this broker's towards the origin.
    pub(crate) fn route_report(&self, frame: DeliveryReportFrame, stats: &Stats) {
        bump(&stats.delivery_reports_sent);
        self.lock().route_report(frame, stats);
    }

    /// Takes a `DELIVERY_REPORT` received from a neighbour.
    pub(crate) fn receive_report(&self, frame: DeliveryReportFrame, stats: &Stats) {
        bump(&stats.delivery_reports_received);
        self.lock().route_report(frame, stats);
    }
}

impl NetState {
    /// Applies a report addressed to this broker, or sends it on towards its
    /// origin. A report nobody awaits any more, or with no way to its
    /// origin, is dropped (counted): the publisher's await times out.
    fn route_report(&mut self, frame: DeliveryReportFrame, stats: &Stats) {
        if frame.origin == *self.own_name {
            let registry = &mut self.forward.reports.awaited;
            match registry.get(&frame.origin_sequence) {
                Some(report) => {
                    report.broker_reported(&frame);
                    if report.is_finished() {
                        registry.remove(&frame.origin_sequence);
                    }
                }
                None => bump(&stats.delivery_reports_dropped),
            }
            return;
        }
        let hop = self.topology.tree(&self.own_name).first_hop(&frame.origin);
        let Some(live) = hop.as_ref().and_then(|hop| self.links.get(hop)) else {
            bump(&stats.delivery_reports_dropped);
            return;
        };
        let Some(bytes) = encode(&LinkFrame::DeliveryReport(frame)) else { return };
        if let Err(TrySendError::Full(_)) = live.sender.try_send(bytes) {
            bump(&stats.delivery_reports_dropped);
        }
    }
}
