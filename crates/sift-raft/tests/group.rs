//! Three replicas in one process, each on its own segment-log store,
//! joined by an in-process [`Transport`] that encodes every call as the
//! broker links carry it: appends replicate, the group elects a new leader
//! when its leader goes, and the surviving logs agree entry for entry.
//! Waits are for the group's own events (metrics), each with a deadline
//! that only bounds a failing run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use openraft::storage::RaftLogStorage;
use openraft::{Config, Raft, RaftLogReader};
use sift_raft::log_store::SegmentLogStore;
use sift_raft::network::{CallError, CallKind, GroupNetwork, Transport};
use sift_raft::replica::{node_id, AppendError, Replica};
use sift_raft::state_machine::AppliedState;
use sift_raft::{Append, StreamEntry, TypeConfig};
use sift_store::{FsyncPolicy, LogConfig};

/// The longest a wait for the group may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(20);
/// Message keys each member remembers.
const KEYS_MAX: usize = 1_000;
/// The brokers of these groups.
const NAMES: [&str; 3] = ["north", "east", "west"];

/// The running replicas, by broker name: one removed is unreachable.
#[derive(Clone, Default)]
struct Router {
    replicas: Arc<Mutex<BTreeMap<String, Replica>>>,
}

impl Router {
    fn replica(&self, name: &str) -> Option<Replica> {
        self.replicas.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(name).cloned()
    }

    fn by_id(&self, id: u64) -> Replica {
        NAMES.iter().find(|name| node_id(name) == id).and_then(|name| self.replica(name)).expect("a running replica")
    }
}

impl Transport for Router {
    async fn call(
        &self,
        to: &str,
        _stream: &str,
        kind: CallKind,
        request: Bytes,
        _timeout: Duration,
    ) -> Result<Bytes, CallError> {
        let replica = self.replica(to).ok_or_else(|| CallError::Unreachable(to.to_string()))?;
        Ok(replica.serve(kind, request).await.expect("a well-formed call"))
    }
}

/// A directory removed when the test is done.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The Raft settings of these groups: elections well above a heartbeat
/// and an fsync on a loaded machine.
fn group_config() -> Arc<Config> {
    let config =
        Config { heartbeat_interval: 100, election_timeout_min: 400, election_timeout_max: 800, ..Config::default() };
    Arc::new(config.validate().expect("a valid config"))
}

/// Starts the three replicas under `root`; their stores, by name.
async fn start_group(root: &TempDir, router: &Router) -> BTreeMap<String, SegmentLogStore> {
    let mut stores = BTreeMap::new();
    for name in NAMES {
        let log_config = LogConfig { fsync: FsyncPolicy::Always, ..LogConfig::default() };
        let store = SegmentLogStore::open(&root.0.join(name), log_config).expect("opens");
        let network = GroupNetwork::new(router.clone(), "orders");
        let state = AppliedState::with_hook(Arc::new(|_, _| {}), KEYS_MAX);
        let replica =
            Replica::start(node_id(name), store.clone(), state, group_config(), network).await.expect("starts");
        router.replicas.lock().expect("unpoisoned").insert(name.to_string(), replica);
        stores.insert(name.to_string(), store);
    }
    let members: Vec<String> = NAMES.iter().map(|name| name.to_string()).collect();
    router.replica(NAMES[0]).expect("a replica").initialize(&members).await.expect("initialised");
    stores
}

/// Waits until `raft` knows a leader other than `not`; that leader.
async fn leader_other_than(raft: &Raft<TypeConfig>, not: Option<u64>) -> u64 {
    let metrics = raft
        .wait(Some(DEADLINE))
        .metrics(|metrics| metrics.current_leader.is_some() && metrics.current_leader != not, "a new leader")
        .await
        .expect("a leader within the deadline");
    metrics.current_leader.expect("a leader")
}

/// Appends `body` through whichever replica leads, starting from
/// `first_try` and following the group's answer when it names another
/// leader (a leadership can change just after an election). Bounded.
async fn append_via_leader(router: &Router, first_try: u64, body: &'static [u8]) -> u64 {
    let mut id = first_try;
    for _ in 0..20 {
        let replica = router.by_id(id);
        match replica.append(message(sift_raft::fnv1a(&[body]), body)).await {
            Ok(seq) => return seq,
            Err(AppendError::NotLeader { leader: Some(leader) }) => id = leader,
            Err(_) => id = leader_other_than(replica.raft(), None).await,
        }
    }
    panic!("no leader took the append");
}

/// A message keyed `key`.
fn message(key: u64, body: &'static [u8]) -> Append {
    Append { timestamp_ns: 1, key, body: Bytes::from_static(body) }
}

/// The appended bodies of a store's log, with their indexes, in order.
async fn bodies(store: &SegmentLogStore) -> Vec<(u64, Bytes)> {
    let mut reader = store.clone().get_log_reader().await;
    let entries = reader.try_get_log_entries(0..).await.expect("reads");
    entries
        .into_iter()
        .flat_map(|entry| match entry.payload {
            openraft::EntryPayload::Normal(StreamEntry::Messages(messages)) => {
                messages.into_iter().map(|Append { body, .. }| (entry.log_id.index, body)).collect()
            }
            _ => Vec::new(),
        })
        .collect()
}

