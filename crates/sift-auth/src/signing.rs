//! Signed messages (seed 000 §8): a publisher signs a message with its
//! Ed25519 key over the topic, the properties, the metadata and the
//! payload; the broker refuses unsigned or forged messages on topics that
//! require a signature, and a subscriber verifies end to end.
//!
//! The signature travels in two properties, so that it crosses every door
//! and broker link unchanged: `sift.signer` (the key's name) and
//! `sift.signature` (base64url of the 64 signature bytes). What is signed
//! is [`canonical`]: a fixed encoding of the topic, the properties sorted
//! (so that a door that reorders them breaks nothing), `sift.signer`
//! among them (binding the key named) and `sift.signature` not, the
//! metadata and the payload. Broker stamps (id, time, publisher, hops) are
//! not signed: they change on the way.

use base64::Engine;
use ring::signature::{Ed25519KeyPair, UnparsedPublicKey, ED25519};
use sift_core::{Message, Value};

/// The property naming the key that signed the message.
pub const SIGNER_PROPERTY: &str = "sift.signer";
/// The property holding the signature (base64url, no padding).
pub const SIGNATURE_PROPERTY: &str = "sift.signature";
/// What the canonical encoding starts with: the scheme and its version.
const CANONICAL_PREFIX: &[u8] = b"sift-signature-v1\0";

/// Why a message's signature does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// It carries no `sift.signature` (or no `sift.signer`).
    #[error("the message is not signed")]
    Unsigned,
    /// Its signer is not among the keys accepted here.
    #[error("signer {0:?} is not accepted here")]
    UnknownSigner(String),
    /// The signature does not verify with the signer's key: the message
    /// was changed after signing, or signed by another key.
    #[error("the signature of {0:?} does not verify: forged or changed")]
    Forged(String),
    /// The signature property is not base64url.
    #[error("malformed signature: {0}")]
    Malformed(String),
}

/// A key that signs messages, with the name receivers know it by.
pub struct SigningKey {
    /// The name written in `sift.signer`.
    pub name: String,
    pair: Ed25519KeyPair,
}

impl SigningKey {
    /// The key in `pem` (PKCS#8, as `sift token keygen` or `openssl genpkey
    /// -algorithm ed25519` writes), known as `name`.
    pub fn from_pem(name: &str, pem: &str) -> Result<SigningKey, String> {
        Ok(SigningKey { name: name.to_string(), pair: crate::keys::ed25519_private_key(pem)? })
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("SigningKey").field("name", &self.name).finish_non_exhaustive()
    }
}

/// A key that verifies messages: a name and an Ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyingKey {
    /// The name signers write in `sift.signer`.
    pub name: String,
    key: [u8; crate::keys::ED25519_PUBLIC_KEY_BYTES],
}

impl VerifyingKey {
    /// `public_key` (base64 of 32 bytes, or PEM), known as `name`.
    pub fn new(name: &str, public_key: &str) -> Result<VerifyingKey, String> {
        Ok(VerifyingKey { name: name.to_string(), key: crate::keys::ed25519_public_key(public_key)? })
    }
}

/// Signs `message` with `key`: replaces any signature it had.
pub fn sign(message: &mut Message, key: &SigningKey) {
    message.properties.retain(|(name, _)| name != SIGNER_PROPERTY && name != SIGNATURE_PROPERTY);
    message.properties.push((SIGNER_PROPERTY.to_string(), Value::Str(key.name.as_str().into())));
    let signature = key.pair.sign(&canonical(message));
    let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature.as_ref());
    message.properties.push((SIGNATURE_PROPERTY.to_string(), Value::Str(text.into())));
}

/// Checks `message`'s signature against `keys`; the key that signed it.
pub fn verify<'keys>(message: &Message, keys: &'keys [VerifyingKey]) -> Result<&'keys VerifyingKey, SignatureError> {
    let text = |name: &str| property_text(message, name);
    let (Some(signer), Some(signature)) = (text(SIGNER_PROPERTY), text(SIGNATURE_PROPERTY)) else {
        return Err(SignatureError::Unsigned);
    };
    let key = keys
        .iter()
        .find(|key| *key.name == *signer)
        .ok_or_else(|| SignatureError::UnknownSigner(signer.to_string()))?;
    let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(signature.as_bytes())
        .map_err(|error| SignatureError::Malformed(error.to_string()))?;
    UnparsedPublicKey::new(&ED25519, &key.key)
        .verify(&canonical(message), &signature)
        .map_err(|_| SignatureError::Forged(key.name.clone()))?;
    Ok(key)
}

