//! What one user may do, and the decision for each action.
//!
//! Topics are granted by filter, as NATS grants subjects: a publish is
//! allowed when a publish grant matches its topic; a subscription is
//! allowed when a subscribe grant *covers* its filter (every topic the
//! subscription could match is one the grant matches), so that `orders.>`
//! allows `orders.eu.*` but not `>`. A subscribe grant may carry a content
//! restriction: the subscription is then allowed with that restriction,
//! which the broker ANDs with the subscription's own content filter, so the
//! user sees nothing outside it however it subscribes.

use std::sync::Arc;

use sift_core::{TopicFilter, TopicName};
use sift_filter::ContentFilter;

/// One subscribe grant: a topic filter, and the content restriction every
/// subscription under it gets.
#[derive(Debug, Clone)]
pub struct SubscribeGrant {
    /// The topics it grants.
    pub topic: TopicFilter,
    /// What the user may see of them; `None` for everything.
    pub restriction: Option<Arc<ContentFilter>>,
}

/// What a user may do with a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamAction {
    /// Replay it, query its archive or read it through a durable
    /// subscription.
    Read,
    /// Add, change or remove it, or remove its durables.
    Manage,
}

/// The answer to a subscription.
#[derive(Debug, Clone)]
pub enum SubscribeDecision {
    /// Allowed; with `restriction`, only what passes it is delivered.
    Allowed {
        /// The content restriction of the grant that allowed it.
        restriction: Option<Arc<ContentFilter>>,
    },
    /// Not allowed: no grant covers the filter.
    Denied,
}

/// Stream names a grant lists; `*` stands for every stream.
const EVERY_STREAM: &str = "*";

/// Everything one user (or anonymous access) may do.
#[derive(Debug, Clone, Default)]
pub struct Permissions {
    /// Topics it may publish to.
    pub publish: Vec<TopicFilter>,
    /// Topics it may subscribe to, in the file's order.
    pub subscribe: Vec<SubscribeGrant>,
    /// Streams it may read (`*`: every stream).
    pub read_streams: Vec<String>,
    /// Streams it may manage (`*`: every stream).
    pub manage_streams: Vec<String>,
    /// Whether it may read the admin reports.
    pub admin: bool,
    /// What one user may hold and send across all its sessions.
    pub limits: UserLimits,
    /// Queue groups it may join (`*`: any); `None`, when the file does not
    /// say, is any.
    pub queue_groups: Option<Vec<String>>,
}

/// A user's limits across all its sessions; `None` is no limit beyond the
/// broker's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserLimits {
    /// Sessions signed in as the user at once.
    pub connections_max: Option<u32>,
    /// Subscriptions the user's sessions hold at once.
    pub subscriptions_max: Option<u32>,
    /// Messages per second the user's sessions publish, together; a
    /// publisher past it is slowed, not refused (nothing is lost).
    pub publish_msgs_per_s_max: Option<u32>,
    /// Payload bytes per second the user's sessions publish, together;
    /// slowed the same way.
    pub publish_bytes_per_s_max: Option<u64>,
}

impl UserLimits {
    /// True when any limit is set.
    pub fn any(&self) -> bool {
        *self != UserLimits::default()
    }
}

impl Permissions {
    /// Everything allowed: a broker without a users file, on loopback.
    pub fn everything() -> Permissions {
        let every_topic = || TopicFilter::new(">").expect("`>` is a valid filter");
        Permissions {
            publish: vec![every_topic()],
            subscribe: vec![SubscribeGrant { topic: every_topic(), restriction: None }],
            read_streams: vec![EVERY_STREAM.to_string()],
            manage_streams: vec![EVERY_STREAM.to_string()],
            admin: true,
            limits: UserLimits::default(),
            queue_groups: None,
        }
    }

    /// Whether a subscription may join the queue group `group`.
    pub fn may_join_group(&self, group: &str) -> bool {
        match &self.queue_groups {
            None => true,
            Some(groups) => groups.iter().any(|granted| granted == EVERY_STREAM || granted == group),
        }
    }

    /// Whether a message may be published on `topic`.
    pub fn may_publish(&self, topic: &TopicName) -> bool {
        self.publish.iter().any(|grant| grant.matches(topic))
    }

