//! Reading a stream's messages, replicated or not.
//!
//! A stream's log holds its messages; a replicated stream's log is also its
//! Raft log, each record a Raft entry (`sift_raft::entry_codec`): most are
//! messages behind a small header, and some are the group's own (a new
//! leader's blank entry, a membership change). Every reader of messages
//! (consumers, queries, queue counts) reads through a [`StreamReader`],
//! which gives it the messages alone and no further than
//! [`Stream::readable_seq`](super::stream::Stream::readable_seq): a
//! replicated stream's committed sequence, past which an entry may still
//! be overruled by a new leader.

use sift_store::{Gap, LogReader, Record, StoreError};

/// What one read gave besides the records.
#[derive(Debug, Default)]
pub struct StreamRead {
    /// Where to continue: after the last record, gap or skipped entry.
    pub next_seq: u64,
    /// Sequences the log passed over (removed, damaged), in order.
    pub gaps: Vec<Gap>,
    /// Sequences of a replicated stream's own entries, which are no
    /// message: a consumer counts them as done.
    pub skipped: Vec<u64>,
}

impl StreamRead {
    /// True when the read found nothing at all.
    pub fn is_empty(&self, records: &[Record]) -> bool {
        records.is_empty() && self.gaps.is_empty() && self.skipped.is_empty()
    }
}

/// A reader of one stream's messages, with its own position.
#[derive(Debug)]
pub struct StreamReader {
    reader: LogReader,
    replicated: bool,
}

impl StreamReader {
    /// A reader over `reader`, whose records are Raft entries when
    /// `replicated`.
    pub fn new(reader: LogReader, replicated: bool) -> StreamReader {
        StreamReader { reader, replicated }
    }

    /// Reads messages from `from_seq` up to `until_seq` (the stream's
    /// readable sequence) into `out`, as `LogReader::read` does.
    pub fn read(
        &mut self,
        from_seq: u64,
        until_seq: u64,
        max_records: usize,
        max_bytes: usize,
        out: &mut Vec<Record>,
    ) -> Result<StreamRead, StoreError> {
        if from_seq > until_seq {
            return Ok(StreamRead { next_seq: from_seq, ..StreamRead::default() });
        }
        let first_new = out.len();
        let outcome = self.reader.read(from_seq, max_records, max_bytes, out)?;
        let mut read = StreamRead { next_seq: outcome.next_seq, gaps: outcome.gaps, skipped: Vec::new() };
        // Past the readable end: read again later, once committed.
        if let Some(beyond) = out[first_new..].iter().position(|record| record.seq > until_seq) {
            out.truncate(first_new + beyond);
            read.next_seq = read.next_seq.min(until_seq + 1);
        }
        read.gaps.retain(|gap| gap.first_seq <= until_seq);
        if self.replicated {
            let mut kept = first_new;
            for position in first_new..out.len() {
                match sift_raft::entry_codec::message_of(&out[position].body) {
                    Some(message) => {
                        out[position].body = message;
                        out.swap(kept, position);
                        kept += 1;
                    }
                    None => read.skipped.push(out[position].seq),
                }
            }
            out.truncate(kept);
        }
        Ok(read)
    }
}
