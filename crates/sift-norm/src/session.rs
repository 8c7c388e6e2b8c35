//! One NORM session: a multicast group and port, sending, receiving or
//! both, owned by Rust and closed on drop.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::ffi::{self, SessionHandle, SessionSettings};
use crate::instance::Instance;
use crate::transmit::{
    TransmitCounters, Transmitter, BATCH_BYTES_MAX_DEFAULT, OBJECTS_AHEAD_MAX_DEFAULT, TX_QUEUE_RECORDS_MAX_DEFAULT,
};
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
/// Default bound on the objects a sender keeps for repair. NORM's own
/// default of 256, with each object held at least its flow-control time
/// (2 × GRTT × (back-off + 1), 0.1 s on a LAN at the start), caps a sender
/// near 2,560 messages a second whatever the rate; NORM allows up to 32,767.
pub const TX_CACHE_OBJECTS_MAX_DEFAULT: u32 = 4096;
/// Default bound on the bytes of the objects a sender keeps, 64 MiB (the
/// messages' buffers stay in memory until NORM purges them).
pub const TX_CACHE_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;
/// Default bound on the objects a receiver tracks per sender while they
/// complete (NORM's own default is 256).
pub const RX_CACHE_OBJECTS_MAX_DEFAULT: u16 = 16_384;
/// Default kernel socket buffer, each way: 4 MiB, so that a burst at the
/// full rate waits in the kernel rather than being dropped (capped by
/// `net.core.rmem_max`/`wmem_max`).
pub const SOCKET_BUFFER_BYTES_DEFAULT: u32 = 4 * 1024 * 1024;
/// Events queued per session for its owner; more are dropped (counted as
/// overflowed), since the event thread never waits.
pub const SESSION_EVENTS_MAX: usize = 4096;
/// Default bound on the message bytes queued per session for its owner,
/// 64 MiB; a message beyond it is dropped and counted as overflowed.
pub const SESSION_QUEUED_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;

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
    /// Objects a sender keeps for repair, at most (NORM allows 32,767).
    pub tx_cache_objects_max: u32,
    /// Bytes of objects a sender keeps for repair, at most.
    pub tx_cache_bytes_max: u64,
    /// Objects a receiver tracks per sender, at most (up to 32,767).
    pub rx_cache_objects_max: u16,
    /// Kernel socket buffer, each way, bytes.
    pub socket_buffer_bytes: u32,
    /// Records waiting ahead of NORM, at most; a send beyond waits.
    pub tx_queue_records_max: usize,
    /// Size of an object that records waiting together are framed into.
    pub batch_bytes_max: usize,
    /// Objects handed to NORM and not yet sent by it, at most.
    pub objects_ahead_max: u64,
    /// Message bytes queued for the session's owner, at most; a message
    /// beyond it is dropped (counted in [`SessionCounters::overflowed`]).
    pub queued_bytes_max: u64,
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
            tx_cache_objects_max: TX_CACHE_OBJECTS_MAX_DEFAULT,
            tx_cache_bytes_max: TX_CACHE_BYTES_MAX_DEFAULT,
            rx_cache_objects_max: RX_CACHE_OBJECTS_MAX_DEFAULT,
            socket_buffer_bytes: SOCKET_BUFFER_BYTES_DEFAULT,
            queued_bytes_max: SESSION_QUEUED_BYTES_MAX_DEFAULT,
            tx_queue_records_max: TX_QUEUE_RECORDS_MAX_DEFAULT,
            batch_bytes_max: BATCH_BYTES_MAX_DEFAULT,
            objects_ahead_max: OBJECTS_AHEAD_MAX_DEFAULT,
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
    /// A whole record (one [`Session::send`] of `sender`), with the info
    /// its object carried.
    Message {
        /// The sender's node id.
        sender: u32,
        /// The record's bytes.
        data: Bytes,
        /// The object's info bytes.
        info: Bytes,
    },
    /// An object from `sender` could not be completed (repairs no longer
    /// available): the receiver missed the records in it.
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
    /// Records received whole.
    pub received: AtomicU64,
    /// Objects the library gave up on (lost).
    pub aborted: AtomicU64,
    /// Objects received whole whose data was not a sequence of frames
    /// (a foreign NORM sender), dropped.
    pub malformed: AtomicU64,
    /// Events dropped because the session's owner was gone.
    pub undelivered: AtomicU64,
    /// Records received whole but dropped: the owner's queue was full
    /// (it took events more slowly than the group sent them).
    pub overflowed: AtomicU64,
}

