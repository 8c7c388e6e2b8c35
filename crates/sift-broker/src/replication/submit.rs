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
//! replicated stream keep group commit.
//!
//! Where a batch goes:
//!
//! - this replica leads: the messages whose key the group holds already
//!   (or that a batch under way holds) are answered with that sequence (a
//!   publish sent again), the others handed to the group as one entry,
//!   after the entries handed before it. Up to [`BATCHES_IN_FLIGHT_MAX`]
//!   batches are under way at once: while one replicates, the next is
//!   stored, and the one after gathers. A completer task answers them in
//!   order; a batch whose leader lost its place comes back to the
//!   submitter before anything newer;
//! - another replica leads: the batch is forwarded there in one call
//!   (`forward`), one call at a time so that the leader queues batches in
//!   their order, and each message gets the sequence the leader answers;
//! - no leader is known: the submitter waits for one.
//!
//! A batch goes on through elections and leader changes until a quorum has
//! it or `storage.replicated_append_ms_max` has passed; then each of its
//! publishers is refused with `no_quorum`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sift_proto::ErrorCode;
use sift_raft::replica::AppendError;
use sift_raft::{Append, StreamEntry};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

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
/// Most batches a leader has handed to the group and not yet answered.
/// openraft 0.9 sends each follower one append at a time, carrying every
/// entry stored since the last: what waits here is not yet in that next
/// append. 16 measured 10 % more than 4 at one publisher, window 256
/// (docs/BENCHMARKS.md, replicated streams).
pub const BATCHES_IN_FLIGHT_MAX: usize = 16;

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

/// The answer a batch handed to the group will get.
type Answer = Pin<Box<dyn Future<Output = Result<u64, AppendError>> + Send>>;

/// A batch handed to the group, waiting for its answer.
struct Written {
    batch: Vec<Submission>,
    deadline: Instant,
    answer: Answer,
    _permit: OwnedSemaphorePermit,
}

/// The keys of batches handed to the group and not yet decided.
#[derive(Default)]
struct KeysUnderWay {
    /// Each key of a batch under way, with the publishes of it sent again
    /// meanwhile: answered with the sequence that batch gets.
    waiting: HashMap<u64, Vec<Done>>,
    /// Keys of batches whose wait ran out (answered `no_quorum`) while the
    /// group still held them: such an entry may yet be committed (a leader
    /// cut off, then heard again), so a publish of the key sent again is
    /// refused until the group decides, not stored a second time.
    undecided: std::collections::HashSet<u64>,
}

/// What the submitter and the completer know of the keys under way.
type InFlightKeys = Arc<Mutex<KeysUnderWay>>;

/// What the submitter and its completer share.
struct Pipeline {
    in_flight: Arc<Semaphore>,
    keys: InFlightKeys,
    written: mpsc::UnboundedSender<Written>,
    retry: mpsc::UnboundedReceiver<Vec<Submission>>,
}

impl Replication {
    /// Queues a message for the group, after every message queued before
    /// it. Before the replica runs it is refused at once.
    pub(crate) fn submit(&self, append: Append, done: Done) {
        let Some(started) = self.started.get() else {
            return done.send(&self.stream, Err(self.starting()));
        };
        self.queued.fetch_add(1, Ordering::AcqRel);
        if let Err(mpsc::error::SendError(submission)) = started.queue.send(Submission { append, done }) {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            submission.done.send(&self.stream, Err(self.starting()));
        }
    }

