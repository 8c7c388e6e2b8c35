//! `sift registry` (FJM2-Admin): where gateways register their link
//! address and learn of each other, with change notification.
//!
//! HTTP/1.1 and JSON:
//! - `PUT /gateways/NAME` with `{"link_address": "HOST:PORT", "ttl_ms": N}`
//!   registers or renews gateway NAME for `ttl_ms` (at most `--ttl-ms-max`);
//!   answers `{"version": V}`.
//! - `DELETE /gateways/NAME` removes it.
//! - `GET /gateways[?after=V&wait_ms=W]` answers
//!   `{"version": V, "gateways": [{"name", "link_address", "expires_in_ms"}]}`;
//!   with `after` equal to the current version it waits up to `wait_ms`
//!   (at most 30 000) for a change first: the change notification.
//!
//! Every change (a new gateway, a new address, a removal, an expiry) bumps
//! the version; a gateway that stops renewing lapses after its ttl.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::{Json, Router};
use clap::Args;
use tokio::sync::Notify;

use crate::CliError;

/// Longest a `GET` waits for a change.
const WAIT_MS_MAX: u64 = 30_000;
/// Longest gateway name accepted.
const NAME_BYTES_MAX: usize = 128;

/// Arguments of `sift registry`.
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// Address to serve HTTP on.
    #[arg(long, default_value = "127.0.0.1:7600")]
    listen: SocketAddr,
    /// Longest registration a gateway may ask for, ms.
    #[arg(long, default_value_t = 60_000)]
    ttl_ms_max: u64,
    /// Most gateways registered at once.
    #[arg(long, default_value_t = 1024)]
    max_gateways: usize,
    /// Serve HTTPS with this certificate chain (PEM); gateways reach it
    /// with `--tls-ca`.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
}

/// One registered gateway.
#[derive(Debug, Clone)]
struct Entry {
    link_address: String,
    expires: Instant,
}

/// The registry's state.
struct Registry {
    state: Mutex<RegistryState>,
    changed: Notify,
    /// Wakes the expiry task when a registration may lapse sooner than
    /// the one it sleeps until.
    registered: Notify,
    ttl_ms_max: u64,
    max_gateways: usize,
}

#[derive(Default)]
struct RegistryState {
    gateways: BTreeMap<String, Entry>,
    version: u64,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, RegistryState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bumps the version and wakes the waiting readers.
    fn bump(&self, state: &mut RegistryState) {
        state.version += 1;
        self.changed.notify_waiters();
    }

    /// Drops lapsed gateways; returns when the next one lapses.
    fn expire(&self, now: Instant) -> Option<Instant> {
        let mut state = self.lock();
        let before = state.gateways.len();
        state.gateways.retain(|_, entry| entry.expires > now);
        if state.gateways.len() != before {
            self.bump(&mut state);
        }
        state.gateways.values().map(|entry| entry.expires).min()
    }
}

#[derive(Debug, serde::Deserialize)]
struct Registration {
    link_address: String,
    ttl_ms: u64,
}

#[derive(Debug, serde::Deserialize)]
struct ListQuery {
    after: Option<u64>,
    wait_ms: Option<u64>,
}

type Failure = (StatusCode, Json<serde_json::Value>);

fn failure(status: StatusCode, message: String) -> Failure {
    (status, Json(serde_json::json!({ "error": message })))
}

async fn register(
    State(registry): State<Arc<Registry>>,
    Path(name): Path<String>,
    Json(registration): Json<Registration>,
) -> Result<Json<serde_json::Value>, Failure> {
    if name.is_empty() || name.len() > NAME_BYTES_MAX {
        return Err(failure(StatusCode::BAD_REQUEST, format!("name: 1 to {NAME_BYTES_MAX} bytes")));
    }
    if registration.link_address.parse::<SocketAddr>().is_err() {
        let why = format!("link_address {:?} is not HOST:PORT with an IP address", registration.link_address);
        return Err(failure(StatusCode::BAD_REQUEST, why));
    }
    let ttl = Duration::from_millis(registration.ttl_ms.clamp(1, registry.ttl_ms_max));
    let mut state = registry.lock();
    if !state.gateways.contains_key(&name) && state.gateways.len() >= registry.max_gateways {
        return Err(failure(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{} gateways registered (--max-gateways)", registry.max_gateways),
        ));
    }
    let entry = Entry { link_address: registration.link_address, expires: Instant::now() + ttl };
    let changed = state.gateways.get(&name).is_none_or(|old| old.link_address != entry.link_address);
    state.gateways.insert(name, entry);
    if changed {
        registry.bump(&mut state);
    }
    registry.registered.notify_one();
    Ok(Json(serde_json::json!({ "version": state.version })))
}

