//! Subscriptions as the application sees them: a stream of deliveries.

use std::pin::Pin;
use std::task::{Context, Poll};

use sift_core::Message;
use sift_proto::GapReason;
use tokio::sync::mpsc;

use crate::connection::Client;
use crate::options::AckPolicy;
use crate::ClientError;

/// One message delivered to a subscription.
#[derive(Debug)]
pub struct Delivery {
    /// The message (boxed: deliveries move through channels, and a pointer
    /// moves cheaper than a whole message).
    pub message: Box<Message>,
    /// The subscription it came through.
    pub sub_id: u32,
    /// Tag to acknowledge; 0 when the message needs no acknowledgement.
    pub delivery_tag: u64,
    /// True when the broker delivered it before without an ack.
    pub redelivered: bool,
    /// Its sequence in the stream it was read from (replays and durable
    /// subscriptions); 0 for a live delivery.
    pub stream_seq: u64,
    /// The client and the session the delivery came in, for
    /// acknowledging; `None` when no ack is expected.
    pub(crate) settle: Option<Settle>,
}

/// Where a delivery's acknowledgement goes: its client, and the session
/// with the broker that gave the delivery its tag (an acknowledgement
/// made after that session ended is dropped: the broker gives the
/// message again in the new one, under another tag).
#[derive(Debug, Clone)]
pub(crate) struct Settle {
    pub(crate) client: Client,
    pub(crate) session: u64,
}

impl Delivery {
    /// A delivery that is not tied to a connection (acknowledging it does
    /// nothing): for tests and tools that build deliveries themselves.
    pub fn detached(message: Message, sub_id: u32, delivery_tag: u64, redelivered: bool, stream_seq: u64) -> Delivery {
        Delivery { message: Box::new(message), sub_id, delivery_tag, redelivered, stream_seq, settle: None }
    }

    /// Acknowledges the delivery (a no-op when it needs none).
    pub fn ack(&self) -> Result<(), ClientError> {
        match &self.settle {
            Some(settle) if self.delivery_tag != 0 => {
                settle.client.queue_ack_in(Some(settle.session), self.delivery_tag)
            }
            _ => Ok(()),
        }
    }

    /// Refuses the delivery: the broker redelivers it (`requeue`) or drops it.
    pub fn nack(&self, requeue: bool) -> Result<(), ClientError> {
        match &self.settle {
            Some(settle) if self.delivery_tag != 0 => settle.client.nack_in(settle.session, self.delivery_tag, requeue),
            _ => Ok(()),
        }
    }
}

/// Stored messages a stream subscription will never get: removed by the
/// stream's retention before it read them, or damaged on disk. The broker
/// says so (a `GAP` frame) instead of skipping them silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The first sequence missed.
    pub first_seq: u64,
    /// How many consecutive sequences were missed.
    pub count: u64,
    /// Why.
    pub reason: GapReason,
}

/// What the reader hands a subscription: the deliveries of one read, a
/// gap, or a `CAUGHT_UP` marker's last sequence given.
#[derive(Debug)]
pub(crate) enum Batch {
    Deliveries(Vec<Delivery>),
    Gap(Gap),
    CaughtUp(u64),
}

/// One event of a subscription.
#[derive(Debug)]
pub enum SubscriptionEvent {
    /// A message.
    Delivery(Delivery),
    /// Stored messages that will never come (stream subscriptions only).
    Gap(Gap),
}

/// A live subscription: a stream of [`Delivery`]. Dropping it does not
/// unsubscribe; call [`Subscription::unsubscribe`].
#[derive(Debug)]
pub struct Subscription {
    pub(crate) sub_id: u32,
    pub(crate) receiver: mpsc::Receiver<Batch>,
    /// The rest of the batch the last receive returned.
    pub(crate) buffered: std::collections::VecDeque<Delivery>,
    /// Gaps met by [`Subscription::next`], for [`Subscription::take_gaps`].
    pub(crate) gaps: Vec<Gap>,
    /// The last sequence given as of the latest `CAUGHT_UP`, if one came.
    pub(crate) caught_up_through: Option<u64>,
    /// The highest stream sequence among the deliveries taken so far.
    pub(crate) taken_stream_seq_max: u64,
    pub(crate) client: Client,
    pub(crate) ack: AckPolicy,
}

impl Subscription {
    /// The subscription's id on this connection.
    pub fn id(&self) -> u32 {
        self.sub_id
    }

