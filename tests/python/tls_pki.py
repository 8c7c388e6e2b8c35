"""Certificates for TLS tests, made with the `openssl` command line as an
operator would: a CA, and certificates it signs (a server certificate for
localhost and 127.0.0.1, client certificates named by user), written as PEM
files in a directory the test owns."""

import datetime
import pathlib
import subprocess

DAYS = 30


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class Pki:
    """A CA in `directory` (`ca.pem`) that issues certificates."""

    def __init__(self, directory, name="test"):
        self.directory = pathlib.Path(directory)
        self.name = name
        self.ca = self.directory / f"{name}-ca.pem"
        self.ca_key = self.directory / f"{name}-ca-key.pem"
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", self.ca_key, "-out", self.ca, "-days", str(DAYS), "-subj", f"/CN={name} test CA",
                 cwd=self.directory)

    def issue(self, file, common_name, alt_names=(), days=DAYS, start=None):
        """A certificate for `common_name` with subjectAltName `alt_names`
        (such as "DNS:localhost", "IP:127.0.0.1"); returns (cert, key) paths.
        `start` ("YYYYMMDDHHMMSSZ") with `days` makes certificates valid in the past."""
        cert = self.directory / f"{self.name}-{file}.pem"
        key = self.directory / f"{self.name}-{file}-key.pem"
        csr = self.directory / f"{self.name}-{file}.csr"
        extensions = self.directory / f"{self.name}-{file}.cnf"
        lines = ["basicConstraints=CA:FALSE", "keyUsage=digitalSignature",
                 "extendedKeyUsage=serverAuth,clientAuth"]
        if alt_names:
            lines.append("subjectAltName=" + ",".join(alt_names))
        extensions.write_text("\n".join(lines) + "\n")
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                 "-out", csr, "-subj", f"/CN={common_name}", cwd=self.directory)
        signing = ["x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key, "-CAcreateserial",
                   "-out", cert, "-extfile", extensions]
        if start is None:
            signing += ["-days", str(days)]
        else:
            # `x509` takes no start date before OpenSSL 3.4; `openssl ca` does, with its database.
            signing = self._ca_signing(csr, cert, extensions, start, _plus_days(start, days))
        _openssl(*signing, cwd=self.directory)
        return cert, key

    def _ca_signing(self, csr, cert, extensions, start, end):
        database = self.directory / f"{self.name}-index.txt"
        database.touch()
        serial = self.directory / f"{self.name}-serial"
        if not serial.exists():
            serial.write_text("1000\n")
        config = self.directory / f"{self.name}-ca.cnf"
        config.write_text(
            "[ca]\ndefault_ca = signing\n[signing]\n"
            f"database = {database}\nnew_certs_dir = {self.directory}\nserial = {serial}\n"
            "default_md = sha256\npolicy = any\nunique_subject = no\n[any]\ncommonName = supplied\n")
        return ["ca", "-batch", "-notext", "-config", config, "-cert", self.ca, "-keyfile", self.ca_key,
                "-in", csr, "-out", cert, "-startdate", start, "-enddate", end, "-extfile", extensions]

    def server(self, file="server"):
        """A server certificate for localhost and 127.0.0.1: (cert, key)."""
        return self.issue(file, "localhost", ("DNS:localhost", "IP:127.0.0.1"))


def _plus_days(start, days):
    began = datetime.datetime.strptime(start, "%Y%m%d%H%M%SZ")
    return (began + datetime.timedelta(days=days)).strftime("%Y%m%d%H%M%SZ")
