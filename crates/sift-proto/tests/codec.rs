//! Property tests of the codec: every frame survives encode → decode, any
//! split of the byte stream decodes the same, and arbitrary bytes never panic.

use bytes::BytesMut;
use proptest::prelude::*;
use sift_core::{Message, TopicName, Value};
use sift_proto::*;

mod common;

use common::message_strategy;

fn subscribe_strategy() -> impl Strategy<Value = Subscribe> {
    (
        any::<u32>(),
        "[a-z*>.]{1,20}",
        "[a-z]{0,8}",
        0u8..=4,
        ".{0,40}",
        any::<bool>(),
        (0u8..=4, any::<u32>()),
        (any::<u32>(), any::<u32>(), any::<u8>(), any::<u32>()),
        proptest::option::of(stream_source_strategy()),
    )
        .prop_map(|(sub_id, topic_filter, queue_group, kind, filter, client_ack, policy, limits, source)| {
            Subscribe {
                sub_id,
                topic_filter,
                queue_group,
                filter_kind: FilterKind::from_code(kind).expect("0-4"),
                filter,
                ack_mode: if client_ack { AckMode::Client } else { AckMode::Auto },
                policy: QueuePolicy::from_wire(policy.0, if policy.0 == 1 { policy.1.max(1) } else { 0 }),
                queue_capacity: limits.0,
                max_unacked: limits.1,
                // The encoder sets STREAM_SOURCE exactly when there is a source.
                flags: match source {
                    Some(_) => limits.2 | subscribe_flags::STREAM_SOURCE,
                    None => limits.2 & !subscribe_flags::STREAM_SOURCE,
                },
                initial_credit: limits.3,
                source,
            }
        })
}

fn stream_source_strategy() -> impl Strategy<Value = StreamSource> {
    ("[a-z]{0,8}", "[a-z]{0,8}", 0u8..=4, any::<u64>()).prop_map(|(stream, durable, code, argument)| StreamSource {
        stream,
        durable,
        start: StartPosition::from_wire(code, argument).expect("0-4"),
    })
}

fn stream_frame_strategy() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (any::<u32>(), any::<u64>(), any::<u64>(), any::<bool>()).prop_map(|(sub_id, first_seq, count, damaged)| {
            let reason = if damaged { GapReason::Damaged } else { GapReason::Removed };
            Frame::Gap { sub_id, first_seq, count, reason }
        }),
        (any::<u32>(), any::<u64>()).prop_map(|(sub_id, last_seq)| Frame::CaughtUp { sub_id, last_seq }),
        (any::<u64>(), "[a-z]{0,8}", "[a-z.>]{0,8}", 0u8..=4, ".{0,20}", any::<u64>(), any::<u64>(), any::<u32>())
            .prop_map(|(request_id, stream, topic_filter, kind, filter, since_ns, until_ns, limit)| Frame::Query(
                Query {
                    request_id,
                    stream,
                    topic_filter,
                    filter_kind: FilterKind::from_code(kind).expect("0-4"),
                    filter,
                    since_ns,
                    until_ns,
                    limit,
                }
            )),
        (any::<u64>(), any::<u64>(), message_strategy()).prop_map(|(request_id, stream_seq, message)| {
            Frame::QueryResult { request_id, stream_seq, message: Box::new(message) }
        }),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(request_id, matched, scanned, missed)| {
            Frame::QueryDone { request_id, matched, scanned, missed }
        }),
        (any::<u64>(), prop::sample::select(ManageOp::ALL.to_vec()), ".{0,40}")
            .prop_map(|(request_id, op, body)| Frame::Manage { request_id, op, body }),
    ]
}

