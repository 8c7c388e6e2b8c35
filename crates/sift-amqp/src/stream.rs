//! The connection's byte stream as the AMQP library reads it: the protocol
//! header this front-end already read put back in front (for a client that
//! skipped SASL), and the client's `open` performative noticed on the way,
//! since the library does not show it and JMS needs its `container-id`
//! (the JMS client id, which names durable subscriptions).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::BytesMut;
use fe2o3_amqp::frames::amqp::{FrameBody, FrameDecoder};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::codec::Decoder;

use crate::sasl::AMQP_HEADER;

/// What the client's `open` said that the front-end needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientOpen {
    /// The container id: a JMS connection's client id (or one Qpid JMS
    /// made up when the application set none).
    pub container_id: String,
}

/// A stream that first yields `replay`, then reads `inner`, and notes the
/// first AMQP frame after the protocol header if it is an `open`.
#[derive(Debug)]
pub struct Rewound<S> {
    inner: S,
    replay: Vec<u8>,
    replayed: usize,
    /// Bytes read so far, kept until the first frame is whole (at most the
    /// header and `sniff_bytes_max`).
    seen: Vec<u8>,
    sniffing: bool,
    sniff_bytes_max: usize,
    open: Arc<Mutex<Option<ClientOpen>>>,
}

impl<S> Rewound<S> {
    /// Wraps `inner`, replaying `replay` first; the client's `open`, once
    /// read (from a frame of at most `sniff_bytes_max` bytes), goes to
    /// `open`.
    pub fn new(inner: S, replay: Vec<u8>, sniff_bytes_max: usize, open: Arc<Mutex<Option<ClientOpen>>>) -> Self {
        Rewound { inner, replay, replayed: 0, seen: Vec::new(), sniffing: true, sniff_bytes_max, open }
    }

    /// Looks at the bytes read so far for a whole first frame.
    fn sniff(&mut self, fresh: &[u8]) {
        self.seen.extend_from_slice(fresh);
        let header = AMQP_HEADER.len();
        if self.seen.len() < header + 4 {
            return;
        }
        let size = u32::from_be_bytes([
            self.seen[header],
            self.seen[header + 1],
            self.seen[header + 2],
            self.seen[header + 3],
        ]) as usize;
        // A frame too small to hold a performative, or larger than the
        // limit: not an open this front-end reads; the library judges it.
        if !(9..=self.sniff_bytes_max).contains(&size) {
            self.stop_sniffing();
            return;
        }
        if self.seen.len() < header + size {
            return;
        }
        let mut frame = BytesMut::from(&self.seen[header + 4..header + size]);
        let decoded = FrameDecoder {}.decode(&mut frame);
        if let Ok(Some(frame)) = decoded {
            if let FrameBody::Open(open) = frame.into_body() {
                let mut slot = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                *slot = Some(ClientOpen { container_id: open.container_id });
            }
        }
        self.stop_sniffing();
    }

    fn stop_sniffing(&mut self) {
        self.sniffing = false;
        self.seen = Vec::new();
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewound<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let before = out.filled().len();
        if this.replayed < this.replay.len() {
            let take = (this.replay.len() - this.replayed).min(out.remaining());
            out.put_slice(&this.replay[this.replayed..this.replayed + take]);
            this.replayed += take;
        } else {
            let polled = Pin::new(&mut this.inner).poll_read(context, out);
            if !matches!(polled, Poll::Ready(Ok(()))) {
                return polled;
            }
        }
        if this.sniffing {
            let fresh = out.filled()[before..].to_vec();
            this.sniff(&fresh);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewound<S> {
    fn poll_write(mut self: Pin<&mut Self>, context: &mut Context<'_>, bytes: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(context, bytes)
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(context)
    }
}

#[cfg(test)]
mod tests {
    use bytes::BufMut;
    use fe2o3_amqp::types::performatives::Open;
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn the_header_is_replayed_and_the_open_noticed() {
        let open = Open {
            container_id: "ID:client-7".into(),
            hostname: None,
            max_frame_size: Default::default(),
            channel_max: Default::default(),
            idle_time_out: None,
            outgoing_locales: None,
            incoming_locales: None,
            offered_capabilities: None,
            desired_capabilities: None,
            properties: None,
        };
        let performative = serde_amqp::to_vec(&open).expect("encodes");
        let mut encoded = BytesMut::new();
        encoded.put_u32(8 + performative.len() as u32);
        encoded.put_slice(&[2, 0, 0, 0]);
        encoded.put_slice(&performative);
        let (mut client, server) = tokio::io::duplex(4096);
        let slot = Arc::new(Mutex::new(None));
        let mut rewound = Rewound::new(server, AMQP_HEADER.to_vec(), 64 * 1024, slot.clone());
        tokio::io::AsyncWriteExt::write_all(&mut client, &encoded).await.expect("written");
        let mut read = vec![0u8; AMQP_HEADER.len() + encoded.len()];
        rewound.read_exact(&mut read).await.expect("read");
        assert_eq!(&read[..8], &AMQP_HEADER);
        assert_eq!(&read[8..], &encoded[..]);
        let noticed = slot.lock().expect("unpoisoned").clone();
        assert_eq!(noticed, Some(ClientOpen { container_id: "ID:client-7".into() }));
    }
}
