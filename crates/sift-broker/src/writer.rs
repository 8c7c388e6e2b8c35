//! A connection's writer.
//!
//! The writer sleeps until its outbox has something, then moves as much as
//! fits in one batch (`write_batch_bytes`) into its buffer under the outbox
//! lock, releases the lock, and writes the batch with one call. Under load a
//! batch holds hundreds of deliveries, so the cost of the system call and of
//! the wake-up is shared by all of them.

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::conn::{apply_events, ConnShared};
use crate::outbox::DrainSink;
use crate::shared::BrokerShared;
use crate::stats::add;

/// Where a writer sends what it drained: a socket (or pipe), or a local
/// session's channel of frame values (`crate::local`).
pub(crate) trait Outlet: Send {
    /// What the outbox drains into.
    type Batch: DrainSink + Send;

    /// An empty batch for up to `budget` bytes.
    fn batch(&self, budget: usize) -> Self::Batch;

    /// Sends the batch and leaves it empty; an error ends the connection.
    fn send(&mut self, batch: &mut Self::Batch) -> impl std::future::Future<Output = std::io::Result<()>> + Send;

    /// Closes the outlet once everything was sent.
    fn close(self) -> impl std::future::Future<Output = ()> + Send;
}

/// A socket's (or pipe's) writing half: batches are encoded frames.
pub(crate) struct SocketOutlet<W>(pub W);

impl<W: AsyncWrite + Unpin + Send> Outlet for SocketOutlet<W> {
    type Batch = BytesMut;

    fn batch(&self, budget: usize) -> BytesMut {
        BytesMut::with_capacity(budget + budget / 4)
    }

    async fn send(&mut self, batch: &mut BytesMut) -> std::io::Result<()> {
        self.0.write_all(batch).await?;
        batch.clear();
        Ok(())
    }

    async fn close(mut self) {
        let _ = self.0.shutdown().await;
    }
}

/// Writes the connection's outbox to its outlet until the connection
/// closes and everything queued before the close has been written.
pub(crate) async fn run(conn: Arc<ConnShared>, mut outlet: impl Outlet, shared: Arc<BrokerShared>) {
    let budget = shared.config.delivery.write_batch_bytes;
    let mut batch = outlet.batch(budget);
    loop {
        let drain_ns = shared.clock.now_ns();
        let (drained, closed) = {
            let mut outbox = conn.lock();
            let drained = outbox.drain(&mut batch, budget, drain_ns, Instant::now());
            (drained, outbox.is_closed())
        };
        add(&shared.stats.messages_delivered, drained.delivered);
        if drained.sample_stamp_ns != 0 {
            shared.deliver_latency.record_ns(drain_ns.saturating_sub(drained.sample_stamp_ns));
        }
        add(&shared.stats.dropped_expired, drained.expired);
        apply_events(drained.events);
        let taken_bytes = batch.taken_bytes();
        if taken_bytes == 0 {
            if closed {
                break;
            }
            conn.writer_wake.notified().await;
            continue;
        }
        // Space was freed: publishers blocked on this connection may go on.
        conn.space.notify_waiters();
        if let Err(error) = outlet.send(&mut batch).await {
            tracing::debug!(connection = conn.id, %error, "write failed");
            conn.close(None);
            break;
        }
        add(&shared.stats.bytes_sent, taken_bytes as u64);
    }
    outlet.close().await;
}