fn frame_strategy() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (any::<u16>(), any::<u16>(), ".{0,20}").prop_map(|(version_min, version_max, client_name)| {
            Frame::Hello(Hello { version_min, version_max, client_name })
        }),
        (any::<u16>(), ".{0,10}", any::<u64>(), prop::array::uniform6(any::<u32>())).prop_map(
            |(version, server_name, connection_id, limits)| Frame::Welcome(Welcome {
                version,
                server_name,
                connection_id,
                max_frame_bytes: limits[0],
                max_payload_bytes: limits[1],
                max_subscriptions: limits[2],
                max_filter_bytes: limits[3],
                publish_window: limits[4],
                ack_timeout_ms: limits[5],
            })
        ),
        any::<u64>().prop_map(|nonce| Frame::Ping { nonce }),
        any::<u64>().prop_map(|nonce| Frame::Pong { nonce }),
        (any::<u64>(), any::<u64>()).prop_map(|(request_id, origin_ns)| Frame::Time { request_id, origin_ns }),
        prop::array::uniform4(any::<u64>()).prop_map(|words| Frame::TimeReply(TimeReply {
            request_id: words[0],
            origin_ns: words[1],
            receive_ns: words[2],
            transmit_ns: words[3],
        })),
        Just(Frame::Close),
        (any::<u64>(), any::<bool>(), ".{0,20}", ".{0,40}").prop_map(|(request_id, token, user, secret)| {
            let method = if token { sift_proto::AuthMethod::Token } else { sift_proto::AuthMethod::Password };
            Frame::Auth(sift_proto::Auth { request_id, method, user, secret })
        }),
        (any::<u64>(), ".{0,20}").prop_map(|(request_id, user)| Frame::AuthOk { request_id, user }),
        (any::<u64>(), any::<u8>(), any::<u32>(), message_strategy()).prop_map(
            |(request_id, flags, await_timeout_ms, message)| Frame::Publish(Publish {
                request_id,
                flags,
                await_timeout_ms,
                message: Box::new(message)
            })
        ),
        (
            any::<u64>(),
            0u8..=3,
            any::<u32>(),
            any::<u32>(),
            prop::collection::vec(".{0,10}", 0..4),
            "[a-z]{0,8}",
            any::<u64>()
        )
            .prop_map(|(request_id, status, matched, acked, pending, stream, stream_seq)| Frame::Confirm(
                Confirm {
                    request_id,
                    status: ConfirmStatus::from_code(status).expect("0-3"),
                    matched,
                    acked,
                    pending,
                    stream,
                    stream_seq,
                }
            )),
        subscribe_strategy().prop_map(Frame::Subscribe),
        any::<u32>().prop_map(|sub_id| Frame::Subscribed { sub_id }),
        any::<u32>().prop_map(|sub_id| Frame::Unsubscribe { sub_id }),
        (any::<u32>(), any::<u64>(), any::<u8>(), prop_oneof![Just(0u64), any::<u64>()], message_strategy()).prop_map(
            |(sub_id, delivery_tag, flags, stream_seq, message)| Frame::Deliver(Deliver {
                sub_id,
                delivery_tag,
                // The encoder sets STREAM_SEQ exactly when there is a sequence.
                flags: if stream_seq == 0 {
                    flags & !deliver_flags::STREAM_SEQ
                } else {
                    flags | deliver_flags::STREAM_SEQ
                },
                stream_seq,
                message: Box::new(message)
            })
        ),
        prop::collection::vec(any::<u64>(), 0..20).prop_map(|delivery_tags| Frame::Ack { delivery_tags }),
        (any::<u64>(), any::<bool>()).prop_map(|(delivery_tag, requeue)| Frame::Nack { delivery_tag, requeue }),
        (any::<u32>(), any::<u32>()).prop_map(|(sub_id, credit)| Frame::Flow { sub_id, credit }),
        (any::<u64>(), prop::sample::select(AdminQuery::ALL.to_vec()))
            .prop_map(|(request_id, query)| Frame::Admin { request_id, query }),
        (any::<u64>(), ".{0,60}").prop_map(|(request_id, json)| Frame::AdminReply { request_id, json }),
        (1u16..=27, any::<u64>(), any::<bool>(), ".{0,30}").prop_map(|(code, reference, fatal, message)| {
            Frame::Error(ErrorFrame { code: ErrorCode::from_code(code), reference, fatal, message })
        }),
        stream_frame_strategy(),
    ]
}

