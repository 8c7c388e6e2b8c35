//! `GET /v1/ws`: a WebSocket that carries subscribe, publish, deliver and
//! ack as JSON text messages (`docs/HTTP.md` lists them).
//!
//! Each WebSocket is one in-process session: its subscriptions, publishes
//! and acknowledgements are that session's, so the broker's window,
//! queues, policies and redelivery apply as to a native client. One task
//! reads the client's messages and acts on them; each subscription has a
//! task that turns its deliveries into `deliver` messages; everything the
//! client is sent goes through one bounded buffer (`http.event_buffer`)
//! to the writer. A client that takes nothing from that buffer for
//! `http.slow_client_timeout_ms` is disconnected.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use sift_client::{Client, Subscription, SubscriptionEvent};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::counters::HttpCounters;
use crate::error::ApiError;
use crate::publish::{confirm_json, Envelope};
use crate::spec::SubscriptionSpec;
use crate::state::AppState;

/// Publishes of one WebSocket waiting for their confirm at once.
const WS_PUBLISHES_IN_FLIGHT_MAX: usize = 1024;

/// Numbers WebSocket sessions (`http-ws-N`).
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// `GET /v1/ws`.
pub(crate) async fn upgrade(
    State(state): State<Arc<AppState>>,
    caller: crate::caller::Caller,
    upgrade: WebSocketUpgrade,
) -> Response {
    if let Err(refused) = state.admit(&caller) {
        return axum::response::IntoResponse::into_response(refused);
    }
    let limit = state.config.max_ws_message_bytes;
    upgrade.max_message_size(limit).max_frame_size(limit).on_upgrade(move |socket| serve(state, socket, caller))
}

/// What one WebSocket holds.
struct WsSession {
    state: Arc<AppState>,
    client: Client,
    outgoing: mpsc::Sender<String>,
    /// What stops the forwarding task of each subscription, by the
    /// client's id for it.
    subscriptions: HashMap<String, oneshot::Sender<()>>,
    publishes: Arc<Semaphore>,
}

