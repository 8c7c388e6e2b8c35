//! Feeds arbitrary bytes to the link frame decoder, as a hostile broker
//! would, and re-encodes whatever decodes: decode → encode → decode must be
//! stable.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sift_proto::link::LinkDecoder;

/// Frame limit for the run: small enough to reach every path quickly.
const MAX_FRAME_BYTES: u32 = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let mut decoder = LinkDecoder::new(MAX_FRAME_BYTES);
    let mut buf = BytesMut::from(data);
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(frame)) => {
                let mut once = BytesMut::new();
                if frame.encode(&mut once).is_err() {
                    continue;
                }
                let mut encoded = once.clone();
                let again = decoder.decode(&mut encoded).expect("re-encoded frame decodes");
                // Floats may be NaN, which is not equal to itself; compare bytes instead.
                if let Some(again) = again {
                    let mut twice = BytesMut::new();
                    again.encode(&mut twice).expect("encodable");
                    assert_eq!(once, twice);
                }
            }
            Ok(None) => break,
            Err(error) if error.is_fatal() => break,
            Err(_) => continue,
        }
    }
});
