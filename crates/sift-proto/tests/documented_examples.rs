//! The byte examples of `docs/PROTOCOL.md` (client protocol, §4 and the
//! worked example of §9), checked against the codec byte for byte.
//!
//! The test reads the document itself rather than a copy of its bytes, so
//! that neither the codec nor the specification can change alone: each case
//! names the section that must show the frame's bytes, and the section's
//! text (with line breaks and spacing folded) must contain them.

use bytes::BytesMut;
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};
use sift_proto::*;

/// The specification, as the repository holds it.
const PROTOCOL_MD: &str = include_str!("../../../docs/PROTOCOL.md");

/// The first request id of the reference client (2³²).
const FIRST_REQUEST_ID: u64 = 1 << 32;

/// The `id` the worked example stamps (4 660).
const EXAMPLE_ID: u64 = 0x1234;

/// The `timestamp_ns` the worked example stamps.
const EXAMPLE_TIMESTAMP_NS: u64 = 1_700_000_000_000_000_000;

/// The text of the section whose heading starts with `heading`, up to the
/// next heading, with all white space folded to single spaces.
fn section(heading: &str) -> String {
    let start = PROTOCOL_MD
        .lines()
        .position(|line| line.starts_with(heading))
        .unwrap_or_else(|| panic!("no section {heading:?} in docs/PROTOCOL.md"));
    let body: Vec<&str> = PROTOCOL_MD.lines().skip(start + 1).take_while(|line| !line.starts_with('#')).collect();
    body.join(" ").split_whitespace().collect::<Vec<_>>().join(" ")
}

fn hex(frame: &Frame) -> String {
    let mut buf = BytesMut::new();
    frame.encode(&mut buf).expect("encodable");
    buf.iter().map(|byte| format!("{byte:02x}")).collect::<Vec<_>>().join(" ")
}

/// The message of the worked example, as published (`stamped` false) or as
/// the broker delivers it.
fn example_message(stamped: bool) -> Message {
    let mut message = Message::new(TopicName::new("orders.new").expect("valid"), "hi");
    message.delivery_mode = DeliveryMode::Reliable;
    message.priority = Priority::new(4).expect("0-9");
    message.sequence = 1;
    message.properties.push(("qty".into(), Value::Int(3)));
    if stamped {
        message.id = EXAMPLE_ID;
        message.timestamp_ns = EXAMPLE_TIMESTAMP_NS;
        message.publisher = "demo".into();
    }
    message
}

fn confirm(status: ConfirmStatus, matched: u32, acked: u32, pending: &[&str], stream: &str, seq: u64) -> Frame {
    Frame::Confirm(Confirm {
        request_id: FIRST_REQUEST_ID,
        status,
        matched,
        acked,
        pending: pending.iter().map(|label| label.to_string()).collect(),
        stream: stream.into(),
        stream_seq: seq,
    })
}

fn worked_example() -> Vec<(&'static str, Frame)> {
    vec![
        ("### 9.1 HELLO", Frame::Hello(Hello { version_min: 1, version_max: 1, client_name: "demo".into() })),
        (
            "### 9.2 WELCOME",
            Frame::Welcome(Welcome {
                version: 1,
                server_name: "sift".into(),
                connection_id: 1,
                max_frame_bytes: 8_388_608,
                max_payload_bytes: 4_194_304,
                max_subscriptions: 10_000,
                max_filter_bytes: 4_096,
                publish_window: 1_024,
                ack_timeout_ms: 30_000,
            }),
        ),
        ("### 9.3 SUBSCRIBE", Frame::Subscribe(Subscribe::new(1, "orders.>"))),
        ("### 9.4 SUBSCRIBED", Frame::Subscribed { sub_id: 1 }),
        (
            "### 9.5 PUBLISH",
            Frame::Publish(Publish {
                request_id: FIRST_REQUEST_ID,
                flags: publish_flags::CONFIRM,
                await_timeout_ms: 0,
                message: Box::new(example_message(false)),
            }),
        ),
        ("### 9.6 CONFIRM", confirm(ConfirmStatus::Accepted, 1, 0, &[], "", 0)),
        (
            "### 9.7 DELIVER",
            Frame::Deliver(Deliver {
                sub_id: 1,
                delivery_tag: 1,
                flags: 0,
                stream_seq: 0,
                message: Box::new(example_message(true)),
            }),
        ),
        ("### 9.8 ACK", Frame::Ack { delivery_tags: vec![1] }),
    ]
}

fn layout_examples() -> Vec<(&'static str, Frame)> {
    let incomplete = Frame::Confirm(Confirm {
        request_id: FIRST_REQUEST_ID + 1,
        status: ConfirmStatus::Incomplete,
        matched: 2,
        acked: 1,
        pending: vec!["demo#1/1".into()],
        stream: String::new(),
        stream_seq: 0,
    });
    let error =
        Frame::Error(ErrorFrame { code: ErrorCode::InvalidTopic, reference: 2, fatal: false, message: "x".into() });
    vec![
        ("### 4.3 PING", Frame::Ping { nonce: 7 }),
        ("### 4.4 CLOSE", Frame::Close),
        ("### 4.20 TIME", Frame::Time { request_id: 9, origin_ns: 1 }),
        ("### 4.6 CONFIRM", incomplete),
        ("### 4.6 CONFIRM", confirm(ConfirmStatus::Accepted, 0, 0, &[], "orders", 7)),
        ("### 4.13 ERROR", error),
        ("### 4.16 GAP", Frame::Gap { sub_id: 1, first_seq: 5, count: 3, reason: GapReason::Removed }),
        ("### 4.21 CAUGHT_UP", Frame::CaughtUp { sub_id: 1, last_seq: 7 }),
    ]
}

#[test]
fn documented_examples_encode_as_written() {
    for (heading, frame) in worked_example().into_iter().chain(layout_examples()) {
        let bytes = hex(&frame);
        assert!(section(heading).contains(&bytes), "{heading} should show the {} frame\n{bytes}", frame.name());
    }
}

/// The headings of §9 state each frame's size on the wire; keep them true.
#[test]
fn worked_example_headings_state_the_sizes() {
    for (heading, frame) in worked_example() {
        let mut buf = BytesMut::new();
        frame.encode(&mut buf).expect("encodable");
        let line = PROTOCOL_MD.lines().find(|line| line.starts_with(heading)).expect("heading");
        assert!(line.ends_with(&format!(", {} bytes)", buf.len())), "{line:?} but the frame is {} bytes", buf.len());
    }
}
