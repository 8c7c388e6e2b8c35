//! Delivery reports: the JBI "sync" mode, where a publisher's confirm waits
//! until every subscription the message matched has acknowledged it, on this
//! broker and on every other broker the message was forwarded to.
//!
//! A report is shared by all local copies of one message. Each local
//! subscription that owes an acknowledgement is listed by its key; an ack
//! crosses it off, a loss (dropped, subscriber gone) marks it failed, and a
//! move to another queue-group member renames it. Each other broker the
//! message reaches owes one `DELIVERY_REPORT` (`docs/PROTOCOL.md` §10.8)
//! that brings its own matched, acked and pending figures. When nothing is
//! owed any more, or when the timeout fires first, the report is finished
//! and goes to its [`ReportSink`] once; later events are ignored.
//!
//! The same type serves both ends: at the origin the sink is the
//! publisher's `CONFIRM`; at a broker that received a forwarded message the
//! sink is a `DELIVERY_REPORT` towards the origin.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};

use sift_net::BrokerName;
use sift_proto::link::DeliveryReportFrame;
use sift_proto::{Confirm, ConfirmStatus, Frame};

use crate::conn::ConnShared;

/// The way back to a message's origin broker for its `DELIVERY_REPORT`:
/// the link network, reached through the broker's state (which implements
/// this). Reports sit below the links, so they know the way only as this.
pub trait ReportRoute: Send + Sync + std::fmt::Debug {
    /// This broker's name: the report's reporter.
    fn reporter(&self) -> BrokerName;

    /// Sends `frame` towards its origin over the links.
    fn route_report(&self, frame: DeliveryReportFrame);
}

/// Where a finished report goes.
#[derive(Debug)]
pub enum ReportSink {
    /// The publisher's `CONFIRM` for its request.
    Publisher {
        /// The publishing connection.
        conn: Arc<ConnShared>,
        /// The publish's request id.
        request_id: u64,
        /// For a persistent message: the gate that holds the confirm until
        /// the message is stored too.
        gate: Option<Arc<crate::store::gate::ConfirmGate>>,
    },
    /// A `DELIVERY_REPORT` towards the broker the message was published at.
    Origin {
        /// The way to the origin, held weakly: a report left in a queue
        /// must not keep a stopped broker alive.
        route: Weak<dyn ReportRoute>,
        /// The message's origin.
        origin: BrokerName,
        /// The origin's number for the message.
        origin_sequence: u64,
    },
}

/// One await=delivered message waiting for acknowledgements.
#[derive(Debug)]
pub struct DeliveryReport {
    sink: ReportSink,
    state: Mutex<ReportState>,
}

#[derive(Debug, Default)]
struct ReportState {
    /// Subscription key → label of local subscriptions that still owe an ack.
    outstanding: HashMap<u64, String>,
    /// Other brokers that still owe a `DELIVERY_REPORT`.
    brokers: BTreeSet<BrokerName>,
    /// Labels of subscriptions that lost the message (remote ones with `@broker`).
    failed: Vec<String>,
    matched: u32,
    acked: u32,
    finished: bool,
}

