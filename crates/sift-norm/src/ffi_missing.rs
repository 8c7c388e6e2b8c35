//! The FFI seam when this build has no libnorm (`norm-sys` did not find
//! it): the same functions, calling nothing, so that [`crate::Session`]
//! answers with [`UNAVAILABLE`] instead of the build failing to link.

#![allow(dead_code)]

use bytes::Bytes;

pub(crate) use crate::seam::{InstanceHandle, ObjectHandle, RawEvent, SessionHandle, SessionSettings};

/// Why NORM cannot be used in this build.
pub(crate) const UNAVAILABLE: Option<&str> =
    Some("this sift was built without libnorm: install libnorm-dev (Debian) and rebuild");

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

pub(crate) fn set_socket_buffers(_handle: SessionHandle, _bytes: u32) -> bool {
    false
}

pub(crate) fn set_nacking(_handle: SessionHandle, _nacking: bool) {}

pub(crate) fn data_enqueue(_handle: SessionHandle, _data: &Bytes, _info: &[u8]) -> Option<ObjectHandle> {
    None
}

pub(crate) fn stop_repairing(_object: ObjectHandle) {}
