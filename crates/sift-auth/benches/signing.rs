//! What one signature costs: signing and verifying a JBI-sized message
//! (2 KB of metadata and a 500-byte payload) with Ed25519, and a
//! [`Verifier`]'s check of a copy it has verified already.
//!
//! Run with `cargo bench -p sift-auth --bench signing`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use sift_auth::signing::{sign, verify, SigningKey, Verifier, VerifyingKey};
use sift_core::{Message, TopicName, Value};

fn message() -> Message {
    let mut message = Message::new(TopicName::new("jbi.ato").expect("topic"), vec![7_u8; 500]);
    message.properties = vec![("type".into(), Value::Str("ato".into()))];
    message.metadata = Some(vec![b'x'; 2_000].into());
    message
}

fn signing(criterion: &mut Criterion) {
    let (private, public) = sift_auth::tokens::generate_key().expect("key pair");
    let key = SigningKey::from_pem("bench", &private).expect("signing key");
    let keys = vec![VerifyingKey::new("bench", &public).expect("verifying key")];
    let mut signed = message();
    sign(&mut signed, &key);
    let mut group = criterion.benchmark_group("ed25519");
    group.bench_function("sign", |bencher| {
        let mut unsigned = message();
        bencher.iter(|| {
            sign(&mut unsigned, &key);
            black_box(unsigned.properties.len())
        })
    });
    group.bench_function("verify", |bencher| bencher.iter(|| black_box(verify(&signed, &keys).is_ok())));
    let verifier = Verifier::new(keys.clone());
    verifier.verify(&signed).expect("verified");
    group.bench_function("verify_a_copy_verified_before", |bencher| {
        bencher.iter(|| black_box(verifier.verify(&signed).is_ok()))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .without_plots()
}

criterion_group! { name = benches; config = config(); targets = signing }
criterion_main!(benches);
