//! `--user`, `--password-file` and `--token-file`: who a client command
//! signs in as; and `--tls-ca`, `--tls-cert`, `--tls-key`: how it reaches
//! a broker that speaks TLS.
//!
//! The password is never an argument (it would show in the process list
//! and the shell's history): it comes from the `SIFT_PASSWORD` environment
//! variable or the first line of `--password-file`.

use std::path::PathBuf;

use clap::Args;
use sift_client::{ClientTls, ClientTlsFiles, Credentials};

use crate::CliError;

/// The environment variable a password is read from.
pub const PASSWORD_VARIABLE: &str = "SIFT_PASSWORD";

/// How a client command signs in, and over what.
#[derive(Debug, Clone, Args)]
pub struct SignInArgs {
    /// Speak TLS to the broker, trusting the CA certificates in this PEM
    /// file to vouch for it.
    #[arg(long, value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// Present this client certificate (PEM, with --tls-key) to a broker
    /// that takes them; it may sign in by it.
    #[arg(long, value_name = "PEM", requires_all = ["tls_ca", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Sign in as this user; the password comes from SIFT_PASSWORD or
    /// --password-file.
    #[arg(long, env = "SIFT_USER", value_name = "NAME")]
    pub user: Option<String>,
    /// File whose first line is the password of --user.
    #[arg(long, value_name = "FILE", requires = "user")]
    pub password_file: Option<PathBuf>,
    /// Sign in with the bearer token (a JWT) in this file instead of a
    /// password.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["user", "password_file"])]
    pub token_file: Option<PathBuf>,
}

impl SignInArgs {
    /// The credentials to sign in with; `None` to connect anonymously.
    pub fn credentials(&self) -> Result<Option<Credentials>, CliError> {
        if let Some(path) = &self.token_file {
            let token = first_line(path)?;
            return Ok(Some(Credentials::token(token)));
        }
        let Some(user) = &self.user else { return Ok(None) };
        let password = match &self.password_file {
            Some(path) => first_line(path)?,
            None => std::env::var(PASSWORD_VARIABLE).map_err(|_| {
                CliError::Usage(format!(
                    "--user {user}: give the password in {PASSWORD_VARIABLE} or the first line of --password-file"
                ))
            })?,
        };
        Ok(Some(Credentials::password(user.clone(), password)))
    }

    /// The TLS to reach the broker with; `None` for plain text.
    pub fn tls(&self) -> Result<Option<ClientTls>, CliError> {
        let files = ClientTlsFiles { ca: self.tls_ca.clone(), cert: self.tls_cert.clone(), key: self.tls_key.clone() };
        if !files.any() {
            return Ok(None);
        }
        ClientTls::load(&files).map(Some).map_err(|error| CliError::Usage(error.to_string()))
    }
}

/// The first line of a file, without its line end; an empty file is an error.
fn first_line(path: &std::path::Path) -> Result<String, CliError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| CliError::File { path: path.display().to_string(), source })?;
    let line = text.lines().next().unwrap_or_default().trim_end_matches('\r');
    if line.is_empty() {
        return Err(CliError::Usage(format!("{}: the first line is empty", path.display())));
    }
    Ok(line.to_string())
}
