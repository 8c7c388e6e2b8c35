//! The only calls into C: each function here wraps one or a few libnorm
//! calls, checks what the library returns, and hands back owned Rust
//! values. Handles cross threads as plain addresses, because libnorm's API
//! is safe to call from any thread (every call takes the instance's lock)
//! and the library, not Rust, owns what they point to.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_void, CString};

use bytes::Bytes;
use norm_sys as sys;

pub(crate) use crate::seam::{InstanceHandle, ObjectHandle, RawEvent, SessionHandle, SessionSettings};

/// Why NORM cannot be used in this build: never, libnorm is linked.
pub(crate) const UNAVAILABLE: Option<&str> = None;

fn instance(handle: InstanceHandle) -> sys::NormInstanceHandle {
    handle.0 as *const c_void
}

fn session(handle: SessionHandle) -> sys::NormSessionHandle {
    handle.0 as *const c_void
}

/// Creates an instance; `None` when the library cannot (no threads, no sockets).
pub(crate) fn create_instance() -> Option<InstanceHandle> {
    // SAFETY: no arguments but a flag; the library allocates the instance.
    let handle = unsafe { sys::NormCreateInstance(false) };
    (!handle.is_null()).then_some(InstanceHandle(handle as usize))
}

/// Makes a blocked [`next_event`] return `None`, for the event thread to end.
pub(crate) fn stop_instance(handle: InstanceHandle) {
    // SAFETY: the handle came from `create_instance` and is not destroyed yet.
    unsafe { sys::NormStopInstance(instance(handle)) }
}

/// Waits for the next event of the instance; `None` once it is stopped.
pub(crate) fn next_event(handle: InstanceHandle) -> Option<RawEvent> {
    let mut event = sys::NormEvent {
        type_: sys::NormEventType::NORM_EVENT_INVALID,
        session: std::ptr::null(),
        sender: std::ptr::null(),
        object: std::ptr::null(),
    };
    // SAFETY: `event` is a valid, writable NormEvent; the call blocks.
    if !unsafe { sys::NormGetNextEvent(instance(handle), &mut event, true) } {
        return None;
    }
    let sender = (!event.sender.is_null()).then(|| {
        // SAFETY: a non-null sender handle of the current event is valid until the next call.
        unsafe { sys::NormNodeGetId(event.sender) }
    });
    let data = match event.type_ {
        sys::NormEventType::NORM_RX_OBJECT_COMPLETED => completed_data(event.object),
        // The info arrives before the data: what the receiver decides
        // about repairing the object is decided on it.
        sys::NormEventType::NORM_RX_OBJECT_INFO => Some((Bytes::new(), object_info(event.object))),
        _ => None,
    };
    Some(RawEvent {
        kind: event.type_,
        session: SessionHandle(event.session as usize),
        sender,
        object: ObjectHandle(event.object as usize),
        data,
    })
}

/// The bytes and info of a completed data object, copied (the library
/// frees the object at the next event).
fn completed_data(object: sys::NormObjectHandle) -> Option<(Bytes, Bytes)> {
    // SAFETY: the object of the current event is valid until the next call.
    let kind = unsafe { sys::NormObjectGetType(object) };
    if kind != sys::NormObjectType::NORM_OBJECT_DATA {
        return None;
    }
    // SAFETY: as above; a data object's buffer holds `size` bytes.
    let (pointer, size) = unsafe { (sys::NormDataAccessData(object), sys::NormObjectGetSize(object)) };
    let size = usize::try_from(size).ok()?;
    let data = match pointer.is_null() || size == 0 {
        true => Bytes::new(),
        // SAFETY: `pointer` is valid for `size` bytes until the next event; copied now.
        false => Bytes::copy_from_slice(unsafe { std::slice::from_raw_parts(pointer.cast::<u8>(), size) }),
    };
    Some((data, object_info(object)))
}

/// The info an object carries (NORM_INFO), copied.
fn object_info(object: sys::NormObjectHandle) -> Bytes {
    // SAFETY: the object is valid for the current event.
    if !unsafe { sys::NormObjectHasInfo(object) } {
        return Bytes::new();
    }
    // SAFETY: as above.
    let length = unsafe { sys::NormObjectGetInfoLength(object) };
    let mut info = vec![0u8; usize::from(length)];
    // SAFETY: `info` is writable for `length` bytes.
    let copied = unsafe { sys::NormObjectGetInfo(object, info.as_mut_ptr().cast::<c_char>(), length) };
    info.truncate(usize::from(copied));
    Bytes::from(info)
}

/// Creates a session on `address:port` with local node id `node_id`.
pub(crate) fn create_session(handle: InstanceHandle, address: &str, port: u16, node_id: u32) -> Option<SessionHandle> {
    let address = CString::new(address).ok()?;
    // SAFETY: `address` is a valid C string for the call; the library copies it.
    let session = unsafe { sys::NormCreateSession(instance(handle), address.as_ptr(), port, node_id) };
    (!session.is_null()).then_some(SessionHandle(session as usize))
}

