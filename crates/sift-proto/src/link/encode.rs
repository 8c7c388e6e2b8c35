//! Link frames to bytes, with the client protocol's framing and field
//! helpers, and its message encoding inside `FORWARD`.

use bytes::{BufMut, BytesMut};

use crate::encode::{count16, encode_message_ref, framed, put_bytes32, put_str16, truncate_utf8};
use crate::{EncodeError, MessageRef};

use super::frame::*;

/// Appends a `FORWARD` frame for borrowed message fields, so that a broker
/// can forward a message without cloning it. The caller sets the message's
/// hop count (one more than it arrived with).
pub fn encode_forward_ref(
    buf: &mut BytesMut,
    origin: &str,
    origin_sequence: u64,
    link_sequence: u64,
    flags: u8,
    message: MessageRef<'_>,
) -> Result<(), EncodeError> {
    framed(buf, link_frame_type::FORWARD, |buf| {
        put_str16(buf, "origin", origin)?;
        buf.put_u64(origin_sequence);
        buf.put_u64(link_sequence);
        buf.put_u8(flags);
        encode_message_ref(buf, message)
    })
}

impl LinkFrame {
    /// Appends this frame to `buf`. On error `buf` is left as it was.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        if let LinkFrame::Forward(forward) = self {
            let message = MessageRef::of(&forward.message);
            let Forward { origin, origin_sequence, link_sequence, flags, .. } = forward;
            return encode_forward_ref(buf, origin, *origin_sequence, *link_sequence, *flags, message);
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
            LinkFrame::State(state) => encode_link_state(buf, state)?,
            LinkFrame::Interest(interest) => encode_interest(buf, interest)?,
            LinkFrame::InterestSyncBegin { origin, sequence } | LinkFrame::InterestSyncEnd { origin, sequence } => {
                put_str16(buf, "origin", origin)?;
                buf.put_u64(*sequence);
            }
            LinkFrame::Forward(_) => unreachable!("FORWARD is encoded by encode_forward_ref"),
            LinkFrame::Ack { up_to_link_sequence } => buf.put_u64(*up_to_link_sequence),
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
