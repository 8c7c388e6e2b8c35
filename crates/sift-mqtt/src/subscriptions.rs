//! An MQTT subscription on its native session: one native subscription
//! per Sift filter (`a/#` needs two), each with a forwarder task that
//! moves its deliveries into the session's bounded buffer.
//!
//! A QoS 1 or 2 subscription of a session that outlives its connection
//! reads, when `mqtt.session_stream` names a stream, a durable
//! subscription on it: its position is kept by the broker's store, so the
//! messages stored for it survive a broker restart.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sift_client::{AckPolicy, Client, Delivery, FilterKind, ManageOp, StartPosition, SubscribeOptions, Subscription};
use tokio::sync::{mpsc, oneshot};

use crate::door::MqttDoor;
use crate::topic::Filter;

/// SUBSCRIBE user properties that attach a content filter, and its language.
pub(crate) const FILTER_PROPERTIES: [(&str, FilterKind); 4] = [
    ("sift-sql", FilterKind::Sql),
    ("sift-tags", FilterKind::Tags),
    ("sift-xpath", FilterKind::Xpath),
    ("sift-regex", FilterKind::Regex),
];

/// What a client asked of one subscription: enough to make it again after
/// a restart (kept in the journal as JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SubscriptionDescription {
    /// The QoS granted.
    pub qos: u8,
    /// MQTT 5 No Local.
    pub no_local: bool,
    /// MQTT 5 Retain As Published.
    pub retain_as_published: bool,
    /// MQTT 5 Subscription Identifier.
    pub subscription_id: Option<u32>,
    /// The content filter's user property name (`sift-sql`...) and text.
    pub content_filter: Option<(String, String)>,
}

/// How one MQTT subscription delivers.
#[derive(Debug)]
pub(crate) struct Route {
    /// What the client asked for.
    pub description: SubscriptionDescription,
    /// The filter starts with a wildcard, so `$` topics are not for it.
    pub skip_dollar_topics: bool,
}

/// A delivery on its way to the client, with the route it came by.
pub(crate) struct Routed {
    pub route: Arc<Route>,
    pub delivery: Delivery,
}

/// A live MQTT subscription.
pub(crate) struct Subscribed {
    pub route: Arc<Route>,
    /// The door that writes its deliveries, and its native subscriptions'
    /// ids there (QoS 0 subscriptions of a session with a door).
    door: Option<(Arc<MqttDoor>, Vec<u32>)>,
    /// Stops each forwarder (with `true` its durable is removed too), and
    /// the forwarder's task.
    forwarders: Vec<(oneshot::Sender<bool>, tokio::task::JoinHandle<()>)>,
}

