//! How many messages each queue holds, and the bound on it.
//!
//! A queue (`MANAGE queue_declare`, STOMP `/queue/`, a JMS `Queue`) keeps
//! what is sent to it in the queue stream until one of its consumers takes
//! it. The stream is shared by every queue, so its retention cannot bound
//! one queue; this count does. It goes up when a message on the queue's
//! topic is stored and down when the queue's durable subscription is done
//! with one (acknowledged, rejected, or expired), and a publish that would
//! take it past `storage.queue_max_msgs` is refused (`queue_full`) before it
//! is stored. A restarting broker counts it again from the stored messages
//! its durable has not had acknowledged.

use std::sync::atomic::{AtomicU64, Ordering};

/// One queue's count of waiting messages.
#[derive(Debug)]
pub struct QueueDepth {
    /// Stored and not yet done with.
    waiting: AtomicU64,
    /// The most that may wait.
    waiting_max: u64,
}

impl QueueDepth {
    /// A queue holding `waiting` messages, at most `waiting_max`.
    pub fn new(waiting: u64, waiting_max: u64) -> QueueDepth {
        QueueDepth { waiting: AtomicU64::new(waiting), waiting_max }
    }

    /// Counts one more waiting message if the queue has room; otherwise
    /// the bound, for the refusal.
    pub fn admit(&self) -> Result<(), u64> {
        self.waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |waiting| {
                (waiting < self.waiting_max).then_some(waiting + 1)
            })
            .map(|_| ())
            .map_err(|_| self.waiting_max)
    }

    /// Counts one more waiting message whatever the bound: one another
    /// broker accepted and forwarded, which this one cannot refuse.
    pub fn add(&self) {
        self.waiting.fetch_add(1, Ordering::AcqRel);
    }

    /// One waiting message is gone: taken, dropped, or not stored after all.
    pub fn taken(&self) {
        // Never below zero: a message stored before the count began (a
        // queue declared while messages on its topic were being stored)
        // may be taken without having been counted.
        let _ = self.waiting.fetch_update(Ordering::AcqRel, Ordering::Acquire, |waiting| waiting.checked_sub(1));
    }

    /// Messages waiting now.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Acquire)
    }

    /// The bound.
    pub fn waiting_max(&self) -> u64 {
        self.waiting_max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_admits_up_to_its_bound_and_frees_a_place_per_message_taken() {
        let depth = QueueDepth::new(1, 2);
        assert_eq!(depth.admit(), Ok(()));
        assert_eq!(depth.admit(), Err(2), "full at the bound");
        depth.add();
        assert_eq!(depth.waiting(), 3, "a forwarded message is counted past the bound");
        for _ in 0..4 {
            depth.taken();
        }
        assert_eq!(depth.waiting(), 0, "never below zero");
        assert_eq!(depth.admit(), Ok(()));
    }
}
