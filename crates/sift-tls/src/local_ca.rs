//! A certificate authority made on the spot (feature `generate`): a CA,
//! and certificates it signs, written as PEM files beside it. Tests and
//! benchmarks use it to run TLS without files made beforehand.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

use crate::TlsError;

/// A CA written to `<dir>/<name>-ca.pem`, which issues certificates.
pub struct LocalCa {
    issuer: Issuer<'static, KeyPair>,
    dir: PathBuf,
    name: String,
    /// The CA's certificate file.
    pub cert: PathBuf,
}

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

fn failed(what: &'static str) -> impl Fn(rcgen::Error) -> TlsError {
    move |error| TlsError::Refused { what, reason: error.to_string() }
}

fn write(path: &Path, text: &str) -> Result<(), TlsError> {
    std::fs::write(path, text).map_err(|error| TlsError::Refused {
        what: "generated file",
        reason: format!("cannot write {}: {error}", path.display()),
    })
}

impl LocalCa {
    /// Makes a CA named `name` and writes its certificate under `dir`.
    pub fn new(dir: &Path, name: &str) -> Result<LocalCa, TlsError> {
        let key = KeyPair::generate().map_err(failed("CA key"))?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed("CA"))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, format!("{name} CA"));
        let certificate = params.self_signed(&key).map_err(failed("CA certificate"))?;
        let cert = dir.join(format!("{name}-ca.pem"));
        write(&cert, &certificate.pem())?;
        let issuer = Issuer::new(params, key);
        Ok(LocalCa { issuer, dir: dir.to_path_buf(), name: name.to_string(), cert })
    }

    /// A certificate for `names` (DNS names, or IP addresses such as
    /// `127.0.0.1`; the first is also its common name), signed by this
    /// CA, written as `<ca>-<file>.pem` and `<ca>-<file>-key.pem`;
    /// `adjust` changes the parameters first (an expiry in the past).
    pub fn issue_with(
        &self,
        file: &str,
        names: &[&str],
        adjust: impl FnOnce(&mut CertificateParams),
    ) -> Result<Issued, TlsError> {
        let key = KeyPair::generate().map_err(failed("key"))?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed("certificate"))?;
        for name in names {
            let san = match name.parse::<std::net::IpAddr>() {
                Ok(address) => SanType::IpAddress(address),
                Err(_) => SanType::DnsName((*name).try_into().map_err(failed("DNS name"))?),
            };
            params.subject_alt_names.push(san);
        }
        params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or(file));
        adjust(&mut params);
        let certificate = params.signed_by(&key, &self.issuer).map_err(failed("certificate"))?;
        let cert = self.dir.join(format!("{}-{file}.pem", self.name));
        let key_path = self.dir.join(format!("{}-{file}-key.pem", self.name));
        write(&cert, &certificate.pem())?;
        write(&key_path, &key.serialize_pem())?;
        Ok(Issued { cert, key: key_path })
    }
}
