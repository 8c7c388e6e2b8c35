//! `SUBSCRIBE` with a stream source: a replay, or a durable subscription
//! created or resumed.
//!
//! A stream subscription is not in the router: its messages come from the
//! stream, through its [`Consumer`]. Its queue is bounded by
//! `storage.stream_queue_capacity` and always uses `block`, so the consumer
//! reads no further ahead than the subscriber acknowledges.

use std::sync::Arc;

use sift_core::TopicFilter;
use sift_filter::ContentFilter;
use sift_proto::{ErrorCode, FilterKind, Frame, QueuePolicy, StreamSource, Subscribe};

use crate::session::access::Action;
use crate::session::Session;
use crate::store::consumer::{self, Consumer, MemberOptions};
use crate::store::cursor::Cursor;
use crate::store::registry::{start_seq, DurableRequest, OpenedDurable, Refusal};
use crate::subscription::{SubRef, Subscription};

/// What the flags of a `SUBSCRIBE` with a stream section ask for.
struct StreamFlags {
    /// `BROWSE`: a copy of a durable's messages.
    browse: bool,
    /// `SHARED`: share the durable.
    shared: bool,
    /// `CAUGHT_UP` and `MEMBER_FILTER`.
    member: MemberOptions,
}

impl StreamFlags {
    fn of(flags: u8) -> StreamFlags {
        use sift_proto::subscribe_flags::{BROWSE, CAUGHT_UP, MEMBER_FILTER, SHARED};
        StreamFlags {
            browse: flags & BROWSE != 0,
            shared: flags & SHARED != 0,
            member: MemberOptions { caught_up_markers: flags & CAUGHT_UP != 0, own_filter: flags & MEMBER_FILTER != 0 },
        }
    }

    /// The flags that need a durable have one.
    fn check(&self, source: &StreamSource) -> Result<(), String> {
        if self.browse && source.durable.is_empty() {
            return Err("flags: BROWSE needs a durable to browse".into());
        }
        if self.member.own_filter && (source.durable.is_empty() || !self.shared) {
            return Err("flags: MEMBER_FILTER needs a shared durable (SHARED and a durable name)".into());
        }
        Ok(())
    }
}

impl Session {
    /// Opens a stream subscription after the checks of any subscription.
    pub(crate) fn subscribe_stream(&mut self, request: Subscribe, source: StreamSource) -> bool {
        let sub_id = request.sub_id;
        let reference = u64::from(sub_id);
        let (topic_filter, content, mut options) = match self.check_subscribe(&request) {
            Ok(checked) => checked,
            Err((code, message)) => {
                self.refuse(code, reference, message);
                return true;
            }
        };
        // Reading a stream needs the stream, and a subscribe grant for the
        // topics read, whose restriction applies as to a live subscription.
        let stream_name = match source.stream.as_str() {
            "" => self.shared.storage.stream_covering(&topic_filter).name().to_string(),
            name => name.to_string(),
        };
        if !self.permits(Action::ReadStream(&stream_name), reference) {
            return true;
        }
        let Some(restriction) = self.subscribe_grant(&topic_filter, reference) else { return true };
        let flags = StreamFlags::of(request.flags);
        if let Err(message) = flags.check(&source) {
            self.refuse(ErrorCode::InvalidField, reference, message);
            return true;
        }
        if restriction.is_some() && !source.durable.is_empty() && !flags.browse && !flags.member.own_filter {
            // A durable's filter is the durable's, shared by whoever resumes
            // it; a restriction belongs to one user's session (it may go
            // into a subscriber's own filter, or a browser's).
            let message = format!(
                "a restricted grant on {} cannot read a durable subscription; replay the stream instead",
                topic_filter.as_str()
            );
            self.refuse(ErrorCode::PermissionDenied, reference, message);
            return true;
        }
        let content = super::subscribe::restricted(content, restriction);
        if !request.queue_group.is_empty() {
            let message = "a stream subscription cannot join a queue group; share a durable subscription instead";
            self.refuse(ErrorCode::InvalidField, reference, message.into());
            return true;
        }
        options.policy = QueuePolicy::Block;
        if request.queue_capacity == 0 {
            options.capacity = self.shared.config.storage.stream_queue_capacity;
        }
        let subscription = SubRef(Arc::new(Subscription {
            key: options.key,
            sub_id,
            conn: self.conn.clone(),
            topic_filter: topic_filter.clone(),
            group: None,
            content: content.clone(),
            ack_mode: request.ack_mode,
            policy: QueuePolicy::Block,
            label: format!("{}#{}/{}", self.conn.name, self.conn.id, sub_id),
        }));
        let opened = self.open_stream_consumer(&request, &source, &flags, (topic_filter, content), &subscription);
        let OpenedDurable { consumer, start_task, created } = match opened {
            Ok(opened) => opened,
            Err((code, message)) => {
                self.refuse(code, reference, message);
                return true;
            }
        };
        if created {
            self.shared.links.durable_interest(&consumer, true, &self.shared.stats);
        }
        self.conn.lock().add_subscription(sub_id, options);
        // SUBSCRIBED goes out before any delivery: control frames come first.
        self.conn.send_control(&Frame::Subscribed { sub_id });
        self.conn.list_subscription(sub_id, super::subscribe::describe(&subscription, &request));
        self.subscriptions.insert(sub_id, subscription);
        self.stream_subs.insert(sub_id, consumer.clone());
        if start_task {
            tokio::spawn(consumer::run(self.shared.consumer_context(), consumer));
        }
        true
    }