async fn serve(state: Arc<AppState>, socket: WebSocket, caller: crate::caller::Caller) {
    let name = format!("http-ws-{}", NEXT_SESSION.fetch_add(1, Ordering::Relaxed));
    let (mut sink, mut stream) = socket.split();
    let client = match crate::state::session_as(&state.connector, name, caller.0).await {
        Ok(client) => client,
        Err(error) => {
            let reply = error_json(None, &ApiError::from_client(error));
            let _ = sink.send(WsMessage::Text(reply.into())).await;
            return;
        }
    };
    HttpCounters::bump(&state.counters.websockets_current);
    let (outgoing, mut to_send) = mpsc::channel::<String>(state.config.event_buffer);
    let writer = tokio::spawn(async move {
        while let Some(text) = to_send.recv().await {
            if sink.send(WsMessage::Text(text.into())).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let publishes = Arc::new(Semaphore::new(WS_PUBLISHES_IN_FLIGHT_MAX));
    let mut session = WsSession { state: state.clone(), client, outgoing, subscriptions: HashMap::new(), publishes };
    let mut stopping = state.stopping.clone();
    loop {
        let message = tokio::select! {
            message = stream.next() => message,
            _ = stopping.changed() => break,
        };
        let Some(Ok(message)) = message else { break };
        let text = match message {
            WsMessage::Text(text) => text.to_string(),
            WsMessage::Binary(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            WsMessage::Close(_) => break,
            WsMessage::Ping(_) | WsMessage::Pong(_) => continue,
        };
        HttpCounters::bump(&state.counters.websocket_messages_received);
        if !session.handle(&text).await {
            break;
        }
    }
    session.subscriptions.clear();
    session.client.close().await;
    drop(session);
    let _ = writer.await;
    HttpCounters::drop_one(&state.counters.websockets_current);
}

impl WsSession {
    /// Acts on one client message; false when the WebSocket must close.
    async fn handle(&mut self, text: &str) -> bool {
        let mut value: serde_json::Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(error) => {
                let refusal = ApiError::bad_request("bad_json", format!("not a JSON message: {error}"));
                return self.send(error_json(None, &refusal)).await;
            }
        };
        let op = take_string(&mut value, "op");
        let result = match op.as_deref() {
            Some("subscribe") => self.subscribe(value).await,
            Some("unsubscribe") => self.unsubscribe(value),
            Some("publish") => self.publish(value).await,
            Some("ack") => self.ack(&value, true),
            Some("nack") => self.ack(&value, false),
            other => Err((
                None,
                ApiError::bad_request(
                    "invalid_field",
                    format!("op {other:?}: expected subscribe, unsubscribe, publish, ack or nack"),
                ),
            )),
        };
        match result {
            Ok(()) => true,
            Err((reference, error)) => self.send(error_json(reference, &error)).await,
        }
    }

    /// Queues a message for the client; false when the client is gone or
    /// too slow.
    async fn send(&self, text: String) -> bool {
        send_within(&self.state, &self.outgoing, text).await
    }

    async fn subscribe(&mut self, mut value: serde_json::Value) -> Result<(), Refusal> {
        let id = take_string(&mut value, "id")
            .ok_or_else(|| (None, ApiError::bad_request("invalid_field", "subscribe needs an id")))?;
        let reference = Some(("id", id.clone()));
        let auto_ack = match take_string(&mut value, "ack").as_deref() {
            None | Some("client") => false,
            Some("auto") => true,
            Some(other) => {
                let text = format!("ack {other:?}: expected client or auto");
                return Err((reference, ApiError::bad_request("invalid_field", text)));
            }
        };
        if self.subscriptions.contains_key(&id) {
            let text = format!("subscription id {id:?} is in use on this WebSocket");
            return Err((reference, ApiError::new(axum::http::StatusCode::CONFLICT, "duplicate_subscription", text)));
        }
        let spec: SubscriptionSpec = serde_json::from_value(value)
            .map_err(|error| (reference.clone(), ApiError::bad_request("bad_json", format!("subscribe: {error}"))))?;
        if spec.callback.is_some() {
            let text = "callback belongs to POST /v1/subscriptions, not to a WebSocket";
            return Err((reference, ApiError::bad_request("invalid_field", text)));
        }
        let options = spec.options().map_err(|error| (reference.clone(), error))?;
        let subscription =
            self.client.subscribe(options).await.map_err(|error| (reference, ApiError::from_client(error)))?;
        self.send(serde_json::json!({ "op": "subscribed", "id": id }).to_string()).await;
        let (stop, stopped) = oneshot::channel();
        let forwarding =
            Forwarding { state: self.state.clone(), id: id.clone(), outgoing: self.outgoing.clone(), auto_ack };
        tokio::spawn(forwarding.run(subscription, stopped));
        self.subscriptions.insert(id, stop);
        Ok(())
    }

    fn unsubscribe(&mut self, mut value: serde_json::Value) -> Result<(), Refusal> {
        let id = take_string(&mut value, "id").unwrap_or_default();
        match self.subscriptions.remove(&id) {
            Some(stop) => {
                let _ = stop.send(());
                Ok(())
            }
            None => Err((Some(("id", id.clone())), crate::subscriptions::unknown(&id))),
        }
    }

    async fn publish(&mut self, mut value: serde_json::Value) -> Result<(), Refusal> {
        let request = take_string(&mut value, "request");
        let reference = request.clone().map(|request| ("request", request));
        let (message, options) =
            Envelope::from_value(value).and_then(Envelope::into_message).map_err(|error| (reference.clone(), error))?;
        let Ok(permit) = self.publishes.clone().acquire_owned().await else { return Ok(()) };
        // Sent here, in the order the client gave them; only the wait for
        // each confirm runs beside the reader.
        let confirming = self.client.start_confirmed(message, options).await;
        let (outgoing, state) = (self.outgoing.clone(), self.state.clone());
        tokio::spawn(async move {
            let confirmed = match confirming {
                Ok(receiver) => receiver.await.unwrap_or(Err(sift_client::ClientError::Closed)),
                Err(error) => Err(error),
            };
            let reply = match confirmed {
                Ok(confirm) => {
                    HttpCounters::bump(&state.counters.messages_published);
                    let (_, mut body) = confirm_json(&confirm);
                    if let serde_json::Value::Object(fields) = &mut body {
                        fields.insert("op".into(), "confirm".into());
                        if let Some(request) = request {
                            fields.insert("request".into(), request.into());
                        }
                    }
                    body.to_string()
                }
                Err(error) => error_json(reference, &ApiError::from_client(error)),
            };
            send_within(&state, &outgoing, reply).await;
            drop(permit);
        });
        Ok(())
    }

    fn ack(&self, value: &serde_json::Value, positive: bool) -> Result<(), Refusal> {
        let Some(tag) = value["tag"].as_u64() else {
            return Err((None, ApiError::bad_request("invalid_field", "ack and nack need a numeric tag")));
        };
        let sent = match positive {
            true => self.client.ack_tag(tag),
            false => self.client.nack_tag(tag, value["requeue"].as_bool().unwrap_or(true)),
        };
        sent.map_err(|error| (None, ApiError::from_client(error)))
    }
}

/// An error with what it refers to (`("id", ...)` or `("request", ...)`).
type Refusal = (Option<(&'static str, String)>, ApiError);

/// The task that turns one subscription's deliveries into `deliver` (and
/// `gap`) messages.
struct Forwarding {
    state: Arc<AppState>,
    id: String,
    outgoing: mpsc::Sender<String>,
    auto_ack: bool,
}

impl Forwarding {
    /// Forwards until the subscription ends, the client is gone, or
    /// `stopped` fires (`unsubscribe`: then the broker is told).
    async fn run(self, mut subscription: Subscription, mut stopped: oneshot::Receiver<()>) {
        loop {
            let event = tokio::select! {
                event = subscription.next_event() => event,
                _ = &mut stopped => {
                    let _ = subscription.unsubscribe().await;
                    return;
                }
            };
            let Some(event) = event else { return };
            if !self.forward(event).await {
                return;
            }
        }
    }

    /// Sends one event; false when the client is gone or too slow.
    async fn forward(&self, event: SubscriptionEvent) -> bool {
        let (state, id, outgoing, auto_ack) = (&self.state, &self.id, &self.outgoing, self.auto_ack);
        let text = match &event {
            SubscriptionEvent::Delivery(delivery) => {
                let tag = (delivery.delivery_tag != 0 && !auto_ack).then_some(delivery.delivery_tag);
                let message = crate::subscriptions::delivery_json(delivery, &[]);
                serde_json::json!({ "op": "deliver", "id": id, "tag": tag, "message": message }).to_string()
            }
            SubscriptionEvent::Gap(gap) => serde_json::json!({
                "op": "gap", "id": id, "first_seq": gap.first_seq, "count": gap.count,
            })
            .to_string(),
        };
        if !send_within(state, outgoing, text).await {
            return false;
        }
        if let (SubscriptionEvent::Delivery(delivery), true) = (&event, auto_ack) {
            let _ = delivery.ack();
        }
        true
    }
}

/// Queues `text` for the client within `http.slow_client_timeout_ms`;
/// false when the client is gone or too slow (then the writer ends).
async fn send_within(state: &AppState, outgoing: &mpsc::Sender<String>, text: String) -> bool {
    let slow_after = Duration::from_millis(state.config.slow_client_timeout_ms);
    match tokio::time::timeout(slow_after, outgoing.send(text)).await {
        Ok(Ok(())) => true,
        Ok(Err(_)) => false,
        Err(_) => {
            HttpCounters::bump(&state.counters.slow_clients_disconnected);
            false
        }
    }
}

/// An `error` message.
fn error_json(reference: Option<(&'static str, String)>, error: &ApiError) -> String {
    let mut body = error.body();
    if let serde_json::Value::Object(fields) = &mut body {
        fields.insert("op".into(), "error".into());
        if let Some((name, value)) = reference {
            fields.insert(name.into(), value.into());
        }
    }
    body.to_string()
}

/// Removes and returns a string member.
fn take_string(value: &mut serde_json::Value, name: &str) -> Option<String> {
    match value.as_object_mut()?.remove(name)? {
        serde_json::Value::String(text) => Some(text),
        other => Some(other.to_string()),
    }
}
