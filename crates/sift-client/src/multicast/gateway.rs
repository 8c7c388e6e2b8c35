//! The gateway (FJM2D): joins a LAN's multicast group to the broker
//! network, following interest both ways.
//!
//! - LAN → network: every message multicast on the LAN is published to the
//!   gateway's broker, tagged with the gateway's id (`sift-gateway`); the
//!   broker network carries it only toward brokers whose subscribers want
//!   it, so what nobody beyond the LAN wants goes no further.
//! - network → LAN: the gateway subscribes at its broker with the union of
//!   what the LAN's subscribers announce (see [`super::announce`]), and
//!   multicasts each delivery onto the LAN, renumbered as its own sends.
//! - No loops: a LAN message that already carries a `sift-gateway` tag came
//!   from the network and is not published back; a delivery tagged with this
//!   gateway's own id came from this LAN and is not multicast back.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use sift_core::{TopicFilter, Value};
use tokio::sync::{mpsc, watch};

use super::announce::{self, Announced, LanInterest};
use super::sleep_until;
use super::{MulticastError, MulticastOptions, MulticastPublisher, MODE_INTEREST};
use crate::{Client, FilterKind, SubscribeOptions};

/// The property a gateway tags the messages it carries with.
pub const GATEWAY_PROPERTY: &str = "sift-gateway";
/// Deliveries buffered from the gateway's broker subscriptions.
pub const GATEWAY_DELIVERIES_MAX: usize = 4096;
/// Recent message ids remembered to drop a delivery that came through two
/// overlapping subscriptions.
pub const RECENT_IDS_MAX: usize = 8192;

/// What a gateway has carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GatewayCounters {
    /// LAN messages published to the broker.
    pub to_network: u64,
    /// Broker deliveries multicast onto the LAN.
    pub to_lan: u64,
    /// Messages not carried because they would have looped.
    pub loops_prevented: u64,
    /// Deliveries dropped as the second copy of one message.
    pub duplicates: u64,
    /// Objects on the group that were no message or announcement.
    pub invalid: u64,
    /// Broker subscriptions currently held for the LAN.
    pub subscriptions: u64,
}

/// A message's identity across brokers: its publisher and its id.
type MessageKey = (std::sync::Arc<str>, u64);

/// A running gateway's state.
pub struct Gateway {
    id: String,
    client: Client,
    /// The LAN's group, both ways on one NORM session.
    lan: MulticastPublisher,
    interest: LanInterest,
    /// Broker subscriptions by what they are for, each with its task.
    held: HashMap<Announced, tokio::task::JoinHandle<()>>,
    deliveries_tx: mpsc::Sender<Box<sift_core::Message>>,
    deliveries: mpsc::Receiver<Box<sift_core::Message>>,
    recent: (HashSet<MessageKey>, VecDeque<MessageKey>),
    counters: GatewayCounters,
}

impl Gateway {
    /// Joins `options.group` and uses `client`'s broker; `id` names the gateway.
    pub fn open(options: &MulticastOptions, client: Client, id: &str) -> Result<Gateway, MulticastError> {
        let lan = MulticastPublisher::open_receiving(options, id)?;
        let (deliveries_tx, deliveries) = mpsc::channel(GATEWAY_DELIVERIES_MAX);
        Ok(Gateway {
            id: id.to_string(),
            client,
            lan,
            interest: LanInterest::default(),
            held: HashMap::new(),
            deliveries_tx,
            deliveries,
            recent: (HashSet::new(), VecDeque::new()),
            counters: GatewayCounters::default(),
        })
    }

    /// What the gateway has carried so far.
    pub fn counters(&self) -> GatewayCounters {
        self.counters
    }

    /// Carries messages both ways until `stop` turns true.
    pub async fn run(&mut self, mut stop: watch::Receiver<bool>) -> Result<(), MulticastError> {
        loop {
            let expiry = self.interest.next_expiry();
            tokio::select! {
                event = self.lan.next_event() => match event {
                    Some(event) => self.carry_lan_event(event).await,
                    None => return Ok(()),
                },
                Some(message) = self.deliveries.recv() => self.carry_delivery(message).await?,
                () = sleep_until(expiry) => {
                    self.interest.expire(Instant::now());
                    self.follow_interest().await;
                }
                _ = stop.changed() => return Ok(()),
            }
        }
    }