async fn remove(State(registry): State<Arc<Registry>>, Path(name): Path<String>) -> StatusCode {
    let mut state = registry.lock();
    if state.gateways.remove(&name).is_some() {
        registry.bump(&mut state);
    }
    StatusCode::NO_CONTENT
}

async fn list(State(registry): State<Arc<Registry>>, Query(query): Query<ListQuery>) -> Json<serde_json::Value> {
    if let Some(after) = query.after {
        let wait = Duration::from_millis(query.wait_ms.unwrap_or(0).min(WAIT_MS_MAX));
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let changed = registry.changed.notified();
            if registry.lock().version != after {
                break;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                break;
            }
        }
    }
    let now = Instant::now();
    let state = registry.lock();
    let gateways: Vec<serde_json::Value> = state
        .gateways
        .iter()
        .map(|(name, entry)| {
            let expires_in_ms = entry.expires.saturating_duration_since(now).as_millis() as u64;
            serde_json::json!({ "name": name, "link_address": entry.link_address, "expires_in_ms": expires_in_ms })
        })
        .collect();
    Json(serde_json::json!({ "version": state.version, "gateways": gateways }))
}

/// Runs the registry until SIGINT or SIGTERM.
pub async fn run(args: RegistryArgs) -> Result<(), CliError> {
    let registry = Arc::new(Registry {
        state: Mutex::new(RegistryState::default()),
        changed: Notify::new(),
        registered: Notify::new(),
        ttl_ms_max: args.ttl_ms_max.max(1),
        max_gateways: args.max_gateways.max(1),
    });
    let app = Router::new()
        .route("/gateways", get(list))
        .route("/gateways/{name}", put(register).delete(remove))
        .with_state(registry.clone());
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| CliError::File { path: args.listen.to_string(), source })?;
    let address = listener.local_addr().map_err(|source| CliError::File { path: args.listen.to_string(), source })?;
    let tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(
            sift_broker::tls::ServerTls::load(sift_broker::tls::TlsFiles { cert, key, client_ca: None })
                .map_err(|error| CliError::Usage(error.to_string()))?,
        ),
        _ => None,
    };
    let scheme = if tls.is_some() { " (TLS)" } else { "" };
    println!("sift registry listening on {address}{scheme}");
    let _ = std::io::Write::flush(&mut std::io::stdout());
    tokio::spawn(expire_lapsed(registry));
    let signals = crate::broker_cmd::Signals::install()?;
    let Some(tls) = tls else {
        return axum::serve(listener, app)
            .with_graceful_shutdown(signals.wait())
            .await
            .map_err(|source| CliError::File { path: address.to_string(), source });
    };
    serve_tls(listener, tls, app, signals).await;
    Ok(())
}

/// Serves `app` over TLS until SIGINT or SIGTERM: each connection's
/// handshake and requests run in a task of its own.
async fn serve_tls(
    listener: tokio::net::TcpListener,
    tls: Arc<sift_broker::tls::ServerTls>,
    app: Router,
    signals: crate::broker_cmd::Signals,
) {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        signals.wait().await;
        stop.send_replace(true);
    });
    // No broker stops this loop: a sender kept alive for its length
    // stands in for one (a dropped sender would end the loop at once).
    let (_no_broker, no_broker_stopping) = tokio::sync::watch::channel(false);
    let grace = sift_broker::front_end::SHUTDOWN_GRACE;
    let stopping = (stopped, no_broker_stopping);
    sift_broker::front_end::accept_connections("registry", listener, Some(tls), stopping, grace, move |accepted| {
        let app = app.clone();
        let incoming = accepted.stream;
        accepted.tasks.spawn(async move {
            let Some(stream) = incoming.open(sift_http::PLAIN_TEXT_REFUSAL).await else { return };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
        });
    })
    .await;
}

/// Drops each gateway when its registration lapses: sleeps until the
/// earliest lapse, or until a registration arrives (it may lapse sooner).
async fn expire_lapsed(registry: Arc<Registry>) {
    loop {
        let next = registry.expire(Instant::now());
        let wake = next.map_or(Duration::from_secs(1), |next| next.saturating_duration_since(Instant::now()));
        let registered = registry.registered.notified();
        tokio::select! {
            () = tokio::time::sleep(wake.max(Duration::from_millis(1))) => {}
            () = registered => {}
        }
    }
}
