//! Certificates made on the spot, for tests (feature `testing`): a
//! [`LocalCa`] whose failures fail the test.

use std::path::Path;

use rcgen::CertificateParams;

pub use crate::local_ca::Issued;
use crate::local_ca::LocalCa;
use crate::{ClientTlsFiles, TlsFiles};

/// A CA written to `<dir>/<name>-ca.pem`, which issues certificates.
pub struct TestCa {
    ca: LocalCa,
    /// The CA's certificate file.
    pub cert: std::path::PathBuf,
}

impl TestCa {
    /// Makes a CA named `name` and writes its certificate under `dir`.
    pub fn new(dir: &Path, name: &str) -> TestCa {
        let ca = LocalCa::new(dir, name).expect("a test CA");
        TestCa { cert: ca.cert.clone(), ca }
    }

    /// A certificate for `names` (DNS names, or IP addresses such as
    /// `127.0.0.1`), signed by this CA.
    pub fn issue(&self, file: &str, names: &[&str]) -> Issued {
        self.issue_with(file, names, |_| {})
    }

    /// As [`TestCa::issue`], with `adjust` changing the parameters first
    /// (an expiry in the past, a different common name).
    pub fn issue_with(&self, file: &str, names: &[&str], adjust: impl FnOnce(&mut CertificateParams)) -> Issued {
        self.ca.issue_with(file, names, adjust).expect("a test certificate")
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
