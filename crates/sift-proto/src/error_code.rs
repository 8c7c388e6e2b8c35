//! Error codes carried by `ERROR` frames.

/// Why the broker (or client) refused something. Codes are stable across
/// versions; `docs/PROTOCOL.md` lists them with their meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A frame body could not be parsed.
    Malformed,
    /// No protocol version in common.
    UnsupportedVersion,
    /// The frame is longer than `max_frame_bytes`.
    FrameTooLarge,
    /// The payload is longer than `max_payload_bytes`.
    PayloadTooLarge,
    /// The connection already has `max_subscriptions` subscriptions.
    TooManySubscriptions,
    /// The content filter is longer than `max_filter_bytes`.
    FilterTooLong,
    /// The broker already serves `max_connections` connections.
    TooManyConnections,
    /// No `HELLO` arrived within `handshake_timeout_ms`.
    HandshakeTimeout,
    /// More than `max_pending_bytes` are queued for a connection.
    PendingBytesExceeded,
    /// The topic or topic filter is invalid.
    InvalidTopic,
    /// The content filter is invalid or its language is not supported.
    InvalidFilter,
    /// The request is valid but this broker does not offer it (yet).
    Unsupported,
    /// The subscription id is not in use on this connection.
    UnknownSubscription,
    /// The subscription id is already in use on this connection.
    DuplicateSubscription,
    /// The delivery tag is not awaiting an acknowledgement.
    UnknownDeliveryTag,
    /// A frame arrived that is not allowed in the current state.
    UnexpectedFrame,
    /// The subscriber fell behind and its policy is `disconnect`.
    SlowConsumer,
    /// The broker is shutting down.
    ShuttingDown,
    /// A field is out of range (priority above 9, keep-last 0, an overlong
    /// client name, FLOW without credit mode...).
    InvalidField,
    /// The broker failed internally; the request may be retried.
    Internal,
    /// A persistent message could not be stored: the disk is full. Retry
    /// when space returns; nothing confirmed was lost.
    StorageFull,
    /// A persistent message could not be stored (another write failure).
    StorageError,
    /// No stream of that name.
    UnknownStream,
    /// A stream of that name already exists.
    StreamExists,
    /// No durable subscription of that name.
    UnknownDurable,
    /// The durable subscription has a consumer and is not shared (or the
    /// shared flags differ), or a stream is still read by durables.
    DurableInUse,
    /// A durable subscription resumed with another stream or other filters.
    DurableMismatch,
    /// The broker admits only signed-in clients and the frame came before
    /// a successful `AUTH` (fatal).
    AuthRequired,
    /// The `AUTH` was refused: unknown user, wrong password, a token that
    /// does not verify or has expired (fatal).
    AuthFailed,
    /// The signed-in user (or anonymous access) may not do this; the
    /// session goes on.
    PermissionDenied,
    /// The port speaks TLS and the client sent plain text (sent in plain
    /// text before the broker closes).
    TlsRequired,
    /// The topic requires messages signed by one of its keys, and this
    /// one is unsigned, signed by another key, or changed after signing;
    /// the session goes on.
    BadSignature,
    /// The queue already holds `storage.queue_max_msgs` messages waiting
    /// for a consumer; the publish was not stored. Retry once consumers
    /// have taken some.
    QueueFull,
    /// A persistent message for a replicated stream was not confirmed: no
    /// quorum of the stream's replicas could be reached (a partition, or
    /// brokers down). It may still be stored if the group heals; retry.
    NoQuorum,
    /// A code this version does not know.
    Unknown(u16),
}

impl ErrorCode {
    /// The wire value.
    pub fn code(self) -> u16 {
        match self {
            ErrorCode::Malformed => 1,
            ErrorCode::UnsupportedVersion => 2,
            ErrorCode::FrameTooLarge => 3,
            ErrorCode::PayloadTooLarge => 4,
            ErrorCode::TooManySubscriptions => 5,
            ErrorCode::FilterTooLong => 6,
            ErrorCode::TooManyConnections => 7,
            ErrorCode::HandshakeTimeout => 8,
            ErrorCode::PendingBytesExceeded => 9,
            ErrorCode::InvalidTopic => 10,
            ErrorCode::InvalidFilter => 11,
            ErrorCode::Unsupported => 12,
            ErrorCode::UnknownSubscription => 13,
            ErrorCode::DuplicateSubscription => 14,
            ErrorCode::UnknownDeliveryTag => 15,
            ErrorCode::UnexpectedFrame => 16,
            ErrorCode::SlowConsumer => 17,
            ErrorCode::ShuttingDown => 18,
            ErrorCode::InvalidField => 19,
            ErrorCode::Internal => 20,
            ErrorCode::StorageFull => 21,
            ErrorCode::StorageError => 22,
            ErrorCode::UnknownStream => 23,
            ErrorCode::StreamExists => 24,
            ErrorCode::UnknownDurable => 25,
            ErrorCode::DurableInUse => 26,
            ErrorCode::DurableMismatch => 27,
            ErrorCode::AuthRequired => 28,
            ErrorCode::AuthFailed => 29,
            ErrorCode::PermissionDenied => 30,
            ErrorCode::TlsRequired => 31,
            ErrorCode::BadSignature => 32,
            ErrorCode::QueueFull => 33,
            ErrorCode::NoQuorum => 34,
            ErrorCode::Unknown(code) => code,
        }
    }

