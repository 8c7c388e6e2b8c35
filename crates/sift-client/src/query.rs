//! `Client::query`: the archive query service. Selects stored messages of
//! a stream by topic, content filter and time; the results stream back in
//! stream order and end with a count.

use sift_core::Message;
use sift_proto::{FilterKind, Frame, Query};
use tokio::sync::mpsc;

use crate::{Client, ClientError};

/// Results buffered per query before the client's reader waits for the
/// application (which in turn slows the broker's scan).
const QUERY_RESULTS_BUFFERED: usize = 1024;

pub(crate) type QuerySender = mpsc::Sender<QueryEvent>;

/// What to select from a stream.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// The stream to read.
    pub stream: String,
    /// Topic filter; empty = every topic.
    pub topic_filter: String,
    /// Content filter language and text, if any.
    pub filter: Option<(FilterKind, String)>,
    /// Only messages stored at or after this time (ns since the epoch); 0 = no bound.
    pub since_ns: u64,
    /// Only messages stored at or before this time; 0 = no bound.
    pub until_ns: u64,
    /// At most this many results; 0 = no limit.
    pub limit: u32,
}

/// One event of a query.
#[derive(Debug)]
pub enum QueryEvent {
    /// A stored message that matched, with its stream sequence.
    Message {
        /// Its sequence in the stream.
        stream_seq: u64,
        /// The message.
        message: Box<Message>,
    },
    /// The query ended: how many matched, how many stored messages were
    /// scanned, and how many in its range could not be read (removed while
    /// it ran, or damaged).
    Done {
        /// Results sent.
        matched: u64,
        /// Stored messages looked at.
        scanned: u64,
        /// Stored messages in range that could not be read.
        missed: u64,
    },
    /// The broker refused or ended the query with an error.
    Failed(ClientError),
}

/// The results of a query, in stream order.
#[derive(Debug)]
pub struct QueryResults {
    receiver: mpsc::Receiver<QueryEvent>,
}

impl QueryResults {
    /// The next event; `None` when the connection dropped before `Done`.
    pub async fn next(&mut self) -> Option<QueryEvent> {
        self.receiver.recv().await
    }
}

impl Client {
    /// Starts an archive query (`QUERY`, `docs/PROTOCOL.md`).
    pub fn query(&self, options: QueryOptions) -> Result<QueryResults, ClientError> {
        let (sender, receiver) = mpsc::channel(QUERY_RESULTS_BUFFERED);
        let (filter_kind, filter) = options.filter.unwrap_or((FilterKind::None, String::new()));
        let build = move |request_id| {
            Frame::Query(Query {
                request_id,
                stream: options.stream,
                topic_filter: options.topic_filter,
                filter_kind,
                filter,
                since_ns: options.since_ns,
                until_ns: options.until_ns,
                limit: options.limit,
            })
        };
        self.start_query(build, sender)?;
        Ok(QueryResults { receiver })
    }
}
