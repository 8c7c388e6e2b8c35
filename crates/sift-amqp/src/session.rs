//! One AMQP session: each link the client attaches becomes a producer
//! ([`crate::producer`]) or a consumer ([`crate::consumer`]), or is refused
//! the AMQP way (an attach with a null terminus, then a closing detach that
//! carries the error), so that Qpid JMS raises the matching exception.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use fe2o3_amqp::acceptor::{LinkAcceptor, LinkEndpoint, ListenerSessionHandle};
use fe2o3_amqp::types::definitions::{AmqpError, Error as AmqpErrorValue, Role};
use fe2o3_amqp::types::messaging::{Source, Target, TargetArchetype};
use fe2o3_amqp::types::performatives::Attach;
use fe2o3_amqp::types::primitives::Symbol;
use tokio::task::JoinSet;

use crate::condition;
use crate::connection::ConnectionContext;
use crate::consumer::{durable_name, ConsumerSpec};
use crate::jms::NodeType;
use crate::node::{node_of, temporary_address, Node};
use crate::server::AmqpCounters;

/// How long a refused link's closing detach waits for the client's reply.
const REFUSAL_WAIT: Duration = Duration::from_secs(10);

/// Serves a session's attaches until it ends, then waits for its links.
pub(crate) async fn serve(mut session: ListenerSessionHandle, context: Arc<ConnectionContext>) {
    let mut links = JoinSet::new();
    let links_max = context.shared.config.max_links_per_session as usize;
    while let Some(attach) = session.next_incoming_attach().await {
        while links.try_join_next().is_some() {}
        if links.len() >= links_max {
            let limit = format!("a session holds at most amqp.max_links_per_session = {links_max} links");
            refuse(&mut session, attach, condition::error(AmqpError::ResourceLimitExceeded, limit), &context).await;
            continue;
        }
        match attach.role {
            Role::Sender => attach_producer(&mut session, attach, &context, &mut links).await,
            Role::Receiver => attach_consumer(&mut session, attach, &context, &mut links).await,
        }
    }
    while links.join_next().await.is_some() {}
}

/// A link the client sends on: a producer to a node, an anonymous relay,
/// or the creator of a temporary node (a dynamic target).
async fn attach_producer(
    session: &mut ListenerSessionHandle,
    attach: Attach,
    context: &Arc<ConnectionContext>,
    links: &mut JoinSet<()>,
) {
    let target = match attach.target.as_deref() {
        Some(TargetArchetype::Target(target)) => target.clone(),
        // The library's transaction coordinator takes coordinator links
        // before they reach here (see `connection::run`); one that still
        // comes is refused by the plain acceptor with `amqp:not-implemented`.
        Some(TargetArchetype::Coordinator(_)) => {
            AmqpCounters::bump(&context.shared.counters.links_refused);
            let _ = LinkAcceptor::new().accept_incoming_attach(attach, session).await;
            return;
        }
        None => {
            let refusal = condition::error(AmqpError::InvalidField, "a producer's link needs a target");
            return refuse(session, attach, refusal, context).await;
        }
    };
    let capabilities = capability_names(target.capabilities.as_ref().map(|array| array.0.as_slice()));
    let (node, address) = if target.dynamic {
        let kind = if capabilities.iter().any(|name| name == "temporary-topic") {
            NodeType::TempTopic
        } else {
            NodeType::TempQueue
        };
        let number = context.temporary_nodes.fetch_add(1, Ordering::Relaxed) + 1;
        let address = temporary_address(kind, context.connection_id, number);
        (Some(Node { topic: address.clone(), kind }), Some(address))
    } else if target.address.is_none() {
        (None, None) // An anonymous relay: each message names its destination.
    } else {
        match node_of(target.address.as_deref(), target.capabilities.as_ref()) {
            Ok(node) => (Some(node), None),
            Err(error) => {
                return refuse(session, attach, condition::error(AmqpError::NotFound, error.to_string()), context).await
            }
        }
    };
    // A queue keeps what is sent to it from the first send on.
    if let Some(node) = node.as_ref().filter(|node| node.kind == NodeType::Queue) {
        if let Err(error) = context.declare_queue(&node.topic).await {
            return refuse(session, attach, condition::of_client_error(&error), context).await;
        }
    }
    let acceptor = LinkAcceptor::builder()
        .target_capabilities(symbols(&capabilities))
        .on_dynamic_target(move |mut target: Target| {
            target.address = address.clone();
            Some(target)
        })
        .build();
    match acceptor.accept_incoming_attach(attach, session).await {
        Ok(LinkEndpoint::Receiver(receiver)) => {
            AmqpCounters::bump(&context.shared.counters.links_attached);
            links.spawn(crate::producer::serve(receiver, node, context.clone()));
        }
        Ok(LinkEndpoint::Sender(_)) => {}
        Err(error) => tracing::debug!(%error, "AMQP producer link not attached"),
    }
}

