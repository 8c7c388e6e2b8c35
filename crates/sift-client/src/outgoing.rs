//! What a client has queued for its writer: encoded bytes for a socket or
//! a pipe, or the frames themselves for a local session.
//!
//! A local session (a protocol front-end inside the broker's process)
//! hands frames to the broker as values, so nothing is encoded here and
//! nothing decoded there; everything else about the client (confirms,
//! subscriptions, acknowledgements, reconnection) is the same code for
//! every transport, which only meets this type.

use bytes::BytesMut;
use sift_core::Message;
use sift_proto::{encode_publish_ref, Frame, MessageRef, Publish};

use crate::ClientError;

/// Frames waiting for the writer, in order.
#[derive(Debug)]
pub(crate) enum Outgoing {
    /// Encoded, for a byte stream.
    Encoded(BytesMut),
    /// As values, for a local session, already cut into the batches the
    /// writer hands over.
    Frames(FrameBatches),
}

/// Most bytes (estimated) in one batch a local session's writer hands
/// over: a socket write's worth.
pub(crate) const LOCAL_BATCH_BYTES: usize = 64 * 1024;

/// Frames kept in batches of at most [`LOCAL_BATCH_BYTES`] as they are
/// queued, so that the writer hands each batch over as it is, without
/// moving frames again; sizes are estimated, so that the client's write
/// buffer bound means for a local session what it means for a socket.
#[derive(Debug, Default)]
pub(crate) struct FrameBatches {
    full: Vec<Vec<Frame>>,
    open: Vec<Frame>,
    open_bytes: usize,
    bytes: usize,
}

impl FrameBatches {
    fn push(&mut self, frame: Frame) {
        let frame_bytes = frame.approximate_bytes();
        if !self.open.is_empty() && self.open_bytes + frame_bytes > LOCAL_BATCH_BYTES {
            self.close_open();
        }
        self.open.push(frame);
        self.open_bytes += frame_bytes;
        self.bytes += frame_bytes;
    }

    /// Closes the open batch, starting the next as large as it was: a
    /// batch that grew one frame at a time would be copied each time its
    /// vector doubled.
    fn close_open(&mut self) {
        let next = Vec::with_capacity(self.open.len());
        self.full.push(std::mem::replace(&mut self.open, next));
        self.open_bytes = 0;
    }

    /// Takes every batch, oldest first, leaving none.
    pub(crate) fn take_batches(&mut self) -> Vec<Vec<Frame>> {
        if !self.open.is_empty() {
            self.close_open();
        }
        self.bytes = 0;
        std::mem::take(&mut self.full)
    }
}

impl Default for Outgoing {
    fn default() -> Outgoing {
        Outgoing::Encoded(BytesMut::new())
    }
}

impl Outgoing {
    /// An empty buffer of the same kind.
    pub(crate) fn empty_like(&self) -> Outgoing {
        match self {
            Outgoing::Encoded(_) => Outgoing::Encoded(BytesMut::new()),
            Outgoing::Frames(_) => Outgoing::Frames(FrameBatches::default()),
        }
    }

    /// Appends `frame`.
    pub(crate) fn push(&mut self, frame: Frame) -> Result<(), ClientError> {
        match self {
            Outgoing::Encoded(buf) => frame.encode(buf).map_err(|error| ClientError::Encode(error.to_string())),
            Outgoing::Frames(batches) => {
                batches.push(frame);
                Ok(())
            }
        }
    }

    /// Appends an unconfirmed `PUBLISH`: encoded straight from a borrowed
    /// message, or for a local session moved in as a value (a borrowed one
    /// is copied, which only `publish_payload` does).
    pub(crate) fn push_publish(&mut self, flags: u8, message: Publishing<'_>) -> Result<(), ClientError> {
        if let Outgoing::Encoded(buf) = self {
            return encode_publish_ref(buf, 0, flags, 0, message.as_ref())
                .map_err(|error| ClientError::Encode(error.to_string()));
        }
        let message = match message {
            Publishing::Owned(message) => message,
            Publishing::Borrowed(message) => owned(message)?,
        };
        let publish = Publish { request_id: 0, flags, await_timeout_ms: 0, message: Box::new(message) };
        self.push(Frame::Publish(publish))
    }

    /// Bytes queued (estimated for frames).
    pub(crate) fn len(&self) -> usize {
        match self {
            Outgoing::Encoded(buf) => buf.len(),
            Outgoing::Frames(batches) => batches.bytes,
        }
    }

