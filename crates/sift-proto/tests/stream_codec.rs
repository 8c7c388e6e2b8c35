//! The frames and fields of persistent delivery: every new and changed frame
//! round trips, the stream section of `SUBSCRIBE` and its flag agree or the
//! frame is refused, stored encodings are sent verbatim behind a prefix, and
//! start positions parse and print exactly (`docs/PROTOCOL.md` §4.6-§4.9,
//! §4.16-§4.18, §6.17).

use bytes::BytesMut;
use proptest::prelude::*;
use sift_core::{DeliveryMode, Message, TopicName, Value};
use sift_proto::*;

/// 2024-02-29T12:00:00Z: a leap day, in nanoseconds since the epoch.
const LEAP_DAY_NOON_NS: u64 = 1_709_208_000_000_000_000;

/// Nanoseconds in a second.
const NANOS_PER_SECOND: u64 = 1_000_000_000;

fn stored_message() -> Message {
    let mut message = Message::new(TopicName::new("orders.new").expect("valid"), "hi");
    message.delivery_mode = DeliveryMode::Persistent;
    message.properties.push(("qty".into(), Value::Int(3)));
    message.id = 4660;
    message.publisher = "demo".into();
    message
}

fn encode(frame: &Frame) -> BytesMut {
    let mut buf = BytesMut::new();
    frame.encode(&mut buf).expect("encodable");
    buf
}

/// Encodes `frame`, decodes it back, and checks that it is the same frame
/// and that the whole buffer was used.
fn round_trip(frame: Frame) {
    let mut buf = encode(&frame);
    let decoded = Decoder::new(DEFAULT_MAX_FRAME_BYTES).decode(&mut buf).expect("valid");
    assert_eq!(decoded.as_ref(), Some(&frame), "{}", frame.name());
    assert!(buf.is_empty(), "{} left bytes over", frame.name());
}

/// Decodes `buf`, which must hold one malformed frame, and returns the
/// error after checking that the frame was consumed and the error is not fatal.
fn decode_error(mut buf: BytesMut) -> DecodeError {
    let error = Decoder::new(DEFAULT_MAX_FRAME_BYTES).decode(&mut buf).expect_err("refused");
    assert!(!error.is_fatal(), "{error}");
    assert!(buf.is_empty(), "the bad frame is consumed");
    error
}

fn all_start_positions() -> [StartPosition; 5] {
    [
        StartPosition::New,
        StartPosition::First,
        StartPosition::Last(10),
        StartPosition::Seq(42),
        StartPosition::Time(LEAP_DAY_NOON_NS),
    ]
}

#[test]
fn confirms_carry_where_a_message_was_stored() {
    let mut confirm = Confirm {
        request_id: 1 << 32,
        status: ConfirmStatus::Accepted,
        matched: 0,
        acked: 0,
        pending: Vec::new(),
        stream: "orders".into(),
        stream_seq: 7,
    };
    round_trip(Frame::Confirm(confirm.clone()));
    let stored_len = encode(&Frame::Confirm(confirm.clone())).len();
    confirm.stream.clear();
    confirm.stream_seq = 0;
    round_trip(Frame::Confirm(confirm.clone()));
    // The two fields are always on the wire: an empty str16 and a u64.
    assert_eq!(stored_len - encode(&Frame::Confirm(confirm)).len(), "orders".len());
}

#[test]
fn every_start_position_round_trips_in_a_subscribe() {
    for start in all_start_positions() {
        for durable in ["", "billing"] {
            for flags in [0, subscribe_flags::SHARED, subscribe_flags::CREDIT_MODE | subscribe_flags::SHARED] {
                let mut subscribe = Subscribe::new(9, "orders.>");
                subscribe.flags = flags | subscribe_flags::STREAM_SOURCE;
                subscribe.source = Some(StreamSource { stream: "orders".into(), durable: durable.into(), start });
                round_trip(Frame::Subscribe(subscribe));
            }
        }
    }
}

