//! HTTP subscriptions: `POST /v1/subscriptions`, `GET /v1/subscriptions`,
//! `DELETE /v1/subscriptions/{id}`, and the registry that keeps them
//! between requests.
//!
//! Each HTTP subscription is a native subscription on an in-process
//! session of its own (`http-sub-N`), so that the broker queues its
//! deliveries, applies its policy and limits, and redelivers what was not
//! acknowledged, as for any client. Its deliveries leave through one
//! consumer at a time: an event stream ([`crate::sse`]) while one is
//! attached, or the callback task ([`crate::callback`]) for the whole of its
//! life. A subscription that has neither for `http.subscription_idle_ms` is
//! deleted, so that abandoned ones do not hold queues forever.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use sift_client::{Client, Delivery, Subscription};

use crate::error::ApiError;
use crate::spec::SubscriptionSpec;
use crate::state::AppState;

/// How often idle subscriptions are looked for.
const IDLE_SCAN_INTERVAL: Duration = Duration::from_millis(250);

/// One HTTP subscription.
#[derive(Debug)]
pub(crate) struct HttpSubscription {
    /// Its id in URLs (`sub-N`).
    pub id: String,
    /// The request that created it, as given (for `GET /v1/subscriptions`).
    pub description: serde_json::Value,
    /// Its session.
    pub client: Client,
    /// The native subscription while no consumer holds it.
    slot: tokio::sync::Mutex<Option<Subscription>>,
    /// True while an event stream or the callback task holds it.
    attached: AtomicBool,
    /// When it was last released by a consumer (or created).
    idle_since: Mutex<Instant>,
    /// True for a durable subscription: event ids are stream sequences.
    pub durable: bool,
    /// Stops the event stream that holds the subscription, so that a newer
    /// one can take over; `None` while none holds it (or the callback does).
    preempt: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    /// Signalled each time a consumer gives the subscription back.
    released: tokio::sync::Notify,
    /// The credentials it was created with (its session signed in with
    /// them); `None` for an anonymous caller's.
    owner: Option<sift_client::Credentials>,
}

impl HttpSubscription {
    /// Whether `caller` may read, list or delete it: the caller that
    /// created it, by the same credentials (anonymous for anonymous).
    pub(crate) fn is_owned_by(&self, caller: &crate::caller::Caller) -> bool {
        match (&self.owner, &caller.0) {
            (None, None) => true,
            (Some(owner), Some(given)) => crate::state::same_credentials(owner, given),
            _ => false,
        }
    }

    /// Takes the native subscription for a consumer; `None` when another
    /// consumer holds it.
    pub(crate) fn attach(&self) -> Option<Subscription> {
        let mut slot = self.slot.try_lock().ok()?;
        let subscription = slot.take()?;
        self.attached.store(true, Ordering::Release);
        Some(subscription)
    }

    /// Takes the native subscription for an event stream, stopping the
    /// event stream that holds it, if any: a client that reconnects (an
    /// `EventSource` after a network drop) takes over from its dead
    /// connection at once instead of waiting for the server to notice. The
    /// returned receiver fires when a later stream takes over in turn.
    /// `None` when the callback task holds it.
    pub(crate) async fn attach_stream(&self) -> Option<(Subscription, tokio::sync::oneshot::Receiver<()>)> {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if let Some(subscription) = self.attach() {
                let (stop, stopped) = tokio::sync::oneshot::channel();
                *self.preempt.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(stop);
                return Some((subscription, stopped));
            }
            let holder = self.preempt.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
            match holder {
                Some(stop) => {
                    let _ = stop.send(());
                }
                // Held by the callback task, or by a stream still starting:
                // only the former holds it without a preempt handle for long.
                None if !self.attached.load(Ordering::Acquire) => continue,
                None => return None,
            }
            released.await;
        }
    }

    /// Gives the native subscription back; the idle clock starts.
    pub(crate) async fn release(&self, subscription: Subscription) {
        *self.slot.lock().await = Some(subscription);
        *self.idle_since.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
        self.attached.store(false, Ordering::Release);
        self.released.notify_waiters();
    }

    /// Ends the subscription: stops its event stream, drops the native
    /// subscription, then closes the session. The order matters: a session
    /// whose reader is still handing deliveries to an unread subscription
    /// could not take the broker's `CLOSE` in time.
    pub(crate) async fn close(&self) {
        if let Some(stop) = self.preempt.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            let _ = stop.send(());
        }
        drop(self.slot.lock().await.take());
        self.client.close().await;
    }

    fn idle_for(&self) -> Option<Duration> {
        if self.attached.load(Ordering::Acquire) {
            return None;
        }
        Some(self.idle_since.lock().unwrap_or_else(std::sync::PoisonError::into_inner).elapsed())
    }
}

/// Every HTTP subscription, by id.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    subscriptions: Mutex<HashMap<String, Arc<HttpSubscription>>>,
    next_id: AtomicU64,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<HttpSubscription>>> {
        self.subscriptions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The subscription `id`.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<HttpSubscription>> {
        self.lock().get(id).cloned()
    }

    /// Forgets `id`; the caller closes its session.
    fn remove(&self, id: &str) -> Option<Arc<HttpSubscription>> {
        self.lock().remove(id)
    }

    /// HTTP subscriptions held now.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Closes every subscription (the front-end is stopping).
    pub(crate) async fn close_all(&self) {
        let all: Vec<Arc<HttpSubscription>> = self.lock().drain().map(|(_, subscription)| subscription).collect();
        for subscription in all {
            subscription.close().await;
        }
    }
}

