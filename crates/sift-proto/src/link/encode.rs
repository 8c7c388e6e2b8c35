//! Link frames to bytes, with the client protocol's framing and field
//! helpers, and its message encoding inside `FORWARD`.

use bytes::{BufMut, BytesMut};

use crate::encode::{count16, encode_message_ref, framed, put_bytes32, put_str16, truncate_utf8};
use crate::{EncodeError, MessageRef};

use super::frame::*;

/// The fields of a `FORWARD` before its message, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct ForwardHeader<'a> {
    /// The broker where the message was published.
    pub origin: &'a str,
    /// The origin's number for the message.
    pub origin_sequence: u64,
    /// The sender's number for this frame on this link.
    pub link_sequence: u64,
    /// [`forward_flags`]; `GROUPS` and `TARGETS` are set from `groups` and
    /// `targets`, whatever is given.
    pub flags: u8,
    /// Queue-group assignments.
    pub groups: &'a [GroupAssignment],
    /// Target brokers of a re-routed message; empty for the origin's tree.
    pub targets: &'a [String],
    /// Written when `flags` has `AWAITS_REPORT`.
    pub await_timeout_ms: u32,
}

/// Appends a `FORWARD` frame for borrowed message fields, so that a broker
/// can forward a message without cloning it. The caller sets the message's
/// hop count (one more than it arrived with).
pub fn encode_forward_ref(
    buf: &mut BytesMut,
    header: ForwardHeader<'_>,
    message: MessageRef<'_>,
) -> Result<(), EncodeError> {
    framed(buf, link_frame_type::FORWARD, |buf| {
        put_str16(buf, "origin", header.origin)?;
        buf.put_u64(header.origin_sequence);
        buf.put_u64(header.link_sequence);
        let mut flags = header.flags & !(forward_flags::GROUPS | forward_flags::TARGETS);
        if !header.groups.is_empty() {
            flags |= forward_flags::GROUPS;
        }
        if !header.targets.is_empty() {
            flags |= forward_flags::TARGETS;
        }
        buf.put_u8(flags);
        if !header.groups.is_empty() {
            buf.put_u16(count16("queue groups", header.groups.len())?);
            for assignment in header.groups {
                put_str16(buf, "queue_group", &assignment.group)?;
                put_str16(buf, "broker", &assignment.broker)?;
            }
        }
        if !header.targets.is_empty() {
            buf.put_u16(count16("targets", header.targets.len())?);
            for target in header.targets {
                put_str16(buf, "target", target)?;
            }
        }
        if flags & forward_flags::AWAITS_REPORT != 0 {
            buf.put_u32(header.await_timeout_ms);
        }
        encode_message_ref(buf, message)
    })
}

impl LinkFrame {
    /// Appends this frame to `buf`. On error `buf` is left as it was.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        if let LinkFrame::Forward(forward) = self {
            let message = MessageRef::of(&forward.message);
            let header = ForwardHeader {
                origin: &forward.origin,
                origin_sequence: forward.origin_sequence,
                link_sequence: forward.link_sequence,
                flags: forward.flags,
                groups: &forward.groups,
                targets: &forward.targets,
                await_timeout_ms: forward.await_timeout_ms,
            };
            return encode_forward_ref(buf, header, message);
        }
        framed(buf, self.type_code(), |buf| self.encode_body(buf))
    }

    fn encode_body(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            LinkFrame::Hello(hello) => {
                buf.put_u16(hello.version_min);
                buf.put_u16(hello.version_max);
                put_identity(buf, &hello.cluster, &hello.broker, hello.link_cost)?;
            }
            LinkFrame::Welcome(welcome) => {
                buf.put_u16(welcome.version);
                put_identity(buf, &welcome.cluster, &welcome.broker, welcome.link_cost)?;
            }
            LinkFrame::Ping { nonce } | LinkFrame::Pong { nonce } => buf.put_u64(*nonce),
            LinkFrame::Time { request_id, origin_ns } => crate::encode::put_time(buf, *request_id, *origin_ns),
            LinkFrame::TimeReply(reply) => crate::encode::put_time_reply(buf, reply),
            LinkFrame::State(state) => encode_link_state(buf, state)?,
            LinkFrame::Interest(interest) => encode_interest(buf, interest)?,
            LinkFrame::InterestSyncBegin { origin, sequence } | LinkFrame::InterestSyncEnd { origin, sequence } => {
                put_str16(buf, "origin", origin)?;
                buf.put_u64(*sequence);
            }
            LinkFrame::Forward(_) => unreachable!("FORWARD is encoded by encode_forward_ref"),
            LinkFrame::Ack { up_to_link_sequence } => buf.put_u64(*up_to_link_sequence),
            LinkFrame::DeliveryReport(report) => encode_delivery_report(buf, report)?,
            LinkFrame::Raft(raft) => encode_raft(buf, raft)?,
            LinkFrame::Error(error) => {
                buf.put_u16(error.code.code());
                buf.put_u8(u8::from(error.fatal));
                put_str16(buf, "error message", truncate_utf8(&error.message, usize::from(u16::MAX)))?;
            }
        }
        Ok(())
    }
}

