//! Feeds arbitrary bytes to the frame decoder, as a hostile peer would, and
//! re-encodes whatever decodes: decode → encode → decode must be stable.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sift_proto::Decoder;

fuzz_target!(|data: &[u8]| {
    let mut decoder = Decoder::new(64 * 1024);
    let mut buf = BytesMut::from(data);
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(frame)) => {
                let mut encoded = BytesMut::new();
                if frame.encode(&mut encoded).is_ok() {
                    let again = decoder.decode(&mut encoded).expect("re-encoded frame decodes");
                    // Floats may be NaN, which is not equal to itself; compare bytes instead.
                    let mut twice = BytesMut::new();
                    if let Some(again) = again {
                        again.encode(&mut twice).expect("encodable");
                        let mut once = BytesMut::new();
                        frame.encode(&mut once).expect("encodable");
                        assert_eq!(once, twice);
                    }
                }
            }
            Ok(None) => break,
            Err(error) if error.is_fatal() => break,
            Err(_) => continue,
        }
    }
});
