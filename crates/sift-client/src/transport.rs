//! How a client reaches its broker: a TCP socket, or an in-memory pipe into
//! a broker in the same process (the HTTP front-end's sessions).
//!
//! Both carry the same bytes; the handshake and the reader and writer tasks
//! see one type for each half, so that the connection code does not care
//! which it has.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Opens a pipe into a broker in this process; called on every connect and
/// reconnect.
pub type PipeOpener = Arc<dyn Fn() -> std::io::Result<DuplexStream> + Send + Sync>;

/// Where a client connects.
#[derive(Clone)]
pub enum Endpoint {
    /// A broker's `host:port`.
    Tcp(String),
    /// A broker in this process, through the pipes the function opens.
    InProcess(PipeOpener),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(address) => formatter.write_str(address),
            Endpoint::InProcess(_) => formatter.write_str("in-process broker"),
        }
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, formatter)
    }
}

/// Opens a connection to `endpoint`, as its reading and writing halves.
pub(crate) async fn connect(endpoint: &Endpoint) -> std::io::Result<(TransportRead, TransportWrite)> {
    match endpoint {
        Endpoint::Tcp(address) => {
            let stream = TcpStream::connect(address).await?;
            // Acks and confirms are small; the writer batches on its own.
            let _ = stream.set_nodelay(true);
            let (reader, writer) = stream.into_split();
            Ok((TransportRead::Tcp(reader), TransportWrite::Tcp(writer)))
        }
        Endpoint::InProcess(open) => {
            let (reader, writer) = tokio::io::split(open()?);
            Ok((TransportRead::Pipe(reader), TransportWrite::Pipe(writer)))
        }
    }
}

/// The reading half of a connection.
pub(crate) enum TransportRead {
    Tcp(OwnedReadHalf),
    Pipe(ReadHalf<DuplexStream>),
}

/// The writing half of a connection.
pub(crate) enum TransportWrite {
    Tcp(OwnedWriteHalf),
    Pipe(WriteHalf<DuplexStream>),
}

impl AsyncRead for TransportRead {
    fn poll_read(self: Pin<&mut Self>, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            TransportRead::Tcp(reader) => Pin::new(reader).poll_read(context, buf),
            TransportRead::Pipe(reader) => Pin::new(reader).poll_read(context, buf),
        }
    }
}

impl AsyncWrite for TransportWrite {
    fn poll_write(self: Pin<&mut Self>, context: &mut Context<'_>, bytes: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            TransportWrite::Tcp(writer) => Pin::new(writer).poll_write(context, bytes),
            TransportWrite::Pipe(writer) => Pin::new(writer).poll_write(context, bytes),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            TransportWrite::Tcp(writer) => Pin::new(writer).poll_flush(context),
            TransportWrite::Pipe(writer) => Pin::new(writer).poll_flush(context),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            TransportWrite::Tcp(writer) => Pin::new(writer).poll_shutdown(context),
            TransportWrite::Pipe(writer) => Pin::new(writer).poll_shutdown(context),
        }
    }
}
