//! Chunked transfers through a real broker: sizes on each side of every
//! boundary (fragment size, the broker's payload limit), routing of every
//! fragment by the transfer's content filter, a lost fragment and a
//! corrupted one reported, parallel streams merged.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use sift_broker::RunningBroker;
use sift_client::transfer::{send_file, Fragmenter, Reassembler, ReassemblyConfig, TransferEvent, TransferOptions};
use sift_client::{Client, FilterKind, SubscribeOptions, Subscription};
use sift_core::{DeliveryMode, Message, TopicName, Value};

use crate::common::{broker_with, client, message, next};

/// Fragment size of most tests: small, so that boundaries are cheap to reach.
const CHUNK: usize = 1024;
/// The broker's payload limit in these tests.
const MAX_PAYLOAD: u32 = 64 * 1024;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sift-transfer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `size` bytes of a pattern that differs at every offset within 251.
fn pattern(size: usize) -> Vec<u8> {
    (0..size).map(|index| (index % 251) as u8 ^ (index / 251) as u8).collect()
}

async fn small_broker() -> RunningBroker {
    broker_with(|config| {
        config.limits.max_payload_bytes = MAX_PAYLOAD;
        config.limits.max_frame_bytes = 2 * MAX_PAYLOAD;
    })
    .await
}

fn template(topic: &str) -> Message {
    Message::new(TopicName::new(topic).expect("topic"), Bytes::new())
}

/// Feeds deliveries to a reassembler until it reports `transfers` events.
async fn receive(
    subscription: &mut Subscription,
    reassembler: &mut Reassembler,
    transfers: usize,
) -> Vec<TransferEvent> {
    let mut events = Vec::new();
    while events.len() < transfers {
        let delivery = next(subscription).await;
        if let Some(Some(event)) = reassembler.accept(&delivery.message, Instant::now()) {
            events.push(event);
        }
    }
    events
}

fn saved_path(event: &TransferEvent) -> &Path {
    match event {
        TransferEvent::Completed { path, .. } => path,
        TransferEvent::Failed(failure) => panic!("transfer failed: {failure:?}"),
    }
}

#[tokio::test]
async fn sizes_around_every_boundary_arrive_whole() {
    let broker = small_broker().await;
    let dir = scratch("sizes");
    let sender = client(&broker, "sender").await;
    let receiver = client(&broker, "receiver").await;
    let mut subscription = receiver.subscribe(SubscribeOptions::new("files.>")).await.expect("subscribe");
    let mut reassembler = Reassembler::new(ReassemblyConfig::new(dir.join("in"))).expect("dir");
    let payload_limit = MAX_PAYLOAD as usize;
    let cases = [
        (0, CHUNK),
        (1, CHUNK),
        (CHUNK - 1, CHUNK),
        (CHUNK, CHUNK),
        (CHUNK + 1, CHUNK),
        (2 * CHUNK - 1, CHUNK),
        (2 * CHUNK, CHUNK),
        (2 * CHUNK + 1, CHUNK),
        // Fragments asked larger than the broker takes are cut to its limit.
        (payload_limit - 1, 4 * payload_limit),
        (payload_limit, 4 * payload_limit),
        (payload_limit + 1, 4 * payload_limit),
        (3 * payload_limit + 17, 4 * payload_limit),
    ];
    for (index, (size, chunk_bytes)) in cases.into_iter().enumerate() {
        let data = pattern(size);
        let path = dir.join(format!("case-{index}.bin"));
        std::fs::write(&path, &data).expect("write the source");
        let options = TransferOptions { chunk_bytes, ..TransferOptions::default() };
        let report =
            send_file(std::slice::from_ref(&sender), template("files.sizes"), &path, &options).await.expect("sent");
        assert_eq!(report.total_bytes, size as u64);
        assert_eq!(report.matched_min, 1, "the receiver matched every fragment");
        let events = receive(&mut subscription, &mut reassembler, 1).await;
        let saved = std::fs::read(saved_path(&events[0])).expect("saved file");
        assert!(saved == data, "size {size} with fragments of {chunk_bytes}: the saved file differs");
    }
    let _ = std::fs::remove_dir_all(&dir);
    broker.shutdown().await;
}

