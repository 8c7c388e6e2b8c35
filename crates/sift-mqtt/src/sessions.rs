//! MQTT sessions: what outlives a connection, and the registry that hands
//! a session from one connection to the next.
//!
//! A session is a native in-process Sift session (so its subscriptions are
//! matched and queued by the broker like any other), the MQTT
//! subscriptions on it, the deliveries buffered for the client, and the
//! QoS 1/2 exchanges in flight. While its client is connected, the
//! connection's task owns it; when the client goes away with a session
//! expiry interval, it is parked here: its subscriptions keep collecting
//! (into the bounded buffer, then into the broker's queues under their
//! policies), its will may wait out its delay, and it ends when the
//! interval does unless a connection with the same client id claims it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mqtt_protocol_core::mqtt::packet::StorePacket;
use serde::{Deserialize, Serialize};
use sift_client::{Client, ClientOptions};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::codec::{Version, Will};
use crate::door::MqttDoor;
use crate::server::{MqttCounters, Shared};
use crate::subscriptions::{durable_prefix, Routed, Subscribed, SubscriptionDescription};
use crate::topic::Filter;

/// How long a claiming connection waits for the connection it takes over
/// to hand the session back.
const TAKEOVER_WAIT: Duration = Duration::from_secs(5);

/// The codec state a resumed session needs: the QoS 1/2 publishes and
/// PUBRELs not yet acknowledged, and the QoS 2 packet ids received.
pub(crate) struct CodecState {
    pub version: Version,
    pub stored: Vec<StorePacket>,
    pub qos2_received: Vec<u16>,
}

/// What the journal keeps of a session that outlives its connection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SessionDescription {
    /// Its session expiry interval.
    pub expiry_s: u32,
    /// Its subscriptions by filter text.
    pub subscriptions: BTreeMap<String, SubscriptionDescription>,
    /// The user it signed in as, on a broker with users: restored as that
    /// user, and resumed only by that user (journals written before users
    /// existed have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// Everything a session holds between connections.
pub(crate) struct SessionState {
    /// The client id.
    pub client_id: String,
    /// The native session.
    pub client: Client,
    /// The native session's name, stamped on its publishes (No Local).
    pub native_name: Arc<str>,
    /// MQTT subscriptions by filter text.
    pub subscriptions: HashMap<String, Subscribed>,
    /// Where forwarders put deliveries.
    pub buffer_in: mpsc::Sender<Routed>,
    /// Where the connection takes them.
    pub buffer_out: mpsc::Receiver<Routed>,
    /// Native delivery tag (0: none) of each QoS 1/2 packet id in flight.
    pub inflight: HashMap<u16, u64>,
    /// The codec's state at the last disconnect.
    pub codec: Option<CodecState>,
    /// Writes QoS 0 deliveries straight to the connection, for a session
    /// that ends with its connection (`crate::door`).
    pub door: Option<Arc<MqttDoor>>,
    /// The user the native session signed in as, as the broker named it
    /// (a token's subject, not what the client typed); `None` when anonymous.
    pub user: Option<String>,
}

impl SessionState {
    /// Opens the native session of a new MQTT session.
    /// `peer` is the connecting client's address (`None` for a session
    /// restored from the journal), shown in the broker's reports.
    /// `with_door`: the session ends with its connection, and its QoS 0
    /// deliveries may be written by the broker ([`MqttDoor`]).
    pub async fn open(
        shared: &Shared,
        client_id: &str,
        (peer, credentials): (Option<std::net::SocketAddr>, Option<sift_client::Credentials>),
        with_door: bool,
    ) -> Result<SessionState, sift_client::ClientError> {
        let name = format!("mqtt-{client_id}");
        let options = ClientOptions {
            name: name.clone(),
            reconnect: false,
            clock_sync_interval: None,
            credentials,
            ..ClientOptions::default()
        };
        let origin = sift_broker::door::Origin { door: sift_broker::door::Door::Mqtt, peer };
        let native_name: Arc<str> = name.into();
        let door = with_door.then(|| {
            let batches = shared.config.delivery_batches;
            Arc::new(MqttDoor::new(native_name.clone(), shared.counters.clone(), batches))
        });
        let opener = match &door {
            Some(door) => shared.connector.local_opener_writing(origin, door.clone()),
            None => shared.connector.local_opener(origin),
        };
        let client = Client::connect_local(opener, options).await?;
        let user = client.user();
        let (buffer_in, buffer_out) = mpsc::channel(shared.config.session_buffer_deliveries);
        Ok(SessionState {
            client_id: client_id.to_string(),
            client,
            native_name,
            subscriptions: HashMap::new(),
            buffer_in,
            buffer_out,
            inflight: HashMap::new(),
            codec: None,
            door,
            user,
        })
    }

    /// Acknowledges native delivery `tag`; tag 0 (none owed) does nothing.
    pub fn ack(&self, tag: u64) {
        if tag != 0 {
            let _ = self.client.ack_tag(tag);
        }
    }

