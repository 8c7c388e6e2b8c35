//! The connection's byte stream as the AMQP library reads it. The library
//! gets only whole frames this front-end has checked:
//!
//! - the protocol header this front-end already read is put back in front
//!   (for a client that skipped SASL);
//! - every frame's size must hold its header and stay within
//!   `amqp.max_frame_bytes` ([`check_size`]);
//! - every performative, and every message once its transfer frames are
//!   all in, must declare no length or count beyond its bytes and nest no
//!   deeper than the library's decoder can take ([`crate::encoding`]): the
//!   library sizes buffers by declared lengths before it reads;
//! - a message may span frames up to `max_message_bytes`;
//! - the client's `open` is noticed on the way, since the library does
//!   not show it and JMS needs its `container-id` (the JMS client id, which
//!   names durable subscriptions).
//!
//! A frame that fails ends the connection with an I/O error saying why.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use fe2o3_amqp::types::definitions::Role;
use fe2o3_amqp::types::performatives::Performative;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::commits::Commits;
use crate::drain::{DrainSignal, Drains};
use crate::encoding;
use crate::sasl::AMQP_HEADER;
use crate::transactions::TransactionBudget;
use crate::wire::{check_size, FRAME_HEADER_BYTES};

/// The descriptor codes of the performatives `open`, `attach`, `flow`,
/// `transfer`, `disposition`, `detach` and `close` (AMQP 1.0 part 2, §2.7; `open` to `close` run 0x10
/// to 0x18).
const OPEN_CODE: u8 = 0x10;
const ATTACH_CODE: u8 = 0x12;
const FLOW_CODE: u8 = 0x13;
const TRANSFER_CODE: u8 = 0x14;
const DISPOSITION_CODE: u8 = 0x15;
const DETACH_CODE: u8 = 0x16;
const CLOSE_CODE: u8 = 0x18;

/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// What the client's `open` said that the front-end needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientOpen {
    /// The container id: a JMS connection's client id (or one Qpid JMS
    /// made up when the application set none).
    pub container_id: String,
}

/// The limits a [`Rewound`] stream checks.
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    /// Largest frame.
    pub max_frame_bytes: usize,
    /// Largest message, over all its transfer frames.
    pub max_message_bytes: usize,
    /// Most payload bytes the connection's open transactions may hold.
    pub transaction_bytes_max: usize,
    /// The longest a drain flow is held for its consumer ([`crate::drain`]):
    /// past it, it goes on to the library whatever the consumer does.
    pub drain_hold_max: std::time::Duration,
    /// The longest a commit's answer waits for the transaction's messages
    /// to be confirmed ([`crate::commits`]).
    pub commit_wait_max: std::time::Duration,
    /// Most links the client may have attached at once, all sessions
    /// together (`amqp.max_sessions` × `amqp.max_links_per_session`): the
    /// check notes each one before the library refuses any.
    pub links_max: usize,
}