    /// A NORM event from the LAN: a message to publish, or an announcement.
    async fn carry_lan_event(&mut self, event: sift_norm::Event) {
        let sift_norm::Event::Message { sender, data, .. } = event else { return };
        let Some((mode, body)) = super::split_object(&data) else {
            self.counters.invalid += 1;
            return;
        };
        if mode == MODE_INTEREST {
            match announce::decode(&body) {
                Ok((subscriptions, ttl)) => {
                    self.interest.announce(sender, subscriptions, ttl, Instant::now());
                    self.follow_interest().await;
                }
                Err(_) => self.counters.invalid += 1,
            }
            return;
        }
        let Ok(mut message) = sift_proto::decode_message(&body) else {
            self.counters.invalid += 1;
            return;
        };
        if message.property(GATEWAY_PROPERTY).is_some() {
            // Multicast here by a gateway: it came from the network.
            self.counters.loops_prevented += 1;
            return;
        }
        message.properties.push((GATEWAY_PROPERTY.to_string(), Value::Str(self.id.as_str().into())));
        if self.client.publish(message).await.is_ok() {
            self.counters.to_network += 1;
        }
    }

    /// A delivery from the broker: multicast it unless it came from here.
    async fn carry_delivery(&mut self, mut message: Box<sift_core::Message>) -> Result<(), MulticastError> {
        if let Some(Value::Str(origin)) = message.property(GATEWAY_PROPERTY) {
            if **origin == *self.id {
                self.counters.loops_prevented += 1;
                return Ok(());
            }
        }
        if !self.first_copy(&message) {
            self.counters.duplicates += 1;
            return Ok(());
        }
        message.properties.retain(|(name, _)| name != GATEWAY_PROPERTY);
        message.properties.push((GATEWAY_PROPERTY.to_string(), Value::Str(self.id.as_str().into())));
        self.lan.forward(*message).await?;
        self.counters.to_lan += 1;
        Ok(())
    }

    /// True the first time a message (publisher, id) is seen.
    fn first_copy(&mut self, message: &sift_core::Message) -> bool {
        let key = (message.publisher.clone(), message.id);
        if !self.recent.0.insert(key.clone()) {
            return false;
        }
        self.recent.1.push_back(key);
        if self.recent.1.len() > RECENT_IDS_MAX {
            if let Some(oldest) = self.recent.1.pop_front() {
                self.recent.0.remove(&oldest);
            }
        }
        true
    }

    /// Holds a broker subscription for each subscription the LAN wants, and
    /// none other.
    async fn follow_interest(&mut self) {
        let wanted = self.interest.union();
        self.held.retain(|announced, task| {
            let keep = wanted.contains(announced);
            if !keep {
                task.abort();
            }
            keep
        });
        for announced in wanted {
            if self.held.contains_key(&announced) {
                continue;
            }
            match self.subscribe(&announced).await {
                Ok(task) => {
                    self.held.insert(announced, task);
                }
                Err(error) => tracing::warn!(topic = %announced.topic, %error, "gateway cannot subscribe for the LAN"),
            }
        }
        self.counters.subscriptions = self.held.len() as u64;
    }

    /// Subscribes at the broker for `announced`; a task forwards deliveries.
    async fn subscribe(&self, announced: &Announced) -> Result<tokio::task::JoinHandle<()>, String> {
        TopicFilter::new(announced.topic.as_str()).map_err(|error| error.to_string())?;
        let kind = match announced.kind.as_str() {
            "none" | "" => None,
            "tags" => Some(FilterKind::Tags),
            "sql" => Some(FilterKind::Sql),
            "xpath" => Some(FilterKind::Xpath),
            "regex" => Some(FilterKind::Regex),
            other => return Err(format!("unknown filter kind {other:?}")),
        };
        let mut options = SubscribeOptions::new(announced.topic.as_str());
        if let Some(kind) = kind {
            options = options.filter(kind, announced.filter.as_str());
        }
        let mut subscription = self.client.subscribe(options).await.map_err(|error| error.to_string())?;
        let deliveries = self.deliveries_tx.clone();
        Ok(tokio::spawn(async move {
            while let Some(delivery) = subscription.next().await {
                if deliveries.send(delivery.message).await.is_err() {
                    return;
                }
            }
        }))
    }
}
