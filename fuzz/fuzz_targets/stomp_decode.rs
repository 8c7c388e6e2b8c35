//! Feeds arbitrary bytes to the STOMP frame decoder, as a hostile client
//! would, and re-encodes whatever decodes: decode → encode → decode must
//! give the same frame (with the content-length the encoder adds).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sift_stomp::frame::{Decoded, Decoder, Limits};

fuzz_target!(|data: &[u8]| {
    let decoder = Decoder::new(Limits { frame_bytes_max: 64 * 1024, headers_max: 64, header_line_bytes_max: 4096 });
    let mut buf = BytesMut::from(data);
    while let Ok(Some(decoded)) = decoder.decode(&mut buf) {
        let Decoded::Frame(frame) = decoded else { continue };
        let mut encoded = BytesMut::new();
        frame.encode(&mut encoded);
        let Ok(Some(Decoded::Frame(again))) = decoder.decode(&mut encoded) else {
            panic!("a re-encoded frame decodes: {frame:?}");
        };
        assert_eq!(again.command, frame.command);
        assert_eq!(again.body, frame.body);
        for (name, value) in &frame.headers {
            assert!(again.headers.iter().any(|(again_name, again_value)| again_name == name && again_value == value));
        }
    }
});
