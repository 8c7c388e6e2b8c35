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

impl ClientError {
    /// The byte position a refusal names (`... at byte 12: ...`), as the
    /// broker writes positions in filters, topics and XML; `None` when it
    /// names none. Lets a front-end or the command line point at the spot.
    pub fn position(&self) -> Option<usize> {
        match self {
            ClientError::Refused { message, .. } => byte_position_in(message),
            _ => None,
        }
    }
}

/// The byte position a broker message names (`... at byte 12: ...`), if any.
pub fn byte_position_in(message: &str) -> Option<usize> {
    let (_, after) = message.split_once("at byte ")?;
    let digits_end = after.find(|character: char| !character.is_ascii_digit()).unwrap_or(after.len());
    after[..digits_end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_read_from_broker_messages() {
        assert_eq!(byte_position_in("content filter: sql: at byte 6: expected a value, found end"), Some(6));
        assert_eq!(byte_position_in("XML: at byte 10: element `a` is not closed"), Some(10));
        assert_eq!(byte_position_in("no position here"), None);
        assert_eq!(byte_position_in("at byte x"), None);
    }
}
