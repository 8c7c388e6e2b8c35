//! Limits at ingress and hostile input: each limit gets an ERROR naming it,
//! and garbage never takes the broker down.

use std::time::Duration;

use bytes::BytesMut;
use sift_client::{ClientError, ClientOptions, PublishOptions, SubscribeOptions};
use sift_proto::{ErrorCode, FilterKind, Frame, Hello};

use crate::common::*;

fn refused_code(result: Result<impl std::fmt::Debug, ClientError>) -> (ErrorCode, String) {
    match result {
        Err(ClientError::Refused { code, message }) => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn oversized_frames_are_fatal_and_named() {
    let broker = broker_with(|config| {
        config.limits.max_frame_bytes = 1024;
        config.limits.max_payload_bytes = 512;
    })
    .await;
    let mut raw = Raw::handshake(&broker).await;
    raw.send_bytes(&[0, 0, 0x10, 0, 0x10]).await;
    let errors = errors(&raw.recv_until_closed().await);
    assert_eq!(errors[0].code, ErrorCode::FrameTooLarge);
    assert!(errors[0].fatal && errors[0].message.contains("max_frame_bytes"), "{:?}", errors[0]);
    broker.shutdown().await;
}

#[tokio::test]
async fn payload_subscription_and_filter_limits_refuse_without_closing() {
    let broker = broker_with(|config| {
        config.limits.max_payload_bytes = 100;
        config.limits.max_subscriptions_per_connection = 2;
        config.limits.max_filter_bytes = 16;
    })
    .await;
    let user = client(&broker, "user").await;
    let big = message("t", &"x".repeat(101));
    let (code, text) = refused_code(user.publish_confirmed(big, PublishOptions::default()).await);
    assert_eq!(code, ErrorCode::PayloadTooLarge);
    assert!(text.contains("max_payload_bytes"), "{text}");
    let long_filter = SubscribeOptions::new("t").filter(FilterKind::Sql, "a".repeat(17));
    let (code, text) = refused_code(user.subscribe(long_filter).await);
    assert_eq!(code, ErrorCode::FilterTooLong);
    assert!(text.contains("max_filter_bytes"), "{text}");
    let (code, _) = refused_code(user.subscribe(SubscribeOptions::new("a..b")).await);
    assert_eq!(code, ErrorCode::InvalidTopic);
    let _first = user.subscribe(SubscribeOptions::new("a")).await.expect("first");
    let _second = user.subscribe(SubscribeOptions::new("b")).await.expect("second");
    let (code, text) = refused_code(user.subscribe(SubscribeOptions::new("c")).await);
    assert_eq!(code, ErrorCode::TooManySubscriptions);
    assert!(text.contains("max_subscriptions_per_connection"), "{text}");
    // Still connected and working.
    let ok = user.publish_confirmed(message("a", "fine"), PublishOptions::default()).await.expect("confirm");
    assert_eq!(ok.matched, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn connections_over_the_limit_are_refused_with_the_limit_named() {
    let broker = broker_with(|config| config.limits.max_connections = 2).await;
    let _first = client(&broker, "one").await;
    let _second = client(&broker, "two").await;
    let options = ClientOptions { reconnect: false, ..ClientOptions::default() };
    let third = sift_client::Client::connect(broker.local_addr().to_string(), options).await;
    match third {
        Err(ClientError::Connect { reason, .. }) => assert!(reason.contains("max_connections"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(broker.stats().connections_refused, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn silent_connections_time_out_in_the_handshake() {
    let broker = broker_with(|config| config.limits.handshake_timeout_ms = 100).await;
    let mut raw = Raw::connect(&broker).await;
    let errors = errors(&raw.recv_until_closed().await);
    assert_eq!(errors[0].code, ErrorCode::HandshakeTimeout);
    assert!(errors[0].message.contains("handshake_timeout_ms"));
    broker.shutdown().await;
}

#[tokio::test]
async fn unsupported_versions_and_frames_before_hello_are_refused() {
    let broker = broker().await;
    let mut raw = Raw::connect(&broker).await;
    raw.send(&Frame::Hello(Hello { version_min: 7, version_max: 9, client_name: "future".into() })).await;
    assert_eq!(errors(&raw.recv_until_closed().await)[0].code, ErrorCode::UnsupportedVersion);
    let mut raw = Raw::connect(&broker).await;
    raw.send(&Frame::Ping { nonce: 1 }).await;
    assert_eq!(errors(&raw.recv_until_closed().await)[0].code, ErrorCode::UnexpectedFrame);
    broker.shutdown().await;
}

#[tokio::test]
async fn malformed_frames_after_the_handshake_get_errors_and_the_session_goes_on() {
    let broker = broker().await;
    let mut raw = Raw::handshake(&broker).await;
    // A CLOSE frame with a stray byte, then an unknown frame type, then a PING.
    raw.send_bytes(&[0, 0, 0, 2, 0x05, 0xAA, 0, 0, 0, 1, 0x6E]).await;
    raw.send(&Frame::Ping { nonce: 42 }).await;
    let mut seen = Vec::new();
    while let Some(frame) = raw.recv().await {
        let done = frame == Frame::Pong { nonce: 42 };
        seen.push(frame);
        if done {
            break;
        }
    }
    let errors = errors(&seen);
    assert_eq!(errors.len(), 2, "{seen:?}");
    assert_eq!(errors[0].code, ErrorCode::Malformed);
    assert_eq!(errors[1].code, ErrorCode::UnexpectedFrame);
    assert!(errors.iter().all(|error| !error.fatal));
    broker.shutdown().await;
}

#[tokio::test]
async fn random_bytes_truncated_frames_and_floods_never_take_the_broker_down() {
    let broker = broker().await;
    let mut seed: u64 = 0x5eed;
    for round in 0..50 {
        let mut raw = Raw::connect(&broker).await;
        if round % 2 == 0 {
            raw.send(&Frame::Hello(Hello { version_min: 1, version_max: 1, client_name: "fuzz".into() })).await;
        }
        let mut garbage = vec![0u8; 64 + round * 37];
        for byte in garbage.iter_mut() {
            // A small xorshift generator: reproducible garbage without a dependency.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *byte = seed as u8;
        }
        raw.send_bytes(&garbage).await;
        drop(raw);
    }
    // A truncated frame, then the peer goes away.
    let mut raw = Raw::handshake(&broker).await;
    let mut frame = BytesMut::new();
    Frame::Publish(sift_proto::Publish {
        request_id: 1,
        flags: 0,
        await_timeout_ms: 0,
        message: Box::new(message("t", "x")),
    })
    .encode(&mut frame)
    .expect("encodable");
    raw.send_bytes(&frame[..frame.len() - 3]).await;
    drop(raw);
    // A flood of publishes from a client that never reads its confirms.
    let mut flooder = Raw::handshake(&broker).await;
    let mut flood = BytesMut::new();
    for request_id in 0..20_000u64 {
        Frame::Publish(sift_proto::Publish {
            request_id,
            flags: sift_proto::publish_flags::CONFIRM,
            await_timeout_ms: 0,
            message: Box::new(message("flood", "x")),
        })
        .encode(&mut flood)
        .expect("encodable");
    }
    flooder.send_bytes(&flood).await;
    // Through all of it, a well-behaved client is served.
    let user = client(&broker, "user").await;
    let mut subscription = user.subscribe(SubscribeOptions::new("ok")).await.expect("subscribe");
    let confirm = tokio::time::timeout(
        Duration::from_secs(10),
        user.publish_confirmed(message("ok", "fine"), PublishOptions::default()),
    )
    .await
    .expect("served in time")
    .expect("confirm");
    assert_eq!(confirm.matched, 1);
    assert_eq!(texts(&mut subscription, 1).await, ["fine"]);
    drop(flooder);
    broker.shutdown().await;
}

#[tokio::test]
async fn responses_a_client_never_reads_are_bounded_by_max_pending_bytes() {
    let broker = broker_with(|config| config.limits.max_pending_bytes_per_connection = 16 * 1024).await;
    let raw = Raw::handshake(&broker).await;
    let mut pings = BytesMut::new();
    for nonce in 0..200_000u64 {
        Frame::Ping { nonce }.encode(&mut pings).expect("encodable");
    }
    // Written from a task: the broker stops reading once it closes us.
    let (mut read_half, mut write_half) = raw.stream.into_split();
    let writer = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let _ = write_half.write_all(&pings).await;
    });
    // Read nothing until the broker has given up on us for the unread
    // responses, then read: PONGs, then an ERROR naming the limit, then the end.
    crate::network_support::eventually("the broker closed the connection", || {
        broker.stats().slow_consumer_disconnects > 0
    })
    .await;
    let mut buf = BytesMut::new();
    let mut decoder = sift_proto::Decoder::new(sift_proto::DEFAULT_MAX_FRAME_BYTES);
    let mut last_error = None;
    let read_all = async {
        use tokio::io::AsyncReadExt;
        loop {
            while let Some(frame) = decoder.decode(&mut buf).expect("valid") {
                if let Frame::Error(error) = frame {
                    last_error = Some(error);
                }
            }
            match read_half.read_buf(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(PATIENCE, read_all).await.expect("the broker closes the connection");
    let error = last_error.expect("an ERROR before closing");
    assert_eq!(error.code, ErrorCode::PendingBytesExceeded);
    assert!(error.message.contains("max_pending_bytes_per_connection"));
    writer.abort();
    broker.shutdown().await;
}

/// The broker's `memory_bytes` gauge, from its `stats` report.
async fn memory_bytes(client: &sift_client::Client) -> u64 {
    let stats = client.admin(sift_client::AdminQuery::Stats).await.expect("stats");
    stats["counters"]["memory_bytes"].as_u64().expect("memory_bytes")
}

#[tokio::test]
async fn subscribers_that_never_read_are_held_to_the_brokers_memory_budget_and_give_it_back() {
    const BUDGET_BYTES: u64 = 256 * 1024;
    const PAYLOAD_BYTES: usize = 4096;
    let broker = broker_with(|config| config.limits.memory_bytes_max = BUDGET_BYTES).await;
    // Twenty subscribers that take nothing (no credit) and drop what does
    // not fit: each one's own bounds (64 MiB, 10 000 messages) are far away,
    // so only the broker-wide budget can stop their queues.
    let mut idle = Vec::new();
    for index in 0..20 {
        let reader = client(&broker, &format!("idle-{index}")).await;
        let mut options = SubscribeOptions::new("flood");
        options.credit = Some(0);
        options.policy = Some(sift_client::QueuePolicy::DropNew);
        let subscription = reader.subscribe(options).await.expect("subscribe");
        idle.push((reader, subscription));
    }
    let publisher = client(&broker, "flood").await;
    let payload = "x".repeat(PAYLOAD_BYTES);
    for _ in 0..200 {
        publisher.publish(message("flood", &payload)).await.expect("publish");
    }
    // The ping's answer follows every publish before it: all are routed.
    publisher.ping().await.expect("ping");
    let queued = memory_bytes(&publisher).await;
    // 200 messages to 20 subscribers would be 16 MiB; one message over the
    // budget is the most the check before each push lets through.
    assert!(queued <= BUDGET_BYTES && queued > BUDGET_BYTES / 2, "queued {queued} bytes");
    assert!(broker.stats().dropped_queue_full > 0, "the budget dropped what did not fit");
    for (reader, _) in idle {
        reader.close().await;
    }
    // Closed connections give their bytes back.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while memory_bytes(&publisher).await != 0 {
        assert!(tokio::time::Instant::now() < deadline, "the budget was not given back");
        tokio::task::yield_now().await;
    }
    broker.shutdown().await;
}
