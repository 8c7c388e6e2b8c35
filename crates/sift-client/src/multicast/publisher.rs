//! The multicast publisher: messages numbered, encoded once, queued by
//! priority, handed to NORM as its transmit buffer allows.

use std::collections::BinaryHeap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sift_core::{DeliveryMode, Message};

use super::{
    MulticastError, MulticastOptions, MODE_BEST_EFFORT, MODE_RELIABLE, MULTICAST_MESSAGE_BYTES_MAX, WIRE_VERSION,
};

/// Messages queued ahead of NORM's transmit buffer; a publish beyond it
/// waits for the buffer.
pub const PUBLISH_QUEUE_MAX: usize = 1024;

/// One queued message: higher priority first, then publish order.
#[derive(Debug, PartialEq, Eq)]
struct Queued {
    priority: u8,
    order: std::cmp::Reverse<u64>,
    /// Sent with NORM info, from which receivers switch repair off.
    best_effort: bool,
    data: Bytes,
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.priority, &self.order).cmp(&(other.priority, &other.order))
    }
}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Publishes to a multicast group with no broker.
pub struct MulticastPublisher {
    session: sift_norm::Session,
    name: Arc<str>,
    sequence: u64,
    queue: BinaryHeap<Queued>,
    linger: std::time::Duration,
}

impl MulticastPublisher {
    /// Joins `options.group` as a sender named `name`.
    pub fn open(options: &MulticastOptions, name: &str) -> Result<MulticastPublisher, MulticastError> {
        MulticastPublisher::with_session(options, name, false)
    }

    /// Joins `options.group` as a sender that also receives (a gateway),
    /// on one session: a second socket on the group's port would share the
    /// group's packets with this one.
    pub fn open_receiving(options: &MulticastOptions, name: &str) -> Result<MulticastPublisher, MulticastError> {
        MulticastPublisher::with_session(options, name, true)
    }

    fn with_session(
        options: &MulticastOptions,
        name: &str,
        receive: bool,
    ) -> Result<MulticastPublisher, MulticastError> {
        let session = sift_norm::Session::open(&options.session(), true, receive)?;
        Ok(MulticastPublisher {
            session,
            name: name.into(),
            sequence: 0,
            queue: BinaryHeap::new(),
            linger: options.linger,
        })
    }

    /// Stamps, encodes and queues `message`, then sends what NORM's buffer
    /// takes, highest priority first; waits only when the queue is full.
    pub async fn publish(&mut self, mut message: Message) -> Result<(), MulticastError> {
        message.publisher = self.name.clone();
        message.timestamp_ns = crate::system_now_ns();
        message.time_error_ns = 0;
        self.forward(message).await
    }

    /// Queues `message` as [`Self::publish`] does but keeps its publisher
    /// and time (a gateway carrying a message from beyond the LAN); only
    /// the sequence is this sender's, since receivers order by sender.
    pub async fn forward(&mut self, mut message: Message) -> Result<(), MulticastError> {
        self.sequence += 1;
        message.sequence = self.sequence;
        let mode = match message.delivery_mode {
            DeliveryMode::BestEffort => MODE_BEST_EFFORT,
            DeliveryMode::Reliable | DeliveryMode::Persistent => MODE_RELIABLE,
        };
        // The object header first, then the message encoded after it: one buffer, no copy.
        let mut encoded = BytesMut::new();
        encoded.extend_from_slice(&[WIRE_VERSION, mode]);
        sift_proto::encode_message(&mut encoded, &message)
            .map_err(|error| MulticastError::Encode(error.to_string()))?;
        if encoded.len() > MULTICAST_MESSAGE_BYTES_MAX {
            let why = format!("{} bytes encoded, over {MULTICAST_MESSAGE_BYTES_MAX}", encoded.len());
            return Err(MulticastError::Encode(why));
        }
        let queued = Queued {
            priority: message.priority.level(),
            order: std::cmp::Reverse(self.sequence),
            best_effort: mode == MODE_BEST_EFFORT,
            data: encoded.freeze(),
        };
        self.queue.push(queued);
        self.drain(PUBLISH_QUEUE_MAX).await
    }

    /// Hands NORM what its buffer takes, highest priority first, waiting
    /// for room until at most `keep` messages remain queued.
    async fn drain(&mut self, keep: usize) -> Result<(), MulticastError> {
        loop {
            let vacancy = self.session.vacancy();
            let mut full = false;
            while let Some(next) = self.queue.peek() {
                let info: &[u8] = if next.best_effort { &next.data[..2] } else { &[] };
                if !self.session.try_send_now(&next.data, info) {
                    full = true;
                    break;
                }
                self.queue.pop();
            }
            if !full || self.queue.len() <= keep {
                return Ok(());
            }
            vacancy.await;
        }
    }

    /// Sends everything queued and waits for NORM's flush after the last
    /// message: receivers have had their chance to ask for repairs.
    pub async fn flush(&mut self) -> Result<(), MulticastError> {
        self.drain(0).await?;
        self.session.flush().await;
        Ok(())
    }

    /// Flushes, then keeps serving repairs for the linger time: what a
    /// publisher does before it goes away.
    pub async fn close(mut self) -> Result<(), MulticastError> {
        self.flush().await?;
        tokio::time::sleep(self.linger).await;
        Ok(())
    }

    /// The next event of the session (with [`Self::open_receiving`]).
    pub async fn next_event(&mut self) -> Option<sift_norm::Event> {
        self.session.next_event().await
    }

    /// Messages sent to NORM so far.
    pub fn sent(&self) -> u64 {
        self.session.counters().sent.load(std::sync::atomic::Ordering::Relaxed)
    }
}
