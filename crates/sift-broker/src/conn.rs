//! A connection's shared half: what its own tasks and every other
//! connection's reader reach it by. Deliveries are pushed into its
//! [`Outbox`] from whichever reader matched them; responses are queued
//! with [`ConnShared::send_control`]; [`ConnShared::close`] stops it.
//!
//! This is connection data, below every session and socket: the store,
//! the pipeline and the links hold a `ConnShared` without knowing how the
//! connection is served (a socket or a local session).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::BytesMut;
use sift_proto::{Decoder, ErrorCode, ErrorFrame, Frame};
use tokio::sync::{watch, Notify};

use crate::door::Door;
use crate::outbox::{Outbox, ReportEvent, Settled, StreamPosition};
use crate::stats::{add, bump, Stats};

/// State of a connection shared by its tasks and by other connections'
/// readers that queue deliveries into it.
#[derive(Debug)]
pub struct ConnShared {
    /// Connection id, unique within the broker run.
    pub id: u64,
    /// Client name from `HELLO`.
    pub name: Arc<str>,
    /// The protocol it came in by.
    pub door: Door,
    /// True for a local session: its control frames are queued as values.
    takes_values: bool,
    /// Where the connection comes from: the client's `ip:port` (the
    /// protocol client's, for a front-end's session), or `in-process`.
    pub peer: Arc<str>,
    outbox: Mutex<Outbox>,
    /// Wakes the writer when the outbox gains something to write.
    pub writer_wake: Notify,
    /// Wakes publishers waiting for space in this connection's queues.
    pub space: Notify,
    closing: AtomicBool,
    /// What `ADMIN subscriptions` shows of each open subscription, by id:
    /// its description as JSON, fixed when it opened.
    listed: Mutex<std::collections::BTreeMap<u32, serde_json::Value>>,
    /// Set when responses piled up past the limit and closed the connection.
    overflowed: AtomicBool,
    close_signal: watch::Sender<bool>,
    /// The name the client's TLS certificate proves, set once after the
    /// handshake; the session starts signed in as that user if it exists.
    certified: std::sync::OnceLock<Arc<str>>,
}

impl ConnShared {
    /// Connection state with an empty outbox.
    pub fn new(
        id: u64,
        name: Arc<str>,
        (door, takes_values): (Door, bool),
        peer: Arc<str>,
        (max_pending_bytes, budget): (u64, Arc<crate::budget::MemoryBudget>),
    ) -> Arc<ConnShared> {
        let (close_signal, _) = watch::channel(false);
        Arc::new(ConnShared {
            id,
            name,
            door,
            takes_values,
            peer,
            outbox: Mutex::new(Outbox::with_budget(max_pending_bytes, budget)),
            writer_wake: Notify::new(),
            space: Notify::new(),
            closing: AtomicBool::new(false),
            listed: Mutex::new(std::collections::BTreeMap::new()),
            overflowed: AtomicBool::new(false),
            close_signal,
            certified: std::sync::OnceLock::new(),
        })
    }

    /// Records the name the client's certificate proves (once; later calls
    /// change nothing).
    pub fn set_certified(&self, name: &str) {
        let _ = self.certified.set(Arc::from(name));
    }

    /// The name the client's certificate proves, if it presented one the
    /// door's client CA vouches for.
    pub fn certified(&self) -> Option<&str> {
        self.certified.get().map(|name| &**name)
    }

    /// Locks the outbox. Outbox methods do not panic midway through an
    /// update, so a poisoned lock still guards consistent data.
    pub fn lock(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records an open subscription for `ADMIN subscriptions`.
    pub(crate) fn list_subscription(&self, sub_id: u32, description: serde_json::Value) {
        self.listed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(sub_id, description);
    }

    /// Forgets a closed subscription.
    pub(crate) fn unlist_subscription(&self, sub_id: u32) {
        self.listed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&sub_id);
    }

    /// The open subscriptions' descriptions, each with its queue depth now.
    pub fn listed_subscriptions(&self) -> Vec<serde_json::Value> {
        let listed = self.listed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let outbox = self.lock();
        listed
            .into_iter()
            .map(|(sub_id, mut description)| {
                if let serde_json::Value::Object(fields) = &mut description {
                    fields.insert("queued".into(), outbox.queued(sub_id).into());
                }
                description
            })
            .collect()
    }