/// `POST /v1/subscriptions`.
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    caller: crate::caller::Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = crate::publish::read_body(&state, &headers, body).await?;
    let spec = SubscriptionSpec::parse(&bytes)?;
    let options = spec.options()?;
    let callback = spec.callback.as_deref().map(crate::callback::Target::parse).transpose()?;
    if state.subscriptions.len() >= state.config.max_subscriptions as usize {
        let text = format!("the front-end already holds http.max_subscriptions = {}", state.config.max_subscriptions);
        return Err(ApiError::new(StatusCode::TOO_MANY_REQUESTS, "max_subscriptions", text));
    }
    let number = state.subscriptions.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    let id = format!("sub-{number}");
    state.admit(&caller)?;
    let client = crate::state::session_as(&state.connector, format!("http-{id}"), caller.0.clone())
        .await
        .map_err(ApiError::from_client)?;
    let subscription = match client.subscribe(options).await {
        Ok(subscription) => subscription,
        Err(error) => {
            client.close().await;
            return Err(ApiError::from_client(error));
        }
    };
    let description: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let created = Arc::new(HttpSubscription {
        id: id.clone(),
        description,
        client,
        slot: tokio::sync::Mutex::new(Some(subscription)),
        attached: AtomicBool::new(false),
        idle_since: Mutex::new(Instant::now()),
        durable: spec.is_durable(),
        preempt: Mutex::new(None),
        released: tokio::sync::Notify::new(),
        owner: caller.0,
    });
    state.subscriptions.lock().insert(id.clone(), created.clone());
    crate::counters::HttpCounters::bump(&state.counters.subscriptions_created);
    if let Some(target) = callback {
        crate::callback::start(state.clone(), created, target);
    }
    let body = serde_json::json!({ "id": id, "events": format!("/v1/subscriptions/{id}/events") });
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /v1/subscriptions`: the caller's HTTP subscriptions with what
/// created them (another caller's are not shown).
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: crate::caller::Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    state.admit(&caller)?;
    let mut all: Vec<Arc<HttpSubscription>> =
        state.subscriptions.lock().values().filter(|subscription| subscription.is_owned_by(&caller)).cloned().collect();
    all.sort_by_key(|subscription| subscription.id.trim_start_matches("sub-").parse::<u64>().unwrap_or(0));
    let listed: Vec<serde_json::Value> = all
        .iter()
        .map(|subscription| {
            serde_json::json!({
                "id": subscription.id,
                "request": subscription.description,
                "attached": subscription.attached.load(Ordering::Acquire),
            })
        })
        .collect();
    Ok(Json(serde_json::json!({ "subscriptions": listed })))
}

/// `DELETE /v1/subscriptions/{id}`: closes its session; the broker
/// requeues or drops what it held, as for a client that unsubscribed.
/// Only its owner may (another caller is told it does not exist).
pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    caller: crate::caller::Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    owned(&state, &caller, &id)?;
    let subscription = state.subscriptions.remove(&id).ok_or_else(|| unknown(&id))?;
    subscription.close().await;
    Ok(StatusCode::NO_CONTENT)
}

/// The subscription `id` if `caller` owns it; 401 for an anonymous caller
/// on a broker that requires sign-in, and 404 (as for an id that does not
/// exist, so that ids tell nothing) for another caller's.
pub(crate) fn owned(
    state: &AppState,
    caller: &crate::caller::Caller,
    id: &str,
) -> Result<Arc<HttpSubscription>, ApiError> {
    state.admit(caller)?;
    state.subscriptions.get(id).filter(|subscription| subscription.is_owned_by(caller)).ok_or_else(|| unknown(id))
}

/// The 404 for an unknown subscription id.
pub(crate) fn unknown(id: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "unknown_subscription", format!("no HTTP subscription {id:?}"))
}

/// Deletes subscriptions that no consumer held for `http.subscription_idle_ms`.
pub(crate) async fn reap_idle(state: Arc<AppState>, mut stopped: tokio::sync::watch::Receiver<bool>) {
    let limit = Duration::from_millis(state.config.subscription_idle_ms);
    let mut ticker = tokio::time::interval(IDLE_SCAN_INTERVAL.min(limit));
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopped.changed() => return,
        }
        let idle: Vec<Arc<HttpSubscription>> = {
            let mut subscriptions = state.subscriptions.lock();
            let ids: Vec<String> = subscriptions
                .values()
                .filter(|subscription| subscription.idle_for().is_some_and(|idle| idle >= limit))
                .map(|subscription| subscription.id.clone())
                .collect();
            ids.iter().filter_map(|id| subscriptions.remove(id)).collect()
        };
        for subscription in idle {
            tracing::debug!(id = %subscription.id, "HTTP subscription idle; deleted");
            crate::counters::HttpCounters::bump(&state.counters.subscriptions_expired);
            subscription.close().await;
        }
    }
}

/// A delivery as the JSON of an event, a WebSocket `deliver` or a callback
/// body: the message (`sift_client::json`) with `redelivered`, and
/// `stream_seq` for stored messages.
pub(crate) fn delivery_json(delivery: &Delivery, extra: &[(&str, serde_json::Value)]) -> serde_json::Value {
    let mut fields: Vec<(&str, serde_json::Value)> = vec![("redelivered", delivery.redelivered.into())];
    if delivery.stream_seq != 0 {
        fields.push(("stream_seq", delivery.stream_seq.into()));
    }
    fields.extend(extra.iter().cloned());
    sift_client::json::message_json(&delivery.message, &fields)
}
