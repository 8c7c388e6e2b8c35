//! A consumer's link (the broker is its sender): what the source asks for
//! becomes a native subscription ([`ConsumerSpec::subscribe_options`]), and
//! each delivery goes out as an AMQP transfer ([`crate::message_out`]).
//! The consumer's disposition is the acknowledgement: `accepted` acks,
//! `released` and `modified` put the message back for redelivery,
//! `rejected` drops it.
//!
//! Flow control is the consumer's link credit: a transfer waits for
//! credit, at most `amqp.consumer_unsettled_max` deliveries wait for their
//! disposition, and behind them the subscription's queue at the broker
//! applies its policy, as for every other door.

use std::sync::Arc;
use std::time::Duration;

use fe2o3_amqp::link::delivery::Sendable;
use fe2o3_amqp::link::{SendError, Sender};
use fe2o3_amqp::types::messaging::{DistributionMode, Outcome, Source, TerminusDurability};
use fe2o3_amqp::types::primitives::Value as AmqpValue;
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_amqp::descriptor::Descriptor;
use sift_client::{durable_name_part, AckPolicy, FilterKind, StartPosition, SubscribeOptions, Subscription};

use crate::connection::ConnectionContext;
use crate::drain::DrainSignal;
use crate::jms::NodeType;
use crate::message_out::amqp_message_of;
use crate::node::Node;
use crate::server::AmqpCounters;

/// The JMS selector filter (`apache.org:selector-filter:string`): its
/// descriptor code, which Qpid JMS sends, and its name.
const SELECTOR_FILTER: (u64, &str) = (0x0000_468C_0000_0004, "apache.org:selector-filter:string");
/// The no-local filter (`apache.org:no-local-filter:list`): messages
/// published on the consumer's own connection are not delivered to it.
const NO_LOCAL_FILTER: (u64, &str) = (0x0000_468C_0000_0003, "apache.org:no-local-filter:list");
/// How long a transfer waits for credit before it looks again: the AMQP
/// library may miss a credit that arrives just as it starts to wait.
const CREDIT_RECHECK: Duration = Duration::from_secs(1);
/// During a drain, how long a transfer waits for credit before the drain
/// takes it that there is none: the library applies the flows the client
/// sent before its drain on its own task, a moment after reading them.
const DRAIN_CREDIT_WAIT: Duration = Duration::from_millis(100);

/// What a consumer's source asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerSpec {
    /// The node read.
    pub node: Node,
    /// The JMS selector, if any.
    pub selector: Option<String>,
    /// The durable subscription's name, for a durable topic subscriber.
    pub durable: Option<String>,
    /// A shared subscription (JMS 2.0): its consumers share the messages.
    pub shared: bool,
    /// A queue browser (distribution mode `copy`): it sees the queue's
    /// messages without taking them from its consumers.
    pub browse: bool,
    /// Messages published on the consumer's own connection are skipped
    /// (JMS no-local).
    pub no_local: bool,
    /// The queue group of a shared non-durable subscription (JMS 2.0
    /// `createSharedConsumer`): its consumers share the messages.
    pub shared_group: Option<String>,
}

impl ConsumerSpec {
    /// The spec of `source`, for a consumer of `node` on a connection whose
    /// client id is `container_id`, over the link `link_name`.
    pub fn of_source(source: &Source, node: Node, container_id: &str, link_name: &str) -> ConsumerSpec {
        let capabilities: Vec<&str> =
            source.capabilities.iter().flat_map(|array| array.0.iter()).map(|symbol| symbol.as_str()).collect();
        let durable = !matches!(source.durable, TerminusDurability::None);
        let global = capabilities.contains(&"global");
        let durable = (durable && node.kind == NodeType::Topic).then(|| durable_name(container_id, link_name, global));
        let copies = matches!(source.distribution_mode, Some(DistributionMode::Copy));
        let shared = capabilities.contains(&"shared");
        let shared_group = (shared && durable.is_none() && !node.kind.is_queue())
            .then(|| subscription_name("amqp.shared", container_id, link_name, global));
        ConsumerSpec {
            selector: selector_of(source),
            shared,
            browse: copies && durable.is_none() && node.kind.is_queue(),
            no_local: has_filter(source, NO_LOCAL_FILTER),
            shared_group,
            durable,
            node,
        }
    }

    /// True when this consumer reads a declared queue's stored messages: a
    /// consumer of one (not temporary) queue, which takes them (those that
    /// pass its selector, if it has one), or a browser, which reads a copy.
    /// A wildcard over queues and a temporary queue's consumer read the
    /// live messages in the queue group instead.
    pub fn reads_stored_queue(&self) -> bool {
        self.node.kind == NodeType::Queue && !self.node.topic.contains(['*', '>'])
    }