/// Frees a session (stopping its sender and receiver).
pub(crate) fn destroy_session(handle: SessionHandle) {
    // SAFETY: the handle came from `create_session` and is destroyed once.
    unsafe { sys::NormDestroySession(session(handle)) }
}

/// Applies `settings`; false when the interface is unknown.
pub(crate) fn configure(handle: SessionHandle, settings: &SessionSettings<'_>) -> bool {
    let raw = session(handle);
    // SAFETY: every call takes the valid session handle and plain values.
    unsafe {
        sys::NormSetMulticastLoopback(raw, settings.multicast_loopback);
        sys::NormSetTTL(raw, settings.ttl);
        sys::NormSetTxRate(raw, settings.tx_rate_bps);
        sys::NormSetGrttEstimate(raw, settings.grtt_estimate_s);
        sys::NormSetBackoffFactor(raw, settings.backoff_factor);
        sys::NormSetTxLoss(raw, settings.tx_loss_percent);
        sys::NormSetRxLoss(raw, settings.rx_loss_percent);
        if settings.reuse_port {
            sys::NormSetRxPortReuse(raw, true, std::ptr::null(), std::ptr::null(), 0);
        }
        let cache_bytes = sys::NormSize::try_from(settings.tx_cache_bytes_max).unwrap_or(sys::NormSize::MAX);
        // The count minimum: NORM's own default of 8 objects.
        sys::NormSetTxCacheBounds(raw, cache_bytes, 8, settings.tx_cache_objects_max);
        sys::NormSetRxCacheLimit(raw, settings.rx_cache_objects_max);
    }
    match settings.interface {
        None => true,
        Some(name) => {
            let Ok(name) = CString::new(name) else { return false };
            // SAFETY: valid handle and C string.
            unsafe { sys::NormSetMulticastInterface(raw, name.as_ptr()) }
        }
    }
}

/// Starts sending with `buffer_bytes` of transmit buffer, segments of
/// `segment_bytes`, blocks of `block` source symbols and `parity` repair symbols.
pub(crate) fn start_sender(
    handle: SessionHandle,
    instance_id: u16,
    buffer_bytes: u32,
    segment_bytes: u16,
    block: u16,
    parity: u16,
) -> bool {
    // SAFETY: valid handle and plain values.
    unsafe { sys::NormStartSender(session(handle), instance_id, buffer_bytes, segment_bytes, block, parity, 0) }
}

/// Sets the kernel's receive and send buffers of the session's sockets
/// (open once the sender or receiver started); false if refused. The
/// kernel caps both at `net.core.rmem_max` and `wmem_max`.
pub(crate) fn set_socket_buffers(handle: SessionHandle, bytes: u32) -> bool {
    let raw = session(handle);
    // SAFETY: valid handle and a plain value.
    unsafe { sys::NormSetRxSocketBuffer(raw, bytes) && sys::NormSetTxSocketBuffer(raw, bytes) }
}

/// Starts receiving with `buffer_bytes` per remote sender.
pub(crate) fn start_receiver(handle: SessionHandle, buffer_bytes: u32) -> bool {
    // SAFETY: valid handle and a plain value.
    unsafe { sys::NormStartReceiver(session(handle), buffer_bytes) }
}

/// Sets best-effort reception: no NACKs, so no repairs (`nacking` false).
pub(crate) fn set_nacking(handle: SessionHandle, nacking: bool) {
    let mode = if nacking { sys::NormNackingMode::NORM_NACK_NORMAL } else { sys::NormNackingMode::NORM_NACK_NONE };
    // SAFETY: valid handle and a plain value.
    unsafe { sys::NormSetDefaultNackingMode(session(handle), mode) }
}

/// Enqueues `data` (with `info`) as one data object; `None` when the
/// transmit queue is full.
///
/// # Safety contract, kept by the caller
/// libnorm keeps pointing at `data` until it reports the object
/// `TX_OBJECT_PURGED`: the caller holds the bytes (a `Bytes`, whose heap
/// buffer does not move) until then. `info` is copied by the library.
pub(crate) fn data_enqueue(handle: SessionHandle, data: &Bytes, info: &[u8]) -> Option<ObjectHandle> {
    let length = u32::try_from(data.len()).ok()?;
    let info_length = u32::try_from(info.len()).ok()?;
    // SAFETY: see the contract above; `info` is valid for the call.
    let object = unsafe {
        sys::NormDataEnqueue(
            session(handle),
            data.as_ptr().cast::<c_char>(),
            length,
            info.as_ptr().cast::<c_char>(),
            info_length,
        )
    };
    (!object.is_null()).then_some(ObjectHandle(object as usize))
}

/// Stops asking for repairs of one received object (best-effort).
pub(crate) fn stop_repairing(object: ObjectHandle) {
    // SAFETY: the object of the current event is valid; called on the event thread before the next event.
    unsafe { sys::NormObjectSetNackingMode(object.0 as *const c_void, sys::NormNackingMode::NORM_NACK_NONE) }
}