#[test]
fn subscribe_lengths_match_the_documented_formulas() {
    let mut subscribe = Subscribe::new(1, "orders.>");
    subscribe.queue_group = "g".into();
    subscribe.filter_kind = FilterKind::Sql;
    subscribe.filter = "qty > 2".into();
    let (t, g, f) = (subscribe.topic_filter.len(), subscribe.queue_group.len(), subscribe.filter.len());
    let length = |frame: &Frame| encode(frame).len() - LENGTH_PREFIX_BYTES;
    assert_eq!(length(&Frame::Subscribe(subscribe.clone())), 33 + t + g + f);
    let source = StreamSource { stream: "orders".into(), durable: "billing".into(), start: StartPosition::Last(5) };
    let (r, d) = (source.stream.len(), source.durable.len());
    subscribe.source = Some(source);
    assert_eq!(length(&Frame::Subscribe(subscribe)), 46 + t + g + f + r + d);
}

#[test]
fn query_and_manage_lengths_match_the_documented_formulas() {
    let query = Query {
        request_id: 1,
        stream: "orders".into(),
        topic_filter: "orders.*".into(),
        filter_kind: FilterKind::Tags,
        filter: "qty>2".into(),
        since_ns: 0,
        until_ns: 0,
        limit: 0,
    };
    let (s, t, f) = (query.stream.len(), query.topic_filter.len(), query.filter.len());
    let length = |frame: &Frame| encode(frame).len() - LENGTH_PREFIX_BYTES;
    assert_eq!(length(&Frame::Query(query)), 38 + s + t + f);
    let body = String::from("{}");
    assert_eq!(length(&Frame::Manage { request_id: 1, op: ManageOp::StreamLs, body: body.clone() }), 14 + body.len());
    let message = stored_message();
    let mut encoded = BytesMut::new();
    encode_message(&mut encoded, &message).expect("encodable");
    let result = Frame::QueryResult { request_id: 1, stream_seq: 1, message: Box::new(message) };
    assert_eq!(length(&result), 17 + encoded.len());
}

#[test]
fn the_encoder_sets_stream_source_exactly_when_there_is_a_source() {
    let mut plain = Subscribe::new(1, "a");
    plain.flags = subscribe_flags::STREAM_SOURCE;
    match Decoder::new(1024).decode(&mut encode(&Frame::Subscribe(plain))).expect("valid") {
        Some(Frame::Subscribe(decoded)) => {
            assert_eq!((decoded.flags, decoded.source), (0, None));
        }
        other => panic!("expected a SUBSCRIBE, got {other:?}"),
    }
    let mut stream = Subscribe::new(1, "a");
    stream.source = Some(StreamSource { stream: String::new(), durable: String::new(), start: StartPosition::New });
    match Decoder::new(1024).decode(&mut encode(&Frame::Subscribe(stream.clone()))).expect("valid") {
        Some(Frame::Subscribe(decoded)) => {
            assert_eq!(decoded.flags, subscribe_flags::STREAM_SOURCE);
            assert_eq!(decoded.source, stream.source);
        }
        other => panic!("expected a SUBSCRIBE, got {other:?}"),
    }
}

/// Bytes of the stream section with an empty durable and stream `s`:
/// stream (2 + 1), durable (2), start (1), start_arg (8).
const SECTION_BYTES: usize = 3 + 2 + 1 + 8;

/// Bytes from the `SUBSCRIBE` flags to the end of a frame without a section.
const FLAGS_TO_END: usize = 1 + 4;

#[test]
fn a_stream_section_without_its_flag_is_malformed_naming_flags() {
    let mut request = Subscribe::new(5, "a");
    request.source = Some(StreamSource { stream: "s".into(), durable: String::new(), start: StartPosition::First });
    let mut buf = encode(&Frame::Subscribe(request));
    let flags_at = buf.len() - SECTION_BYTES - FLAGS_TO_END;
    assert_eq!(buf[flags_at] & subscribe_flags::STREAM_SOURCE, subscribe_flags::STREAM_SOURCE);
    buf[flags_at] &= !subscribe_flags::STREAM_SOURCE;
    let error = decode_error(buf);
    assert_eq!((error.code(), error.reference()), (ErrorCode::Malformed, 5));
    let text = error.to_string();
    assert!(text.contains("flags: STREAM_SOURCE is clear"), "{text}");
    assert!(text.contains(&format!("{SECTION_BYTES} bytes follow initial_credit")), "{text}");
}