    /// Takes batches off the queue (a batch that came back first) and
    /// stores each on the group, in order.
    pub(crate) async fn run_submitter(self: Arc<Self>, mut queue: mpsc::UnboundedReceiver<Submission>) {
        let (written, to_complete) = mpsc::unbounded_channel();
        let (retry, retried) = mpsc::unbounded_channel();
        let keys = InFlightKeys::default();
        tokio::spawn(self.clone().run_completer(to_complete, retry, keys.clone()));
        let mut pipeline =
            Pipeline { in_flight: Arc::new(Semaphore::new(BATCHES_IN_FLIGHT_MAX)), keys, written, retry: retried };
        loop {
            let (batch, permit) = tokio::select! {
                biased;
                Some(batch) = pipeline.retry.recv() => {
                    let Ok(permit) = pipeline.in_flight.clone().acquire_owned().await else { return };
                    (batch, permit)
                }
                first = queue.recv() => {
                    let Some(first) = first else { return };
                    // The permit first: what queues while the group is busy
                    // joins this batch.
                    let Ok(permit) = pipeline.in_flight.clone().acquire_owned().await else { return };
                    (self.gather(first, &mut queue), permit)
                }
            };
            self.deliver(batch, permit, &pipeline).await;
        }
    }

    /// `first` and what is queued behind it, within the batch bounds.
    fn gather(&self, first: Submission, queue: &mut mpsc::UnboundedReceiver<Submission>) -> Vec<Submission> {
        let mut bytes = first.append.body.len();
        let mut batch = vec![first];
        while batch.len() < BATCH_MESSAGES_MAX && bytes < BATCH_BYTES_MAX {
            let Ok(next) = queue.try_recv() else { break };
            bytes += next.append.body.len();
            batch.push(next);
        }
        self.queued.fetch_sub(batch.len(), Ordering::AcqRel);
        batch
    }

    /// Hands `batch` to the group (here, or forwarded to the leader),
    /// through leader changes, until it is under way, stored, or the wait
    /// runs out.
    async fn deliver(&self, mut batch: Vec<Submission>, permit: OwnedSemaphorePermit, pipeline: &Pipeline) {
        let Some(started) = self.started.get() else { return };
        let deadline = Instant::now() + self.settings.append_wait;
        let mut problem = "no leader is known".to_string();
        let mut permit = Some(permit);
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return self.answer_all(batch, Err(self.no_quorum(started, &problem)));
            }
            let leader = started.replica.leader();
            if leader == Some(started.replica.id()) {
                let Some(held) = permit.take() else { return };
                match self.write_here(started, batch, (deadline, remaining), held, pipeline).await {
                    Ok(()) => return,
                    Err((rest, held, why)) => (batch, permit, problem) = (rest, Some(held), why),
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
            let wait = remaining.min(self.settings.retry_wait(leader.is_some()));
            self.await_leader_other_than(started, leader.filter(|id| *id != started.replica.id()), wait).await;
        }
    }

    /// Hands `batch` to the group as one entry on the replica here, which
    /// leads; the completer answers it. Gives the batch back (and why)
    /// when this replica no longer leads.
    async fn write_here(
        &self,
        started: &Started,
        batch: Vec<Submission>,
        (deadline, remaining): (Instant, Duration),
        permit: OwnedSemaphorePermit,
        pipeline: &Pipeline,
    ) -> Result<(), (Vec<Submission>, OwnedSemaphorePermit, String)> {
        let caught_up = tokio::time::timeout(remaining, started.replica.caught_up_as_leader()).await;
        if !matches!(caught_up, Ok(Ok(()))) {
            return Err((batch, permit, "the new leader is catching up".into()));
        }
        let batch = self.set_aside_duplicates(started, batch, &pipeline.keys);
        if batch.is_empty() {
            return Ok(());
        }
        let appends = batch.iter().map(|submission| submission.append.clone()).collect();
        match started.replica.write_in_order(StreamEntry::Messages(appends)).await {
            Ok(answer) => {
                let written = Written { batch, deadline, answer: Box::pin(answer), _permit: permit };
                let _ = pipeline.written.send(written);
                Ok(())
            }
            Err(error) => {
                let why = error.to_string();
                self.release_keys(&batch, &pipeline.keys, |_| Err((ErrorCode::NoQuorum, why.clone())));
                Err((batch, permit, why))
            }
        }
    }

