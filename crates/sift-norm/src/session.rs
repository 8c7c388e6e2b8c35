//! One NORM session: a multicast group and port, sending, receiving or
//! both, owned by Rust and closed on drop.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use tokio::sync::{mpsc, Notify};

use crate::ffi::{self, ObjectHandle, SessionHandle, SessionSettings};
use crate::instance::Instance;
use crate::NormError;

/// Default transmit rate: 100 Mbit/s (NORM's own default is 64 kbit/s).
pub const TX_RATE_BPS_DEFAULT: f64 = 100e6;
/// Default transmit buffer: what a sender keeps for repairs, 8 MiB.
pub const TX_BUFFER_BYTES_DEFAULT: u32 = 8 * 1024 * 1024;
/// Default receive buffer per remote sender, 8 MiB.
pub const RX_BUFFER_BYTES_DEFAULT: u32 = 8 * 1024 * 1024;
/// Default segment (payload per packet), below a 1500-byte MTU with headers.
pub const SEGMENT_BYTES_DEFAULT: u16 = 1400;
/// Default source symbols per FEC block.
pub const BLOCK_DEFAULT: u16 = 64;
/// Events buffered per session before the event thread waits.
pub const SESSION_EVENTS_MAX: usize = 4096;

/// How a session is set up.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Multicast group.
    pub group: Ipv4Addr,
    /// UDP port.
    pub port: u16,
    /// Interface to send and join on (`None`: the routing table's choice).
    pub interface: Option<String>,
    /// This node's NORM id, unique in the group.
    pub node_id: u32,
    /// Transmit rate, bits per second.
    pub tx_rate_bps: f64,
    /// Transmit buffer (the repair window), bytes.
    pub tx_buffer_bytes: u32,
    /// Receive buffer per remote sender, bytes.
    pub rx_buffer_bytes: u32,
    /// Payload bytes per packet.
    pub segment_bytes: u16,
    /// Source symbols per FEC block.
    pub block: u16,
    /// Proactive parity symbols per block (0: repairs on NACK only).
    pub parity: u16,
    /// Ask for repairs (reliable); false receives best-effort.
    pub nacking: bool,
    /// Receive this host's own packets (several nodes on one host).
    pub loopback: bool,
    /// Multicast TTL.
    pub ttl: u8,
    /// Initial group round-trip estimate, seconds.
    pub grtt_estimate_s: f64,
    /// NACK back-off factor (multiples of GRTT).
    pub backoff_factor: f64,
    /// Test hook of the library: drop this share of packets sent (0-100).
    pub tx_loss_percent: f64,
    /// Test hook of the library: drop this share of packets received (0-100).
    pub rx_loss_percent: f64,
    /// Decides from an object's info whether to ask for its repairs (a
    /// best-effort message is not repaired); `None` repairs everything.
    pub repair_filter: Option<fn(&[u8]) -> bool>,
}

impl SessionOptions {
    /// Defaults for `group:port` with node id `node_id`.
    pub fn new(group: Ipv4Addr, port: u16, node_id: u32) -> SessionOptions {
        SessionOptions {
            group,
            port,
            interface: None,
            node_id,
            tx_rate_bps: TX_RATE_BPS_DEFAULT,
            tx_buffer_bytes: TX_BUFFER_BYTES_DEFAULT,
            rx_buffer_bytes: RX_BUFFER_BYTES_DEFAULT,
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            block: BLOCK_DEFAULT,
            parity: 0,
            nacking: true,
            loopback: false,
            ttl: 1,
            grtt_estimate_s: 0.01,
            backoff_factor: 4.0,
            tx_loss_percent: 0.0,
            rx_loss_percent: 0.0,
            repair_filter: None,
        }
    }
}

/// What a session reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A whole message from `sender`, with the info it carried.
    Message {
        /// The sender's node id.
        sender: u32,
        /// The message bytes.
        data: Bytes,
        /// The object's info bytes.
        info: Bytes,
    },
    /// A message from `sender` could not be completed (repairs no longer
    /// available): the receiver missed it.
    Lost {
        /// The sender's node id.
        sender: u32,
    },
    /// A new remote sender was heard.
    SenderNew {
        /// Its node id.
        sender: u32,
    },
    /// A remote sender restarted.
    SenderReset {
        /// Its node id.
        sender: u32,
    },
    /// A remote sender went quiet.
    SenderInactive {
        /// Its node id.
        sender: u32,
    },
}

/// Counters of a session.
#[derive(Debug, Default)]
pub struct SessionCounters {
    /// Messages sent.
    pub sent: AtomicU64,
    /// Messages received whole.
    pub received: AtomicU64,
    /// Messages the library gave up on (lost).
    pub aborted: AtomicU64,
    /// Events dropped because the session's owner was gone.
    pub undelivered: AtomicU64,
}

/// What the event thread shares with the session's owner.
pub(crate) struct SessionShared {
    pub(crate) events: Mutex<Option<mpsc::Sender<Event>>>,
    /// Buffers libnorm still points at, by transmit object.
    pending: Mutex<HashMap<ObjectHandle, Bytes>>,
    pub(crate) vacancy: Notify,
    pub(crate) flushed: Notify,
    /// Flushes NORM completed (`TX_FLUSH_COMPLETED`) so far.
    pub(crate) flushes: AtomicU64,
    /// `flushes` when the last message was enqueued: a flush that completes
    /// after that one covered it (NORM restarts a flush when data is sent).
    flushes_at_last_send: AtomicU64,
    pub(crate) counters: SessionCounters,
    pub(crate) repair_filter: Option<fn(&[u8]) -> bool>,
}

