//! Local sessions: the session machine's second adapter, for protocol
//! front-ends in this process.
//!
//! A socket session decodes frames from bytes and encodes what it sends;
//! a local session takes the same frames as values from a channel and
//! hands values back, so that a STOMP SEND or an MQTT PUBLISH reaches the
//! publish pipeline with no encode, pipe or decode between the front-end
//! and the core, and a delivery leaves the outbox as the message decoded
//! once from its shared encoding (its payload and strings are slices of
//! it, not copies). Everything else is the socket session's own code:
//! the same [`crate::connection::Session`] handles the frames, the same
//! outbox queues, acknowledges and redelivers, the same writer loop drains
//! it ([`crate::writer::run`]), so limits, policies, durables and
//! back-pressure hold for every door by construction.
//!
//! Each direction is a bounded channel of frame batches
//! (`delivery.local_batches`): a front-end that stops reading fills it,
//! the writer waits, and the outbox's own bounds and slow-consumer
//! policies take over, as they do for a socket whose peer stops reading.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::BytesMut;
use sift_core::Message;
use sift_proto::{decode_message, deliver_flags, DecodeError, Deliver, Frame};
use tokio::sync::mpsc;

use crate::conn::decode_whole_frames;
use crate::door::Origin;
use crate::door_writer::{DoorDelivery, DoorWriter};
use crate::outbox::{DrainSink, Routed};
use crate::session::{check_hello, open_connection, run_session, ConnectionError, Inbound};
use crate::shared::BrokerShared;
use crate::stats::bump;
use crate::writer::Outlet;

/// The front-end's ends of a local session: where it sends its frames, and
/// where the broker's frames arrive.
pub type LocalLink = (mpsc::Sender<Vec<Frame>>, mpsc::Receiver<Vec<Frame>>);

/// A local session's first frame, `HELLO`, waiting for the accept loop.
pub(crate) struct LocalRequest {
    /// The front-end's frames.
    pub requests: mpsc::Receiver<Vec<Frame>>,
    /// The broker's frames to the front-end.
    pub replies: mpsc::Sender<Vec<Frame>>,
    /// Its door and peer.
    pub origin: Origin,
    /// The front-end's own writer of deliveries, if it has one.
    pub door_writer: Option<Arc<dyn DoorWriter>>,
}

/// Serves one local session until it closes: the handshake, then the
/// session's read loop here and the writer and redelivery tasks beside it.
pub(crate) async fn serve_local(request: LocalRequest, shared: Arc<BrokerShared>, id: u64) {
    let LocalRequest { mut requests, replies, origin, door_writer } = request;
    let peer = origin.peer_text();
    let limit = std::time::Duration::from_millis(shared.config.limits.handshake_timeout_ms);
    let first = match tokio::time::timeout(limit, requests.recv()).await {
        Ok(Some(batch)) => batch,
        // The front-end gave up (or took too long) before saying HELLO.
        Ok(None) | Err(_) => return,
    };
    let mut current = first.into_iter();
    let Some(first_frame) = current.next() else { return };
    let hello = match check_hello(first_frame) {
        Ok(hello) => hello,
        Err(failure) => {
            let (error, reply) = *failure;
            tracing::debug!(connection = id, %peer, %error, "local session refused at its handshake");
            if let Some(reply) = reply {
                bump(&shared.stats.errors_sent);
                let _ = replies.send(vec![reply]).await;
            }
            return;
        }
    };
    let conn = open_connection(&shared, id, &hello, (origin.door, true), &peer);
    if let Some(door_writer) = &door_writer {
        // What waits for the door's connection counts as queued towards
        // clients, like what waits in the outbox.
        door_writer.pool().count_in(shared.memory.clone());
    }
    let outlet = LocalOutlet { replies, door_writer };
    let writer_task = tokio::spawn(crate::writer::run(conn.clone(), outlet, shared.clone()));
    let read_bytes_max = shared.config.delivery.read_buffer_bytes;
    let inbound = LocalInbound { requests, current, pending: VecDeque::new(), read_bytes_max };
    run_session(conn, shared, inbound, writer_task, &peer).await;
}

/// The front-end's frames, as they arrive in batches; each batch is handed
/// out frame by frame as it came, without moving its frames again.
struct LocalInbound {
    requests: mpsc::Receiver<Vec<Frame>>,
    /// The batch being handed out.
    current: std::vec::IntoIter<Frame>,
    /// Batches received after it.
    pending: VecDeque<Vec<Frame>>,
    /// Bytes (estimated) one read takes at most: `delivery.read_buffer_bytes`.
    read_bytes_max: usize,
}

impl LocalInbound {
    /// Queues a batch; returns its estimated size.
    fn take(&mut self, batch: Vec<Frame>) -> usize {
        let bytes = batch.iter().map(Frame::approximate_bytes).sum();
        self.pending.push_back(batch);
        bytes
    }
}

impl Inbound for LocalInbound {
    fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        loop {
            if let Some(frame) = self.current.next() {
                return Ok(Some(frame));
            }
            match self.pending.pop_front() {
                Some(batch) => self.current = batch.into_iter(),
                None => return Ok(None),
            }
        }
    }

    async fn receive(&mut self) -> Result<bool, ConnectionError> {
        let Some(batch) = self.requests.recv().await else { return Ok(false) };
        let mut taken_bytes = self.take(batch);
        // Take what else is already waiting, up to a socket read's worth:
        // the read loop's per-read work (flushing staged copies and
        // counters) is then shared by all of it.
        while taken_bytes < self.read_bytes_max {
            match self.requests.try_recv() {
                Ok(batch) => taken_bytes += self.take(batch),
                Err(_) => break,
            }
        }
        Ok(true)
    }
}

