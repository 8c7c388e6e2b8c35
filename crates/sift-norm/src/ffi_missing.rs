//! The FFI seam when this build has no libnorm (`norm-sys` did not find
//! it): the same functions, calling nothing, so that [`crate::Session`]
//! answers with [`UNAVAILABLE`] instead of the build failing to link.

#![allow(dead_code)]

use bytes::Bytes;

/// Why NORM cannot be used in this build.
pub(crate) const UNAVAILABLE: Option<&str> =
    Some("this sift was built without libnorm: install libnorm-dev (Debian) and rebuild");

/// See the real `ffi.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct InstanceHandle(usize);

/// See the real `ffi.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SessionHandle(pub(crate) usize);

/// See the real `ffi.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ObjectHandle(pub(crate) usize);

/// See the real `ffi.rs`.
#[derive(Debug)]
pub(crate) struct RawEvent {
    pub(crate) kind: norm_sys::NormEventType,
    pub(crate) session: SessionHandle,
    pub(crate) sender: Option<u32>,
    pub(crate) object: ObjectHandle,
    pub(crate) data: Option<(Bytes, Bytes)>,
}

/// See the real `ffi.rs`.
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
}

pub(crate) fn create_instance() -> Option<InstanceHandle> {
    None
}

pub(crate) fn stop_instance(_handle: InstanceHandle) {}

pub(crate) fn next_event(_handle: InstanceHandle) -> Option<RawEvent> {
    None
}

pub(crate) fn create_session(
    _handle: InstanceHandle,
    _address: &str,
    _port: u16,
    _node_id: u32,
) -> Option<SessionHandle> {
    None
}

pub(crate) fn destroy_session(_handle: SessionHandle) {}

pub(crate) fn configure(_handle: SessionHandle, _settings: &SessionSettings<'_>) -> bool {
    false
}

pub(crate) fn start_sender(
    _handle: SessionHandle,
    _instance_id: u16,
    _buffer_bytes: u32,
    _segment_bytes: u16,
    _block: u16,
    _parity: u16,
) -> bool {
    false
}

pub(crate) fn start_receiver(_handle: SessionHandle, _buffer_bytes: u32) -> bool {
    false
}

pub(crate) fn set_nacking(_handle: SessionHandle, _nacking: bool) {}

pub(crate) fn data_enqueue(_handle: SessionHandle, _data: &Bytes, _info: &[u8]) -> Option<ObjectHandle> {
    None
}

pub(crate) fn stop_repairing(_object: ObjectHandle) {}
