//! The broker link protocol: what brokers of one cluster say to each other
//! on the link listener (`--link-listen`).
//!
//! It is a protocol of its own, with its own frames ([`LinkFrame`]) and
//! decoder ([`LinkDecoder`]), so that the client protocol's [`crate::Frame`]
//! stays as it is. It frames exactly like the client protocol (`length: u32
//! BE`, `type: u8`, body), uses the same field encodings, carries messages in
//! the same encoding and shares the codec's code for all three. Its type
//! codes live in `0x40..=0x5F`. `docs/PROTOCOL.md` ("Broker links") is the
//! specification.

mod decode;
mod encode;
mod error_code;
mod frame;

pub use decode::LinkDecoder;
pub use encode::{encode_forward_ref, ForwardHeader};
pub use error_code::{LinkErrorCode, LINK_ERROR_CODE_BASE};
pub use frame::*;

/// The link protocol version this crate speaks.
pub const LINK_PROTOCOL_VERSION: u16 = 1;

/// Lowest link protocol version this crate speaks.
pub const LINK_PROTOCOL_VERSION_MIN: u16 = 1;
