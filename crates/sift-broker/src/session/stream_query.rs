//! `QUERY`: the archive query service of JBI. Selects stored messages of a
//! stream by topic, by any of the four content filter languages and by
//! time, and streams them back as `QUERY_RESULT`s ended by `QUERY_DONE`.
//!
//! A query reads the stream as it stood when the query began (up to the
//! sequence stored last then), in its own task, so a long scan never holds
//! up the connection's reader. Results are written as the stored encodings
//! behind a small prefix, without decoding them again; the query waits
//! while more than `storage.query_pending_bytes_max` of them are unsent, so
//! a slow client slows its query instead of filling the broker's memory.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use sift_core::TopicFilter;
use sift_filter::ContentFilter;
use sift_proto::{encode_query_result_prefix, ErrorCode, Frame, Query};
use sift_store::Record;

use crate::conn::ConnShared;
use crate::outbox::topic_of_encoding;
use crate::session::access::Action;
use crate::session::Session;
use crate::shared::BrokerShared;
use crate::stats::{add, bump};
use crate::store::stream::Stream;

/// How long a query waiting for its client to read looks again at the
/// connection's unsent bytes, in case the writer's wake-up came first.
const WAIT_RECHECK: Duration = Duration::from_millis(50);

/// A query that passed its checks.
struct QueryPlan {
    request_id: u64,
    stream: Arc<Stream>,
    topic_filter: Option<TopicFilter>,
    content: Option<Arc<ContentFilter>>,
    since_ns: u64,
    until_ns: u64,
    limit: u64,
}

/// What a query found, for `QUERY_DONE`.
#[derive(Debug, Default)]
struct Tally {
    matched: u64,
    scanned: u64,
    missed: u64,
}

impl Session {
    /// Checks a `QUERY` and starts it; refusals name the field at fault.
    pub(crate) fn query(&mut self, query: Query) {
        let request_id = query.request_id;
        // A query reads the stream, and the topics it selects are judged as
        // a subscription to them would be, restriction included.
        if !self.permits(Action::ReadStream(&query.stream), request_id) {
            return;
        }
        let selected = if query.topic_filter.is_empty() { ">" } else { query.topic_filter.as_str() };
        let restriction = match TopicFilter::new(selected) {
            Ok(filter) => match self.subscribe_grant(&filter, request_id) {
                Some(restriction) => restriction,
                None => return,
            },
            // plan_query refuses the filter, naming what is wrong with it.
            Err(_) => None,
        };
        match self.plan_query(query) {
            Ok(mut plan) => {
                plan.content = super::subscribe::restricted(plan.content.take(), restriction);
                bump(&self.shared.stats.queries);
                tokio::spawn(run(self.shared.clone(), self.conn.clone(), plan));
            }
            Err((code, message)) => self.refuse(code, request_id, message),
        }
    }

    fn plan_query(&self, query: Query) -> Result<QueryPlan, (ErrorCode, String)> {
        let max_filter_bytes = self.shared.config.limits.max_filter_bytes;
        if query.filter.len() > max_filter_bytes as usize {
            let message = format!("filter is {} bytes; max_filter_bytes = {max_filter_bytes}", query.filter.len());
            return Err((ErrorCode::FilterTooLong, message));
        }
        let stream = self
            .shared
            .storage
            .stream(&query.stream)
            .ok_or_else(|| (ErrorCode::UnknownStream, format!("no stream {:?}", query.stream)))?;
        let topic_filter = match query.topic_filter.as_str() {
            "" => None,
            text => Some(
                TopicFilter::new(text).map_err(|error| (ErrorCode::InvalidTopic, format!("topic filter: {error}")))?,
            ),
        };
        let content = crate::subscription::parse_content_filter(query.filter_kind, &query.filter)?;
        if query.until_ns != 0 && query.until_ns < query.since_ns {
            let message = format!("until ({}) is before since ({})", query.until_ns, query.since_ns);
            return Err((ErrorCode::InvalidField, message));
        }
        Ok(QueryPlan {
            request_id: query.request_id,
            stream,
            topic_filter,
            content,
            since_ns: query.since_ns,
            until_ns: query.until_ns,
            limit: u64::from(query.limit),
        })
    }
}

