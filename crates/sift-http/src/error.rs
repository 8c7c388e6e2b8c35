//! Errors as HTTP answers: a status that fits and a JSON body naming the
//! error the way the native protocol does.
//!
//! Every error body is `{"error": CODE, "message": TEXT}`, with `position`
//! (a byte offset) when the broker named one in a filter or document, so
//! that a client can point at the mistake. `CODE` is the native error
//! code's name (`invalid_filter`, `max_payload_bytes`, ...) or one of this
//! front-end's own (`bad_json`, `max_body_bytes`, ...), listed in
//! `docs/HTTP.md`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sift_client::ClientError;
use sift_proto::ErrorCode;

/// An error answer.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into() }
    }

    /// 400 `code`: the request itself is wrong.
    pub(crate) fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// The answer to a broker's refusal or a failed session.
    pub(crate) fn from_client(error: ClientError) -> ApiError {
        match error {
            ClientError::Refused { code, message } => ApiError::new(status_of(code), code.name(), message),
            ClientError::Timeout(waited) => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                format!("the broker did not answer within {waited:?}"),
            ),
            ClientError::Closed
            | ClientError::Disconnected
            | ClientError::Connect { .. }
            | ClientError::NoClockEstimate => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", error.to_string())
            }
            ClientError::Encode(_) => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "max_frame_bytes", error.to_string())
            }
            ClientError::InvalidReply(_) => ApiError::new(StatusCode::BAD_GATEWAY, "internal", error.to_string()),
        }
    }
}

/// 404 `unknown_path`: no endpoint has this path. A JSON body like every
/// other error, so that a client that reads `error` never meets an empty one.
pub(crate) async fn unknown_path(uri: axum::http::Uri) -> ApiError {
    let message = format!("no endpoint at {}; docs/HTTP.md and GET /v1/openapi.yaml list them", uri.path());
    ApiError::new(StatusCode::NOT_FOUND, "unknown_path", message)
}

/// 405 `method_not_allowed`: the path exists, but not with this method.
pub(crate) async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    let message = format!("{} does not take {method}; docs/HTTP.md lists the methods of each endpoint", uri.path());
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", message)
}

/// The HTTP status that fits a native error code.
pub(crate) fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::FrameTooLarge | ErrorCode::PayloadTooLarge | ErrorCode::FilterTooLong => {
            StatusCode::PAYLOAD_TOO_LARGE
        }
        ErrorCode::TooManySubscriptions
        | ErrorCode::TooManyConnections
        | ErrorCode::PendingBytesExceeded
        | ErrorCode::SlowConsumer
        | ErrorCode::QueueFull => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::UnknownSubscription | ErrorCode::UnknownStream | ErrorCode::UnknownDurable => StatusCode::NOT_FOUND,
        ErrorCode::DuplicateSubscription | ErrorCode::StreamExists | ErrorCode::DurableInUse => StatusCode::CONFLICT,
        ErrorCode::StorageFull => StatusCode::INSUFFICIENT_STORAGE,
        ErrorCode::AuthRequired | ErrorCode::AuthFailed => StatusCode::UNAUTHORIZED,
        ErrorCode::PermissionDenied | ErrorCode::BadSignature => StatusCode::FORBIDDEN,
        ErrorCode::ShuttingDown | ErrorCode::StorageError | ErrorCode::NoQuorum => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Internal | ErrorCode::Unknown(_) => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorCode::Malformed
        | ErrorCode::UnsupportedVersion
        | ErrorCode::HandshakeTimeout
        | ErrorCode::InvalidTopic
        | ErrorCode::InvalidFilter
        | ErrorCode::Unsupported
        | ErrorCode::UnknownDeliveryTag
        | ErrorCode::UnexpectedFrame
        | ErrorCode::InvalidField
        | ErrorCode::DurableMismatch
        | ErrorCode::TlsRequired => StatusCode::BAD_REQUEST,
    }
}

impl ApiError {
    /// The JSON body: `error`, `message` and, when named, `position`.
    pub(crate) fn body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({ "error": self.code, "message": self.message });
        if let (Some(position), serde_json::Value::Object(fields)) =
            (sift_client::error::byte_position_in(&self.message), &mut body)
        {
            fields.insert("position".into(), position.into());
        }
        body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.body();
        (self.status, axum::Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_map_to_413_and_429_and_unknowns_to_404() {
        assert_eq!(status_of(ErrorCode::PayloadTooLarge), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(status_of(ErrorCode::PendingBytesExceeded), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(status_of(ErrorCode::UnknownStream), StatusCode::NOT_FOUND);
        assert_eq!(status_of(ErrorCode::InvalidFilter), StatusCode::BAD_REQUEST);
    }
}
