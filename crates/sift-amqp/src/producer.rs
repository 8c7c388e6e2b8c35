//! A producer's link (the broker is its receiver): each message is mapped
//! ([`crate::message_in`]) and published through the connection's native
//! session, and settled once the broker confirmed it: `accepted`, or
//! `rejected` with the refusal in AMQP's words. A persistent message is
//! confirmed once stored, so its disposition means what a JMS
//! synchronous send promises.
//!
//! Flow control is link credit: the link holds `amqp.producer_credit`, and
//! is topped up as messages are confirmed, so a producer faster than the
//! broker waits for credit rather than filling memory.

use std::collections::VecDeque;
use std::sync::Arc;

use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::{CreditMode, Receiver, RecvError};
use fe2o3_amqp::types::definitions::{AmqpError, Error as AmqpErrorValue};
use fe2o3_amqp::types::messaging::{Body, Message as AmqpMessage};
use fe2o3_amqp::types::primitives::Value as AmqpValue;
use sift_client::{ClientError, Confirm, PublishOptions};
use sift_core::TopicName;
use tokio::sync::oneshot;

use crate::condition;
use crate::connection::ConnectionContext;
use crate::jms::NodeType;
use crate::message_in::message_of;
use crate::node::{node_of, Node};
use crate::server::AmqpCounters;

/// A message published and not yet settled: its delivery, and the
/// broker's confirm to come (or the refusal already known).
struct InFlight {
    info: DeliveryInfo,
    /// Its delivery id, which a commit's answer may wait for.
    delivery_id: u32,
    confirm: Result<oneshot::Receiver<Result<Confirm, ClientError>>, AmqpErrorValue>,
}

