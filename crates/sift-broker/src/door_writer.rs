//! A front-end's own writer of deliveries, for local sessions that want
//! the broker to write their protocol's frames.
//!
//! A local session normally hands each delivery to its front-end as a
//! `DELIVER` frame value, which the front-end's client passes to the
//! subscription's task, which writes the door's frame. With a
//! [`DoorWriter`], the broker's writer task for the session calls the
//! front-end's encoder on each delivery as it drains the outbox, and hands
//! the encoded frames of a whole batch to the front-end's connection writer
//! at once: no frame value, channel or task per delivery between the
//! outbox and the door's socket, the way nats-server delivers an MQTT
//! message through a subscription callback. Everything else (what is
//! queued, acknowledged, redelivered, dropped) is still the outbox's.

use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use sift_core::Message;
use tokio::sync::Semaphore;

use crate::budget::MemoryBudget;

/// One delivery, decoded once from its shared encoding, as a door writer
/// is given it.
#[derive(Debug)]
pub struct DoorDelivery<'a> {
    /// The subscription, as the front-end's session numbered it.
    pub sub_id: u32,
    /// Tag to acknowledge; 0 when no acknowledgement is expected.
    pub delivery_tag: u64,
    /// True when the broker delivered it before without an ack.
    pub redelivered: bool,
    /// Its stream sequence, for a stored message read by a stream
    /// subscription; 0 otherwise.
    pub stream_seq: u64,
    /// The message.
    pub message: &'a Message,
}

/// A protocol front-end's writer of its own delivery frames.
pub trait DoorWriter: Send + Sync + 'static {
    /// Appends `delivery`'s frame in the door's protocol to `out`. False
    /// for a subscription the writer does not know (one it stopped
    /// serving), whose delivery then goes to the front-end's client as a
    /// `DELIVER` frame value, as it would without a door writer.
    fn encode(&self, delivery: &DoorDelivery<'_>, out: &mut BytesMut) -> bool;

    /// Hands a batch of frames [`DoorWriter::encode`] wrote to the door's
    /// connection writer, in order; resolves to false when that writer is
    /// gone, which ends the session. The batch gives its place and its
    /// bytes back when it is dropped, written or not.
    fn send(&self, batch: DoorBatch) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;

    /// The door's batches: how many may be in flight, and the buffers of
    /// sent ones for the next.
    fn pool(&self) -> &Arc<BatchPool>;
}

/// The batch buffers of one door writer: at most `batches` written by the
/// broker and not yet sent by the door's connection writer (one permit
/// each), their bytes counted in the broker's memory budget while they
/// wait, and the sent ones kept for the next batches: batches go round
/// between the two tasks instead of being allocated on one thread and freed
/// on the other, which costs the allocator fresh pages each time.
#[derive(Debug)]
pub struct BatchPool {
    spare: Mutex<Vec<BytesMut>>,
    in_flight: Semaphore,
    batches: usize,
    /// The broker's budget, set when the door's session opens.
    budget: OnceLock<Arc<MemoryBudget>>,
}

impl BatchPool {
    /// A pool for `batches` batches in flight.
    pub fn new(batches: usize) -> Arc<BatchPool> {
        Arc::new(BatchPool {
            spare: Mutex::new(Vec::with_capacity(batches)),
            in_flight: Semaphore::new(batches),
            batches,
            budget: OnceLock::new(),
        })
    }

    /// Counts the batches in flight in `budget` from now on.
    pub(crate) fn count_in(&self, budget: Arc<MemoryBudget>) {
        let _ = self.budget.set(budget);
    }

    /// Waits until one more batch may be in flight, and makes `encoded`
    /// that batch.
    pub(crate) async fn batch(self: &Arc<Self>, encoded: Bytes) -> DoorBatch {
        if let Ok(permit) = self.in_flight.acquire().await {
            permit.forget();
        }
        if let Some(budget) = self.budget.get() {
            budget.take(encoded.len() as u64);
        }
        DoorBatch { bytes: encoded, pool: self.clone() }
    }

    /// A sent batch's buffer, empty, for the next batch.
    pub(crate) fn reuse(&self) -> Option<BytesMut> {
        self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop()
    }

    /// A batch is done: its place and bytes come back, and its buffer, if
    /// nothing else holds it, is kept for reuse.
    fn returned(&self, bytes: Bytes) {
        self.in_flight.add_permits(1);
        if let Some(budget) = self.budget.get() {
            budget.give_back(bytes.len() as u64);
        }
        let Ok(mut buffer) = bytes.try_into_mut() else { return };
        buffer.clear();
        let mut spare = self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if spare.len() < self.batches {
            spare.push(buffer);
        }
    }
}

/// A batch of a door's frames on its way to the door's connection. It
/// holds its place among the door's batches in flight and its bytes in the
/// broker's memory budget until it is dropped, written or not (a
/// connection that goes away drops what waits for it).
#[derive(Debug)]
pub struct DoorBatch {
    bytes: Bytes,
    pool: Arc<BatchPool>,
}

impl Deref for DoorBatch {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for DoorBatch {
    fn drop(&mut self) {
        self.pool.returned(std::mem::take(&mut self.bytes));
    }
}