    /// The code for a wire value; unknown values are kept, not rejected.
    pub fn from_code(code: u16) -> ErrorCode {
        const KNOWN: [ErrorCode; 34] = [
            ErrorCode::Malformed,
            ErrorCode::UnsupportedVersion,
            ErrorCode::FrameTooLarge,
            ErrorCode::PayloadTooLarge,
            ErrorCode::TooManySubscriptions,
            ErrorCode::FilterTooLong,
            ErrorCode::TooManyConnections,
            ErrorCode::HandshakeTimeout,
            ErrorCode::PendingBytesExceeded,
            ErrorCode::InvalidTopic,
            ErrorCode::InvalidFilter,
            ErrorCode::Unsupported,
            ErrorCode::UnknownSubscription,
            ErrorCode::DuplicateSubscription,
            ErrorCode::UnknownDeliveryTag,
            ErrorCode::UnexpectedFrame,
            ErrorCode::SlowConsumer,
            ErrorCode::ShuttingDown,
            ErrorCode::InvalidField,
            ErrorCode::Internal,
            ErrorCode::StorageFull,
            ErrorCode::StorageError,
            ErrorCode::UnknownStream,
            ErrorCode::StreamExists,
            ErrorCode::UnknownDurable,
            ErrorCode::DurableInUse,
            ErrorCode::DurableMismatch,
            ErrorCode::AuthRequired,
            ErrorCode::AuthFailed,
            ErrorCode::PermissionDenied,
            ErrorCode::TlsRequired,
            ErrorCode::BadSignature,
            ErrorCode::QueueFull,
            ErrorCode::NoQuorum,
        ];
        KNOWN.into_iter().find(|known| known.code() == code).unwrap_or(ErrorCode::Unknown(code))
    }

    /// A short name, as printed by tools and in logs.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Malformed => "malformed",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::FrameTooLarge => "max_frame_bytes",
            ErrorCode::PayloadTooLarge => "max_payload_bytes",
            ErrorCode::TooManySubscriptions => "max_subscriptions_per_connection",
            ErrorCode::FilterTooLong => "max_filter_bytes",
            ErrorCode::TooManyConnections => "max_connections",
            ErrorCode::HandshakeTimeout => "handshake_timeout_ms",
            ErrorCode::PendingBytesExceeded => "max_pending_bytes_per_connection",
            ErrorCode::InvalidTopic => "invalid_topic",
            ErrorCode::InvalidFilter => "invalid_filter",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::UnknownSubscription => "unknown_subscription",
            ErrorCode::DuplicateSubscription => "duplicate_subscription",
            ErrorCode::UnknownDeliveryTag => "unknown_delivery_tag",
            ErrorCode::UnexpectedFrame => "unexpected_frame",
            ErrorCode::SlowConsumer => "slow_consumer",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::InvalidField => "invalid_field",
            ErrorCode::Internal => "internal",
            ErrorCode::StorageFull => "storage_full",
            ErrorCode::StorageError => "storage_error",
            ErrorCode::UnknownStream => "unknown_stream",
            ErrorCode::StreamExists => "stream_exists",
            ErrorCode::UnknownDurable => "unknown_durable",
            ErrorCode::DurableInUse => "durable_in_use",
            ErrorCode::DurableMismatch => "durable_mismatch",
            ErrorCode::AuthRequired => "auth_required",
            ErrorCode::AuthFailed => "auth_failed",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::TlsRequired => "tls_required",
            ErrorCode::BadSignature => "bad_signature",
            ErrorCode::QueueFull => "queue_full",
            ErrorCode::NoQuorum => "no_quorum",
            ErrorCode::Unknown(_) => "unknown",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{} ({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The highest code this version knows.
    const LAST_KNOWN: u16 = 34;

    #[test]
    fn codes_round_trip_and_unknown_codes_survive() {
        for code in 1..=LAST_KNOWN {
            assert_eq!(ErrorCode::from_code(code).code(), code);
            assert!(!matches!(ErrorCode::from_code(code), ErrorCode::Unknown(_)));
        }
        assert_eq!(ErrorCode::from_code(0), ErrorCode::Unknown(0));
        assert_eq!(ErrorCode::from_code(LAST_KNOWN + 1), ErrorCode::Unknown(LAST_KNOWN + 1));
        assert_eq!(ErrorCode::from_code(999), ErrorCode::Unknown(999));
        assert_eq!(ErrorCode::Unknown(999).code(), 999);
    }

    #[test]
    fn names_are_distinct_and_the_storage_codes_follow_internal() {
        let names: std::collections::HashSet<_> =
            (1..=LAST_KNOWN).map(|code| ErrorCode::from_code(code).name()).collect();
        assert_eq!(names.len(), usize::from(LAST_KNOWN));
        let persistence = [
            (21, ErrorCode::StorageFull, "storage_full"),
            (22, ErrorCode::StorageError, "storage_error"),
            (23, ErrorCode::UnknownStream, "unknown_stream"),
            (24, ErrorCode::StreamExists, "stream_exists"),
            (25, ErrorCode::UnknownDurable, "unknown_durable"),
            (26, ErrorCode::DurableInUse, "durable_in_use"),
            (27, ErrorCode::DurableMismatch, "durable_mismatch"),
        ];
        for (code, error, name) in persistence {
            assert_eq!((ErrorCode::from_code(code), error.name()), (error, name));
        }
    }
}
