//! The way in for a client's PUBLISH and for a will: the retained store,
//! then the native session, which routes it like any other publish.

use sift_client::Client;
use sift_core::Message;

use crate::codec::{InboundPublish, Will};
use crate::message::message_of_publish;
use crate::retained::RetainRefused;
use crate::server::{MqttCounters, Shared};

/// Keeps `message` as `publish.topic`'s retained message when the publish
/// asks for it (an empty payload removes the one kept). A message over
/// the store's bounds is delivered but not kept, and counted.
pub(crate) fn retain(shared: &Shared, publish: &InboundPublish, message: &Message) {
    if !publish.retain {
        return;
    }
    // The journal is written under the store's lock, so that both see
    // the changes of one topic in the same order.
    let mut retained = shared.retained.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let kept = retained.set(&publish.topic, message.clone());
    if kept.is_ok() {
        shared.journal_retained(&publish.topic, message);
    }
    drop(retained);
    if let Err(refused) = kept {
        MqttCounters::bump(&shared.counters.retained_refused);
        let bound = match refused {
            RetainRefused::TooMany => "mqtt.max_retained",
            RetainRefused::TooLarge => "mqtt.max_retained_bytes",
        };
        tracing::warn!(topic = %publish.topic, "retained message not kept: {bound} reached");
    }
}

/// Publishes a will through its session's native client.
pub(crate) async fn publish_will(shared: &Shared, client: &Client, will: &Will) {
    let message = match message_of_publish(&will.publish, sift_core::system_now_ns()) {
        Ok(message) => message,
        Err(error) => {
            tracing::warn!(topic = %will.publish.topic, "will not published: {error}");
            return;
        }
    };
    retain(shared, &will.publish, &message);
    MqttCounters::bump(&shared.counters.wills_published);
    if let Err(error) = client.publish(message).await {
        tracing::warn!(topic = %will.publish.topic, "will not published: {error}");
    }
}