/// The channel to the front-end, and its door writer if it has one.
struct LocalOutlet {
    replies: mpsc::Sender<Vec<Frame>>,
    door_writer: Option<Arc<dyn DoorWriter>>,
}

impl Outlet for LocalOutlet {
    type Batch = LocalBatch;

    fn batch(&self, budget: usize) -> LocalBatch {
        let door_bytes = match self.door_writer {
            Some(_) => BytesMut::with_capacity(budget + budget / 4),
            None => BytesMut::new(),
        };
        let door_capacity = door_bytes.capacity();
        LocalBatch {
            frames: Vec::new(),
            taken_bytes: 0,
            door_writer: self.door_writer.clone(),
            door_bytes,
            door_capacity,
        }
    }

    async fn send(&mut self, batch: &mut LocalBatch) -> std::io::Result<()> {
        batch.taken_bytes = 0;
        // The door's frames go first: control frames of the same batch
        // (an UNSUBSCRIBE's reply, say) were queued after them.
        if let Some(door_writer) = batch.door_writer.clone().filter(|_| !batch.door_bytes.is_empty()) {
            // The door's frames are longer than the native encoding the
            // batch budget counts: the next buffer starts as large as the
            // largest batch yet, rather than growing (and copying) at every
            // doubling.
            batch.door_capacity = batch.door_capacity.max(batch.door_bytes.len() + batch.door_bytes.len() / 4);
            let next = match door_writer.pool().reuse() {
                Some(mut buffer) => {
                    buffer.reserve(batch.door_capacity);
                    buffer
                }
                None => BytesMut::with_capacity(batch.door_capacity),
            };
            let encoded = std::mem::replace(&mut batch.door_bytes, next).freeze();
            let door_batch = door_writer.pool().batch(encoded).await;
            if !door_writer.send(door_batch).await {
                return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
            }
        }
        if batch.frames.is_empty() {
            return Ok(());
        }
        // The next batch starts as large as this one, rather than growing
        // (and copying) its frames one doubling at a time.
        let next = Vec::with_capacity(batch.frames.len());
        let frames = std::mem::replace(&mut batch.frames, next);
        self.replies.send(frames).await.map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }

    async fn close(self) {}
}

/// Frames drained for a local session: deliveries built from the routed
/// message directly (or written in the door's protocol by its door
/// writer), and control frames (confirms, replies, errors) as the values a
/// local session's outbox queues them as.
pub(crate) struct LocalBatch {
    frames: Vec<Frame>,
    /// Bytes the batch stands for, as the socket's batch would count them.
    taken_bytes: usize,
    door_writer: Option<Arc<dyn DoorWriter>>,
    /// What the door writer wrote of this batch.
    door_bytes: BytesMut,
    /// The room each batch's `door_bytes` starts with.
    door_capacity: usize,
}

impl DrainSink for LocalBatch {
    fn taken_bytes(&self) -> usize {
        self.taken_bytes
    }

    fn control(&mut self, encoded: &[u8]) {
        // A local session's control frames are queued as values
        // (`ConnShared::send_control`); encoded ones are still taken whole.
        self.taken_bytes += encoded.len();
        self.frames.extend(decode_whole_frames(encoded));
    }

    fn control_frame(&mut self, frame: Frame, frame_bytes: usize) {
        self.taken_bytes += frame_bytes;
        self.frames.push(frame);
    }

    fn deliver(&mut self, sub_id: u32, tag: u64, flags: u8, routed: &Routed) {
        self.taken_bytes += routed.encoded.len();
        // With a door writer the message is decoded once for all its
        // deliveries, and one the door does not write takes a copy of that;
        // without one, each DELIVER value owns a copy decoded for it. The
        // broker encoded it, or read it back checksummed from a stream: a
        // failure to decode is a bug, not bad input.
        let message = match &self.door_writer {
            Some(_) => {
                let Some(message) = routed.message() else {
                    tracing::error!(sub_id, "a routed message does not decode");
                    return;
                };
                if self.write_door_frame(sub_id, tag, flags, routed, message) {
                    return;
                }
                message.clone()
            }
            None => match decode_message(&routed.encoded) {
                Ok(message) => message,
                Err(error) => {
                    tracing::error!(sub_id, %error, "a routed message does not decode");
                    return;
                }
            },
        };
        let stream_seq = routed.stream_seq();
        let deliver = Deliver { sub_id, delivery_tag: tag, flags, stream_seq, message: Box::new(message) };
        self.frames.push(Frame::Deliver(deliver));
    }
}

impl LocalBatch {
    /// Writes the delivery with the front-end's door writer; false when
    /// there is none or it does not know the subscription.
    fn write_door_frame(&mut self, sub_id: u32, tag: u64, flags: u8, routed: &Routed, message: &Message) -> bool {
        let Some(door_writer) = &self.door_writer else { return false };
        let delivery = DoorDelivery {
            sub_id,
            delivery_tag: tag,
            redelivered: flags & deliver_flags::REDELIVERED != 0,
            stream_seq: routed.stream_seq(),
            message,
        };
        door_writer.encode(&delivery, &mut self.door_bytes)
    }
}
