//! The socket adapter of the session machine: one accepted TCP connection
//! (or an in-process pipe that carries the native protocol), its handshake
//! and the reader that decodes frames for the [`crate::session`].
//!
//! A connection runs as three tasks. The reader (here, then the session's
//! read loop) decodes frames and acts on them: a publish is matched and
//! queued straight into the subscribers' outboxes from here, so a message
//! takes one hop from the publisher's socket to the subscribers' queues.
//! The writer ([`crate::writer`]) drains this connection's outbox to its
//! socket in batches. The redelivery timer requeues reliable deliveries
//! whose ack is late. All three stop when the connection closes.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use sift_proto::{DecodeError, Decoder, ErrorCode, Frame, Hello};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::conn::error_frame;
use crate::door::{Door, Origin};
use crate::session::{check_hello, open_connection, run_session, ConnectionError, HandshakeFailure, Inbound};
use crate::shared::BrokerShared;
use crate::stats::{add, bump};

/// Serves one accepted connection until it closes: after its TLS
/// handshake when the native door has TLS.
pub async fn serve(stream: TcpStream, shared: Arc<BrokerShared>, id: u64) {
    let peer = stream.peer_addr().map_or_else(|_| "unknown".to_string(), |address| address.to_string());
    let Some(stream) = open_socket(stream, &shared).await else { return };
    let certified = stream.peer_identity();
    let (reader, writer) = stream.into_split();
    serve_halves(reader, writer, shared, (id, certified), Door::Native, peer).await;
}

/// What a plain-text client of a TLS native door is told before the
/// broker closes: a fatal `ERROR` with code `tls_required`.
static PLAIN_TEXT_REFUSAL: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
    let message = "this port speaks TLS: connect with TLS (sift ... --tls-ca CA.pem)".to_string();
    let mut bytes = BytesMut::new();
    let _ = error_frame(ErrorCode::TlsRequired, 0, true, message).encode(&mut bytes);
    bytes.to_vec()
});

/// An accepted socket, ready for the native protocol: after the TLS
/// handshake when the native door has TLS (`None` if it failed).
pub(crate) async fn open_socket(stream: TcpStream, shared: &BrokerShared) -> Option<sift_tls::DoorStream> {
    let incoming = crate::incoming::Incoming::new(stream, shared.tls.native.clone());
    incoming.open(&PLAIN_TEXT_REFUSAL).await
}

/// Serves one in-process connection (see
/// [`crate::server::InProcessConnector::connect_in_process`]) until it closes:
/// the same session as a socket's, over an in-memory pipe.
pub async fn serve_in_process(stream: tokio::io::DuplexStream, shared: Arc<BrokerShared>, id: u64) {
    let origin = Origin::EMBEDDED;
    let (reader, writer) = tokio::io::split(stream);
    serve_halves(reader, writer, shared, (id, None), origin.door, origin.peer_text()).await;
}

/// Serves a connection given as its two halves: the handshake, then the
/// reader loop here and the writer and redelivery tasks beside it. `id`
/// comes with the name the client's certificate proves, if any.
async fn serve_halves<R, W>(
    mut reader: R,
    mut writer: W,
    shared: Arc<BrokerShared>,
    (id, certified): (u64, Option<String>),
    door: Door,
    peer: String,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut decoder = Decoder::new(shared.config.limits.max_frame_bytes);
    let mut buf = BytesMut::with_capacity(shared.config.delivery.read_buffer_bytes);
    let hello = match handshake(&mut reader, &mut buf, &mut decoder, &shared).await {
        Ok(hello) => hello,
        Err(failure) => {
            let (error, reply) = *failure;
            tracing::debug!(connection = id, %peer, %error, "connection refused at its handshake");
            if let Some(reply) = reply {
                bump(&shared.stats.errors_sent);
                let mut bytes = BytesMut::new();
                if reply.encode(&mut bytes).is_ok() {
                    let _ = writer.write_all(&bytes).await;
                }
            }
            let _ = writer.shutdown().await;
            return;
        }
    };
    let conn = open_connection(&shared, id, &hello, (door, false), &peer);
    if let Some(name) = certified {
        conn.set_certified(&name);
    }
    let writer_task =
        tokio::spawn(crate::writer::run(conn.clone(), crate::writer::SocketOutlet(writer), shared.clone()));
    decoder.set_max_frame_bytes(shared.config.limits.max_frame_bytes);
    let inbound = SocketInbound { reader, buf, decoder, shared: shared.clone() };
    run_session(conn, shared, inbound, writer_task, &peer).await;
}

/// A socket's (or pipe's) reading half, its read buffer and its decoder.
pub(crate) struct SocketInbound<R> {
    reader: R,
    buf: BytesMut,
    decoder: Decoder,
    shared: Arc<BrokerShared>,
}

impl<R: AsyncRead + Unpin + Send> Inbound for SocketInbound<R> {
    fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        self.decoder.decode(&mut self.buf)
    }

    async fn receive(&mut self) -> Result<bool, ConnectionError> {
        let read_size = self.shared.config.delivery.read_buffer_bytes;
        if self.buf.capacity() - self.buf.len() < read_size / 4 {
            self.buf.reserve(read_size);
        }
        // At most one read buffer per read: the link congestion wait of the
        // read loop counts on it.
        let mut limited = (&mut self.buf).limit(read_size);
        let read = self.reader.read_buf(&mut limited).await?;
        add(&self.shared.stats.bytes_received, read as u64);
        Ok(read > 0)
    }
}

/// Reads the `HELLO` within the handshake timeout and checks versions.
async fn handshake(
    reader: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
    decoder: &mut Decoder,
    shared: &BrokerShared,
) -> Result<Hello, HandshakeFailure> {
    let limit = Duration::from_millis(shared.config.limits.handshake_timeout_ms);
    let first = tokio::time::timeout(limit, read_frame(reader, buf, decoder, shared)).await;
    let frame = match first {
        Err(_) => {
            let message = format!("no HELLO within handshake_timeout_ms = {}", limit.as_millis());
            let reply = error_frame(ErrorCode::HandshakeTimeout, 0, true, message);
            return Err(Box::new((ConnectionError::HandshakeTimeout(limit), Some(reply))));
        }
        Ok(Err(failure)) => return Err(failure),
        Ok(Ok(frame)) => frame,
    };
    check_hello(frame)
}

async fn read_frame(
    reader: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
    decoder: &mut Decoder,
    shared: &BrokerShared,
) -> Result<Frame, HandshakeFailure> {
    loop {
        match decoder.decode(buf) {
            Ok(Some(frame)) => return Ok(frame),
            Ok(None) => {}
            Err(error) => {
                let reply = error_frame(error.code(), error.reference(), true, error.to_string());
                return Err(Box::new((ConnectionError::Protocol(error.to_string()), Some(reply))));
            }
        }
        let read = reader.read_buf(buf).await.map_err(|error| Box::new((ConnectionError::Io(error), None)))?;
        if read == 0 {
            let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed before HELLO");
            return Err(Box::new((ConnectionError::Io(eof), None)));
        }
        add(&shared.stats.bytes_received, read as u64);
    }
}