#[test]
fn a_stream_flag_without_its_section_is_malformed_naming_stream() {
    let mut buf = encode(&Frame::Subscribe(Subscribe::new(6, "a")));
    let flags_at = buf.len() - FLAGS_TO_END;
    assert_eq!(buf[flags_at], 0);
    buf[flags_at] = subscribe_flags::STREAM_SOURCE;
    let error = decode_error(buf);
    assert_eq!((error.code(), error.reference()), (ErrorCode::Malformed, 6));
    let text = error.to_string();
    assert!(text.contains("stream: flags has STREAM_SOURCE but no stream section follows"), "{text}");
}

#[test]
fn an_unknown_start_code_is_invalid_field_naming_start() {
    let mut request = Subscribe::new(7, "a");
    request.source = Some(StreamSource { stream: String::new(), durable: "d".into(), start: StartPosition::Seq(3) });
    let mut buf = encode(&Frame::Subscribe(request));
    // start is followed only by start_arg (8 bytes).
    let start_at = buf.len() - 8 - 1;
    assert_eq!(buf[start_at], 3);
    buf[start_at] = 5;
    let error = decode_error(buf);
    assert_eq!((error.code(), error.reference()), (ErrorCode::InvalidField, 7));
    assert!(error.to_string().contains("start: unknown code 5"), "{error}");
}

#[test]
fn a_truncated_stream_section_names_the_missing_field() {
    let mut request = Subscribe::new(8, "a");
    request.source = Some(StreamSource { stream: "s".into(), durable: String::new(), start: StartPosition::Last(2) });
    let mut buf = encode(&Frame::Subscribe(request));
    // Cut start_arg to 4 bytes and fix the length prefix.
    buf.truncate(buf.len() - 4);
    let length = u32::try_from(buf.len() - LENGTH_PREFIX_BYTES).expect("small");
    buf[..LENGTH_PREFIX_BYTES].copy_from_slice(&length.to_be_bytes());
    let error = decode_error(buf);
    assert_eq!(error.code(), ErrorCode::Malformed);
    assert!(error.to_string().contains("start_arg: needs 8 bytes, only 4 left"), "{error}");
}

#[test]
fn delivers_carry_a_stream_sequence_only_when_they_have_one() {
    let deliver = |flags, stream_seq| Deliver {
        sub_id: 3,
        delivery_tag: 9,
        flags,
        stream_seq,
        message: Box::new(stored_message()),
    };
    let live = encode(&Frame::Deliver(deliver(0, 0)));
    let stored = encode(&Frame::Deliver(deliver(deliver_flags::STREAM_SEQ, 42)));
    assert_eq!(stored.len() - live.len(), STREAM_SEQ_BYTES);
    // flags is at offset 17; the sequence follows it.
    assert_eq!(live[17], 0);
    assert_eq!(stored[17], deliver_flags::STREAM_SEQ);
    assert_eq!(stored[18..26], 42u64.to_be_bytes());
    round_trip(Frame::Deliver(deliver(0, 0)));
    round_trip(Frame::Deliver(deliver(deliver_flags::REDELIVERED, 0)));
    round_trip(Frame::Deliver(deliver(deliver_flags::STREAM_SEQ, 42)));
    round_trip(Frame::Deliver(deliver(deliver_flags::STREAM_SEQ | deliver_flags::REDELIVERED, u64::MAX)));
    // The encoder follows stream_seq, not the flag: no flag promises a missing field.
    assert_eq!(encode(&Frame::Deliver(deliver(deliver_flags::STREAM_SEQ, 0))), live);
    assert_eq!(encode(&Frame::Deliver(deliver(0, 42))), stored);
}

