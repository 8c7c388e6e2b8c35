//! The server side: a door's certificate, key and client CA, the
//! configuration built from them (swapped in place on reload), and the
//! accept that refuses plain text in the door's own words.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use crate::pem::{certificates, private_key, root_store};
use crate::{provider, AcceptError, DoorStream, TlsError, TLS_HANDSHAKE_RECORD};

/// How long a client may take from its first byte to the end of the TLS
/// handshake: a connection that stalls there holds a socket and a task.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes of a plain-text request read (and dropped) before the door's
/// refusal is written: reading them first lets the client see the refusal
/// rather than a reset.
const PLAIN_TEXT_DRAIN_BYTES_MAX: usize = 4096;

/// Where a door's TLS comes from (`--tls-cert`, `--tls-key`,
/// `--tls-client-ca`, or a `tls` table in a door's section).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA bundle that client certificates must chain to (PEM). With
    /// it, a client that presents a certificate is checked and may sign in
    /// by it; a link must present one.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
}

/// What a door's TLS has done, for its counters.
#[derive(Debug, Default)]
pub struct TlsCounters {
    /// Handshakes completed.
    pub handshakes: AtomicU64,
    /// Handshakes that failed (untrusted client certificate, no shared
    /// protocol, closed or stalled mid-way).
    pub handshake_failures: AtomicU64,
    /// Clients that spoke plain text to the TLS port and were told so.
    pub plain_text_refused: AtomicU64,
    /// Reloads of the certificate files that took effect.
    pub reloads: AtomicU64,
    /// Reloads refused because a file was missing or wrong (the previous
    /// certificates stay in use).
    pub reload_failures: AtomicU64,
}

impl TlsCounters {
    /// Name and value of every counter, in declaration order.
    pub fn entries(&self) -> [(&'static str, u64); 5] {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        [
            ("tls_handshakes", load(&self.handshakes)),
            ("tls_handshake_failures", load(&self.handshake_failures)),
            ("tls_plain_text_refused", load(&self.plain_text_refused)),
            ("tls_reloads", load(&self.reloads)),
            ("tls_reload_failures", load(&self.reload_failures)),
        ]
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A door's TLS: the files, the configuration the next handshake uses, and
/// the counters. Shared by the door's accept loop and the reload signal.
#[derive(Debug)]
pub struct ServerTls {
    files: TlsFiles,
    client_certificate_required: bool,
    current: RwLock<Arc<ServerConfig>>,
    /// What this door's TLS has done.
    pub counters: TlsCounters,
}

impl ServerTls {
    /// Reads `files` for a user door: a client certificate is checked when
    /// one is presented (if `files.client_ca` is set) but not required.
    pub fn load(files: TlsFiles) -> Result<Arc<ServerTls>, TlsError> {
        ServerTls::load_with(files, false)
    }

    /// Reads `files` for a link listener: every peer must present a
    /// certificate that chains to `files.client_ca` (mutual TLS), so that
    /// only brokers the operator trusts link in.
    pub fn load_mutual(files: TlsFiles) -> Result<Arc<ServerTls>, TlsError> {
        ServerTls::load_with(files, true)
    }

    fn load_with(files: TlsFiles, client_certificate_required: bool) -> Result<Arc<ServerTls>, TlsError> {
        let config = build(&files, client_certificate_required)?;
        Ok(Arc::new(ServerTls {
            files,
            client_certificate_required,
            current: RwLock::new(Arc::new(config)),
            counters: TlsCounters::default(),
        }))
    }

    /// The files this TLS was read from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Reads the files again and, if they are good, makes the next
    /// handshake use them; open connections keep what they agreed. On an
    /// error the previous certificates stay in use.
    pub fn reload(&self) -> Result<(), TlsError> {
        match build(&self.files, self.client_certificate_required) {
            Ok(config) => {
                *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(config);
                bump(&self.counters.reloads);
                Ok(())
            }
            Err(error) => {
                bump(&self.counters.reload_failures);
                Err(error)
            }
        }
    }

    fn config(&self) -> Arc<ServerConfig> {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Runs the TLS handshake on an accepted connection, within
    /// [`HANDSHAKE_TIMEOUT`]. A client whose first byte is not a TLS
    /// handshake record is sent `plain_refusal` (the door's own error in
    /// plain text, possibly empty) and closed.
    pub async fn accept(&self, stream: TcpStream, plain_refusal: &[u8]) -> Result<DoorStream, AcceptError> {
        let acceptor = TlsAcceptor::from(self.config());
        let handshake = async move {
            let mut first = [0_u8; 1];
            let peeked = stream.peek(&mut first).await.map_err(AcceptError::Handshake)?;
            if peeked == 0 {
                return Err(AcceptError::Handshake(std::io::ErrorKind::UnexpectedEof.into()));
            }
            if first[0] != TLS_HANDSHAKE_RECORD {
                refuse_plain_text(stream, plain_refusal).await;
                return Err(AcceptError::PlainText);
            }
            acceptor.accept(stream).await.map_err(AcceptError::Handshake)
        };
        let outcome = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
            Ok(outcome) => outcome,
            Err(_) => Err(AcceptError::TimedOut { seconds: HANDSHAKE_TIMEOUT.as_secs() }),
        };
        match outcome {
            Ok(tls) => {
                bump(&self.counters.handshakes);
                Ok(DoorStream::Tls(Box::new(tls)))
            }
            Err(error) => {
                let counter = match error {
                    AcceptError::PlainText => &self.counters.plain_text_refused,
                    _ => &self.counters.handshake_failures,
                };
                bump(counter);
                Err(error)
            }
        }
    }
}

/// Reads what the plain-text client sent (boundedly), answers with the
/// door's refusal and closes.
async fn refuse_plain_text(mut stream: TcpStream, plain_refusal: &[u8]) {
    let mut drained = [0_u8; PLAIN_TEXT_DRAIN_BYTES_MAX];
    let _ = stream.read(&mut drained).await;
    let _ = stream.write_all(plain_refusal).await;
    let _ = stream.shutdown().await;
}

/// The rustls configuration `files` describe.
fn build(files: &TlsFiles, client_certificate_required: bool) -> Result<ServerConfig, TlsError> {
    let chain = certificates("certificate", &files.cert)?;
    let key = private_key(&files.key)?;
    let refused =
        |what: &'static str| move |error: rustls::Error| TlsError::Refused { what, reason: error.to_string() };
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(refused("setup"))?;
    let builder = match (&files.client_ca, client_certificate_required) {
        (Some(client_ca), required) => {
            let roots = Arc::new(root_store("client CA", client_ca)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
            let verifier = if required { verifier } else { verifier.allow_unauthenticated() };
            let verifier =
                verifier.build().map_err(|error| TlsError::Refused { what: "client CA", reason: error.to_string() })?;
            builder.with_client_cert_verifier(verifier)
        }
        (None, true) => {
            return Err(TlsError::Refused {
                what: "link listener",
                reason: "links need mutual TLS: give the CA their certificates chain to (--tls-client-ca)".into(),
            })
        }
        (None, false) => builder.with_no_client_auth(),
    };
    builder.with_single_cert(chain, key).map_err(refused("certificate and key"))
}
