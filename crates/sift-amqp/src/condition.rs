//! The broker's refusals in AMQP's words: the error condition a JMS client
//! turns into the matching exception (`amqp:unauthorized-access` into a
//! `JMSSecurityException`, `amqp:not-found` into an
//! `InvalidDestinationException`, `amqp:resource-limit-exceeded` into a
//! `ResourceAllocationException`), with the broker's explanation as the
//! description.

use fe2o3_amqp::types::definitions::{AmqpError, Error};
use sift_client::ClientError;
use sift_proto::ErrorCode;

/// The AMQP error of a refusal by the broker's session.
pub fn of_client_error(error: &ClientError) -> Error {
    let condition = match error {
        ClientError::Refused { code, .. } => of_code(*code),
        ClientError::Closed | ClientError::Disconnected => AmqpError::IllegalState,
        _ => AmqpError::InternalError,
    };
    let description = match error {
        ClientError::Refused { message, .. } => message.clone(),
        other => other.to_string(),
    };
    Error::new(condition, Some(description), None)
}

/// The condition of a native error code.
pub fn of_code(code: ErrorCode) -> AmqpError {
    match code {
        ErrorCode::AuthRequired | ErrorCode::AuthFailed | ErrorCode::PermissionDenied | ErrorCode::BadSignature => {
            AmqpError::UnauthorizedAccess
        }
        ErrorCode::TooManySubscriptions
        | ErrorCode::TooManyConnections
        | ErrorCode::PayloadTooLarge
        | ErrorCode::FrameTooLarge
        | ErrorCode::FilterTooLong
        | ErrorCode::PendingBytesExceeded
        | ErrorCode::StorageFull
        | ErrorCode::QueueFull
        | ErrorCode::SlowConsumer => AmqpError::ResourceLimitExceeded,
        ErrorCode::InvalidTopic | ErrorCode::UnknownStream | ErrorCode::UnknownDurable => AmqpError::NotFound,
        ErrorCode::InvalidFilter | ErrorCode::InvalidField | ErrorCode::DurableMismatch => AmqpError::InvalidField,
        ErrorCode::DurableInUse => AmqpError::ResourceLocked,
        ErrorCode::Unsupported => AmqpError::NotImplemented,
        _ => AmqpError::InternalError,
    }
}

/// An error with `condition` and `description`.
pub fn error(condition: AmqpError, description: impl Into<String>) -> Error {
    Error::new(condition, Some(description.into()), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_map_to_the_conditions_jms_clients_know() {
        let denied = ClientError::Refused { code: ErrorCode::PermissionDenied, message: "bob may not".into() };
        let error = of_client_error(&denied);
        assert_eq!(error.condition, AmqpError::UnauthorizedAccess.into());
        assert_eq!(error.description.as_deref(), Some("bob may not"));
        assert_eq!(of_code(ErrorCode::InvalidFilter), AmqpError::InvalidField);
        assert_eq!(of_code(ErrorCode::UnknownDurable), AmqpError::NotFound);
    }
}
