//! Publishes to a replicated stream, in order and in batches.
//!
//! Every message this broker stores on a replicated stream (published
//! here, or forwarded here by a member that does not lead) goes through
//! one queue per stream, in the order the publish path put it there, to
//! one submitter task. The submitter takes the first message and every
//! one queued behind it (up to [`BATCH_MESSAGES_MAX`] and
//! [`BATCH_BYTES_MAX`]), and stores them on the group as one Raft entry:
//! one append and one fsync on each replica for the whole batch, however
//! many messages. openraft 0.9 stores a leader's entries one after the
//! other, each waiting for its fsync; a batch per entry is what lets a
//! replicated stream keep group commit. While a batch is under way the
//! next one gathers, so the busier the stream the larger its batches.
//!
//! Where the batch goes:
//!
//! - this replica leads: the messages whose key the group holds already
//!   are answered with their sequence (a publish sent again), the others
//!   written as one entry, each answered with its own sequence;
//! - another replica leads: the batch is forwarded there in one call
//!   (`forward`), and each message gets the sequence the leader answers;
//! - no leader is known: the submitter waits for one.
//!
//! A batch goes on through elections and leader changes until a quorum has
//! it or `storage.replicated_append_ms_max` has passed; then each of its
//! publishers is refused with `no_quorum`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use sift_proto::ErrorCode;
use sift_raft::replica::AppendError;
use sift_raft::{Append, StreamEntry};
use tokio::sync::{mpsc, oneshot};

use super::forward::{AppendRefusal, Forwarded};
use super::{Replication, Started};
use crate::stats::{add, bump};
use crate::store::gate::ConfirmGate;

/// Most messages in one batch (one Raft entry).
pub const BATCH_MESSAGES_MAX: usize = 4_096;
/// Most message bytes in one batch: well under a link frame
/// (`limits.max_frame_bytes`, 8 MiB by default), which carries it to the
/// followers with the entries around it.
pub const BATCH_BYTES_MAX: usize = 1024 * 1024;

/// Who hears how a message fared.
pub(crate) enum Done {
    /// A persistent publish's confirm gate.
    Gate(Arc<ConfirmGate>),
    /// A publish forwarded here by another member, which waits.
    Answer(oneshot::Sender<Result<u64, AppendRefusal>>),
    /// Nobody (a publish that is not persistent).
    Nothing,
}

impl Done {
    fn send(self, stream: &str, result: Result<u64, AppendRefusal>) {
        match self {
            Done::Gate(gate) => gate.settled(stream, result),
            Done::Answer(answer) => {
                let _ = answer.send(result);
            }
            Done::Nothing => {}
        }
    }
}

/// One message on its way to the group.
pub(crate) struct Submission {
    pub(crate) append: Append,
    pub(crate) done: Done,
}

/// The submitter's end of a stream's queue.
pub(crate) type Queue = mpsc::UnboundedSender<Submission>;

impl Replication {
    /// Queues a message for the group, after every message queued before
    /// it. Before the replica runs it is refused at once.
    pub(crate) fn submit(&self, append: Append, done: Done) {
        let Some(started) = self.started.get() else {
            return done.send(&self.stream, Err(self.starting()));
        };
        self.queued.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        if let Err(mpsc::error::SendError(submission)) = started.queue.send(Submission { append, done }) {
            self.queued.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            submission.done.send(&self.stream, Err(self.starting()));
        }
    }

    /// Takes batches off the queue and stores each on the group, in order.
    pub(crate) async fn run_submitter(self: Arc<Self>, mut queue: mpsc::UnboundedReceiver<Submission>) {
        while let Some(first) = queue.recv().await {
            let mut bytes = first.append.body.len();
            let mut batch = vec![first];
            while batch.len() < BATCH_MESSAGES_MAX && bytes < BATCH_BYTES_MAX {
                let Ok(next) = queue.try_recv() else { break };
                bytes += next.append.body.len();
                batch.push(next);
            }
            self.queued.fetch_sub(batch.len(), std::sync::atomic::Ordering::AcqRel);
            self.deliver(batch).await;
        }
    }