#[test]
fn a_stored_encoding_behind_the_stream_deliver_prefix_is_the_deliver_frame() {
    let message = stored_message();
    let mut body = BytesMut::new();
    encode_message(&mut body, &message).expect("encodable");
    let mut fast = BytesMut::new();
    encode_stream_deliver_prefix(&mut fast, 3, 9, deliver_flags::REDELIVERED, 42, body.len());
    fast.extend_from_slice(&body);
    assert_eq!(fast.len(), LENGTH_PREFIX_BYTES + encoded_stream_deliver_len(body.len()));
    assert_eq!(encoded_stream_deliver_len(body.len()), encoded_deliver_len(body.len()) + STREAM_SEQ_BYTES);
    let expected = Deliver {
        sub_id: 3,
        delivery_tag: 9,
        flags: deliver_flags::REDELIVERED | deliver_flags::STREAM_SEQ,
        stream_seq: 42,
        message: Box::new(message),
    };
    assert_eq!(fast, encode(&Frame::Deliver(expected.clone())), "byte for byte");
    let decoded = Decoder::new(DEFAULT_MAX_FRAME_BYTES).decode(&mut fast).expect("valid");
    assert_eq!(decoded, Some(Frame::Deliver(expected)));
}

#[test]
fn a_stored_encoding_behind_the_query_result_prefix_is_the_query_result_frame() {
    let message = stored_message();
    let mut body = BytesMut::new();
    encode_message(&mut body, &message).expect("encodable");
    let mut fast = BytesMut::new();
    encode_query_result_prefix(&mut fast, 1 << 40, 43, body.len());
    fast.extend_from_slice(&body);
    assert_eq!(fast.len(), LENGTH_PREFIX_BYTES + encoded_query_result_len(body.len()));
    let expected = Frame::QueryResult { request_id: 1 << 40, stream_seq: 43, message: Box::new(message) };
    assert_eq!(fast, encode(&expected), "byte for byte");
    let decoded = Decoder::new(DEFAULT_MAX_FRAME_BYTES).decode(&mut fast).expect("valid");
    assert_eq!(decoded, Some(expected));
}

#[test]
fn gaps_round_trip_with_both_reasons_and_unknown_reasons_are_refused() {
    for reason in [GapReason::Removed, GapReason::Damaged] {
        let frame = Frame::Gap { sub_id: 1, first_seq: 5, count: 3, reason };
        assert_eq!(encode(&frame).len(), 26, "GAP is a fixed-size frame");
        assert_eq!(GapReason::from_code(reason.code()), Some(reason));
        round_trip(frame);
    }
    let mut buf = encode(&Frame::Gap { sub_id: 4, first_seq: 1, count: 1, reason: GapReason::Damaged });
    let last = buf.len() - 1;
    buf[last] = 2;
    let error = decode_error(buf);
    assert_eq!((error.code(), error.reference()), (ErrorCode::InvalidField, 4));
    assert!(error.to_string().contains("reason: unknown code 2"), "{error}");
}

#[test]
fn queries_round_trip_in_every_filter_language() {
    for kind in 0..=4 {
        let filter_kind = FilterKind::from_code(kind).expect("0-4");
        round_trip(Frame::Query(Query {
            request_id: (1 << 32) + u64::from(kind),
            stream: "orders".into(),
            topic_filter: if kind == 0 { String::new() } else { "orders.>".into() },
            filter_kind,
            filter: if kind == 0 { String::new() } else { "qty > 2".into() },
            since_ns: LEAP_DAY_NOON_NS,
            until_ns: if kind == 1 { 0 } else { LEAP_DAY_NOON_NS + NANOS_PER_SECOND },
            limit: u32::from(kind) * 10,
        }));
    }
}

#[test]
fn a_query_with_an_unknown_filter_kind_is_invalid_filter_naming_the_request() {
    let query = Query {
        request_id: 99,
        stream: "s".into(),
        topic_filter: String::new(),
        filter_kind: FilterKind::None,
        filter: String::new(),
        since_ns: 0,
        until_ns: 0,
        limit: 0,
    };
    let mut buf = encode(&Frame::Query(query));
    // After length, type, request_id, stream "s" and an empty topic filter.
    let kind_at = LENGTH_PREFIX_BYTES + 1 + 8 + 3 + 2;
    assert_eq!(buf[kind_at], 0);
    buf[kind_at] = 9;
    let error = decode_error(buf);
    assert_eq!((error.code(), error.reference()), (ErrorCode::InvalidFilter, 99));
}

