//! The HTTP listener: accepts connections under `http.max_connections`,
//! serves each with hyper's HTTP/1.1 under the configured header size and
//! timeouts, and shuts down with the broker.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::HttpConfig;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use sift_broker::front_end::{BindError, FrontEnd, Incoming, Listening};
use sift_broker::tls::DoorStream;
use sift_broker::InProcessConnector;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::counters::HttpCounters;
use crate::state::AppState;

/// Why the HTTP front-end could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The address could not be bound.
    #[error("cannot serve HTTP: {0}")]
    Bind(#[from] BindError),
    /// The TLS files could not be read.
    #[error("cannot serve HTTPS: {0}")]
    Tls(#[from] sift_broker::tls::TlsError),
    /// The publishing sessions could not be opened.
    #[error("cannot open the HTTP front-end's broker sessions: {0}")]
    Session(#[from] sift_client::ClientError),
}

/// A running HTTP front-end. Stop it with [`HttpFrontEnd::shutdown`] before
/// the broker, so that its sessions close cleanly.
#[derive(Debug)]
pub struct HttpFrontEnd {
    listening: Listening,
    state: Arc<AppState>,
}

impl FrontEnd for HttpFrontEnd {
    type Config = HttpConfig;
    type Counters = HttpCounters;
    type Error = HttpError;

    fn listen_address(config: &HttpConfig) -> SocketAddr {
        config.listen
    }

    async fn start_on(
        listener: TcpListener,
        config: HttpConfig,
        connector: InProcessConnector,
    ) -> Result<HttpFrontEnd, HttpError> {
        let tls = config.tls.clone().map(sift_broker::tls::ServerTls::load).transpose()?;
        let (stop, stopped) = watch::channel(false);
        let state = Arc::new(AppState::open(config, connector, stopped.clone()).await?);
        tokio::spawn(crate::subscriptions::reap_idle(state.clone(), stopped));
        let router = routes(state.clone());
        let admitting = state.clone();
        let door = (sift_broker::door::Door::Http, &state.connector);
        let listening = Listening::serve(door, listener, tls, stop, move |accepted| {
            admit(accepted.stream, &admitting, &router, accepted.closing, accepted.tasks)
        })?;
        Ok(HttpFrontEnd { listening, state })
    }

    fn listening(&self) -> &Listening {
        &self.listening
    }

    fn counters(&self) -> &HttpCounters {
        &self.state.counters
    }

    /// Stops accepting, lets open requests finish (within a grace period)
    /// and closes the broker sessions.
    async fn shutdown(self) {
        self.listening.stop_accepting();
        // Event streams end when their subscriptions close; publishes in
        // flight finish on the publishing sessions, closed last.
        self.state.subscriptions.close_all().await;
        self.listening.join().await;
        self.state.close().await;
    }
}

/// Every route of the front-end.
fn routes(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/messages", post(crate::publish::publish))
        .route("/v1/subscriptions", post(crate::subscriptions::create).get(crate::subscriptions::list))
        .route("/v1/subscriptions/{id}", axum::routing::delete(crate::subscriptions::delete))
        .route("/v1/subscriptions/{id}/events", get(crate::sse::events))
        .route("/v1/ws", get(crate::ws::upgrade))
        .route("/v1/streams", get(crate::streams::list_streams).post(crate::streams::add_stream))
        .route("/v1/streams/{name}", get(crate::streams::stream_info).delete(crate::streams::remove_stream))
        .route("/v1/streams/{name}/messages", get(crate::streams::query))
        .route("/v1/durables", get(crate::streams::list_durables))
        .route("/v1/durables/{name}", get(crate::streams::durable_info).delete(crate::streams::remove_durable))
        .route("/v1/admin/{query}", get(crate::admin::admin))
        .route("/metrics", get(crate::metrics::metrics))
        .route("/v1/openapi.yaml", get(openapi))
        .route("/", get(crate::dashboard::index))
        .route("/assets/{name}", get(crate::dashboard::named))
        .fallback(crate::error::unknown_path)
        .method_not_allowed_fallback(crate::error::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), count_responses))
        .with_state(state)
}

/// The OpenAPI description of these endpoints (`docs/openapi.yaml`).
const OPENAPI_YAML: &str = include_str!("../../../docs/openapi.yaml");

/// `GET /v1/openapi.yaml`.
async fn openapi() -> impl axum::response::IntoResponse {
    ([(axum::http::header::CONTENT_TYPE, "application/yaml")], OPENAPI_YAML)
}

/// Counts every answer by its status class.
async fn count_responses(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let counters = &state.counters;
    HttpCounters::bump(&counters.requests);
    if response.status().is_client_error() {
        HttpCounters::bump(&counters.responses_client_error);
    } else if response.status().is_server_error() {
        HttpCounters::bump(&counters.responses_server_error);
    }
    response
}

/// Serves `stream`, or closes it at once when `http.max_connections` are open.
fn admit(
    stream: Incoming,
    state: &Arc<AppState>,
    router: &Router,
    draining: &watch::Receiver<bool>,
    connections: &mut JoinSet<()>,
) {
    let counters = &state.counters;
    if connections.len() >= state.config.max_connections as usize {
        HttpCounters::bump(&counters.connections_refused);
        drop(stream);
        return;
    }
    HttpCounters::bump(&counters.connections_accepted);
    HttpCounters::bump(&counters.connections_current);
    connections.spawn(serve(stream, state.clone(), router.clone(), draining.clone()));
}

/// What a client that speaks plain HTTP to an HTTPS port is told (the
/// front-end's, and the gateway registry's).
pub const PLAIN_TEXT_REFUSAL: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 46\r\nconnection: close\r\n\r\nThis port speaks HTTPS: use https:// instead.\n";

/// Serves one connection until it closes or shutdown drains it.
async fn serve(incoming: Incoming, state: Arc<AppState>, router: Router, draining: watch::Receiver<bool>) {
    if let Some(stream) = incoming.open(PLAIN_TEXT_REFUSAL).await {
        serve_http(stream, &state, router, draining).await;
    }
    HttpCounters::drop_one(&state.counters.connections_current);
}

/// Serves HTTP/1.1 (and upgrades to WebSocket) on an open connection.
async fn serve_http(stream: DoorStream, state: &AppState, router: Router, mut draining: watch::Receiver<bool>) {
    let config = &state.config;
    // A client certificate's name goes with every request of the
    // connection, for callers without an Authorization header.
    let router = match stream.peer_identity() {
        Some(name) => router.layer(axum::Extension(crate::caller::Certified(name))),
        None => router,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(config.header_timeout_ms))
        .max_buf_size(config.max_header_bytes)
        .keep_alive(true);
    let service = TowerToHyperService::new(router);
    let connection = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => log_end(result),
        _ = draining.changed() => {
            connection.as_mut().graceful_shutdown();
            log_end(connection.await);
        }
    }
}

fn log_end(result: Result<(), hyper::Error>) {
    if let Err(error) = result {
        tracing::debug!(%error, "HTTP connection ended");
    }
}