impl Event {
    /// The bytes this event holds while queued for the owner.
    pub(crate) fn queued_bytes(&self) -> u64 {
        match self {
            Event::Message { data, info, .. } => (data.len() + info.len()) as u64,
            _ => 0,
        }
    }
}

/// What the event thread shares with the session's owner.
pub(crate) struct SessionShared {
    pub(crate) events: Mutex<Option<mpsc::Sender<Event>>>,
    /// The sending half: queue, objects with NORM, flushes.
    pub(crate) tx: Transmitter,
    pub(crate) counters: SessionCounters,
    pub(crate) repair_filter: Option<fn(&[u8]) -> bool>,
    /// Message bytes in the owner's queue, and their bound.
    pub(crate) queued_bytes: AtomicU64,
    pub(crate) queued_bytes_max: u64,
}

/// A NORM session. Dropping it stops its sender and receiver.
pub struct Session {
    instance: Arc<Instance>,
    handle: SessionHandle,
    shared: Arc<SessionShared>,
    events: mpsc::Receiver<Event>,
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
            tx: Transmitter::new(
                handle,
                options.tx_queue_records_max,
                options.batch_bytes_max,
                options.objects_ahead_max,
            ),
            counters: SessionCounters::default(),
            repair_filter: options.repair_filter,
            queued_bytes: AtomicU64::new(0),
            queued_bytes_max: options.queued_bytes_max,
        });
        instance.register(handle, shared.clone());
        let session = Session { instance, handle, shared, events };
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
            tx_cache_bytes_max: options.tx_cache_bytes_max,
            tx_cache_objects_max: options.tx_cache_objects_max,
            rx_cache_objects_max: options.rx_cache_objects_max,
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
        if !ffi::set_socket_buffers(self.handle, options.socket_buffer_bytes) {
            let why = format!("cannot set socket buffers of {} bytes", options.socket_buffer_bytes);
            return Err(NormError::Session(why));
        }
        Ok(())
    }

    /// Queues `record` to be sent with `info` (in an object with other
    /// records of the same info when they wait together), highest
    /// `priority` first; waits while the transmit queue is full.
    pub async fn send(&self, priority: u8, info: Bytes, record: Bytes) {
        self.shared.tx.send(priority, info, record).await;
    }

    /// Queues `record` as [`Session::send`] does, or gives it back when
    /// the transmit queue is full.
    pub fn try_send(&self, priority: u8, info: Bytes, record: Bytes) -> Result<(), Bytes> {
        self.shared.tx.try_send(priority, info, record)
    }

    /// Waits until every queued record is with NORM and NORM completed a
    /// flush after the last of them: the sender has sent its
    /// end-of-transmission commands (NORM's robust factor of them) with no
    /// repair left to make, so every receiver had its chance to ask for
    /// what it missed.
    pub async fn flush(&self) {
        self.shared.tx.flush().await;
    }

    /// Records and objects handed to NORM so far.
    pub fn transmit_counters(&self) -> &TransmitCounters {
        &self.shared.tx.counters
    }

    /// The next event; `None` when the session is closed.
    pub async fn next_event(&mut self) -> Option<Event> {
        let event = self.events.recv().await?;
        let bytes = event.queued_bytes();
        let before = self.shared.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
        debug_assert!(before >= bytes, "queued bytes count what was queued");
        Some(event)
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
