//! `SUBSCRIBE`, `UNSUBSCRIBE`, `ACK`, `NACK` and `FLOW`: the subscriber side
//! of a connection's reader.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sift_core::TopicFilter;
use sift_filter::ContentFilter;
use sift_proto::{subscribe_flags, ErrorCode, Frame, Subscribe};

use crate::conn::apply_settled;
use crate::delivery::hand_over;
use crate::outbox::{CreditError, QueueOptions, Settled};
use crate::session::Session;
use crate::stats::bump;
use crate::subscription::{parse_content_filter, SubRef, Subscription};

/// A subscribe request that passed every check: its topic filter, its
/// parsed content filter and its queue options.
pub(crate) type Checked = (TopicFilter, Option<Arc<ContentFilter>>, QueueOptions);

/// A subscription as `ADMIN subscriptions` shows it.
pub(crate) fn describe(subscription: &Subscription, request: &Subscribe) -> serde_json::Value {
    let content = subscription
        .content
        .as_ref()
        .map(|filter| serde_json::json!({ "language": filter.language().name(), "filter": filter.to_string() }));
    let source = request.source.as_ref();
    serde_json::json!({
        "sub_id": subscription.sub_id,
        "topic": subscription.topic_filter.as_str(),
        "content": content,
        "queue_group": subscription.group.as_deref(),
        "ack_mode": match subscription.ack_mode { sift_proto::AckMode::Auto => "auto", sift_proto::AckMode::Client => "client" },
        "policy": subscription.policy.to_string(),
        "stream": source.map(|source| source.stream.clone()),
        "durable": source.filter(|source| !source.durable.is_empty()).map(|source| source.durable.clone()),
    })
}

/// A subscription's content filter under its grant's restriction: the
/// restriction alone when the subscription has no filter, both (one
/// indexed conjunction, [`ContentFilter::And`]) when it has one.
pub(crate) fn restricted(
    own: Option<Arc<ContentFilter>>,
    restriction: Option<Arc<ContentFilter>>,
) -> Option<Arc<ContentFilter>> {
    match (own, restriction) {
        (own, None) => own,
        (None, Some(restriction)) => Some(restriction),
        (Some(own), Some(restriction)) => {
            Some(Arc::new(ContentFilter::and(ContentFilter::clone(&own), ContentFilter::clone(&restriction))))
        }
    }
}

impl Session {
    /// Opens a subscription after checking every limit (the user's
    /// `subscriptions_max` first); answers `SUBSCRIBED`.
    pub(crate) fn subscribe(&mut self, request: Subscribe) -> bool {
        let sub_id = request.sub_id;
        let group = request.queue_group.as_str();
        if !group.is_empty() && !self.permits(super::access::Action::JoinGroup(group), u64::from(sub_id)) {
            return true;
        }
        if let Some(Err(refusal)) = self.usage.as_mut().map(crate::usage::UsageGuard::add_subscription) {
            bump(&self.shared.stats.user_limit_refusals);
            self.refuse(ErrorCode::TooManySubscriptions, u64::from(sub_id), refusal.to_string());
            return true;
        }
        let held = self.subscriptions.len();
        let keep_going = self.open_subscription(request);
        if self.subscriptions.len() == held {
            // Refused for another reason: the count is given back.
            if let Some(usage) = self.usage.as_mut() {
                usage.remove_subscription();
            }
        }
        keep_going
    }

    fn open_subscription(&mut self, request: Subscribe) -> bool {
        if let Some(source) = request.source.clone() {
            return self.subscribe_stream(request, source);
        }
        let sub_id = request.sub_id;
        let reference = u64::from(sub_id);
        match self.check_subscribe(&request) {
            Ok((topic_filter, content, options)) => {
                let Some(restriction) = self.subscribe_grant(&topic_filter, reference) else { return true };
                let content = restricted(content, restriction);
                let group = (!request.queue_group.is_empty()).then(|| Arc::from(request.queue_group.as_str()));
                let subscription = SubRef(Arc::new(Subscription {
                    key: options.key,
                    sub_id,
                    conn: self.conn.clone(),
                    topic_filter,
                    group,
                    content,
                    ack_mode: request.ack_mode,
                    policy: options.policy,
                    label: format!("{}#{}/{}", self.conn.name, self.conn.id, sub_id),
                }));
                self.conn.lock().add_subscription(sub_id, options);
                // SUBSCRIBED is queued before the router can match the new
                // subscription, and control frames go out before deliveries,
                // so no DELIVER for it can overtake its SUBSCRIBED.
                self.conn.send_control(&Frame::Subscribed { sub_id });
                self.shared.router.insert(subscription.clone());
                // After the router lock is released: the network's lock is
                // never taken inside the router's.
                self.shared.links.local_subscribed(&subscription, &self.shared.stats);
                self.conn.list_subscription(sub_id, describe(&subscription, &request));
                self.subscriptions.insert(sub_id, subscription);
            }
            Err((code, message)) => self.refuse(code, reference, message),
        }
        true
    }

