//! Three openraft nodes in one process, each on its own segment-log store,
//! joined by an in-process network: appends replicate, the group elects a
//! new leader when its leader goes, and the surviving logs agree entry for
//! entry. Waits are for the group's own events (metrics), each with a
//! deadline that only bounds a failing run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, Config, Raft, RaftLogReader};
use sift_raft::log_store::SegmentLogStore;
use sift_raft::replica::{AppendError, Replica};
use sift_raft::state_machine::AppliedState;
use sift_raft::{Append, TypeConfig};
use sift_store::{FsyncPolicy, LogConfig};

/// The longest a wait for the group may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(20);

/// The running nodes, by id: a node removed from it is unreachable.
#[derive(Clone, Default)]
struct Router {
    nodes: Arc<Mutex<BTreeMap<u64, Raft<TypeConfig>>>>,
}

impl Router {
    fn node(&self, id: u64) -> Option<Raft<TypeConfig>> {
        self.nodes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&id).cloned()
    }
}

/// One node's link to another.
struct Link {
    router: Router,
    target: u64,
}

impl Link {
    /// The target node, or the error openraft expects for one that is down
    /// (its own type, as large as it is).
    #[allow(clippy::result_large_err)]
    fn target<E: std::error::Error>(&self) -> Result<Raft<TypeConfig>, RPCError<u64, BasicNode, E>> {
        self.router.node(self.target).ok_or_else(|| {
            RPCError::Unreachable(Unreachable::new(&std::io::Error::other(format!("node {} is down", self.target))))
        })
    }
}

impl RaftNetworkFactory<TypeConfig> for Router {
    type Network = Link;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Link {
        Link { router: self.clone(), target }
    }
}