#[test]
fn query_ends_and_manage_requests_round_trip() {
    round_trip(Frame::QueryDone { request_id: 1, matched: 0, scanned: 0, missed: 0 });
    round_trip(Frame::QueryDone { request_id: u64::MAX, matched: 3, scanned: 1_000, missed: 2 });
    assert_eq!(encode(&Frame::QueryDone { request_id: 1, matched: 0, scanned: 0, missed: 0 }).len(), 37);
    for op in ManageOp::ALL {
        assert_eq!(ManageOp::from_code(op.code()), Some(op));
        let body = match op {
            ManageOp::StreamAdd => r#"{"name":"orders","topics":["orders.>"],"fsync":"every:10"}"#,
            ManageOp::StreamLs | ManageOp::DurableLs => "{}",
            _ => r#"{"name":"x"}"#,
        };
        round_trip(Frame::Manage { request_id: u64::from(op.code()), op, body: body.into() });
    }
    let names: Vec<&str> = ManageOp::ALL.iter().map(|op| op.name()).collect();
    assert_eq!(
        names,
        [
            "stream_add",
            "stream_rm",
            "stream_ls",
            "stream_info",
            "durable_ls",
            "durable_info",
            "durable_rm",
            "queue_declare",
            "stream_members"
        ]
    );
    assert_eq!(ManageOp::from_code(0), None);
    assert_eq!(ManageOp::from_code(10), None);
}

#[test]
fn a_manage_request_with_an_unknown_op_is_invalid_field_naming_op() {
    let mut buf = encode(&Frame::Manage { request_id: 12, op: ManageOp::StreamLs, body: "{}".into() });
    // op follows length, type and request_id.
    let op_at = LENGTH_PREFIX_BYTES + 1 + 8;
    buf[op_at] = 0;
    let error = decode_error(buf);
    assert_eq!((error.code(), error.reference()), (ErrorCode::InvalidField, 12));
    assert!(error.to_string().contains("op: unknown code 0"), "{error}");
}

#[test]
fn new_frames_have_their_codes_and_names() {
    let frames = [
        (Frame::Gap { sub_id: 1, first_seq: 1, count: 1, reason: GapReason::Removed }, 0x34, "GAP"),
        (Frame::CaughtUp { sub_id: 1, last_seq: 7 }, 0x35, "CAUGHT_UP"),
        (Frame::Manage { request_id: 1, op: ManageOp::StreamLs, body: String::new() }, 0x62, "MANAGE"),
        (Frame::QueryDone { request_id: 1, matched: 0, scanned: 0, missed: 0 }, 0x65, "QUERY_DONE"),
        (
            Frame::QueryResult { request_id: 1, stream_seq: 1, message: Box::new(stored_message()) },
            0x64,
            "QUERY_RESULT",
        ),
    ];
    for (frame, code, name) in frames {
        assert_eq!((frame.type_code(), frame.name(), frame_name(code)), (code, name, name));
        assert_eq!(encode(&frame)[LENGTH_PREFIX_BYTES], code);
    }
    assert_eq!(frame_name(frame_type::QUERY), "QUERY");
    // The client and link protocols keep apart: no client frame in 0x40..=0x5F.
    for code in 0x40..=0x5F {
        assert_eq!(frame_name(code), "UNKNOWN", "0x{code:02x}");
    }
}

#[test]
fn start_positions_parse_from_text() {
    let cases = [
        ("new", StartPosition::New),
        ("first", StartPosition::First),
        ("last:1", StartPosition::Last(1)),
        ("last:0", StartPosition::Last(0)),
        ("seq:18446744073709551615", StartPosition::Seq(u64::MAX)),
        ("time:0", StartPosition::Time(0)),
        ("time:1709208000000000000", StartPosition::Time(LEAP_DAY_NOON_NS)),
        ("time:2024-02-29T12:00:00Z", StartPosition::Time(LEAP_DAY_NOON_NS)),
        ("time:2024-02-29T12:00:00.5Z", StartPosition::Time(LEAP_DAY_NOON_NS + NANOS_PER_SECOND / 2)),
        ("time:2024-02-29T17:30:00+05:30", StartPosition::Time(LEAP_DAY_NOON_NS)),
        ("time:2024-02-29t12:00:00z", StartPosition::Time(LEAP_DAY_NOON_NS)),
        ("time:2024-02-29 12:00:00Z", StartPosition::Time(LEAP_DAY_NOON_NS)),
    ];
    for (text, position) in cases {
        assert_eq!(text.parse::<StartPosition>(), Ok(position), "{text}");
    }
}

