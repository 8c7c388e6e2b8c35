//! Bearer tokens: JWTs signed with Ed25519 (`alg: EdDSA`), of which the
//! broker holds only the issuers' public keys.
//!
//! A token names its issuer (`iss`, a `[[token_issuer]]` of the users
//! file), its user (`sub`, a `[[user]]` of the same file, whose
//! permissions it gets) and when it lapses (`exp`, required; `nbf`
//! optional), in seconds since the Unix epoch. The time to judge them by
//! is given by the caller, so that tests move a clock instead of waiting.
//! `sift token keygen` makes a key pair and `sift token issue` signs a
//! token with the private key (see docs/SECURITY.md).

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// Longest token accepted, in bytes: far above a real one, and it bounds
/// what parsing a hostile one costs.
pub const TOKEN_BYTES_MAX: usize = 8 * 1024;

/// Why a token was refused. The text may reach the client, so it says
/// what is wrong with the token, never anything about other users.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT this broker can read (or longer than [`TOKEN_BYTES_MAX`]).
    #[error("malformed token: {0}")]
    Malformed(String),
    /// Its `iss` names no issuer of the users file.
    #[error("token issuer {0:?} is not trusted by this broker")]
    UnknownIssuer(String),
    /// The signature does not verify with the issuer's key.
    #[error("token signature does not verify")]
    BadSignature,
    /// `exp` has passed.
    #[error("token expired at {expired_s} (now {now_s}, seconds since the epoch)")]
    Expired {
        /// Its `exp`.
        expired_s: u64,
        /// The time judged by.
        now_s: u64,
    },
    /// `nbf` is still ahead.
    #[error("token not valid before {not_before_s} (now {now_s})")]
    NotYetValid {
        /// Its `nbf`.
        not_before_s: u64,
        /// The time judged by.
        now_s: u64,
    },
    /// A key could not be read or used.
    #[error("key: {0}")]
    Key(String),
}

/// A trusted issuer: its name and Ed25519 public key.
#[derive(Clone)]
pub struct TokenIssuer {
    /// The name tokens give as `iss`.
    pub name: String,
    key: DecodingKey,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("TokenIssuer").field("name", &self.name).finish_non_exhaustive()
    }
}

impl TokenIssuer {
    /// An issuer with `public_key`: the 32 bytes of an Ed25519 public key
    /// in base64 (as `sift token keygen` prints), or a PEM `PUBLIC KEY`.
    pub fn new(name: &str, public_key: &str) -> Result<TokenIssuer, TokenError> {
        let bytes = crate::keys::ed25519_public_key(public_key).map_err(TokenError::Key)?;
        Ok(TokenIssuer { name: name.to_string(), key: DecodingKey::from_ed_der(&bytes) })
    }
}

/// The claims Sift reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The issuer's name.
    pub iss: String,
    /// The user.
    pub sub: String,
    /// When it lapses (seconds since the epoch).
    pub exp: u64,
    /// When it starts to be valid, if not at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// When it was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
}

/// Checks `token` against `issuers` at `now_s` and returns its claims.
pub fn verify(token: &str, issuers: &[TokenIssuer], now_s: u64) -> Result<Claims, TokenError> {
    if token.len() > TOKEN_BYTES_MAX {
        return Err(TokenError::Malformed(format!("longer than {TOKEN_BYTES_MAX} bytes")));
    }
    let header = jsonwebtoken::decode_header(token).map_err(|error| TokenError::Malformed(error.to_string()))?;
    if header.alg != Algorithm::EdDSA {
        return Err(TokenError::Malformed(format!("algorithm {:?}; this broker takes EdDSA (Ed25519)", header.alg)));
    }
    let unverified = unverified_issuer(token)?;
    let issuer =
        issuers.iter().find(|issuer| issuer.name == unverified).ok_or(TokenError::UnknownIssuer(unverified))?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    // Time is judged below, by the caller's clock.
    validation.validate_exp = false;
    validation.required_spec_claims = ["exp", "sub", "iss"].iter().map(|claim| claim.to_string()).collect();
    let claims = jsonwebtoken::decode::<Claims>(token, &issuer.key, &validation)
        .map_err(|error| match error.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidSignature => TokenError::BadSignature,
            _ => TokenError::Malformed(error.to_string()),
        })?
        .claims;
    if now_s >= claims.exp {
        return Err(TokenError::Expired { expired_s: claims.exp, now_s });
    }
    if let Some(not_before_s) = claims.nbf.filter(|&not_before_s| now_s < not_before_s) {
        return Err(TokenError::NotYetValid { not_before_s, now_s });
    }
    Ok(claims)
}