    /// Answers, or sets aside for a batch under way, each message whose key
    /// the group holds or is storing; the messages left, one per key.
    fn set_aside_duplicates(&self, started: &Started, batch: Vec<Submission>, keys: &InFlightKeys) -> Vec<Submission> {
        let mut keys = locked_keys(keys);
        let mut fresh = Vec::with_capacity(batch.len());
        for submission in batch {
            let key = submission.append.key;
            if let Some(seq) = started.replica.seq_of_key(key) {
                submission.done.send(&self.stream, Ok(seq));
            } else if keys.undecided.contains(&key) {
                let why = "an earlier copy of the message is in the group's log, not yet committed nor dropped";
                submission.done.send(&self.stream, Err(self.no_quorum(started, why)));
            } else if let Some(waiting) = keys.waiting.get_mut(&key) {
                waiting.push(submission.done);
            } else {
                keys.waiting.insert(key, Vec::new());
                fresh.push(submission);
            }
        }
        fresh
    }

    /// Forgets the keys of `batch` as under way, answering whatever waited
    /// on them with `answer` of the key's place in the batch.
    fn release_keys(
        &self,
        batch: &[Submission],
        keys: &InFlightKeys,
        answer: impl Fn(usize) -> Result<u64, AppendRefusal>,
    ) {
        let mut keys = locked_keys(keys);
        for (place, submission) in batch.iter().enumerate() {
            for waiting in keys.waiting.remove(&submission.append.key).into_iter().flatten() {
                waiting.send(&self.stream, answer(place));
            }
        }
    }

    /// Answers the batches handed to the group, in order; one whose leader
    /// lost its place goes back to the submitter.
    async fn run_completer(
        self: Arc<Self>,
        mut written: mpsc::UnboundedReceiver<Written>,
        retry: mpsc::UnboundedSender<Vec<Submission>>,
        keys: InFlightKeys,
    ) {
        let Some(started) = self.started.get() else { return };
        while let Some(Written { batch, deadline, mut answer, _permit }) = written.recv().await {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(remaining, answer.as_mut()).await {
                Ok(Ok(first_seq)) => {
                    add(&started.transport.stats().replicated_appends, batch.len() as u64);
                    bump(&started.transport.stats().replicated_batches);
                    self.release_keys(&batch, &keys, |place| Ok(first_seq + place as u64));
                    let seqs = (0..batch.len() as u64).map(|offset| first_seq + offset).collect();
                    self.answer_each(batch, seqs);
                }
                Ok(Err(AppendError::NotLeader { .. })) => {
                    let why = "the leader changed while the message was stored; retry";
                    self.release_keys(&batch, &keys, |_| Err((ErrorCode::NoQuorum, why.into())));
                    let _ = retry.send(batch);
                }
                Ok(Err(AppendError::Failed(why))) => {
                    let refusal = (ErrorCode::StorageError, self.failure(&why));
                    self.release_keys(&batch, &keys, |_| Err(refusal.clone()));
                    self.answer_all(batch, Err(refusal));
                }
                Err(_) => {
                    let refusal = self.no_quorum(started, "no quorum of its replicas stored it in time");
                    // Undecided first, so that no publish sent again finds
                    // the keys free in between.
                    self.await_decision(&batch, answer, &keys);
                    self.release_keys(&batch, &keys, |_| Err(refusal.clone()));
                    self.answer_all(batch, Err(refusal));
                }
            }
        }
    }

    /// Marks the keys of `batch`, refused for want of a quorum while the
    /// group still holds its entry, as undecided until `answer` comes
    /// (committed: the keys are then the group's; dropped by a new leader:
    /// they may be stored again).
    fn await_decision(&self, batch: &[Submission], answer: Answer, keys: &InFlightKeys) {
        let batch_keys: Vec<u64> = batch.iter().map(|submission| submission.append.key).collect();
        locked_keys(keys).undecided.extend(batch_keys.iter().copied());
        let keys = keys.clone();
        tokio::spawn(async move {
            let _ = answer.await;
            let mut keys = locked_keys(&keys);
            for key in batch_keys {
                keys.undecided.remove(&key);
            }
        });
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

fn locked_keys(keys: &InFlightKeys) -> std::sync::MutexGuard<'_, KeysUnderWay> {
    keys.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
