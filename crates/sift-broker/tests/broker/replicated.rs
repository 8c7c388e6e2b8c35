//! Replicated streams on three brokers in one process, each linked to the
//! two others: a persistent publish at any of them is confirmed once a
//! quorum stored it, every replica serves the same messages in the same
//! order, the group goes on when its leader goes, and a broker left alone
//! refuses persistent publishes with `no_quorum` instead of confirming
//! them.

use serde_json::{json, Value};
use sift_broker::config::RoutingMode;
use sift_broker::{RunningBroker, StreamDefinition};
use sift_client::{AckPolicy, Client, ClientError, ManageOp, PublishOptions, StartPosition, SubscribeOptions};
use sift_core::{DeliveryMode, Message, Value as PropertyValue};
use sift_proto::ErrorCode;

use crate::common::*;
use crate::network_support::*;

/// The brokers of the group.
const MEMBERS: [&str; 3] = ["ra", "rb", "rc"];

fn replicated_stream() -> StreamDefinition {
    StreamDefinition {
        name: "orders".into(),
        topics: vec!["orders.>".into()],
        max_age_ms: 0,
        max_bytes: 0,
        max_msgs: 0,
        fsync: String::new(),
        replicas: 3,
        members: names(&MEMBERS),
    }
}

/// A member of the group, dialling `dials`, with short Raft timers.
async fn member(name: &str, dials: &[std::net::SocketAddr]) -> RunningBroker {
    linked_broker_with(name, CLUSTER, None, dials, RoutingMode::Interest, |config| {
        config.streams.push(replicated_stream());
        config.storage.raft_heartbeat_ms = 50;
        config.storage.raft_election_ms_min = 300;
        config.storage.raft_election_ms_max = 600;
        config.storage.replicated_append_ms_max = 3_000;
    })
    .await
}

/// The three members, each linked to the others.
async fn group() -> Vec<RunningBroker> {
    let first = member(MEMBERS[0], &[]).await;
    let second = member(MEMBERS[1], &[link_addr(&first)]).await;
    let third = member(MEMBERS[2], &[link_addr(&first), link_addr(&second)]).await;
    converged(&[&first, &second, &third], &MEMBERS).await;
    vec![first, second, third]
}

fn persistent(payload: &str) -> Message {
    let mut message = message("orders.new", payload);
    message.delivery_mode = DeliveryMode::Persistent;
    message
}

async fn stream_info(client: &Client) -> Value {
    client.manage(ManageOp::StreamInfo, json!({ "name": "orders" })).await.expect("stream info")
}

/// Publishes `payload` persistently; its stream sequence once confirmed.
async fn publish(client: &Client, payload: &str) -> u64 {
    let confirm = client.publish_confirmed(persistent(payload), PublishOptions::default()).await.expect("confirmed");
    assert_eq!(confirm.stream, "orders", "{confirm:?}");
    assert_ne!(confirm.stream_seq, 0, "{confirm:?}");
    confirm.stream_seq
}

/// The first `count` messages of the stream as one broker serves them.
async fn replay(broker: &RunningBroker, count: usize) -> Vec<(u64, String)> {
    let client = client(broker, "reader").await;
    let options = SubscribeOptions::new("orders.>").replay("orders", StartPosition::First);
    let mut subscription = client.subscribe(options).await.expect("subscribed");
    let mut messages = Vec::new();
    for _ in 0..count {
        let delivery = next(&mut subscription).await;
        messages.push((delivery.stream_seq, text(&delivery)));
    }
    messages
}

