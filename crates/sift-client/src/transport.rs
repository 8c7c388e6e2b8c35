//! How a client reaches its broker: a TCP socket, an in-memory pipe into a
//! broker in the same process, or a local session of such a broker (the
//! protocol front-ends').
//!
//! A socket and a pipe carry the same bytes; the handshake and the reader
//! and writer tasks see one type for each half, so that the connection
//! code does not care which it has. A local session carries frame values
//! instead ([`Link::Frames`]): nothing is encoded or decoded on the way.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use sift_proto::Frame;
use sift_tls::{ClientReadHalf, ClientStream, ClientTls, ClientWriteHalf};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Opens a pipe into a broker in this process; called on every connect and
/// reconnect.
pub type PipeOpener = Arc<dyn Fn() -> std::io::Result<DuplexStream> + Send + Sync>;

/// A local session's ends: where the client sends its frames, and where
/// the broker's arrive (`sift_broker::local::LocalLink`, the same type).
pub type LocalLink = (mpsc::Sender<Vec<Frame>>, mpsc::Receiver<Vec<Frame>>);

/// Opens a local session of a broker in this process; called on every
/// connect and reconnect.
pub type LocalOpener = Arc<dyn Fn() -> std::io::Result<LocalLink> + Send + Sync>;

/// Where a client connects.
#[derive(Clone)]
pub enum Endpoint {
    /// A broker's `host:port`, or several brokers' separated by commas
    /// (the brokers of a replicated stream's group): each connect and
    /// reconnect takes the first of them that accepts.
    Tcp(String),
    /// A broker in this process, through the pipes the function opens.
    InProcess(PipeOpener),
    /// A broker in this process, through the local sessions the function
    /// opens: frames as values, no encoding.
    Local(LocalOpener),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(address) => formatter.write_str(address),
            Endpoint::InProcess(_) => formatter.write_str("in-process broker"),
            Endpoint::Local(_) => formatter.write_str("local session"),
        }
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, formatter)
    }
}

/// Connects to the first of the comma-separated `addresses` that accepts;
/// the last one's error when none does.
async fn connect_any(addresses: &str) -> std::io::Result<(&str, TcpStream)> {
    let mut last_error = std::io::Error::new(std::io::ErrorKind::InvalidInput, "no broker address given");
    for address in addresses.split(',').map(str::trim).filter(|address| !address.is_empty()) {
        match TcpStream::connect(address).await {
            Ok(stream) => return Ok((address, stream)),
            Err(error) => last_error = std::io::Error::new(error.kind(), format!("{address}: {error}")),
        }
    }
    Err(last_error)
}

/// An open connection: a byte stream's halves, or a local session's
/// frame channels.
pub(crate) enum Link {
    Bytes(TransportRead, TransportWrite),
    Frames(mpsc::Sender<Vec<Frame>>, mpsc::Receiver<Vec<Frame>>),
}

/// Opens a connection to `endpoint`, under TLS if `tls` is given (a
/// socket only: pipes and local sessions stay in the process).
pub(crate) async fn connect(endpoint: &Endpoint, tls: Option<&ClientTls>) -> std::io::Result<Link> {
    match endpoint {
        Endpoint::Tcp(addresses) => {
            let (address, stream) = connect_any(addresses).await?;
            // Acks and confirms are small; the writer batches on its own.
            let _ = stream.set_nodelay(true);
            let stream = match tls {
                Some(tls) => tls.connect(sift_tls::host_of(address), stream).await?,
                None => ClientStream::Plain(stream),
            };
            let (reader, writer) = stream.into_split();
            Ok(Link::Bytes(TransportRead::Tcp(reader), TransportWrite::Tcp(writer)))
        }
        Endpoint::InProcess(open) => {
            let (reader, writer) = tokio::io::split(open()?);
            Ok(Link::Bytes(TransportRead::Pipe(reader), TransportWrite::Pipe(writer)))
        }
        Endpoint::Local(open) => {
            let (to_broker, from_broker) = open()?;
            Ok(Link::Frames(to_broker, from_broker))
        }
    }
}

/// The reading half of a connection.
pub(crate) enum TransportRead {
    Tcp(ClientReadHalf),
    Pipe(ReadHalf<DuplexStream>),
}

/// The writing half of a connection.
pub(crate) enum TransportWrite {
    Tcp(ClientWriteHalf),
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
