//! Streams, durable subscriptions and archive queries over HTTP: the
//! native `MANAGE` operations and `QUERY` (`docs/PROTOCOL.md` §6.17).
//!
//! - `GET /v1/streams`, `POST /v1/streams`, `GET|DELETE /v1/streams/{name}`
//! - `GET /v1/durables`, `GET|DELETE /v1/durables/{name}`
//! - `GET /v1/streams/{name}/messages?topic=&sql=&since=&until=&limit=`:
//!   the stored messages that match, streamed as JSON lines, one message
//!   per line, and a last line `{"done": {"matched", "scanned", "missed"}}`.
//!
//! A query runs on a session of its own: its results flow at the HTTP
//! client's pace, and a slow reader must not hold up the publishing
//! sessions' confirms.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use sift_client::{FilterKind, ManageOp, QueryEvent, QueryOptions};

use crate::caller::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// Content type of a query's answer: one JSON document per line.
const JSON_LINES: &str = "application/x-ndjson";

async fn manage(
    (state, caller): (&AppState, &Caller),
    op: ManageOp,
    body: serde_json::Value,
) -> Result<serde_json::Value, ApiError> {
    state.client_for(caller).await?.manage(op, body).await.map_err(ApiError::from_client)
}

/// `GET /v1/streams`.
pub(crate) async fn list_streams(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(manage((&state, &caller), ManageOp::StreamLs, serde_json::json!({})).await?))
}

/// `POST /v1/streams`: the body is a stream definition (`name`, `topics`,
/// `max_age_ms`, `max_bytes`, `max_msgs`, `fsync`), as `MANAGE stream_add`.
pub(crate) async fn add_stream(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = crate::publish::read_body(&state, &headers, body).await?;
    let definition: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|error| ApiError::bad_request("bad_json", format!("the body is not a stream definition: {error}")))?;
    let info = manage((&state, &caller), ManageOp::StreamAdd, definition).await?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

/// `GET /v1/streams/{name}`.
pub(crate) async fn stream_info(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(manage((&state, &caller), ManageOp::StreamInfo, serde_json::json!({ "name": name })).await?))
}

/// `DELETE /v1/streams/{name}`.
pub(crate) async fn remove_stream(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(manage((&state, &caller), ManageOp::StreamRm, serde_json::json!({ "name": name })).await?))
}

/// `GET /v1/durables`.
pub(crate) async fn list_durables(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(manage((&state, &caller), ManageOp::DurableLs, serde_json::json!({})).await?))
}

/// `GET /v1/durables/{name}`.
pub(crate) async fn durable_info(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(manage((&state, &caller), ManageOp::DurableInfo, serde_json::json!({ "name": name })).await?))
}

/// `DELETE /v1/durables/{name}`.
pub(crate) async fn remove_durable(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(manage((&state, &caller), ManageOp::DurableRm, serde_json::json!({ "name": name })).await?))
}

/// The query string of `GET /v1/streams/{name}/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryParams {
    topic: Option<String>,
    tags: Option<String>,
    sql: Option<String>,
    xpath: Option<String>,
    regex: Option<String>,
    /// RFC 3339: only messages stored at or after it.
    since: Option<String>,
    /// RFC 3339: only messages stored at or before it.
    until: Option<String>,
    limit: Option<u32>,
}

impl QueryParams {
    fn options(self, stream: String) -> Result<QueryOptions, ApiError> {
        let filters: Vec<(FilterKind, String)> = [
            (FilterKind::Tags, self.tags),
            (FilterKind::Sql, self.sql),
            (FilterKind::Xpath, self.xpath),
            (FilterKind::Regex, self.regex),
        ]
        .into_iter()
        .filter_map(|(kind, text)| text.map(|text| (kind, text)))
        .collect();
        if filters.len() > 1 {
            return Err(ApiError::bad_request("invalid_field", "give at most one of tags, sql, xpath and regex"));
        }
        let time = |name: &str, text: Option<String>| match text {
            None => Ok(0),
            Some(text) => sift_proto::parse_rfc3339_ns(&text)
                .map_err(|error| ApiError::bad_request("invalid_field", format!("{name}: {error}"))),
        };
        Ok(QueryOptions {
            stream,
            topic_filter: self.topic.unwrap_or_default(),
            filter: filters.into_iter().next(),
            since_ns: time("since", self.since)?,
            until_ns: time("until", self.until)?,
            limit: self.limit.unwrap_or(0),
        })
    }
}

/// `GET /v1/streams/{name}/messages`.
pub(crate) async fn query(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
    params: Result<Query<QueryParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(params) = params.map_err(|rejection| ApiError::bad_request("invalid_field", rejection.body_text()))?;
    let options = params.options(name)?;
    state.admit(&caller)?;
    let session = crate::state::session_as(&state.connector, "http-query".into(), caller.0.clone())
        .await
        .map_err(ApiError::from_client)?;
    let mut results = session.query(options).map_err(ApiError::from_client)?;
    // The first event decides the status: a refusal (unknown stream, bad
    // filter) is an error answer, anything else starts the stream.
    let first = results.next().await;
    if let Some(QueryEvent::Failed(error)) = first {
        session.close().await;
        return Err(ApiError::from_client(error));
    }
    let session = Closing(Some(session));
    let lines =
        futures_util::stream::unfold((Some(first), results, session), |(first, mut results, session)| async move {
            let event = match first {
                Some(event) => event,
                None => results.next().await,
            };
            let line = match event {
                Some(QueryEvent::Message { stream_seq, message }) => {
                    sift_client::json::message_json(&message, &[("stream_seq", stream_seq.into())])
                }
                Some(QueryEvent::Done { matched, scanned, missed }) => {
                    serde_json::json!({ "done": { "matched": matched, "scanned": scanned, "missed": missed } })
                }
                Some(QueryEvent::Failed(error)) => ApiError::from_client(error).body(),
                None => return None,
            };
            let mut text = line.to_string();
            text.push('\n');
            Some((Ok::<_, std::convert::Infallible>(text), (None, results, session)))
        });
    Ok(([(header::CONTENT_TYPE, JSON_LINES)], Body::from_stream(lines)).into_response())
}

/// A query's session, closed when the answer's body is dropped: at its end,
/// or when the HTTP client went away in the middle.
struct Closing(Option<sift_client::Client>);

impl Drop for Closing {
    fn drop(&mut self) {
        if let Some(session) = self.0.take() {
            tokio::spawn(async move { session.close().await });
        }
    }
}