impl DeliveryReport {
    /// A report for `matched` local subscriptions, to be filled with
    /// [`Self::expect`] and [`Self::expect_broker`].
    pub fn new(sink: ReportSink, matched: u32) -> Arc<DeliveryReport> {
        let state = ReportState { matched, ..ReportState::default() };
        Arc::new(DeliveryReport { sink, state: Mutex::new(state) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ReportState> {
        // A panic while holding this lock cannot leave the state half-updated
        // in a way that matters more than losing the report, so recover it.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that subscription `key` (named `label`) owes an ack.
    pub fn expect(&self, key: u64, label: String) {
        self.lock().outstanding.insert(key, label);
    }

    /// Records that `broker` owes a `DELIVERY_REPORT`.
    pub fn expect_broker(&self, broker: BrokerName) {
        self.lock().brokers.insert(broker);
    }

    /// Subscription `key` acknowledged the message.
    pub fn acked(&self, key: u64) {
        let mut state = self.lock();
        if state.outstanding.remove(&key).is_some() {
            state.acked += 1;
        }
        self.finish_if_settled(state);
    }

    /// Subscription `key` lost the message for good.
    pub fn failed(&self, key: u64) {
        let mut state = self.lock();
        if let Some(label) = state.outstanding.remove(&key) {
            state.failed.push(label);
        }
        self.finish_if_settled(state);
    }

    /// The message moved from subscription `from` to `to` (queue-group failover).
    pub fn reassign(&self, from: u64, to: u64, label: String) {
        let mut state = self.lock();
        if state.outstanding.remove(&from).is_some() {
            state.outstanding.insert(to, label);
        }
    }

    /// `broker` reported how the message fared there. A report from a
    /// broker not expected (one the origin's view did not include) still
    /// adds its figures.
    pub fn broker_reported(&self, report: &DeliveryReportFrame) {
        let mut state = self.lock();
        if state.finished {
            return;
        }
        state.brokers.remove(report.reporter.as_str());
        state.matched = state.matched.saturating_add(report.matched);
        state.acked = state.acked.saturating_add(report.acked);
        state.failed.extend(report.pending.iter().cloned());
        self.finish_if_settled(state);
    }

    /// The await timed out: report whoever has not acknowledged, and each
    /// broker that sent no report as `@broker`.
    pub fn time_out(&self) {
        let mut state = self.lock();
        if state.finished {
            return;
        }
        let mut pending: Vec<String> = state.outstanding.drain().map(|(_, label)| label).collect();
        pending.sort();
        pending.append(&mut state.failed);
        pending.extend(std::mem::take(&mut state.brokers).into_iter().map(|broker| format!("@{broker}")));
        state.finished = true;
        let (matched, acked) = (state.matched, state.acked);
        drop(state);
        self.send(ConfirmStatus::Incomplete, matched, acked, pending);
    }

    /// Times the report out after `timeout_ms`, or at once when the broker
    /// shuts down (`shutdown`); nothing when it is already finished.
    pub fn time_out_after(self: &Arc<Self>, timeout_ms: u32, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        if self.is_finished() {
            return;
        }
        let report = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(u64::from(timeout_ms))) => {}
                _ = shutdown.changed() => {}
            }
            report.time_out();
        });
    }

    /// True once the report has gone to its sink.
    pub fn is_finished(&self) -> bool {
        self.lock().finished
    }

    /// Sends the report now if nothing is owed (a report that expects nothing).
    pub fn finish_if_empty(&self) {
        let state = self.lock();
        self.finish_if_settled(state);
    }

    fn finish_if_settled(&self, mut state: std::sync::MutexGuard<'_, ReportState>) {
        if state.finished || !state.outstanding.is_empty() || !state.brokers.is_empty() {
            return;
        }
        state.finished = true;
        let failed = std::mem::take(&mut state.failed);
        let (matched, acked) = (state.matched, state.acked);
        drop(state);
        let status = if failed.is_empty() { ConfirmStatus::Delivered } else { ConfirmStatus::Incomplete };
        self.send(status, matched, acked, failed);
    }

    fn send(&self, status: ConfirmStatus, matched: u32, acked: u32, pending: Vec<String>) {
        match &self.sink {
            ReportSink::Publisher { conn, request_id, gate } => {
                let confirm = Confirm {
                    request_id: *request_id,
                    status,
                    matched,
                    acked,
                    pending,
                    stream: String::new(),
                    stream_seq: 0,
                };
                match gate {
                    Some(gate) => gate.confirm(confirm),
                    None => conn.send_control(&Frame::Confirm(confirm)),
                }
            }
            ReportSink::Origin { route, origin, origin_sequence } => {
                let Some(route) = route.upgrade() else { return };
                let reporter = route.reporter();
                let pending = pending
                    .into_iter()
                    .map(|label| if label.starts_with('@') { label } else { format!("{label}@{reporter}") })
                    .collect();
                let frame = DeliveryReportFrame {
                    origin: origin.to_string(),
                    origin_sequence: *origin_sequence,
                    reporter: reporter.to_string(),
                    matched,
                    acked,
                    pending,
                };
                route.route_report(frame);
            }
        }
    }
}
