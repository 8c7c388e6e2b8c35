//! The process's NORM instance and the thread that turns its event queue
//! into per-session channels.
//!
//! libnorm delivers the events of every session of an instance through one
//! blocking call, `NormGetNextEvent`. One thread makes that call for ever,
//! copies out what an event carries (a received object's bytes must be
//! copied before the next call frees them) and hands it to its session: a
//! received message to the session's bounded queue, a purged transmit
//! object to the session's table of buffers to free, a queue vacancy to
//! the senders waiting for one.
//!
//! The thread never waits for a session's owner. libnorm queues its events
//! without bound (and keeps each completed object's buffer until its event
//! is taken), so a thread that stopped taking them while a sender floods
//! would let the library's memory grow for as long as the flood lasts.
//! Instead a message that finds its session's queue full (in events or in
//! bytes) is dropped and counted as overflowed; the receiver's order stage
//! then reports the gap it leaves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use norm_sys::NormEventType as Kind;
use tokio::sync::mpsc;

use crate::ffi::{self, InstanceHandle, RawEvent, SessionHandle};
use crate::session::{Event, SessionShared};

/// The instance and its sessions, by handle.
pub(crate) struct Instance {
    pub(crate) handle: InstanceHandle,
    sessions: Mutex<HashMap<SessionHandle, Arc<SessionShared>>>,
}

/// The process's instance, created on first use with its event thread.
static INSTANCE: OnceLock<Result<Arc<Instance>, String>> = OnceLock::new();

impl Instance {
    /// The process's instance.
    pub(crate) fn get() -> Result<Arc<Instance>, crate::NormError> {
        let created = INSTANCE.get_or_init(|| {
            if let Some(why) = ffi::UNAVAILABLE {
                return Err(why.to_string());
            }
            let handle = ffi::create_instance().ok_or("NormCreateInstance failed")?;
            let instance = Arc::new(Instance { handle, sessions: Mutex::new(HashMap::new()) });
            let events = instance.clone();
            std::thread::Builder::new()
                .name("sift-norm-events".into())
                .spawn(move || events.dispatch_events())
                .map_err(|error| format!("cannot start the NORM event thread: {error}"))?;
            Ok(instance)
        });
        created.clone().map_err(crate::NormError::Instance)
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<SessionHandle, Arc<SessionShared>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a session's shared state, before it starts.
    pub(crate) fn register(&self, handle: SessionHandle, shared: Arc<SessionShared>) {
        self.sessions().insert(handle, shared);
    }

    /// Forgets a session, before it is destroyed.
    pub(crate) fn deregister(&self, handle: SessionHandle) {
        self.sessions().remove(&handle);
    }

    /// The event loop: until the instance is stopped.
    fn dispatch_events(&self) {
        while let Some(event) = ffi::next_event(self.handle) {
            let shared = self.sessions().get(&event.session).cloned();
            if let Some(shared) = shared {
                shared.handle_event(event);
            }
        }
        tracing::debug!("NORM event thread ends");
    }
}

impl SessionShared {
    /// Acts on one event of this session (on the event thread).
    fn handle_event(&self, event: RawEvent) {
        let sender = event.sender.unwrap_or(0);
        match event.kind {
            Kind::NORM_RX_OBJECT_COMPLETED => {
                if let Some((data, info)) = event.data {
                    self.deliver_records(sender, &data, &info);
                }
            }
            Kind::NORM_RX_OBJECT_INFO => {
                let repair = match (&event.data, self.repair_filter) {
                    (Some((_, info)), Some(wants_repair)) => wants_repair(info),
                    _ => true,
                };
                if !repair {
                    ffi::stop_repairing(event.object);
                }
            }
            Kind::NORM_TX_OBJECT_PURGED => self.tx.purged(event.object),
            Kind::NORM_TX_OBJECT_SENT => self.tx.object_sent(),
            Kind::NORM_TX_QUEUE_VACANCY => self.tx.pump(),
            Kind::NORM_TX_QUEUE_EMPTY => self.tx.queue_empty(),
            Kind::NORM_TX_FLUSH_COMPLETED => self.tx.flush_completed(),
            Kind::NORM_RX_OBJECT_ABORTED => {
                self.counters.aborted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.deliver(Event::Lost { sender });
            }
            Kind::NORM_REMOTE_SENDER_NEW => self.deliver(Event::SenderNew { sender }),
            Kind::NORM_REMOTE_SENDER_RESET => self.deliver(Event::SenderReset { sender }),
            Kind::NORM_REMOTE_SENDER_INACTIVE => self.deliver(Event::SenderInactive { sender }),
            _ => {}
        }
    }

    /// Splits a completed object into its records and delivers each.
    fn deliver_records(&self, sender: u32, data: &bytes::Bytes, info: &bytes::Bytes) {
        use std::sync::atomic::Ordering::Relaxed;
        match crate::batch::split_frames(data) {
            Ok(records) => {
                self.counters.received.fetch_add(records.len() as u64, Relaxed);
                for record in records {
                    self.deliver(Event::Message { sender, data: record, info: info.clone() });
                }
            }
            Err(error) => {
                self.counters.malformed.fetch_add(1, Relaxed);
                tracing::debug!(sender, %error, "a NORM object that is no sequence of frames");
            }
        }
    }

    /// Hands `event` to the session's owner unless its queue is full (in
    /// events, or for a message in bytes): then it is dropped and counted.
    fn deliver(&self, event: Event) {
        use std::sync::atomic::Ordering::Relaxed;
        let sender: Option<mpsc::Sender<Event>> = self.events.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let Some(sender) = sender else {
            self.counters.undelivered.fetch_add(1, Relaxed);
            return;
        };
        // The bytes are counted before the send, so that the owner's
        // `next_event` never subtracts what was not yet added.
        let bytes = event.queued_bytes();
        let queued = self.queued_bytes.fetch_add(bytes, Relaxed) + bytes;
        let refused = match bytes > 0 && queued > self.queued_bytes_max {
            true => Some(&self.counters.overflowed),
            false => match sender.try_send(event) {
                Ok(()) => None,
                Err(mpsc::error::TrySendError::Full(_)) => Some(&self.counters.overflowed),
                Err(mpsc::error::TrySendError::Closed(_)) => Some(&self.counters.undelivered),
            },
        };
        if let Some(counter) = refused {
            self.queued_bytes.fetch_sub(bytes, Relaxed);
            counter.fetch_add(1, Relaxed);
        }
    }
}

/// Stops the event thread (for a clean process exit in tests). Sessions
/// must all be dropped first.
pub fn shutdown() {
    if let Some(Ok(instance)) = INSTANCE.get() {
        ffi::stop_instance(instance.handle);
    }
}