/// The leader every member agrees on, once they do.
async fn agreed_leader(clients: &[&Client]) -> String {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut leaders = Vec::new();
        for client in clients {
            leaders.push(stream_info(client).await["replication"]["leader"].as_str().map(str::to_string));
        }
        if let Some(Some(leader)) = leaders.first().cloned() {
            if leaders.iter().all(|known| known.as_deref() == Some(leader.as_str())) {
                return leader;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "the members agree on a leader: {leaders:?}");
        clients[0].ping().await.expect("ping");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_at_any_replica_is_confirmed_and_every_replica_serves_the_same_log() {
    let brokers = group().await;
    let clients = [client(&brokers[0], "pa").await, client(&brokers[1], "pb").await, client(&brokers[2], "pc").await];
    let mut seqs = Vec::new();
    for round in 0..3 {
        for (index, client) in clients.iter().enumerate() {
            seqs.push(publish(client, &format!("m{round}-{index}")).await);
        }
    }
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 9, "each publish its own sequence: {seqs:?}");
    let expected = replay(&brokers[0], 9).await;
    assert_eq!(expected.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), sorted, "the log holds what was confirmed");
    for broker in &brokers[1..] {
        assert_eq!(replay(broker, 9).await, expected, "every replica serves the same messages in the same order");
    }
    let leader = agreed_leader(&[&clients[0], &clients[1], &clients[2]]).await;
    let info = stream_info(&clients[0]).await;
    assert!(MEMBERS.contains(&leader.as_str()), "{info}");
    assert!(info["replication"]["term"].as_u64() >= Some(1), "{info}");
    assert_eq!(info["replicas"], 3, "{info}");
    shutdown_all(brokers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_goes_on_when_its_leader_goes_and_a_broker_alone_refuses_without_quorum() {
    let mut brokers = group().await;
    let clients = [client(&brokers[0], "pa").await, client(&brokers[1], "pb").await, client(&brokers[2], "pc").await];
    let before = publish(&clients[0], "before").await;
    let leader = agreed_leader(&[&clients[0], &clients[1], &clients[2]]).await;
    let leader_index = MEMBERS.iter().position(|name| *name == leader).expect("a member leads");
    drop(clients);
    brokers.remove(leader_index).shutdown().await;

    // The two left elect one of them; a publish at either is confirmed.
    let survivors = [client(&brokers[0], "sa").await, client(&brokers[1], "sb").await];
    let after = publish(&survivors[1], "after").await;
    assert!(after > before, "{before} then {after}");
    let served = replay(&brokers[0], 2).await;
    assert_eq!(served.iter().map(|(_, text)| text.as_str()).collect::<Vec<_>>(), ["before", "after"]);

    // A message sent again with the same Sift-Msg-Id is stored once.
    let mut keyed = persistent("keyed");
    keyed.properties.push((sift_core::MSG_ID_PROPERTY.to_string(), PropertyValue::Str("order-1".into())));
    let first = survivors[0].publish_confirmed(keyed.clone(), PublishOptions::default()).await.expect("confirmed");
    let again = survivors[1].publish_confirmed(keyed, PublishOptions::default()).await.expect("confirmed");
    assert_eq!(first.stream_seq, again.stream_seq, "a message sent again gets the sequence it has");

    // One broker alone has no quorum: refused, not confirmed.
    drop(survivors);
    let alone = brokers.pop().expect("a broker");
    brokers.pop().expect("a broker").shutdown().await;
    let lonely = client(&alone, "alone").await;
    let refused = lonely.publish_confirmed(persistent("alone"), PublishOptions::default()).await;
    match refused {
        Err(ClientError::Refused { code, message, .. }) => {
            assert_eq!(code, ErrorCode::NoQuorum, "{message}");
            assert!(message.contains("orders"), "{message}");
        }
        other => panic!("a publish without quorum is refused, not {other:?}"),
    }
    alone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_add_with_replicas_places_the_stream_on_the_nearest_brokers() {
    let plain = |name: &'static str, dials: Vec<std::net::SocketAddr>| async move {
        linked_broker_with(name, CLUSTER, None, &dials, RoutingMode::Interest, |config| {
            config.storage.raft_heartbeat_ms = 50;
            config.storage.raft_election_ms_min = 300;
            config.storage.raft_election_ms_max = 600;
        })
        .await
    };
    let first = plain(MEMBERS[0], vec![]).await;
    let second = plain(MEMBERS[1], vec![link_addr(&first)]).await;
    let third = plain(MEMBERS[2], vec![link_addr(&first), link_addr(&second)]).await;
    converged(&[&first, &second, &third], &MEMBERS).await;
    let admin = client(&second, "admin").await;
    let too_many = json!({ "name": "orders", "topics": ["orders.>"], "replicas": 5 });
    match admin.manage(ManageOp::StreamAdd, too_many).await {
        Err(ClientError::Refused { code, message }) => assert_eq!(code, ErrorCode::InvalidField, "{message}"),
        other => panic!("five replicas on three brokers are refused, not {other:?}"),
    }
    let request = json!({ "name": "orders", "topics": ["orders.>"], "replicas": 3 });
    let info = admin.manage(ManageOp::StreamAdd, request.clone()).await.expect("placed");
    assert_eq!(info["replication"]["members"].as_array().map(Vec::len), Some(3), "{info}");
    // Placing again changes nothing.
    admin.manage(ManageOp::StreamAdd, request).await.expect("placed again");
    let publisher = client(&third, "publisher").await;
    let seq = publish(&publisher, "placed").await;
    let served = replay(&first, 1).await;
    assert_eq!(served, [(seq, "placed".to_string())]);
    let removed = admin.manage(ManageOp::StreamRm, json!({ "name": "orders" })).await.expect("removed here");
    assert_eq!(removed["removed"], "orders");
    shutdown_all(vec![first, second, third]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_subscriber_resumes_on_another_replica_where_the_group_last_heard_it() {
    let mut brokers = group().await;
    let subscriber = client(&brokers[0], "subscriber").await;
    let durable =
        || SubscribeOptions::new("orders.>").ack(AckPolicy::Manual).durable("audit", "orders", StartPosition::First);
    let mut subscription = subscriber.subscribe(durable()).await.expect("subscribed");
    let publisher = client(&brokers[1], "publisher").await;
    let mut seqs = Vec::new();
    for index in 1..=4 {
        seqs.push(publish(&publisher, &format!("m{index}")).await);
    }
    for index in 1..=4 {
        let delivery = next(&mut subscription).await;
        assert_eq!(text(&delivery), format!("m{index}"));
        if index <= 3 {
            delivery.ack().expect("acknowledged");
        }
    }
    // The third broker hears where the durable stands through the group.
    let watcher = client(&brokers[2], "watcher").await;
    // It may not know the durable yet: it applies the group's log in order.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let info = watcher.manage(ManageOp::DurableInfo, json!({ "name": "audit" })).await;
        if info.as_ref().is_ok_and(|info| info["stored_ack_floor"].as_u64() >= Some(seqs[2])) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the position reaches every replica: {info:?}");
        watcher.ping().await.expect("ping");
    }
    drop((subscription, subscriber, watcher));
    brokers.remove(0).shutdown().await;

    publish(&publisher, "m5").await;
    let resumed = client(&brokers[1], "resumed").await;
    let mut subscription = resumed.subscribe(durable()).await.expect("resumed on another replica");
    let first = next(&mut subscription).await;
    assert_eq!(text(&first), "m4", "the unacknowledged message comes again, the acknowledged ones do not");
    assert!(first.redelivered || first.stream_seq == seqs[3], "{first:?}");
    first.ack().expect("acknowledged");
    let second = next(&mut subscription).await;
    assert_eq!(text(&second), "m5", "and what was published since follows");
    second.ack().expect("acknowledged");
    drop((subscription, resumed, publisher));
    shutdown_all(brokers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_moves_off_its_leader_to_a_new_broker_that_then_holds_every_message() {
    let brokers = group().await;
    let spare = linked_broker_with(
        "rd",
        CLUSTER,
        None,
        &[link_addr(&brokers[0]), link_addr(&brokers[1]), link_addr(&brokers[2])],
        RoutingMode::Interest,
        |config| {
            config.storage.raft_heartbeat_ms = 50;
            config.storage.raft_election_ms_min = 300;
            config.storage.raft_election_ms_max = 600;
            config.storage.replicated_append_ms_max = 3_000;
        },
    )
    .await;
    converged(&[&brokers[0], &brokers[1], &brokers[2], &spare], &["ra", "rb", "rc", "rd"]).await;
    let clients = [client(&brokers[0], "pa").await, client(&brokers[1], "pb").await, client(&brokers[2], "pc").await];
    for index in 0..5 {
        publish(&clients[index % 3], &format!("before-{index}")).await;
    }
    let leader = agreed_leader(&[&clients[0], &clients[1], &clients[2]]).await;
    let leader_index = MEMBERS.iter().position(|name| *name == leader).expect("a member leads");
    let asker = &clients[(leader_index + 1) % 3];

    // Changes that would leave no member, or that name a member already
    // there, are refused before anything is done.
    for (change, what) in [
        (json!({ "name": "orders", "remove": ["ra", "rb", "rc"] }), "no member left"),
        (json!({ "name": "orders", "add": ["ra"], "remove": ["rb"] }), "a member added again"),
    ] {
        match asker.manage(ManageOp::StreamMembers, change).await {
            Err(ClientError::Refused { code, message }) => {
                assert_eq!(code, ErrorCode::InvalidField, "{what}: {message}")
            }
            other => panic!("{what} is refused, not {other:?}"),
        }
    }

    // A durable subscription of the stream, kept by every member.
    let durable =
        SubscribeOptions::new("orders.>").ack(AckPolicy::Manual).durable("audit", "orders", StartPosition::First);
    asker.subscribe(durable).await.expect("durable made").unsubscribe().await.expect("unsubscribed");

    let moved = json!({ "name": "orders", "add": ["rd"], "remove": [leader] });
    let reply = asker.manage(ManageOp::StreamMembers, moved).await.expect("moved");
    let mut members: Vec<String> = reply["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|name| name.as_str().map(str::to_string))
        .collect();
    members.sort();
    let mut expected: Vec<String> =
        ["ra", "rb", "rc", "rd"].iter().filter(|name| **name != leader).map(|name| name.to_string()).collect();
    expected.sort();
    assert_eq!(members, expected, "{reply}");
    assert_eq!(reply["removed_kept_files"], json!([]), "{reply}");

    // The old leader dropped its replica; the new broker is a member that
    // takes publishes and serves every message, the old ones first.
    let old = &clients[leader_index];
    match old.manage(ManageOp::StreamInfo, json!({ "name": "orders" })).await {
        Err(ClientError::Refused { code, message }) => assert_eq!(code, ErrorCode::UnknownStream, "{message}"),
        other => panic!("the broker moved off keeps no stream, not {other:?}"),
    }
    let newcomer = client(&spare, "pd").await;
    let after = publish(&newcomer, "after").await;
    let served = replay(&spare, 6).await;
    let texts: Vec<&str> = served.iter().map(|(_, text)| text.as_str()).collect();
    assert_eq!(texts, ["before-0", "before-1", "before-2", "before-3", "before-4", "after"]);
    assert_eq!(served[5].0, after);
    let info = stream_info(&newcomer).await;
    let mut listed: Vec<String> = info["replication"]["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|name| name.as_str().map(str::to_string))
        .collect();
    listed.sort();
    assert_eq!(listed, expected, "{info}");
    // The durable came to the new broker with the log.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while newcomer.manage(ManageOp::DurableInfo, json!({ "name": "audit" })).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "the durable reaches the new member");
        newcomer.ping().await.expect("ping");
    }
    let stayed = &brokers[(leader_index + 1) % 3];
    assert_eq!(replay(stayed, 6).await, served, "the replicas that stayed serve the same log");
    drop((clients, newcomer));
    let mut all = brokers;
    all.push(spare);
    shutdown_all(all).await;
}

/// The third member of the group, `rc`, keeping its files in `data_dir`
/// across restarts.
async fn member_in(data_dir: &std::path::Path, dials: &[std::net::SocketAddr]) -> RunningBroker {
    linked_broker_with(MEMBERS[2], CLUSTER, None, dials, RoutingMode::Interest, |config| {
        config.streams.push(replicated_stream());
        config.storage.raft_heartbeat_ms = 50;
        config.storage.raft_election_ms_min = 300;
        config.storage.raft_election_ms_max = 600;
        config.storage.replicated_append_ms_max = 3_000;
        config.data_dir = data_dir.to_path_buf();
        config.remove_data_dir_on_shutdown = false;
    })
    .await
}

/// `rc`'s node id as the leader's membership holds it, once it is not
/// `other_than`.
async fn node_id_of_rc(client: &Client, other_than: Option<u64>) -> u64 {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let info = stream_info(client).await;
        let found = info["replication"]["replicas"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|replica| replica["broker"] == MEMBERS[2])
            .and_then(|replica| replica["node_id"].as_u64());
        if let Some(id) = found.filter(|id| Some(*id) != other_than) {
            return id;
        }
        assert!(tokio::time::Instant::now() < deadline, "rc's node id changes: {info}");
        client.ping().await.expect("ping");
    }
}

/// Runs the group with `rc` in `data_dir`, publishes five messages, stops
/// `rc`, lets `lose` do its worst to its files, starts it again, and checks
/// that it rejoined as a new member with the whole log; then `after` looks
/// at its files.
async fn rc_loses_its_files_and_rejoins(
    label: &str,
    lose: impl FnOnce(&std::path::Path),
    after: impl FnOnce(&std::path::Path),
) {
    let data = crate::persist::TempDir::new(label);
    let first = member(MEMBERS[0], &[]).await;
    let second = member(MEMBERS[1], &[link_addr(&first)]).await;
    let dials = [link_addr(&first), link_addr(&second)];
    let third = member_in(&data.0, &dials).await;
    converged(&[&first, &second, &third], &MEMBERS).await;
    let publisher = client(&first, "publisher").await;
    for index in 0..5 {
        publish(&publisher, &format!("m{index}")).await;
    }
    let before = replay(&third, 5).await;
    let old_id = node_id_of_rc(&client(&third, "watcher").await, None).await;
    third.shutdown().await;
    lose(&data.0);

    // The two others go on meanwhile.
    publish(&publisher, "m5").await;
    let third = member_in(&data.0, &dials).await;
    let watcher = client(&first, "watcher").await;
    let new_id = node_id_of_rc(&watcher, Some(old_id)).await;
    assert_ne!(new_id, old_id, "a new member, not the node that held the lost files");
    let served = replay(&third, 6).await;
    assert_eq!(served[..5], before[..], "the rejoined replica serves the log as it was");
    assert_eq!(served[5].1, "m5");
    let late = publish(&client(&third, "late").await, "m6").await;
    assert_eq!(replay(&second, 7).await[6], (late, "m6".to_string()));
    drop((publisher, watcher));
    shutdown_all(vec![first, second, third]).await;
    after(&data.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_whose_data_directory_is_wiped_rejoins_as_a_new_member() {
    rc_loses_its_files_and_rejoins(
        "wiped",
        |dir| std::fs::remove_dir_all(dir).expect("wiped"),
        |dir| assert!(dir.join("streams/orders/incarnation").exists(), "a new incarnation is kept"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_with_a_damaged_segment_sets_it_aside_and_gets_the_log_again() {
    let damage = |dir: &std::path::Path| {
        let stream_dir = dir.join("streams").join("orders");
        let segment = std::fs::read_dir(&stream_dir)
            .expect("the stream's files")
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .find(|path| path.extension().is_some_and(|extension| extension == "seg"))
            .expect("a segment");
        let mut bytes = std::fs::read(&segment).expect("read");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&segment, &bytes).expect("damaged");
    };
    let set_aside = |dir: &std::path::Path| {
        let aside = std::fs::read_dir(dir.join("damaged")).map(|entries| entries.count()).unwrap_or(0);
        assert_eq!(aside, 1, "the damaged files are set aside once");
    };
    rc_loses_its_files_and_rejoins("damaged", damage, set_aside).await;
}
