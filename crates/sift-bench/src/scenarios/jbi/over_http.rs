//! `--via http`: the JBI experiments with publishers and subscribers on
//! HTTP, as the report ran them (§5.2): publishers POST each object and
//! wait for the answer, and each subscriber is a client listener that the
//! broker POSTs every matching object to, one callback subscription per
//! XPath filter (§5.1.3).
//!
//! A publisher posts the object as a JSON envelope (`await: delivered` in
//! sync mode, so the answer comes once every matched listener answered
//! 2xx). A subscriber runs one HTTP listener; its callback answers only
//! after the slow link (when it has one) carried the object, so that in
//! sync mode the publisher waits for the slow machine, as in the report.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use sift_core::workload::JbiWorkload;
use sift_core::Message;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use super::link::{self, SlowLink};
use super::plan::{Confirmation, Source};
use super::publisher::{Confirmed, AWAIT_TIMEOUT};
use super::subscriber::Tally;
use crate::error::BenchError;
use crate::http_load::HttpConnection;
use crate::subscriber::{SUBSCRIPTION_QUEUE_CAPACITY, SUBSCRIPTION_UNACKED_MAX};

/// Connections a subscriber registers its subscriptions over, in parallel.
const REGISTER_CONNECTIONS: usize = 8;

/// The JSON envelope of each object, made before the clock starts.
pub fn envelopes(objects: &[Message], confirmation: Confirmation) -> Vec<Bytes> {
    objects.iter().map(|object| Bytes::from(envelope(object, confirmation).to_string())).collect()
}

fn envelope(object: &Message, confirmation: Confirmation) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> =
        object.properties.iter().map(|(name, value)| (name.clone(), sift_client::json::value_to_json(value))).collect();
    let mut document = serde_json::json!({
        "topic": object.topic.as_str(),
        "properties": properties,
        "mode": object.delivery_mode.name(),
    });
    let fields = document.as_object_mut();
    if let Some(fields) = fields {
        if let Some(metadata) = &object.metadata {
            fields.insert("metadata".into(), String::from_utf8_lossy(metadata).into_owned().into());
        }
        match std::str::from_utf8(&object.payload) {
            Ok(text) => fields.insert("payload".into(), text.into()),
            Err(_) => fields.insert(
                "payload_base64".into(),
                base64::engine::general_purpose::STANDARD.encode(&object.payload).into(),
            ),
        };
        if confirmation == Confirmation::Sync {
            fields.insert("await".into(), "delivered".into());
            fields.insert("await_timeout_ms".into(), (AWAIT_TIMEOUT.as_millis() as u64).into());
        }
    }
    document
}

/// POSTs `bodies` one at a time, each after the previous one's answer.
pub async fn publish(address: SocketAddr, bodies: Vec<Bytes>, tally: Arc<Tally>) -> Result<Confirmed, BenchError> {
    let mut connection = HttpConnection::open(address).await?;
    let mut confirmed = Confirmed::default();
    for body in bodies {
        let (status, answer) = connection.send("POST", "/v1/messages", "application/json", body).await?;
        confirmed.last_confirm_ns = tally.now_ns();
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
        confirmed.objects += 1;
        confirmed.matched += answer["matched"].as_u64().unwrap_or(0);
        confirmed.acknowledged += answer["acked"].as_u64().unwrap_or(0);
        match status {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => confirmed.unmatched += 1,
            StatusCode::ACCEPTED => confirmed.incomplete += 1,
            other => return Err(BenchError::Usage(format!("POST /v1/messages answered {other}: {answer}"))),
        }
    }
    Ok(confirmed)
}

/// What a subscriber's listener shares with its callbacks.
struct Listener {
    link: Mutex<Option<SlowLink>>,
    tally: Arc<Tally>,
    handled: AtomicU64,
}

/// A subscriber on HTTP: its listener and its callback subscriptions.
pub struct HttpSubscriber {
    http: SocketAddr,
    listener: Arc<Listener>,
    ids: Vec<String>,
    accept_task: JoinHandle<()>,
}

impl HttpSubscriber {
    /// Starts the listener and registers `level` callback subscriptions
    /// per interest at the broker's HTTP address `http`.
    pub async fn start(
        http: SocketAddr,
        name: String,
        interests: &[Source],
        level: u64,
        tally: Arc<Tally>,
    ) -> Result<HttpSubscriber, BenchError> {
        let socket = TcpListener::bind("127.0.0.1:0").await.map_err(|error| BenchError::Usage(error.to_string()))?;
        let callback =
            format!("http://{}/{name}", socket.local_addr().map_err(|error| BenchError::Usage(error.to_string()))?);
        let listener = Arc::new(Listener { link: Mutex::new(None), tally, handled: AtomicU64::new(0) });
        let accept_task = tokio::spawn(accept(socket, listener.clone()));
        let mut subscriber = HttpSubscriber { http, listener, ids: Vec::new(), accept_task };
        match register(http, &callback, interests, level).await {
            Ok(ids) => subscriber.ids = ids,
            Err(error) => {
                subscriber.stop().await?;
                return Err(error);
            }
        }
        Ok(subscriber)
    }