/// Signatures a [`Verifier`] remembers, with the messages they verified.
pub const VERIFIED_RECENT_MAX: usize = 4_096;

/// Verifies messages with a set of keys, remembering the last
/// [`VERIFIED_RECENT_MAX`] it verified: a subscriber whose subscriptions
/// overlap receives the same message once per matching subscription, and
/// a copy equal in every signed part to one already verified needs no
/// second Ed25519 check (a copy that differs is verified in full, so a
/// changed copy is still caught).
#[derive(Debug)]
pub struct Verifier {
    keys: Vec<VerifyingKey>,
    recent: std::sync::Mutex<Recent>,
}

/// The verified messages by signature, and their order for eviction.
#[derive(Debug, Default)]
struct Recent {
    by_signature: std::collections::HashMap<std::sync::Arc<str>, (usize, Message)>,
    order: std::collections::VecDeque<std::sync::Arc<str>>,
}

impl Verifier {
    /// A verifier that accepts signatures of `keys`.
    pub fn new(keys: Vec<VerifyingKey>) -> Verifier {
        Verifier { keys, recent: std::sync::Mutex::new(Recent::default()) }
    }

    /// As [`verify`]; the name of the key that signed it.
    pub fn verify(&self, message: &Message) -> Result<&VerifyingKey, SignatureError> {
        let signature = property_text(message, SIGNATURE_PROPERTY);
        if let Some(signature) = &signature {
            let recent = self.recent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((key, verified)) = recent.by_signature.get(signature) {
                if same_signed_parts(verified, message) {
                    return Ok(&self.keys[*key]);
                }
            }
        }
        let key = verify(message, &self.keys)?;
        if let Some(signature) = signature {
            let index = self.keys.iter().position(|known| std::ptr::eq(known, key)).unwrap_or_default();
            let mut recent = self.recent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if recent.by_signature.insert(signature.clone(), (index, message.clone())).is_none() {
                recent.order.push_back(signature);
            }
            while recent.order.len() > VERIFIED_RECENT_MAX {
                if let Some(oldest) = recent.order.pop_front() {
                    recent.by_signature.remove(&oldest);
                }
            }
            debug_assert_eq!(recent.order.len(), recent.by_signature.len());
        }
        Ok(key)
    }
}

/// Whether two messages agree in every part a signature covers.
fn same_signed_parts(first: &Message, second: &Message) -> bool {
    first.topic == second.topic
        && first.payload == second.payload
        && first.metadata == second.metadata
        && first.properties == second.properties
}

/// The text of the string property `name`, if the message has one.
fn property_text(message: &Message, name: &str) -> Option<std::sync::Arc<str>> {
    message.properties.iter().find(|(property, _)| property == name).and_then(|(_, value)| match value {
        Value::Str(text) => Some(text.clone()),
        _ => None,
    })
}