    /// Gives native delivery `tag` back for redelivery; tag 0 does nothing.
    pub fn requeue(&self, tag: u64) {
        if tag != 0 {
            let _ = self.client.nack_tag(tag, true);
        }
    }

    /// Subscribes `filter` (replacing a subscription to the same filter)
    /// and returns whether it is new. A persistent session (`persistent`)
    /// reads QoS 1/2 subscriptions from durables on `mqtt.session_stream`.
    pub async fn subscribe(
        &mut self,
        shared: &Shared,
        filter: &Filter,
        description: SubscriptionDescription,
        persistent: bool,
    ) -> Result<bool, sift_client::ClientError> {
        let stream = shared.config.session_stream.as_str();
        let prefix = durable_prefix(&self.client_id, &filter.text);
        let durable = (persistent && !stream.is_empty()).then_some((stream, prefix.as_str()));
        let is_new = match self.subscriptions.remove(&filter.text) {
            // The same subscription again (a client resuming its session
            // subscribes anew): nothing changes, nothing is lost.
            Some(existing) if existing.route.description == description => {
                self.subscriptions.insert(filter.text.clone(), existing);
                return Ok(false);
            }
            Some(replaced) => {
                // A durable read with the same content filter keeps its
                // position; any other change starts it afresh.
                let old = &replaced.route.description;
                let same_durable =
                    old.qos > 0 && description.qos > 0 && old.content_filter == description.content_filter;
                replaced.stop(!same_durable).await;
                false
            }
            None => true,
        };
        let subscribed =
            Subscribed::open((&self.client, self.door.as_ref()), filter, description, durable, &self.buffer_in).await?;
        self.subscriptions.insert(filter.text.clone(), subscribed);
        Ok(is_new)
    }

    /// Ends the subscription to `filter_text`; whether there was one.
    pub async fn unsubscribe(&mut self, filter_text: &str) -> bool {
        match self.subscriptions.remove(filter_text) {
            Some(subscribed) => {
                subscribed.stop(true).await;
                true
            }
            None => false,
        }
    }

    /// What the journal keeps of the session.
    pub fn describe(&self, expiry_s: u32) -> SessionDescription {
        let subscriptions = self
            .subscriptions
            .iter()
            .map(|(filter, subscribed)| (filter.clone(), subscribed.route.description.clone()))
            .collect();
        SessionDescription { expiry_s, subscriptions, user: self.user.clone() }
    }

    /// Ends the session: subscriptions, then the native session (whose
    /// unacknowledged deliveries the broker redelivers to others). With
    /// `forget`, the session is over: its durables and its journal
    /// record go too; without, the broker is stopping and both stay.
    pub async fn close(mut self, shared: &Shared, forget: bool) {
        for (_, subscribed) in self.subscriptions.drain() {
            subscribed.stop(forget).await;
        }
        if forget {
            shared.journal_session(&self.client_id, None);
        }
        self.client.close().await;
    }
}

/// What a connection that holds a session is sent to take it away: the
/// channel to hand the session back on.
pub(crate) type Kick = oneshot::Sender<Option<SessionState>>;

/// A session without a connection, and the will that may wait with it.
pub(crate) struct Parked {
    pub state: SessionState,
    pub will: Option<Will>,
}

enum Entry {
    Live { generation: u64, kick: mpsc::Sender<Kick> },
    Parked { generation: u64, parked: Box<Parked> },
}

