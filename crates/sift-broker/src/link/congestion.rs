//! Backpressure from broker links to whoever feeds them.
//!
//! A link's send queue is bounded (`link_send_queue_frames`). Without
//! backpressure a fast publisher fills it and best-effort messages are
//! dropped by the thousand while the link is merely busy. So when a queue
//! is half full the broker marks itself *congested*, and the
//! readers that feed links (client connections and link sessions) wait
//! before their next socket read until a link writer has drained its queue
//! below a quarter, or for at most `link_stall_ms_max`. Their senders then
//! meet TCP flow control, hop by hop back to the publisher, as on a single
//! broker whose subscribers are slow. The wait is bounded so that a link
//! that is dead but not yet noticed (silent for less than three ping
//! intervals) slows publishing down without stopping it.
//!
//! The wait happens between socket reads, and a read takes at most
//! `delivery.read_buffer_bytes`; so a queue's other half must hold what one
//! read can carry (65 536 bytes of the smallest publishes, about 2 600, fit
//! the default 8 192 frames). A read that brings more drops the excess
//! best-effort frames, counted in `forward_queue_full_dropped`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::stats::{bump, Stats};

/// The broker-wide congestion flag and the writers' signal that it cleared.
#[derive(Debug, Default)]
pub(crate) struct LinkCongestion {
    congested: AtomicBool,
    drained: Notify,
}

impl LinkCongestion {
    /// A link queue with `free` of `capacity` slots left after a send:
    /// congested when under half is free.
    pub(crate) fn after_send(&self, free: usize, capacity: usize) {
        if free < capacity / 2 && !self.congested.load(Ordering::Relaxed) {
            self.congested.store(true, Ordering::Relaxed);
        }
    }

    /// A link writer holding `queued` of `capacity` frames after a write:
    /// below a quarter, it clears the flag and wakes the waiting readers.
    pub(crate) fn after_write(&self, queued: usize, capacity: usize) {
        if queued < capacity / 4 && self.congested.swap(false, Ordering::Relaxed) {
            self.drained.notify_waiters();
        }
    }

    /// Waits while the broker is congested, for at most `stall_max`.
    pub(crate) async fn wait(&self, stall_max: Duration, stats: &Stats) {
        // Registered before the flag is read, so that a clearing in between
        // is not missed.
        let drained = self.drained.notified();
        if !self.congested.load(Ordering::Relaxed) {
            return;
        }
        bump(&stats.link_congestion_stalls);
        let _ = tokio::time::timeout(stall_max, drained).await;
    }
}
