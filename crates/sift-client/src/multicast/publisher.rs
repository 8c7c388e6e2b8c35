//! The multicast publisher: messages numbered and encoded once, then
//! queued by priority in the session's transmit queue, where those that
//! wait together leave in one NORM object (`sift_norm::batch`).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sift_core::{DeliveryMode, Message};

use super::{
    MulticastError, MulticastOptions, MODE_BEST_EFFORT, MODE_RELIABLE, MULTICAST_MESSAGE_BYTES_MAX, WIRE_VERSION,
};

/// The info of a best-effort object, from which receivers switch repair off.
const BEST_EFFORT_INFO: [u8; 2] = [WIRE_VERSION, MODE_BEST_EFFORT];

/// Publishes to a multicast group with no broker.
pub struct MulticastPublisher {
    session: sift_norm::Session,
    name: Arc<str>,
    sequence: u64,
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
        Ok(MulticastPublisher { session, name: name.into(), sequence: 0, linger: options.linger })
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
        // Objects of a best-effort message carry info: receivers learn
        // from it, before the data, not to ask for repairs.
        let info = match mode {
            MODE_BEST_EFFORT => Bytes::from_static(&BEST_EFFORT_INFO),
            _ => Bytes::new(),
        };
        self.session.send(message.priority.level(), info, encoded.freeze()).await;
        Ok(())
    }

    /// Sends everything queued and waits for NORM's flush after the last
    /// message: receivers have had their chance to ask for repairs.
    pub async fn flush(&mut self) -> Result<(), MulticastError> {
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

    /// Messages handed to NORM so far.
    pub fn sent(&self) -> u64 {
        self.session.transmit_counters().records.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// NORM objects those messages went out in (fewer when they batched).
    pub fn objects(&self) -> u64 {
        self.session.transmit_counters().objects.load(std::sync::atomic::Ordering::Relaxed)
    }
}
