//! Client errors.

use sift_proto::ErrorCode;

/// What went wrong in a client call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// Could not connect or the handshake failed.
    #[error("cannot connect to {address}: {reason}")]
    Connect {
        /// The address tried.
        address: String,
        /// Why.
        reason: String,
    },
    /// The broker refused a request.
    #[error("broker refused: {code}: {message}")]
    Refused {
        /// The broker's error code.
        code: ErrorCode,
        /// The broker's explanation.
        message: String,
    },
    /// The connection dropped before the broker answered, and the request
    /// was not one the client resends.
    #[error("connection lost before the broker answered")]
    Disconnected,
    /// The client was closed.
    #[error("client is closed")]
    Closed,
    /// The broker did not answer in time.
    #[error("no answer from the broker within {0:?}")]
    Timeout(std::time::Duration),
    /// The broker's answer could not be understood.
    #[error("invalid reply from the broker: {0}")]
    InvalidReply(String),
    /// A publish was to carry the publisher's time, but no `TIME` exchange
    /// has completed yet to map it into the broker's clock.
    #[error(
        "no estimate of the broker's clock yet: publisher time needs a completed TIME exchange (Client::sync_clock)"
    )]
    NoClockEstimate,
    /// The request could not be encoded (a field too long).
    #[error("cannot encode request: {0}")]
    Encode(String),
}