#[test]
fn bad_start_positions_say_what_was_expected() {
    let cases = [
        ("", "unknown start \"\": expected new, first, last:N, seq:N, time:RFC3339"),
        ("later", "unknown start \"later\""),
        ("New", "unknown start \"New\""),
        ("new:1", "unknown start \"new:1\""),
        ("last", "unknown start \"last\""),
        ("last:", "start \"last:\": the count must be a whole number"),
        ("last:-1", "the count must be a whole number from 0 to 18446744073709551615, got \"-1\""),
        ("seq:x", "start \"seq:x\": the sequence must be a whole number"),
        ("seq:18446744073709551616", "the sequence must be a whole number"),
        ("time:", "time \"\": too short"),
        ("time:99999999999999999999", "the time in nanoseconds must be a whole number"),
        ("time:yesterday", "time \"yesterday\": too short"),
        ("time:2026-13-01T00:00:00Z", "there is no day 01 in 2026-13"),
        ("time:2026-11-24", "too short"),
        ("time:2026-11-24T18:00:00", "too short"),
        ("time:2026-11-24T18:00:00+0100", "the zone must be Z or +hh:mm"),
        ("time:2026-11-24T18:00:00.Z", "fractional seconds need 1 to 9 digits, found 0"),
        ("time:2026-11-24T18:00:00.1234567890Z", "fractional seconds need 1 to 9 digits, found 10"),
        ("time:2026-11-24T24:00:00Z", "no such time of day"),
        ("time:2026-11-24T18:00:00+24:00", "no such offset"),
        ("time:2026/11/24T18:00:00Z", "the date must be YYYY-MM-DD"),
        ("time:2026-11-24X18:00:00Z", "separated by T"),
        ("time:2026-11-24T18.00.00Z", "the time must be hh:mm:ss"),
        ("time:2026-1a-24T18:00:00Z", "the month \"1a\" is not a number"),
        ("time:1969-12-31T23:59:59Z", "before 1970-01-01T00:00:00Z"),
        ("time:2554-07-21T23:34:34Z", "after 2554-07-21T23:34:33.709551615Z"),
    ];
    for (text, expected) in cases {
        let error = text.parse::<StartPosition>().expect_err(text);
        assert!(error.contains(expected), "{text}: {error:?} does not contain {expected:?}");
    }
}

#[test]
fn rfc3339_times_convert_exactly() {
    let cases = [
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:00.000000001Z", 1),
        ("1970-01-01T01:00:00+01:00", 0),
        ("2000-03-01T00:00:00Z", 951_868_800 * NANOS_PER_SECOND),
        ("2024-02-29T12:00:00.123456789Z", LEAP_DAY_NOON_NS + 123_456_789),
        ("2024-02-29T04:00:00-08:00", LEAP_DAY_NOON_NS),
        ("2024-02-29T12:00:00-00:00", LEAP_DAY_NOON_NS),
        ("2024-03-01T00:00:00Z", LEAP_DAY_NOON_NS + 12 * 3_600 * NANOS_PER_SECOND),
        ("2554-07-21T23:34:33.709551615Z", u64::MAX),
        // A leap second counts as the first instant of the next minute.
        ("2016-12-31T23:59:60Z", 1_483_228_800 * NANOS_PER_SECOND),
    ];
    for (text, nanos) in cases {
        assert_eq!(parse_rfc3339_ns(text), Ok(nanos), "{text}");
    }
    assert_eq!(format_rfc3339_ns(0), "1970-01-01T00:00:00Z");
    assert_eq!(format_rfc3339_ns(LEAP_DAY_NOON_NS + NANOS_PER_SECOND / 2), "2024-02-29T12:00:00.5Z");
    assert_eq!(format_rfc3339_ns(LEAP_DAY_NOON_NS + 1_000), "2024-02-29T12:00:00.000001Z");
    assert_eq!(format_rfc3339_ns(u64::MAX), "2554-07-21T23:34:33.709551615Z");
    assert_eq!(StartPosition::Time(LEAP_DAY_NOON_NS).to_string(), "time:2024-02-29T12:00:00Z");
}

