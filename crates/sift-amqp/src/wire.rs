//! AMQP frames as they cross the connection, checked before the AMQP
//! library reads them (by [`crate::stream::Rewound`]): each frame's size
//! must hold its fixed header and stay within `amqp.max_frame_bytes`. The library's frame decoder reads
//! the four header bytes of a frame without looking at its length, so a
//! frame of 4 to 7 bytes would end its connection task in a panic; here
//! it ends the connection with an error that says why.
//!
//! [`decode_frames`] is the same path for a whole byte string, for the fuzz
//! target: the stream's checks, the frame decoder, and for each transfer the message decoder
//! and the JMS mapping both ways.

use bytes::Buf;
use fe2o3_amqp::frames::amqp::{Frame, FrameBody, FrameDecoder};
use fe2o3_amqp::types::messaging::message::DecodeIntoMessage;
use fe2o3_amqp::types::messaging::Body;
use fe2o3_amqp::types::primitives::Value as AmqpValue;
use tokio_util::codec::Decoder;

/// A frame's fixed header: size, data offset, type, channel.
pub const FRAME_HEADER_BYTES: usize = 8;

/// Why the bytes are not AMQP frames this server takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame's size is below its own header.
    #[error("frame of {0} bytes: a frame holds at least its 8-byte header")]
    TooSmall(usize),
    /// A frame's size is over the announced maximum.
    #[error("frame of {size} bytes: over amqp.max_frame_bytes = {max}")]
    TooLarge {
        /// The size the frame announced.
        size: usize,
        /// The maximum announced to the client.
        max: usize,
    },
}

/// Checks a frame's size: its header at least, `max_frame_bytes` at most.
pub fn check_size(size: usize, max_frame_bytes: usize) -> Result<(), FrameError> {
    if size < FRAME_HEADER_BYTES {
        return Err(FrameError::TooSmall(size));
    }
    if size > max_frame_bytes {
        return Err(FrameError::TooLarge { size, max: max_frame_bytes });
    }
    Ok(())
}

/// Decodes `data` (frames after the protocol header) as the door does:
/// checked by [`crate::stream::Rewound`], then frame by frame by the
/// library's decoder; each transfer's payload is decoded as a message and
/// mapped to a Sift message and back. Returns the frames decoded, stopping
/// at the first error.
pub fn decode_frames(data: &[u8], limits: crate::stream::StreamLimits) -> Vec<Frame> {
    let mut frames = Vec::new();
    let header = crate::sasl::AMQP_HEADER.to_vec();
    let mut stream = crate::stream::Rewound::new(tokio::io::empty(), header, limits, Default::default());
    let fed = stream.feed(data);
    let mut checked = stream.take_ready();
    checked.advance(crate::sasl::AMQP_HEADER.len());
    if fed.is_err() {
        return frames; // The door ends the connection: nothing of it reaches the library.
    }
    while checked.len() >= 4 {
        let size = u32::from_be_bytes([checked[0], checked[1], checked[2], checked[3]]) as usize;
        let mut body = checked.split_to(size).split_off(4);
        let decoded = FrameDecoder {}.decode(&mut body);
        let Ok(Some(frame)) = decoded else { break };
        if let FrameBody::Transfer { payload, .. } = frame.body() {
            map_both_ways(payload);
        }
        frames.push(frame);
    }
    frames
}

/// A transfer's payload through the message decoder and the JMS mapping.
fn map_both_ways(payload: &[u8]) {
    let reader = serde_amqp::read::SliceReader::new(payload);
    let Ok(message) = <Body<AmqpValue> as DecodeIntoMessage>::decode_message_from_reader(reader) else { return };
    let Ok(topic) = sift_core::TopicName::new("fuzz") else { return };
    if let Ok(mapped) = crate::message_in::message_of(message, topic) {
        let _ = crate::message_out::amqp_message_of(&mapped, 0, crate::jms::NodeType::Queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_hold_the_header_and_stay_within_the_limit() {
        assert_eq!(check_size(8, 512), Ok(()));
        assert_eq!(check_size(5, 512), Err(FrameError::TooSmall(5)));
        assert_eq!(check_size(1024, 512), Err(FrameError::TooLarge { size: 1024, max: 512 }));
    }

    #[test]
    fn short_and_garbled_frames_decode_to_nothing_without_a_panic() {
        let limits = crate::stream::StreamLimits {
            max_frame_bytes: 4096,
            max_message_bytes: 1 << 20,
            transaction_bytes_max: 1 << 20,
            drain_hold_max: std::time::Duration::from_secs(1),
            commit_wait_max: std::time::Duration::from_secs(1),
            links_max: 1024,
        };
        for data in
            [&b"\x00\x00\x00\x04"[..], b"\x00\x00\x00\x08\x02\x00\x00\x00", b"\x00\x00\x00\x09\x02\x00\x00\x00\xff"]
        {
            let _ = decode_frames(data, limits);
        }
        assert_eq!(decode_frames(b"\x00\x00\x00\x08\x02\x00\x00\x00", limits).len(), 1, "an empty frame (heartbeat)");
    }
}
