//! Bytes to link frames.
//!
//! The same rules as the client decoder, and the same code: the length
//! prefix is checked against the frame limit before anything is buffered, a
//! bad prefix is fatal, and a frame whose body does not parse is consumed
//! whole and reported as a non-fatal [`DecodeError::Malformed`].

use bytes::BytesMut;
use sift_core::Message;

use crate::decode::{decode_frame, malformed, FieldResult, Reader, Recent};
use crate::{DecodeError, ErrorCode, FilterKind};

use super::frame::*;
use super::LinkErrorCode;

/// Fewest bytes one `LINK_STATE` entry takes (an empty name and a cost), so
/// that a small frame cannot make us reserve a large vector.
const MIN_LINK_ENTRY_BYTES: usize = 2 + 4;

/// Fewest bytes one `INTEREST` change takes (a tag and a key).
const MIN_CHANGE_BYTES: usize = 1 + 8;

/// Fewest bytes one queue-group assignment takes (two empty strings).
const MIN_ASSIGNMENT_BYTES: usize = 2 + 2;

/// Fewest bytes one pending label or target takes (an empty string).
const MIN_LABEL_BYTES: usize = 2;

/// A streaming link frame decoder with a frame size limit.
///
/// One decoder serves one link. Like [`crate::Decoder`], it shares the topic
/// and publisher of consecutive forwarded messages when they repeat.
#[derive(Debug, Clone)]
pub struct LinkDecoder {
    max_frame_bytes: u32,
    recent: Recent,
}

impl LinkFrame {
    /// The message a link frame carries, if any: where its byte fields go.
    fn message_mut(&mut self) -> Option<&mut Message> {
        match self {
            LinkFrame::Forward(forward) => Some(&mut forward.message),
            _ => None,
        }
    }
}

impl LinkDecoder {
    /// A decoder refusing frames longer than `max_frame_bytes`.
    pub fn new(max_frame_bytes: u32) -> LinkDecoder {
        LinkDecoder { max_frame_bytes, recent: Recent::default() }
    }

    /// The frame limit in force.
    pub fn max_frame_bytes(&self) -> u32 {
        self.max_frame_bytes
    }

    /// Changes the frame limit.
    pub fn set_max_frame_bytes(&mut self, max_frame_bytes: u32) {
        self.max_frame_bytes = max_frame_bytes;
    }

    /// Takes one frame off the front of `buf`, or returns `Ok(None)` when
    /// `buf` does not yet hold a whole frame (reserving room for it).
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<LinkFrame>, DecodeError> {
        let parse = |reader: &mut Reader<'_, '_>, type_code| reader.link_frame(type_code);
        decode_frame(buf, self.max_frame_bytes, &mut self.recent, link_frame_name, parse, LinkFrame::message_mut)
    }
}

impl Reader<'_, '_> {
    fn link_frame(&mut self, type_code: u8) -> FieldResult<LinkFrame> {
        use link_frame_type::*;
        Ok(match type_code {
            LINK_HELLO => LinkFrame::Hello(self.link_hello()?),
            LINK_WELCOME => LinkFrame::Welcome(self.link_welcome()?),
            LINK_PING => LinkFrame::Ping { nonce: self.u64("nonce")? },
            LINK_PONG => LinkFrame::Pong { nonce: self.u64("nonce")? },
            LINK_TIME => LinkFrame::Time { request_id: self.u64("request_id")?, origin_ns: self.u64("origin_ns")? },
            LINK_TIME_REPLY => LinkFrame::TimeReply(self.time_reply()?),
            LINK_STATE => LinkFrame::State(self.link_state()?),
            INTEREST => LinkFrame::Interest(self.interest()?),
            INTEREST_SYNC_BEGIN => {
                LinkFrame::InterestSyncBegin { origin: self.str16("origin")?, sequence: self.u64("sequence")? }
            }
            INTEREST_SYNC_END => {
                LinkFrame::InterestSyncEnd { origin: self.str16("origin")?, sequence: self.u64("sequence")? }
            }
            FORWARD => LinkFrame::Forward(self.forward()?),
            LINK_ACK => LinkFrame::Ack { up_to_link_sequence: self.u64("up_to_link_sequence")? },
            DELIVERY_REPORT => LinkFrame::DeliveryReport(self.delivery_report()?),
            RAFT => LinkFrame::Raft(self.raft()?),
            LINK_ERROR => LinkFrame::Error(self.link_error()?),
            unknown => {
                self.offset = self.body.len();
                return Err((ErrorCode::UnexpectedFrame, format!("unknown link frame type 0x{unknown:02x}")));
            }
        })
    }

    fn link_hello(&mut self) -> FieldResult<LinkHello> {
        Ok(LinkHello {
            version_min: self.u16("version_min")?,
            version_max: self.u16("version_max")?,
            cluster: self.str16("cluster")?,
            broker: self.str16("broker")?,
            link_cost: self.u32("link_cost")?,
        })
    }