#[tokio::test]
async fn every_fragment_is_routed_by_the_transfer_filter_and_streams_merge() {
    let broker = small_broker().await;
    let dir = scratch("filter");
    let senders = vec![client(&broker, "s0").await, client(&broker, "s1").await, client(&broker, "s2").await];
    let watcher = client(&broker, "watcher").await;
    let video_only = SubscribeOptions::new("files.>").filter(FilterKind::Sql, "kind = 'video'");
    let mut videos = watcher.subscribe(video_only).await.expect("subscribe");
    let mut audios = watcher
        .subscribe(SubscribeOptions::new("files.>").filter(FilterKind::Sql, "kind = 'audio'"))
        .await
        .expect("subscribe");
    let mut reassembler = Reassembler::new(ReassemblyConfig::new(dir.join("in"))).expect("dir");
    let data = pattern(20 * CHUNK + 5);
    let path = dir.join("clip.mp4");
    std::fs::write(&path, &data).expect("source");
    let mut video = template("files.media");
    video.properties.push(("kind".into(), Value::Str("video".into())));
    let options = TransferOptions { chunk_bytes: CHUNK, ..TransferOptions::default() };
    let report = send_file(&senders, video, &path, &options).await.expect("sent over three streams");
    assert_eq!((report.fragments, report.streams), (21, 3));
    let events = receive(&mut videos, &mut reassembler, 1).await;
    assert_eq!(std::fs::read(saved_path(&events[0])).expect("saved"), data);
    // Not one fragment reached the audio subscription: a sentinel that
    // matches it arrives first.
    let mut sentinel = message("files.media", "sentinel");
    sentinel.properties.push(("kind".into(), Value::Str("audio".into())));
    senders[0].publish(sentinel).await.expect("publish");
    assert_eq!(next(&mut audios).await.message.payload, "sentinel".as_bytes());
    let mut sentinel = message("files.media", "video sentinel");
    sentinel.properties.push(("kind".into(), Value::Str("video".into())));
    senders[0].publish(sentinel).await.expect("publish");
    assert_eq!(next(&mut videos).await.message.payload, "video sentinel".as_bytes(), "no fragment came twice");
    let _ = std::fs::remove_dir_all(&dir);
    broker.shutdown().await;
}

/// Publishes the fragments of `data` except `skipped`, with `corrupt`
/// fragments' payloads altered, as reliable messages.
async fn publish_fragments(sender: &Client, id: &str, data: &[u8], skipped: &[u64], corrupt: &[u64]) {
    let mut reliable = template("files.faults");
    reliable.delivery_mode = DeliveryMode::Reliable;
    let mut fragmenter = Fragmenter::new(reliable, id.into(), "faulty.bin", data.len() as u64, CHUNK as u64, 1);
    let mut offset = 0;
    let mut index = 0u64;
    while let Some(length) = fragmenter.next_payload_bytes() {
        let mut fragment = fragmenter.fragment(Bytes::copy_from_slice(&data[offset..offset + length as usize]));
        offset += length as usize;
        if corrupt.contains(&index) {
            let mut altered = fragment.payload.to_vec();
            altered[0] ^= 1;
            fragment.payload = Bytes::from(altered);
        }
        if !skipped.contains(&index) {
            sender.publish_confirmed(fragment, Default::default()).await.expect("published");
        }
        index += 1;
    }
}

#[tokio::test]
async fn a_lost_or_corrupted_fragment_is_reported_and_no_file_appears() {
    let broker = small_broker().await;
    let dir = scratch("faults");
    let sender = client(&broker, "sender").await;
    let receiver = client(&broker, "receiver").await;
    let mut subscription = receiver.subscribe(SubscribeOptions::new("files.faults")).await.expect("subscribe");
    let mut reassembler = Reassembler::new(ReassemblyConfig::new(dir.join("in"))).expect("dir");
    let data = pattern(10 * CHUNK);
    let cases = [("lost", &[4u64][..], &[][..], "never did"), ("corrupt", &[][..], &[7u64][..], "fragment 7: CRC-32")];
    for (id, skipped, corrupt, expected) in cases {
        publish_fragments(&sender, id, &data, skipped, corrupt).await;
        sender.publish(message("files.faults", "sentinel")).await.expect("publish");
        // Everything up to the sentinel: the failure once, and the rest of
        // the failed transfer dropped rather than started again.
        let mut events = Vec::new();
        loop {
            let delivery = next(&mut subscription).await;
            match reassembler.accept(&delivery.message, Instant::now()) {
                None => break,
                Some(event) => events.extend(event),
            }
        }
        match &events[..] {
            [TransferEvent::Failed(failure)] => {
                assert!(failure.reason.contains(expected), "{failure:?}");
                assert_eq!(failure.missing, skipped.to_vec());
            }
            other => panic!("expected a failure, got {other:?}"),
        }
        assert!(!dir.join("in").join("faulty.bin").exists(), "no file under the final name");
    }
    assert_eq!(reassembler.counters().completed, 0);
    let leftovers: Vec<_> = std::fs::read_dir(dir.join("in")).expect("dir").collect();
    assert!(leftovers.is_empty(), "no partial file left: {leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
    broker.shutdown().await;
}
