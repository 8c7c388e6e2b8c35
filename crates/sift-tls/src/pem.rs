//! Reading certificates and keys from PEM files, with errors that name
//! the file.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::TlsError;

/// Every certificate in the PEM file at `path` (a chain, leaf first, or a
/// bundle of CAs); `what` names the file's role in errors.
pub(crate) fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = read(what, path)?;
    let mut found = Vec::new();
    for certificate in CertificateDer::pem_slice_iter(&text) {
        let certificate = certificate.map_err(|error| pem_error(what, path, error))?;
        found.push(certificate);
    }
    if found.is_empty() {
        return Err(TlsError::Empty { what, path: path.to_path_buf(), wanted: "CERTIFICATE" });
    }
    Ok(found)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in the PEM file at `path`.
pub(crate) fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let what = "private key";
    let text = read(what, path)?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|error| match error {
        rustls::pki_types::pem::Error::NoItemsFound => {
            TlsError::Empty { what, path: path.to_path_buf(), wanted: "PRIVATE KEY" }
        }
        other => pem_error(what, path, other),
    })
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { what, path: path.to_path_buf(), source })
}

fn pem_error(what: &'static str, path: &Path, error: rustls::pki_types::pem::Error) -> TlsError {
    TlsError::Pem { what, path: path.to_path_buf(), reason: error.to_string() }
}

/// A root store holding every certificate of the PEM file at `path`.
pub(crate) fn root_store(what: &'static str, path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in certificates(what, path)? {
        roots.add(certificate).map_err(|error| TlsError::Refused { what, reason: error.to_string() })?;
    }
    Ok(roots)
}
