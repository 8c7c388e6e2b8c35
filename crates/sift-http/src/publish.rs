//! `POST /v1/messages`: publishing over HTTP.
//!
//! A request is a JSON envelope (`Content-Type: application/json`) or any
//! other body taken as the raw payload, with the topic and options in the
//! query string and properties in `sift-prop-NAME` headers. Either way it
//! becomes one confirmed `PUBLISH` on a publishing session, and the answer
//! is the broker's `CONFIRM`: `200` with the matched count, `404
//! no_subscribers` when nothing matched (the JBI broker's answer), `202`
//! when an await=delivered publish timed out before every ack came.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde::Deserialize;
use sift_client::{Confirm, ConfirmStatus, PublishOptions};
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};

use crate::counters::HttpCounters;
use crate::error::ApiError;
use crate::state::AppState;

/// Prefix of the headers that carry properties of a raw publish.
pub const PROPERTY_HEADER_PREFIX: &str = "sift-prop-";

/// The JSON envelope of a publish.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Envelope {
    topic: String,
    #[serde(default)]
    properties: serde_json::Map<String, serde_json::Value>,
    metadata: Option<String>,
    payload: Option<String>,
    payload_base64: Option<String>,
    mode: Option<String>,
    priority: Option<u8>,
    #[serde(rename = "await")]
    await_: Option<String>,
    await_timeout_ms: Option<u64>,
    ttl_ms: Option<u64>,
}

/// Options of a publish: envelope fields, or the query string of a raw one.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PublishParams {
    /// The topic (raw publishes only; an envelope has its own).
    #[serde(default)]
    topic: Option<String>,
    /// `best-effort` (the default), `reliable` or `persistent`.
    mode: Option<String>,
    /// 0-9; 4 by default.
    priority: Option<u8>,
    /// `delivered`: answer once every matched subscriber acknowledged.
    #[serde(rename = "await")]
    await_: Option<String>,
    /// How long an await=delivered publish waits; the broker's default when absent.
    await_timeout_ms: Option<u64>,
    /// Time to live: the message expires this long after it is published.
    ttl_ms: Option<u64>,
}

/// `POST /v1/messages`.
pub(crate) async fn publish(
    State(state): State<Arc<AppState>>,
    caller: crate::caller::Caller,
    params: Result<Query<PublishParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let Query(params) = params.map_err(|rejection| ApiError::bad_request("invalid_field", rejection.body_text()))?;
    let bytes = read_body(&state, &headers, body).await?;
    let (message, options) = match is_json(&headers) {
        true => {
            if params.topic.is_some() {
                let text = "a JSON envelope carries its own topic; drop ?topic= or send the body raw";
                return Err(ApiError::bad_request("invalid_field", text));
            }
            from_envelope(&bytes)?
        }
        false => from_raw(params, &headers, bytes)?,
    };
    let client = state.client_for(&caller).await?;
    let confirm = client.publish_confirmed(message, options).await.map_err(ApiError::from_client)?;
    HttpCounters::bump(&state.counters.messages_published);
    Ok(confirm_response(&confirm))
}

/// True when the body is a JSON envelope.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().to_ascii_lowercase().starts_with("application/json"))
}

/// Reads a request body within `http.max_body_bytes` and `http.body_timeout_ms`.
pub(crate) async fn read_body(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let limit = state.config.max_body_bytes;
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        HttpCounters::bump(&state.counters.bodies_too_large);
        return Err(too_large(limit));
    }
    let timeout = Duration::from_millis(state.config.body_timeout_ms);
    match tokio::time::timeout(timeout, collect(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(error)) => {
            if error.status_is_413() {
                HttpCounters::bump(&state.counters.bodies_too_large);
            }
            Err(error.into_api())
        }
        Err(_) => {
            HttpCounters::bump(&state.counters.body_timeouts);
            let text = format!("the request body did not arrive within http.body_timeout_ms = {}", timeout.as_millis());
            Err(ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", text))
        }
    }
}

