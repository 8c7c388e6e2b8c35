//! Noticing a broker that stopped answering without closing the connection.
//!
//! A broker that exits closes its sockets and the reader sees the end of
//! the stream at once. A broker whose machine lost power, whose process is
//! stopped, or a path that drops everything, closes nothing: the reader
//! waits forever and a subscriber never learns that it receives nothing.
//! So, as NATS clients do with `PING`s and MQTT clients with their keep
//! alive, a connection that has read nothing for a whole
//! [`ClientOptions::ping_interval`](crate::ClientOptions::ping_interval)
//! sends a `PING`; after [`ClientOptions::pings_outstanding_max`]
//! (crate::ClientOptions::pings_outstanding_max) intervals more without a
//! byte from the broker, the connection counts as lost and the client
//! reconnects. Anything read (a delivery, a confirm, the `PONG`) shows the
//! broker alive, so a busy connection never pings.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sift_proto::Frame;

use crate::connection::Client;

/// The nonce of the client's own liveness `PING`s: request ids, which
/// [`Client::ping`] uses as nonces, start at 2³², so no waiter has it.
pub(crate) const LIVENESS_NONCE: u64 = 0;

/// Counts the reads of one client's connections, for [`watch`].
#[derive(Debug, Default)]
pub(crate) struct ReadCounter(AtomicU64);

impl ReadCounter {
    /// Tells the watcher that the broker sent something.
    pub(crate) fn count(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn reads(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Returns once the broker has been silent for `pings_outstanding_max + 1`
/// intervals in a row, having been sent a `PING` in each but the last;
/// never without an interval. The caller ends the connection.
pub(crate) async fn watch(
    client: &Client,
    reads: &ReadCounter,
    interval: Option<Duration>,
    pings_outstanding_max: u32,
) {
    let Some(interval) = interval.filter(|interval| !interval.is_zero()) else {
        return std::future::pending().await;
    };
    let mut seen = reads.reads();
    let mut outstanding = 0u32;
    loop {
        tokio::time::sleep(interval).await;
        let now = reads.reads();
        if now != seen {
            seen = now;
            outstanding = 0;
            continue;
        }
        if outstanding >= pings_outstanding_max {
            tracing::warn!(
                silent_ms = interval.as_millis() as u64 * (u64::from(outstanding) + 1),
                "the broker answered none of {outstanding} PINGs; reconnecting"
            );
            return;
        }
        if client.send_frame(Frame::Ping { nonce: LIVENESS_NONCE }).is_err() {
            return;
        }
        outstanding += 1;
    }
}
