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

use std::sync::Arc;

use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::{CreditMode, Receiver, RecvError};
use fe2o3_amqp::types::definitions::{AmqpError, Error as AmqpErrorValue};
use fe2o3_amqp::types::messaging::{Body, Message as AmqpMessage};
use fe2o3_amqp::types::primitives::Value as AmqpValue;
use sift_client::PublishOptions;
use sift_core::TopicName;

use crate::condition;
use crate::connection::ConnectionContext;
use crate::jms::NodeType;
use crate::message_in::message_of;
use crate::node::{node_of, Node};
use crate::server::AmqpCounters;

/// Serves a producer's link until it detaches. `node` is the link's target;
/// `None` for an anonymous relay, whose messages each name their
/// destination in `to`.
pub(crate) async fn serve(mut receiver: Receiver, node: Option<Node>, context: Arc<ConnectionContext>) {
    let credit = context.shared.config.producer_credit;
    receiver.set_credit_mode(CreditMode::Manual);
    if receiver.set_credit(credit).await.is_err() {
        return;
    }
    loop {
        let delivery = match receiver.recv::<Body<AmqpValue>>().await {
            Ok(delivery) => delivery,
            Err(RecvError::MessageDecode(error)) => {
                let refusal = condition::error(AmqpError::DecodeError, "the message could not be decoded");
                let _ = receiver.reject(error.info, refusal).await;
                continue;
            }
            Err(error) => {
                tracing::debug!(%error, "AMQP producer link ended");
                return;
            }
        };
        let info = DeliveryInfo::from(&delivery);
        let published = publish(delivery.into_message(), node.as_ref(), &context).await;
        let settled = match published {
            Ok(()) => {
                AmqpCounters::bump(&context.shared.counters.messages_received);
                receiver.accept(info).await
            }
            Err(refusal) => {
                AmqpCounters::bump(&context.shared.counters.messages_refused);
                receiver.reject(info, refusal).await
            }
        };
        if settled.is_err() {
            return;
        }
        if receiver.credit() <= credit / 2 && receiver.set_credit(credit).await.is_err() {
            return;
        }
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

/// Publishes one message and waits for the broker's confirm.
async fn publish(
    amqp: AmqpMessage<Body<AmqpValue>>,
    node: Option<&Node>,
    context: &ConnectionContext,
) -> Result<(), AmqpErrorValue> {
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
        .publish_confirmed(message, PublishOptions::default())
        .await
        .map(|_| ())
        .map_err(|error| condition::of_client_error(&error))
}
