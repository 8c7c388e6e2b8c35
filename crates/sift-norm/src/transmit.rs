//! The sending half of a session: records queue by priority
//! ([`TxQueue`]) and are handed to NORM as objects, a few objects ahead of
//! what NORM has sent, so that records arriving while NORM is busy leave
//! together (see [`crate::batch`]). Both the owner (on a send) and the
//! event thread (when NORM reports an object sent or room in its queue)
//! pump the queue, so nothing waits for the owner's next call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::batch::{Batch, TxQueue};
use crate::ffi::{self, ObjectHandle, SessionHandle};

/// Default bound on the records waiting ahead of NORM; a send beyond it waits.
pub const TX_QUEUE_RECORDS_MAX_DEFAULT: usize = 1024;
/// Default size of the object that records waiting together are framed
/// into: about six 1 400-byte segments.
pub const BATCH_BYTES_MAX_DEFAULT: usize = 8 * 1024;
/// Default number of objects handed to NORM and not yet sent by it: enough
/// that NORM never idles while the next object is formed, few enough that
/// records queue here (and batch) rather than in NORM.
pub const OBJECTS_AHEAD_MAX_DEFAULT: u64 = 4;

/// Records and objects a sender has handed on.
#[derive(Debug, Default)]
pub struct TransmitCounters {
    /// Records given to NORM.
    pub records: AtomicU64,
    /// Objects given to NORM.
    pub objects: AtomicU64,
}

/// The queue, and an object NORM refused (sent first once it has room).
struct Waiting {
    queue: TxQueue,
    refused: Option<Batch>,
}

/// The sending state of one session.
pub(crate) struct Transmitter {
    handle: SessionHandle,
    waiting: Mutex<Waiting>,
    /// Buffers libnorm still points at, by transmit object.
    pending: Mutex<HashMap<ObjectHandle, Bytes>>,
    batch_bytes_max: usize,
    objects_ahead_max: u64,
    /// Objects NORM reported sent once (`TX_OBJECT_SENT`).
    objects_sent: AtomicU64,
    /// Woken when the queue shrinks: senders waiting for room, flushes.
    room: Notify,
    flushed: Notify,
    /// Flushes NORM completed (`TX_FLUSH_COMPLETED`) so far.
    flushes: AtomicU64,
    /// `flushes` when the last object was enqueued: a flush that completes
    /// after that one covered it (NORM restarts a flush when data is sent).
    flushes_at_last_object: AtomicU64,
    /// The last object enqueued (its handle; 0 before the first).
    last_object: AtomicUsize,
    pub(crate) counters: TransmitCounters,
}

impl Transmitter {
    pub(crate) fn new(handle: SessionHandle, records_max: usize, batch_bytes_max: usize, ahead: u64) -> Transmitter {
        Transmitter {
            handle,
            waiting: Mutex::new(Waiting { queue: TxQueue::new(records_max), refused: None }),
            pending: Mutex::new(HashMap::new()),
            batch_bytes_max,
            objects_ahead_max: ahead.max(1),
            objects_sent: AtomicU64::new(0),
            room: Notify::new(),
            flushed: Notify::new(),
            flushes: AtomicU64::new(0),
            flushes_at_last_object: AtomicU64::new(0),
            last_object: AtomicUsize::new(0),
            counters: TransmitCounters::default(),
        }
    }

    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `record` and pumps; waits while the queue is full.
    pub(crate) async fn send(&self, priority: u8, info: Bytes, mut record: Bytes) {
        loop {
            let room = self.room.notified();
            match self.try_send(priority, info.clone(), record) {
                Ok(()) => return,
                Err(back) => record = back,
            }
            room.await;
        }
    }

    /// Queues `record` and pumps; gives it back when the queue is full.
    pub(crate) fn try_send(&self, priority: u8, info: Bytes, record: Bytes) -> Result<(), Bytes> {
        self.waiting().queue.push(priority, info, record)?;
        self.pump();
        Ok(())
    }

    /// Hands NORM objects while fewer than the bound are unsent by it.
    pub(crate) fn pump(&self) {
        let mut waiting = self.waiting();
        loop {
            let enqueued = self.counters.objects.load(Ordering::Acquire);
            if enqueued.saturating_sub(self.objects_sent.load(Ordering::Acquire)) >= self.objects_ahead_max {
                break;
            }
            let Some(batch) = waiting.refused.take().or_else(|| waiting.queue.take_batch(self.batch_bytes_max)) else {
                break;
            };
            if !self.enqueue(&batch) {
                waiting.refused = Some(batch);
                break;
            }
        }
        drop(waiting);
        self.room.notify_waiters();
    }

    /// Gives NORM one object; false when its transmit queue is full. Keeps
    /// the buffer until the library purges the object.
    fn enqueue(&self, batch: &Batch) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(object) = ffi::data_enqueue(self.handle, &batch.data, &batch.info) else { return false };
        pending.insert(object, batch.data.clone());
        self.flushes_at_last_object.store(self.flushes.load(Ordering::Acquire), Ordering::Release);
        self.last_object.store(object.0, Ordering::Release);
        self.counters.records.fetch_add(batch.records as u64, Ordering::Relaxed);
        self.counters.objects.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// NORM sent an object once: room for another ahead.
    pub(crate) fn object_sent(&self) {
        self.objects_sent.fetch_add(1, Ordering::AcqRel);
        self.pump();
    }

    /// NORM's transmit queue is empty: everything enqueued was sent (also
    /// heals the count should an object have left without its event).
    pub(crate) fn queue_empty(&self) {
        self.objects_sent.fetch_max(self.counters.objects.load(Ordering::Acquire), Ordering::AcqRel);
        self.pump();
    }

    /// The library is done with a transmit object: free its buffer.
    pub(crate) fn purged(&self, object: ObjectHandle) {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&object);
    }

    /// NORM completed a flush.
    pub(crate) fn flush_completed(&self) {
        self.flushes.fetch_add(1, Ordering::AcqRel);
        self.flushed.notify_waiters();
    }

    /// Waits until every queued record is with NORM, then until NORM
    /// completed a flush after the last object: the sender has sent its
    /// end-of-transmission commands (NORM's robust factor of them) with no
    /// repair left to make, so every receiver had its chance to ask.
    pub(crate) async fn flush(&self) {
        loop {
            let room = self.room.notified();
            let drained = {
                let waiting = self.waiting();
                waiting.queue.is_empty() && waiting.refused.is_none()
            };
            if drained {
                break;
            }
            room.await;
        }
        if self.last_object.load(Ordering::Acquire) == 0 {
            return;
        }
        let covered = self.flushes_at_last_object.load(Ordering::Acquire);
        loop {
            let flushed = self.flushed.notified();
            if self.flushes.load(Ordering::Acquire) > covered {
                return;
            }
            flushed.await;
        }
    }
}
