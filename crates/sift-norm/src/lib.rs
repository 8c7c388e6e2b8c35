//! NORM (NACK-Oriented Reliable Multicast, RFC 5740) for Sift, over NRL's
//! libnorm through `norm-sys`.
//!
//! A [`Session`] owns one libnorm session on a multicast group: it sends
//! messages as NORM data objects ([`Session::send`], waiting while the
//! transmit buffer is full) and yields what it receives as [`Event`]s
//! ([`Session::next_event`]). The library runs its protocol (NACKs with
//! suppression and back-off, GRTT probing, flushes, repairs) on its own
//! thread; one event thread per process ([`instance`]) carries its events
//! to the sessions. All `unsafe` code is in `ffi.rs`.

pub mod batch;
#[cfg(not(norm_unavailable))]
mod ffi;
#[cfg(norm_unavailable)]
#[path = "ffi_missing.rs"]
mod ffi;
mod instance;
pub mod packet;
#[cfg_attr(norm_unavailable, allow(dead_code))]
mod seam;
mod session;
mod transmit;
mod watch;

pub use instance::shutdown;
pub use packet::{SenderTally, Tally};
pub use session::{
    Event, Session, SessionCounters, SessionOptions, BLOCK_DEFAULT, RX_BUFFER_BYTES_DEFAULT,
    RX_CACHE_OBJECTS_MAX_DEFAULT, SEGMENT_BYTES_DEFAULT, SESSION_EVENTS_MAX, SESSION_QUEUED_BYTES_MAX_DEFAULT,
    SOCKET_BUFFER_BYTES_DEFAULT, TX_BUFFER_BYTES_DEFAULT, TX_CACHE_BYTES_MAX_DEFAULT, TX_CACHE_OBJECTS_MAX_DEFAULT,
    TX_RATE_BPS_DEFAULT,
};
pub use transmit::{
    TransmitCounters, BATCH_BYTES_MAX_DEFAULT, OBJECTS_AHEAD_MAX_DEFAULT, TX_QUEUE_RECORDS_MAX_DEFAULT,
};
pub use watch::{interface_index, Watcher, WATCH_DATAGRAM_BYTES_MAX, WATCH_SOCKET_BUFFER_BYTES};

/// Why NORM could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NormError {
    /// The library's instance could not be created.
    #[error("NORM: {0}")]
    Instance(String),
    /// A session could not be created or started.
    #[error("NORM session: {0}")]
    Session(String),
}

/// A random value from the clock and the process id: enough to tell a
/// restarted sender's instance from its last.
pub(crate) fn random_u32() -> u32 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.subsec_nanos());
    nanos ^ std::process::id().rotate_left(16)
}
