//! Feeds arbitrary text to the bearer-token check, as a hostile client's
//! `AUTH` (method 2), HTTP `Authorization: Bearer`, STOMP passcode or MQTT
//! password would: it must refuse with a reason, never panic, and never
//! accept (the issuer's key is fixed and its private half unknown here).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sift_auth::tokens::{verify, TokenIssuer};

/// A public key whose private half no one holds: 32 bytes, base64.
const ISSUER_KEY: &str = "O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik=";

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else { return };
    let issuer = TokenIssuer::new("ops", ISSUER_KEY).expect("a valid public key");
    for now_s in [0, 1_700_000_000, u64::MAX] {
        assert!(verify(token, std::slice::from_ref(&issuer), now_s).is_err(), "accepted a token no one can sign");
    }
});
