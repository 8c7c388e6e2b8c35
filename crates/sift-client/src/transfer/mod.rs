//! Large messages: a payload above the frame limit travels as a chunked
//! transfer, fragments that share one transfer id, and is put back
//! together by the receiving client, on disk.
//!
//! Each fragment is an ordinary message on the transfer's topic, carrying
//! the transfer's properties and metadata (so the broker routes every
//! fragment by the same topic and content filters, all or none) and these
//! properties of its own (`docs/PROTOCOL.md` §6.19):
//!
//! | property | type | meaning |
//! |---|---|---|
//! | `sift-chunk-id` | string | the transfer, unique per publisher |
//! | `sift-chunk-index` | int | this fragment's number, from 0 |
//! | `sift-chunk-count` | int | fragments in the transfer (1 for an empty one) |
//! | `sift-chunk-bytes` | int | payload bytes of every fragment but the last |
//! | `sift-chunk-total-bytes` | int | bytes of the whole transfer |
//! | `sift-chunk-crc` | int | CRC-32 (IEEE) of this fragment's payload |
//! | `sift-chunk-name` | string | the file name the receiver saves it under |
//! | `sift-chunk-streams` | int | connections the fragments were spread over |
//! | `sift-chunk-file-crc` | int | on the last fragment: CRC-32 of the whole |
//!
//! Fragment `i` holds bytes `i × chunk_bytes ..` of the whole, so a receiver
//! writes it in place, whatever order fragments arrive in over parallel
//! streams, and never holds the whole in memory. The per-fragment CRCs,
//! combined in index order, must give the whole's CRC: corruption anywhere
//! is found without reading the file back.

mod fragment;
mod receive;
mod send;

pub use fragment::{FragmentError, FragmentHeader, Fragmenter};
pub use receive::{
    Reassembler, ReassemblyConfig, ReassemblyCounters, TransferEvent, TransferFailure, FINISHED_REMEMBERED,
};
pub use send::{send_file, FragmentHook, TransferError, TransferOptions, TransferReport};

/// The transfer id.
pub const CHUNK_ID: &str = "sift-chunk-id";
/// The fragment's number, from 0.
pub const CHUNK_INDEX: &str = "sift-chunk-index";
/// Fragments in the transfer.
pub const CHUNK_COUNT: &str = "sift-chunk-count";
/// Payload bytes of every fragment but the last.
pub const CHUNK_BYTES: &str = "sift-chunk-bytes";
/// Bytes of the whole transfer.
pub const CHUNK_TOTAL_BYTES: &str = "sift-chunk-total-bytes";
/// CRC-32 of the fragment's payload.
pub const CHUNK_CRC: &str = "sift-chunk-crc";
/// The name the receiver saves the transfer under.
pub const CHUNK_NAME: &str = "sift-chunk-name";
/// Connections the fragments were spread over.
pub const CHUNK_STREAMS: &str = "sift-chunk-streams";
/// CRC-32 of the whole transfer (last fragment only).
pub const CHUNK_FILE_CRC: &str = "sift-chunk-file-crc";

/// Default payload bytes per fragment (lowered to the broker's
/// `max_payload_bytes` when that is smaller).
pub const CHUNK_BYTES_DEFAULT: usize = 1024 * 1024;