    /// The consumer a stream subscription reads from: a replay of its own,
    /// a browser of a durable, or the durable itself (found or created).
    fn open_stream_consumer(
        &self,
        request: &Subscribe,
        source: &StreamSource,
        flags: &StreamFlags,
        (topic_filter, content): (TopicFilter, Option<Arc<ContentFilter>>),
        subscription: &SubRef,
    ) -> Result<OpenedDurable, Refusal> {
        let member = (subscription.clone(), flags.member);
        let not_durable = |(consumer, start_task)| OpenedDurable { consumer, start_task, created: false };
        if source.durable.is_empty() {
            return self.open_replay(source, topic_filter, content, member).map(not_durable);
        }
        if flags.browse {
            return self.open_browser(&source.durable, topic_filter, content, member).map(not_durable);
        }
        // A subscriber's own filter is not the durable's: the durable reads
        // every message on its topics.
        let (filter_kind, filter, content) = match flags.member.own_filter {
            true => (FilterKind::None, "", None),
            false => (request.filter_kind, request.filter.as_str(), content),
        };
        let durable = DurableRequest {
            name: &source.durable,
            stream: &source.stream,
            topic_filter: &topic_filter,
            filter_kind,
            filter,
            content,
            shared: flags.shared,
            start: source.start,
            member: flags.member,
        };
        self.shared.storage.open_durable(&durable, subscription.clone())
    }

    /// A consumer that the subscription alone uses and that is forgotten
    /// with it.
    fn open_replay(
        &self,
        source: &StreamSource,
        topic_filter: TopicFilter,
        content: Option<Arc<ContentFilter>>,
        (member, options): (SubRef, MemberOptions),
    ) -> Result<(Arc<Consumer>, bool), Refusal> {
        let storage = &self.shared.storage;
        let stream = match source.stream.as_str() {
            "" => storage.stream_covering(&topic_filter),
            name => storage.stream(name).ok_or_else(|| (ErrorCode::UnknownStream, format!("no stream {name}")))?,
        };
        let first = start_seq(&stream, &source.start).map_err(|error| (ErrorCode::StorageError, error.to_string()))?;
        let cursor = Arc::new(Cursor::starting_at(first));
        let consumer = Arc::new(Consumer::new(stream, cursor, topic_filter, content, None));
        let start_task = consumer.attach(member, options);
        Ok((consumer, start_task))
    }

    /// A browser of the durable `name`: a consumer of its own that starts
    /// where the durable stands (its floor and the sequences done above
    /// it, so that what is in flight to the durable's subscribers is seen
    /// too) and reads what passes both filters, taking nothing from the
    /// durable.
    fn open_browser(
        &self,
        name: &str,
        topic_filter: TopicFilter,
        content: Option<Arc<ContentFilter>>,
        (member, options): (SubRef, MemberOptions),
    ) -> Result<(Arc<Consumer>, bool), Refusal> {
        let storage = &self.shared.storage;
        let durable = storage
            .durable(name)
            .ok_or_else(|| (ErrorCode::UnknownDurable, format!("no durable subscription {name} to browse")))?;
        if topic_filter != durable.topic_filter {
            let message = format!("{name} reads {}, not {}", durable.topic_filter.as_str(), topic_filter.as_str());
            return Err((ErrorCode::DurableMismatch, message));
        }
        let content = super::subscribe::restricted(content, durable.content.clone());
        let cursor = Arc::new(Cursor::resuming(&durable.cursor.position()));
        let consumer = Arc::new(Consumer::new(durable.stream.clone(), cursor, topic_filter, content, None));
        let start_task = consumer.attach(member, options);
        Ok((consumer, start_task))
    }

    /// Ends a stream subscription: what it held unacknowledged goes back to
    /// its consumer, for another subscriber of a shared durable or for the
    /// next time the durable is resumed.
    pub(crate) fn release_stream_subscription(&mut self, subscription: &SubRef, consumer: &Consumer) {
        let entries = self.conn.lock().remove_subscription(subscription.sub_id);
        let seqs = entries.iter().filter_map(|entry| entry.routed.stream.as_ref().map(|stream| stream.seq));
        consumer.detach(subscription.key, seqs);
        self.conn.space.notify_waiters();
    }
}
