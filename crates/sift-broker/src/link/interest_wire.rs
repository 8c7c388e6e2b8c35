//! Interest on the wire (§10.3, §10.6): entries to and from `INTEREST` adds,
//! and tables and increments cut into frames that fit `max_frame_bytes`.

use sift_core::TopicFilter;
use sift_filter::{ContentFilter, FilterLanguage};
use sift_net::{InterestEntry, InterestUpdate};
use sift_proto::link::{Interest as InterestFrame, InterestAdd, InterestChange, LinkFrame};
use sift_proto::FilterKind;

/// Bytes of an `INTEREST` frame before its changes, beyond the origin name:
/// length prefix, type, origin length, sequence and change count.
const INTEREST_HEADER_BYTES: usize = 17;

/// Bytes of a remove change: tag and key.
const REMOVE_BYTES: usize = 9;

/// Bytes of an add change besides its three strings (§10.3: `18 + t + f + g`).
const ADD_FIXED_BYTES: usize = 18;

/// Why a received add cannot be held.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EntryError {
    /// The topic filter does not parse.
    #[error("topic filter {filter:?}: {reason}")]
    Topic {
        /// The filter as received.
        filter: String,
        /// The parser's complaint.
        reason: String,
    },
    /// The content filter does not parse.
    #[error("content filter {filter:?}: {reason}")]
    Content {
        /// The filter as received.
        filter: String,
        /// The parser's complaint.
        reason: String,
    },
}

/// The wire form of an advertised entry.
pub(crate) fn to_add(key: u64, entry: &InterestEntry) -> InterestAdd {
    let (filter_kind, filter) = match &entry.content {
        None => (FilterKind::None, String::new()),
        Some(content) => (kind_of(content.language()), content.to_string()),
    };
    InterestAdd {
        key,
        topic_filter: entry.topic.as_str().to_string(),
        filter_kind,
        filter,
        queue_group: entry.group.clone().unwrap_or_default(),
    }
}

/// The entry a received add stands for.
pub(crate) fn from_add(add: &InterestAdd) -> Result<InterestEntry, EntryError> {
    let topic = TopicFilter::new(add.topic_filter.as_str())
        .map_err(|error| EntryError::Topic { filter: add.topic_filter.clone(), reason: error.to_string() })?;
    let content = match language_of(add.filter_kind) {
        None => None,
        Some(language) => Some(
            ContentFilter::parse(language, &add.filter)
                .map_err(|error| EntryError::Content { filter: add.filter.clone(), reason: error.to_string() })?,
        ),
    };
    let group = (!add.queue_group.is_empty()).then(|| add.queue_group.clone());
    Ok(InterestEntry { topic, content, group })
}

fn kind_of(language: FilterLanguage) -> FilterKind {
    match language {
        FilterLanguage::Tags => FilterKind::Tags,
        FilterLanguage::Sql => FilterKind::Sql,
        FilterLanguage::Regex => FilterKind::Regex,
        FilterLanguage::Xpath => FilterKind::Xpath,
    }
}

fn language_of(kind: FilterKind) -> Option<FilterLanguage> {
    match kind {
        FilterKind::None => None,
        FilterKind::Tags => Some(FilterLanguage::Tags),
        FilterKind::Sql => Some(FilterLanguage::Sql),
        FilterKind::Regex => Some(FilterLanguage::Regex),
        FilterKind::Xpath => Some(FilterLanguage::Xpath),
    }
}

/// The wire form of an advertised change.
pub(crate) fn to_change(update: &InterestUpdate) -> InterestChange {
    match update {
        InterestUpdate::Add { key, entry } => InterestChange::Add(to_add(*key, entry)),
        InterestUpdate::Remove { key } => InterestChange::Remove { key: *key },
    }
}

fn change_bytes(change: &InterestChange) -> usize {
    match change {
        InterestChange::Add(add) => ADD_FIXED_BYTES + add.topic_filter.len() + add.filter.len() + add.queue_group.len(),
        InterestChange::Remove { .. } => REMOVE_BYTES,
    }
}

/// Cuts `changes` into groups that each fit one `INTEREST` frame of
/// `origin` within `frame_bytes_max` and the `u16` change count. A change
/// too large for any frame goes alone (its encoding then fails, logged).
pub(crate) fn split_changes(
    origin: &str,
    changes: Vec<InterestChange>,
    frame_bytes_max: usize,
) -> Vec<Vec<InterestChange>> {
    let header = INTEREST_HEADER_BYTES + origin.len();
    let mut groups: Vec<Vec<InterestChange>> = Vec::new();
    let mut current: Vec<InterestChange> = Vec::new();
    let mut size = header;
    for change in changes {
        let bytes = change_bytes(&change);
        let full = size + bytes > frame_bytes_max || current.len() == usize::from(u16::MAX);
        if full && !current.is_empty() {
            groups.push(std::mem::take(&mut current));
            size = header;
        }
        size += bytes;
        current.push(change);
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

/// A full copy of `origin`'s table as of `sequence` (§10.6): the
/// `INTEREST_SYNC_BEGIN`, the adds cut to size, the `INTEREST_SYNC_END`.
pub(crate) fn bracket_frames(
    origin: &str,
    sequence: u64,
    adds: Vec<InterestAdd>,
    frame_bytes_max: usize,
) -> Vec<LinkFrame> {
    let changes = adds.into_iter().map(InterestChange::Add).collect();
    let mut frames = vec![LinkFrame::InterestSyncBegin { origin: origin.to_string(), sequence }];
    for group in split_changes(origin, changes, frame_bytes_max) {
        frames.push(LinkFrame::Interest(InterestFrame { origin: origin.to_string(), sequence, changes: group }));
    }
    frames.push(LinkFrame::InterestSyncEnd { origin: origin.to_string(), sequence });
    frames
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn add(key: u64, topic: &str) -> InterestAdd {
        InterestAdd {
            key,
            topic_filter: topic.to_string(),
            filter_kind: FilterKind::Tags,
            filter: "price>100".to_string(),
            queue_group: "workers".to_string(),
        }
    }

    #[test]
    fn entries_survive_the_wire() {
        let sent = add(3, "a.*");
        let entry = from_add(&sent).expect("valid add");
        assert_eq!(to_add(3, &entry), sent);
        let bad = InterestAdd { topic_filter: "a..b".to_string(), ..add(1, "x") };
        assert!(matches!(from_add(&bad), Err(EntryError::Topic { .. })));
    }

    #[test]
    fn brackets_are_cut_to_the_frame_limit() {
        let limit = 100;
        let adds: Vec<InterestAdd> = (0..10).map(|key| add(key, "topic.name")).collect();
        let frames = bracket_frames("b1", 7, adds, limit);
        assert!(matches!(frames.first(), Some(LinkFrame::InterestSyncBegin { sequence: 7, .. })));
        assert!(matches!(frames.last(), Some(LinkFrame::InterestSyncEnd { sequence: 7, .. })));
        let mut total = 0;
        for frame in &frames[1..frames.len() - 1] {
            let mut bytes = BytesMut::new();
            frame.encode(&mut bytes).expect("encodes");
            assert!(bytes.len() <= limit, "{} bytes", bytes.len());
            if let LinkFrame::Interest(interest) = frame {
                total += interest.changes.len();
            }
        }
        assert_eq!(total, 10);
        assert_eq!(bracket_frames("b1", 1, Vec::new(), limit).len(), 2, "an empty table is still copied");
    }
}
