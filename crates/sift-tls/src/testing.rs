//! Certificates made on the spot, for tests: a CA, and certificates it
//! signs written as PEM files beside it (feature `testing`).

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

use crate::{ClientTlsFiles, TlsFiles};

/// A CA written to `<dir>/<name>-ca.pem`, which issues certificates.
pub struct TestCa {
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

impl TestCa {
    /// Makes a CA named `name` and writes its certificate under `dir`.
    pub fn new(dir: &Path, name: &str) -> TestCa {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, format!("{name} test CA"));
        let certificate = params.self_signed(&key).expect("CA certificate");
        let cert = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&cert, certificate.pem()).expect("write CA");
        let issuer = Issuer::new(params, key);
        TestCa { issuer, dir: dir.to_path_buf(), name: name.to_string(), cert }
    }

    /// A certificate for `names` (DNS names, or IP addresses such as
    /// `127.0.0.1`), signed by this CA, written as `<file>.pem` and
    /// `<file>-key.pem`.
    pub fn issue(&self, file: &str, names: &[&str]) -> Issued {
        self.issue_with(file, names, |_| {})
    }

    /// As [`TestCa::issue`], with `adjust` changing the parameters first
    /// (an expiry in the past, a different common name).
    pub fn issue_with(&self, file: &str, names: &[&str], adjust: impl FnOnce(&mut CertificateParams)) -> Issued {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        for name in names {
            let san = match name.parse::<std::net::IpAddr>() {
                Ok(address) => SanType::IpAddress(address),
                Err(_) => SanType::DnsName((*name).try_into().expect("DNS name")),
            };
            params.subject_alt_names.push(san);
        }
        params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or(file));
        adjust(&mut params);
        let certificate = params.signed_by(&key, &self.issuer).expect("certificate");
        let cert = self.dir.join(format!("{}-{file}.pem", self.name));
        let key_path = self.dir.join(format!("{}-{file}-key.pem", self.name));
        std::fs::write(&cert, certificate.pem()).expect("write certificate");
        std::fs::write(&key_path, key.serialize_pem()).expect("write key");
        Issued { cert, key: key_path }
    }

    /// A server certificate for `localhost` and 127.0.0.1, as a door's
    /// TLS files (client certificates checked against this CA).
    pub fn server_files(&self, file: &str) -> TlsFiles {
        let issued = self.issue(file, &["localhost", "127.0.0.1"]);
        TlsFiles { cert: issued.cert, key: issued.key, client_ca: Some(self.cert.clone()) }
    }

    /// A client's files that trust this CA and present `issued` if given.
    pub fn client_files(&self, issued: Option<&Issued>) -> ClientTlsFiles {
        ClientTlsFiles {
            ca: Some(self.cert.clone()),
            cert: issued.map(|issued| issued.cert.clone()),
            key: issued.map(|issued| issued.key.clone()),
        }
    }
}
