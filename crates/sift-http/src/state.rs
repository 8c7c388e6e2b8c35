//! What every handler shares: the configuration, the way into the broker,
//! the publishing sessions and the counters.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::config::HttpConfig;
use sift_broker::InProcessConnector;
use sift_client::{Client, ClientError, ClientOptions, Credentials};

use crate::caller::Caller;
use crate::error::ApiError;

use crate::counters::HttpCounters;

/// State shared by the handlers of one HTTP front-end.
#[derive(Debug)]
pub(crate) struct AppState {
    /// `[http]` as configured.
    pub config: HttpConfig,
    /// Opens sessions into the broker.
    pub connector: InProcessConnector,
    /// Sessions that carry `POST /v1/messages`, used in turn.
    publishers: Vec<Client>,
    next_publisher: AtomicUsize,
    /// This front-end's counters.
    pub counters: Arc<HttpCounters>,
    /// The Prometheus exposition of `GET /metrics`.
    pub metrics: crate::metrics::Exporter,
    /// HTTP subscriptions, by id.
    pub subscriptions: crate::subscriptions::Registry,
    /// Turns true when the front-end stops (upgraded WebSockets watch it).
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// Sessions signed in for callers with `Authorization`, by user, with
    /// the secret they signed in with (bounded by
    /// `http.signed_in_sessions_max`).
    signed_in: tokio::sync::Mutex<SignedIn>,
}

/// The signed-in sessions, oldest first.
#[derive(Debug, Default)]
struct SignedIn {
    sessions: std::collections::VecDeque<(Credentials, Client)>,
}

impl AppState {
    /// Opens the publishing sessions.
    pub(crate) async fn open(
        config: HttpConfig,
        connector: InProcessConnector,
        stopping: tokio::sync::watch::Receiver<bool>,
    ) -> Result<AppState, ClientError> {
        let counters = Arc::new(HttpCounters::default());
        connector.register_door(sift_broker::door::Door::Http, counters.clone());
        let mut publishers = Vec::with_capacity(config.publish_sessions as usize);
        for index in 0..config.publish_sessions {
            publishers.push(session(&connector, format!("http-publish-{index}")).await?);
        }
        Ok(AppState {
            config,
            connector,
            publishers,
            next_publisher: AtomicUsize::new(0),
            counters,
            metrics: crate::metrics::Exporter::new(),
            subscriptions: crate::subscriptions::Registry::default(),
            stopping,
            signed_in: tokio::sync::Mutex::new(SignedIn::default()),
        })
    }

    /// The next publishing session, in turn. Its name (`http-publish-N`)
    /// is stamped as the publisher of what it publishes.
    pub(crate) fn publisher(&self) -> &Client {
        let index = self.next_publisher.fetch_add(1, Ordering::Relaxed) % self.publishers.len();
        &self.publishers[index]
    }

    /// The session a request acts through: for a caller with
    /// credentials, a session signed in with exactly those (reused while
    /// they stay the same, so a password is checked by the broker once per
    /// session, not once per request); for an anonymous caller, the next
    /// publishing session, unless the broker requires sign-in (401).
    pub(crate) async fn client_for(&self, caller: &Caller) -> Result<Client, ApiError> {
        self.admit(caller)?;
        let Some(credentials) = &caller.0 else { return Ok(self.publisher().clone()) };
        let mut signed_in = self.signed_in.lock().await;
        if let Some((_, client)) = signed_in.sessions.iter().find(|(held, _)| same_credentials(held, credentials)) {
            return Ok(client.clone());
        }
        let name = format!("http-{}", credentials.user);
        let client =
            session_as(&self.connector, name, Some(credentials.clone())).await.map_err(ApiError::from_client)?;
        HttpCounters::bump(&self.counters.signed_in_sessions);
        // A user signs in once: new credentials for the same name replace
        // its session, and the oldest goes when the table is full.
        if let Some(position) = signed_in.sessions.iter().position(|(held, _)| held.user == credentials.user) {
            if let Some((_, old)) = signed_in.sessions.remove(position) {
                old.close().await;
            }
        }
        if signed_in.sessions.len() >= self.config.signed_in_sessions_max as usize {
            if let Some((_, oldest)) = signed_in.sessions.pop_front() {
                oldest.close().await;
            }
        }
        signed_in.sessions.push_back((credentials.clone(), client.clone()));
        debug_assert!(signed_in.sessions.len() <= self.config.signed_in_sessions_max as usize);
        Ok(client)
    }

    /// Refuses (401) a caller without credentials when the broker requires
    /// sign-in, before any session is opened for it.
    pub(crate) fn admit(&self, caller: &Caller) -> Result<(), ApiError> {
        if caller.0.is_none() && self.connector.requires_sign_in() {
            let text = "this broker requires sign-in: send Authorization: Basic (user:password) or Bearer";
            return Err(ApiError::new(axum::http::StatusCode::UNAUTHORIZED, "auth_required", text));
        }
        Ok(())
    }

    /// Closes the subscriptions and the publishing sessions.
    pub(crate) async fn close(&self) {
        self.subscriptions.close_all().await;
        for publisher in &self.publishers {
            publisher.close().await;
        }
        for (_, client) in self.signed_in.lock().await.sessions.drain(..) {
            client.close().await;
        }
    }
}

/// True when two credentials are the same, compared in time that does not
/// depend on where the secrets first differ.
pub(crate) fn same_credentials(held: &Credentials, given: &Credentials) -> bool {
    let (held_secret, given_secret) = (held.secret.as_bytes(), given.secret.as_bytes());
    let differing = held_secret.iter().zip(given_secret).fold(0u8, |acc, (left, right)| acc | (left ^ right));
    held.method == given.method && held.user == given.user && held_secret.len() == given_secret.len() && differing == 0
}

/// A new in-process session named `name`. It reconnects if the broker
/// closes it (for a limit), as a native client would.
pub(crate) async fn session(connector: &InProcessConnector, name: String) -> Result<Client, ClientError> {
    session_as(connector, name, None).await
}

/// As [`session`], signed in with `credentials`.
pub(crate) async fn session_as(
    connector: &InProcessConnector,
    name: String,
    credentials: Option<Credentials>,
) -> Result<Client, ClientError> {
    let options =
        ClientOptions { name, reconnect: true, clock_sync_interval: None, credentials, ..ClientOptions::default() };
    let origin = sift_broker::door::Origin { door: sift_broker::door::Door::Http, peer: None };
    Client::connect_local(connector.local_opener(origin), options).await
}