/// Why a body could not be collected.
enum BodyError {
    TooLarge(usize),
    Broken(String),
}

impl BodyError {
    fn status_is_413(&self) -> bool {
        matches!(self, BodyError::TooLarge(_))
    }

    fn into_api(self) -> ApiError {
        match self {
            BodyError::TooLarge(limit) => too_large(limit),
            BodyError::Broken(reason) => ApiError::bad_request("malformed", format!("request body: {reason}")),
        }
    }
}

fn too_large(limit: usize) -> ApiError {
    let text = format!("the request body is larger than http.max_body_bytes = {limit}");
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "max_body_bytes", text)
}

/// Collects a body of at most `limit` bytes; a body that comes in one
/// chunk (the usual case) is not copied.
async fn collect(body: Body, limit: usize) -> Result<Bytes, BodyError> {
    let mut chunks = body.into_data_stream();
    let mut first: Option<Bytes> = None;
    let mut gathered = BytesMut::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|error| BodyError::Broken(error.to_string()))?;
        let so_far = first.as_ref().map_or(0, Bytes::len) + gathered.len();
        if so_far + chunk.len() > limit {
            return Err(BodyError::TooLarge(limit));
        }
        match first.take() {
            None if gathered.is_empty() => first = Some(chunk),
            earlier => {
                if let Some(earlier) = earlier {
                    gathered.extend_from_slice(&earlier);
                }
                gathered.extend_from_slice(&chunk);
            }
        }
    }
    Ok(first.unwrap_or_else(|| gathered.freeze()))
}

/// A message and its publish options from a JSON envelope's bytes.
fn from_envelope(bytes: &[u8]) -> Result<(Message, PublishOptions), ApiError> {
    let envelope: Envelope = serde_json::from_slice(bytes)
        .map_err(|error| ApiError::bad_request("bad_json", format!("the body is not a publish envelope: {error}")))?;
    envelope.into_message()
}

impl Envelope {
    /// Parses an envelope given as a JSON value (a WebSocket `publish`).
    pub(crate) fn from_value(value: serde_json::Value) -> Result<Envelope, ApiError> {
        serde_json::from_value(value)
            .map_err(|error| ApiError::bad_request("bad_json", format!("not a publish envelope: {error}")))
    }

    /// The message and its publish options.
    pub(crate) fn into_message(self) -> Result<(Message, PublishOptions), ApiError> {
        let envelope = self;
        let payload = match (envelope.payload, envelope.payload_base64) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request("invalid_field", "give payload or payload_base64, not both"));
            }
            (Some(text), None) => Bytes::from(text),
            (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                .decode(encoded.as_bytes())
                .map(Bytes::from)
                .map_err(|error| ApiError::bad_request("invalid_field", format!("payload_base64: {error}")))?,
            (None, None) => Bytes::new(),
        };
        let mut message = Message::new(topic(&envelope.topic)?, payload);
        for (name, value) in &envelope.properties {
            let typed = sift_client::json::value_from_json(value).map_err(|given| {
                let text = format!("property {name:?} is {given}; properties are booleans, numbers or strings");
                ApiError::bad_request("invalid_field", text)
            })?;
            message.properties.push((name.clone(), typed));
        }
        message.metadata = envelope.metadata.map(Bytes::from);
        let params = PublishParams {
            topic: None,
            mode: envelope.mode,
            priority: envelope.priority,
            await_: envelope.await_,
            await_timeout_ms: envelope.await_timeout_ms,
            ttl_ms: envelope.ttl_ms,
        };
        let options = apply_options(&mut message, &params)?;
        Ok((message, options))
    }
}