    pub(crate) fn check_subscribe(&self, request: &Subscribe) -> Result<Checked, (ErrorCode, String)> {
        let limits = &self.shared.config.limits;
        let delivery = &self.shared.config.delivery;
        if self.subscriptions.contains_key(&request.sub_id) {
            return Err((ErrorCode::DuplicateSubscription, format!("sub_id {} is already in use", request.sub_id)));
        }
        if self.subscriptions.len() >= limits.max_subscriptions_per_connection as usize {
            let message = format!(
                "connection already holds max_subscriptions_per_connection = {} subscriptions",
                limits.max_subscriptions_per_connection
            );
            return Err((ErrorCode::TooManySubscriptions, message));
        }
        if request.filter.len() > limits.max_filter_bytes as usize {
            let message =
                format!("filter is {} bytes; max_filter_bytes = {}", request.filter.len(), limits.max_filter_bytes);
            return Err((ErrorCode::FilterTooLong, message));
        }
        let topic_filter = TopicFilter::new(request.topic_filter.as_str())
            .map_err(|error| (ErrorCode::InvalidTopic, format!("topic filter: {error}")))?;
        let content = parse_content_filter(request.filter_kind, &request.filter)?;
        if request.queue_capacity > delivery.queue_capacity_max {
            let message = format!(
                "queue_capacity {} exceeds queue_capacity_max = {}",
                request.queue_capacity, delivery.queue_capacity_max
            );
            return Err((ErrorCode::InvalidField, message));
        }
        if request.max_unacked > delivery.max_unacked_max {
            let message =
                format!("max_unacked {} exceeds max_unacked_max = {}", request.max_unacked, delivery.max_unacked_max);
            return Err((ErrorCode::InvalidField, message));
        }
        let non_zero = |value: u32, default: u32| if value == 0 { default } else { value };
        let credit_mode = request.flags & subscribe_flags::CREDIT_MODE != 0;
        let options = QueueOptions {
            key: self.shared.next_subscription_key.fetch_add(1, Ordering::Relaxed),
            capacity: non_zero(request.queue_capacity, delivery.queue_capacity_default),
            policy: request.policy.unwrap_or_else(|| self.shared.config.policy_default()),
            ack_mode: request.ack_mode,
            max_unacked: non_zero(request.max_unacked, delivery.max_unacked_default),
            credit: credit_mode.then_some(u64::from(request.initial_credit)),
        };
        Ok((topic_filter, content, options))
    }

    /// Closes a subscription; its pending messages go to another member of
    /// its queue group, or are dropped.
    pub(crate) fn unsubscribe(&mut self, sub_id: u32) -> bool {
        match self.subscriptions.remove(&sub_id) {
            Some(subscription) => self.release(&subscription),
            None => self.refuse(ErrorCode::UnknownSubscription, u64::from(sub_id), format!("no subscription {sub_id}")),
        }
        true
    }

    /// Releases every subscription of the connection (it is closing).
    pub(crate) fn release_subscriptions(&mut self) {
        let subscriptions: Vec<SubRef> = self.subscriptions.drain().map(|(_, subscription)| subscription).collect();
        for subscription in &subscriptions {
            self.release(subscription);
        }
    }

    fn release(&mut self, subscription: &SubRef) {
        self.conn.unlist_subscription(subscription.sub_id);
        if let Some(usage) = self.usage.as_mut() {
            usage.remove_subscription();
        }
        if let Some(consumer) = self.stream_subs.remove(&subscription.sub_id) {
            self.release_stream_subscription(subscription, &consumer);
            return;
        }
        if self.shared.router.remove(subscription) {
            self.shared.links.local_unsubscribed(subscription, &self.shared.stats);
        }
        let entries = self.conn.lock().remove_subscription(subscription.sub_id);
        hand_over((&self.shared.router, &self.shared.stats), subscription, entries);
        self.conn.space.notify_waiters();
    }

    pub(crate) fn ack(&mut self, tags: &[u64]) -> bool {
        let settled = self.conn.lock().ack(tags);
        self.settle(settled);
        true
    }

    pub(crate) fn nack(&mut self, tag: u64, requeue: bool) -> bool {
        let max_redeliveries = self.shared.config.delivery.max_redeliveries;
        let settled = self.conn.lock().nack(tag, requeue, max_redeliveries);
        self.settle(settled);
        true
    }

    pub(crate) fn flow(&mut self, sub_id: u32, credit: u32) -> bool {
        let (added, wake) = {
            let mut outbox = self.conn.lock();
            (outbox.add_credit(sub_id, credit), outbox.take_wake())
        };
        if wake {
            self.conn.writer_wake.notify_one();
        }
        let reference = u64::from(sub_id);
        match added {
            Ok(()) => {}
            Err(CreditError::UnknownSubscription) => {
                self.refuse(ErrorCode::UnknownSubscription, reference, format!("no subscription {sub_id}"))
            }
            Err(CreditError::NotInCreditMode) => self.refuse(
                ErrorCode::InvalidField,
                reference,
                format!("FLOW for subscription {sub_id}, which was not opened in credit mode"),
            ),
        }
        true
    }

    fn settle(&self, settled: Settled) {
        apply_settled(&self.conn, &self.shared.stats, settled);
        // Acks free window space: wake publishers blocked on this connection.
        self.conn.space.notify_waiters();
    }
}