impl SessionShared {
    /// The library is done with a transmit object: free its buffer.
    pub(crate) fn purged(&self, object: ObjectHandle) {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&object);
    }
}

/// A NORM session. Dropping it stops its sender and receiver.
pub struct Session {
    instance: Arc<Instance>,
    handle: SessionHandle,
    shared: Arc<SessionShared>,
    events: mpsc::Receiver<Event>,
    /// The last object sent (its handle; 0 before the first), for flushes.
    last_sent: std::sync::atomic::AtomicUsize,
}

impl Session {
    /// Creates a session with `options`, sending when `send`, receiving
    /// when `receive`.
    pub fn open(options: &SessionOptions, send: bool, receive: bool) -> Result<Session, NormError> {
        let instance = Instance::get()?;
        let address = options.group.to_string();
        let handle = ffi::create_session(instance.handle, &address, options.port, options.node_id)
            .ok_or_else(|| NormError::Session(format!("cannot create a session on {address}:{}", options.port)))?;
        let (sender, events) = mpsc::channel(SESSION_EVENTS_MAX);
        let shared = Arc::new(SessionShared {
            events: Mutex::new(Some(sender)),
            pending: Mutex::new(HashMap::new()),
            vacancy: Notify::new(),
            flushed: Notify::new(),
            flushes: AtomicU64::new(0),
            flushes_at_last_send: AtomicU64::new(0),
            counters: SessionCounters::default(),
            repair_filter: options.repair_filter,
        });
        instance.register(handle, shared.clone());
        let session = Session { instance, handle, shared, events, last_sent: std::sync::atomic::AtomicUsize::new(0) };
        session.start(options, send, receive)?;
        Ok(session)
    }

    fn start(&self, options: &SessionOptions, send: bool, receive: bool) -> Result<(), NormError> {
        let settings = SessionSettings {
            interface: options.interface.as_deref(),
            multicast_loopback: options.loopback,
            ttl: options.ttl,
            tx_rate_bps: options.tx_rate_bps,
            grtt_estimate_s: options.grtt_estimate_s,
            backoff_factor: options.backoff_factor,
            tx_loss_percent: options.tx_loss_percent,
            rx_loss_percent: options.rx_loss_percent,
            reuse_port: true,
        };
        if !ffi::configure(self.handle, &settings) {
            return Err(NormError::Session(format!("cannot use interface {:?}", options.interface)));
        }
        if receive {
            ffi::set_nacking(self.handle, options.nacking);
            if !ffi::start_receiver(self.handle, options.rx_buffer_bytes) {
                return Err(NormError::Session(format!("cannot receive on {}:{}", options.group, options.port)));
            }
        }
        if send {
            let instance_id = (crate::random_u32() & 0xFFFF) as u16;
            let (buffer, segment, block, parity) =
                (options.tx_buffer_bytes, options.segment_bytes, options.block, options.parity);
            if !ffi::start_sender(self.handle, instance_id, buffer, segment, block, parity) {
                return Err(NormError::Session(format!("cannot send on {}:{}", options.group, options.port)));
            }
        }
        Ok(())
    }

    /// Sends `data` as one NORM object carrying `info`, waiting while the
    /// transmit buffer is full.
    pub async fn send(&mut self, data: Bytes, info: &[u8]) -> Result<(), NormError> {
        loop {
            let vacancy = self.shared.vacancy.notified();
            if self.try_send_now(&data, info) {
                return Ok(());
            }
            vacancy.await;
        }
    }

    /// Sends `data` unless the transmit buffer is full (then false: wait
    /// for [`Session::vacancy`], made before this call, and try again).
    pub fn try_send_now(&self, data: &Bytes, info: &[u8]) -> bool {
        match self.try_send(data, info) {
            Some(object) => {
                self.last_sent.store(object.0, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Resolves when the transmit buffer has room again. Make it before a
    /// [`Session::try_send_now`] that may fail, so that no wake-up is missed.
    pub fn vacancy(&self) -> tokio::sync::futures::Notified<'_> {
        self.shared.vacancy.notified()
    }

    /// Enqueues unless the transmit queue is full; keeps the buffer until
    /// the library purges the object.
    fn try_send(&self, data: &Bytes, info: &[u8]) -> Option<ObjectHandle> {
        let mut pending = self.shared.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let object = ffi::data_enqueue(self.handle, data, info)?;
        pending.insert(object, data.clone());
        self.shared.flushes_at_last_send.store(self.shared.flushes.load(Ordering::Acquire), Ordering::Release);
        self.shared.counters.sent.fetch_add(1, Ordering::Relaxed);
        Some(object)
    }

    /// Waits until NORM completed a flush after the last message sent:
    /// the sender has sent its end-of-transmission commands (NORM's robust
    /// factor of them) with no repair left to make, so every receiver had
    /// its chance to ask for what it missed.
    pub async fn flush(&mut self) {
        if self.last_sent.load(Ordering::Relaxed) == 0 {
            return;
        }
        let covered = self.shared.flushes_at_last_send.load(Ordering::Acquire);
        loop {
            let flushed = self.shared.flushed.notified();
            if self.shared.flushes.load(Ordering::Acquire) > covered {
                return;
            }
            flushed.await;
        }
    }

    /// The next event; `None` when the session is closed.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// The session's counters.
    pub fn counters(&self) -> &SessionCounters {
        &self.shared.counters
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        *self.shared.events.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.events.close();
        self.instance.deregister(self.handle);
        ffi::destroy_session(self.handle);
    }
}