    /// True when this consumer reads a stream (a stored queue, a browser,
    /// a durable subscriber): a drain then waits until the broker says it
    /// has been given everything stored ([`crate::drain`]).
    pub fn reads_stream(&self) -> bool {
        self.reads_stored_queue() || self.durable.is_some()
    }

    /// The native subscription this consumer reads.
    pub fn subscribe_options(&self, durable_stream: &str) -> SubscribeOptions {
        let options = self.subscribe_options_without_markers(durable_stream);
        match self.reads_stream() {
            true => options.caught_up_markers(),
            false => options,
        }
    }

    fn subscribe_options_without_markers(&self, durable_stream: &str) -> SubscribeOptions {
        if self.reads_stored_queue() && self.browse {
            let options = SubscribeOptions::queue_browser(&self.node.topic).ack(AckPolicy::Manual);
            return match &self.selector {
                Some(selector) => options.filter(FilterKind::Sql, selector.clone()),
                None => options,
            };
        }
        if self.reads_stored_queue() {
            let options = match &self.selector {
                Some(selector) => {
                    SubscribeOptions::queue_selecting(&self.node.topic, FilterKind::Sql, selector.clone())
                }
                None => SubscribeOptions::queue(&self.node.topic),
            };
            return options.ack(AckPolicy::Manual);
        }
        let mut options = SubscribeOptions::new(self.node.topic.clone()).ack(AckPolicy::Manual);
        if self.node.kind.is_queue() && !self.browse {
            options = options.queue_group(self.node.topic.clone());
        }
        if let Some(group) = &self.shared_group {
            options = options.queue_group(group.clone());
        }
        if let Some(selector) = &self.selector {
            options = options.filter(FilterKind::Sql, selector.clone());
        }
        if let Some(name) = &self.durable {
            options = options.durable(name.clone(), durable_stream.to_string(), StartPosition::New);
            if self.shared {
                options = options.shared();
            }
        }
        options
    }
}

/// The selector of a source's filter set, matched by descriptor (code or
/// name) whatever its key.
fn selector_of(source: &Source) -> Option<String> {
    let filters = source.filter.as_ref()?;
    filters.iter().find_map(|(_, value)| match value {
        AmqpValue::Described(described) if is_selector_filter(value) => match &described.value {
            AmqpValue::String(text) if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        },
        _ => None,
    })
}

/// True for a filter-set entry this front-end applies: a JMS selector or
/// no-local (the others are left out of the attach's answer, so that the
/// client knows they are not in place).
pub fn is_served_filter(value: &AmqpValue) -> bool {
    is_filter(value, SELECTOR_FILTER) || is_filter(value, NO_LOCAL_FILTER)
}

fn is_selector_filter(value: &AmqpValue) -> bool {
    is_filter(value, SELECTOR_FILTER)
}

fn is_filter(value: &AmqpValue, (code, name): (u64, &str)) -> bool {
    let AmqpValue::Described(described) = value else { return false };
    match &described.descriptor {
        Descriptor::Code(found) => *found == code,
        Descriptor::Name(found) => found.as_str() == name,
    }
}

fn has_filter(source: &Source, filter: (u64, &str)) -> bool {
    source.filter.iter().flat_map(|filters| filters.iter()).any(|(_, value)| is_filter(value, filter))
}

/// The broker's durable subscription of a JMS durable subscriber: scoped by
/// the client id (or `global` for one shared without a client id), named by
/// the subscription name, which is the link name up to its first `|` (Qpid
/// JMS adds `|2`, `|global` and so on for further shared consumers).
pub fn durable_name(container_id: &str, link_name: &str, global: bool) -> String {
    subscription_name("amqp", container_id, link_name, global)
}

/// `KIND.SCOPE.NAME` for a JMS subscription: the scope and name as
/// [`durable_name`] takes them.
fn subscription_name(kind: &str, container_id: &str, link_name: &str, global: bool) -> String {
    let subscription = link_name.split('|').next().unwrap_or(link_name);
    let scope = if global || link_name.contains("|global") { "global" } else { container_id };
    format!("{kind}.{}.{}", durable_name_part(scope), durable_name_part(subscription))
}

/// How a consumer's link ended.
enum Ended {
    /// The consumer closed it (`closed = true`): a durable subscription
    /// ends with it (JMS `unsubscribe`).
    Closed,
    /// The consumer detached it, or the session or connection ended: a
    /// durable subscription stays.
    Detached,
}

