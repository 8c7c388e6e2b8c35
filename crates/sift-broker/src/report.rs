//! Delivery reports: the JBI "sync" mode, where a publisher's confirm waits
//! until every subscription the message matched has acknowledged it.
//!
//! A report is shared by all copies of one message. Each subscription that
//! owes an acknowledgement is listed by its key; an ack crosses it off, a
//! loss (dropped, subscriber gone) marks it failed, and a move to another
//! queue-group member renames it. When nothing is owed any more, or when the
//! timeout fires first, the publisher gets one `CONFIRM` and the report is
//! finished; later events are ignored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sift_proto::{Confirm, ConfirmStatus, Frame};

use crate::connection::ConnShared;

/// One await=delivered publish waiting for acknowledgements.
#[derive(Debug)]
pub struct DeliveryReport {
    publisher: Arc<ConnShared>,
    request_id: u64,
    matched: u32,
    state: Mutex<ReportState>,
}

#[derive(Debug, Default)]
struct ReportState {
    /// Subscription key → label of subscriptions that still owe an ack.
    outstanding: HashMap<u64, String>,
    /// Labels of subscriptions that lost the message.
    failed: Vec<String>,
    acked: u32,
    finished: bool,
}

impl DeliveryReport {
    /// A report for `matched` subscriptions, to be filled with [`Self::expect`].
    pub fn new(publisher: Arc<ConnShared>, request_id: u64, matched: u32) -> Arc<DeliveryReport> {
        Arc::new(DeliveryReport { publisher, request_id, matched, state: Mutex::new(ReportState::default()) })
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

    /// The await timed out: report whoever has not acknowledged.
    pub fn time_out(&self) {
        let mut state = self.lock();
        if state.finished {
            return;
        }
        let mut pending: Vec<String> = state.outstanding.drain().map(|(_, label)| label).collect();
        pending.sort();
        pending.append(&mut state.failed);
        state.finished = true;
        let acked = state.acked;
        drop(state);
        self.send(ConfirmStatus::Incomplete, acked, pending);
    }

    /// True once the confirm has been sent.
    pub fn is_finished(&self) -> bool {
        self.lock().finished
    }

    fn finish_if_settled(&self, mut state: std::sync::MutexGuard<'_, ReportState>) {
        if state.finished || !state.outstanding.is_empty() {
            return;
        }
        state.finished = true;
        let failed = std::mem::take(&mut state.failed);
        let acked = state.acked;
        drop(state);
        let status = if failed.is_empty() { ConfirmStatus::Delivered } else { ConfirmStatus::Incomplete };
        self.send(status, acked, failed);
    }

    fn send(&self, status: ConfirmStatus, acked: u32, pending: Vec<String>) {
        let confirm = Confirm { request_id: self.request_id, status, matched: self.matched, acked, pending };
        self.publisher.send_control(&Frame::Confirm(confirm));
    }
}