    /// Puts the listener behind a slow link of `bits_per_s`, or on loopback.
    pub fn set_link(&self, bits_per_s: Option<f64>) {
        *lock(&self.listener.link) = bits_per_s.map(SlowLink::new);
    }

    /// Deliveries it handled so far.
    pub fn handled(&self) -> u64 {
        self.listener.handled.load(Ordering::Acquire)
    }

    /// Deletes its subscriptions and stops its listener.
    pub async fn stop(self) -> Result<(), BenchError> {
        let mut connection = HttpConnection::open(self.http).await?;
        for id in &self.ids {
            connection.send("DELETE", &format!("/v1/subscriptions/{id}"), "text/plain", Bytes::new()).await?;
        }
        self.accept_task.abort();
        Ok(())
    }
}

fn lock(link: &Mutex<Option<SlowLink>>) -> std::sync::MutexGuard<'_, Option<SlowLink>> {
    link.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Registers the callback subscriptions over [`REGISTER_CONNECTIONS`]
/// connections at once; their ids.
async fn register(
    http: SocketAddr,
    callback: &str,
    interests: &[Source],
    level: u64,
) -> Result<Vec<String>, BenchError> {
    let mut requests = Vec::new();
    for interest in interests {
        let workload = JbiWorkload::new(interest.seed).map_err(|error| BenchError::Usage(error.to_string()))?;
        for index in 0..level {
            let (topic, _, filter) = workload.subscription_of(interest.object_type, index);
            requests.push(serde_json::json!({
                "topic": topic, "xpath": filter, "callback": callback,
                "queue_capacity": SUBSCRIPTION_QUEUE_CAPACITY, "max_unacked": SUBSCRIPTION_UNACKED_MAX,
            }));
        }
    }
    let per_connection = requests.len().div_ceil(REGISTER_CONNECTIONS).max(1);
    let mut tasks = JoinSet::new();
    for chunk in requests.chunks(per_connection).map(<[serde_json::Value]>::to_vec) {
        tasks.spawn(async move {
            let mut connection = HttpConnection::open(http).await?;
            let mut ids = Vec::with_capacity(chunk.len());
            for request in chunk {
                let (status, answer) = connection.post_json("/v1/subscriptions", &request).await?;
                if status != StatusCode::CREATED {
                    return Err(BenchError::Usage(format!("POST /v1/subscriptions answered {status}: {answer}")));
                }
                ids.push(answer["id"].as_str().unwrap_or_default().to_string());
            }
            Ok::<Vec<String>, BenchError>(ids)
        });
    }
    let mut ids = Vec::with_capacity(requests.len());
    while let Some(joined) = tasks.join_next().await {
        ids.extend(joined.map_err(|error| BenchError::Task { role: "subscriber", reason: error.to_string() })??);
    }
    Ok(ids)
}

/// Serves the broker's callback connections.
async fn accept(socket: TcpListener, listener: Arc<Listener>) {
    while let Ok((stream, _)) = socket.accept().await {
        let _ = stream.set_nodelay(true);
        let listener = listener.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| callback(request, listener.clone()));
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

/// One callback: the object crosses the slow link (if any), is counted, and
/// the answer (the acknowledgement) goes back.
async fn callback(
    request: Request<hyper::body::Incoming>,
    listener: Arc<Listener>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let arrived = Instant::now();
    let body = request.into_body().collect().await?.to_bytes();
    let delivery: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let text_bytes = |field: &str| delivery[field].as_str().map_or(0, str::len);
    let payload_bytes = match delivery["payload_encoding"].as_str() {
        Some("base64") => text_bytes("payload") / 4 * 3,
        _ => text_bytes("payload"),
    };
    let bytes = payload_bytes + text_bytes("metadata");
    let departure = lock(&listener.link).as_mut().map(|link| link.departure(bytes, arrived));
    if let Some(departure) = departure {
        link::wait_until(departure).await;
    }
    listener.handled.fetch_add(1, Ordering::AcqRel);
    listener.tally.record();
    Ok(Response::new(Full::new(Bytes::new())))
}