    /// True when the connection was closed because its responses piled up
    /// past `max_pending_bytes_per_connection` (it was not reading them).
    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }

    /// True once the connection has started closing.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// A receiver that turns true when the connection starts closing.
    pub fn close_watch(&self) -> watch::Receiver<bool> {
        self.close_signal.subscribe()
    }

    /// Queues a response frame for the writer. A connection whose responses
    /// pile up past `max_pending_bytes` is not reading them; it is closed.
    pub fn send_control(&self, frame: &Frame) {
        if self.takes_values {
            // A local session gets the frame itself: nothing to encode here
            // and decode there.
            let frame_bytes = frame.approximate_bytes() as u64;
            return self.queue_control(|outbox| outbox.push_control_frame(frame.clone(), frame_bytes));
        }
        let mut bytes = BytesMut::new();
        if let Err(error) = frame.encode(&mut bytes) {
            tracing::error!(connection = self.id, %error, "cannot encode {}", frame.name());
            return;
        }
        self.send_encoded(&bytes);
    }

    /// Queues already encoded response frames (whole frames, in order), as
    /// [`ConnShared::send_control`] does.
    pub fn send_encoded(&self, bytes: &[u8]) {
        if self.takes_values {
            for frame in decode_whole_frames(bytes) {
                self.send_control(&frame);
            }
            return;
        }
        self.queue_control(|outbox| outbox.push_control(bytes));
    }

    /// Queues control with `push` (false when control alone passed
    /// `max_pending_bytes`), wakes the writer, and closes a connection
    /// that is not reading its responses.
    fn queue_control(&self, push: impl FnOnce(&mut Outbox) -> bool) {
        let (within_limit, wake) = {
            let mut outbox = self.lock();
            if outbox.is_closed() {
                return;
            }
            (push(&mut outbox), outbox.take_wake())
        };
        if wake {
            self.writer_wake.notify_one();
        }
        if !within_limit {
            self.overflowed.store(true, Ordering::Release);
            self.close(Some(error_frame(
                ErrorCode::PendingBytesExceeded,
                0,
                true,
                "responses queued for this connection exceed max_pending_bytes_per_connection; read them".into(),
            )));
        }
    }

    /// Starts closing: queues `last` (an `ERROR` or `CLOSE`) after what is
    /// already queued, refuses new deliveries and tells every task to stop.
    /// Returns true for the call that started the close, false afterwards.
    pub fn close(&self, last: Option<Frame>) -> bool {
        if self.closing.swap(true, Ordering::AcqRel) {
            return false;
        }
        {
            // One step: the last frame is queued and the outbox closed under
            // the same lock, so nothing can be queued after the last frame.
            let mut outbox = self.lock();
            match last {
                Some(frame) if self.takes_values => {
                    let frame_bytes = frame.approximate_bytes() as u64;
                    outbox.push_control_frame(frame, frame_bytes);
                }
                Some(frame) => {
                    let mut bytes = BytesMut::new();
                    if frame.encode(&mut bytes).is_ok() {
                        outbox.push_control(&bytes);
                    }
                }
                None => {}
            }
            outbox.close();
        }
        self.close_signal.send_replace(true);
        self.writer_wake.notify_one();
        self.space.notify_waiters();
        true
    }
}

/// An `ERROR` frame.
pub fn error_frame(code: ErrorCode, reference: u64, fatal: bool, message: String) -> Frame {
    Frame::Error(ErrorFrame { code, reference, fatal, message })
}

/// Applies what an ack, nack or timeout scan changed: wakes the writer,
/// counts, and settles reports. Called after the outbox lock is released.
pub fn apply_settled(conn: &ConnShared, stats: &Stats, settled: Settled) {
    if settled.wake_writer {
        conn.writer_wake.notify_one();
    }
    add(&stats.redelivered, settled.requeued);
    add(&stats.dropped_rejected, settled.rejected);
    // A tag can be unknown for a good reason (its delivery timed out and was
    // requeued), so unknown tags are counted, not refused.
    add(&stats.unknown_delivery_tags, settled.unknown_tags);
    apply_events(settled.events);
}

/// Applies report events collected under an outbox lock. Stream consumers
/// whose position moved store it once for the whole batch and are woken
/// (their subscriber's window opened).
pub fn apply_events(events: Vec<ReportEvent>) {
    let mut consumers: Vec<Arc<dyn StreamPosition>> = Vec::new();
    for event in events {
        if let ReportEvent::StreamDone(consumer, _) = &event {
            if !consumers.iter().any(|known| Arc::ptr_eq(known, consumer)) {
                consumers.push(consumer.clone());
            }
        }
        event.apply();
    }
    for consumer in consumers {
        consumer.persist_and_wake();
    }
}

/// Sends `conn` a non-fatal `ERROR` about the request `reference`.
pub(crate) fn send_refusal(stats: &Stats, conn: &ConnShared, code: ErrorCode, reference: u64, message: String) {
    bump(&stats.errors_sent);
    tracing::debug!(connection = conn.id, %code, reference, "request refused: {message}");
    conn.send_control(&error_frame(code, reference, false, message));
}

/// The frames of `encoded`, whole frames this broker encoded (control
/// frames meant for a local session, which takes them as values).
pub(crate) fn decode_whole_frames(encoded: &[u8]) -> Vec<Frame> {
    let mut buf = BytesMut::from(encoded);
    let mut decoder = Decoder::new(u32::MAX);
    let mut frames = Vec::new();
    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
        frames.push(frame);
    }
    debug_assert!(buf.is_empty(), "whole frames that this broker encoded");
    frames
}
