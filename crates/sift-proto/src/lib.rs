//! Sift native protocol v1: a sans-IO codec.
//!
//! This crate turns bytes into [`Frame`]s and frames into bytes, and nothing
//! else: no sockets, no runtime, no clocks. The broker, the client and the
//! fuzzer drive it the same way, which keeps the parser small enough to trust
//! and easy to fuzz. `docs/PROTOCOL.md` is the byte-level specification; this
//! crate is its reference implementation.
//!
//! Every frame is `length: u32 BE` (bytes that follow), `type: u8`, body.
//! Integers are big-endian; strings carry a `u16` or `u32` length prefix and
//! are UTF-8; byte fields carry a `u32` length prefix.
//!
//! The [`link`] module holds the broker-to-broker protocol, which frames the
//! same way with frames of its own.

mod admin;
mod decode;
mod encode;
mod error_code;
mod frame;
pub mod group;
pub mod link;
mod rfc3339;
mod stream;

pub use admin::AdminQuery;
pub use decode::{decode_message, DecodeError, Decoder};
pub use encode::{
    encode_deliver_prefix, encode_message, encode_publish, encode_publish_ref, encode_publish_sequenced,
    encode_query_result_prefix, encode_stream_deliver_prefix, encoded_deliver_len, encoded_query_result_len,
    encoded_stream_deliver_len, EncodeError, MessageRef, STREAM_SEQ_BYTES,
};
pub use error_code::ErrorCode;
pub use frame::*;
pub use group::{routing_properties, RoutingProperties};
pub use rfc3339::{format_rfc3339_ns, parse_rfc3339_ns};
pub use stream::{GapReason, ManageOp, Query, StartPosition, StreamSource};

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// Lowest protocol version this crate speaks.
pub const PROTOCOL_VERSION_MIN: u16 = 1;

/// The four bytes that open a `HELLO`, so that a stray connection from another
/// protocol is recognised at once.
pub const MAGIC: [u8; 4] = *b"SIFT";

/// Bytes of the length prefix.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// Frame limit the decoder uses until the handshake tells it otherwise.
pub const DEFAULT_MAX_FRAME_BYTES: u32 = 8 * 1024 * 1024;
