//! The HTTP front-end's own counters, shown beside the broker's in
//! `GET /v1/admin/stats` (under `http`) and `GET /metrics`.

sift_broker::door_counters! {
    /// Counters of the HTTP front-end, updated with relaxed atomics.
    HttpCounters {
        /// HTTP connections accepted.
        connections_accepted,
        /// HTTP connections closed at once because `http.max_connections` were open.
        connections_refused,
        /// HTTP connections open now (a gauge).
        connections_current,
        /// Requests answered (every status).
        requests,
        /// Requests answered with a 4xx status.
        responses_client_error,
        /// Requests answered with a 5xx status.
        responses_server_error,
        /// Messages published through `POST /v1/messages` and WebSocket.
        messages_published,
        /// Signed-in sessions opened for callers with `Authorization`.
        signed_in_sessions,
        /// Request bodies refused for exceeding `http.max_body_bytes`.
        bodies_too_large,
        /// Request bodies not received within `http.body_timeout_ms`.
        body_timeouts,
        /// HTTP subscriptions created.
        subscriptions_created,
        /// HTTP subscriptions deleted after `http.subscription_idle_ms` without a consumer.
        subscriptions_expired,
        /// Server-sent-event streams open now (a gauge).
        event_streams_current,
        /// Events handed to server-sent-event streams.
        events_sent,
        /// Event-stream and WebSocket clients cut off for reading nothing
        /// within `http.slow_client_timeout_ms`.
        slow_clients_disconnected,
        /// Callback POSTs answered with a 2xx status.
        callbacks_delivered,
        /// Callback POSTs that failed (no connection, timeout, or a status other than 2xx).
        callbacks_failed,
        /// WebSocket sessions open now (a gauge).
        websockets_current,
        /// WebSocket messages received from clients.
        websocket_messages_received,
    }
}

impl HttpCounters {
    /// True for the counters that are gauges (levels, not totals).
    pub fn is_gauge(name: &str) -> bool {
        sift_broker::door::is_gauge(name)
    }
}
