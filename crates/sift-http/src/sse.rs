//! `GET /v1/subscriptions/{id}/events`: a subscription's deliveries as
//! server-sent events.
//!
//! A pump task moves deliveries from the native subscription into a
//! bounded buffer (`http.event_buffer` events); the response body takes
//! them from there. A delivery is acknowledged when the body hands its
//! event to the connection, and one still buffered when the client goes
//! away is refused with requeue, so the broker redelivers it. A client that
//! takes no event for `http.slow_client_timeout_ms` while events wait is
//! cut off: its subscription is released (and deleted when it stays idle),
//! so that a stalled reader cannot hold a publisher behind a `block` queue.
//!
//! Each event is `id: ID` and `data: JSON` (the delivery, as
//! [`crate::subscriptions::delivery_json`]). For a durable subscription the
//! id is the stream sequence, and a reconnect with `Last-Event-ID: N` skips
//! redeliveries of sequences up to N: those reached the client before.
//! Stored messages that will never come arrive as `event: gap`.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use sift_client::{Delivery, Gap, Subscription, SubscriptionEvent};
use tokio::sync::mpsc;

use crate::counters::HttpCounters;
use crate::error::ApiError;
use crate::state::AppState;
use crate::subscriptions::{delivery_json, HttpSubscription};

/// Interval of the comment lines that keep an idle event stream open
/// through proxies.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(15);

/// One event waiting for the client.
enum Outgoing {
    Delivery(Pending),
    Gap(Gap),
}

/// A delivery waiting in the buffer. Dropped unsent (the client went
/// away), it is refused with requeue so that the broker sends it again.
struct Pending {
    delivery: Option<Delivery>,
    id: u64,
}

impl Pending {
    /// The event, acknowledging the delivery: it is now the connection's.
    fn into_event(mut self) -> Event {
        let delivery = self.delivery.take();
        let data = delivery.as_ref().map(|delivery| delivery_json(delivery, &[]).to_string()).unwrap_or_default();
        if let Some(delivery) = delivery {
            let _ = delivery.ack();
        }
        Event::default().id(self.id.to_string()).data(data)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(delivery) = self.delivery.take() {
            let _ = delivery.nack(true);
        }
    }
}

impl Outgoing {
    fn into_event(self) -> Event {
        match self {
            Outgoing::Delivery(pending) => pending.into_event(),
            Outgoing::Gap(gap) => {
                let reason = match gap.reason {
                    sift_client::GapReason::Removed => "removed",
                    sift_client::GapReason::Damaged => "damaged",
                };
                let data = serde_json::json!({ "first_seq": gap.first_seq, "count": gap.count, "reason": reason });
                Event::default().event("gap").data(data.to_string())
            }
        }
    }
}

/// `GET /v1/subscriptions/{id}/events`.
pub(crate) async fn events(
    State(state): State<Arc<AppState>>,
    caller: crate::caller::Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    // Only the caller that created the subscription may read it.
    let http_subscription = crate::subscriptions::owned(&state, &caller, &id)?;
    let Some((subscription, stopped)) = http_subscription.attach_stream().await else {
        let text = format!("subscription {id} delivers to its callback; it has no event stream");
        return Err(ApiError::new(StatusCode::CONFLICT, "callback", text));
    };
    let resume_after = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .filter(|_| http_subscription.durable);
    let (sender, receiver) = mpsc::channel(state.config.event_buffer);
    let pump = Pump { state: state.clone(), http_subscription, sender, resume_after };
    tokio::spawn(pump.run(subscription, stopped));
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let outgoing = receiver.recv().await?;
        Some((Ok::<Event, Infallible>(outgoing.into_event()), receiver))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE_INTERVAL)).into_response())
}

/// Event ids of non-durable subscriptions: increasing across the whole
/// front-end, so that they never repeat for a subscription.
static NEXT_EVENT_ID: AtomicU64 = AtomicU64::new(1);

/// Moves one subscription's deliveries into its event stream's buffer.
struct Pump {
    state: Arc<AppState>,
    http_subscription: Arc<HttpSubscription>,
    sender: mpsc::Sender<Outgoing>,
    /// The `Last-Event-ID` of a durable subscription's reconnect.
    resume_after: Option<u64>,
}

impl Pump {
    /// Runs until the client goes away, is too slow, a newer stream takes
    /// over (`stopped`), or the subscription is closed; then releases it.
    async fn run(self, mut subscription: Subscription, mut stopped: tokio::sync::oneshot::Receiver<()>) {
        let counters = &self.state.counters;
        let slow_after = Duration::from_millis(self.state.config.slow_client_timeout_ms);
        HttpCounters::bump(&counters.event_streams_current);
        loop {
            let event = tokio::select! {
                event = subscription.next_event() => event,
                _ = self.sender.closed() => break,
                _ = &mut stopped => break,
            };
            let Some(event) = event else { break };
            let Some(outgoing) = self.outgoing(event) else { continue };
            match tokio::time::timeout(slow_after, self.sender.send(outgoing)).await {
                Ok(Ok(())) => HttpCounters::bump(&counters.events_sent),
                Ok(Err(_)) => break,
                Err(_) => {
                    HttpCounters::bump(&counters.slow_clients_disconnected);
                    tracing::debug!(id = %self.http_subscription.id, "event stream client too slow; released");
                    break;
                }
            }
        }
        HttpCounters::drop_one(&counters.event_streams_current);
        self.http_subscription.release(subscription).await;
    }

    /// The event for `event`; `None` for a redelivery the client had
    /// before it reconnected (acknowledged here).
    fn outgoing(&self, event: SubscriptionEvent) -> Option<Outgoing> {
        let delivery = match event {
            SubscriptionEvent::Gap(gap) => return Some(Outgoing::Gap(gap)),
            SubscriptionEvent::Delivery(delivery) => delivery,
        };
        if self.resume_after.is_some_and(|after| delivery.stream_seq != 0 && delivery.stream_seq <= after) {
            let _ = delivery.ack();
            return None;
        }
        let id = match self.http_subscription.durable && delivery.stream_seq != 0 {
            true => delivery.stream_seq,
            false => NEXT_EVENT_ID.fetch_add(1, Ordering::Relaxed),
        };
        Some(Outgoing::Delivery(Pending { delivery: Some(delivery), id }))
    }
}
