//! What a subscription asks for, as JSON: the body of `POST
//! /v1/subscriptions` and of a WebSocket `subscribe`. It maps one to one
//! onto the native `SUBSCRIBE` (`docs/PROTOCOL.md` §6.4-6.6).

use serde::Deserialize;
use sift_client::{FilterKind, QueuePolicy, StartPosition, SubscribeOptions};

use crate::error::ApiError;

/// A subscription request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SubscriptionSpec {
    /// Topic filter (`quotes.*`, `orders.>`).
    pub topic: String,
    /// Content filters; at most one may be given.
    pub tags: Option<String>,
    pub sql: Option<String>,
    pub xpath: Option<String>,
    pub regex: Option<String>,
    /// Queue group: each message goes to one member.
    pub queue: Option<String>,
    /// Durable subscription name: outlives the subscription and the broker.
    pub durable: Option<String>,
    /// With `durable`: share it with other consumers.
    #[serde(default)]
    pub shared: bool,
    /// Stream to replay (alone) or to attach the durable to.
    pub stream: Option<String>,
    /// Where a replay or a new durable starts: `first`, `last:N`, `seq:N`,
    /// `time:RFC3339` (`new` for a durable, `first` for a replay, by default).
    pub start: Option<String>,
    /// What the broker does when the subscription's queue is full.
    pub policy: Option<String>,
    /// Queue bound at the broker.
    pub queue_capacity: Option<u32>,
    /// Reliable deliveries in flight at once.
    pub max_unacked: Option<u32>,
    /// A URL the broker POSTs each delivery to (HTTP subscriptions only).
    pub callback: Option<String>,
}

impl SubscriptionSpec {
    /// Parses a JSON body.
    pub(crate) fn parse(bytes: &[u8]) -> Result<SubscriptionSpec, ApiError> {
        serde_json::from_slice(bytes)
            .map_err(|error| ApiError::bad_request("bad_json", format!("the body is not a subscription: {error}")))
    }

    /// The native subscribe options; deliveries are acknowledged by the
    /// front-end (`Manual`) once handed to the HTTP client.
    pub(crate) fn options(&self) -> Result<SubscribeOptions, ApiError> {
        let mut options = SubscribeOptions::new(self.topic.clone()).ack(sift_client::AckPolicy::Manual);
        if let Some((kind, text)) = self.filter()? {
            options = options.filter(kind, text);
        }
        if let Some(group) = &self.queue {
            options = options.queue_group(group.clone());
        }
        if let Some(policy) = &self.policy {
            let parsed = policy.parse::<QueuePolicy>().map_err(|error| invalid(format!("policy: {error}")))?;
            options = options.policy(parsed);
        }
        options.queue_capacity = self.queue_capacity;
        options.max_unacked = self.max_unacked;
        let start = match &self.start {
            Some(text) => text.parse::<StartPosition>().map_err(|error| invalid(format!("start: {error}")))?,
            // As on the command line: a new durable takes what comes from
            // now on, a replay starts at the first stored message.
            None if self.durable.is_some() => StartPosition::New,
            None => StartPosition::First,
        };
        let stream = self.stream.clone().unwrap_or_default();
        match (&self.durable, self.stream.is_some() || self.start.is_some()) {
            (Some(name), _) => options = options.durable(name.clone(), stream, start),
            (None, true) => options = options.replay(stream, start),
            (None, false) => {}
        }
        if self.shared {
            if self.durable.is_none() {
                return Err(invalid("shared applies to a durable subscription; give durable too".into()));
            }
            options = options.shared();
        }
        Ok(options)
    }

    /// The one content filter given, if any.
    fn filter(&self) -> Result<Option<(FilterKind, String)>, ApiError> {
        let given: Vec<(FilterKind, &String)> = [
            (FilterKind::Tags, &self.tags),
            (FilterKind::Sql, &self.sql),
            (FilterKind::Xpath, &self.xpath),
            (FilterKind::Regex, &self.regex),
        ]
        .into_iter()
        .filter_map(|(kind, text)| text.as_ref().map(|text| (kind, text)))
        .collect();
        match given.as_slice() {
            [] => Ok(None),
            [(kind, text)] => Ok(Some((*kind, (*text).clone()))),
            _ => Err(invalid("give at most one of tags, sql, xpath and regex".into())),
        }
    }

    /// True for a durable subscription.
    pub(crate) fn is_durable(&self) -> bool {
        self.durable.is_some()
    }
}

fn invalid(text: String) -> ApiError {
    ApiError::bad_request("invalid_field", text)
}