    /// The next delivery, or `None` once the subscription is closed.
    /// With [`AckPolicy::Auto`] the delivery is acknowledged here. Gaps met
    /// on the way are kept for [`Subscription::take_gaps`].
    pub async fn next(&mut self) -> Option<Delivery> {
        loop {
            match self.next_event().await? {
                SubscriptionEvent::Delivery(delivery) => return Some(delivery),
                SubscriptionEvent::Gap(gap) => self.gaps.push(gap),
            }
        }
    }

    /// The next delivery or gap, or `None` once the subscription is closed.
    /// A `CAUGHT_UP` marker is noted on the way ([`Subscription::is_caught_up`]).
    pub async fn next_event(&mut self) -> Option<SubscriptionEvent> {
        while self.buffered.is_empty() {
            match self.receiver.recv().await? {
                Batch::Deliveries(batch) => self.buffered = batch.into(),
                Batch::Gap(gap) => return Some(SubscriptionEvent::Gap(gap)),
                Batch::CaughtUp(last_seq) => self.caught_up_through = Some(last_seq),
            }
        }
        self.take_buffered().map(SubscriptionEvent::Delivery)
    }

    /// The next delivery, or `None` when none comes before the next
    /// `CAUGHT_UP` marker (or the subscription closes): for a client that
    /// waits until it has everything stored.
    pub async fn next_until_caught_up(&mut self) -> Option<Delivery> {
        loop {
            if let Some(delivery) = self.try_next() {
                return Some(delivery);
            }
            if self.is_caught_up() {
                return None;
            }
            match self.receiver.recv().await? {
                Batch::Deliveries(batch) => self.buffered = batch.into(),
                Batch::Gap(gap) => self.gaps.push(gap),
                Batch::CaughtUp(last_seq) => self.caught_up_through = Some(last_seq),
            }
        }
    }

    /// A delivery if one is already waiting, without waiting.
    pub fn try_next(&mut self) -> Option<Delivery> {
        while self.buffered.is_empty() {
            match self.receiver.try_recv().ok()? {
                Batch::Deliveries(batch) => self.buffered = batch.into(),
                Batch::Gap(gap) => self.gaps.push(gap),
                Batch::CaughtUp(last_seq) => self.caught_up_through = Some(last_seq),
            }
        }
        self.take_buffered()
    }

    /// True when this stream subscription (opened with
    /// [`crate::SubscribeOptions::caught_up_markers`]) has taken every
    /// delivery of what was stored when the broker last said it was caught
    /// up: the marker's last sequence given has been taken. False before
    /// any marker came, and for live subscriptions.
    pub fn is_caught_up(&self) -> bool {
        self.buffered.is_empty() && self.caught_up_through.is_some_and(|last_seq| self.taken_stream_seq_max >= last_seq)
    }

    /// The gaps [`Subscription::next`] and [`Subscription::try_next`] met
    /// since the last call.
    pub fn take_gaps(&mut self) -> Vec<Gap> {
        std::mem::take(&mut self.gaps)
    }

    fn take_buffered(&mut self) -> Option<Delivery> {
        let delivery = self.buffered.pop_front()?;
        self.taken_stream_seq_max = self.taken_stream_seq_max.max(delivery.stream_seq);
        self.auto_ack(&delivery);
        Some(delivery)
    }

    fn auto_ack(&self, delivery: &Delivery) {
        if self.ack == AckPolicy::Auto {
            // A failed ack means the client is closed; the broker will
            // redeliver, which is the at-least-once contract.
            let _ = delivery.ack();
        }
    }

    /// Grants `credit` more deliveries to a subscription in credit mode.
    pub fn grant(&self, credit: u32) -> Result<(), ClientError> {
        self.client.send_frame(sift_proto::Frame::Flow { sub_id: self.sub_id, credit })
    }

    /// Closes the subscription at the broker and ends the stream.
    pub async fn unsubscribe(self) -> Result<(), ClientError> {
        self.client.unsubscribe(self.sub_id)
    }
}

impl futures_core::Stream for Subscription {
    type Item = Delivery;

    fn poll_next(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Delivery>> {
        while self.buffered.is_empty() {
            match self.receiver.poll_recv(context) {
                Poll::Ready(Some(Batch::Deliveries(batch))) => self.buffered = batch.into(),
                Poll::Ready(Some(Batch::Gap(gap))) => self.gaps.push(gap),
                Poll::Ready(Some(Batch::CaughtUp(last_seq))) => self.caught_up_through = Some(last_seq),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(self.take_buffered())
    }
}