impl RaftNetwork<TypeConfig> for Link {
    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let raft = self.target()?;
        raft.append_entries(request).await.map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
    }

    async fn install_snapshot(
        &mut self,
        request: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>> {
        let raft = self.target()?;
        raft.install_snapshot(request)
            .await
            .map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
    }

    async fn vote(
        &mut self,
        request: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let raft = self.target()?;
        raft.vote(request).await.map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
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

/// Each member's store settings: every append synced, as a replicated
/// stream's are.
fn log_config() -> LogConfig {
    LogConfig { fsync: FsyncPolicy::Always, ..LogConfig::default() }
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

/// Writes `body` through whichever node leads, starting from `first_try`
/// and following the group's answer when it names another leader (a
/// leadership can change just after an election). Bounded by attempts.
async fn write_via_leader(router: &Router, first_try: u64, body: &[u8]) -> openraft::LogId<u64> {
    let mut node_id = first_try;
    for _ in 0..20 {
        let node = router.node(node_id).expect("a running node");
        match node.client_write(Append(body.to_vec())).await {
            Ok(written) => return written.log_id,
            Err(error) => {
                let forward = error.forward_to_leader::<BasicNode>().and_then(|forward| forward.leader_id);
                node_id = match forward {
                    Some(leader) => leader,
                    None => leader_other_than(&node, None).await,
                };
            }
        }
    }
    panic!("no leader took the write");
}

/// The Append bodies of a store's log, in order.
async fn bodies(store: &SegmentLogStore) -> Vec<(u64, Vec<u8>)> {
    let mut reader = store.clone().get_log_reader().await;
    let entries = reader.try_get_log_entries(0..).await.expect("reads");
    entries
        .into_iter()
        .filter_map(|entry| match entry.payload {
            openraft::EntryPayload::Normal(Append(body)) => Some((entry.log_id.index, body)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_replicate_elect_a_new_leader_and_agree() {
    let root = TempDir(std::env::temp_dir().join(format!("sift-raft-group-{}", std::process::id())));
    let config = group_config();
    let router = Router::default();
    let mut stores = BTreeMap::new();
    for id in 1..=3u64 {
        let store = SegmentLogStore::open(&root.0.join(id.to_string()), log_config()).expect("opens");
        let raft = Raft::new(id, config.clone(), router.clone(), store.clone(), AppliedState::default())
            .await
            .expect("starts");
        router.nodes.lock().expect("unpoisoned").insert(id, raft);
        stores.insert(id, store);
    }
    let first = router.node(1).expect("node 1");
    first.initialize(BTreeSet::from([1u64, 2, 3])).await.expect("initialised");
    let leader_id = leader_other_than(&first, None).await;
    let written = write_via_leader(&router, leader_id, b"before").await;
    for id in 1..=3u64 {
        let node = router.node(id).expect("a node");
        node.wait(Some(DEADLINE)).applied_index_at_least(Some(written.index), "applied").await.expect("applied");
    }
    // Whoever leads now is the one to lose.
    let leader_id = leader_other_than(&first, None).await;

    // The leader goes; the two others elect one of them and go on.
    let gone = router.nodes.lock().expect("unpoisoned").remove(&leader_id).expect("removed");
    gone.shutdown().await.expect("shut down");
    let survivor = router.node(if leader_id == 1 { 2 } else { 1 }).expect("a survivor");
    let new_leader_id = leader_other_than(&survivor, Some(leader_id)).await;
    let written = write_via_leader(&router, new_leader_id, b"after").await;
    let survivors: Vec<u64> = (1..=3u64).filter(|id| *id != leader_id).collect();
    for id in &survivors {
        let node = router.node(*id).expect("a survivor");
        node.wait(Some(DEADLINE)).applied_index_at_least(Some(written.index), "applied").await.expect("applied");
    }
    let logs = [bodies(&stores[&survivors[0]]).await, bodies(&stores[&survivors[1]]).await];
    assert_eq!(logs[0], logs[1], "the survivors' logs agree");
    let texts: Vec<&[u8]> = logs[0].iter().map(|(_, body)| body.as_slice()).collect();
    assert_eq!(texts, [&b"before"[..], &b"after"[..]], "each committed append once, in order");
    for id in survivors {
        router.node(id).expect("a survivor").shutdown().await.expect("shut down");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_appends_on_the_leader_names_it_elsewhere_and_reports_the_group() {
    let root = TempDir(std::env::temp_dir().join(format!("sift-raft-replica-{}", std::process::id())));
    let config = group_config();
    let router = Router::default();
    let mut replicas = BTreeMap::new();
    for id in 1..=3u64 {
        let replica = Replica::start(id, &root.0.join(id.to_string()), log_config(), config.clone(), router.clone())
            .await
            .expect("starts");
        router.nodes.lock().expect("unpoisoned").insert(id, replica.raft().clone());
        replicas.insert(id, replica);
    }
    replicas[&1].initialize(BTreeSet::from([1u64, 2, 3])).await.expect("initialised");
    let leader = leader_other_than(replicas[&1].raft(), None).await;
    replicas[&leader].initialize(BTreeSet::from([1u64, 2, 3])).await.expect("a group keeps its members");
    let follower = (1..=3u64).find(|id| *id != leader).expect("a follower");
    replicas[&follower]
        .raft()
        .wait(Some(DEADLINE))
        .current_leader(leader, "the follower knows its leader")
        .await
        .expect("within the deadline");
    let refused = replicas[&follower].append(b"to a follower".to_vec()).await.expect_err("not the leader");
    assert_eq!(refused, AppendError::NotLeader { leader: Some(leader) });
    let first = replicas[&leader].append(b"one".to_vec()).await.expect("stored");
    let second = replicas[&leader].append(b"two".to_vec()).await.expect("stored");
    assert_eq!(second, first + 1, "stream sequences follow one another");
    for replica in replicas.values() {
        replica.raft().wait(Some(DEADLINE)).applied_index_at_least(Some(second - 1), "applied").await.expect("applied");
        assert_eq!(replica.committed_seq(), second);
    }
    let status = replicas[&leader].status();
    assert_eq!((status.id, status.leader, status.committed_seq), (leader, Some(leader), second));
    assert!(status.term >= 1);
    assert_eq!(status.replicated_seq.keys().copied().collect::<Vec<u64>>(), [1, 2, 3]);
    for replica in replicas.values() {
        replica.shutdown().await.expect("shut down");
    }
}
