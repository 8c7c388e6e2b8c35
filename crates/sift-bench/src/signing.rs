//! `--sign`: every message of the run is signed by its publisher (Ed25519,
//! `sift_auth::signing`) and verified by its subscriber, and embedded
//! brokers require signatures on every topic, so that a run measures what
//! signing costs end to end (seed 000 §8).
//!
//! The key pair is made for the run. Embedded brokers get a users file in
//! a directory of this process's own that grants anonymous clients
//! everything and names the run's key on `>`; [`crate::tls::cleanup`]'s
//! counterpart here is [`cleanup`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use sift_auth::signing::{SigningKey, Verifier, VerifyingKey};
use sift_core::Message;

use crate::error::BenchError;
use crate::options::CommonArgs;

/// The run's key pair, once made.
static KEYS: OnceLock<(SigningKey, Vec<VerifyingKey>)> = OnceLock::new();
/// The embedded brokers' users file, once written.
static USERS_FILE: OnceLock<PathBuf> = OnceLock::new();
/// Deliveries whose signature did not verify: any is a failed run.
static UNVERIFIED: AtomicU64 = AtomicU64::new(0);

/// The name the run's key signs under.
const SIGNER: &str = "bench";

/// Makes the run's key pair and the embedded brokers' users file, when
/// `common` asks for `--sign` (once; again harmlessly).
pub fn setup(common: &CommonArgs) -> Result<(), BenchError> {
    if !common.sign || KEYS.get().is_some() {
        return Ok(());
    }
    let failed = |reason: String| BenchError::Usage(format!("--sign: {reason}"));
    let (private, public) = sift_auth::tokens::generate_key().map_err(|error| failed(error.to_string()))?;
    let signing = SigningKey::from_pem(SIGNER, &private).map_err(failed)?;
    let verifying = VerifyingKey::new(SIGNER, &public).map_err(failed)?;
    let _ = KEYS.set((signing, vec![verifying]));
    if common.server.is_none() {
        let dir = std::env::temp_dir().join(format!("sift-bench-sign-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|source| BenchError::File { path: dir.clone(), source })?;
        let path = dir.join("users.toml");
        let text = format!(
            "[anonymous]\npublish = [\">\"]\nsubscribe = [\">\"]\nstreams = [\"*\"]\nmanage_streams = [\"*\"]\nadmin = true\n\n\
             [[signing_key]]\nname = \"{SIGNER}\"\npublic_key = \"{public}\"\n\n[[signed_topic]]\ntopic = \">\"\nkeys = [\"{SIGNER}\"]\n"
        );
        std::fs::write(&path, text).map_err(|source| BenchError::File { path: path.clone(), source })?;
        let _ = USERS_FILE.set(path);
    }
    Ok(())
}

/// The users file embedded brokers start with under `--sign`.
pub fn users_file() -> Option<PathBuf> {
    USERS_FILE.get().cloned()
}

/// Signs `message` with the run's key, under `--sign`.
pub fn sign(message: &mut Message) {
    if let Some((key, _)) = KEYS.get() {
        sift_auth::signing::sign(message, key);
    }
}

/// A subscriber's verifier under `--sign` (one per subscriber, as each
/// application would hold its own); `None` without it.
pub fn verifier() -> Option<Verifier> {
    KEYS.get().map(|(_, keys)| Verifier::new(keys.clone()))
}

/// Verifies a delivered message with `verifier` (counting failures); true
/// without one.
pub fn verify(verifier: Option<&Verifier>, message: &Message) -> bool {
    let Some(verifier) = verifier else { return true };
    let verified = verifier.verify(message).is_ok();
    if !verified {
        UNVERIFIED.fetch_add(1, Ordering::Relaxed);
    }
    verified
}

/// Fails the run if any delivery did not verify.
pub fn check() -> Result<(), BenchError> {
    match UNVERIFIED.load(Ordering::Relaxed) {
        0 => Ok(()),
        count => Err(BenchError::Usage(format!("--sign: {count} deliveries did not verify"))),
    }
}

/// Removes the embedded brokers' users file.
pub fn cleanup() {
    if let Some(dir) = USERS_FILE.get().and_then(|path| path.parent()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}