    /// Stores `batch` on the group, through leader changes, until a quorum
    /// has it or the wait runs out; answers each message.
    async fn deliver(&self, mut batch: Vec<Submission>) {
        let Some(started) = self.started.get() else { return };
        let deadline = Instant::now() + self.settings.append_wait;
        let mut problem = "no leader is known".to_string();
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return self.answer_all(batch, Err(self.no_quorum(started, &problem)));
            }
            let leader = started.replica.leader();
            if leader == Some(started.replica.id()) {
                match self.write_here(started, batch, remaining).await {
                    Ok(()) => return,
                    Err((rest, why)) => (batch, problem) = (rest, why),
                }
            } else if let Some(leader) = leader {
                let appends: Vec<Append> = batch.iter().map(|submission| submission.append.clone()).collect();
                match self.forward(started, leader, appends, remaining).await {
                    Forwarded::Stored(seqs) => return self.answer_each(batch, seqs),
                    Forwarded::Failed(why) => {
                        return self.answer_all(batch, Err((ErrorCode::StorageError, self.failure(&why))))
                    }
                    Forwarded::Retry(why) => problem = why,
                }
            }
            let wait = remaining.min(self.settings.election_wait);
            self.await_leader_other_than(started, leader.filter(|id| *id != started.replica.id()), wait).await;
        }
    }

    /// Writes `batch` as one entry on the replica here, which leads; gives
    /// the batch back (and why) when it no longer does.
    async fn write_here(
        &self,
        started: &Started,
        batch: Vec<Submission>,
        remaining: std::time::Duration,
    ) -> Result<(), (Vec<Submission>, String)> {
        let caught_up = tokio::time::timeout(remaining, started.replica.caught_up_as_leader()).await;
        if !matches!(caught_up, Ok(Ok(()))) {
            return Err((batch, "the new leader is catching up".into()));
        }
        // A message whose key the group holds was stored before: its
        // sequence. Messages of one key in the batch are written once.
        let mut appends = Vec::with_capacity(batch.len());
        let mut places: Vec<Result<u64, usize>> = Vec::with_capacity(batch.len());
        let mut first_of_key: HashMap<u64, usize> = HashMap::new();
        for submission in &batch {
            let key = submission.append.key;
            if let Some(seq) = started.replica.seq_of_key(key) {
                places.push(Ok(seq));
            } else if let Some(place) = first_of_key.get(&key).filter(|_| key != 0) {
                places.push(Err(*place));
            } else {
                first_of_key.insert(key, appends.len());
                places.push(Err(appends.len()));
                appends.push(submission.append.clone());
            }
        }
        if appends.is_empty() {
            let seqs = places.into_iter().map(|place| place.unwrap_or_default()).collect();
            self.answer_each(batch, seqs);
            return Ok(());
        }
        let written = appends.len();
        let outcome = tokio::time::timeout(remaining, started.replica.write(StreamEntry::Messages(appends))).await;
        match outcome {
            Ok(Ok(first_seq)) => {
                add(&started.transport.stats().replicated_appends, written as u64);
                bump(&started.transport.stats().replicated_batches);
                let seqs =
                    places.into_iter().map(|place| place.unwrap_or_else(|offset| first_seq + offset as u64)).collect();
                self.answer_each(batch, seqs);
                Ok(())
            }
            Ok(Err(AppendError::NotLeader { .. })) => Err((batch, "the leader changed".into())),
            Ok(Err(AppendError::Failed(why))) => {
                self.answer_all(batch, Err((ErrorCode::StorageError, self.failure(&why))));
                Ok(())
            }
            Err(_) => {
                let refusal = self.no_quorum(started, "no quorum of its replicas stored it in time");
                self.answer_all(batch, Err(refusal));
                Ok(())
            }
        }
    }

    fn answer_each(&self, batch: Vec<Submission>, seqs: Vec<u64>) {
        debug_assert_eq!(batch.len(), seqs.len(), "a sequence per message");
        for (submission, seq) in batch.into_iter().zip(seqs) {
            submission.done.send(&self.stream, Ok(seq));
        }
    }

    fn answer_all(&self, batch: Vec<Submission>, result: Result<u64, AppendRefusal>) {
        for submission in batch {
            submission.done.send(&self.stream, result.clone());
        }
    }

    fn starting(&self) -> AppendRefusal {
        (ErrorCode::NoQuorum, format!("stream {}: this broker's replica is starting; retry", self.stream))
    }
}
