//! `sift token`: bearer tokens (JWTs signed with Ed25519) for brokers that
//! trust their issuer.
//!
//! `sift token keygen --key FILE` writes a new private key to FILE (mode
//! 0600, never printed) and prints the public key, for a users file's
//! `[[token_issuer]]`; `sift token issue --key FILE --issuer NAME --user
//! NAME` prints a token. The broker holds only public keys, so a broker's
//! users file can be read by anyone without letting them mint tokens.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use sift_auth::tokens::{generate_key, issue, Claims};

use crate::CliError;

/// Arguments of `sift token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Make a key pair: the private key goes to --key, the public key
    /// (for `[[token_issuer]] public_key`) to standard output.
    Keygen {
        /// File to write the private key to (PKCS#8 PEM); refused if it exists.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
    },
    /// Print a token for --user, signed with the private key in --key.
    Issue {
        /// The issuer's private key (PKCS#8 PEM, from `sift token keygen`
        /// or `openssl genpkey -algorithm ed25519`).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// The issuer's name, as the users file's `[[token_issuer]]` gives it.
        #[arg(long)]
        issuer: String,
        /// The user the token signs in.
        #[arg(long)]
        user: String,
        /// Seconds until the token lapses.
        #[arg(long, default_value_t = 3600)]
        ttl_s: u64,
    },
}

/// Runs `sift token`.
pub fn run(args: TokenArgs) -> Result<(), CliError> {
    let usage = |error: sift_auth::tokens::TokenError| CliError::Usage(error.to_string());
    match args.command {
        TokenCommand::Keygen { key } => {
            let (private, public) = generate_key().map_err(usage)?;
            write_private(&key, &private)?;
            println!("{public}");
        }
        TokenCommand::Issue { key, issuer, user, ttl_s } => {
            let private = std::fs::read_to_string(&key)
                .map_err(|source| CliError::File { path: key.display().to_string(), source })?;
            let now_s = sift_core::system_now_ns() / 1_000_000_000;
            let claims = Claims { iss: issuer, sub: user, exp: now_s + ttl_s, nbf: None, iat: Some(now_s) };
            println!("{}", issue(&claims, &private).map_err(usage)?);
        }
    }
    Ok(())
}

/// Writes a private key readable by its owner only, never over a file.
fn write_private(path: &PathBuf, pem: &str) -> Result<(), CliError> {
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |source| CliError::File { path: path.display().to_string(), source };
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(failed)?;
    file.write_all(pem.as_bytes()).map_err(failed)
}
