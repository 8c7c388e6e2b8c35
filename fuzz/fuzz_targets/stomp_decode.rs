//! Feeds arbitrary bytes to the STOMP frame decoder, as a hostile client
//! would, and re-encodes whatever decodes: decode → encode → decode must
//! give the same frame (with the content-length the encoder adds). The
//! headers of CONNECT, STOMP and CONNECTED are not escaped, so a value
//! ending in CR cannot survive a line ending of CR LF: for those, values
//! are compared without trailing CRs.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sift_stomp::frame::{Command, Decoded, Decoder, Limits};

fuzz_target!(|data: &[u8]| {
    let limits = Limits { frame_bytes_max: 64 * 1024, headers_max: 64, header_line_bytes_max: 4096 };
    let decoder = Decoder::new(limits);
    // The encoder may add a content-length header and grow the frame by its line.
    let again_decoder = Decoder::new(Limits { frame_bytes_max: limits.frame_bytes_max + 64, headers_max: limits.headers_max + 1, ..limits });
    let mut buf = BytesMut::from(data);
    while let Ok(Some(decoded)) = decoder.decode(&mut buf) {
        let Decoded::Frame(frame) = decoded else { continue };
        let mut encoded = BytesMut::new();
        frame.encode(&mut encoded);
        let Ok(Some(Decoded::Frame(again))) = again_decoder.decode(&mut encoded) else {
            panic!("a re-encoded frame decodes: {frame:?}");
        };
        assert_eq!(again.command, frame.command);
        assert_eq!(again.body, frame.body);
        let raw = matches!(frame.command, Command::Connect | Command::Stomp | Command::Connected);
        let normal = |value: &str| if raw { value.trim_end_matches('\r').to_string() } else { value.to_string() };
        for (name, value) in &frame.headers {
            let kept = again.headers.iter().any(|(again_name, again_value)| again_name == name && normal(again_value) == normal(value));
            assert!(kept, "header {name:?}: {value:?} lost in {again:?}");
        }
    }
});
