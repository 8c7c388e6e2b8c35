//! The broker's own TLS: the native door's, and the links' in both
//! directions, all from the `[tls]` section (`--tls-cert`, `--tls-key`,
//! `--tls-client-ca`).
//!
//! Links are mutual: the listener takes only brokers whose certificate
//! chains to `client_ca`, and a dialling broker checks the peer's
//! certificate against the same CA and presents its own. So one CA that
//! signs every broker's certificate is the whole set-up of a cluster.

use std::sync::{Arc, RwLock};

use sift_tls::{ClientTls, ClientTlsFiles, ServerTls, TlsError, TlsFiles};

use crate::config::Config;

/// Which of the broker's TLS configurations failed to load.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct BrokerTlsError {
    /// "the native door", "broker links".
    pub what: &'static str,
    /// Why.
    pub source: TlsError,
}

/// The native door's TLS and the links'; all `None` on a plain broker.
#[derive(Debug, Default)]
pub struct BrokerTls {
    /// The native door's.
    pub native: Option<Arc<ServerTls>>,
    /// The link listener's (mutual).
    pub links_in: Option<Arc<ServerTls>>,
    links_out: RwLock<Option<ClientTls>>,
    files: Option<TlsFiles>,
}

impl BrokerTls {
    /// Reads `config.tls`. With `client_ca`, links run under mutual TLS;
    /// a broker with links (a link listener or links to dial) needs it.
    pub fn load(config: &Config) -> Result<BrokerTls, BrokerTlsError> {
        let Some(files) = &config.tls else { return Ok(BrokerTls::default()) };
        let native =
            ServerTls::load(files.clone()).map_err(|source| BrokerTlsError { what: "the native door", source })?;
        let has_links = config.network.link_listen.is_some() || !config.network.links.is_empty();
        let (links_in, links_out) = match (&files.client_ca, has_links) {
            (None, false) => (None, None),
            // Without a client CA this fails, naming the flag to give.
            _ => {
                let links_in = ServerTls::load_mutual(files.clone())
                    .map_err(|source| BrokerTlsError { what: "broker links", source })?;
                (Some(links_in), Some(dial_tls(files)?))
            }
        };
        Ok(BrokerTls { native: Some(native), links_in, links_out: RwLock::new(links_out), files: Some(files.clone()) })
    }

    /// The TLS a dialled link runs: `None` on a plain broker, or on a
    /// broker whose TLS has no client CA (it has no links).
    pub fn dial(&self) -> Option<ClientTls> {
        self.links_out.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Whether links run under mutual TLS.
    pub fn links_are_mutual(&self) -> bool {
        self.links_in.is_some()
    }

    /// Reads every file again (SIGHUP): what loads takes effect for the
    /// next handshake; what fails keeps the previous certificates and is
    /// returned.
    pub fn reload(&self) -> Vec<BrokerTlsError> {
        let mut failures = Vec::new();
        if let Some(native) = &self.native {
            if let Err(source) = native.reload() {
                failures.push(BrokerTlsError { what: "the native door", source });
            }
        }
        if let (Some(links_in), Some(files)) = (&self.links_in, &self.files) {
            let reloaded = links_in.reload().and_then(|()| dial_tls(files).map_err(|error| error.source));
            match reloaded {
                Ok(dial) => *self.links_out.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(dial),
                Err(source) => failures.push(BrokerTlsError { what: "broker links", source }),
            }
        }
        failures
    }
}

/// The client side of a dialled link: trusts `client_ca` (the CA of every
/// broker) and presents this broker's own certificate.
fn dial_tls(files: &TlsFiles) -> Result<ClientTls, BrokerTlsError> {
    let client =
        ClientTlsFiles { ca: files.client_ca.clone(), cert: Some(files.cert.clone()), key: Some(files.key.clone()) };
    ClientTls::load(&client).map_err(|source| BrokerTlsError { what: "broker links", source })
}
