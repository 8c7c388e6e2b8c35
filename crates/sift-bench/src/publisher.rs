//! Bench publishers: real clients that publish stamped messages as fast as
//! the broker takes them, or paced at a rate.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use sift_client::{Client, ClientError, ClientOptions, Confirm, PublishOptions};
use sift_core::{DeliveryMode, TopicName};
use tokio::sync::oneshot;

use crate::error::BenchError;
use crate::stamp::{blank_payload, nanos_since, write_stamp, MessageMaker};

/// Batches of deliveries (each at most one socket read's worth) a bench
/// client buffers per subscription before its reader waits.
pub const SUBSCRIPTION_BATCHES: usize = 1024;

/// Reliable publishes awaiting their confirm per publisher: enough to keep
/// the broker's publish window full while confirms are collected in order.
pub const CONFIRMS_IN_FLIGHT_MAX: usize = 512;

/// In unpaced runs one message in this many carries its send time. The
/// latencies of such a run are queueing delay anyway; sampling keeps two
/// clock readings per message off the measured path. Paced and
/// one-in-flight runs stamp every message.
pub const THROUGHPUT_STAMP_EVERY: u64 = 16;

/// Options of a bench client: named, no reconnect (a lost connection is a
/// failed run), deep subscription buffers.
pub fn client_options(name: String) -> ClientOptions {
    ClientOptions {
        name,
        reconnect: false,
        subscription_batches: SUBSCRIPTION_BATCHES,
        tls: crate::tls::client(),
        ..ClientOptions::default()
    }
}

/// Connects a bench client named `name` to `address`.
pub async fn connect(address: &str, name: String) -> Result<Client, BenchError> {
    Ok(Client::connect(address, client_options(name)).await?)
}

/// What one publisher sends: payload size and, for a paced run, its own
/// messages per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// Payload bytes per message.
    pub size: usize,
    /// Messages per second of this publisher; `None` for as fast as possible.
    pub rate: Option<u64>,
}

impl Pace {
    /// Waits until message `sent` is due (paced runs only).
    pub async fn wait_turn(&self, sent: u64, started: tokio::time::Instant) {
        let Some(rate) = self.rate else { return };
        let due = started + Duration::from_nanos(sent.saturating_mul(1_000_000_000) / rate.max(1));
        // Sleeping has millisecond granularity: publish what is due and
        // sleep only when a whole millisecond ahead.
        if due > tokio::time::Instant::now() + Duration::from_millis(1) {
            tokio::time::sleep_until(due).await;
        }
    }
}

/// Sends stamped messages of one size on one topic in one mode: best-effort
/// ones through `publish_payload`, from one payload buffer whose stamp is
/// rewritten per message; reliable ones confirmed, with at most
/// [`CONFIRMS_IN_FLIGHT_MAX`] awaiting their confirm, collected in order.
#[derive(Debug)]
pub struct StampedSender {
    topic: TopicName,
    mode: DeliveryMode,
    payload: Vec<u8>,
    maker: MessageMaker,
    confirms: VecDeque<oneshot::Receiver<Result<Confirm, ClientError>>>,
}

impl StampedSender {
    /// A sender of `size`-byte payloads on `topic` in `mode`.
    pub fn new(topic: TopicName, mode: DeliveryMode, size: usize) -> StampedSender {
        StampedSender {
            maker: MessageMaker::new(topic.clone(), mode, size),
            topic,
            mode,
            payload: blank_payload(size),
            confirms: VecDeque::with_capacity(CONFIRMS_IN_FLIGHT_MAX + 1),
        }
    }

    /// Sends one message carrying `sent_ns` (0 for none) through `client`.
    pub async fn send(&mut self, client: &Client, sent_ns: u64) -> Result<(), BenchError> {
        if !self.mode.needs_ack() {
            write_stamp(&mut self.payload, sent_ns);
            client.publish_payload(&self.topic, &self.payload).await?;
            return Ok(());
        }
        let confirm = client.start_confirmed(self.maker.message(sent_ns), PublishOptions::default()).await?;
        self.confirms.push_back(confirm);
        // Keep the window full but collect confirms as they come.
        while self.confirms.len() > CONFIRMS_IN_FLIGHT_MAX {
            if let Some(confirm) = self.confirms.pop_front() {
                let _ = confirm.await;
            }
        }
        Ok(())
    }

    /// Waits for the confirms still outstanding.
    pub async fn finish(self) {
        for confirm in self.confirms {
            let _ = confirm.await;
        }
    }
}

/// Publishes `share` messages on `topic` in `mode`, stamped with the time
/// since `epoch`, then waits until the broker has processed them all (a
/// ping answered after the last publish) and closes the client. Returns
/// how many were published.
pub async fn publish_share(
    client: Client,
    topic: TopicName,
    share: u64,
    mode: DeliveryMode,
    pace: Pace,
    epoch: Instant,
) -> Result<u64, BenchError> {
    let mut sender = StampedSender::new(topic, mode, pace.size);
    let started = tokio::time::Instant::now();
    for sent in 0..share {
        pace.wait_turn(sent, started).await;
        let stamp = pace.rate.is_some() || sent.is_multiple_of(THROUGHPUT_STAMP_EVERY);
        let sent_ns = if stamp { nanos_since(epoch) } else { 0 };
        sender.send(&client, sent_ns).await?;
    }
    sender.finish().await;
    client.ping().await?;
    client.close().await;
    Ok(share)
}

/// Publisher `index`'s part of `count` messages split across `publishers`
/// (the first ones take one more when it does not divide evenly).
pub fn share_of(count: u64, publishers: usize, index: usize) -> u64 {
    let publishers = publishers.max(1) as u64;
    count / publishers + u64::from((index as u64) < count % publishers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_count() {
        assert_eq!((0..3).map(|index| share_of(10, 3, index)).collect::<Vec<_>>(), [4, 3, 3]);
        assert_eq!((0..4).map(|index| share_of(8, 4, index)).sum::<u64>(), 8);
        assert_eq!(share_of(5, 0, 0), 5);
    }
}
