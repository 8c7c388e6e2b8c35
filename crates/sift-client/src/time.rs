//! The client's view of time: the clock it reads, its estimate of the
//! broker's clock (`TIME` exchanges, `docs/PROTOCOL.md` §6.18), and the
//! mapping of message timestamps into the local clock.
//!
//! A message's `timestamp_ns` is in the clock of whoever holds it: the
//! broker that delivers it carried it there hop by hop, adding each hop's
//! error bound to `time_error_ns`. The last hop is the broker's clock to
//! this client's, which [`Client::local_time`] crosses with this client's
//! own estimate.

use std::sync::Arc;
use std::time::Duration;

use sift_core::{ClockEstimate, Message};
use sift_proto::{Frame, TimeReply};
use tokio::sync::oneshot;

use crate::{Client, ClientError};

/// `TIME` exchanges made one after another when a client connects.
pub const CLOCK_SYNC_BURST: u32 = 4;

/// A clock: nanoseconds since the Unix epoch. The system clock unless a
/// test injects another (a shifted one, to check that offsets are found).
#[derive(Clone)]
pub struct ClockSource(Arc<dyn Fn() -> u64 + Send + Sync>);

impl ClockSource {
    /// The system's real-time clock.
    pub fn system() -> ClockSource {
        ClockSource(Arc::new(system_now_ns))
    }

    /// The system clock shifted by `offset_ns` (a client whose clock is wrong).
    pub fn shifted(offset_ns: i64) -> ClockSource {
        ClockSource(Arc::new(move || system_now_ns().saturating_add_signed(offset_ns)))
    }

    /// Any function as the clock.
    pub fn from_fn(read: impl Fn() -> u64 + Send + Sync + 'static) -> ClockSource {
        ClockSource(Arc::new(read))
    }

    /// Reads the clock.
    pub fn now_ns(&self) -> u64 {
        (self.0)()
    }
}

impl Default for ClockSource {
    fn default() -> Self {
        ClockSource::system()
    }
}

impl std::fmt::Debug for ClockSource {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("ClockSource")
    }
}

/// Nanoseconds since the Unix epoch by the system clock, or 0 before it.
pub fn system_now_ns() -> u64 {
    sift_core::system_now_ns()
}

/// A message timestamp carried into this client's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalTime {
    /// The timestamp, in nanoseconds since the Unix epoch by this client's clock.
    pub timestamp_ns: u64,
    /// How far it may be from the true instant: the message's own bound
    /// plus this client's bound on the broker's clock.
    pub error_ns: u64,
}

impl Client {
    /// This client's clock ([`crate::ClientOptions::clock`]).
    pub fn clock(&self) -> ClockSource {
        self.options().clock.clone()
    }

    /// Reads this client's clock ([`crate::ClientOptions::clock`]).
    pub fn now_ns(&self) -> u64 {
        self.options().clock.now_ns()
    }

    /// The current estimate of the broker's clock, or `None` before the
    /// first `TIME` exchange completed.
    pub fn clock_estimate(&self) -> Option<ClockEstimate> {
        let now_ns = self.now_ns();
        self.with_clock(|filter| filter.estimate(now_ns))
    }

    /// Makes `samples` `TIME` exchanges one after another and returns the
    /// estimate they leave.
    pub async fn sync_clock(&self, samples: u32) -> Result<ClockEstimate, ClientError> {
        for _ in 0..samples.max(1) {
            self.time_exchange().await?;
        }
        self.clock_estimate().ok_or(ClientError::Disconnected)
    }

    /// `message`'s timestamp in this client's clock, or `None` before the
    /// first `TIME` exchange completed.
    pub fn local_time(&self, message: &Message) -> Option<LocalTime> {
        let estimate = self.clock_estimate()?;
        Some(LocalTime {
            timestamp_ns: estimate.to_local(message.timestamp_ns),
            error_ns: u64::from(message.time_error_ns).saturating_add(estimate.error_ns),
        })
    }

    /// One `TIME` exchange: the sample goes into the clock filter when the
    /// reply is dispatched.
    async fn time_exchange(&self) -> Result<(), ClientError> {
        let (sender, receiver) = oneshot::channel();
        let request_id = self.register_time_request(sender)?;
        self.send_frame(Frame::Time { request_id, origin_ns: self.now_ns() })?;
        let timeout = self.options().connect_timeout;
        match tokio::time::timeout(timeout, receiver).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(ClientError::Disconnected),
            Err(_) => Err(ClientError::Timeout(timeout)),
        }
    }

    /// A `TIME_REPLY` arrived: one sample, read at once.
    pub(crate) fn time_reply(&self, reply: TimeReply) {
        let arrival_ns = self.now_ns();
        let exchange = sift_core::TimeExchange {
            origin_ns: reply.origin_ns,
            receive_ns: reply.receive_ns,
            transmit_ns: reply.transmit_ns,
            arrival_ns,
        };
        if let Some(waiter) = self.add_time_sample(reply.request_id, exchange) {
            let _ = waiter.send(());
        }
    }

    /// A `TIME` arrived (brokers do not send one; any peer is answered).
    pub(crate) fn answer_time(&self, request_id: u64, origin_ns: u64) {
        let receive_ns = self.now_ns();
        let reply = TimeReply { request_id, origin_ns, receive_ns, transmit_ns: self.now_ns() };
        let _ = self.send_frame(Frame::TimeReply(reply));
    }

    /// Keeps the estimate fresh: a burst at the start, then one exchange per
    /// `interval` while connected, until the client closes. An exchange is
    /// 17 bytes out and 33 back.
    pub(crate) async fn clock_sync_loop(self, interval: Duration) {
        let _ = self.sync_clock(CLOCK_SYNC_BURST).await;
        loop {
            tokio::time::sleep(interval).await;
            if self.is_closed() {
                return;
            }
            if self.is_connected() {
                if let Err(error) = self.time_exchange().await {
                    tracing::debug!(%error, "clock exchange failed");
                }
            }
        }
    }
}
