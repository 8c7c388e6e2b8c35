//! The fields of persistent delivery: where a stream subscription starts,
//! why a `GAP` happened, the `MANAGE` operations and the `QUERY` request.
//!
//! They live apart from [`crate::frame`] because they describe the store
//! rather than the session: a broker without streams never sees them, and
//! the command line parses [`StartPosition`] from user input, so its text
//! form is specified here next to its wire form (`docs/PROTOCOL.md` §4.7 and
//! §6.17).

use crate::rfc3339::{format_rfc3339_ns, parse_rfc3339_ns};
use crate::FilterKind;

/// Where a replay, or a new durable subscription, starts reading a stream.
///
/// On the wire it is a code and a `u64` argument (`start`, `start_arg` in
/// the stream section of `SUBSCRIBE`); as text, `new`, `first`, `last:N`,
/// `seq:N` or `time:…`. A durable that already exists ignores it and resumes
/// at its stored position: the position belongs to the durable, not to the
/// subscribe that happens to reopen it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartPosition {
    /// Only messages stored after the subscribe.
    New,
    /// The oldest stored message.
    First,
    /// The last N stored messages.
    Last(u64),
    /// The message with this stream sequence (or the next one stored).
    Seq(u64),
    /// The first message stored at or after this time (ns since the epoch).
    Time(u64),
}

impl StartPosition {
    /// Wire code and argument (0 `new`, 1 `first`, 2 `last`, 3 `seq`,
    /// 4 `time`; the argument is 0 for the first two).
    pub fn to_wire(self) -> (u8, u64) {
        match self {
            StartPosition::New => (0, 0),
            StartPosition::First => (1, 0),
            StartPosition::Last(count) => (2, count),
            StartPosition::Seq(seq) => (3, seq),
            StartPosition::Time(nanos) => (4, nanos),
        }
    }

    /// The position of a wire code and argument; `None` for an unknown
    /// code, which the decoder reports as `invalid_field` naming `start`.
    pub fn from_wire(code: u8, argument: u64) -> Option<StartPosition> {
        match code {
            0 => Some(StartPosition::New),
            1 => Some(StartPosition::First),
            2 => Some(StartPosition::Last(argument)),
            3 => Some(StartPosition::Seq(argument)),
            4 => Some(StartPosition::Time(argument)),
            _ => None,
        }
    }
}

impl std::str::FromStr for StartPosition {
    type Err = String;

    /// Parses `new`, `first`, `last:N`, `seq:N`, `time:RFC3339` (see
    /// [`parse_rfc3339_ns`]) or `time:NANOS` (digits: nanoseconds since the
    /// epoch, as a script might hold them). Errors quote the input and say
    /// what was expected, for a command line to print as is.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once(':') {
            None if text == "new" => Ok(StartPosition::New),
            None if text == "first" => Ok(StartPosition::First),
            Some(("last", count)) => whole_number(text, count, "the count").map(StartPosition::Last),
            Some(("seq", seq)) => whole_number(text, seq, "the sequence").map(StartPosition::Seq),
            Some(("time", time)) if !time.is_empty() && time.bytes().all(|byte| byte.is_ascii_digit()) => {
                whole_number(text, time, "the time in nanoseconds").map(StartPosition::Time)
            }
            Some(("time", time)) => parse_rfc3339_ns(time).map(StartPosition::Time),
            _ => Err(format!(
                "unknown start {text:?}: expected new, first, last:N, seq:N, time:RFC3339 (like \
                 time:2026-11-24T18:00:00Z) or time:NANOS"
            )),
        }
    }
}

/// `value` (from the start position `text`) as a u64, or an error naming
/// `what` it should have been.
fn whole_number(text: &str, value: &str, what: &str) -> Result<u64, String> {
    value
        .parse::<u64>()
        .map_err(|_| format!("start {text:?}: {what} must be a whole number from 0 to {}, got {value:?}", u64::MAX))
}

impl std::fmt::Display for StartPosition {
    /// The form [`FromStr`](std::str::FromStr) reads back exactly; a time is
    /// written as RFC 3339 in UTC, because people read these (in durable
    /// listings, logs and command lines) far more often than programs do.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartPosition::New => formatter.write_str("new"),
            StartPosition::First => formatter.write_str("first"),
            StartPosition::Last(count) => write!(formatter, "last:{count}"),
            StartPosition::Seq(seq) => write!(formatter, "seq:{seq}"),
            StartPosition::Time(nanos) => write!(formatter, "time:{}", format_rfc3339_ns(*nanos)),
        }
    }
}

/// Where a stream subscription reads (the `STREAM_SOURCE` section of `SUBSCRIBE`).
///
/// Its presence is what makes a subscription read stored messages: the
/// encoder sets `STREAM_SOURCE` exactly when a [`crate::Subscribe`] has one,
/// so the flag and the section cannot disagree on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSource {
    /// The stream; empty = the one whose topics cover the topic filter, else `default`.
    pub stream: String,
    /// A durable subscription's name; empty for a replay forgotten with the subscription.
    pub durable: String,
    /// Where a replay or a new durable starts.
    pub start: StartPosition,
}