/// A stream that first yields `replay`, then the checked frames of `inner`.
#[derive(Debug)]
pub struct Rewound<S> {
    inner: S,
    limits: StreamLimits,
    /// Checked bytes the library has not taken yet.
    ready: BytesMut,
    /// Bytes read but not yet a whole frame.
    pending: BytesMut,
    /// Protocol header bytes still to pass before the frames begin.
    header_left: usize,
    /// The payload so far of each message that spans frames, by channel
    /// and link handle.
    partial: HashMap<(u16, u32), BytesMut>,
    open: Arc<Mutex<Option<ClientOpen>>>,
    open_seen: bool,
    /// What the connection's open transactions hold.
    transactions: TransactionBudget,
    /// The consumer links' drain signals.
    drains: Arc<Drains>,
    /// The name of each link the client receives on, by channel and the
    /// client's handle: a flow names its link by handle.
    receiving_links: HashMap<(u16, u32), String>,
    /// A drain flow held back until its consumer sent what it had, and
    /// that consumer's signal; no frame after it is checked meanwhile.
    held_drain: Option<(BytesMut, Arc<DrainSignal>)>,
    /// The commits whose answer waits for their messages.
    commits: Arc<Commits>,
    /// Bytes the library wrote that wait behind a commit's answer; the
    /// frames before `cleared_bytes` have been checked and only wait for
    /// the socket.
    outgoing: BytesMut,
    cleared_bytes: usize,
    /// When a held commit answer goes out regardless.
    commit_deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    /// When the held drain goes on regardless; set when the consumer is
    /// asked, once the library has read every frame before the drain (so
    /// that the credit those frames gave has reached the consumer's link).
    held_drain_deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Rewound<S> {
    /// Wraps `inner`, replaying `replay` (a protocol header already read)
    /// first; the client's `open`, once read, goes to `open`.
    pub fn new(inner: S, replay: Vec<u8>, limits: StreamLimits, open: Arc<Mutex<Option<ClientOpen>>>) -> Self {
        Rewound {
            inner,
            limits,
            header_left: AMQP_HEADER.len() - replay.len().min(AMQP_HEADER.len()),
            ready: BytesMut::from(&replay[..]),
            pending: BytesMut::new(),
            partial: HashMap::new(),
            open,
            open_seen: false,
            transactions: TransactionBudget::new(limits.transaction_bytes_max),
            drains: Arc::default(),
            receiving_links: HashMap::new(),
            held_drain: None,
            held_drain_deadline: None,
            commits: Arc::default(),
            outgoing: BytesMut::new(),
            cleared_bytes: 0,
            commit_deadline: None,
        }
    }

    /// Holds the answer of each commit until the broker confirmed the
    /// transaction's messages ([`crate::commits`]).
    pub fn with_commits(mut self, commits: Arc<Commits>) -> Self {
        self.commits = commits;
        self
    }

    /// Holds each drain flow for a consumer link registered in `drains`
    /// until it is released ([`crate::drain`]).
    pub fn with_drains(mut self, drains: Arc<Drains>) -> Self {
        self.drains = drains;
        self
    }

    /// Takes bytes as if read from the socket: whole frames among them are
    /// checked and made ready (the fuzz target's way in).
    pub fn feed(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.pending.extend_from_slice(bytes);
        self.take_frames()
    }

    /// The checked bytes ready for the library, taken.
    pub fn take_ready(&mut self) -> BytesMut {
        self.ready.split()
    }

    /// Moves what `pending` holds of whole, checked frames into `ready`.
    fn take_frames(&mut self) -> std::io::Result<()> {
        let header = self.header_left.min(self.pending.len());
        if header > 0 {
            self.header_left -= header;
            let bytes = self.pending.split_to(header);
            self.ready.extend_from_slice(&bytes);
        }
        while self.header_left == 0 && self.held_drain.is_none() && self.pending.len() >= 4 {
            let size =
                u32::from_be_bytes([self.pending[0], self.pending[1], self.pending[2], self.pending[3]]) as usize;
            check_size(size, self.limits.max_frame_bytes).map_err(invalid)?;
            if self.pending.len() < size {
                return Ok(());
            }
            let frame = self.pending.split_to(size);
            if let Some(signal) = self.check_frame(&frame)? {
                self.held_drain = Some((frame, signal));
                return Ok(());
            }
            self.ready.extend_from_slice(&frame);
            self.ready.unsplit(self.transactions.take_injected());
        }
        Ok(())
    }

    /// Checks one whole frame: its performative, and a message's payload
    /// once all of it is in. A drain flow to hold back comes out as its
    /// consumer's signal.
    fn check_frame(&mut self, frame: &[u8]) -> std::io::Result<Option<Arc<DrainSignal>>> {
        let body = &frame[4..];
        let (data_offset, frame_type) = (body[0], body[1]);
        // A frame of another kind or layout is the library's to refuse.
        if data_offset != 2 || frame_type != 0 || frame.len() == FRAME_HEADER_BYTES {
            return Ok(None);
        }
        let start = FRAME_HEADER_BYTES - 4;
        // A performative is a described list; anything else the library
        // would read by its own lights, past what is checked here.
        if !encoding::is_described(body, start) {
            return Err(invalid("a frame whose body is not a described performative"));
        }
        let end = encoding::check_value(body, start).map_err(invalid)?;
        // Only an open, a transfer, and the attach and detach that tell a
        // transaction controller's link, tell this front-end anything; the
        // others (a small descriptor code, as clients write them) need no
        // decoding here, which the library does anyway.
        if let Some(&[0x53, code]) = body.get(start + 1..start + 3) {
            let needed = matches!(code, TRANSFER_CODE | ATTACH_CODE | DETACH_CODE)
                || (code == OPEN_CODE && !self.open_seen)
                || (code == DISPOSITION_CODE && self.transactions.reads_dispositions())
                || (code == FLOW_CODE && !self.receiving_links.is_empty());
            if !needed && (OPEN_CODE..=CLOSE_CODE).contains(&code) {
                return match end == body.len() {
                    true => Ok(None),
                    false => Err(invalid("bytes after a performative that carries no payload")),
                };
            }
        }
        let Ok(performative) = serde_amqp::from_slice::<Performative>(&body[start..end]) else {
            return Err(invalid("a frame whose body is not a performative"));
        };
        if end != body.len() && !matches!(performative, Performative::Transfer(_)) {
            return Err(invalid("bytes after a performative that carries no payload"));
        }
        let channel = u16::from_be_bytes([body[2], body[3]]);
        self.note(channel, performative, &body[end..])
    }

    /// What a checked performative (with its payload) tells the front-end:
    /// the client's open, links as they come and go, transactions, and a
    /// drain to hold back (its consumer's signal).
    fn note(
        &mut self,
        channel: u16,
        performative: Performative,
        payload: &[u8],
    ) -> std::io::Result<Option<Arc<DrainSignal>>> {
        match performative {
            Performative::Open(open) if !self.open_seen => {
                self.open_seen = true;
                let mut slot = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                *slot = Some(ClientOpen { container_id: open.container_id });
            }
            Performative::Transfer(transfer) => {
                if let Some(commit) = self.transactions.on_transfer(channel, &transfer, payload).map_err(invalid)? {
                    self.commits.expect(commit.channel, commit.discharge_id, commit.posted);
                }
                self.check_transfer((channel, transfer.handle.0), payload, transfer.more, transfer.aborted)?;
            }
            Performative::Attach(attach) => {
                let noted = self.receiving_links.len() + self.transactions.links_noted();
                if noted >= self.limits.links_max {
                    let limit = self.limits.links_max;
                    return Err(invalid(format!(
                        "over {limit} links attached at once (amqp.max_sessions × amqp.max_links_per_session)"
                    )));
                }
                if attach.role == Role::Receiver {
                    self.drains.expect(&attach.name);
                    self.receiving_links.insert((channel, attach.handle.0), attach.name.clone());
                }
                self.transactions.on_attach(channel, &attach);
            }
            Performative::Detach(detach) => {
                if let Some(name) = self.receiving_links.remove(&(channel, detach.handle.0)) {
                    self.drains.forget(&name);
                }
                self.transactions.on_detach(channel, &detach);
            }
            Performative::Disposition(disposition) => {
                self.transactions.on_disposition(channel, &disposition).map_err(invalid)?
            }
            Performative::Flow(flow) if flow.drain => {
                let name = flow.handle.and_then(|handle| self.receiving_links.get(&(channel, handle.0)));
                if let Some(signal) = name.and_then(|name| self.drains.of_link(name)) {
                    return Ok(Some(signal));
                }
            }
            _ => {}
        }
        Ok(None)
    }

    /// Adds a transfer frame's payload to its message; checks the message
    /// when it is whole.
    fn check_transfer(&mut self, link: (u16, u32), payload: &[u8], more: bool, aborted: bool) -> std::io::Result<()> {
        if aborted {
            self.partial.remove(&link);
            return Ok(());
        }
        let limit = self.limits.max_message_bytes;
        match (self.partial.get_mut(&link), more) {
            (None, false) => return check_message(payload),
            (Some(so_far), _) => so_far.extend_from_slice(payload),
            (None, true) => {
                // The first frames of a message: what they hold must not
                // declare more than a message may be.
                encoding::check_prefix(payload, limit).map_err(invalid)?;
                self.partial.insert(link, BytesMut::from(payload));
            }
        }
        let so_far = self.partial.get(&link).map_or(0, BytesMut::len);
        if so_far > limit {
            return Err(invalid(format!("a message of over {limit} bytes (its transfers so far: {so_far})")));
        }
        if !more {
            if let Some(message) = self.partial.remove(&link) {
                check_message(&message)?;
            }
        }
        Ok(())
    }
}

/// A whole message: sections, each a described value.
fn check_message(message: &[u8]) -> std::io::Result<()> {
    let mut position = 0;
    while position < message.len() {
        if !encoding::is_described(message, position) {
            return Err(invalid("a message section that is not a described value"));
        }
        position = encoding::check_value(message, position).map_err(invalid)?;
    }
    Ok(())
}

fn invalid(error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string())
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewound<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        while this.ready.is_empty() {
            if let Some((_, signal)) = &this.held_drain {
                if this.held_drain_deadline.is_none() {
                    signal.request();
                    this.held_drain_deadline = Some(Box::pin(tokio::time::sleep(this.limits.drain_hold_max)));
                }
                let overdue =
                    this.held_drain_deadline.as_mut().is_none_or(|sleep| sleep.as_mut().poll(context).is_ready());
                if !signal.poll_released(context) && !overdue {
                    return Poll::Pending;
                }
                this.held_drain_deadline = None;
                if let Some((frame, _)) = this.held_drain.take() {
                    this.ready.extend_from_slice(&frame);
                }
                if let Err(error) = this.take_frames() {
                    tracing::debug!(%error, "AMQP connection ended: a frame failed its check");
                    return Poll::Ready(Err(error));
                }
                continue;
            }
            let mut chunk = [0u8; READ_CHUNK_BYTES];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(context, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => return Poll::Ready(Ok(())), // end of stream
                Poll::Ready(Ok(())) => {
                    this.pending.extend_from_slice(read.filled());
                    if let Err(error) = this.take_frames() {
                        tracing::debug!(%error, "AMQP connection ended: a frame failed its check");
                        return Poll::Ready(Err(error));
                    }
                }
                other => return other,
            }
        }
        let taken = this.ready.len().min(out.remaining());
        out.put_slice(&this.ready[..taken]);
        this.ready.advance(taken);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> Rewound<S> {
    /// Writes what the library wrote, frame by frame, holding a frame that
    /// answers a commit still waiting for its messages, and every frame
    /// after it. Ready once everything is written.
    fn drain_outgoing(&mut self, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        loop {
            while self.cleared_bytes > 0 {
                let written = match Pin::new(&mut self.inner).poll_write(context, &self.outgoing[..self.cleared_bytes])
                {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(written)) => written,
                    Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                    Poll::Pending => return Poll::Pending,
                };
                self.outgoing.advance(written);
                self.cleared_bytes -= written;
            }
            if self.outgoing.is_empty() {
                return Poll::Ready(Ok(()));
            }
            match self.next_outgoing_frame(context) {
                Some(frame_bytes) => self.cleared_bytes = frame_bytes,
                None => return Poll::Pending,
            }
        }
    }

