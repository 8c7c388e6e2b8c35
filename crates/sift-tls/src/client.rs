//! The client side: the CA a client trusts to vouch for its broker, and
//! the certificate it may present itself (a broker dialling a link
//! presents its own).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::pem::{certificates, private_key, root_store};
use crate::{provider, ClientStream, TlsError};

/// Where a client's TLS comes from (`--tls-ca`, `--tls-cert`, `--tls-key`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTlsFiles {
    /// The CA bundle the broker's certificate must chain to (PEM).
    pub ca: Option<PathBuf>,
    /// A certificate to present (PEM, leaf first), for brokers that take
    /// client certificates.
    pub cert: Option<PathBuf>,
    /// The key of `cert` (PEM).
    pub key: Option<PathBuf>,
}

impl ClientTlsFiles {
    /// Whether any TLS option was given: a client uses TLS if so.
    pub fn any(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some()
    }
}

/// A client's TLS configuration, cheap to clone into every reconnect.
#[derive(Debug, Clone)]
pub struct ClientTls {
    config: Arc<ClientConfig>,
}

impl ClientTls {
    /// Reads `files`. The CA is required: a client that trusts nothing
    /// cannot check whom it reached.
    pub fn load(files: &ClientTlsFiles) -> Result<ClientTls, TlsError> {
        let Some(ca) = &files.ca else {
            return Err(TlsError::Refused {
                what: "client",
                reason: "give the CA that signed the broker's certificate (--tls-ca PEM)".into(),
            });
        };
        let roots = root_store("CA", ca)?;
        let refused =
            |what: &'static str| move |error: rustls::Error| TlsError::Refused { what, reason: error.to_string() };
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(refused("setup"))?
            .with_root_certificates(roots);
        let config = match (&files.cert, &files.key) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(certificates("client certificate", cert)?, private_key(key)?)
                .map_err(refused("client certificate and key"))?,
            (None, None) => builder.with_no_client_auth(),
            _ => return Err(TlsError::HalfClientCertificate),
        };
        Ok(ClientTls { config: Arc::new(config) })
    }

    /// Runs the handshake on `stream`, checking that the broker's
    /// certificate is valid for `host` (a DNS name or an IP address).
    pub async fn connect(&self, host: &str, stream: TcpStream) -> std::io::Result<ClientStream> {
        let name = server_name(host).map_err(std::io::Error::other)?;
        let connector = TlsConnector::from(self.config.clone());
        let tls = connector.connect(name, stream).await?;
        Ok(ClientStream::Tls(Box::new(tls)))
    }
}

/// The name to check the broker's certificate against.
pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_string()).map_err(|_| TlsError::ServerName { host: host.to_string() })
}

/// The host part of `host:port` (`[v6]:port` too).
pub fn host_of(address: &str) -> &str {
    match address.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|byte| byte.is_ascii_digit()) => host,
        _ => address,
    }
}
