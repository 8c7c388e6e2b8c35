//! `GET /metrics`: the broker's counters and gauges in the Prometheus text
//! format.
//!
//! Each scrape asks the broker for its `stats` and `subscriptions` reports
//! (two in-process round trips) and sets the exporter's values from them,
//! so that nothing is counted twice and the broker's hot path does not
//! change. Names follow the Prometheus conventions: a `sift_` prefix,
//! counters ending in `_total`, gauges without it, labels for the filter
//! language. The exposition is `metrics-exporter-prometheus`'s.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use sift_broker::door::Door;
use sift_client::AdminQuery;

use crate::error::ApiError;
use crate::state::AppState;

/// Content type of the Prometheus text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Broker counters that are levels, not totals: exported as gauges.
const BROKER_GAUGES: [&str; 12] = [
    "connections_current",
    "memory_bytes",
    "memory_bytes_max",
    "links_up",
    "interest_entries",
    "forward_frames_kept",
    "stored_bytes",
    "stored_messages",
    "stored_segments",
    "fsync_us_max",
    "streams",
    "durables",
];

/// The doors, as connection labels.
const DOORS: [Door; 5] = [Door::Native, Door::Http, Door::Stomp, Door::Mqtt, Door::Amqp];

/// The filter languages, as subscription labels.
const FILTER_LANGUAGES: [&str; 5] = ["none", "tags", "sql", "xpath", "regex"];

/// The recorder the scrapes fill and render; kept apart from any global
/// recorder so that embedding applications keep theirs.
pub(crate) struct Exporter {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Exporter").finish_non_exhaustive()
    }
}

impl Exporter {
    pub(crate) fn new() -> Exporter {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        Exporter { recorder, handle }
    }

    /// Sets every value from the broker's reports and renders the text.
    fn render(&self, stats: &serde_json::Value, subscriptions: &serde_json::Value) -> String {
        metrics::with_local_recorder(&self.recorder, || {
            set_broker_counters(stats);
            set_subscription_gauges(subscriptions);
            set_door_counters(stats);
        });
        let mut text = self.handle.render();
        for (name, metric) in
            [("deliver_latency", "sift_deliver_latency_seconds"), ("fsync_latency", "sift_fsync_latency_seconds")]
        {
            render_histogram(&mut text, metric, &stats["histograms"][name]);
        }
        text
    }
}

/// Appends a broker histogram (`{"bounds_us", "counts", "sum_ns"}`) in the
/// text format: cumulative buckets with bounds in seconds, `+Inf`, sum and
/// count. The exporter crate takes samples, not buckets counted elsewhere,
/// so these lines are written here.
fn render_histogram(text: &mut String, metric: &str, histogram: &serde_json::Value) {
    use std::fmt::Write;
    let Some(counts) = histogram["counts"].as_array() else { return };
    let bounds = histogram["bounds_us"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(text, "# TYPE {metric} histogram");
    let mut cumulative = 0u64;
    for (index, count) in counts.iter().enumerate() {
        cumulative += count.as_u64().unwrap_or(0);
        let bound = match bounds.get(index).and_then(serde_json::Value::as_u64) {
            Some(bound_us) => format!("{}", bound_us as f64 / 1e6),
            None => "+Inf".to_string(),
        };
        let _ = writeln!(text, "{metric}_bucket{{le=\"{bound}\"}} {cumulative}");
    }
    let sum_seconds = histogram["sum_ns"].as_u64().unwrap_or(0) as f64 / 1e9;
    let _ = writeln!(text, "{metric}_sum {sum_seconds}");
    let _ = writeln!(text, "{metric}_count {cumulative}");
    text.push('\n');
}

/// Every broker counter of the `stats` report, and each stream's gauges.
fn set_broker_counters(stats: &serde_json::Value) {
    let counters = stats["counters"].as_object().into_iter().flatten();
    for (name, value) in counters {
        let Some(value) = value.as_u64() else { continue };
        if BROKER_GAUGES.contains(&name.as_str()) {
            metrics::gauge!(format!("sift_{name}")).set(value as f64);
        } else {
            metrics::counter!(format!("sift_{}_total", name.trim_end_matches("_total"))).absolute(value);
        }
    }
}

/// Each front-end's counters from the `stats` report's `doors`, as
/// `sift_DOOR_NAME_total` (or `sift_DOOR_NAME` for a level).
fn set_door_counters(stats: &serde_json::Value) {
    for (door, counters) in stats["doors"].as_object().into_iter().flatten() {
        for (name, value) in counters.as_object().into_iter().flatten() {
            let Some(value) = value.as_u64() else { continue };
            match sift_broker::door::is_gauge(name) {
                true => metrics::gauge!(format!("sift_{door}_{name}")).set(value as f64),
                false => {
                    metrics::counter!(format!("sift_{door}_{}_total", name.trim_end_matches("_total"))).absolute(value)
                }
            }
        }
    }
}

/// Subscriptions by filter language, queued deliveries, queued bytes and
/// unacknowledged deliveries, from the `subscriptions` report.
fn set_subscription_gauges(report: &serde_json::Value) {
    let mut by_language = [0u64; FILTER_LANGUAGES.len()];
    let (mut queued, mut queued_max, mut pending_bytes, mut unacked) = (0, 0, 0, 0);
    let mut by_door = [0u64; DOORS.len()];
    for connection in report["connections"].as_array().into_iter().flatten() {
        if let Some(index) = DOORS.iter().position(|door| connection["door"].as_str() == Some(door.name())) {
            by_door[index] += 1;
        }
        pending_bytes += connection["pending_bytes"].as_u64().unwrap_or(0);
        unacked += connection["unacked"].as_u64().unwrap_or(0);
        for subscription in connection["subscriptions"].as_array().into_iter().flatten() {
            let language = subscription["content"]["language"].as_str().unwrap_or("none");
            if let Some(index) = FILTER_LANGUAGES.iter().position(|known| *known == language) {
                by_language[index] += 1;
            }
            let depth = subscription["queued"].as_u64().unwrap_or(0);
            queued += depth;
            queued_max = queued_max.max(depth);
        }
    }
    for (language, count) in FILTER_LANGUAGES.iter().zip(by_language) {
        metrics::gauge!("sift_subscriptions", "filter" => *language).set(count as f64);
    }
    for (door, count) in DOORS.iter().zip(by_door) {
        metrics::gauge!("sift_client_connections", "door" => door.name()).set(count as f64);
    }
    metrics::gauge!("sift_queued_deliveries").set(queued as f64);
    metrics::gauge!("sift_queued_deliveries_max").set(queued_max as f64);
    metrics::gauge!("sift_pending_bytes").set(pending_bytes as f64);
    metrics::gauge!("sift_unacked_deliveries").set(unacked as f64);
}

/// `GET /metrics`.
pub(crate) async fn metrics(
    State(state): State<Arc<AppState>>,
    caller: crate::caller::Caller,
) -> Result<Response, ApiError> {
    let client = state.client_for(&caller).await?;
    let stats = client.admin(AdminQuery::Stats).await.map_err(ApiError::from_client)?;
    let subscriptions = client.admin(AdminQuery::Subscriptions).await.map_err(ApiError::from_client)?;
    let text = state.metrics.render(&stats, &subscriptions);
    Ok(([(header::CONTENT_TYPE, TEXT_FORMAT)], text).into_response())
}
