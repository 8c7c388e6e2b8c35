//! A replica's incarnation, and a replica that came back without its files
//! taking its place in the group again.
//!
//! A replica's node id is its broker's name and its incarnation
//! ([`sift_raft::replica::node_id_of`]). The founders of a group are
//! incarnation 0. Every other incarnation is random and kept in the
//! replica's directory ([`INCARNATION_FILE`]):
//!
//! - a replica placed by `sift stream move` takes one before it starts;
//! - a replica that starts with no files on a broker that the others say
//!   lost its data directory ([`super::identity`]), or whose log was found
//!   damaged when the broker opened it (the files are set aside, see
//!   `store::registry`), takes one and marks itself as rejoining
//!   ([`REJOIN_FILE`]). Once started, it asks the group's leader, in a
//!   `RAFT` call of kind [`REJOIN_KIND`], to put its node id in place of the
//!   one its name had. The leader adds it as a learner, sends it the whole
//!   log, and changes the voters; until then the old node id is refused by
//!   this broker ([`sift_raft::network`]), so the group goes on with the
//!   others' quorum and never counts the lost files.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use sift_raft::replica::AppendError;

use super::identity::{random_nonzero, read_id, write_id, DataIds, Introduction, INTRODUCE_KIND};
use super::{LinkTransport, Replication};

/// The file in a replica's directory that holds its incarnation (hex).
pub const INCARNATION_FILE: &str = "incarnation";
/// The file in a replica's directory that says it came back without its
/// files and asks the group to take it in again.
pub const REJOIN_FILE: &str = "rejoin";
/// The kind of a `RAFT` call that asks the leader to take the caller's new
/// node id in place of its old one (the body: the new id, `u64`).
pub const REJOIN_KIND: u8 = 22;
/// The leader's answer once the new node id is a voter.
const REJOINED: &[u8] = b"rejoined";
/// Longest wait for the leader's answer to a rejoin: it sends the whole log
/// to the new member first.
const REJOIN_CALL_WAIT: Duration = Duration::from_secs(300);
/// How often a starting replica looks for a path to another member.
const PATH_POLL: Duration = Duration::from_millis(20);

/// How a replica came to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Placed by `sift stream add` or `move` just now: a new group's
    /// founder, or a joiner whose incarnation is chosen already.
    Placed,
    /// Opened with the broker.
    Booted,
}

/// The incarnation in `dir`, if one was chosen.
pub fn read_incarnation(dir: &Path) -> Result<Option<u64>, String> {
    read_id(&dir.join(INCARNATION_FILE)).map_err(|error| error.to_string())
}

/// Chooses a new incarnation for the replica in `dir` and keeps it there,
/// with the rejoin mark when `rejoin` (else the replica is a joiner).
pub fn new_incarnation(dir: &Path, rejoin: bool) -> Result<u64, String> {
    let incarnation = random_nonzero();
    std::fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    write_id(&dir.join(INCARNATION_FILE), incarnation).map_err(|error| error.to_string())?;
    let mark = if rejoin { REJOIN_FILE } else { super::JOINING_FILE };
    sift_store::write_file_atomically(&dir.join(mark), b"waits for the group's log\n")
        .map_err(|error| error.to_string())?;
    Ok(incarnation)
}

impl Replication {
    /// The incarnation this broker's replica starts as: the one kept in
    /// its directory; 0 for a replica with files from before incarnations
    /// or a group's founder; a new one for a replica with no files on a
    /// broker another member says lost its data directory.
    pub(crate) async fn incarnation(
        &self,
        own_name: &str,
        transport: &LinkTransport,
        data_ids: &DataIds,
        arrival: Arrival,
        fresh: bool,
    ) -> Result<u64, String> {
        if let Some(incarnation) = read_incarnation(&self.dir)? {
            return Ok(incarnation);
        }
        if !fresh || arrival == Arrival::Placed || !self.told_files_lost(own_name, transport, data_ids).await {
            return Ok(0);
        }
        tracing::warn!(
            stream = %self.stream,
            "this broker's data directory is not the one the group knew: the replica rejoins as a new member"
        );
        new_incarnation(&self.dir, true)
    }