impl QueryPlan {
    /// True when a stored message passes the query's time, topic and content tests.
    fn selects(&self, record: &Record) -> bool {
        if record.timestamp_ns < self.since_ns || (self.until_ns != 0 && record.timestamp_ns > self.until_ns) {
            return false;
        }
        if let Some(filter) = &self.topic_filter {
            match topic_of_encoding(&record.body) {
                Some(topic) if filter.matches(&topic) => {}
                _ => return false,
            }
        }
        match &self.content {
            None => true,
            Some(content) => sift_proto::decode_message(&record.body).is_ok_and(|message| content.matches(&message)),
        }
    }
}

/// Scans the stream and sends what the query selects, then `QUERY_DONE`.
async fn run(shared: Arc<BrokerShared>, conn: Arc<ConnShared>, plan: QueryPlan) {
    let log = &plan.stream.log;
    let first = match plan.since_ns {
        0 => Ok(log.first_seq()),
        since_ns => log.seq_at_or_after_time(since_ns),
    };
    let mut next = match first {
        Ok(first) => first,
        Err(error) => return fail(&shared, &conn, plan.request_id, &error.to_string()),
    };
    let last = plan.stream.readable_seq();
    let config = &shared.config.storage;
    let mut reader = plan.stream.reader();
    let mut records = Vec::new();
    let mut out = BytesMut::new();
    let mut tally = Tally::default();
    while next <= last && (plan.limit == 0 || tally.matched < plan.limit) {
        if !wait_for_room(&conn, config.query_pending_bytes_max).await {
            return;
        }
        records.clear();
        let outcome = match reader.read(next, last, config.read_batch_records, config.read_batch_bytes, &mut records) {
            Ok(outcome) => outcome,
            Err(error) => return fail(&shared, &conn, plan.request_id, &error.to_string()),
        };
        for gap in &outcome.gaps {
            let gap_last = (gap.first_seq + gap.count).saturating_sub(1).min(last);
            tally.missed += (gap_last + 1).saturating_sub(gap.first_seq.max(next));
        }
        if outcome.is_empty(&records) {
            break;
        }
        for record in records.drain(..).take_while(|record| record.seq <= last) {
            tally.scanned += 1;
            if (plan.limit == 0 || tally.matched < plan.limit) && plan.selects(&record) {
                tally.matched += 1;
                encode_query_result_prefix(&mut out, plan.request_id, record.seq, record.body.len());
                out.extend_from_slice(&record.body);
            }
        }
        next = outcome.next_seq;
        if !out.is_empty() {
            conn.send_encoded(&out);
            out.clear();
        }
    }
    add(&shared.stats.query_results, tally.matched);
    add(&shared.stats.query_scanned, tally.scanned);
    let done = Frame::QueryDone {
        request_id: plan.request_id,
        matched: tally.matched,
        scanned: tally.scanned,
        missed: tally.missed,
    };
    conn.send_control(&done);
}

/// Waits until fewer than `max_bytes` are unsent to `conn`; false when it closed.
async fn wait_for_room(conn: &ConnShared, max_bytes: u64) -> bool {
    loop {
        if conn.is_closing() {
            return false;
        }
        let space = conn.space.notified();
        tokio::pin!(space);
        space.as_mut().enable();
        if conn.lock().pending_bytes() < max_bytes {
            return true;
        }
        tokio::select! {
            _ = space => {}
            _ = tokio::time::sleep(WAIT_RECHECK) => {}
        }
    }
}

fn fail(shared: &BrokerShared, conn: &ConnShared, request_id: u64, why: &str) {
    bump(&shared.stats.errors_sent);
    let message = format!("query failed while reading the stream: {why}");
    conn.send_control(&crate::conn::error_frame(ErrorCode::StorageError, request_id, false, message));
}