/// A message and its publish options from a raw body, the query string and
/// `sift-prop-NAME` headers (whose values are typed by their form, as on
/// the command line: `true`, `42`, `2.5`, else a string; `"42"` quoted is
/// a string).
fn from_raw(params: PublishParams, headers: &HeaderMap, body: Bytes) -> Result<(Message, PublishOptions), ApiError> {
    let Some(name) = params.topic.as_deref() else {
        let text = "a raw publish names its topic in the query string: POST /v1/messages?topic=NAME";
        return Err(ApiError::bad_request("invalid_topic", text));
    };
    let mut message = Message::new(topic(name)?, body);
    for (header, value) in headers {
        let Some(property) = header.as_str().strip_prefix(PROPERTY_HEADER_PREFIX) else { continue };
        let text = value.to_str().map_err(|_| {
            ApiError::bad_request("invalid_field", format!("header {header} is not visible ASCII text"))
        })?;
        message.properties.push((property.to_string(), Value::parse_typed(text)));
    }
    let options = apply_options(&mut message, &params)?;
    Ok((message, options))
}

fn topic(name: &str) -> Result<TopicName, ApiError> {
    TopicName::new(name).map_err(|error| ApiError::bad_request("invalid_topic", format!("topic: {error}")))
}

/// Applies mode, priority and time to live; returns the publish options.
fn apply_options(message: &mut Message, params: &PublishParams) -> Result<PublishOptions, ApiError> {
    if let Some(mode) = &params.mode {
        message.delivery_mode = mode.parse::<DeliveryMode>().map_err(|_| {
            ApiError::bad_request(
                "invalid_field",
                format!("mode {mode:?}: expected best-effort, reliable or persistent"),
            )
        })?;
    }
    if let Some(level) = params.priority {
        message.priority = Priority::new(level)
            .map_err(|_| ApiError::bad_request("invalid_field", format!("priority {level}: expected 0 to 9")))?;
    }
    if let Some(ttl_ms) = params.ttl_ms {
        message.expiry_ns = sift_core::system_now_ns().saturating_add(ttl_ms.saturating_mul(1_000_000));
    }
    let await_delivered = match params.await_.as_deref() {
        None => false,
        Some("delivered") => true,
        Some(other) => {
            let text = format!("await {other:?}: the only value is \"delivered\"");
            return Err(ApiError::bad_request("invalid_field", text));
        }
    };
    let await_timeout = params.await_timeout_ms.map(Duration::from_millis);
    Ok(PublishOptions { await_delivered, await_timeout })
}

/// The answer to a confirmed publish.
fn confirm_response(confirm: &Confirm) -> Response {
    let (status, body) = confirm_json(confirm);
    (status, axum::Json(body)).into_response()
}

/// The status and JSON answering a confirm (also a WebSocket `confirm`).
pub(crate) fn confirm_json(confirm: &Confirm) -> (StatusCode, serde_json::Value) {
    let (status, name) = match confirm.status {
        ConfirmStatus::Accepted => (StatusCode::OK, "accepted"),
        ConfirmStatus::Delivered => (StatusCode::OK, "delivered"),
        ConfirmStatus::Incomplete => (StatusCode::ACCEPTED, "incomplete"),
        ConfirmStatus::NoSubscribers => (StatusCode::NOT_FOUND, "no_subscribers"),
    };
    let mut body = serde_json::json!({ "status": name, "matched": confirm.matched });
    if let serde_json::Value::Object(fields) = &mut body {
        if confirm.status == ConfirmStatus::NoSubscribers {
            fields.insert("error".into(), "no_subscribers".into());
        }
        if matches!(confirm.status, ConfirmStatus::Delivered | ConfirmStatus::Incomplete) {
            fields.insert("acked".into(), confirm.acked.into());
            fields.insert("pending".into(), confirm.pending.clone().into());
        }
        if !confirm.stream.is_empty() {
            fields.insert("stream".into(), confirm.stream.clone().into());
            fields.insert("stream_seq".into(), confirm.stream_seq.into());
        }
    }
    (status, body)
}
