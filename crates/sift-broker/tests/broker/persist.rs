//! Persistent delivery over sockets: confirms that carry the stream and
//! sequence, restarts that keep every confirmed message and durable
//! position, durable subscriptions with content filters, shared durables,
//! replays from every start position, archive queries in the four filter
//! languages, retention, and damaged files.

use std::path::{Path, PathBuf};

use serde_json::json;
use sift_broker::{Config, RunningBroker, StreamDefinition};
use sift_client::{
    AckPolicy, Client, ConfirmStatus, FilterKind, GapReason, ManageOp, PublishOptions, QueryEvent, QueryOptions,
    StartPosition, SubscribeOptions, Subscription, SubscriptionEvent,
};
use sift_core::{DeliveryMode, Message, Value};
use sift_proto::ErrorCode;

use crate::common::*;

/// A directory removed when the test ends.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        let name = format!("sift-test-{label}-{}-{}", std::process::id(), sift_core::system_now_ns());
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A broker keeping its data in `data_dir`, with `adjust` applied.
pub async fn broker_in(data_dir: &Path, adjust: impl FnOnce(&mut Config)) -> RunningBroker {
    let mut config =
        Config { data_dir: data_dir.to_path_buf(), remove_data_dir_on_shutdown: false, ..Config::scratch() };
    adjust(&mut config);
    RunningBroker::start(config).await.expect("broker starts")
}

/// A persistent message on `topic`.
pub fn persistent(topic: &str, payload: &str) -> Message {
    let mut message = message(topic, payload);
    message.delivery_mode = DeliveryMode::Persistent;
    message
}

fn with_props(mut message: Message, props: &[(&str, Value)]) -> Message {
    for (name, value) in props {
        message.properties.push(((*name).to_string(), value.clone()));
    }
    message
}

fn stream(name: &str, topics: &[&str]) -> StreamDefinition {
    StreamDefinition {
        name: name.into(),
        topics: topics.iter().map(|topic| topic.to_string()).collect(),
        max_age_ms: 0,
        max_bytes: 0,
        max_msgs: 0,
        fsync: String::new(),
        replicas: 1,
        members: Vec::new(),
    }
}

/// Publishes and returns the stream sequence of the confirm.
async fn publish_stored(client: &Client, message: Message) -> u64 {
    let confirm = client.publish_confirmed(message, PublishOptions::default()).await.expect("confirmed");
    assert_ne!(confirm.status, ConfirmStatus::NoSubscribers, "a stored message reached the stream");
    assert_ne!(confirm.stream_seq, 0, "the confirm carries where the message was stored: {confirm:?}");
    confirm.stream_seq
}

/// The next `count` deliveries as (stream seq, payload), acknowledged.
async fn seqs_and_texts(subscription: &mut Subscription, count: usize) -> Vec<(u64, String)> {
    let mut received = Vec::with_capacity(count);
    for _ in 0..count {
        let delivery = next(subscription).await;
        delivery.ack().expect("ack");
        received.push((delivery.stream_seq, text(&delivery)));
    }
    received
}

async fn durable_info(client: &Client, name: &str) -> serde_json::Value {
    client.manage(ManageOp::DurableInfo, json!({ "name": name })).await.expect("durable info")
}

/// Waits until the durable's stored ack floor reaches `floor`: the
/// position is then in the position log, whatever happens to the broker.
async fn wait_for_stored_floor(client: &Client, name: &str, floor: u64) {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let info = durable_info(client, name).await;
            if info["stored_ack_floor"].as_u64() >= Some(floor) {
                return;
            }
            client.ping().await.expect("ping");
        }
    })
    .await
    .expect("the position is stored in time");
}

/// Waits until stream `name` has stored its message `seq`.
async fn wait_for_last_seq(client: &Client, name: &str, seq: u64) {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let info = client.manage(ManageOp::StreamInfo, json!({ "name": name })).await.expect("stream info");
            if info["last_seq"].as_u64() >= Some(seq) {
                return;
            }
            client.ping().await.expect("ping");
        }
    })
    .await
    .expect("the stream stores the messages in time");
}

