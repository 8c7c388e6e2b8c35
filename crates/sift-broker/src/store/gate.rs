//! The confirm of a persistent publish, sent once both of its halves are in.
//!
//! A persistent message is queued for its live subscribers by the
//! publisher's reader, which never waits, while the stream's appender
//! thread stores it under the stream's fsync policy. Either may finish
//! first. The publisher may only hear `CONFIRM` once the message is stored
//! (and, for await=delivered, acknowledged), so both halves report here and
//! the later one sends it, carrying the stream and sequence it was stored
//! under. A store that failed turns the confirm into an `ERROR` naming why
//! (`storage_full`, `storage_error`): the publisher keeps the message and
//! may send it again.

use std::sync::{Arc, Mutex};

use sift_proto::{Confirm, ConfirmStatus, ErrorCode, Frame};
use sift_store::StoreError;

use crate::conn::{error_frame, ConnShared};

/// What the store said about one persistent publish.
#[derive(Debug)]
enum StoreOutcome {
    /// Stored in `stream` at `seq`.
    Stored { stream: String, seq: u64 },
    /// Could not be stored.
    Failed { code: ErrorCode, message: String },
}

#[derive(Debug, Default)]
struct GateState {
    /// Appends not yet completed (one per stream that holds the message).
    stores_pending: usize,
    /// The first stream's outcome (or the first failure).
    outcome: Option<StoreOutcome>,
    /// The local path's confirm, when it has decided.
    confirm: Option<Confirm>,
    finished: bool,
}

/// Joins the store's completion and the local path's confirm.
#[derive(Debug)]
pub struct ConfirmGate {
    conn: Arc<ConnShared>,
    request_id: u64,
    state: Mutex<GateState>,
}

impl ConfirmGate {
    /// A gate for the publish `request_id` of `conn`, stored in `stores` streams.
    pub fn new(conn: Arc<ConnShared>, request_id: u64, stores: usize) -> Arc<ConfirmGate> {
        debug_assert!(stores > 0, "a gate without a store would never open");
        let state = GateState { stores_pending: stores, ..GateState::default() };
        Arc::new(ConfirmGate { conn, request_id, state: Mutex::new(state) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The append to `stream` completed.
    pub fn stored(&self, stream: &str, result: Result<u64, StoreError>) {
        let result = result.map_err(|error| {
            let code = if error.is_full() { ErrorCode::StorageFull } else { ErrorCode::StorageError };
            (code, format!("persistent message not stored in stream {stream}: {error}"))
        });
        self.settled(stream, result);
    }

    /// The append to `stream` completed: stored at a sequence, or refused
    /// with a code and why (a replicated stream's group without quorum).
    pub fn settled(&self, stream: &str, result: Result<u64, (ErrorCode, String)>) {
        let mut state = self.lock();
        debug_assert!(state.stores_pending > 0, "more completions than stores");
        state.stores_pending = state.stores_pending.saturating_sub(1);
        let outcome = match result {
            Ok(seq) => StoreOutcome::Stored { stream: stream.to_string(), seq },
            Err((code, message)) => StoreOutcome::Failed { code, message },
        };
        // The first failure wins over any success: the publish is refused.
        match (&state.outcome, &outcome) {
            (None, _) | (Some(StoreOutcome::Stored { .. }), StoreOutcome::Failed { .. }) => {
                state.outcome = Some(outcome)
            }
            _ => {}
        }
        self.finish_if_ready(state);
    }

    /// The local path decided its confirm (matched, or delivered for await=delivered).
    pub fn confirm(&self, confirm: Confirm) {
        let mut state = self.lock();
        state.confirm = Some(confirm);
        self.finish_if_ready(state);
    }

    fn finish_if_ready(&self, mut state: std::sync::MutexGuard<'_, GateState>) {
        if state.finished || state.stores_pending > 0 || state.confirm.is_none() {
            return;
        }
        state.finished = true;
        let outcome = state.outcome.take();
        let confirm = state.confirm.take();
        drop(state);
        let frame = match (outcome, confirm) {
            (Some(StoreOutcome::Stored { stream, seq }), Some(mut confirm)) => {
                // A stored message reached an interested party, the stream,
                // even when no live subscription matched it.
                if confirm.status == ConfirmStatus::NoSubscribers {
                    confirm.status = ConfirmStatus::Accepted;
                }
                confirm.stream = stream;
                confirm.stream_seq = seq;
                Frame::Confirm(confirm)
            }
            (Some(StoreOutcome::Failed { code, message }), _) => error_frame(code, self.request_id, false, message),
            (None, _) | (_, None) => return,
        };
        self.conn.send_control(&frame);
    }
}