/// Serves a producer's link until it detaches. `node` is the link's target;
/// `None` for an anonymous relay, whose messages each name their
/// destination in `to`.
///
/// Messages are published as they come, up to the link's credit in
/// flight, and settled in order as their confirms come back, those
/// accepted together in one disposition: a producer that does not wait
/// (JMS non-persistent sends) is not held to one round trip per message.
pub(crate) async fn serve(mut receiver: Receiver, node: Option<Node>, context: Arc<ConnectionContext>) {
    let credit = context.shared.config.producer_credit;
    receiver.set_credit_mode(CreditMode::Manual);
    if receiver.set_credit(credit).await.is_err() {
        return;
    }
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    loop {
        let room = in_flight.len() < credit as usize;
        let oldest = async {
            match in_flight.front_mut().map(|oldest| &mut oldest.confirm) {
                Some(Ok(confirm)) => Some(confirm.await.map_err(|_| ())),
                Some(Err(_)) => None,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            confirmed = oldest => {
                if settle(&receiver, &mut in_flight, confirmed, &context).await.is_err() {
                    return;
                }
            }
            delivery = receiver.recv::<Body<AmqpValue>>(), if room => {
                let delivery = match delivery {
                    Ok(delivery) => delivery,
                    Err(RecvError::MessageDecode(error)) => {
                        let refusal = condition::error(AmqpError::DecodeError, "the message could not be decoded");
                        let delivery_id = error.info.delivery_id();
                        in_flight.push_back(InFlight { info: error.info, delivery_id, confirm: Err(refusal) });
                        continue;
                    }
                    Err(error) => {
                        tracing::debug!(%error, "AMQP producer link ended");
                        return;
                    }
                };
                let info = DeliveryInfo::from(&delivery);
                let delivery_id = info.delivery_id();
                let confirm = publish(delivery.into_message(), node.as_ref(), &context).await;
                in_flight.push_back(InFlight { info, delivery_id, confirm });
            }
        }
        if receiver.credit() <= credit / 2 && receiver.set_credit(credit).await.is_err() {
            return;
        }
    }
}

/// Settles the oldest message in flight by its confirm (`confirmed`; `None`
/// when its refusal was known at once), with every later one whose
/// confirm has come too: the accepted ones in one disposition.
async fn settle(
    receiver: &Receiver,
    in_flight: &mut VecDeque<InFlight>,
    mut confirmed: Option<Result<Result<Confirm, ClientError>, ()>>,
    context: &ConnectionContext,
) -> Result<(), fe2o3_amqp::link::DispositionError> {
    let mut accepted = Vec::new();
    while let Some(mut entry) = in_flight.pop_front() {
        let outcome = match (confirmed.take(), &mut entry.confirm) {
            (Some(result), _) => outcome_of(result),
            (None, Err(refusal)) => Err(refusal.clone()),
            (None, Ok(confirm)) => match confirm.try_recv() {
                Ok(result) => outcome_of(Ok(result)),
                Err(oneshot::error::TryRecvError::Empty) => {
                    in_flight.push_front(entry);
                    break;
                }
                Err(oneshot::error::TryRecvError::Closed) => outcome_of(Err(())),
            },
        };
        // A commit's answer may wait for this one (`crate::commits`).
        context.commits.published(receiver.name(), entry.delivery_id);
        match outcome {
            Ok(()) => {
                AmqpCounters::bump(&context.shared.counters.messages_received);
                accepted.push(entry.info);
            }
            Err(refusal) => {
                AmqpCounters::bump(&context.shared.counters.messages_refused);
                if !accepted.is_empty() {
                    receiver.accept_all(std::mem::take(&mut accepted)).await?;
                }
                receiver.reject(entry.info, refusal).await?;
            }
        }
    }
    if !accepted.is_empty() {
        receiver.accept_all(accepted).await?;
    }
    Ok(())
}

/// The disposition a confirm calls for; `Err(())` when the confirm will
/// never come (the native session ended).
fn outcome_of(result: Result<Result<Confirm, ClientError>, ()>) -> Result<(), AmqpErrorValue> {
    match result {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(condition::of_client_error(&error)),
        Err(()) => Err(condition::of_client_error(&ClientError::Closed)),
    }
}

/// The destination of a message on an anonymous relay: its `to`, a queue
/// when the address or the `x-opt-jms-dest` annotation says so (declared,
/// so that it keeps the message).
async fn relay_address(
    amqp: &AmqpMessage<Body<AmqpValue>>,
    context: &ConnectionContext,
) -> Result<String, AmqpErrorValue> {
    let to = amqp.properties.as_ref().and_then(|properties| properties.to.clone());
    let mut node =
        node_of(to.as_deref(), None).map_err(|error| condition::error(AmqpError::NotFound, error.to_string()))?;
    let annotated = amqp.message_annotations.as_ref().and_then(|annotations| {
        let key = fe2o3_amqp::types::messaging::annotations::OwnedKey::Symbol("x-opt-jms-dest".into());
        match annotations.0.get(&key) {
            Some(AmqpValue::Byte(code)) => NodeType::of_code(*code),
            _ => None,
        }
    });
    if let Some(kind) = annotated {
        node.kind = kind;
    }
    if node.kind == NodeType::Queue {
        context.declare_queue(&node.topic).await.map_err(|error| condition::of_client_error(&error))?;
    }
    Ok(node.topic)
}

/// Publishes one message; the broker's confirm to come.
async fn publish(
    amqp: AmqpMessage<Body<AmqpValue>>,
    node: Option<&Node>,
    context: &ConnectionContext,
) -> Result<oneshot::Receiver<Result<Confirm, ClientError>>, AmqpErrorValue> {
    let address = match node {
        Some(node) => node.topic.clone(),
        None => relay_address(&amqp, context).await?,
    };
    let topic = TopicName::new(&address)
        .map_err(|error| condition::error(AmqpError::NotFound, format!("address {address:?}: {error}")))?;
    let message =
        message_of(amqp, topic).map_err(|error| condition::error(AmqpError::InvalidField, error.to_string()))?;
    context
        .client
        .start_confirmed(message, PublishOptions::default())
        .await
        .map_err(|error| condition::of_client_error(&error))
}
