//! The values that cross the FFI seam, shared by the real seam (`ffi.rs`)
//! and the one of a build without libnorm (`ffi_missing.rs`).

use bytes::Bytes;

/// A NORM instance (one per process here): the library's protocol thread
/// and its event queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct InstanceHandle(pub(crate) usize);

/// A NORM session of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SessionHandle(pub(crate) usize);

/// A transmit object (one message) of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ObjectHandle(pub(crate) usize);

/// One event, with what the application needs copied out of the library.
#[derive(Debug)]
pub(crate) struct RawEvent {
    pub(crate) kind: norm_sys::NormEventType,
    pub(crate) session: SessionHandle,
    /// The remote sender's node id, when the event has a sender.
    pub(crate) sender: Option<u32>,
    pub(crate) object: ObjectHandle,
    /// A completed data object's bytes and its info (`RX_OBJECT_COMPLETED`).
    pub(crate) data: Option<(Bytes, Bytes)>,
}

/// Settings made before a session starts.
#[derive(Debug, Clone)]
pub(crate) struct SessionSettings<'a> {
    pub(crate) interface: Option<&'a str>,
    pub(crate) multicast_loopback: bool,
    pub(crate) ttl: u8,
    pub(crate) tx_rate_bps: f64,
    pub(crate) grtt_estimate_s: f64,
    pub(crate) backoff_factor: f64,
    pub(crate) tx_loss_percent: f64,
    pub(crate) rx_loss_percent: f64,
    pub(crate) reuse_port: bool,
    pub(crate) tx_cache_bytes_max: u64,
    pub(crate) tx_cache_objects_max: u32,
    pub(crate) rx_cache_objects_max: u16,
}