    /// Introduces this broker to the other members (waiting at most an
    /// election timeout for a path to one); true when one says its data
    /// directory is another than before.
    async fn told_files_lost(&self, own_name: &str, transport: &LinkTransport, data_ids: &DataIds) -> bool {
        let others: Vec<&String> = self.members.iter().filter(|name| *name != own_name).collect();
        let deadline = Instant::now() + self.settings.election_wait;
        while !others.iter().any(|name| transport.reaches(name)) && Instant::now() < deadline {
            tokio::time::sleep(PATH_POLL).await;
        }
        let body = Bytes::copy_from_slice(&data_ids.own().to_be_bytes());
        let mut lost = false;
        for name in others {
            let wait = self.settings.election_wait;
            if let Ok(answer) = transport.call(name, &self.stream, INTRODUCE_KIND, body.clone(), wait).await {
                lost |= Introduction::parse(&answer) == Some(Introduction::Changed);
            }
        }
        lost
    }

    /// Introduces this broker to every other member in the background,
    /// until each has heard it once, so that each knows its data id.
    pub(crate) fn introduce_in_background(self: &Arc<Self>, own_name: &str, transport: LinkTransport, data_id: u64) {
        let (replication, own_name) = (self.clone(), own_name.to_string());
        tokio::spawn(async move {
            let body = Bytes::copy_from_slice(&data_id.to_be_bytes());
            let mut unheard: Vec<String> =
                replication.members.iter().filter(|name| **name != own_name).cloned().collect();
            while !unheard.is_empty() && !replication.stopped.load(Ordering::Acquire) {
                let mut still = Vec::new();
                for name in unheard {
                    let wait = replication.settings.election_wait;
                    if transport.call(&name, &replication.stream, INTRODUCE_KIND, body.clone(), wait).await.is_err() {
                        still.push(name);
                    }
                }
                unheard = still;
                if !unheard.is_empty() {
                    tokio::time::sleep(replication.settings.election_wait).await;
                }
            }
        });
    }

    /// Asks the group, until its leader does it, to make `id` the voter of
    /// `own_name` in place of the node id it had; then drops the mark.
    pub(crate) fn rejoin_in_background(self: &Arc<Self>, own_name: &str, id: u64, transport: LinkTransport) {
        let (replication, own_name) = (self.clone(), own_name.to_string());
        tokio::spawn(async move {
            let body = Bytes::copy_from_slice(&id.to_be_bytes());
            let mut ask: Vec<String> = replication.members.iter().filter(|name| **name != own_name).cloned().collect();
            while !replication.stopped.load(Ordering::Acquire) {
                let mut leaders = Vec::new();
                for name in &ask {
                    match transport.call(name, &replication.stream, REJOIN_KIND, body.clone(), REJOIN_CALL_WAIT).await {
                        Ok(answer) if &answer[..] == REJOINED => {
                            tracing::info!(stream = %replication.stream, "rejoined the group as a new member");
                            let _ = std::fs::remove_file(replication.dir.join(REJOIN_FILE));
                            return;
                        }
                        Ok(answer) => leaders.extend(not_leader_names(&answer)),
                        Err(failure) => tracing::debug!(%failure, "asking to rejoin"),
                    }
                }
                // The leaders named first, then every member again, each
                // asked once a round.
                leaders.extend(replication.members.iter().cloned());
                ask = Vec::new();
                for name in leaders {
                    if name != own_name && !ask.contains(&name) {
                        ask.push(name);
                    }
                }
                tokio::time::sleep(replication.settings.retry_wait(false)).await;
            }
        });
    }
}

/// The leader a `not-leader NAME` answer names.
fn not_leader_names(answer: &[u8]) -> Option<String> {
    std::str::from_utf8(answer).ok()?.strip_prefix("not-leader ").filter(|name| !name.is_empty()).map(str::to_string)
}

/// Serves a call of kind [`REJOIN_KIND`] from the broker `from`: its new
/// node id made the voter of its name, when this broker leads.
pub(crate) async fn serve_rejoin(replication: &Replication, from: &str, mut body: Bytes) -> Result<Bytes, String> {
    if body.len() != 8 {
        return Err(format!("a rejoin call of {} bytes (a node id is 8)", body.len()));
    }
    let id = body.get_u64();
    let replica = replication.replica().ok_or_else(|| format!("the replica of {} is starting", replication.stream))?;
    let status = replica.status();
    if status.leader != Some(status.id) {
        let leader = status.leader.and_then(|leader| status.members.get(&leader).cloned()).unwrap_or_default();
        return Ok(Bytes::from(format!("not-leader {leader}")));
    }
    match replica.replace_voter(from, id).await {
        Ok(()) => Ok(Bytes::from_static(REJOINED)),
        Err(AppendError::NotLeader { .. }) => Ok(Bytes::from_static(b"not-leader ")),
        Err(AppendError::Failed(why)) => Err(why),
    }
}