/// The bytes a signature covers (see the module's documentation).
pub fn canonical(message: &Message) -> Vec<u8> {
    let mut properties: Vec<Vec<u8>> = message
        .properties
        .iter()
        .filter(|(name, _)| name != SIGNATURE_PROPERTY)
        .map(|(name, value)| {
            let mut encoded = Vec::new();
            put_bytes(&mut encoded, name.as_bytes());
            put_value(&mut encoded, value);
            encoded
        })
        .collect();
    properties.sort_unstable();
    let metadata = message.metadata.as_deref();
    let mut bytes = Vec::with_capacity(CANONICAL_PREFIX.len() + message.payload.len() + 64);
    bytes.extend_from_slice(CANONICAL_PREFIX);
    put_bytes(&mut bytes, message.topic.as_str().as_bytes());
    bytes.extend_from_slice(&(properties.len() as u32).to_be_bytes());
    for property in properties {
        bytes.extend_from_slice(&property);
    }
    bytes.push(u8::from(metadata.is_some()));
    put_bytes(&mut bytes, metadata.unwrap_or_default());
    put_bytes(&mut bytes, &message.payload);
    bytes
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Bool(flag) => out.extend_from_slice(&[b'b', u8::from(*flag)]),
        Value::Int(number) => {
            out.push(b'i');
            out.extend_from_slice(&number.to_be_bytes());
        }
        Value::Float(number) => {
            out.push(b'f');
            out.extend_from_slice(&number.to_bits().to_be_bytes());
        }
        Value::Str(text) => {
            out.push(b's');
            put_bytes(out, text.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_core::TopicName;

    fn keys(name: &str) -> (SigningKey, VerifyingKey) {
        let (private, public) = crate::tokens::generate_key().expect("key pair");
        (SigningKey::from_pem(name, &private).expect("signing key"), VerifyingKey::new(name, &public).expect("key"))
    }

    fn order() -> Message {
        let mut message = Message::new(TopicName::new("orders.eu").expect("topic"), "42 widgets");
        message.properties = vec![("region".into(), Value::Str("EU".into())), ("amount".into(), Value::Int(42))];
        message.metadata = Some("<order/>".into());
        message
    }

    #[test]
    fn a_signed_message_verifies_whatever_the_order_of_its_properties() {
        let (signing, verifying) = keys("ops");
        let mut message = order();
        sign(&mut message, &signing);
        message.properties.reverse();
        message.id = 99;
        assert_eq!(verify(&message, std::slice::from_ref(&verifying)).map(|key| key.name.as_str()), Ok("ops"));
    }

    #[test]
    fn any_change_to_what_is_signed_is_a_forgery() {
        let (signing, verifying) = keys("ops");
        let mut signed = order();
        sign(&mut signed, &signing);
        let changes: [fn(&mut Message); 5] = [
            |message| message.payload = "43 widgets".into(),
            |message| message.properties[0].1 = Value::Str("US".into()),
            |message| message.properties.push(("extra".into(), Value::Bool(true))),
            |message| message.metadata = None,
            |message| message.topic = TopicName::new("orders.us").expect("topic"),
        ];
        for change in changes {
            let mut message = signed.clone();
            change(&mut message);
            assert_eq!(verify(&message, std::slice::from_ref(&verifying)), Err(SignatureError::Forged("ops".into())));
        }
    }

    #[test]
    fn a_verifier_checks_a_repeated_copy_cheaply_but_still_catches_a_changed_one() {
        let (signing, verifying) = keys("ops");
        let verifier = Verifier::new(vec![verifying]);
        let mut message = order();
        sign(&mut message, &signing);
        assert_eq!(verifier.verify(&message).map(|key| key.name.as_str()), Ok("ops"));
        assert_eq!(verifier.verify(&message.clone()).map(|key| key.name.as_str()), Ok("ops"), "a copy");
        let mut changed = message.clone();
        changed.payload = "9000 widgets".into();
        assert_eq!(
            verifier.verify(&changed),
            Err(SignatureError::Forged("ops".into())),
            "same signature, other payload"
        );
        for index in 0..(VERIFIED_RECENT_MAX + 10) {
            let mut other = order();
            other.payload = format!("order {index}").into();
            sign(&mut other, &signing);
            verifier.verify(&other).expect("verified");
        }
        let recent = verifier.recent.lock().expect("lock");
        assert_eq!((recent.order.len(), recent.by_signature.len()), (VERIFIED_RECENT_MAX, VERIFIED_RECENT_MAX));
    }

    #[test]
    fn unsigned_unknown_and_impostor_signers_are_refused() {
        let (signing, verifying) = keys("ops");
        let (impostor, _) = keys("ops");
        assert_eq!(verify(&order(), std::slice::from_ref(&verifying)), Err(SignatureError::Unsigned));
        let mut by_impostor = order();
        sign(&mut by_impostor, &impostor);
        assert_eq!(verify(&by_impostor, std::slice::from_ref(&verifying)), Err(SignatureError::Forged("ops".into())));
        let (stranger, _) = keys("stranger");
        let mut by_stranger = order();
        sign(&mut by_stranger, &stranger);
        let refused = verify(&by_stranger, std::slice::from_ref(&verifying));
        assert_eq!(refused, Err(SignatureError::UnknownSigner("stranger".into())));
        let mut signed = order();
        sign(&mut signed, &signing);
        sign(&mut signed, &signing);
        assert_eq!(signed.properties.iter().filter(|(name, _)| name == SIGNATURE_PROPERTY).count(), 1);
    }
}
