//! One memory budget for everything a broker queues towards its clients.
//!
//! Each connection's outbox is bounded on its own
//! (`limits.max_pending_bytes_per_connection`), but a hostile or careless
//! client can open many connections, or many HTTP subscriptions that it
//! never reads, and the per-connection bounds then add up to more memory
//! than the machine has. The budget (`limits.memory_bytes_max`, as
//! RabbitMQ's memory watermark) is shared by every outbox: a delivery that
//! would take the total past it meets its subscription's slow-consumer
//! policy as a full queue would (a `block` subscription holds its
//! publishers back, `drop-new` drops, `keep-last` evicts its oldest,
//! `disconnect` disconnects), and an outbox gives its bytes back when its
//! connection goes.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes queued across every outbox, against a maximum.
#[derive(Debug)]
pub struct MemoryBudget {
    used_bytes: AtomicU64,
    max_bytes: u64,
}

impl MemoryBudget {
    /// A budget of `max_bytes`, none of it used.
    pub fn new(max_bytes: u64) -> MemoryBudget {
        MemoryBudget { used_bytes: AtomicU64::new(0), max_bytes }
    }

    /// True when `bytes` more would take the total past the maximum.
    pub fn would_exceed(&self, bytes: u64) -> bool {
        self.used_bytes.load(Ordering::Relaxed).saturating_add(bytes) > self.max_bytes
    }

    /// Counts `bytes` as queued.
    pub fn take(&self, bytes: u64) {
        self.used_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Gives `bytes` back.
    pub fn give_back(&self, bytes: u64) {
        let before = self.used_bytes.fetch_sub(bytes, Ordering::Relaxed);
        debug_assert!(before >= bytes, "the budget gives back only what was taken");
    }

    /// Bytes queued now.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes.load(Ordering::Relaxed)
    }

    /// The maximum.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }
}
