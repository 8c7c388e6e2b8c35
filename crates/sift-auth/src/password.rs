//! Password hashes: argon2id in the PHC string form
//! (`$argon2id$v=19$m=...,t=...,p=...$salt$hash`), as `sift passwd` prints
//! them and the users file holds them. The broker keeps only hashes.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

/// Why a password could not be hashed, or a hash read.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// The text is not a PHC hash string.
    #[error("not a password hash ({0}); make one with `sift passwd`")]
    Malformed(String),
    /// The hash is of another algorithm than argon2id.
    #[error("the hash is {0}; Sift takes argon2id hashes (`sift passwd`)")]
    Algorithm(String),
    /// Hashing failed.
    #[error("cannot hash the password: {0}")]
    Hashing(String),
}

/// An argon2id hash of `password` with a fresh random salt and the crate's
/// default cost (19 MiB, 2 passes, 1 lane: the OWASP minimum).
pub fn hash(password: &str) -> Result<String, PasswordError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| PasswordError::Hashing(error.to_string()))
}

/// Checks that `text` is an argon2id hash string.
pub fn check(text: &str) -> Result<(), PasswordError> {
    let parsed = PasswordHash::new(text).map_err(|error| PasswordError::Malformed(error.to_string()))?;
    if parsed.algorithm.as_str() != "argon2id" {
        return Err(PasswordError::Algorithm(parsed.algorithm.as_str().to_string()));
    }
    Ok(())
}

/// True when `password` is the one `hash_text` was made from. A hash that
/// does not parse verifies nothing.
pub fn verify(password: &str, hash_text: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(hash_text) else { return false };
    Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_and_no_other() {
        let hashed = hash("correct horse").expect("hashes");
        assert!(hashed.starts_with("$argon2id$"), "{hashed}");
        check(&hashed).expect("an argon2id hash");
        assert!(verify("correct horse", &hashed));
        assert!(!verify("correct horse ", &hashed));
        assert!(!verify("correct horse", "not a hash"));
    }

    #[test]
    fn two_hashes_of_one_password_differ_by_their_salt() {
        assert_ne!(hash("same").expect("hashes"), hash("same").expect("hashes"));
    }

    #[test]
    fn other_algorithms_and_garbage_are_refused_with_a_reason() {
        let error = check("plain text").expect_err("not a hash").to_string();
        assert!(error.contains("sift passwd"), "{error}");
        let bcrypt_like = "$argon2i$v=19$m=16,t=2,p=1$c29tZXNhbHQ$dGVzdGhhc2h0ZXN0aGFzaA";
        let error = check(bcrypt_like).expect_err("argon2i is not argon2id").to_string();
        assert!(error.contains("argon2i"), "{error}");
    }
}
