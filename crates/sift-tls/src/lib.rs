//! TLS for every Sift door and link, with rustls.
//!
//! A broker's doors (native, HTTP, STOMP, MQTT) and its link listener
//! accept TLS the same way: [`ServerTls`] holds the certificate chain and
//! key read from PEM files, and optionally the CA that client certificates
//! must chain to; [`ServerTls::reload`] reads the files again (on SIGHUP)
//! and swaps the configuration that the next handshake uses, so that open
//! connections keep theirs and nothing is dropped. [`ServerTls::accept`]
//! answers a client that speaks plain text to a TLS port with the door's
//! own refusal in plain text (an ERROR frame, an HTTP 400) instead of a
//! silent close, because "wrong port" is the most common TLS mistake.
//!
//! [`ClientTls`] is the other side, for `sift` clients, the SDK and the
//! broker's own outbound links: the CA to trust, and optionally a client
//! certificate to prove who connects.
//!
//! Both ends give a [`TlsOrPlain`] stream, so that a door's code is the
//! same with and without TLS and a plain connection pays nothing for the
//! option: its halves are still the socket's own.

mod client;
mod error;
mod identity;
mod pem;
mod server;
mod stream;

pub use client::{host_of, server_name, ClientTls, ClientTlsFiles};
pub use error::{AcceptError, TlsError};
pub use identity::certificate_identity;
pub use server::{ServerTls, TlsCounters, TlsFiles, HANDSHAKE_TIMEOUT};
pub use stream::{
    ClientReadHalf, ClientStream, ClientWriteHalf, DoorReadHalf, DoorStream, DoorWriteHalf, PeerCertificates,
    PeerReadHalf, PeerStream, PeerWriteHalf, TlsOrPlain, TlsReadHalf, TlsWriteHalf,
};

/// The first byte of every TLS record that opens a handshake: a client
/// that sends anything else first is not speaking TLS.
pub const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The crypto every configuration here is built with: ring, which builds
/// with no tools beyond a C compiler, named explicitly rather than
/// installed process-wide so that nothing depends on start-up order.
fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(feature = "generate")]
pub mod local_ca;
#[cfg(feature = "testing")]
pub mod testing;
