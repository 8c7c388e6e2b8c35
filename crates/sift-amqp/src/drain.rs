//! Drain: a consumer asks for what the broker has, now, and no more.
//!
//! A receiver that sets `drain` in its flow asks the sender to use its
//! credit on the messages it has and then to give up the rest of the
//! credit (AMQP 1.0 part 2, §2.6.7). Qpid JMS drains for `receiveNoWait`,
//! for `receive(timeout)` once the time is up, and for every step of a
//! `QueueBrowser`'s enumeration: the drain's answer with nothing in front of
//! it means "there is nothing", and a browser stops there.
//!
//! The AMQP library answers a drain at once, whatever the consumer's link
//! was about to send, so a browser created just after its queue filled
//! would see nothing. Here the stream check ([`crate::stream`]) holds a
//! drain flow back (and every frame after it) until the consumer's link has
//! sent what its subscription has ready, within the credit; only then does
//! the library read the flow and answer it. What is ready: for a live
//! subscription, the deliveries that have reached this front-end; for one
//! that reads a stream (a queue, a browser, a durable subscriber), whose
//! messages the broker reads from the disk meanwhile, everything stored,
//! which the broker says it has given with a `CAUGHT_UP` marker
//! (`docs/PROTOCOL.md` §4.21), waited for at most
//! `amqp.drain_wait_ms_max`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Context;

use futures_util::task::AtomicWaker;
use tokio::sync::Notify;

/// One consumer's drain requests: raised by the stream check, answered by
/// the consumer's link.
#[derive(Debug, Default)]
pub struct DrainSignal {
    /// A drain waits for the consumer.
    pending: AtomicBool,
    /// Wakes the consumer when a drain comes.
    requested: Notify,
    /// Wakes the stream check when the consumer is done.
    released: AtomicWaker,
}

impl DrainSignal {
    /// Asks the consumer to send what it has.
    pub fn request(&self) {
        self.pending.store(true, Ordering::Release);
        self.requested.notify_one();
    }

    /// Waits until a drain is asked for.
    pub async fn requested(&self) {
        self.requested.notified().await;
    }

    /// The consumer sent what it had: the drain goes on to the library.
    pub fn release(&self) {
        self.pending.store(false, Ordering::Release);
        self.released.wake();
    }

    /// True once the consumer released the drain; otherwise the stream
    /// check is woken when it does.
    pub fn poll_released(&self, context: &Context<'_>) -> bool {
        self.released.register(context.waker());
        !self.pending.load(Ordering::Acquire)
    }
}

/// The drain signals of a connection's consumer links, by link name (a
/// flow names its link by handle; the stream check knows each handle's
/// name from its attach).
///
/// The stream check makes a link's signal when it reads the client's
/// attach, before the library (and so the consumer) has seen it: a client
/// may send its attach, its credit and a drain in one write, and the drain
/// must be held however early it comes. The consumer takes the signal up
/// when it starts ([`Drains::claim`]); a link that no consumer serves (one
/// refused at attach) loses its signal when the client detaches it, and a
/// held drain never waits longer than `amqp.drain_wait_ms_max` anyway.
#[derive(Debug, Default)]
pub struct Drains {
    by_link_name: Mutex<HashMap<String, Arc<DrainSignal>>>,
}

impl Drains {
    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<DrainSignal>>> {
        self.by_link_name.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The client attaches a link it receives on, named `name`.
    pub fn expect(&self, name: &str) {
        self.links().entry(name.to_string()).or_default();
    }

    /// The consumer of the link `name` starts: the signal it answers drains
    /// on until [`Drains::forget`].
    pub fn claim(&self, name: &str) -> Arc<DrainSignal> {
        self.links().entry(name.to_string()).or_default().clone()
    }

    /// The link `name` is gone (its consumer ended, or the client detached
    /// it): a drain it holds goes on.
    pub fn forget(&self, name: &str) {
        if let Some(signal) = self.links().remove(name) {
            signal.release();
        }
    }

    /// The signal of the link `name`, if it is known.
    pub fn of_link(&self, name: &str) -> Option<Arc<DrainSignal>> {
        self.links().get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_drain_is_held_until_its_consumer_releases_it() {
        let drains = Drains::default();
        assert!(drains.of_link("consumer-1").is_none());
        drains.expect("consumer-1");
        let held = drains.of_link("consumer-1").expect("expected");
        held.request();
        let signal = drains.claim("consumer-1");
        assert!(Arc::ptr_eq(&signal, &held), "the consumer takes up the signal the stream check made");
        signal.requested().await;
        let waker = futures_util::task::noop_waker();
        let context = Context::from_waker(&waker);
        assert!(!held.poll_released(&context), "held until the consumer is done");
        signal.release();
        assert!(held.poll_released(&context));
        held.request();
        drains.forget("consumer-1");
        assert!(held.poll_released(&context), "a link that goes releases what it held");
        assert!(drains.of_link("consumer-1").is_none());
    }
}
