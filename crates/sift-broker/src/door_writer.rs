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
use std::pin::Pin;
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};
use sift_core::Message;
use tokio::sync::Semaphore;

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
    /// gone, which ends the session. It waits while the connection writer
    /// is full: the outbox's bounds and policies then take over.
    fn send(&self, encoded: Bytes) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;

    /// An empty buffer the door's connection writer is done with, for the
    /// next batch: batches then go round between the two tasks instead of
    /// being allocated on one thread and freed on the other, which costs
    /// the allocator fresh pages each time.
    fn reuse(&self) -> Option<BytesMut> {
        None
    }
}

/// The batch buffers of one door writer: at most `batches` written by the
/// broker and not yet sent by the door's connection writer (one permit
/// each, the bound of what a door holds), and the sent ones kept for the
/// next batches ([`DoorWriter::reuse`]).
#[derive(Debug)]
pub struct BatchPool {
    spare: Mutex<Vec<BytesMut>>,
    in_flight: Semaphore,
    batches: usize,
}

impl BatchPool {
    /// A pool for `batches` batches in flight.
    pub fn new(batches: usize) -> BatchPool {
        BatchPool { spare: Mutex::new(Vec::with_capacity(batches)), in_flight: Semaphore::new(batches), batches }
    }

    /// Waits until one more batch may be in flight, and counts it.
    pub async fn acquire(&self) {
        if let Ok(permit) = self.in_flight.acquire().await {
            permit.forget();
        }
    }

    /// A counted batch was not handed on after all.
    pub fn release(&self) {
        self.in_flight.add_permits(1);
    }

    /// The door's connection writer sent `written`: its permit comes back,
    /// and its buffer, if nothing else holds it, is kept for reuse.
    pub fn give_back(&self, written: Bytes) {
        self.release();
        let Ok(mut buffer) = written.try_into_mut() else { return };
        buffer.clear();
        let mut spare = self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if spare.len() < self.batches {
            spare.push(buffer);
        }
    }

    /// A sent batch's buffer, empty, for [`DoorWriter::reuse`].
    pub fn reuse(&self) -> Option<BytesMut> {
        self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop()
    }
}