/// Serves a consumer's link until it detaches.
pub(crate) async fn serve(
    mut sender: Sender,
    mut subscription: Subscription,
    spec: ConsumerSpec,
    context: Arc<ConnectionContext>,
) {
    let unsettled_max = context.shared.config.consumer_unsettled_max as usize;
    let link_name = sender.name().to_string();
    let drain = context.drains.claim(&link_name);
    let mut in_flight = FuturesUnordered::new();
    let ended = loop {
        tokio::select! {
            Some((tag, outcome)) = in_flight.next(), if !in_flight.is_empty() => settle(&context, tag, outcome),
            delivery = subscription.next(), if in_flight.len() < unsettled_max => {
                let Some(delivery) = delivery else { break Ended::Detached };
                match send(&mut sender, delivery, (&spec, &context), &drain).await {
                    Ok(Some(settlement)) => in_flight.push(settlement),
                    Ok(None) => {}
                    Err(ended) => break ended,
                }
            }
            () = drain.requested() => {
                let drained = send_what_is_ready(&mut sender, &mut subscription, (&spec, &context), &mut in_flight).await;
                drain.release();
                if let Err(ended) = drained {
                    break ended;
                }
            }
            detached = sender.on_detach() => break ended_by_detach(&detached),
        }
    };
    context.drains.forget(&link_name);
    // The link is gone: dropping it resolves the dispositions that will
    // never come (as failures, which put their messages back), while those
    // that came are still read as what they were.
    drop(sender);
    while let Some((tag, outcome)) = in_flight.next().await {
        settle(&context, tag, outcome);
    }
    finish(subscription, &spec, &context, ended).await;
}

/// The future of a sent delivery's disposition, with its delivery tag.
type Settlement = std::pin::Pin<Box<dyn std::future::Future<Output = (u64, Result<Outcome, SendError>)> + Send>>;

/// Sends one delivery once the link has credit; `None` when it was not
/// for this consumer (no-local). A drain asked for while it waits for
/// credit looks at the credit again at once (the library may have missed
/// waking the send): with none the drain is released, since nothing can be
/// sent; with some the delivery goes and the drain is served next.
async fn send(
    sender: &mut Sender,
    delivery: sift_client::Delivery,
    (spec, context): (&ConsumerSpec, &ConnectionContext),
    drain: &DrainSignal,
) -> Result<Option<Settlement>, Ended> {
    let Some(sendable) = sendable_of(&delivery, spec, context) else { return Ok(None) };
    let tag = delivery.delivery_tag;
    let sent = loop {
        let waited = tokio::select! {
            sent = transfer(sender, &sendable) => Some(sent),
            () = drain.requested() => None,
        };
        if let Some(sent) = waited {
            break sent;
        }
        // Dropped while it waited for credit, before it took any; tried
        // once more, for as long as credit the client gave before its drain
        // may take to reach the link.
        match tokio::time::timeout(DRAIN_CREDIT_WAIT, sender.send_batchable_ref(&sendable)).await {
            Ok(sent) => {
                drain.request(); // Served by the consumer's loop next.
                break sent;
            }
            Err(_) => drain.release(),
        }
    };
    match sent {
        Ok(settlement) => {
            AmqpCounters::bump(&context.shared.counters.messages_delivered);
            Ok(Some(Box::pin(async move { (tag, settlement.await) })))
        }
        Err(error) => {
            put_back(context, tag);
            Err(ended_by(&error))
        }
    }
}

