//! An accepted connection before its TLS handshake, the one step every
//! door (native, HTTP, STOMP, MQTT) and the link listener take between
//! `accept` and their protocol.

use std::sync::Arc;

use sift_tls::{DoorStream, ServerTls};
use tokio::net::TcpStream;

/// An accepted connection before its TLS handshake: the door's admit
/// function counts and refuses on the socket, and the connection's own
/// task calls [`Incoming::open`], so that a slow handshake never holds the
/// accept loop.
#[derive(Debug)]
pub struct Incoming {
    tcp: TcpStream,
    tls: Option<Arc<ServerTls>>,
}

impl Incoming {
    /// `tcp`, to be opened with `tls` if given.
    pub fn new(tcp: TcpStream, tls: Option<Arc<ServerTls>>) -> Incoming {
        Incoming { tcp, tls }
    }

    /// The socket.
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// The connection, ready for the door's protocol: the socket itself on
    /// a plain door; on a TLS door, the stream after the handshake, or
    /// `None` when the handshake failed (counted by the door's TLS and
    /// logged here). A client that speaks plain text to a TLS door is sent
    /// `plain_refusal`, the door's own error.
    pub async fn open(self, plain_refusal: &[u8]) -> Option<DoorStream> {
        // Small frames (acks, receipts) must not wait for Nagle's
        // algorithm; every door batches its own writes.
        let _ = self.tcp.set_nodelay(true);
        let Some(tls) = self.tls else { return Some(DoorStream::Plain(self.tcp)) };
        let peer = self.tcp.peer_addr().ok();
        match tls.accept(self.tcp, plain_refusal).await {
            Ok(stream) => Some(stream),
            Err(error) => {
                tracing::debug!(?peer, %error, "TLS handshake refused");
                None
            }
        }
    }
}