    fn link_welcome(&mut self) -> FieldResult<LinkWelcome> {
        Ok(LinkWelcome {
            version: self.u16("version")?,
            cluster: self.str16("cluster")?,
            broker: self.str16("broker")?,
            link_cost: self.u32("link_cost")?,
        })
    }

    fn link_state(&mut self) -> FieldResult<LinkState> {
        let origin = self.str16("origin")?;
        let sequence = self.u64("sequence")?;
        let count = usize::from(self.u16("link count")?);
        let mut links = Vec::with_capacity(count.min(self.remaining() / MIN_LINK_ENTRY_BYTES));
        for _ in 0..count {
            links.push(LinkStateEntry { neighbour: self.str16("neighbour")?, cost: self.u32("cost")? });
        }
        Ok(LinkState { origin, sequence, links })
    }

    fn interest(&mut self) -> FieldResult<Interest> {
        let origin = self.str16("origin")?;
        let sequence = self.u64("sequence")?;
        let count = usize::from(self.u16("change count")?);
        let mut changes = Vec::with_capacity(count.min(self.remaining() / MIN_CHANGE_BYTES));
        for _ in 0..count {
            changes.push(self.interest_change()?);
        }
        Ok(Interest { origin, sequence, changes })
    }

    fn interest_change(&mut self) -> FieldResult<InterestChange> {
        match self.u8("change tag")? {
            interest_change_tag::ADD => {
                let key = self.u64("key")?;
                let topic_filter = self.str16("topic_filter")?;
                let kind_code = self.u8("filter_kind")?;
                let Some(filter_kind) = FilterKind::from_code(kind_code) else {
                    return Err((ErrorCode::InvalidFilter, format!("filter_kind: unknown language code {kind_code}")));
                };
                let filter = self.str32("filter")?;
                let queue_group = self.str16("queue_group")?;
                Ok(InterestChange::Add(InterestAdd { key, topic_filter, filter_kind, filter, queue_group }))
            }
            interest_change_tag::REMOVE => Ok(InterestChange::Remove { key: self.u64("key")? }),
            other => malformed(format!("change tag: unknown code {other}")),
        }
    }

    fn forward(&mut self) -> FieldResult<Forward> {
        let origin = self.str16("origin")?;
        let origin_sequence = self.u64("origin_sequence")?;
        let link_sequence = self.u64("link_sequence")?;
        // Errors in the message refer to the frame the sender will look for.
        self.reference = link_sequence;
        let flags = self.u8("flags")?;
        let groups = if flags & forward_flags::GROUPS != 0 { self.group_assignments()? } else { Vec::new() };
        let targets = if flags & forward_flags::TARGETS != 0 { self.targets()? } else { Vec::new() };
        let await_timeout_ms =
            if flags & forward_flags::AWAITS_REPORT != 0 { self.u32("await_timeout_ms")? } else { 0 };
        let message = Box::new(self.message()?);
        let flags = flags & !(forward_flags::GROUPS | forward_flags::TARGETS);
        Ok(Forward { origin, origin_sequence, link_sequence, flags, groups, targets, await_timeout_ms, message })
    }

    fn targets(&mut self) -> FieldResult<Vec<String>> {
        let count = usize::from(self.u16("target count")?);
        let mut targets = Vec::with_capacity(count.min(self.remaining() / MIN_LABEL_BYTES));
        for _ in 0..count {
            targets.push(self.str16("target")?);
        }
        Ok(targets)
    }

    fn group_assignments(&mut self) -> FieldResult<Vec<GroupAssignment>> {
        let count = usize::from(self.u16("queue group count")?);
        let mut groups = Vec::with_capacity(count.min(self.remaining() / MIN_ASSIGNMENT_BYTES));
        for _ in 0..count {
            groups.push(GroupAssignment { group: self.str16("queue_group")?, broker: self.str16("broker")? });
        }
        Ok(groups)
    }

    fn delivery_report(&mut self) -> FieldResult<DeliveryReportFrame> {
        let origin = self.str16("origin")?;
        let origin_sequence = self.u64("origin_sequence")?;
        let reporter = self.str16("reporter")?;
        let matched = self.u32("matched")?;
        let acked = self.u32("acked")?;
        let count = usize::from(self.u16("pending count")?);
        let mut pending = Vec::with_capacity(count.min(self.remaining() / MIN_LABEL_BYTES));
        for _ in 0..count {
            pending.push(self.str16("pending label")?);
        }
        Ok(DeliveryReportFrame { origin, origin_sequence, reporter, matched, acked, pending })
    }

    fn raft(&mut self) -> FieldResult<RaftFrame> {
        Ok(RaftFrame {
            to: self.str16("to")?,
            from: self.str16("from")?,
            call_id: self.u64("call_id")?,
            stream: self.str16("stream")?,
            kind: self.u8("kind")?,
            flags: self.u8("flags")?,
            body: self.bytes32("body")?,
        })
    }

    fn link_error(&mut self) -> FieldResult<LinkErrorFrame> {
        Ok(LinkErrorFrame {
            code: LinkErrorCode::from_code(self.u16("code")?),
            fatal: self.u8("fatal")? != 0,
            message: self.str16("message")?,
        })
    }
}