#[test]
fn leap_days_exist_only_in_leap_years() {
    for year in [1972, 2000, 2024, 2400] {
        let text = format!("{year}-02-29T00:00:00Z");
        let nanos = parse_rfc3339_ns(&text).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(format_rfc3339_ns(nanos), text);
        let next = parse_rfc3339_ns(&format!("{year}-03-01T00:00:00Z")).expect("valid");
        assert_eq!(next - nanos, 86_400 * NANOS_PER_SECOND, "{year}");
    }
    for year in [1970, 2023, 2100, 2200, 2300] {
        let error = parse_rfc3339_ns(&format!("{year}-02-29T00:00:00Z")).expect_err("not a leap year");
        assert!(error.contains(&format!("there is no day 29 in {year}-02")), "{error}");
    }
    for month in ["04", "06", "09", "11"] {
        assert!(parse_rfc3339_ns(&format!("2026-{month}-31T00:00:00Z")).is_err(), "{month} has 30 days");
        assert!(parse_rfc3339_ns(&format!("2026-{month}-30T00:00:00Z")).is_ok(), "{month} has 30 days");
    }
}

#[test]
fn non_ascii_text_is_refused_without_panicking() {
    for text in
        ["2026-11-24T18:00:00é1:00", "2026-11-24T18:00:00+é:00", "2026-11-24T18:00:0é", "２０２６-11-24T18:00:00Z"]
    {
        assert!(parse_rfc3339_ns(text).is_err(), "{text}");
        assert!(format!("time:{text}").parse::<StartPosition>().is_err(), "{text}");
    }
}

fn start_position_strategy() -> impl Strategy<Value = StartPosition> {
    (0u8..=4, any::<u64>()).prop_map(|(code, argument)| StartPosition::from_wire(code, argument).expect("0-4"))
}

proptest! {
    /// Every u64 of nanoseconds formats as RFC 3339 and parses back to itself.
    #[test]
    fn every_instant_formats_and_parses_back(nanos in any::<u64>()) {
        let text = format_rfc3339_ns(nanos);
        prop_assert_eq!(parse_rfc3339_ns(&text), Ok(nanos), "{}", text);
    }

    /// The same instant written with any offset and fraction parses the same.
    #[test]
    fn offsets_and_fractions_move_the_instant_exactly(
        seconds in 86_400u64..16_000_000_000,
        fraction in 0u64..NANOS_PER_SECOND,
        offset_minutes in -(23 * 60 + 59)..=(23 * 60 + 59i64),
    ) {
        let nanos = seconds * NANOS_PER_SECOND + fraction;
        let utc = format_rfc3339_ns(nanos);
        let shifted_ns = nanos.checked_add_signed(offset_minutes * 60 * 1_000_000_000).expect("in range");
        let local = format_rfc3339_ns(shifted_ns);
        let sign = if offset_minutes < 0 { '-' } else { '+' };
        let zone = format!("{sign}{:02}:{:02}", offset_minutes.abs() / 60, offset_minutes.abs() % 60);
        let written = format!("{}{zone}", local.trim_end_matches('Z'));
        prop_assert_eq!(parse_rfc3339_ns(&written), Ok(nanos), "{} is {}", written, utc);
    }

    /// Every start position prints as text that parses back to it.
    #[test]
    fn start_positions_print_and_parse_back(position in start_position_strategy()) {
        let text = position.to_string();
        prop_assert_eq!(text.parse::<StartPosition>(), Ok(position), "{}", text);
        let (code, argument) = position.to_wire();
        prop_assert_eq!(StartPosition::from_wire(code, argument), Some(position));
    }

    /// Arbitrary text is parsed or refused, never a panic.
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,40}", tail in "[0-9T:.+Z-]{0,12}") {
        let _ = parse_rfc3339_ns(&text);
        let _ = parse_rfc3339_ns(&format!("2026-11-24T18:00:00{text}"));
        let _ = parse_rfc3339_ns(&format!("2026-11-24T18:00:00{tail}"));
        let _ = format!("time:{text}").parse::<StartPosition>();
    }
}
