//! Ed25519 keys as operators write them: a public key as base64 of its 32
//! bytes (what `sift token keygen` prints) or a PEM `PUBLIC KEY` (what
//! `openssl pkey -pubout` prints); a private key as PKCS#8 PEM.

use base64::Engine;

/// Bytes of a raw Ed25519 public key.
pub const ED25519_PUBLIC_KEY_BYTES: usize = 32;

/// The DER that precedes the 32 key bytes in an Ed25519
/// SubjectPublicKeyInfo (RFC 8410): SEQUENCE, the algorithm id
/// 1.3.101.112, and the BIT STRING's header.
const ED25519_SPKI_PREFIX: [u8; 12] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];

/// The 32 bytes of an Ed25519 public key written as base64 or PEM.
pub fn ed25519_public_key(text: &str) -> Result<[u8; ED25519_PUBLIC_KEY_BYTES], String> {
    let text = text.trim();
    let bytes = if text.starts_with("-----BEGIN PUBLIC KEY-----") {
        let der = pem_body(text)?;
        der.strip_prefix(&ED25519_SPKI_PREFIX[..])
            .map(<[u8]>::to_vec)
            .ok_or_else(|| "the PEM public key is not an Ed25519 key".to_string())?
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text))
            .map_err(|error| format!("public key is not base64: {error}"))?
    };
    bytes
        .as_slice()
        .try_into()
        .map_err(|_| format!("an Ed25519 public key is {ED25519_PUBLIC_KEY_BYTES} bytes, not {}", bytes.len()))
}

/// An Ed25519 key pair from a PKCS#8 PEM private key (v1, as openssl
/// writes, or v2).
pub fn ed25519_private_key(pem: &str) -> Result<ring::signature::Ed25519KeyPair, String> {
    let der = pem_body(pem.trim())?;
    ring::signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
        .map_err(|error| format!("not an Ed25519 PKCS#8 private key: {error}"))
}

/// The bytes of the first PEM block of `text`.
fn pem_body(text: &str) -> Result<Vec<u8>, String> {
    let body: String = text
        .lines()
        .skip_while(|line| !line.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|line| !line.starts_with("-----END"))
        .map(str::trim)
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).map_err(|error| format!("PEM body is not base64: {error}"))
}
