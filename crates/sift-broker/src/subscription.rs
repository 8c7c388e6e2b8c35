//! A subscription as the router sees it: who wants what.

use std::sync::Arc;

use sift_core::{Message, TopicFilter};
use sift_filter::{ContentFilter, FilterLanguage};
use sift_proto::{AckMode, ErrorCode, FilterKind, QueuePolicy};

use crate::conn::ConnShared;

/// One live subscription. Shared between the router (which finds it by
/// topic) and its connection (which owns its queue).
#[derive(Debug)]
pub struct Subscription {
    /// Broker-wide unique key; equality of subscriptions is equality of keys.
    pub key: u64,
    /// The client's id for it, carried in every `DELIVER`.
    pub sub_id: u32,
    /// The connection it belongs to.
    pub conn: Arc<ConnShared>,
    /// Its topic filter.
    pub topic_filter: TopicFilter,
    /// Its queue group, if any.
    pub group: Option<Arc<str>>,
    /// Its content filter, if any.
    pub content: Option<Arc<ContentFilter>>,
    /// How it acknowledges.
    pub ack_mode: AckMode,
    /// What its full queue does.
    pub policy: QueuePolicy,
    /// `client-name#connection/sub_id`, used in delivery reports.
    pub label: String,
}

impl Subscription {
    /// True when `message` passes the content filter (or there is none).
    pub fn accepts(&self, message: &Message) -> bool {
        self.content.as_ref().is_none_or(|filter| filter.matches(message))
    }
}

/// A cheap handle to a [`Subscription`], compared and hashed by key. This is
/// what the subject trie and the content index store.
#[derive(Debug, Clone)]
pub struct SubRef(pub Arc<Subscription>);

impl PartialEq for SubRef {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for SubRef {}

impl std::hash::Hash for SubRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.key.hash(state);
    }
}

impl std::ops::Deref for SubRef {
    type Target = Subscription;

    fn deref(&self) -> &Subscription {
        &self.0
    }
}

/// Parses the content filter of a subscribe request. A filter that does not
/// parse is refused with its language, the byte position and what was
/// expected there.
pub(crate) fn parse_content_filter(
    kind: FilterKind,
    text: &str,
) -> Result<Option<Arc<ContentFilter>>, (ErrorCode, String)> {
    let language = match kind {
        FilterKind::None => return Ok(None),
        FilterKind::Tags => FilterLanguage::Tags,
        FilterKind::Sql => FilterLanguage::Sql,
        FilterKind::Xpath => FilterLanguage::Xpath,
        FilterKind::Regex => FilterLanguage::Regex,
    };
    match ContentFilter::parse(language, text) {
        Ok(filter) => Ok(Some(Arc::new(filter))),
        Err(error) => Err((ErrorCode::InvalidFilter, format!("content filter: {error}"))),
    }
}