/// The `iss` of a token before its signature is checked: it only picks
/// the key to check with.
fn unverified_issuer(token: &str) -> Result<String, TokenError> {
    #[derive(Deserialize)]
    struct Issuer {
        iss: String,
    }
    let payload = token.split('.').nth(1).ok_or_else(|| TokenError::Malformed("not three parts".into()))?;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|error| TokenError::Malformed(format!("payload: {error}")))?;
    let issuer: Issuer =
        serde_json::from_slice(&json).map_err(|error| TokenError::Malformed(format!("claims: {error}")))?;
    Ok(issuer.iss)
}

/// Signs `claims` with the Ed25519 private key in `private_pem` (PKCS#8
/// PEM, as `sift token keygen` writes and `openssl genpkey -algorithm
/// ed25519` makes).
pub fn issue(claims: &Claims, private_pem: &str) -> Result<String, TokenError> {
    let key = EncodingKey::from_ed_pem(private_pem.as_bytes()).map_err(|error| TokenError::Key(error.to_string()))?;
    jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), claims, &key)
        .map_err(|error| TokenError::Key(error.to_string()))
}

/// A new key pair: the private key as PKCS#8 PEM, and the public key as
/// base64 of its 32 bytes (what a `[[token_issuer]]` takes).
pub fn generate_key() -> Result<(String, String), TokenError> {
    use ring::signature::KeyPair;
    let random = ring::rand::SystemRandom::new();
    let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&random)
        .map_err(|_| TokenError::Key("the system's random source failed".into()))?;
    let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
        .map_err(|_| TokenError::Key("the generated key does not parse".into()))?;
    let body = base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref());
    let lines: Vec<&str> = body.as_bytes().chunks(64).filter_map(|line| std::str::from_utf8(line).ok()).collect();
    let pem = format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"));
    let public = base64::engine::general_purpose::STANDARD.encode(pair.public_key().as_ref());
    Ok((pem, public))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issuer_and_key(name: &str) -> (TokenIssuer, String) {
        let (private, public) = generate_key().expect("key pair");
        (TokenIssuer::new(name, &public).expect("issuer"), private)
    }

    fn claims(sub: &str, exp: u64) -> Claims {
        Claims { iss: "ops".into(), sub: sub.into(), exp, nbf: None, iat: Some(1_000) }
    }

    #[test]
    fn a_token_signed_by_a_trusted_issuer_names_its_user_until_it_expires() {
        let (issuer, private) = issuer_and_key("ops");
        let token = issue(&claims("alice", 2_000), &private).expect("signed");
        assert_eq!(verify(&token, std::slice::from_ref(&issuer), 1_999).expect("valid").sub, "alice");
        assert_eq!(verify(&token, &[issuer], 2_000), Err(TokenError::Expired { expired_s: 2_000, now_s: 2_000 }));
    }

    #[test]
    fn forged_unknown_and_malformed_tokens_are_refused() {
        let (issuer, _) = issuer_and_key("ops");
        let (_, forger_key) = issuer_and_key("ops");
        let forged = issue(&claims("alice", 2_000), &forger_key).expect("signed");
        assert_eq!(verify(&forged, std::slice::from_ref(&issuer), 1_500), Err(TokenError::BadSignature));
        let mut other = claims("alice", 2_000);
        other.iss = "elsewhere".into();
        let foreign = issue(&other, &forger_key).expect("signed");
        assert_eq!(
            verify(&foreign, std::slice::from_ref(&issuer), 1_500),
            Err(TokenError::UnknownIssuer("elsewhere".into()))
        );
        for bad in ["", "a.b", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", &"x".repeat(TOKEN_BYTES_MAX + 1)] {
            assert!(
                matches!(verify(bad, std::slice::from_ref(&issuer), 1_500), Err(TokenError::Malformed(_))),
                "{bad:.20}"
            );
        }
    }

    #[test]
    fn a_token_is_not_valid_before_its_nbf() {
        let (issuer, private) = issuer_and_key("ops");
        let mut early = claims("alice", 5_000);
        early.nbf = Some(3_000);
        let token = issue(&early, &private).expect("signed");
        assert_eq!(
            verify(&token, std::slice::from_ref(&issuer), 2_999),
            Err(TokenError::NotYetValid { not_before_s: 3_000, now_s: 2_999 })
        );
        assert!(verify(&token, &[issuer], 3_000).is_ok());
    }

    #[test]
    fn public_keys_must_be_32_bytes_of_base64_or_pem() {
        assert!(matches!(TokenIssuer::new("ops", "not base64!"), Err(TokenError::Key(_))));
        assert!(matches!(TokenIssuer::new("ops", "AAAA"), Err(TokenError::Key(reason)) if reason.contains("32 bytes")));
    }
}