#[tokio::test]
async fn a_persistent_publish_is_confirmed_with_its_stream_and_sequence() {
    let data = TempDir::new("confirm");
    let broker = broker_in(&data.0, |_| {}).await;
    let publisher = client(&broker, "pub").await;
    for expected in 1..=3 {
        let confirm = publisher.publish_confirmed(persistent("a.b", "x"), PublishOptions::default()).await.expect("ok");
        assert_eq!(confirm.status, ConfirmStatus::Accepted, "stored: the default stream took it");
        assert_eq!((confirm.stream.as_str(), confirm.stream_seq), ("default", expected));
    }
    // A reliable message on no stream is not stored.
    let confirm = publisher.publish_confirmed(reliable("a.b", "y"), PublishOptions::default()).await.expect("ok");
    assert_eq!((confirm.status, confirm.stream_seq), (ConfirmStatus::NoSubscribers, 0));
    assert!(broker.stats().persistent_published >= 3);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_durable_with_a_filter_gets_what_matched_while_away_across_restarts() {
    let data = TempDir::new("durable");
    let broker = broker_in(&data.0, |_| {}).await;
    let subscriber = client(&broker, "sub").await;
    let options = SubscribeOptions::new("orders.>").filter(FilterKind::Sql, "qty > 5").ack(AckPolicy::Manual).durable(
        "big",
        "",
        StartPosition::New,
    );
    subscriber.subscribe(options.clone()).await.expect("durable created").unsubscribe().await.expect("away");
    let publisher = client(&broker, "pub").await;
    for qty in 1..=10 {
        let message = with_props(persistent("orders.new", &format!("q{qty}")), &[("qty", Value::Int(qty))]);
        publish_stored(&publisher, message).await;
    }
    broker.shutdown().await;

    // A new broker process on the same data: the durable resumes.
    let broker = broker_in(&data.0, |_| {}).await;
    let subscriber = client(&broker, "sub").await;
    let mut subscription = subscriber.subscribe(options.clone()).await.expect("durable resumed");
    let mut first_three = Vec::new();
    for _ in 0..3 {
        let delivery = next(&mut subscription).await;
        delivery.ack().expect("ack");
        first_three.push(text(&delivery));
    }
    assert_eq!(first_three, ["q6", "q7", "q8"], "only what matched, in order");
    // q9 and q10 arrive but are not acknowledged.
    assert_eq!(texts(&mut subscription, 2).await, ["q9", "q10"]);
    wait_for_stored_floor(&subscriber, "big", 8).await;
    subscription.unsubscribe().await.expect("away again");
    broker.shutdown().await;

    let broker = broker_in(&data.0, |_| {}).await;
    let subscriber = client(&broker, "sub").await;
    let mut subscription = subscriber.subscribe(options).await.expect("resumed again");
    let again: Vec<String> = seqs_and_texts(&mut subscription, 2).await.into_iter().map(|(_, text)| text).collect();
    assert_eq!(again, ["q9", "q10"], "unacknowledged messages come again after a restart");
    // Live ones follow, and nothing else came first: a sentinel shows it.
    let publisher = client(&broker, "pub").await;
    let sentinel = with_props(persistent("orders.new", "q99"), &[("qty", Value::Int(99))]);
    publish_stored(&publisher, sentinel).await;
    assert_eq!(text(&next(&mut subscription).await), "q99");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_durable_resumed_with_other_filters_is_refused() {
    let data = TempDir::new("mismatch");
    let broker = broker_in(&data.0, |_| {}).await;
    let subscriber = client(&broker, "sub").await;
    let options = SubscribeOptions::new("a.>").durable("d", "", StartPosition::New);
    let held = subscriber.subscribe(options.clone()).await.expect("created");
    let other = client(&broker, "other").await;
    let refused = other.subscribe(options.clone()).await.expect_err("unshared and in use");
    assert!(refused.to_string().contains("durable_in_use"), "{refused}");
    held.unsubscribe().await.expect("released");
    let changed = SubscribeOptions::new("b.>").durable("d", "", StartPosition::New);
    let refused = other.subscribe(changed).await.expect_err("other topic filter");
    assert!(refused.to_string().contains("durable_mismatch"), "{refused}");
    other.subscribe(options).await.expect("same filters resume");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_shared_durable_gives_each_message_to_one_consumer() {
    let data = TempDir::new("shared");
    let broker = broker_in(&data.0, |_| {}).await;
    let options = SubscribeOptions::new("jobs").durable("workers", "", StartPosition::New).shared();
    let first = client(&broker, "w1").await;
    let second = client(&broker, "w2").await;
    let mut one = first.subscribe(options.clone()).await.expect("first consumer");
    let mut two = second.subscribe(options).await.expect("second consumer");
    let publisher = client(&broker, "pub").await;
    for index in 0..40 {
        publish_stored(&publisher, persistent("jobs", &index.to_string())).await;
    }
    let mut seen = Vec::new();
    let (mut from_one, mut from_two) = (0, 0);
    while seen.len() < 40 {
        tokio::select! {
            Some(delivery) = one.next() => { from_one += 1; seen.push(delivery.stream_seq) }
            Some(delivery) = two.next() => { from_two += 1; seen.push(delivery.stream_seq) }
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (1..=40).collect::<Vec<u64>>(), "every message once");
    assert!(from_one > 0 && from_two > 0, "both consumers served: {from_one} and {from_two}");
    broker.shutdown().await;
}

#[tokio::test]
async fn replays_start_where_asked_and_follow_live_messages() {
    let data = TempDir::new("replay");
    let broker = broker_in(&data.0, |config| config.streams = vec![stream("orders", &["orders.>"])]).await;
    let publisher = client(&broker, "pub").await;
    let mut stamps = Vec::new();
    for index in 1..=10 {
        // Best-effort messages are stored too: the stream holds their topic.
        // Confirmed, so that each is stamped before the next stamp here.
        publisher
            .publish_confirmed(message("orders.x", &index.to_string()), PublishOptions::default())
            .await
            .expect("ok");
        stamps.push(sift_core::system_now_ns());
    }
    let reader = client(&broker, "reader").await;
    // Unconfirmed appends complete in the stream's own time.
    wait_for_last_seq(&reader, "orders", 10).await;
    let starts = [
        (StartPosition::First, 1),
        (StartPosition::Last(3), 8),
        (StartPosition::Seq(5), 5),
        (StartPosition::Time(stamps[5]), 7),
    ];
    let mut subscriptions = Vec::new();
    for (start, first) in starts {
        let options = SubscribeOptions::new("orders.>").replay("orders", start);
        let mut subscription = reader.subscribe(options).await.expect("replay");
        let got = seqs_and_texts(&mut subscription, (11 - first) as usize).await;
        let expected: Vec<(u64, String)> = (first..=10).map(|seq| (seq, seq.to_string())).collect();
        assert_eq!(got, expected, "replay from {start}");
        subscriptions.push(subscription);
    }
    let mut new_only =
        reader.subscribe(SubscribeOptions::new("orders.>").replay("orders", StartPosition::New)).await.expect("new");
    publisher.publish(message("orders.x", "11")).await.expect("sent");
    for subscription in subscriptions.iter_mut().chain([&mut new_only]) {
        assert_eq!(seqs_and_texts(subscription, 1).await, [(11, "11".to_string())], "live after stored");
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn a_replay_under_live_traffic_has_no_gap_and_no_duplicate() {
    let data = TempDir::new("seam");
    let broker = broker_in(&data.0, |config| config.streams = vec![stream("ticks", &["ticks"])]).await;
    let publisher = client(&broker, "pub").await;
    for index in 0..2_000 {
        publisher.publish(reliable("ticks", &index.to_string())).await.expect("sent");
    }
    let reader = client(&broker, "reader").await;
    let mut subscription =
        reader.subscribe(SubscribeOptions::new("ticks").replay("ticks", StartPosition::First)).await.expect("replay");
    let feeding = tokio::spawn(async move {
        for index in 2_000..4_000 {
            publisher.publish(reliable("ticks", &index.to_string())).await.expect("sent");
        }
        publisher
    });
    let got = seqs_and_texts(&mut subscription, 4_000).await;
    for (position, (seq, payload)) in got.iter().enumerate() {
        assert_eq!((*seq, payload.as_str()), (position as u64 + 1, position.to_string().as_str()));
    }
    feeding.await.expect("publisher done");
    broker.shutdown().await;
}

#[tokio::test]
async fn archive_queries_select_in_every_language_with_time_bounds() {
    let data = TempDir::new("query");
    let broker = broker_in(&data.0, |config| config.streams = vec![stream("jbi", &["jbi.>"])]).await;
    let publisher = client(&broker, "pub").await;
    let mut middle_ns = 0;
    for index in 0..20i64 {
        let mut message = with_props(message("jbi.basic", &format!("m{index}")), &[("year", Value::Int(2000 + index))]);
        message.metadata = Some(format!("<ATO><nickname>N{index}</nickname></ATO>").into());
        if index == 10 {
            publisher.ping().await.expect("first half read");
            middle_ns = sift_core::system_now_ns();
        }
        publisher.publish_confirmed(message, PublishOptions::default()).await.expect("stored");
    }
    publisher.publish_confirmed(message("jbi.other", "o"), PublishOptions::default()).await.expect("stored");
    wait_for_last_seq(&publisher, "jbi", 21).await;
    let query = |filter: Option<(FilterKind, &str)>| QueryOptions {
        stream: "jbi".into(),
        topic_filter: "jbi.basic".into(),
        filter: filter.map(|(kind, text)| (kind, text.to_string())),
        ..QueryOptions::default()
    };
    let cases = [
        (query(Some((FilterKind::Tags, "year>=2018"))), vec!["m18", "m19"]),
        (query(Some((FilterKind::Sql, "year IN (2001, 2003)"))), vec!["m1", "m3"]),
        (query(Some((FilterKind::Xpath, "/ATO[nickname='N7']"))), vec!["m7"]),
        (QueryOptions { topic_filter: String::new(), ..query(Some((FilterKind::Regex, "other$"))) }, vec!["o"]),
        (QueryOptions { since_ns: middle_ns, limit: 3, ..query(None) }, vec!["m10", "m11", "m12"]),
        (QueryOptions { until_ns: middle_ns, ..query(Some((FilterKind::Sql, "year >= 2008"))) }, vec!["m8", "m9"]),
    ];
    for (options, expected) in cases {
        let described = format!("{options:?}");
        let mut results = publisher.query(options).expect("query starts");
        let mut payloads = Vec::new();
        loop {
            match results.next().await.expect("the query ends with Done") {
                QueryEvent::Message { message, .. } => {
                    payloads.push(String::from_utf8(message.payload.to_vec()).expect("utf-8"))
                }
                QueryEvent::Done { matched, missed, .. } => {
                    assert_eq!((matched, missed), (expected.len() as u64, 0), "{described}");
                    break;
                }
                QueryEvent::Failed(error) => panic!("{described}: {error}"),
            }
        }
        assert_eq!(payloads, expected, "{described}");
    }
    let bad = QueryOptions { filter: Some((FilterKind::Sql, "year >".into())), ..query(None) };
    let mut results = publisher.query(bad).expect("sent");
    match results.next().await {
        Some(QueryEvent::Failed(error)) => assert!(error.to_string().contains("invalid_filter"), "{error}"),
        other => panic!("a bad filter is refused, got {other:?}"),
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn retention_removes_old_segments_and_a_durable_is_told_what_it_missed() {
    let data = TempDir::new("retention");
    let mut limited = stream("logs", &["logs"]);
    limited.max_msgs = 40;
    let broker = broker_in(&data.0, |config| config.streams = vec![limited]).await;
    let subscriber = client(&broker, "sub").await;
    let options = SubscribeOptions::new("logs").durable("tail", "logs", StartPosition::First);
    subscriber.subscribe(options.clone()).await.expect("created").unsubscribe().await.expect("away");
    let publisher = client(&broker, "pub").await;
    for index in 0..400 {
        publisher.publish_confirmed(reliable("logs", &index.to_string()), PublishOptions::default()).await.expect("ok");
    }
    wait_for_last_seq(&publisher, "logs", 400).await;
    let info = publisher.manage(ManageOp::StreamInfo, json!({ "name": "logs" })).await.expect("info");
    let first_seq = info["first_seq"].as_u64().expect("first_seq");
    assert!(first_seq > 300, "old segments were removed: {info}");
    assert!(info["messages"].as_u64() <= Some(100), "{info}");
    let mut subscription = subscriber.subscribe(options).await.expect("resumed");
    // Retention may remove another segment between the info and the
    // resume: the gap must cover exactly what precedes the first delivery,
    // which is at least what the info said was gone.
    let missed = match tokio::time::timeout(PATIENCE, subscription.next_event()).await.expect("in time") {
        Some(SubscriptionEvent::Gap(gap)) => {
            assert_eq!((gap.first_seq, gap.reason), (1, GapReason::Removed), "{gap:?}");
            gap.count
        }
        other => panic!("the durable is told first what it missed, got {other:?}"),
    };
    assert!(missed >= first_seq - 1, "the gap covers what retention removed: {missed} < {}", first_seq - 1);
    let delivery = next(&mut subscription).await;
    assert_eq!(delivery.stream_seq, missed + 1, "the first delivery follows the gap");
    broker.shutdown().await;
}

#[tokio::test]
async fn streams_added_at_run_time_survive_a_restart_and_refuse_bad_definitions() {
    let data = TempDir::new("manage");
    let broker = broker_in(&data.0, |_| {}).await;
    let admin = client(&broker, "admin").await;
    let added = admin
        .manage(ManageOp::StreamAdd, json!({ "name": "s1", "topics": ["a.>"], "fsync": "every:10" }))
        .await
        .expect("added");
    assert_eq!(added["fsync"], "every:10");
    let again = admin.manage(ManageOp::StreamAdd, json!({ "name": "s1", "topics": ["a.>"] })).await;
    assert!(again.expect_err("exists").to_string().contains("stream_exists"));
    let bad = admin.manage(ManageOp::StreamAdd, json!({ "name": "bad/name", "topics": ["a"] })).await;
    assert!(bad.expect_err("bad name").to_string().contains("bad/name"));
    let bad_fsync =
        admin.manage(ManageOp::StreamAdd, json!({ "name": "s2", "topics": ["a"], "fsync": "sometimes" })).await;
    assert!(bad_fsync.expect_err("bad policy").to_string().contains("sometimes"));
    publish_stored(&admin, persistent("a.b", "kept")).await;
    broker.shutdown().await;
    let broker = broker_in(&data.0, |_| {}).await;
    let admin = client(&broker, "admin").await;
    let listed = admin.manage(ManageOp::StreamLs, json!({})).await.expect("ls");
    let names: Vec<&str> =
        listed["streams"].as_array().expect("list").iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["default", "s1"]);
    let info = admin.manage(ManageOp::StreamInfo, json!({ "name": "s1" })).await.expect("info");
    assert_eq!((info["messages"].as_u64(), info["last_seq"].as_u64()), (Some(1), Some(1)));
    admin.manage(ManageOp::StreamRm, json!({ "name": "s1" })).await.expect("removed");
    let gone = admin.manage(ManageOp::StreamInfo, json!({ "name": "s1" })).await;
    assert!(gone.expect_err("removed").to_string().contains("unknown_stream"));
    broker.shutdown().await;
}

/// The segment files of stream `name`, in order.
fn segments(data_dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir.join("streams").join(name))
        .expect("stream dir")
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "seg"))
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn a_torn_tail_is_cut_and_a_damaged_record_is_reported_never_served() {
    let data = TempDir::new("damage");
    let broker = broker_in(&data.0, |_| {}).await;
    let publisher = client(&broker, "pub").await;
    for index in 1..=10 {
        publish_stored(&publisher, persistent("t", &format!("payload-{index:02}"))).await;
    }
    broker.shutdown().await;
    let segment = segments(&data.0, "default").pop().expect("a segment");
    let mut bytes = std::fs::read(&segment).expect("read");
    // Damage the body of record 5 (each record is the same size here).
    let record_bytes = bytes.len() / 10;
    let flipped_at = 4 * record_bytes + record_bytes - 3;
    bytes[flipped_at] ^= 0x40;
    // Tear the last record in half.
    bytes.truncate(9 * record_bytes + record_bytes / 2);
    std::fs::write(&segment, &bytes).expect("write");

    let broker = broker_in(&data.0, |_| {}).await;
    let reader = client(&broker, "reader").await;
    let info = reader.manage(ManageOp::StreamInfo, json!({ "name": "default" })).await.expect("info");
    assert_eq!(info["last_seq"].as_u64(), Some(9), "the torn record was cut: {info}");
    assert_eq!(info["damaged_records"].as_u64(), Some(1), "{info}");
    let mut subscription =
        reader.subscribe(SubscribeOptions::new("t").replay("default", StartPosition::First)).await.expect("replay");
    let mut seqs = Vec::new();
    let mut gaps = Vec::new();
    while seqs.len() < 8 {
        match tokio::time::timeout(PATIENCE, subscription.next_event()).await.expect("in time").expect("open") {
            SubscriptionEvent::Delivery(delivery) => {
                assert_eq!(text(&delivery), format!("payload-{:02}", delivery.stream_seq), "served whole");
                seqs.push(delivery.stream_seq);
            }
            SubscriptionEvent::Gap(gap) => gaps.push(gap),
        }
    }
    assert_eq!(seqs, [1, 2, 3, 4, 6, 7, 8, 9]);
    assert_eq!(gaps.len(), 1);
    assert_eq!((gaps[0].first_seq, gaps[0].count, gaps[0].reason), (5, 1, GapReason::Damaged));
    // New messages carry on after the last whole one.
    assert_eq!(publish_stored(&reader, persistent("t", "payload-10")).await, 10);
    broker.shutdown().await;
}

#[tokio::test]
async fn an_unknown_stream_or_a_bad_start_is_refused_with_a_named_error() {
    let data = TempDir::new("refusals");
    let broker = broker_in(&data.0, |_| {}).await;
    let subscriber = client(&broker, "sub").await;
    let replay = SubscribeOptions::new("a").replay("nope", StartPosition::First);
    let refused = subscriber.subscribe(replay).await.expect_err("no such stream");
    assert!(refused.to_string().contains("unknown_stream"), "{refused}");
    let grouped = SubscribeOptions::new("a").queue_group("g").replay("default", StartPosition::First);
    assert!(subscriber.subscribe(grouped).await.is_err(), "a replay cannot join a queue group");
    let bad_name = SubscribeOptions::new("a").durable("../escape", "", StartPosition::New);
    let refused = subscriber.subscribe(bad_name).await.expect_err("bad durable name");
    assert!(refused.to_string().contains("escape"), "{refused}");
    let _ = ErrorCode::UnknownStream;
    broker.shutdown().await;
}

/// A small tmpfs mounted for one test, unmounted when it ends.
struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (e.g. `1m`); `None` without root or `mount`.
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = TempDir::new("tmpfs");
        let path = dir.0.clone();
        std::mem::forget(dir);
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            let _ = std::fs::remove_dir_all(&path);
            return None;
        }
        Some(SmallDisk { path })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.path).status();
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[tokio::test]
async fn a_full_disk_refuses_persistent_publishes_and_storing_resumes_when_space_returns() {
    let Some(disk) = SmallDisk::mount("1m") else {
        assert!(std::env::var_os("SIFT_REQUIRE_NETNS").is_none(), "root is required here to mount a tmpfs");
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let filler = disk.path.join("filler");
    std::fs::write(&filler, vec![0u8; 320 * 1024]).expect("filler");
    let broker = broker_in(&disk.path.join("data"), |_| {}).await;
    let subscriber = client(&broker, "sub").await;
    let mut live = subscriber.subscribe(SubscribeOptions::new("t")).await.expect("live");
    let publisher = client(&broker, "pub").await;
    let payload = "x".repeat(16 * 1024);
    let mut confirmed = Vec::new();
    let refusal = loop {
        match publisher.publish_confirmed(persistent("t", &payload), PublishOptions::default()).await {
            Ok(confirm) => confirmed.push(confirm.stream_seq),
            Err(error) => break error,
        }
        assert!(confirmed.len() < 200, "a 1 MiB disk fills up");
        next(&mut live).await;
    };
    assert!(refusal.to_string().contains("storage_full"), "{refusal}");
    // Reliable traffic goes on.
    let sentinel = publisher.publish_confirmed(reliable("t", "still-flowing"), PublishOptions::default()).await;
    assert_eq!(sentinel.expect("reliable is confirmed").matched, 1);
    loop {
        if text(&next(&mut live).await) == "still-flowing" {
            break;
        }
    }
    std::fs::remove_file(&filler).expect("space returns");
    let resumed = tokio::time::timeout(PATIENCE, async {
        loop {
            match publisher.publish_confirmed(persistent("t", "after"), PublishOptions::default()).await {
                Ok(confirm) => return confirm.stream_seq,
                // Refused at once for a moment after a failed write; then tried again.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
    })
    .await
    .expect("storing resumes");
    assert_eq!(resumed, confirmed.len() as u64 + 1, "the failed writes left nothing behind");
    let reader = client(&broker, "reader").await;
    let mut replay =
        reader.subscribe(SubscribeOptions::new("t").replay("default", StartPosition::First)).await.expect("replay");
    let seqs: Vec<u64> =
        seqs_and_texts(&mut replay, confirmed.len() + 1).await.into_iter().map(|(seq, _)| seq).collect();
    assert_eq!(seqs, (1..=resumed).collect::<Vec<u64>>(), "every confirmed message is there");
    broker.shutdown().await;
}

#[tokio::test]
async fn streams_and_durables_receive_messages_published_on_other_brokers() {
    use crate::network_support::{converged, eventually, link_addr, linked_broker_with, node, CLUSTER};
    let first = node("a", &[]).await;
    let routing = sift_broker::config::RoutingMode::Interest;
    let second = linked_broker_with("b", CLUSTER, None, &[link_addr(&first)], routing, |config| {
        config.streams = vec![stream("orders", &["orders.>"])];
    })
    .await;
    converged(&[&first, &second], &["a", "b"]).await;
    // b's stream and b's durable on `default` are interest that a learns.
    let subscriber = client(&second, "sub").await;
    let durable = SubscribeOptions::new("alerts").durable("alerts", "", StartPosition::New);
    subscriber.subscribe(durable.clone()).await.expect("created").unsubscribe().await.expect("away");
    eventually("a knows b's stream and durable", || {
        let remote = first.remote_interest();
        ["orders.>", "alerts"].iter().all(|topic| remote.iter().any(|(broker, held, _)| broker == "b" && held == topic))
    })
    .await;
    let publisher = client(&first, "pub").await;
    publisher.publish_confirmed(reliable("orders.new", "o1"), PublishOptions::default()).await.expect("sent");
    let confirm = publisher.publish_confirmed(persistent("alerts", "a1"), PublishOptions::default()).await.expect("ok");
    assert_eq!(confirm.stream, "default", "stored at its own broker first");
    let reader = client(&second, "reader").await;
    wait_for_last_seq(&reader, "orders", 1).await;
    let mut resumed = subscriber.subscribe(durable).await.expect("resumed");
    assert_eq!(text(&next(&mut resumed).await), "a1", "stored at b for b's durable while it was away");
    crate::network_support::shutdown_all(vec![first, second]).await;
}
