//! The HTTP front-end's own counters, shown beside the broker's in
//! `GET /v1/admin/stats` (under `http`) and `GET /metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! http_counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Counters of the HTTP front-end, updated with relaxed atomics.
        #[derive(Debug, Default)]
        pub struct HttpCounters {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        impl HttpCounters {
            /// Name and value of every counter, in declaration order.
            pub fn entries(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(Ordering::Relaxed)),)*]
            }
        }
    };
}

http_counters! {
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
    /// Request bodies refused for exceeding `http.max_body_bytes`.
    bodies_too_large,
    /// Request bodies not received within `http.body_timeout_ms`.
    body_timeouts,
}

impl HttpCounters {
    /// Adds one to `counter`.
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes one from a gauge.
    pub(crate) fn drop_one(counter: &AtomicU64) {
        counter.fetch_sub(1, Ordering::Relaxed);
    }

    /// True for the counters that are gauges (levels, not totals).
    pub fn is_gauge(name: &str) -> bool {
        matches!(name, "connections_current")
    }
}
