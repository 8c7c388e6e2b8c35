//! `--tls` and `--tls-ca`: the bench's clients speak TLS, so that a run
//! measures what encryption costs.
//!
//! With `--server`, `--tls-ca` names the CA the running broker's
//! certificate chains to. Embedded brokers get a certificate made for the
//! run: a CA and, per broker, a certificate for 127.0.0.1 under the
//! broker's name (links between embedded brokers run mutual TLS and check
//! that name), written to a directory of this process's own that
//! [`cleanup`] removes.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use sift_broker::tls::TlsFiles;
use sift_client::{ClientTls, ClientTlsFiles};

use crate::error::BenchError;
use crate::options::CommonArgs;

/// The clients' TLS for this run, once set.
static CLIENT_TLS: OnceLock<ClientTls> = OnceLock::new();

/// The CA that signs embedded brokers' certificates, when the run made one.
static EMBEDDED_CA: Mutex<Option<RunCa>> = Mutex::new(None);

/// A CA made for this run and the directory its files are in.
struct RunCa {
    issuer: Issuer<'static, KeyPair>,
    dir: PathBuf,
    cert: PathBuf,
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
    let client = ClientTls::load(&files).map_err(|error| BenchError::Usage(error.to_string()))?;
    let _ = CLIENT_TLS.set(client);
    Ok(())
}

/// The clients' TLS, if the run uses TLS.
pub fn client() -> Option<ClientTls> {
    CLIENT_TLS.get().cloned()
}

/// TLS files for the embedded broker named `name`, if the run made a CA.
pub fn embedded_broker(name: &str) -> Result<Option<TlsFiles>, BenchError> {
    let guard = EMBEDDED_CA.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(ca) = guard.as_ref() else { return Ok(None) };
    std::fs::create_dir_all(&ca.dir).map_err(|source| BenchError::File { path: ca.dir.clone(), source })?;
    let failed = |error: rcgen::Error| BenchError::Usage(format!("cannot make a TLS certificate: {error}"));
    let key = KeyPair::generate().map_err(failed)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    let dns = name.to_string().try_into().map_err(failed)?;
    params.subject_alt_names = vec![SanType::DnsName(dns), SanType::IpAddress([127, 0, 0, 1].into())];
    params.distinguished_name.push(DnType::CommonName, name);
    let certificate = params.signed_by(&key, &ca.issuer).map_err(failed)?;
    let cert = write(&ca.dir, &format!("{name}.pem"), &certificate.pem())?;
    let key = write(&ca.dir, &format!("{name}-key.pem"), &key.serialize_pem())?;
    Ok(Some(TlsFiles { cert, key, client_ca: Some(ca.cert.clone()) }))
}

/// Removes the certificate files made so far (the brokers have read
/// them); the CA stays, and writes its next certificates afresh.
pub fn cleanup() {
    let guard = EMBEDDED_CA.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(ca) = guard.as_ref() {
        let _ = std::fs::remove_dir_all(&ca.dir);
    }
}

/// Makes the run's CA and returns its certificate's file.
fn make_run_ca() -> Result<PathBuf, BenchError> {
    let failed = |error: rcgen::Error| BenchError::Usage(format!("cannot make a TLS certificate: {error}"));
    let dir = std::env::temp_dir().join(format!("sift-bench-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| BenchError::File { path: dir.clone(), source })?;
    let key = KeyPair::generate().map_err(failed)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "sift bench CA");
    let certificate = params.self_signed(&key).map_err(failed)?;
    let cert = write(&dir, "ca.pem", &certificate.pem())?;
    let issuer = Issuer::new(params, key);
    *EMBEDDED_CA.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
        Some(RunCa { issuer, dir, cert: cert.clone() });
    Ok(cert)
}

fn write(dir: &Path, file: &str, text: &str) -> Result<PathBuf, BenchError> {
    let path = dir.join(file);
    std::fs::write(&path, text).map_err(|source| BenchError::File { path: path.clone(), source })?;
    Ok(path)
}
