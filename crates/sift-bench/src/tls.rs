//! `--tls` and `--tls-ca`: the bench's clients speak TLS, so that a run
//! measures what encryption costs.
//!
//! With `--server`, `--tls-ca` names the CA the running broker's
//! certificate chains to. Embedded brokers get a certificate made for the
//! run (`sift_tls::local_ca`): a CA and, per broker, a certificate for
//! 127.0.0.1 under the broker's name (links between embedded brokers run
//! mutual TLS and check that name), written to a directory of this
//! process's own that [`cleanup`] removes.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use sift_broker::tls::TlsFiles;
use sift_client::{ClientTls, ClientTlsFiles};
use sift_tls::local_ca::LocalCa;

use crate::error::BenchError;
use crate::options::CommonArgs;

/// The clients' TLS for this run, once set.
static CLIENT_TLS: OnceLock<ClientTls> = OnceLock::new();

/// The CA that signs embedded brokers' certificates, and its directory,
/// when the run made one.
static EMBEDDED_CA: Mutex<Option<(LocalCa, PathBuf)>> = Mutex::new(None);

fn failed(error: sift_tls::TlsError) -> BenchError {
    BenchError::Usage(format!("--tls: {error}"))
}

/// Sets up TLS as `common` asks (nothing without `--tls`); called before a
/// scenario's first connection, and again harmlessly.
pub fn setup(common: &CommonArgs) -> Result<(), BenchError> {
    if !common.tls || CLIENT_TLS.get().is_some() {
        return Ok(());
    }
    let ca = match (&common.server, &common.tls_ca) {
        (Some(_), Some(ca)) => ca.clone(),
        (Some(_), None) => return Err(BenchError::Usage("--tls with --server needs --tls-ca PEM".into())),
        (None, _) => make_run_ca()?,
    };
    let files = ClientTlsFiles { ca: Some(ca), cert: None, key: None };
    let _ = CLIENT_TLS.set(ClientTls::load(&files).map_err(failed)?);
    Ok(())
}

/// The clients' TLS, if the run uses TLS.
pub fn client() -> Option<ClientTls> {
    CLIENT_TLS.get().cloned()
}

/// TLS files for the embedded broker named `name`, if the run made a CA.
pub fn embedded_broker(name: &str) -> Result<Option<TlsFiles>, BenchError> {
    let guard = EMBEDDED_CA.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some((ca, dir)) = guard.as_ref() else { return Ok(None) };
    std::fs::create_dir_all(dir).map_err(|source| BenchError::File { path: dir.clone(), source })?;
    let issued = ca.issue_with(name, &[name, "127.0.0.1"], |_| {}).map_err(failed)?;
    Ok(Some(TlsFiles { cert: issued.cert, key: issued.key, client_ca: Some(ca.cert.clone()) }))
}

/// Removes the certificate files made so far (the brokers have read
/// them); the CA stays, and writes its next certificates afresh.
pub fn cleanup() {
    let guard = EMBEDDED_CA.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, dir)) = guard.as_ref() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Makes the run's CA and returns its certificate's file.
fn make_run_ca() -> Result<PathBuf, BenchError> {
    let dir = std::env::temp_dir().join(format!("sift-bench-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| BenchError::File { path: dir.clone(), source })?;
    let ca = LocalCa::new(&dir, "bench").map_err(failed)?;
    let cert = ca.cert.clone();
    *EMBEDDED_CA.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((ca, dir));
    Ok(cert)
}