fn decode_all(decoder: &mut Decoder, buf: &mut BytesMut) -> Vec<Frame> {
    let mut frames = Vec::new();
    while let Some(frame) = decoder.decode(buf).expect("valid stream") {
        frames.push(frame);
    }
    frames
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn frames_round_trip(frames in prop::collection::vec(frame_strategy(), 1..8)) {
        let mut buf = BytesMut::new();
        for frame in &frames {
            frame.encode(&mut buf).expect("encodable");
        }
        let mut decoder = Decoder::new(DEFAULT_MAX_FRAME_BYTES);
        prop_assert_eq!(decode_all(&mut decoder, &mut buf), frames);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn any_split_of_the_stream_decodes_the_same(
        frames in prop::collection::vec(frame_strategy(), 1..6),
        chunk in 1usize..64,
    ) {
        let mut encoded = BytesMut::new();
        for frame in &frames {
            frame.encode(&mut encoded).expect("encodable");
        }
        let mut decoder = Decoder::new(DEFAULT_MAX_FRAME_BYTES);
        let mut buf = BytesMut::new();
        let mut decoded = Vec::new();
        for piece in encoded.chunks(chunk) {
            buf.extend_from_slice(piece);
            decoded.extend(decode_all(&mut decoder, &mut buf));
        }
        prop_assert_eq!(decoded, frames);
    }

    /// The decoder's contract on garbage: it never panics, never returns a
    /// frame longer than the limit, and always makes progress or asks for more.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let mut decoder = Decoder::new(1024);
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

    /// Flipping any byte of a valid frame gives a frame, a clean error, or a
    /// request for more bytes: never a panic.
    #[test]
    fn corrupted_frames_fail_cleanly(frame in frame_strategy(), position in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut buf = BytesMut::new();
        frame.encode(&mut buf).expect("encodable");
        let index = position.index(buf.len());
        buf[index] = byte;
        let mut decoder = Decoder::new(DEFAULT_MAX_FRAME_BYTES);
        let _ = decoder.decode(&mut buf);
    }
}

#[test]
fn oversized_length_is_fatal_before_buffering() {
    let mut decoder = Decoder::new(100);
    let mut buf = BytesMut::from(&[0u8, 0, 1, 0, frame_type::PING][..]);
    let error = decoder.decode(&mut buf).expect_err("256 > 100");
    assert_eq!(error, DecodeError::FrameTooLarge { length: 256, limit: 100 });
    assert!(error.is_fatal());
    assert_eq!(error.code(), ErrorCode::FrameTooLarge);
}

#[test]
fn trailing_bytes_and_unknown_types_are_malformed_but_not_fatal() {
    let mut decoder = Decoder::new(100);
    let mut buf = BytesMut::from(&[0u8, 0, 0, 2, frame_type::CLOSE, 7][..]);
    let error = decoder.decode(&mut buf).expect_err("left-over byte");
    assert!(!error.is_fatal());
    assert!(buf.is_empty(), "the bad frame is consumed");
    let mut buf = BytesMut::from(&[0u8, 0, 0, 1, 0x6e][..]);
    let error = decoder.decode(&mut buf).expect_err("unknown type");
    assert_eq!(error.code(), ErrorCode::UnexpectedFrame);
}

#[test]
fn invalid_topic_in_publish_names_the_request() {
    let message = Message::new(TopicName::new("a.b").expect("valid"), "x");
    let mut buf = BytesMut::new();
    encode_publish(&mut buf, 77, 0, 0, &message).expect("encodable");
    // The topic starts after length(4) type(1) request_id(8) flags(1) timeout(4) and its u16 length.
    let topic_start = 4 + 1 + 8 + 1 + 4 + 2;
    buf[topic_start + 2] = b'*';
    let error = Decoder::new(1024).decode(&mut buf).expect_err("a wildcard in a published topic");
    assert_eq!(error.code(), ErrorCode::InvalidTopic);
    assert_eq!(error.reference(), 77);
}

#[test]
fn deliver_prefix_matches_the_full_encoding() {
    let mut message = Message::new(TopicName::new("a.b").expect("valid"), "payload");
    message.properties.push(("k".into(), Value::Int(1)));
    let mut body = BytesMut::new();
    encode_message(&mut body, &message).expect("encodable");
    let mut fast = BytesMut::new();
    encode_deliver_prefix(&mut fast, 3, 9, deliver_flags::REDELIVERED, body.len());
    fast.extend_from_slice(&body);
    let mut slow = BytesMut::new();
    Frame::Deliver(Deliver {
        sub_id: 3,
        delivery_tag: 9,
        flags: deliver_flags::REDELIVERED,
        stream_seq: 0,
        message: Box::new(message.clone()),
    })
    .encode(&mut slow)
    .expect("encodable");
    assert_eq!(fast, slow);
    // A stored message: the prefix carries the stream sequence.
    let mut stored = BytesMut::new();
    encode_stream_deliver_prefix(&mut stored, 3, 9, 0, 42, body.len());
    stored.extend_from_slice(&body);
    match Decoder::new(DEFAULT_MAX_FRAME_BYTES).decode(&mut stored).expect("valid") {
        Some(Frame::Deliver(deliver)) => {
            assert_eq!((deliver.stream_seq, deliver.flags), (42, deliver_flags::STREAM_SEQ));
            assert_eq!(*deliver.message, message);
        }
        other => panic!("expected a DELIVER, got {other:?}"),
    }
    let mut result = BytesMut::new();
    encode_query_result_prefix(&mut result, 7, 43, body.len());
    result.extend_from_slice(&body);
    let decoded = Decoder::new(DEFAULT_MAX_FRAME_BYTES).decode(&mut result).expect("valid");
    assert_eq!(decoded, Some(Frame::QueryResult { request_id: 7, stream_seq: 43, message: Box::new(message) }));
}

#[test]
fn a_stream_source_section_without_its_flag_is_malformed() {
    let mut request = Subscribe::new(1, "a");
    request.source = Some(StreamSource { stream: "s".into(), durable: String::new(), start: StartPosition::First });
    let mut buf = BytesMut::new();
    Frame::Subscribe(request).encode(&mut buf).expect("encodable");
    // Clear STREAM_SOURCE: the section is then left over.
    // After the flags: initial_credit (4), stream "s" (3), durable "" (2), start (1 + 8).
    let flags_at = buf.len() - 18 - 1;
    assert_eq!(buf[flags_at] & subscribe_flags::STREAM_SOURCE, subscribe_flags::STREAM_SOURCE);
    buf[flags_at] &= !subscribe_flags::STREAM_SOURCE;
    let error = Decoder::new(1024).decode(&mut buf).expect_err("left-over bytes");
    assert_eq!(error.code(), ErrorCode::Malformed);
}

#[test]
fn repeated_topics_and_publishers_are_shared_and_changes_are_seen() {
    let mut buf = BytesMut::new();
    for (topic, publisher) in [("a.b", "p"), ("a.b", "p"), ("c.d", "p"), ("a.b", "q")] {
        let mut message = Message::new(TopicName::new(topic).expect("valid"), "x");
        message.publisher = publisher.into();
        encode_publish(&mut buf, 1, 0, 0, &message).expect("encodable");
    }
    let mut decoder = Decoder::new(DEFAULT_MAX_FRAME_BYTES);
    let messages: Vec<Message> = decode_all(&mut decoder, &mut buf)
        .into_iter()
        .map(|frame| match frame {
            Frame::Publish(publish) => *publish.message,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let seen: Vec<(&str, &str)> =
        messages.iter().map(|message| (message.topic.as_str(), &*message.publisher)).collect();
    assert_eq!(seen, [("a.b", "p"), ("a.b", "p"), ("c.d", "p"), ("a.b", "q")]);
    assert!(std::sync::Arc::ptr_eq(&messages[0].publisher, &messages[1].publisher), "shared, not copied");
}

proptest! {
    /// A message encoded alone decodes back to itself.
    #[test]
    fn messages_encoded_alone_decode_back(message in message_strategy()) {
        let mut encoded = BytesMut::new();
        sift_proto::encode_message(&mut encoded, &message).expect("encodable");
        let decoded = sift_proto::decode_message(&encoded.freeze()).expect("decodable");
        prop_assert_eq!(decoded, message);
    }
}

#[test]
fn admin_with_an_unknown_query_is_invalid_field_naming_the_request() {
    let mut buf = BytesMut::new();
    Frame::Admin { request_id: 7, query: AdminQuery::Stats }.encode(&mut buf).expect("encodable");
    let last = buf.len() - 1;
    buf[last] = 9;
    let error = Decoder::new(1024).decode(&mut buf).expect_err("query 9 is unknown");
    assert_eq!((error.code(), error.reference(), error.is_fatal()), (ErrorCode::InvalidField, 7, false));
    assert!(buf.is_empty(), "the frame is consumed");
}
