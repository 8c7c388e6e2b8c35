//! Feeds arbitrary bytes to the AMQP door's decoding path, as a hostile
//! client would: the SASL frame decoder, then the frames after the
//! protocol header through the door's frame guard and the AMQP library's
//! frame decoder, each transfer's payload through the message decoder and
//! the JMS mapping both ways. Nothing may panic; the door answers bad
//! bytes with an error.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sift_amqp::sasl::decode_frame(BytesMut::from(data));
    let limits = sift_amqp::stream::StreamLimits {
        max_frame_bytes: 64 * 1024,
        max_message_bytes: 1024 * 1024,
        transaction_bytes_max: 1024 * 1024,
        drain_hold_max: std::time::Duration::from_secs(1),
        commit_wait_max: std::time::Duration::from_secs(1),
        links_max: 1024,
    };
    let _ = sift_amqp::wire::decode_frames(data, limits);
});
