//! One stream type for a connection with or without TLS, and its halves.
//!
//! A plain connection splits into the socket's own halves (no lock, no
//! extra buffer), so that a door that offers TLS costs its plain clients
//! nothing; a TLS connection splits with [`tokio::io::split`], because
//! both directions share one rustls session.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// A TCP connection, in plain text or under TLS.
#[derive(Debug)]
pub enum TlsOrPlain<T> {
    /// Plain text.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<T>),
}

/// A connection a door accepted.
pub type DoorStream = TlsOrPlain<tokio_rustls::server::TlsStream<TcpStream>>;

/// A connection a client opened.
pub type ClientStream = TlsOrPlain<tokio_rustls::client::TlsStream<TcpStream>>;

/// The reading half of a [`TlsOrPlain`].
#[derive(Debug)]
pub enum TlsReadHalf<T> {
    /// The socket's own half.
    Plain(OwnedReadHalf),
    /// Half of the TLS stream.
    Tls(ReadHalf<T>),
}

/// The writing half of a [`TlsOrPlain`].
#[derive(Debug)]
pub enum TlsWriteHalf<T> {
    /// The socket's own half.
    Plain(OwnedWriteHalf),
    /// Half of the TLS stream.
    Tls(WriteHalf<T>),
}

impl<T: AsyncRead + AsyncWrite> TlsOrPlain<T> {
    /// Splits the connection into halves that a reader task and a writer
    /// task own.
    pub fn into_split(self) -> (TlsReadHalf<T>, TlsWriteHalf<T>) {
        match self {
            TlsOrPlain::Plain(stream) => {
                let (reader, writer) = stream.into_split();
                (TlsReadHalf::Plain(reader), TlsWriteHalf::Plain(writer))
            }
            TlsOrPlain::Tls(stream) => {
                let (reader, writer) = tokio::io::split(*stream);
                (TlsReadHalf::Tls(reader), TlsWriteHalf::Tls(writer))
            }
        }
    }

    /// Whether the connection is under TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self, TlsOrPlain::Tls(_))
    }
}

/// A TLS stream whose peer's certificates can be read.
pub trait PeerCertificates {
    /// The certificate chain the peer presented, leaf first.
    fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]>;
}

impl PeerCertificates for tokio_rustls::server::TlsStream<TcpStream> {
    fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        self.get_ref().1.peer_certificates()
    }
}

impl PeerCertificates for tokio_rustls::TlsStream<TcpStream> {
    fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        self.get_ref().1.peer_certificates()
    }
}

impl<T: PeerCertificates> TlsOrPlain<T> {
    /// The name the peer's certificate proves (see
    /// [`crate::certificate_identity`]): a client whose certificate the
    /// door's client CA vouched for, or the other broker of a link; `None`
    /// in plain text or without a certificate.
    pub fn peer_identity(&self) -> Option<String> {
        match self {
            TlsOrPlain::Plain(_) => None,
            TlsOrPlain::Tls(stream) => crate::certificate_identity(stream.peer_certificates()?.first()?),
        }
    }
}

/// Forwards a poll to whichever variant `$value` is.
macro_rules! either {
    ($value:expr, $inner:ident => $call:expr) => {
        match $value {
            Self::Plain($inner) => $call,
            Self::Tls($inner) => $call,
        }
    };
}

/// Implements `AsyncWrite` for a two-variant (plain or TLS) type by
/// forwarding each call to the variant it holds.
macro_rules! forward_async_write {
    ($type:ident) => {
        impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for $type<T> {
            fn poll_write(self: Pin<&mut Self>, context: &mut Context<'_>, bytes: &[u8]) -> Poll<std::io::Result<usize>> {
                either!(self.get_mut(), inner => Pin::new(inner).poll_write(context, bytes))
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                context: &mut Context<'_>,
                buffers: &[std::io::IoSlice<'_>],
            ) -> Poll<std::io::Result<usize>> {
                either!(self.get_mut(), inner => Pin::new(inner).poll_write_vectored(context, buffers))
            }

            fn is_write_vectored(&self) -> bool {
                either!(self, inner => inner.is_write_vectored())
            }

            fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
                either!(self.get_mut(), inner => Pin::new(inner).poll_flush(context))
            }

            fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
                either!(self.get_mut(), inner => Pin::new(inner).poll_shutdown(context))
            }
        }
    };
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsOrPlain<T> {
    fn poll_read(self: Pin<&mut Self>, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        either!(self.get_mut(), inner => Pin::new(inner).poll_read(context, buf))
    }
}

forward_async_write!(TlsOrPlain);
forward_async_write!(TlsWriteHalf);

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsReadHalf<T> {
    fn poll_read(self: Pin<&mut Self>, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        either!(self.get_mut(), inner => Pin::new(inner).poll_read(context, buf))
    }
}

/// A connection between two brokers, whichever end opened it: links are
/// served by the same code on both ends.
pub type PeerStream = TlsOrPlain<tokio_rustls::TlsStream<TcpStream>>;

impl From<DoorStream> for PeerStream {
    fn from(stream: DoorStream) -> PeerStream {
        match stream {
            TlsOrPlain::Plain(stream) => TlsOrPlain::Plain(stream),
            TlsOrPlain::Tls(stream) => TlsOrPlain::Tls(Box::new(tokio_rustls::TlsStream::Server(*stream))),
        }
    }
}

impl From<ClientStream> for PeerStream {
    fn from(stream: ClientStream) -> PeerStream {
        match stream {
            TlsOrPlain::Plain(stream) => TlsOrPlain::Plain(stream),
            TlsOrPlain::Tls(stream) => TlsOrPlain::Tls(Box::new(tokio_rustls::TlsStream::Client(*stream))),
        }
    }
}

/// The reading half of a door's connection.
pub type DoorReadHalf = TlsReadHalf<tokio_rustls::server::TlsStream<TcpStream>>;
/// The writing half of a door's connection.
pub type DoorWriteHalf = TlsWriteHalf<tokio_rustls::server::TlsStream<TcpStream>>;
/// The reading half of a client's connection.
pub type ClientReadHalf = TlsReadHalf<tokio_rustls::client::TlsStream<TcpStream>>;
/// The writing half of a client's connection.
pub type ClientWriteHalf = TlsWriteHalf<tokio_rustls::client::TlsStream<TcpStream>>;
/// The reading half of a link's connection.
pub type PeerReadHalf = TlsReadHalf<tokio_rustls::TlsStream<TcpStream>>;
/// The writing half of a link's connection.
pub type PeerWriteHalf = TlsWriteHalf<tokio_rustls::TlsStream<TcpStream>>;
