//! Why a link could not be set up, or why it went down.

use std::time::Duration;

use sift_proto::link::{LinkErrorCode, LinkFrame};
use sift_proto::{DecodeError, ErrorCode};

use super::frames::error_frame;

/// Why a link attempt failed or a link ended. [`LinkError::reply`] is the
/// `LINK_ERROR` this broker owes the peer for it, if any.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The socket failed.
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection.
    #[error("the peer closed the connection")]
    Closed,
    /// The address did not answer, or the handshake did not finish, in time.
    #[error("no {expected} within link_handshake_timeout_ms = {}", .limit.as_millis())]
    HandshakeTimeout {
        /// The frame (or connection) waited for.
        expected: &'static str,
        /// The time allowed.
        limit: Duration,
    },
    /// The byte stream could not be decoded.
    #[error("cannot decode: {0}")]
    Decode(#[from] DecodeError),
    /// A frame arrived where another was required.
    #[error("expected {expected}, got {got}")]
    Unexpected {
        /// What the handshake required.
        expected: &'static str,
        /// What arrived.
        got: &'static str,
    },
    /// An interest increment with a gap, or a broken resync bracket (§10.6).
    #[error("interest out of order: {0}")]
    InterestOutOfOrder(String),
    /// The two brokers have no link protocol version in common.
    #[error("peer speaks link protocol versions {min}-{max}, this broker {ours_min}-{ours_max}")]
    UnsupportedVersion {
        /// Lowest version of the peer.
        min: u16,
        /// Highest version of the peer.
        max: u16,
        /// Lowest version of this broker.
        ours_min: u16,
        /// Highest version of this broker.
        ours_max: u16,
    },
    /// The peer belongs to another cluster: a configuration error.
    #[error(
        "cluster mismatch: this broker {ours_name:?} is in cluster {ours:?}, peer {peer:?} is in cluster {theirs:?}"
    )]
    ClusterMismatch {
        /// This broker's name.
        ours_name: String,
        /// This broker's cluster.
        ours: String,
        /// The peer's name.
        peer: String,
        /// The peer's cluster.
        theirs: String,
    },
    /// A link under TLS whose certificate names another broker than its
    /// handshake claims: a broker proves its name with its certificate.
    #[error("the peer says it is {claimed:?} but its certificate is for {certified:?}")]
    NameNotCertified {
        /// The name in `LINK_HELLO` or `LINK_WELCOME`.
        claimed: String,
        /// The name the certificate proves (empty if it names none).
        certified: String,
    },
    /// The TLS handshake of a dialled link failed (an untrusted or expired
    /// certificate, a wrong name, a plain-text peer).
    #[error("TLS: {0}")]
    Tls(String),
    /// The peer has this broker's own name.
    #[error("duplicate broker name: {0}")]
    DuplicateName(String),
    /// A link to a broker of the peer's name is already up (the two brokers
    /// dialled each other, or two brokers share a name).
    #[error("already linked: {0}")]
    AlreadyLinked(String),
    /// The peer sent a fatal `LINK_ERROR`.
    #[error("refused by the peer: {code}: {message}")]
    Refused {
        /// The peer's code.
        code: LinkErrorCode,
        /// The peer's explanation.
        message: String,
    },
    /// Nothing was heard from the peer for three ping intervals.
    #[error("nothing heard for {} ms", .0.as_millis())]
    Silent(Duration),
    /// Frames for the peer piled up past `link_send_queue_frames`.
    #[error("send queue full: the peer does not keep up")]
    Overflow,
    /// Another link to the same broker won the tie-break of two links.
    #[error("replaced by another link to the same broker (the one dialled by the broker whose name sorts first)")]
    Replaced,
    /// This broker is shutting down.
    #[error("broker is shutting down")]
    ShuttingDown,
}

impl LinkError {
    /// The fatal `LINK_ERROR` to send the peer before closing, when the peer
    /// should be told (not when it is gone or told us first).
    pub fn reply(&self) -> Option<LinkFrame> {
        let (code, message): (LinkErrorCode, String) = match self {
            // The peer is gone, silent, or told us first: nobody to tell.
            LinkError::Io(_) | LinkError::Closed | LinkError::Refused { .. } | LinkError::Silent(_) => return None,
            LinkError::HandshakeTimeout { .. } => (ErrorCode::HandshakeTimeout.into(), self.to_string()),
            LinkError::Decode(error) => (error.code().into(), error.to_string()),
            LinkError::Unexpected { .. } | LinkError::InterestOutOfOrder(_) => {
                (ErrorCode::UnexpectedFrame.into(), self.to_string())
            }
            LinkError::UnsupportedVersion { .. } => (ErrorCode::UnsupportedVersion.into(), self.to_string()),
            LinkError::ClusterMismatch { .. } => (LinkErrorCode::ClusterMismatch, self.to_string()),
            LinkError::DuplicateName(_) => (LinkErrorCode::DuplicateBrokerName, self.to_string()),
            LinkError::NameNotCertified { .. } => (ErrorCode::PermissionDenied.into(), self.to_string()),
            LinkError::Tls(_) => return None,
            LinkError::AlreadyLinked(_) | LinkError::Replaced => (LinkErrorCode::AlreadyLinked, self.to_string()),
            LinkError::Overflow => (ErrorCode::SlowConsumer.into(), self.to_string()),
            LinkError::ShuttingDown => (ErrorCode::ShuttingDown.into(), self.to_string()),
        };
        Some(error_frame(code, true, message))
    }

    /// True for refusals that mean the two brokers' configurations disagree,
    /// which an operator must fix (logged as warnings, not as noise).
    pub fn is_configuration_error(&self) -> bool {
        match self {
            LinkError::ClusterMismatch { .. }
            | LinkError::DuplicateName(_)
            | LinkError::NameNotCertified { .. }
            | LinkError::Tls(_) => true,
            LinkError::Refused { code, .. } => {
                matches!(code, LinkErrorCode::ClusterMismatch | LinkErrorCode::DuplicateBrokerName)
            }
            _ => false,
        }
    }

    /// True when one end already has a link up to the other's name, found by
    /// either end, or a link was replaced by a newer one: the normal outcome
    /// of two brokers that dial each other.
    pub fn is_already_linked(&self) -> bool {
        matches!(self, LinkError::AlreadyLinked(_) | LinkError::Replaced)
            || matches!(self, LinkError::Refused { code: LinkErrorCode::AlreadyLinked, .. })
    }
}
