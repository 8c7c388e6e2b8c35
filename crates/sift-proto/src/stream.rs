//! The fields of persistent delivery: where a stream subscription starts,
//! why a `GAP` happened, the `MANAGE` operations and the `QUERY` request.

use crate::FilterKind;

/// Where a replay, or a new durable subscription, starts reading a stream.
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
    /// Wire code and argument.
    pub fn to_wire(self) -> (u8, u64) {
        match self {
            StartPosition::New => (0, 0),
            StartPosition::First => (1, 0),
            StartPosition::Last(count) => (2, count),
            StartPosition::Seq(seq) => (3, seq),
            StartPosition::Time(nanos) => (4, nanos),
        }
    }

    /// The position of a wire code and argument.
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

    /// Parses `new`, `first`, `last:N`, `seq:N`, `time:RFC3339` or `time:NANOS`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let number = |value: &str, what: &str| {
            value.parse::<u64>().map_err(|_| format!("{text:?}: {what} must be a whole number, got {value:?}"))
        };
        match text.split_once(':') {
            None if text == "new" => Ok(StartPosition::New),
            None if text == "first" => Ok(StartPosition::First),
            Some(("last", value)) => number(value, "the count").map(StartPosition::Last),
            Some(("seq", value)) => number(value, "the sequence").map(StartPosition::Seq),
            Some(("time", value)) if !value.is_empty() && value.bytes().all(|byte| byte.is_ascii_digit()) => {
                number(value, "the time").map(StartPosition::Time)
            }
            Some(("time", value)) => parse_rfc3339_ns(value).map(StartPosition::Time),
            _ => Err(format!("unknown start {text:?}: expected new, first, last:N, seq:N or time:RFC3339")),
        }
    }
}

impl std::fmt::Display for StartPosition {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartPosition::New => formatter.write_str("new"),
            StartPosition::First => formatter.write_str("first"),
            StartPosition::Last(count) => write!(formatter, "last:{count}"),
            StartPosition::Seq(seq) => write!(formatter, "seq:{seq}"),
            StartPosition::Time(nanos) => write!(formatter, "time:{nanos}"),
        }
    }
}

/// Days from 1970-01-01 to `year-month-day` (proleptic Gregorian).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_index + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn days_in_month(year: i64, month: u32) -> u32 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses an RFC 3339 time (`2026-11-24T18:00:00Z`, fractional seconds and
/// `+hh:mm` offsets allowed) into nanoseconds since the Unix epoch.
pub fn parse_rfc3339_ns(text: &str) -> Result<u64, String> {
    let bad = |why: &str| format!("time {text:?}: {why} (expected RFC 3339, like 2026-11-24T18:00:00Z)");
    let bytes = text.as_bytes();
    if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || !matches!(bytes[10], b'T' | b't' | b' ') {
        return Err(bad("not a date and time"));
    }
    if bytes[13] != b':' || bytes[16] != b':' {
        return Err(bad("not hh:mm:ss"));
    }
    let field = |range: std::ops::Range<usize>, what: &str| -> Result<u32, String> {
        let part = &text[range];
        if !part.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(bad(&format!("{what} {part:?} is not a number")));
        }
        part.parse::<u32>().map_err(|_| bad(what))
    };
    let year = i64::from(field(0..4, "year")?);
    let month = field(5..7, "month")?;
    let day = field(8..10, "day")?;
    let (hour, minute, second) = (field(11..13, "hour")?, field(14..16, "minute")?, field(17..19, "second")?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(bad("no such date"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(bad("no such time of day"));
    }
    let mut rest = &text[19..];
    let mut fraction_ns: u64 = 0;
    if let Some(after_dot) = rest.strip_prefix('.') {
        let digits = after_dot.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return Err(bad("fractional seconds need 1 to 9 digits"));
        }
        let value: u64 = after_dot[..digits].parse().map_err(|_| bad("fraction"))?;
        fraction_ns = value * 10u64.pow(9 - digits as u32);
        rest = &after_dot[digits..];
    }
    let offset_s: i64 = match rest {
        "Z" | "z" => 0,
        offset if offset.len() == 6 && matches!(&offset[0..1], "+" | "-") && &offset[3..4] == ":" => {
            let offset_hours = i64::from(field(text.len() - 5..text.len() - 3, "offset hours")?);
            let offset_minutes = i64::from(field(text.len() - 2..text.len(), "offset minutes")?);
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            sign * (offset_hours * 3600 + offset_minutes * 60)
        }
        _ => return Err(bad("the time zone must be Z or +hh:mm")),
    };
    let seconds = days_from_civil(year, month, day) * 86_400
        + i64::from(hour) * 3600
        + i64::from(minute) * 60
        + i64::from(second)
        - offset_s;
    let seconds = u64::try_from(seconds).map_err(|_| bad("before 1970"))?;
    seconds.checked_mul(1_000_000_000).and_then(|ns| ns.checked_add(fraction_ns)).ok_or_else(|| bad("too far ahead"))
}

/// Where a stream subscription reads (the `STREAM_SOURCE` section of `SUBSCRIBE`).
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
}

impl ManageOp {
    /// Every operation, in wire-code order.
    pub const ALL: [ManageOp; 7] = [
        ManageOp::StreamAdd,
        ManageOp::StreamRm,
        ManageOp::StreamLs,
        ManageOp::StreamInfo,
        ManageOp::DurableLs,
        ManageOp::DurableInfo,
        ManageOp::DurableRm,
    ];

    /// Wire code (1-7).
    pub fn code(self) -> u8 {
        match self {
            ManageOp::StreamAdd => 1,
            ManageOp::StreamRm => 2,
            ManageOp::StreamLs => 3,
            ManageOp::StreamInfo => 4,
            ManageOp::DurableLs => 5,
            ManageOp::DurableInfo => 6,
            ManageOp::DurableRm => 7,
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
        }
    }
}

/// `QUERY`: the archive query of a stream.
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

    #[test]
    fn rfc3339_times_convert_exactly() {
        assert_eq!(parse_rfc3339_ns("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_rfc3339_ns("2000-03-01T00:00:00Z"), Ok(951_868_800_000_000_000));
        assert_eq!(parse_rfc3339_ns("2024-02-29T12:00:00.5Z"), Ok(1_709_208_000_500_000_000));
        assert_eq!(parse_rfc3339_ns("2024-02-29T13:30:00+01:30"), parse_rfc3339_ns("2024-02-29T12:00:00Z"));
        assert!(parse_rfc3339_ns("2023-02-29T00:00:00Z").is_err(), "not a leap year");
        assert!(parse_rfc3339_ns("2024-02-29T00:00:00").is_err(), "no zone");
    }
}
