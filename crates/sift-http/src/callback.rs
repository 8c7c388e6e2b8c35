//! Callback subscriptions: the broker POSTs each delivery to a URL the
//! subscriber gave (the JBI broker's listener, XPE's callback).
//!
//! One task per subscription sends its deliveries in order, one request at
//! a time, over a kept-alive connection to the target. A 2xx answer
//! acknowledges the delivery. A reliable delivery that fails (no
//! connection, no answer within `http.callback_timeout_ms`, another status)
//! is retried with a backoff that doubles up to
//! `http.callback_backoff_max_ms`, and the deliveries behind it wait; the
//! broker's queue and its policy hold what arrives meanwhile. A best-effort
//! delivery is tried once.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, Uri};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use sift_client::{Subscription, SubscriptionEvent};
use tokio::net::TcpStream;

use crate::counters::HttpCounters;
use crate::error::ApiError;
use crate::state::AppState;
use crate::subscriptions::{delivery_json, HttpSubscription};

/// Most bytes of a callback's answer read (and ignored).
const CALLBACK_ANSWER_BYTES_MAX: usize = 64 * 1024;
/// First pause before a failed callback is tried again.
const CALLBACK_BACKOFF_MIN: Duration = Duration::from_millis(50);

/// Where a subscription's deliveries are POSTed.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// `host:port` to connect to.
    authority: String,
    /// The whole URL, for requests.
    uri: Uri,
}

impl Target {
    /// Parses an `http://host:port/path` URL.
    pub(crate) fn parse(text: &str) -> Result<Target, ApiError> {
        let invalid = |why: &str| ApiError::bad_request("invalid_field", format!("callback {text:?}: {why}"));
        let uri: Uri = text.parse().map_err(|_| invalid("not a URL"))?;
        if uri.scheme_str() != Some("http") {
            return Err(invalid("only http:// URLs are supported"));
        }
        let host = uri.host().ok_or_else(|| invalid("no host"))?;
        let port = uri.port_u16().unwrap_or(80);
        Ok(Target { authority: format!("{host}:{port}"), uri })
    }
}

/// Starts the callback task of `http_subscription`; it holds the native
/// subscription for its whole life.
pub(crate) fn start(state: Arc<AppState>, http_subscription: Arc<HttpSubscription>, target: Target) {
    if let Some(subscription) = http_subscription.attach() {
        tokio::spawn(run(state, http_subscription, subscription, target));
    }
}

async fn run(
    state: Arc<AppState>,
    http_subscription: Arc<HttpSubscription>,
    mut subscription: Subscription,
    target: Target,
) {
    let mut connection: Option<SendRequest<Body>> = None;
    while let Some(event) = subscription.next_event().await {
        let body = match &event {
            SubscriptionEvent::Delivery(delivery) => {
                delivery_json(delivery, &[("subscription", http_subscription.id.clone().into())])
            }
            SubscriptionEvent::Gap(gap) => serde_json::json!({
                "subscription": http_subscription.id,
                "gap": { "first_seq": gap.first_seq, "count": gap.count },
            }),
        };
        let delivery = match event {
            SubscriptionEvent::Delivery(delivery) => Some(delivery),
            SubscriptionEvent::Gap(_) => None,
        };
        let persist = delivery.as_ref().is_some_and(|delivery| delivery.delivery_tag != 0);
        let sent = deliver(&state, &http_subscription, &target, &mut connection, body.to_string(), persist).await;
        if let Some(delivery) = delivery {
            let _ = if sent { delivery.ack() } else { delivery.nack(persist) };
        }
        if !sent && persist {
            // Deleted while retrying.
            break;
        }
    }
    http_subscription.release(subscription).await;
}

/// POSTs `body` until a 2xx answer (once when `persist` is false); false
/// when it was not delivered.
async fn deliver(
    state: &AppState,
    http_subscription: &HttpSubscription,
    target: &Target,
    connection: &mut Option<SendRequest<Body>>,
    body: String,
    persist: bool,
) -> bool {
    let timeout = Duration::from_millis(state.config.callback_timeout_ms);
    let backoff_max = Duration::from_millis(state.config.callback_backoff_max_ms);
    let mut backoff = CALLBACK_BACKOFF_MIN.min(backoff_max);
    loop {
        let attempt = tokio::time::timeout(timeout, post(connection, target, &http_subscription.id, body.clone()));
        match attempt.await {
            Ok(Ok(status)) if status.is_success() => {
                HttpCounters::bump(&state.counters.callbacks_delivered);
                return true;
            }
            outcome => {
                HttpCounters::bump(&state.counters.callbacks_failed);
                tracing::debug!(id = %http_subscription.id, ?outcome, "callback failed");
                *connection = None;
            }
        }
        if !persist || state.subscriptions.get(&http_subscription.id).is_none() {
            return false;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(backoff_max);
    }
}

/// One POST, over the kept connection or a new one.
async fn post(
    connection: &mut Option<SendRequest<Body>>,
    target: &Target,
    subscription_id: &str,
    body: String,
) -> Result<StatusCode, String> {
    let sender = match connection {
        Some(sender) if !sender.is_closed() => sender,
        _ => connection.insert(connect(target).await?),
    };
    sender.ready().await.map_err(|error| error.to_string())?;
    let request = Request::post(target.uri.clone())
        .header("host", target.authority.as_str())
        .header("content-type", "application/json")
        .header("sift-subscription", subscription_id)
        .body(Body::from(body))
        .map_err(|error| error.to_string())?;
    let response = sender.send_request(request).await.map_err(|error| error.to_string())?;
    let status = response.status();
    // Read the answer to its end, so that the connection can carry the next.
    axum::body::to_bytes(Body::new(response.into_body()), CALLBACK_ANSWER_BYTES_MAX)
        .await
        .map_err(|error| error.to_string())?;
    Ok(status)
}

async fn connect(target: &Target) -> Result<SendRequest<Body>, String> {
    let stream = TcpStream::connect(&target.authority).await.map_err(|error| error.to_string())?;
    let _ = stream.set_nodelay(true);
    let (sender, driver) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|error| error.to_string())?;
    tokio::spawn(async move {
        if let Err(error) = driver.await {
            tracing::debug!(%error, "callback connection ended");
        }
    });
    Ok(sender)
}