/// A link the client receives on: a consumer of a node (plain, queue,
/// durable, shared, browser), or JMS's lookup of a durable subscription it
/// is about to remove (a null source).
async fn attach_consumer(
    session: &mut ListenerSessionHandle,
    mut attach: Attach,
    context: &Arc<ConnectionContext>,
    links: &mut JoinSet<()>,
) {
    let Some(source) = attach.source.as_deref().cloned() else {
        return attach_unsubscribe(session, attach, context, links).await;
    };
    if source.dynamic {
        let refusal = condition::error(AmqpError::NotImplemented, "dynamic sources are not served");
        return refuse(session, attach, refusal, context).await;
    }
    let node = match node_of(source.address.as_deref(), source.capabilities.as_ref()) {
        Ok(node) => node,
        Err(error) => {
            return refuse(session, attach, condition::error(AmqpError::NotFound, error.to_string()), context).await
        }
    };
    let spec = ConsumerSpec::of_source(&source, node, &context.container_id, &attach.name);
    if spec.reads_stored_queue() {
        if let Err(error) = context.declare_queue(&spec.node.topic).await {
            return refuse(session, attach, condition::of_client_error(&error), context).await;
        }
    }
    let options = spec.subscribe_options(&context.shared.config.durable_stream);
    let subscription = match context.client.subscribe(options).await {
        Ok(subscription) => subscription,
        Err(error) => return refuse(session, attach, condition::of_client_error(&error), context).await,
    };
    // Echo only the filter this front-end applies.
    if let Some(source) = attach.source.as_deref_mut() {
        source.filter = source
            .filter
            .take()
            .map(|filters| filters.into_iter().filter(|(_, value)| crate::consumer::is_served_filter(value)).collect());
    }
    let capabilities = capability_names(source.capabilities.as_ref().map(|array| array.0.as_slice()));
    let acceptor = LinkAcceptor::builder().source_capabilities(symbols(&capabilities)).build();
    match acceptor.accept_incoming_attach(attach, session).await {
        Ok(LinkEndpoint::Sender(sender)) => {
            AmqpCounters::bump(&context.shared.counters.links_attached);
            links.spawn(crate::consumer::serve(sender, subscription, spec, context.clone()));
        }
        Ok(LinkEndpoint::Receiver(_)) | Err(_) => {
            let _ = subscription.unsubscribe().await;
        }
    }
}

/// JMS `unsubscribe(name)`: a link named after the subscription with no
/// source. An existing durable subscription is answered with a source, and
/// removed when the client closes the link; a missing one is refused with
/// `amqp:not-found` (an `InvalidDestinationException`).
async fn attach_unsubscribe(
    session: &mut ListenerSessionHandle,
    mut attach: Attach,
    context: &Arc<ConnectionContext>,
    links: &mut JoinSet<()>,
) {
    let global = attach
        .desired_capabilities
        .iter()
        .flat_map(|array| array.0.iter())
        .any(|capability| capability.as_str() == "global");
    let name = durable_name(&context.container_id, &attach.name, global);
    let described =
        context.client.manage(sift_client::ManageOp::DurableInfo, serde_json::json!({ "name": name.clone() })).await;
    if let Err(error) = described {
        return refuse(session, attach, condition::of_client_error(&error), context).await;
    }
    attach.source = Some(Box::new(
        Source::builder().durable(fe2o3_amqp::types::messaging::TerminusDurability::UnsettledState).build(),
    ));
    match LinkAcceptor::new().accept_incoming_attach(attach, session).await {
        Ok(LinkEndpoint::Sender(mut sender)) => {
            let context = context.clone();
            links.spawn(async move {
                if crate::consumer::closed_by_client(&sender.on_detach().await) {
                    crate::consumer::remove_durable(&context, &name).await;
                }
            });
        }
        Ok(LinkEndpoint::Receiver(_)) | Err(_) => {}
    }
}

/// Refuses an attach: answers it with a null terminus, then closes the
/// link with `error` (in a task of its own: the close waits for the
/// client's reply).
async fn refuse(
    session: &mut ListenerSessionHandle,
    mut attach: Attach,
    error: AmqpErrorValue,
    context: &ConnectionContext,
) {
    AmqpCounters::bump(&context.shared.counters.links_refused);
    tracing::debug!(link = %attach.name, condition = ?error.condition, description = ?error.description, "AMQP link refused");
    match attach.role {
        Role::Receiver => {
            attach.source = None;
            if attach.target.is_none() {
                attach.target = Some(Box::new(TargetArchetype::Target(Target::default())));
            }
        }
        Role::Sender => attach.target = None,
    }
    match LinkAcceptor::new().accept_incoming_attach(attach, session).await {
        Ok(LinkEndpoint::Sender(sender)) => {
            tokio::spawn(tokio::time::timeout(REFUSAL_WAIT, sender.close_with_error(error)));
        }
        Ok(LinkEndpoint::Receiver(receiver)) => {
            tokio::spawn(tokio::time::timeout(REFUSAL_WAIT, receiver.close_with_error(error)));
        }
        Err(_) => {}
    }
}

fn capability_names(capabilities: Option<&[Symbol]>) -> Vec<String> {
    capabilities.unwrap_or_default().iter().map(|symbol| symbol.as_str().to_string()).collect()
}

fn symbols(names: &[String]) -> Option<Vec<Symbol>> {
    (!names.is_empty()).then(|| names.iter().map(|name| Symbol::from(name.as_str())).collect())
}
