//! `GET /v1/admin/{stats|links|routes|subscriptions}`: the broker's `ADMIN`
//! reports as JSON, the same documents `sift admin --json` prints (the
//! `stats` report carries every front-end's counters under `doors`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sift_client::AdminQuery;

use crate::error::ApiError;
use crate::state::AppState;

/// `GET /v1/admin/{query}`.
pub(crate) async fn admin(
    State(state): State<Arc<AppState>>,
    caller: crate::caller::Caller,
    Path(query): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let query: AdminQuery =
        query.parse().map_err(|error: String| ApiError::new(StatusCode::NOT_FOUND, "not_found", error))?;
    let report = state.client_for(&caller).await?.admin(query).await.map_err(ApiError::from_client)?;
    Ok(Json(report))
}
