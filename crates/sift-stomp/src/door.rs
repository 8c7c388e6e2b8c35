//! The STOMP front-end's door writer: MESSAGE frames written by the
//! broker's writer task of the session, as it drains the session's outbox
//! (`sift_broker::door_writer`), and handed to the connection's writer a
//! batch at a time. A delivery then costs one decode of the shared
//! encoding and one MESSAGE encode, with no frame value, client dispatch,
//! per-subscription task or channel per delivery: with 1 000 selector
//! subscriptions on one connection, deliveries no longer wake 1 000 tasks.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};

use bytes::BytesMut;
use sift_broker::door_writer::{BatchPool, DoorBatch, DoorDelivery, DoorWriter};
use tokio::sync::mpsc;

use crate::mapping::encode_message_frame;
use crate::server::StompCounters;
use crate::session::{AckMode, Outgoing};

/// A STOMP subscription as its MESSAGE frames name it.
#[derive(Debug)]
pub(crate) struct Served {
    /// The client's subscription id.
    pub id: String,
    /// How the subscription wrote its destination (`/topic/`, `/queue/`
    /// or none): each MESSAGE names its own topic the same way.
    pub destination_prefix: &'static str,
    /// How the client acknowledges.
    pub mode: AckMode,
    /// Deliveries written and not yet acknowledged, oldest first (for
    /// `client` acks, which acknowledge everything up to the one named).
    pub outstanding: Outstanding,
}

/// A subscription's deliveries written and not yet acknowledged, oldest
/// first: (delivery tag, message id). 1.2 clients acknowledge by the tag
/// (the `ack` header); 1.0 and 1.1 clients by `message-id`, which is the
/// message's own id, the same on every redelivery (as JMS requires).
pub(crate) type Outstanding = Arc<Mutex<VecDeque<(u64, u64)>>>;

/// The door writer of one STOMP connection.
pub(crate) struct StompDoor {
    /// The connection's subscriptions by the id its broker session gave them.
    served: RwLock<HashMap<u32, Served>>,
    /// The connection's writer.
    out: mpsc::Sender<Outgoing>,
    counters: Arc<StompCounters>,
    /// Batches written and not yet sent (`stomp.delivery_batches`), and
    /// the buffers of sent ones.
    batches: Arc<BatchPool>,
}

impl StompDoor {
    pub(crate) fn new(out: mpsc::Sender<Outgoing>, counters: Arc<StompCounters>, batches: usize) -> StompDoor {
        StompDoor { served: RwLock::new(HashMap::new()), out, counters, batches: BatchPool::new(batches) }
    }

    /// Writes the deliveries of broker subscription `sub_id` as `served`.
    pub(crate) fn register(&self, sub_id: u32, served: Served) {
        self.served.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(sub_id, served);
    }

    /// Stops writing `sub_id`'s deliveries.
    pub(crate) fn unregister(&self, sub_id: u32) {
        self.served.write().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&sub_id);
    }
}

impl DoorWriter for StompDoor {
    fn encode(&self, delivery: &DoorDelivery<'_>, out: &mut BytesMut) -> bool {
        let served = self.served.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(subscription) = served.get(&delivery.sub_id) else { return false };
        // Deliveries that need an ack carry their tag; the others get an id
        // that acknowledges nothing (a client in client mode acks every
        // MESSAGE it gets).
        let mut ack_text = [0u8; ACK_TEXT_BYTES_MAX];
        let ack = match (subscription.mode, delivery.delivery_tag) {
            (AckMode::Auto, _) => None,
            (_, 0) => Some(ack_id(&mut ack_text, 'n', delivery.message.id)),
            (_, tag) => {
                let mut outstanding =
                    subscription.outstanding.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                outstanding.push_back((tag, delivery.message.id));
                Some(ack_id(&mut ack_text, 't', tag))
            }
        };
        encode_message_frame(
            out,
            (delivery.message, delivery.redelivered),
            &subscription.id,
            subscription.destination_prefix,
            ack,
        );
        StompCounters::bump(&self.counters.messages_delivered);
        true
    }

    fn send(&self, batch: DoorBatch) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async move { self.out.send(Outgoing::Batch(batch)).await.is_ok() })
    }

    fn pool(&self) -> &Arc<BatchPool> {
        &self.batches
    }
}

/// Longest ack id: a letter and a u64.
const ACK_TEXT_BYTES_MAX: usize = 24;

/// `prefix` and `number` as text in `buffer`, without an allocation.
pub(crate) fn ack_id(buffer: &mut [u8; ACK_TEXT_BYTES_MAX], prefix: char, number: u64) -> &str {
    let mut cursor = std::io::Cursor::new(&mut buffer[..]);
    // A letter and 20 digits fit in the buffer: the write cannot fail.
    let _ = write!(cursor, "{prefix}{number}");
    let length = cursor.position() as usize;
    std::str::from_utf8(&buffer[..length]).unwrap_or_default()
}
