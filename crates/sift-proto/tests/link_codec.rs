//! Property tests of the link codec: every link frame survives encode →
//! decode, any split of the byte stream decodes the same, and arbitrary bytes
//! never panic.

use bytes::BytesMut;
use proptest::prelude::*;
use sift_core::{Message, TopicName};
use sift_proto::link::*;
use sift_proto::{encode_message, DecodeError, ErrorCode, FilterKind, MessageRef, DEFAULT_MAX_FRAME_BYTES};

mod common;

use common::message_strategy;

fn interest_change_strategy() -> impl Strategy<Value = InterestChange> {
    prop_oneof![
        (any::<u64>(), "[a-z*>.]{1,20}", 0u8..=4, ".{0,40}", "[a-z]{0,8}").prop_map(
            |(key, topic_filter, kind, filter, queue_group)| InterestChange::Add(InterestAdd {
                key,
                topic_filter,
                filter_kind: FilterKind::from_code(kind).expect("0-4"),
                filter,
                queue_group,
            })
        ),
        any::<u64>().prop_map(|key| InterestChange::Remove { key }),
    ]
}

fn link_error_code_strategy() -> impl Strategy<Value = LinkErrorCode> {
    prop_oneof![
        (1u16..=20).prop_map(|code| LinkErrorCode::Common(ErrorCode::from_code(code))),
        Just(LinkErrorCode::ClusterMismatch),
        Just(LinkErrorCode::DuplicateBrokerName),
        Just(LinkErrorCode::AlreadyLinked),
    ]
}

fn handshake_strategy() -> impl Strategy<Value = LinkFrame> {
    prop_oneof![
        (any::<u16>(), any::<u16>(), ".{0,12}", ".{0,12}", any::<u32>()).prop_map(
            |(version_min, version_max, cluster, broker, link_cost)| {
                LinkFrame::Hello(LinkHello { version_min, version_max, cluster, broker, link_cost })
            }
        ),
        (any::<u16>(), ".{0,12}", ".{0,12}", any::<u32>()).prop_map(|(version, cluster, broker, link_cost)| {
            LinkFrame::Welcome(LinkWelcome { version, cluster, broker, link_cost })
        }),
        (link_error_code_strategy(), any::<bool>(), ".{0,30}")
            .prop_map(|(code, fatal, message)| LinkFrame::Error(LinkErrorFrame { code, fatal, message })),
        any::<u64>().prop_map(|nonce| LinkFrame::Ping { nonce }),
        (any::<u64>(), any::<u64>()).prop_map(|(request_id, origin_ns)| LinkFrame::Time { request_id, origin_ns }),
        prop::array::uniform4(any::<u64>()).prop_map(|words| LinkFrame::TimeReply(sift_proto::TimeReply {
            request_id: words[0],
            origin_ns: words[1],
            receive_ns: words[2],
            transmit_ns: words[3],
        })),
        any::<u64>().prop_map(|nonce| LinkFrame::Pong { nonce }),
    ]
}

fn routing_strategy() -> impl Strategy<Value = LinkFrame> {
    prop_oneof![
        (".{0,12}", any::<u64>(), prop::collection::vec((".{0,12}", any::<u32>()), 0..6)).prop_map(
            |(origin, sequence, links)| {
                let links = links.into_iter().map(|(neighbour, cost)| LinkStateEntry { neighbour, cost }).collect();
                LinkFrame::State(LinkState { origin, sequence, links })
            }
        ),
        (".{0,12}", any::<u64>(), prop::collection::vec(interest_change_strategy(), 0..6))
            .prop_map(|(origin, sequence, changes)| LinkFrame::Interest(Interest { origin, sequence, changes })),
        (".{0,12}", any::<u64>()).prop_map(|(origin, sequence)| LinkFrame::InterestSyncBegin { origin, sequence }),
        (".{0,12}", any::<u64>()).prop_map(|(origin, sequence)| LinkFrame::InterestSyncEnd { origin, sequence }),
    ]
}

fn forwarding_strategy() -> impl Strategy<Value = LinkFrame> {
    prop_oneof![
        (
            (".{0,12}", any::<u64>(), any::<u64>(), any::<u8>(), any::<u32>()),
            group_assignments_strategy(),
            prop::collection::vec(".{0,8}", 0..3),
            message_strategy()
        )
            .prop_map(
                |((origin, origin_sequence, link_sequence, flags, timeout_ms), groups, targets, message)| {
                    let awaits = flags & forward_flags::AWAITS_REPORT != 0;
                    LinkFrame::Forward(Forward {
                        origin,
                        origin_sequence,
                        link_sequence,
                        // The encoder sets GROUPS and TARGETS from the lists; the decoder clears them.
                        flags: flags & !(forward_flags::GROUPS | forward_flags::TARGETS),
                        groups,
                        targets,
                        await_timeout_ms: if awaits { timeout_ms } else { 0 },
                        message: Box::new(message),
                    })
                }
            ),
        any::<u64>().prop_map(|up_to_link_sequence| LinkFrame::Ack { up_to_link_sequence }),
        (".{0,12}", any::<u64>(), ".{0,12}", any::<u32>(), any::<u32>(), prop::collection::vec(".{0,16}", 0..4))
            .prop_map(|(origin, origin_sequence, reporter, matched, acked, pending)| {
                LinkFrame::DeliveryReport(DeliveryReportFrame {
                    origin,
                    origin_sequence,
                    reporter,
                    matched,
                    acked,
                    pending,
                })
            }),
        (
            ".{0,12}",
            ".{0,12}",
            any::<u64>(),
            ".{0,12}",
            any::<u8>(),
            any::<u8>(),
            prop::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(to, from, call_id, stream, kind, flags, body)| {
                LinkFrame::Raft(RaftFrame { to, from, call_id, stream, kind, flags, body: body.into() })
            }),
    ]
}