    /// Drops everything queued.
    pub(crate) fn clear(&mut self) {
        match self {
            Outgoing::Encoded(buf) => buf.clear(),
            Outgoing::Frames(batches) => {
                batches.take_batches();
            }
        }
    }

    /// Appends everything `other` holds (of the same kind).
    pub(crate) fn append(&mut self, other: Outgoing) {
        match (self, other) {
            (Outgoing::Encoded(buf), Outgoing::Encoded(more)) => buf.extend_from_slice(&more),
            (Outgoing::Frames(batches), Outgoing::Frames(mut more)) => {
                for frame in more.take_batches().into_iter().flatten() {
                    batches.push(frame);
                }
            }
            _ => debug_assert!(false, "one client's buffers are all of its transport's kind"),
        }
    }
}

/// A message to publish: borrowed (encoded at once for a byte stream) or
/// owned (moved into a local session's frame without a copy).
pub(crate) enum Publishing<'a> {
    /// Borrowed from the caller.
    Borrowed(MessageRef<'a>),
    /// Handed over by the caller.
    Owned(Message),
}

impl Publishing<'_> {
    /// The message as a borrow, for encoding.
    fn as_ref(&self) -> MessageRef<'_> {
        match self {
            Publishing::Borrowed(message) => *message,
            Publishing::Owned(message) => MessageRef::of(message),
        }
    }

    /// The publisher's own time stamp, if it set one.
    pub(crate) fn timestamp_ns(&self) -> u64 {
        self.as_ref().timestamp_ns
    }

    /// Sets the publisher's sequence number and, with publisher time, its
    /// time stamp and error bound.
    pub(crate) fn stamp(&mut self, sequence: u64, time: Option<(u64, u32)>) {
        let (sequence_field, timestamp_ns, time_error_ns) = match self {
            Publishing::Borrowed(message) => {
                (&mut message.sequence, &mut message.timestamp_ns, &mut message.time_error_ns)
            }
            Publishing::Owned(message) => {
                (&mut message.sequence, &mut message.timestamp_ns, &mut message.time_error_ns)
            }
        };
        *sequence_field = sequence;
        if let Some((stamp_ns, error_ns)) = time {
            (*timestamp_ns, *time_error_ns) = (stamp_ns, error_ns);
        }
    }
}

/// An owned copy of a borrowed message, for a local session.
fn owned(message: MessageRef<'_>) -> Result<Message, ClientError> {
    let topic = sift_core::TopicName::new(message.topic).map_err(|error| ClientError::Encode(error.to_string()))?;
    let mut owned = Message::new(topic, bytes::Bytes::copy_from_slice(message.payload));
    owned.properties = message.properties.to_vec();
    owned.metadata = message.metadata.map(bytes::Bytes::copy_from_slice);
    owned.sequence = message.sequence;
    owned.timestamp_ns = message.timestamp_ns;
    owned.time_error_ns = message.time_error_ns;
    owned.priority = message.priority;
    owned.expiry_ns = message.expiry_ns;
    owned.delivery_mode = message.delivery_mode;
    owned.hop_count = message.hop_count;
    Ok(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_kept_as_values_in_bounded_batches_and_encoded_ones_as_bytes() {
        let topic = sift_core::TopicName::new("a.b").expect("valid");
        let mut frames = Outgoing::Frames(FrameBatches::default());
        frames.push_publish(0, Publishing::Borrowed(MessageRef::payload_only(&topic, b"payload"))).expect("queued");
        for tag in 0..2_000 {
            frames.push(Frame::Ack { delivery_tags: vec![tag] }).expect("queued");
        }
        assert!(frames.len() > 2_000 * 72);
        let Outgoing::Frames(batches) = &mut frames else { panic!("kind kept") };
        let taken = batches.take_batches();
        assert!(taken.len() >= 3, "{} batches", taken.len());
        for batch in &taken {
            let batch_bytes: usize = batch.iter().map(Frame::approximate_bytes).sum();
            assert!(batch_bytes <= LOCAL_BATCH_BYTES);
        }
        let Frame::Publish(publish) = &taken[0][0] else { panic!("the publish first") };
        assert_eq!((publish.message.topic.as_str(), &publish.message.payload[..]), ("a.b", &b"payload"[..]));
        assert_eq!(taken.iter().map(Vec::len).sum::<usize>(), 2_001);
        assert_eq!(frames.len(), 0);
        let mut encoded = Outgoing::default();
        encoded.push(Frame::Ack { delivery_tags: vec![1] }).expect("queued");
        assert!(encoded.len() > 8);
    }
}