/// The fields `LINK_HELLO` and `LINK_WELCOME` share after the version.
fn put_identity(buf: &mut BytesMut, cluster: &str, broker: &str, link_cost: u32) -> Result<(), EncodeError> {
    put_str16(buf, "cluster", cluster)?;
    put_str16(buf, "broker", broker)?;
    buf.put_u32(link_cost);
    Ok(())
}

fn encode_link_state(buf: &mut BytesMut, state: &LinkState) -> Result<(), EncodeError> {
    put_str16(buf, "origin", &state.origin)?;
    buf.put_u64(state.sequence);
    buf.put_u16(count16("links", state.links.len())?);
    for link in &state.links {
        put_str16(buf, "neighbour", &link.neighbour)?;
        buf.put_u32(link.cost);
    }
    Ok(())
}

fn encode_interest(buf: &mut BytesMut, interest: &Interest) -> Result<(), EncodeError> {
    put_str16(buf, "origin", &interest.origin)?;
    buf.put_u64(interest.sequence);
    buf.put_u16(count16("changes", interest.changes.len())?);
    for change in &interest.changes {
        match change {
            InterestChange::Add(add) => {
                buf.put_u8(interest_change_tag::ADD);
                buf.put_u64(add.key);
                put_str16(buf, "topic_filter", &add.topic_filter)?;
                buf.put_u8(add.filter_kind.code());
                put_bytes32(buf, "filter", add.filter.as_bytes())?;
                put_str16(buf, "queue_group", &add.queue_group)?;
            }
            InterestChange::Remove { key } => {
                buf.put_u8(interest_change_tag::REMOVE);
                buf.put_u64(*key);
            }
        }
    }
    Ok(())
}

fn encode_raft(buf: &mut BytesMut, raft: &RaftFrame) -> Result<(), EncodeError> {
    put_str16(buf, "to", &raft.to)?;
    put_str16(buf, "from", &raft.from)?;
    buf.put_u64(raft.call_id);
    put_str16(buf, "stream", &raft.stream)?;
    buf.put_u8(raft.kind);
    buf.put_u8(raft.flags);
    put_bytes32(buf, "body", &raft.body)
}

fn encode_delivery_report(buf: &mut BytesMut, report: &DeliveryReportFrame) -> Result<(), EncodeError> {
    put_str16(buf, "origin", &report.origin)?;
    buf.put_u64(report.origin_sequence);
    put_str16(buf, "reporter", &report.reporter)?;
    buf.put_u32(report.matched);
    buf.put_u32(report.acked);
    buf.put_u16(count16("pending", report.pending.len())?);
    for label in &report.pending {
        put_str16(buf, "pending label", label)?;
    }
    Ok(())
}