/// A drain: sends what the subscription has ready, within the link's
/// credit and `amqp.consumer_unsettled_max`. A live subscription has ready
/// what has reached this front-end; one that reads a stream has ready
/// everything stored, which the broker says it has given with a
/// `CAUGHT_UP` marker, waited for at most `amqp.drain_wait_ms_max`
/// ([`crate::drain`]).
async fn send_what_is_ready(
    sender: &mut Sender,
    subscription: &mut Subscription,
    (spec, context): (&ConsumerSpec, &ConnectionContext),
    in_flight: &mut FuturesUnordered<Settlement>,
) -> Result<(), Ended> {
    let wait_max = Duration::from_millis(context.shared.config.drain_wait_ms_max);
    let unsettled_max = context.shared.config.consumer_unsettled_max as usize;
    while in_flight.len() < unsettled_max {
        let next = match spec.reads_stream() {
            false => subscription.try_next(),
            // When the broker does not say in time, the drain is answered
            // with what came.
            true => tokio::time::timeout(wait_max, subscription.next_until_caught_up()).await.ok().flatten(),
        };
        let Some(delivery) = next else { return Ok(()) };
        let Some(sendable) = sendable_of(&delivery, spec, context) else { continue };
        let tag = delivery.delivery_tag;
        // No credit within the wait: the credit is used up (the send waits
        // for credit before it takes any), the drain is done, and the
        // delivery goes back to the broker for the next credit.
        match tokio::time::timeout(DRAIN_CREDIT_WAIT, sender.send_batchable_ref(&sendable)).await {
            Ok(Ok(settlement)) => {
                AmqpCounters::bump(&context.shared.counters.messages_delivered);
                in_flight.push(Box::pin(async move { (tag, settlement.await) }));
            }
            Ok(Err(error)) => {
                put_back(context, tag);
                return Err(ended_by(&error));
            }
            Err(_) => {
                put_back(context, tag);
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The transfer of a delivery; `None` for one the consumer is not to get
/// (its own connection's message, for a no-local consumer), which is
/// acknowledged here.
fn sendable_of(
    delivery: &sift_client::Delivery,
    spec: &ConsumerSpec,
    context: &ConnectionContext,
) -> Option<Sendable<fe2o3_amqp::types::messaging::Body<AmqpValue>>> {
    if spec.no_local && delivery.message.publisher.as_ref() == context.native_name.as_str() {
        put_away(context, delivery.delivery_tag);
        return None;
    }
    let redeliveries = u32::from(delivery.redelivered);
    let amqp = amqp_message_of(&delivery.message, redeliveries, spec.node.kind);
    Some(Sendable::builder().message(amqp).settled(false).build())
}

/// Sends one transfer once the link has credit; the future of its
/// disposition.
async fn transfer(
    sender: &mut Sender,
    sendable: &Sendable<fe2o3_amqp::types::messaging::Body<AmqpValue>>,
) -> Result<fe2o3_amqp::link::delivery::DeliveryFut<Result<Outcome, SendError>>, SendError> {
    loop {
        match tokio::time::timeout(CREDIT_RECHECK, sender.send_batchable_ref(sendable)).await {
            Ok(sent) => return sent,
            Err(_) => continue,
        }
    }
}

/// Acknowledges a delivery by the consumer's disposition.
fn settle(context: &ConnectionContext, tag: u64, outcome: Result<Outcome, SendError>) {
    if tag == 0 {
        return; // A best-effort message needs no acknowledgement.
    }
    let acknowledged = match outcome {
        Ok(Outcome::Accepted(_)) => context.client.ack_tag(tag),
        Ok(Outcome::Rejected(_)) => context.client.nack_tag(tag, false),
        Ok(_) | Err(_) => context.client.nack_tag(tag, true),
    };
    if let Err(error) = acknowledged {
        tracing::debug!(%error, "AMQP disposition not passed on: the native session ended");
    }
}

/// Acknowledges a delivery the consumer is not to get (its own
/// connection's message, for a no-local consumer).
fn put_away(context: &ConnectionContext, tag: u64) {
    if tag != 0 {
        let _ = context.client.ack_tag(tag);
    }
}

/// Gives a delivery that was never sent back to the broker.
fn put_back(context: &ConnectionContext, tag: u64) {
    if tag != 0 {
        let _ = context.client.nack_tag(tag, true);
    }
}

fn ended_by(error: &SendError) -> Ended {
    match error {
        SendError::LinkStateError(fe2o3_amqp::link::LinkStateError::RemoteClosed)
        | SendError::LinkStateError(fe2o3_amqp::link::LinkStateError::RemoteClosedWithError(_)) => Ended::Closed,
        _ => Ended::Detached,
    }
}

fn ended_by_detach(error: &fe2o3_amqp::link::DetachError) -> Ended {
    match closed_by_client(error) {
        true => Ended::Closed,
        false => Ended::Detached,
    }
}

/// True when the client closed the link (`closed = true`), rather than
/// detached it or lost its session.
pub(crate) fn closed_by_client(error: &fe2o3_amqp::link::DetachError) -> bool {
    matches!(
        error,
        fe2o3_amqp::link::DetachError::ClosedByRemote | fe2o3_amqp::link::DetachError::RemoteClosedWithError(_)
    )
}

/// Ends the native subscription; a durable one closed by its consumer is
/// removed (JMS `unsubscribe` closes the link of the subscription's name).
async fn finish(subscription: Subscription, spec: &ConsumerSpec, context: &ConnectionContext, ended: Ended) {
    let _ = subscription.unsubscribe().await;
    if let (Some(name), Ended::Closed) = (&spec.durable, ended) {
        if spec.shared {
            return; // Other consumers may share it; only an unsubscribe by name removes it.
        }
        remove_durable(context, name).await;
    }
}

/// Removes the durable subscription `name` (JMS `unsubscribe`); a refusal
/// is logged, as the client has closed its link and hears nothing more.
pub(crate) async fn remove_durable(context: &ConnectionContext, name: &str) {
    let removed = context.client.manage(sift_client::ManageOp::DurableRm, serde_json::json!({ "name": name })).await;
    if let Err(error) = removed {
        tracing::debug!(durable = %name, %error, "AMQP durable subscription not removed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durable_names_are_scoped_by_client_id_or_global() {
        assert_eq!(durable_name("ID:abc:1", "audit", false), "amqp.ID_abc_1.audit");
        assert_eq!(durable_name("client-7", "audit|2", false), "amqp.client-7.audit");
        assert_eq!(durable_name("client-7", "audit|global", true), "amqp.global.audit");
    }
}
