//! `sift passwd`: prints the argon2id hash of a password, for a users
//! file's `password_hash`.
//!
//! The password is read from standard input (its first line, without the
//! line end), or from `SIFT_PASSWORD`, never from the command line, where
//! other users of the machine could read it in the process list.

use std::io::BufRead;

use clap::Args;

use crate::CliError;

/// The variable a password may come from instead of standard input.
pub const PASSWORD_VARIABLE: &str = "SIFT_PASSWORD";

/// Arguments of `sift passwd`.
#[derive(Debug, Args)]
pub struct PasswdArgs {}

/// Prints the hash of the password given on standard input or in
/// `SIFT_PASSWORD`.
pub fn run(_args: PasswdArgs) -> Result<(), CliError> {
    let password = match std::env::var(PASSWORD_VARIABLE) {
        Ok(password) => password,
        Err(_) => read_first_line()?,
    };
    if password.is_empty() {
        return Err(CliError::Usage(format!(
            "no password: give it on standard input (`sift passwd < file`) or in {PASSWORD_VARIABLE}"
        )));
    }
    let hash = sift_auth::password::hash(&password).map_err(|error| CliError::Usage(error.to_string()))?;
    println!("{hash}");
    Ok(())
}

fn read_first_line() -> Result<String, CliError> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|source| CliError::File { path: "standard input".into(), source })?;
    Ok(line.trim_end_matches(['\n', '\r']).to_string())
}
