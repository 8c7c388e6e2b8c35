//! A commit is answered once its messages are confirmed.
//!
//! The AMQP library serves local transactions by holding a transaction's
//! transfers in its session and handing them to the producers' links when
//! the controller commits; it answers the commit (`accepted` on the
//! `discharge`) as soon as it has handed them over, before the broker has
//! published, let alone stored, any of them. A JMS `commit()` that returns
//! then could lose its persistent messages to a crash a moment later.
//!
//! So the commit's answer waits: the stream check ([`crate::stream`]) notes
//! which deliveries (producer link name and delivery id) each transaction
//! posted, and when the client commits it, [`Commits::expect`] records them
//! as outstanding; each producer link reports a delivery once the broker
//! confirmed or refused it ([`Commits::published`]); and the connection's
//! write side holds the disposition that answers the discharge, with every
//! frame behind it, until none is outstanding ([`Commits::holds`]), or at
//! most `amqp.commit_wait_ms_max`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::Context;

use fe2o3_amqp::types::definitions::Role;
use fe2o3_amqp::types::performatives::Disposition;
use futures_util::task::AtomicWaker;

/// A delivery a producer link received: its link's name and its id.
pub type PostedDelivery = (String, u32);

/// The commits whose answer waits, by the session channel and the delivery
/// id of their `discharge`.
#[derive(Debug, Default)]
pub struct Commits {
    waiting: Mutex<HashMap<(u16, u32), HashSet<PostedDelivery>>>,
    /// `waiting.len()`, read without the lock on every published delivery.
    waiting_count: AtomicUsize,
    /// Wakes the write side when a commit's last delivery is published.
    written: AtomicWaker,
}

impl Commits {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<(u16, u32), HashSet<PostedDelivery>>> {
        self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The client commits the transaction whose deliveries are `posted`
    /// with the `discharge` `discharge_id` on `channel`.
    pub fn expect(&self, channel: u16, discharge_id: u32, posted: Vec<PostedDelivery>) {
        let mut waiting = self.waiting();
        waiting.insert((channel, discharge_id), posted.into_iter().collect());
        self.waiting_count.store(waiting.len(), Ordering::Release);
    }

    /// True while some commit waits.
    pub fn any_waiting(&self) -> bool {
        self.waiting_count.load(Ordering::Acquire) > 0
    }

    /// The broker confirmed (or refused) the delivery `delivery_id` of the
    /// producer link `link_name`.
    pub fn published(&self, link_name: &str, delivery_id: u32) {
        if !self.any_waiting() {
            return;
        }
        let delivery = (link_name.to_string(), delivery_id);
        let mut waiting = self.waiting();
        let mut completed = false;
        for outstanding in waiting.values_mut() {
            completed |= outstanding.remove(&delivery) && outstanding.is_empty();
        }
        drop(waiting);
        if completed {
            self.written.wake();
        }
    }

    /// Whether the disposition `disposition`, on `channel`, answers a
    /// commit that still waits; a commit found complete is forgotten. The
    /// write side is woken when that changes.
    pub fn holds(&self, channel: u16, disposition: &Disposition, context: &Context<'_>) -> bool {
        if disposition.role != Role::Receiver {
            return false;
        }
        self.written.register(context.waker());
        let last = disposition.last.unwrap_or(disposition.first);
        let mut waiting = self.waiting();
        let answered: Vec<(u16, u32)> = waiting
            .keys()
            .filter(|(waiting_channel, id)| *waiting_channel == channel && (disposition.first..=last).contains(id))
            .copied()
            .collect();
        let mut holds = false;
        for key in answered {
            match waiting.get(&key).is_some_and(|outstanding| !outstanding.is_empty()) {
                true => holds = true,
                false => {
                    waiting.remove(&key);
                }
            }
        }
        self.waiting_count.store(waiting.len(), Ordering::Release);
        holds
    }

    /// Gives up waiting for every commit answered by a disposition on
    /// `channel` (the wait passed `amqp.commit_wait_ms_max`).
    pub fn give_up(&self, channel: u16, disposition: &Disposition) {
        let last = disposition.last.unwrap_or(disposition.first);
        let mut waiting = self.waiting();
        waiting.retain(|(waiting_channel, id), _| {
            !(*waiting_channel == channel && (disposition.first..=last).contains(id))
        });
        self.waiting_count.store(waiting.len(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fe2o3_amqp::types::messaging::{Accepted, DeliveryState};

    fn answer(first: u32) -> Disposition {
        Disposition {
            role: Role::Receiver,
            first,
            last: None,
            settled: true,
            state: Some(DeliveryState::Accepted(Accepted {})),
            batchable: false,
        }
    }

    #[test]
    fn a_commits_answer_is_held_until_its_deliveries_are_published() {
        let commits = Commits::default();
        let waker = futures_util::task::noop_waker();
        let context = Context::from_waker(&waker);
        assert!(!commits.holds(0, &answer(7), &context), "no commit waits");
        commits.expect(0, 7, vec![("producer".into(), 3), ("producer".into(), 4)]);
        assert!(commits.any_waiting());
        assert!(!commits.holds(1, &answer(7), &context), "another session's disposition");
        assert!(commits.holds(0, &answer(7), &context));
        commits.published("producer", 3);
        assert!(commits.holds(0, &answer(7), &context), "one delivery still outstanding");
        commits.published("other", 4);
        assert!(commits.holds(0, &answer(7), &context), "the same id on another link is another delivery");
        commits.published("producer", 4);
        assert!(!commits.holds(0, &answer(7), &context), "answered once all are published");
        assert!(!commits.any_waiting(), "and forgotten");
    }

    #[test]
    fn giving_up_lets_the_answer_through() {
        let commits = Commits::default();
        let waker = futures_util::task::noop_waker();
        let context = Context::from_waker(&waker);
        commits.expect(2, 9, vec![("producer".into(), 1)]);
        commits.give_up(2, &answer(9));
        assert!(!commits.holds(2, &answer(9), &context));
        assert!(!commits.any_waiting());
    }
}
