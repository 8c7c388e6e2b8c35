//! Link addresses as Sift destinations: which topic a producer's target or
//! a consumer's source names, and whether it is a queue (one consumer of a
//! queue group takes each message) or a topic (every subscriber does).
//!
//! The kind comes from the terminus capabilities Qpid JMS sends (`queue`,
//! `topic`, `temporary-queue`, `temporary-topic`), else from an address
//! prefix (`queue://`, `topic://`), else it is a queue: what AMQP brokers
//! such as Artemis and RabbitMQ do with a bare address.

use fe2o3_amqp::types::primitives::{Array, Symbol};

use crate::jms::NodeType;

/// A node a link reads or writes: a topic, and how it is consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The Sift topic (a producer's) or topic filter (a consumer's, which
    /// may hold `*` and `>`); the broker judges it.
    pub topic: String,
    /// Queue or topic, temporary or not.
    pub kind: NodeType,
}

/// Why a link names no node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// The link has no address (and is not dynamic).
    #[error("the link names no address")]
    NoAddress,
}

/// The node `address` names, with the terminus `capabilities`.
pub fn node_of(address: Option<&str>, capabilities: Option<&Array<Symbol>>) -> Result<Node, NodeError> {
    let address = address.filter(|address| !address.is_empty()).ok_or(NodeError::NoAddress)?;
    let declared = capabilities
        .into_iter()
        .flat_map(|capabilities| capabilities.0.iter())
        .find_map(|capability| NodeType::of_capability(capability.as_str()));
    let (name, prefixed) = match (address.strip_prefix("queue://"), address.strip_prefix("topic://")) {
        (Some(name), _) => (name, Some(NodeType::Queue)),
        (_, Some(name)) => (name, Some(NodeType::Topic)),
        _ => (address, None),
    };
    let kind = declared.or(prefixed).unwrap_or(NodeType::Queue);
    Ok(Node { topic: name.to_string(), kind })
}

/// The address of temporary node `number` of connection `connection_id`:
/// a topic no client names by chance.
pub fn temporary_address(kind: NodeType, connection_id: u64, number: u64) -> String {
    let tag = if kind == NodeType::TempTopic { "topic" } else { "queue" };
    format!("sift.tmp.{tag}.{connection_id}.{number}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capabilities(names: &[&str]) -> Array<Symbol> {
        Array::from(names.iter().map(|name| Symbol::from(*name)).collect::<Vec<_>>())
    }

    #[test]
    fn capabilities_then_prefixes_then_queue_decide_the_kind() {
        let topic = node_of(Some("orders.new"), Some(&capabilities(&["topic"]))).expect("valid");
        assert_eq!((topic.topic.as_str(), topic.kind), ("orders.new", NodeType::Topic));
        let shared = node_of(Some("orders"), Some(&capabilities(&["topic", "shared", "global"]))).expect("valid");
        assert_eq!(shared.kind, NodeType::Topic);
        assert_eq!(node_of(Some("topic://quotes"), None).expect("valid").kind, NodeType::Topic);
        assert_eq!(node_of(Some("queue://jobs"), None).expect("valid").topic.as_str(), "jobs");
        assert_eq!(node_of(Some("jobs"), None).expect("valid").kind, NodeType::Queue);
        let temporary = temporary_address(NodeType::TempQueue, 7, 1);
        let node = node_of(Some(&temporary), Some(&capabilities(&["temporary-queue"]))).expect("valid");
        assert_eq!(node.kind, NodeType::TempQueue);
    }

    #[test]
    fn no_address_is_an_error() {
        assert_eq!(node_of(None, None), Err(NodeError::NoAddress));
        assert_eq!(node_of(Some(""), None), Err(NodeError::NoAddress));
    }
}