    /// The size of the next outgoing frame when it may go out now; `None`
    /// while it answers a commit still waiting (the write side is woken
    /// when that changes, or at `commit_wait_max`).
    fn next_outgoing_frame(&mut self, context: &mut Context<'_>) -> Option<usize> {
        let whole = self.outgoing.len();
        let Some(size) =
            self.outgoing.get(..4).map(|bytes| u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        else {
            return Some(whole); // A partial header: the library's to finish.
        };
        let size = (size as usize).clamp(1, whole);
        let Some(disposition) = disposition_of(&self.outgoing[..size]) else { return Some(size) };
        let channel = u16::from_be_bytes([self.outgoing[6], self.outgoing[7]]);
        if !self.commits.holds(channel, &disposition, context) {
            self.commit_deadline = None;
            return Some(size);
        }
        let limit = self.limits.commit_wait_max;
        let deadline = self.commit_deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if deadline.as_mut().poll(context).is_ready() {
            tracing::warn!(
                channel,
                "a commit answered before its messages were confirmed: amqp.commit_wait_ms_max passed"
            );
            self.commits.give_up(channel, &disposition);
            self.commit_deadline = None;
            return Some(size);
        }
        None
    }
}

/// The disposition an outgoing frame carries, if it is one.
fn disposition_of(frame: &[u8]) -> Option<fe2o3_amqp::types::performatives::Disposition> {
    let start = FRAME_HEADER_BYTES;
    if frame.get(4..6) != Some(&[2, 0]) || frame.get(start + 1..start + 3) != Some(&[0x53, DISPOSITION_CODE]) {
        return None;
    }
    match serde_amqp::from_slice::<Performative>(&frame[start..]) {
        Ok(Performative::Disposition(disposition)) => Some(disposition),
        _ => None,
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewound<S> {
    fn poll_write(mut self: Pin<&mut Self>, context: &mut Context<'_>, bytes: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if this.outgoing.is_empty() && !this.commits.any_waiting() {
            return Pin::new(&mut this.inner).poll_write(context, bytes);
        }
        // Taken whole: the library waits in its flush while a commit's
        // answer is held, so at most the frames it writes at once wait here.
        this.outgoing.extend_from_slice(bytes);
        if let Poll::Ready(Err(error)) = this.drain_outgoing(context) {
            return Poll::Ready(Err(error));
        }
        Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match this.drain_outgoing(context) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(context),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(context)
    }
}

#[cfg(test)]
mod tests {
    use bytes::BufMut;
    use fe2o3_amqp::types::performatives::Open;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const LIMITS: StreamLimits = StreamLimits {
        max_frame_bytes: 64 * 1024,
        max_message_bytes: 1024 * 1024,
        transaction_bytes_max: 1 << 20,
        drain_hold_max: std::time::Duration::from_secs(1),
        commit_wait_max: std::time::Duration::from_secs(1),
        links_max: 1024,
    };

    fn frame(performative: &[u8], payload: &[u8]) -> BytesMut {
        let mut encoded = BytesMut::new();
        encoded.put_u32((8 + performative.len() + payload.len()) as u32);
        encoded.put_slice(&[2, 0, 0, 0]);
        encoded.put_slice(performative);
        encoded.put_slice(payload);
        encoded
    }

    fn open() -> Open {
        Open {
            container_id: "ID:client-7".into(),
            hostname: None,
            max_frame_size: Default::default(),
            channel_max: Default::default(),
            idle_time_out: None,
            outgoing_locales: None,
            incoming_locales: None,
            offered_capabilities: None,
            desired_capabilities: None,
            properties: None,
        }
    }

    #[tokio::test]
    async fn the_header_is_replayed_and_the_open_noticed() {
        let encoded = frame(&serde_amqp::to_vec(&open()).expect("encodes"), &[]);
        let (mut client, server) = tokio::io::duplex(4096);
        let slot = Arc::new(Mutex::new(None));
        let mut rewound = Rewound::new(server, AMQP_HEADER.to_vec(), LIMITS, slot.clone());
        client.write_all(&encoded).await.expect("written");
        let mut read = vec![0u8; AMQP_HEADER.len() + encoded.len()];
        rewound.read_exact(&mut read).await.expect("read");
        assert_eq!(&read[..8], &AMQP_HEADER);
        assert_eq!(&read[8..], &encoded[..]);
        let noticed = slot.lock().expect("unpoisoned").clone();
        assert_eq!(noticed, Some(ClientOpen { container_id: "ID:client-7".into() }));
    }

    #[test]
    fn frames_that_arrive_in_pieces_are_checked_once_whole() {
        let encoded = frame(&serde_amqp::to_vec(&open()).expect("encodes"), &[]);
        let mut twice = encoded.clone();
        twice.extend_from_slice(&encoded);
        for split in 1..twice.len() {
            let mut stream = Rewound::new(tokio::io::empty(), AMQP_HEADER.to_vec(), LIMITS, Arc::default());
            stream.feed(&twice[..split]).expect("a piece");
            stream.feed(&twice[split..]).expect("the rest");
            assert_eq!(stream.take_ready().len(), AMQP_HEADER.len() + twice.len(), "split at {split}");
        }
    }

    #[tokio::test]
    async fn a_frame_too_small_or_a_length_beyond_its_bytes_ends_the_stream_with_an_error() {
        let cases: [(&[u8], &str); 3] = [
            (&[0, 0, 0, 4], "at least its 8-byte header"),
            (&[0, 0, 0, 15, 2, 0, 0, 0, 0xb1, 0xff, 0xff, 0x41, 0x0a, 0x46, 0], "not a described performative"),
            (&[0, 0, 0, 16, 2, 0, 0, 0, 0, 0x53, 0x13, 0xb1, 0xff, 0xff, 0x41, 0x0a], "runs past the end"),
        ];
        for (bytes, why) in cases {
            let (mut client, server) = tokio::io::duplex(4096);
            let mut rewound = Rewound::new(server, AMQP_HEADER.to_vec(), LIMITS, Arc::new(Mutex::new(None)));
            client.write_all(bytes).await.expect("written");
            drop(client);
            let mut read = Vec::new();
            let error = rewound.read_to_end(&mut read).await.expect_err("refused");
            assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
            assert!(error.to_string().contains(why), "{error}");
        }
    }

    fn performative(performative: Performative) -> BytesMut {
        frame(&serde_amqp::to_vec(&performative).expect("encodes"), &[])
    }

    fn consumer_attach(name: &str, handle: u32) -> BytesMut {
        use fe2o3_amqp::types::definitions::Handle;
        use fe2o3_amqp::types::messaging::Source;
        performative(Performative::Attach(fe2o3_amqp::types::performatives::Attach {
            name: name.into(),
            handle: Handle(handle),
            role: Role::Receiver,
            snd_settle_mode: Default::default(),
            rcv_settle_mode: Default::default(),
            source: Some(Box::new(Source::builder().address("jobs").build())),
            target: None,
            unsettled: None,
            incomplete_unsettled: false,
            initial_delivery_count: None,
            max_message_size: None,
            offered_capabilities: None,
            desired_capabilities: None,
            properties: None,
        }))
    }

    fn drain_flow(handle: u32) -> BytesMut {
        performative(Performative::Flow(fe2o3_amqp::types::performatives::Flow {
            next_incoming_id: Some(0),
            incoming_window: 2048,
            next_outgoing_id: 0,
            outgoing_window: 2048,
            handle: Some(fe2o3_amqp::types::definitions::Handle(handle)),
            delivery_count: Some(0),
            link_credit: Some(10),
            available: None,
            drain: true,
            echo: false,
            properties: None,
        }))
    }

    #[tokio::test]
    async fn a_drain_is_held_from_the_library_until_its_consumer_releases_it() {
        use futures_util::FutureExt;
        let drains = Arc::new(Drains::default());
        let (mut client, server) = tokio::io::duplex(4096);
        let mut rewound =
            Rewound::new(server, AMQP_HEADER.to_vec(), LIMITS, Arc::default()).with_drains(drains.clone());
        let (attach, drain) = (consumer_attach("consumer-1", 3), drain_flow(3));
        client.write_all(&[&attach[..], &drain[..]].concat()).await.expect("written");
        let mut read = vec![0u8; AMQP_HEADER.len() + attach.len()];
        rewound.read_exact(&mut read).await.expect("the header and the attach");
        let signal = drains.of_link("consumer-1").expect("the attach made its link's signal");
        let mut rest = vec![0u8; drain.len()];
        assert!(rewound.read(&mut rest).now_or_never().is_none(), "the drain is held");
        signal.requested().await; // Asked once the library has read all before the drain.
        signal.release();
        rewound.read_exact(&mut rest).await.expect("the drain, once released");
        assert_eq!(&rest[..], &drain[..]);
    }

    #[tokio::test]
    async fn a_commits_answer_is_written_only_once_its_messages_are_published() {
        use fe2o3_amqp::types::messaging::{Accepted, DeliveryState};
        use futures_util::FutureExt;
        let commits = Arc::new(Commits::default());
        let (mut client, server) = tokio::io::duplex(4096);
        let mut rewound =
            Rewound::new(server, AMQP_HEADER.to_vec(), LIMITS, Arc::default()).with_commits(commits.clone());
        commits.expect(0, 7, vec![("producer".into(), 3)]);
        let answer = performative(Performative::Disposition(fe2o3_amqp::types::performatives::Disposition {
            role: Role::Receiver,
            first: 7,
            last: None,
            settled: true,
            state: Some(DeliveryState::Accepted(Accepted {})),
            batchable: false,
        }));
        rewound.write_all(&answer).await.expect("taken");
        assert!(rewound.flush().now_or_never().is_none(), "held while the commit's message is unconfirmed");
        commits.published("producer", 3);
        rewound.flush().await.expect("written once it is");
        let mut read = vec![0u8; answer.len()];
        client.read_exact(&mut read).await.expect("the answer");
        assert_eq!(&read[..], &answer[..]);
    }

    #[test]
    fn links_past_the_bound_end_the_connection_with_an_error() {
        let limits = StreamLimits { links_max: 2, ..LIMITS };
        let mut stream = Rewound::new(tokio::io::empty(), AMQP_HEADER.to_vec(), limits, Arc::default());
        stream.feed(&consumer_attach("one", 1)).expect("within the bound");
        stream.feed(&consumer_attach("two", 2)).expect("within the bound");
        let refused = stream.feed(&consumer_attach("three", 3)).expect_err("past the bound");
        assert!(refused.to_string().contains("over 2 links"), "{refused}");
    }
}