/// Sessions by client id.
#[derive(Default)]
pub(crate) struct Registry {
    entries: std::sync::Mutex<HashMap<String, Entry>>,
    next_generation: AtomicU64,
    /// Woken whenever a connection parks or releases its session, for a
    /// claimer waiting on a connection that was ending when kicked.
    released: tokio::sync::Notify,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Registry").finish_non_exhaustive()
    }
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A number no other connection gets.
    pub fn generation(&self) -> u64 {
        self.next_generation.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Makes the connection `generation` the holder of `client_id`'s
    /// session, and returns the session it had, taking it from a parked
    /// entry or from the connection that holds it now.
    ///
    /// A holder that is ending on its own when kicked (its client just
    /// left) cannot hand the session over; the claimer then waits until it
    /// has parked or released it, and looks again.
    pub async fn claim(
        &self,
        counters: &MqttCounters,
        client_id: &str,
        generation: u64,
        kick: mpsc::Sender<Kick>,
    ) -> Option<SessionState> {
        let deadline = Instant::now() + TAKEOVER_WAIT;
        let mut counted = false;
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let holder = {
                let mut entries = self.lock();
                match entries.get(client_id) {
                    Some(Entry::Live { kick: holder, .. }) => holder.clone(),
                    _ => {
                        let previous = entries.insert(client_id.to_string(), Entry::Live { generation, kick });
                        // A will still waiting out its delay is dropped: the client is back.
                        return match previous {
                            Some(Entry::Parked { parked, .. }) => Some(parked.state),
                            _ => None,
                        };
                    }
                }
            };
            if !counted {
                MqttCounters::bump(&counters.sessions_taken_over);
                counted = true;
            }
            let (reply, handed) = oneshot::channel();
            if holder.send(reply).await.is_ok() {
                if let Ok(Ok(Some(state))) = tokio::time::timeout_at(deadline, handed).await {
                    self.lock().insert(client_id.to_string(), Entry::Live { generation, kick });
                    return Some(state);
                }
            }
            if tokio::time::timeout_at(deadline, released).await.is_err() {
                self.lock().insert(client_id.to_string(), Entry::Live { generation, kick });
                return None;
            }
        }
    }

    /// Drops the entry of `client_id` if the connection `generation` still
    /// holds it.
    pub fn release(&self, client_id: &str, generation: u64) {
        let mut entries = self.lock();
        if matches!(entries.get(client_id), Some(Entry::Live { generation: holder, .. }) if *holder == generation) {
            entries.remove(client_id);
        }
        drop(entries);
        self.released.notify_waiters();
    }

    /// Parks the session of `client_id` for `expiry_s` seconds, with a
    /// will to publish after `will.delay_s` unless the client returns.
    /// Returns the session back when it cannot be parked: the connection
    /// no longer holds it, or `mqtt.max_sessions` are parked.
    pub fn park(
        &self,
        shared: &Arc<Shared>,
        client_id: &str,
        generation: u64,
        parked: Box<Parked>,
        expiry_s: u32,
    ) -> Result<(), Box<Parked>> {
        let mut entries = self.lock();
        let holds =
            matches!(entries.get(client_id), Some(Entry::Live { generation: holder, .. }) if *holder == generation);
        let parked_count = entries.values().filter(|entry| matches!(entry, Entry::Parked { .. })).count();
        if !holds || parked_count >= shared.config.max_sessions {
            return Err(parked);
        }
        let will_delay = parked.will.as_ref().map(|will| Duration::from_secs(u64::from(will.delay_s.min(expiry_s))));
        entries.insert(client_id.to_string(), Entry::Parked { generation, parked });
        drop(entries);
        self.released.notify_waiters();
        let expiry = Duration::from_secs(u64::from(expiry_s));
        tokio::spawn(expire(shared.clone(), client_id.to_string(), generation, will_delay, expiry));
        Ok(())
    }

    /// Parks a session restored from the journal at start.
    pub fn park_restored(&self, shared: &Arc<Shared>, state: SessionState, expiry_s: u32) {
        let generation = self.generation();
        let client_id = state.client_id.clone();
        let parked = Box::new(Parked { state, will: None });
        self.lock().insert(client_id.clone(), Entry::Parked { generation, parked });
        let expiry = Duration::from_secs(u64::from(expiry_s));
        tokio::spawn(expire(shared.clone(), client_id, generation, None, expiry));
    }

    /// Takes the will of a parked session, if it is still parked.
    fn take_will(&self, client_id: &str, generation: u64) -> Option<(Will, Client)> {
        let mut entries = self.lock();
        match entries.get_mut(client_id) {
            Some(Entry::Parked { generation: parked_generation, parked }) if *parked_generation == generation => {
                parked.will.take().map(|will| (will, parked.state.client.clone()))
            }
            _ => None,
        }
    }

    /// Removes a parked session, if it is still parked.
    fn take_parked(&self, client_id: &str, generation: u64) -> Option<Box<Parked>> {
        let mut entries = self.lock();
        match entries.get(client_id) {
            Some(Entry::Parked { generation: parked_generation, .. }) if *parked_generation == generation => {
                match entries.remove(client_id) {
                    Some(Entry::Parked { parked, .. }) => Some(parked),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Ends every parked session's connection to the broker (at shutdown;
    /// their journal records and durables stay for the next run).
    pub async fn close_all(&self, shared: &Shared) {
        let parked: Vec<SessionState> = self
            .lock()
            .drain()
            .filter_map(|(_, entry)| match entry {
                Entry::Parked { parked, .. } => Some(parked.state),
                Entry::Live { .. } => None,
            })
            .collect();
        for state in parked {
            state.close(shared, false).await;
        }
    }
}

/// Publishes a parked session's will when its delay ends, and ends the
/// session when its expiry interval does, unless a connection claimed it.
async fn expire(
    shared: Arc<Shared>,
    client_id: String,
    generation: u64,
    will_delay: Option<Duration>,
    expiry: Duration,
) {
    let parked_at = Instant::now();
    if let Some(delay) = will_delay {
        tokio::time::sleep_until(parked_at + delay).await;
        if let Some((will, client)) = shared.registry.take_will(&client_id, generation) {
            crate::publish::publish_will(&shared, &client, &will).await;
        }
    }
    tokio::time::sleep_until(parked_at + expiry).await;
    if let Some(parked) = shared.registry.take_parked(&client_id, generation) {
        MqttCounters::bump(&shared.counters.sessions_expired);
        if let Some(will) = &parked.will {
            crate::publish::publish_will(&shared, &parked.state.client, will).await;
        }
        parked.state.close(&shared, true).await;
    }
}