/// Why a stream subscriber will never get some stored messages.
///
/// A stream subscription promises every stored message that passes its
/// filters, in order; when the broker cannot keep that promise for a range
/// of sequences it says so with a `GAP` and this reason, so that nothing is
/// skipped silently and the application can tell policy (retention) from
/// failure (damage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapReason {
    /// Removed by the stream's retention before the subscriber read them.
    Removed,
    /// Damaged on disk (a checksum failed).
    Damaged,
}

impl GapReason {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            GapReason::Removed => 0,
            GapReason::Damaged => 1,
        }
    }

    /// Reason for a wire code.
    pub fn from_code(code: u8) -> Option<GapReason> {
        match code {
            0 => Some(GapReason::Removed),
            1 => Some(GapReason::Damaged),
            _ => None,
        }
    }
}

/// What a `MANAGE` frame asks.
///
/// The operation travels as a code and its request as JSON text (schemas in
/// `docs/PROTOCOL.md` §6.17): the codec does not parse the JSON, so that it
/// needs no JSON library and new fields need no new codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManageOp {
    /// Add a stream.
    StreamAdd,
    /// Remove a stream.
    StreamRm,
    /// List the streams.
    StreamLs,
    /// Describe a stream.
    StreamInfo,
    /// List the durable subscriptions.
    DurableLs,
    /// Describe a durable subscription.
    DurableInfo,
    /// Remove a durable subscription.
    DurableRm,
    /// Declare a queue: a stream holds its topic and a shared durable
    /// subscription reads it, so that what is sent waits for a consumer.
    QueueDeclare,
    /// Change the brokers that keep a replicated stream (`sift stream move`).
    StreamMembers,
}

impl ManageOp {
    /// Every operation, in wire-code order.
    pub const ALL: [ManageOp; 9] = [
        ManageOp::StreamAdd,
        ManageOp::StreamRm,
        ManageOp::StreamLs,
        ManageOp::StreamInfo,
        ManageOp::DurableLs,
        ManageOp::DurableInfo,
        ManageOp::DurableRm,
        ManageOp::QueueDeclare,
        ManageOp::StreamMembers,
    ];

    /// Wire code (1-9).
    pub fn code(self) -> u8 {
        match self {
            ManageOp::StreamAdd => 1,
            ManageOp::StreamRm => 2,
            ManageOp::StreamLs => 3,
            ManageOp::StreamInfo => 4,
            ManageOp::DurableLs => 5,
            ManageOp::DurableInfo => 6,
            ManageOp::DurableRm => 7,
            ManageOp::QueueDeclare => 8,
            ManageOp::StreamMembers => 9,
        }
    }

    /// Operation for a wire code.
    pub fn from_code(code: u8) -> Option<ManageOp> {
        ManageOp::ALL.into_iter().find(|op| op.code() == code)
    }

    /// Name, as in `docs/PROTOCOL.md` §6.17.
    pub fn name(self) -> &'static str {
        match self {
            ManageOp::StreamAdd => "stream_add",
            ManageOp::StreamRm => "stream_rm",
            ManageOp::StreamLs => "stream_ls",
            ManageOp::StreamInfo => "stream_info",
            ManageOp::DurableLs => "durable_ls",
            ManageOp::DurableInfo => "durable_info",
            ManageOp::DurableRm => "durable_rm",
            ManageOp::QueueDeclare => "queue_declare",
            ManageOp::StreamMembers => "stream_members",
        }
    }
}

/// `QUERY`: the archive query of a stream.
///
/// Unlike a replay it does not subscribe: it reads the stream as it was when
/// the query began, sends each match as a `QUERY_RESULT` and ends with a
/// `QUERY_DONE` (or an `ERROR`), all carrying `request_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Client-chosen id that the results, `QUERY_DONE` or `ERROR` carry.
    pub request_id: u64,
    /// The stream.
    pub stream: String,
    /// Topic filter; empty = every topic.
    pub topic_filter: String,
    /// Content filter language.
    pub filter_kind: FilterKind,
    /// Content filter text.
    pub filter: String,
    /// Lowest timestamp (ns), 0 = no bound.
    pub since_ns: u64,
    /// Highest timestamp (ns), 0 = no bound.
    pub until_ns: u64,
    /// Most results, 0 = no limit.
    pub limit: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_positions_parse_and_print() {
        for (text, position) in [
            ("new", StartPosition::New),
            ("first", StartPosition::First),
            ("last:5", StartPosition::Last(5)),
            ("seq:12", StartPosition::Seq(12)),
            ("time:1700000000000000000", StartPosition::Time(1_700_000_000_000_000_000)),
        ] {
            assert_eq!(text.parse::<StartPosition>(), Ok(position));
            assert_eq!(position.to_string().parse::<StartPosition>(), Ok(position));
            assert_eq!(StartPosition::from_wire(position.to_wire().0, position.to_wire().1), Some(position));
        }
        for bad in ["later", "last:", "seq:x", "time:yesterday", "time:2026-13-01T00:00:00Z"] {
            assert!(bad.parse::<StartPosition>().is_err(), "{bad}");
        }
    }
}