impl Subscribed {
    /// Makes the native subscriptions of `filter` on `client` and starts
    /// forwarding them into `buffer`. `durable_stream` makes QoS 1/2 ones
    /// durable subscriptions on that stream, named from `durable_prefix`.
    pub async fn open(
        (client, door): (&Client, Option<&Arc<MqttDoor>>),
        filter: &Filter,
        description: SubscriptionDescription,
        durable: Option<(&str, &str)>,
        buffer: &mpsc::Sender<Routed>,
    ) -> Result<Subscribed, sift_client::ClientError> {
        let kind = description.content_filter.as_ref().and_then(|(name, text)| {
            FILTER_PROPERTIES.iter().find(|(known, _)| known == name).map(|(_, kind)| (*kind, text.clone()))
        });
        let durable = durable.filter(|_| description.qos > 0 && filter.share_group.is_none());
        let qos = description.qos;
        let route = Arc::new(Route { description, skip_dollar_topics: filter.starts_with_wildcard() });
        // QoS 0 deliveries are written by the door, which learns each
        // subscription's id before its first delivery can come.
        let door = door.filter(|_| qos == 0).cloned();
        let mut registered = Vec::new();
        let mut natives = Vec::with_capacity(filter.sift.len());
        for (index, sift_filter) in filter.sift.iter().enumerate() {
            let ack = if qos == 0 { AckPolicy::OnWrite } else { AckPolicy::Manual };
            let mut options = SubscribeOptions::new(sift_filter.as_str()).ack(ack);
            if let Some(group) = &filter.share_group {
                options = options.queue_group(group.clone());
            }
            if let Some((kind, text)) = &kind {
                options = options.filter(*kind, text.clone());
            }
            let name = durable.map(|(stream, prefix)| (stream, format!("{prefix}-{index}")));
            if let Some((stream, name)) = &name {
                options = options.durable(name.clone(), *stream, StartPosition::New);
            }
            let subscribed = client
                .subscribe_registered(options, |sub_id| {
                    if let Some(door) = &door {
                        door.register(sub_id, route.clone());
                        registered.push(sub_id);
                    }
                })
                .await;
            match subscribed {
                Ok(subscription) => natives.push((subscription, name.map(|(_, name)| name))),
                Err(error) => {
                    for (subscription, _) in natives {
                        let _ = subscription.unsubscribe().await;
                    }
                    if let Some(door) = &door {
                        registered.iter().for_each(|sub_id| door.unregister(*sub_id));
                    }
                    return Err(error);
                }
            }
        }
        let forwarders = natives
            .into_iter()
            .map(|(subscription, durable)| {
                let (stop, stopped) = oneshot::channel();
                let forwarder =
                    Forwarder { route: route.clone(), buffer: buffer.clone(), durable, client: client.clone() };
                (stop, tokio::spawn(forwarder.run(subscription, stopped)))
            })
            .collect();
        Ok(Subscribed { route, door: door.map(|door| (door, registered)), forwarders })
    }

    /// Stops the forwarders, which unsubscribe, and waits until they have:
    /// a subscription made again with the same durable must find the old
    /// one gone. With `forget`, durable subscriptions are removed from the
    /// store too (the MQTT subscription ended), else they keep their
    /// position (the broker is stopping, or the subscription is replaced
    /// by one that reads the same durable).
    pub async fn stop(self, forget: bool) {
        if let Some((door, registered)) = &self.door {
            registered.iter().for_each(|sub_id| door.unregister(*sub_id));
        }
        let mut tasks = Vec::with_capacity(self.forwarders.len());
        for (stop, task) in self.forwarders {
            let _ = stop.send(forget);
            tasks.push(task);
        }
        for task in tasks {
            let _ = task.await;
        }
    }
}

/// Moves one native subscription's deliveries into its session's buffer.
struct Forwarder {
    route: Arc<Route>,
    buffer: mpsc::Sender<Routed>,
    durable: Option<String>,
    client: Client,
}

impl Forwarder {
    async fn run(self, mut subscription: Subscription, mut stopped: oneshot::Receiver<bool>) {
        let forget = loop {
            let delivery = tokio::select! {
                delivery = subscription.next() => delivery,
                forget = &mut stopped => break forget.unwrap_or(false),
            };
            let Some(delivery) = delivery else { return };
            if self.buffer.send(Routed { route: self.route.clone(), delivery }).await.is_err() {
                break false;
            }
        };
        let _ = subscription.unsubscribe().await;
        if let Some(name) = self.durable.filter(|_| forget) {
            if let Err(error) = self.client.manage(ManageOp::DurableRm, serde_json::json!({ "name": name })).await {
                tracing::warn!(durable = %name, "MQTT durable subscription not removed: {error}");
            }
        }
    }
}

/// The name prefix of a session's durable subscriptions for `filter`:
/// stable across restarts, and one name per client id and filter.
pub(crate) fn durable_prefix(client_id: &str, filter: &str) -> String {
    // FNV-1a: a stable hash, so the same session and filter find their
    // durable again after a restart.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in client_id.bytes().chain([0]).chain(filter.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("mqtt-{hash:016x}")
}
