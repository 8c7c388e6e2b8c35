//! Why TLS could not be set up, or why one connection's handshake failed.

use std::path::PathBuf;

/// A TLS configuration could not be built: each names the file and what
/// is wrong with it, so that an operator fixes the right thing.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read the TLS {what} {path}: {source}")]
    Read {
        /// What the file was to hold ("certificate", "private key"...).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not PEM, or holds a block that does not parse.
    #[error("the TLS {what} {path} is not valid PEM: {reason}")]
    Pem {
        /// What the file was to hold.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// A file holds no block of the kind wanted.
    #[error("the TLS {what} {path} holds no {wanted} (a PEM block such as -----BEGIN {wanted}-----)")]
    Empty {
        /// What the file was to hold.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The PEM label looked for.
        wanted: &'static str,
    },
    /// rustls refused the certificates or key as given (a key that does
    /// not match the certificate, an unsupported key type, a bad CA).
    #[error("the TLS {what} is not usable: {reason}")]
    Refused {
        /// What was being set up.
        what: &'static str,
        /// What rustls said.
        reason: String,
    },
    /// A client certificate was given without its key, or the reverse.
    #[error("a client certificate needs both --tls-cert and --tls-key")]
    HalfClientCertificate,
    /// A host name the client is to verify the broker against is not a
    /// DNS name or an IP address.
    #[error("cannot check the broker's certificate against {host:?}: not a DNS name or IP address")]
    ServerName {
        /// The host as given.
        host: String,
    },
}

/// One connection's TLS handshake failed; the door counts it and closes
/// the connection, and nothing else is affected.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The client spoke plain text to a TLS port (it was told so).
    #[error("plain text on a TLS port")]
    PlainText,
    /// The handshake did not finish in time.
    #[error("the TLS handshake took longer than {seconds} s")]
    TimedOut {
        /// The limit.
        seconds: u64,
    },
    /// The handshake failed: a certificate the broker does not trust, a
    /// protocol the two sides do not share, or the socket closed.
    #[error("TLS handshake failed: {0}")]
    Handshake(std::io::Error),
}