/// Waits until `replica` has committed (applied) the stream sequence `seq`.
async fn committed(replica: &Replica, seq: u64) {
    let applied = replica.clone();
    replica
        .raft()
        .wait(Some(DEADLINE))
        .metrics(move |_| applied.committed_seq() >= seq, "committed")
        .await
        .expect("committed within the deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_replicate_elect_a_new_leader_and_agree() {
    let root = TempDir(std::env::temp_dir().join(format!("sift-raft-group-{}", std::process::id())));
    let router = Router::default();
    let stores = start_group(&root, &router).await;
    let first = router.replica(NAMES[0]).expect("a replica");
    let leader_id = leader_other_than(first.raft(), None).await;
    let seq = append_via_leader(&router, leader_id, b"before").await;
    for name in NAMES {
        committed(&router.replica(name).expect("a replica"), seq).await;
    }
    // Whoever leads now is the one to lose.
    let leader_id = leader_other_than(first.raft(), None).await;
    let leader_name = NAMES.iter().find(|name| node_id(name) == leader_id).expect("a member").to_string();

    // The leader goes; the two others elect one of them and go on.
    let gone = router.replicas.lock().expect("unpoisoned").remove(&leader_name).expect("removed");
    gone.shutdown().await.expect("shut down");
    let survivors: Vec<&str> = NAMES.iter().copied().filter(|name| *name != leader_name).collect();
    let survivor = router.replica(survivors[0]).expect("a survivor");
    let new_leader_id = leader_other_than(survivor.raft(), Some(leader_id)).await;
    let seq = append_via_leader(&router, new_leader_id, b"after").await;
    for name in &survivors {
        committed(&router.replica(name).expect("a survivor"), seq).await;
    }
    let logs = [bodies(&stores[survivors[0]]).await, bodies(&stores[survivors[1]]).await];
    assert_eq!(logs[0], logs[1], "the survivors' logs agree");
    let texts: Vec<&[u8]> = logs[0].iter().map(|(_, body)| body.as_ref()).collect();
    assert_eq!(texts, [&b"before"[..], &b"after"[..]], "each committed append once, in order");
    for name in survivors {
        router.replica(name).expect("a survivor").shutdown().await.expect("shut down");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_appends_on_the_leader_names_it_elsewhere_and_reports_the_group() {
    let root = TempDir(std::env::temp_dir().join(format!("sift-raft-replica-{}", std::process::id())));
    let router = Router::default();
    let _stores = start_group(&root, &router).await;
    let leader = leader_other_than(router.replica(NAMES[0]).expect("a replica").raft(), None).await;
    let members: Vec<String> = NAMES.iter().map(|name| name.to_string()).collect();
    router.by_id(leader).initialize(&members).await.expect("a group keeps its members");
    let follower = NAMES.iter().map(|name| node_id(name)).find(|id| *id != leader).expect("a follower");
    let follower = router.by_id(follower);
    follower
        .raft()
        .wait(Some(DEADLINE))
        .current_leader(leader, "the follower knows its leader")
        .await
        .expect("within the deadline");
    let refused = follower.append(message(1, b"to a follower")).await.expect_err("not the leader");
    assert_eq!(refused, AppendError::NotLeader { leader: Some(leader) });
    let first = router.by_id(leader).append(message(2, b"one")).await.expect("stored");
    let second = router.by_id(leader).append(message(3, b"two")).await.expect("stored");
    assert_eq!(second, first + 1, "stream sequences follow one another");
    // Sent again, one after the other and both at once: stored once.
    let again = router.by_id(leader).append(message(2, b"one")).await.expect("answered");
    assert_eq!(again, first, "a key stored already gets its sequence");
    // A batch is one entry of a record per message.
    let batch = vec![message(4, b"three"), message(5, b"four")];
    let third = router.by_id(leader).write(StreamEntry::Messages(batch)).await.expect("stored");
    assert_eq!(third, second + 1, "a batch's first message follows");
    let state = router.by_id(leader).append_state(Bytes::from_static(b"state")).await.expect("stored");
    assert_eq!(state, third + 2, "the batch took two sequences");
    for name in NAMES {
        let replica = router.replica(name).expect("a replica");
        committed(&replica, state).await;
        assert_eq!(replica.committed_seq(), state);
    }
    let status = router.by_id(leader).status();
    assert_eq!((status.id, status.leader, status.committed_seq), (leader, Some(leader), state));
    assert!(status.term >= 1);
    let mut ids: Vec<u64> = NAMES.iter().map(|name| node_id(name)).collect();
    ids.sort();
    assert_eq!(status.replicated_index.keys().copied().collect::<Vec<u64>>(), ids);
    assert_eq!(status.members.values().cloned().collect::<std::collections::BTreeSet<_>>().len(), 3);
    // A call for another node id (an earlier incarnation of a replica) is
    // refused, never served as that node.
    let vote =
        serde_json::to_vec(&openraft::raft::VoteRequest::new(openraft::Vote::new(99, leader), None)).expect("encodes");
    let mut misaddressed = sift_raft::replica::node_id_of(NAMES[1], 7).to_be_bytes().to_vec();
    misaddressed.extend_from_slice(&vote);
    let refused = follower.serve(CallKind::Vote, Bytes::from(misaddressed)).await.expect_err("another node's call");
    assert!(matches!(refused, sift_raft::network::WireError::WrongNode { .. }), "{refused}");
    assert_eq!(follower.status().term, status.term, "the refused vote changed nothing");
    for name in NAMES {
        router.replica(name).expect("a replica").shutdown().await.expect("shut down");
    }
}