fn group_assignments_strategy() -> impl Strategy<Value = Vec<GroupAssignment>> {
    prop::collection::vec((".{0,8}", ".{0,8}").prop_map(|(group, broker)| GroupAssignment { group, broker }), 0..3)
}

fn header<'a>(origin: &'a str, origin_sequence: u64, link_sequence: u64, flags: u8) -> ForwardHeader<'a> {
    ForwardHeader { origin, origin_sequence, link_sequence, flags, groups: &[], targets: &[], await_timeout_ms: 0 }
}

fn link_frame_strategy() -> impl Strategy<Value = LinkFrame> {
    prop_oneof![handshake_strategy(), routing_strategy(), forwarding_strategy()]
}

fn decode_all(decoder: &mut LinkDecoder, buf: &mut BytesMut) -> Vec<LinkFrame> {
    let mut frames = Vec::new();
    while let Some(frame) = decoder.decode(buf).expect("valid stream") {
        frames.push(frame);
    }
    frames
}

fn encode_all(frames: &[LinkFrame]) -> BytesMut {
    let mut buf = BytesMut::new();
    for frame in frames {
        frame.encode(&mut buf).expect("encodable");
    }
    buf
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn link_frames_round_trip(frames in prop::collection::vec(link_frame_strategy(), 1..8)) {
        let mut buf = encode_all(&frames);
        let mut decoder = LinkDecoder::new(DEFAULT_MAX_FRAME_BYTES);
        prop_assert_eq!(decode_all(&mut decoder, &mut buf), frames);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn any_split_of_the_link_stream_decodes_the_same(
        frames in prop::collection::vec(link_frame_strategy(), 1..6),
        chunk in 1usize..64,
    ) {
        let encoded = encode_all(&frames);
        let mut decoder = LinkDecoder::new(DEFAULT_MAX_FRAME_BYTES);
        let mut buf = BytesMut::new();
        let mut decoded = Vec::new();
        for piece in encoded.chunks(chunk) {
            buf.extend_from_slice(piece);
            decoded.extend(decode_all(&mut decoder, &mut buf));
        }
        prop_assert_eq!(decoded, frames);
    }

    /// The decoder's contract on garbage: it never panics, and always makes
    /// progress, asks for more, or stops with a fatal error.
    #[test]
    fn arbitrary_bytes_never_panic_the_link_decoder(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let mut decoder = LinkDecoder::new(1024);
        let mut buf = BytesMut::from(&bytes[..]);
        loop {
            let before = buf.len();
            match decoder.decode(&mut buf) {
                Ok(Some(_)) | Err(DecodeError::Malformed { .. }) => prop_assert!(buf.len() < before),
                Ok(None) => break,
                Err(error) => { prop_assert!(error.is_fatal()); break; }
            }
        }
    }

    /// Flipping any byte of a valid link frame gives a frame, a clean error,
    /// or a request for more bytes: never a panic.
    #[test]
    fn corrupted_link_frames_fail_cleanly(
        frame in link_frame_strategy(),
        position in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut buf = encode_all(&[frame]);
        let index = position.index(buf.len());
        buf[index] = byte;
        let _ = LinkDecoder::new(DEFAULT_MAX_FRAME_BYTES).decode(&mut buf);
    }

    /// `FORWARD` carries the client protocol's message encoding byte for byte.
    #[test]
    fn forward_carries_the_message_encoding_unchanged(message in message_strategy(), link_sequence in any::<u64>()) {
        let mut frame = BytesMut::new();
        encode_forward_ref(&mut frame, header("b1", 7, link_sequence, forward_flags::NEEDS_LINK_ACK), MessageRef::of(&message))
            .expect("encodable");
        let mut alone = BytesMut::new();
        encode_message(&mut alone, &message).expect("encodable");
        prop_assert!(frame.ends_with(&alone));
    }
}

#[test]
fn oversized_link_length_is_fatal_before_buffering() {
    let mut decoder = LinkDecoder::new(100);
    let mut buf = BytesMut::from(&[0u8, 0, 1, 0, link_frame_type::LINK_PING][..]);
    let error = decoder.decode(&mut buf).expect_err("256 > 100");
    assert_eq!(error, DecodeError::FrameTooLarge { length: 256, limit: 100 });
    assert!(error.is_fatal());
}

#[test]
fn client_frames_are_unknown_on_a_link() {
    let mut buf = BytesMut::new();
    sift_proto::Frame::Ping { nonce: 1 }.encode(&mut buf).expect("encodable");
    let error = LinkDecoder::new(100).decode(&mut buf).expect_err("PING is not a link frame");
    assert_eq!(error.code(), ErrorCode::UnexpectedFrame);
    assert!(!error.is_fatal());
    assert!(buf.is_empty(), "the unknown frame is consumed");
}

#[test]
fn malformed_link_frames_name_the_frame_and_field() {
    // LINK_ACK with a 4-byte body instead of 8.
    let mut buf = BytesMut::from(&[0u8, 0, 0, 5, link_frame_type::LINK_ACK, 0, 0, 0, 1][..]);
    let error = LinkDecoder::new(100).decode(&mut buf).expect_err("short field");
    assert_eq!(error.to_string(), "malformed LINK_ACK frame: up_to_link_sequence: needs 8 bytes, only 4 left");
}

#[test]
fn invalid_topic_in_forward_names_the_link_sequence() {
    let message = Message::new(TopicName::new("a.b").expect("valid"), "x");
    let mut buf = BytesMut::new();
    encode_forward_ref(&mut buf, header("o", 1, 42, 0), MessageRef::of(&message)).expect("encodable");
    // length(4) type(1) origin(2 + 1) origin_sequence(8) link_sequence(8) flags(1), then the topic's u16 length.
    let topic_start = 4 + 1 + 3 + 8 + 8 + 1 + 2;
    buf[topic_start + 2] = b'*';
    let error = LinkDecoder::new(1024).decode(&mut buf).expect_err("a wildcard in a forwarded topic");
    assert_eq!(error.code(), ErrorCode::InvalidTopic);
    assert_eq!(error.reference(), 42);
}

#[test]
fn failed_encoding_leaves_the_buffer_as_it_was() {
    let mut buf = BytesMut::from(&b"kept"[..]);
    let overlong = "x".repeat(usize::from(u16::MAX) + 1);
    let frame = LinkFrame::InterestSyncBegin { origin: overlong, sequence: 1 };
    assert!(frame.encode(&mut buf).is_err());
    assert_eq!(&buf[..], b"kept");
}

/// The examples in `docs/PROTOCOL.md` ("Broker links"), byte for byte.
#[test]
fn documented_examples_encode_as_written() {
    let cases = [
        (
            LinkFrame::Hello(LinkHello {
                version_min: 1,
                version_max: 1,
                cluster: "c".into(),
                broker: "b1".into(),
                link_cost: 10,
            }),
            "00 00 00 10 40 00 01 00 01 00 01 63 00 02 62 31 00 00 00 0a",
        ),
        (LinkFrame::Ack { up_to_link_sequence: 5 }, "00 00 00 09 51 00 00 00 00 00 00 00 05"),
        (
            LinkFrame::Raft(RaftFrame {
                to: "b".into(),
                from: "a".into(),
                call_id: 7,
                stream: "s".into(),
                kind: 2,
                flags: raft_flags::REPLY,
                body: bytes::Bytes::from_static(b"{}"),
            }),
            "00 00 00 1a 53 00 01 62 00 01 61 00 00 00 00 00 00 00 07 00 01 73 02 01 00 00 00 02 7b 7d",
        ),
        (
            LinkFrame::DeliveryReport(DeliveryReportFrame {
                origin: "o".into(),
                origin_sequence: 1,
                reporter: "b".into(),
                matched: 2,
                acked: 1,
                pending: vec!["s#1@b".into()],
            }),
            "00 00 00 20 52 00 01 6f 00 00 00 00 00 00 00 01 00 01 62 \
             00 00 00 02 00 00 00 01 00 01 00 05 73 23 31 40 62",
        ),
        (
            LinkFrame::Interest(Interest {
                origin: "b1".into(),
                sequence: 2,
                changes: vec![
                    InterestChange::Add(InterestAdd {
                        key: 1,
                        topic_filter: "a.>".into(),
                        filter_kind: FilterKind::None,
                        filter: String::new(),
                        queue_group: String::new(),
                    }),
                    InterestChange::Remove { key: 3 },
                ],
            }),
            "00 00 00 2d 48 00 02 62 31 00 00 00 00 00 00 00 02 00 02 \
             01 00 00 00 00 00 00 00 01 00 03 61 2e 3e 00 00 00 00 00 00 00 \
             02 00 00 00 00 00 00 00 03",
        ),
        (
            LinkFrame::Error(LinkErrorFrame { code: LinkErrorCode::ClusterMismatch, fatal: true, message: "x".into() }),
            "00 00 00 07 5f 01 00 01 00 01 78",
        ),
    ];
    for (frame, hex) in cases {
        let mut buf = BytesMut::new();
        frame.encode(&mut buf).expect("encodable");
        let written: Vec<String> = buf.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(written.join(" "), hex.split_whitespace().collect::<Vec<_>>().join(" "), "{}", frame.name());
    }
}
