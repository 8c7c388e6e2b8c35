//! Small helpers for link frames: encoding to shared bytes, `LINK_ERROR`
//! construction, and reading one frame during the handshake.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sift_proto::link::{LinkDecoder, LinkErrorCode, LinkErrorFrame, LinkFrame};
use sift_tls::{PeerReadHalf, PeerWriteHalf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::error::LinkError;

/// Encodes `frame` once, so that the same bytes can be queued on several
/// links. Frames the broker builds always encode; a failure is a bug, logged.
pub(crate) fn encode(frame: &LinkFrame) -> Option<Bytes> {
    let mut bytes = BytesMut::new();
    match frame.encode(&mut bytes) {
        Ok(()) => Some(bytes.freeze()),
        Err(error) => {
            tracing::error!(%error, "cannot encode {}", frame.name());
            None
        }
    }
}

/// A `LINK_ERROR` frame.
pub(crate) fn error_frame(code: LinkErrorCode, fatal: bool, message: String) -> LinkFrame {
    LinkFrame::Error(LinkErrorFrame { code, fatal, message })
}

/// Writes one frame straight to the socket (before the link has a writer
/// task: the handshake and its refusals).
pub(crate) async fn write_frame(writer: &mut PeerWriteHalf, frame: &LinkFrame) -> Result<(), LinkError> {
    if let Some(bytes) = encode(frame) {
        writer.write_all(&bytes).await?;
    }
    Ok(())
}

/// Reads one whole frame within `limit`. During the handshake every decoding
/// error is fatal (§10.4), so a malformed frame is an error here too.
pub(crate) async fn read_handshake_frame(
    reader: &mut PeerReadHalf,
    buf: &mut BytesMut,
    decoder: &mut LinkDecoder,
    expected: &'static str,
    limit: Duration,
) -> Result<LinkFrame, LinkError> {
    let read = async {
        loop {
            if let Some(frame) = decoder.decode(buf)? {
                return Ok(frame);
            }
            if reader.read_buf(buf).await? == 0 {
                return Err(LinkError::Closed);
            }
        }
    };
    tokio::time::timeout(limit, read).await.map_err(|_| LinkError::HandshakeTimeout { expected, limit })?
}