    /// Whether a subscription to `filter` is allowed, and under which
    /// restriction. An unrestricted grant that covers the filter wins;
    /// otherwise the first restricted one in the file's order decides.
    pub fn may_subscribe(&self, filter: &TopicFilter) -> SubscribeDecision {
        let mut covering = self.subscribe.iter().filter(|grant| grant.topic.covers(filter));
        let Some(first) = covering.next() else { return SubscribeDecision::Denied };
        if first.restriction.is_none() || covering.any(|grant| grant.restriction.is_none()) {
            return SubscribeDecision::Allowed { restriction: None };
        }
        SubscribeDecision::Allowed { restriction: first.restriction.clone() }
    }

    /// Whether `action` is allowed on the stream named `stream`.
    pub fn may_stream(&self, stream: &str, action: StreamAction) -> bool {
        let granted = match action {
            StreamAction::Read => &self.read_streams,
            StreamAction::Manage => &self.manage_streams,
        };
        granted.iter().any(|name| name == EVERY_STREAM || name == stream)
    }

    /// Whether the admin reports may be read.
    pub fn may_admin(&self) -> bool {
        self.admin
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_filter::FilterLanguage;

    fn filter(text: &str) -> TopicFilter {
        TopicFilter::new(text).expect("valid filter")
    }

    fn topic(text: &str) -> TopicName {
        TopicName::new(text).expect("valid topic")
    }

    fn eu_only() -> Arc<ContentFilter> {
        Arc::new(ContentFilter::parse(FilterLanguage::Sql, "region = 'EU'").expect("valid selector"))
    }

    #[test]
    fn publishing_needs_a_grant_that_matches_the_topic() {
        let permissions = Permissions { publish: vec![filter("orders.>")], ..Permissions::default() };
        assert!(permissions.may_publish(&topic("orders.eu.new")));
        assert!(!permissions.may_publish(&topic("orders")));
        assert!(!permissions.may_publish(&topic("quotes.nyse")));
        assert!(!Permissions::default().may_publish(&topic("anything")), "nothing is granted by default");
    }

    #[test]
    fn subscribing_needs_a_grant_that_covers_the_whole_filter() {
        let grant = SubscribeGrant { topic: filter("orders.>"), restriction: None };
        let permissions = Permissions { subscribe: vec![grant], ..Permissions::default() };
        assert!(matches!(permissions.may_subscribe(&filter("orders.eu.*")), SubscribeDecision::Allowed { .. }));
        assert!(matches!(permissions.may_subscribe(&filter("orders.>")), SubscribeDecision::Allowed { .. }));
        assert!(matches!(permissions.may_subscribe(&filter(">")), SubscribeDecision::Denied));
        assert!(matches!(permissions.may_subscribe(&filter("*.eu")), SubscribeDecision::Denied));
    }

    #[test]
    fn a_restricted_grant_gives_its_restriction_unless_an_open_one_covers_too() {
        let restricted = SubscribeGrant { topic: filter("orders.>"), restriction: Some(eu_only()) };
        let open = SubscribeGrant { topic: filter("orders.audit.>"), restriction: None };
        let permissions = Permissions { subscribe: vec![restricted, open], ..Permissions::default() };
        match permissions.may_subscribe(&filter("orders.new")) {
            SubscribeDecision::Allowed { restriction: Some(restriction) } => {
                assert_eq!(restriction.to_string(), eu_only().to_string());
            }
            other => panic!("restricted, got {other:?}"),
        }
        assert!(matches!(
            permissions.may_subscribe(&filter("orders.audit.x")),
            SubscribeDecision::Allowed { restriction: None }
        ));
    }

    #[test]
    fn streams_and_admin_are_granted_by_name() {
        let permissions =
            Permissions { read_streams: vec!["orders".into()], manage_streams: vec![], ..Permissions::default() };
        assert!(permissions.may_stream("orders", StreamAction::Read));
        assert!(!permissions.may_stream("orders", StreamAction::Manage));
        assert!(!permissions.may_stream("audit", StreamAction::Read));
        assert!(!permissions.may_admin());
        let everything = Permissions::everything();
        assert!(everything.may_stream("any", StreamAction::Manage) && everything.may_admin());
        assert!(everything.may_publish(&topic("a.b")));
    }
}
