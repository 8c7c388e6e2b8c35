//! A link that is up: its reader loop (pings, liveness, link states,
//! errors) and its writer task, until the link goes down.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use sift_core::{ClockFilter, Message, TimeExchange};
use sift_net::BrokerName;
use sift_proto::link::{forward_flags, LinkErrorCode, LinkErrorFrame, LinkFrame};
use sift_proto::{DecodeError, TimeReply};
use sift_tls::PeerWriteHalf;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use crate::shared::BrokerShared;
use crate::stats::bump;

use super::bracket::BracketReader;
use super::congestion::LinkCongestion;
use super::deliver::RemoteDelivery;
use super::error::LinkError;
use super::frames::{encode, error_frame};
use super::handshake::{Established, LinkStream};
use super::network::CloseReason;

/// Intervals of silence after which a link is considered down (§10.9).
pub const SILENT_INTERVALS: u32 = 3;

/// Most queued frames one write system call gathers.
const WRITE_BATCH_FRAMES: usize = 256;

/// How long a closing link may take to flush its last frames.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Runs an established link until it goes down, then deregisters it (which
/// announces this broker's new link state to the remaining links).
pub(crate) async fn run(link: Established, shared: Arc<BrokerShared>) {
    let Established { peer, stream, registered } = link;
    let LinkStream { mut reader, writer, mut buf, mut decoder } = stream;
    let congestion = shared.links.congestion();
    let capacity = shared.config.network.link_send_queue_frames;
    let writer_task = tokio::spawn(write_loop(writer, registered.receiver, congestion, capacity));
    tracing::info!(neighbour = %peer, "link up");
    let mut session = Session {
        peer,
        sender: registered.sender,
        shared: shared.clone(),
        nonce: 0,
        link_id: registered.id,
        clock: ClockFilter::new(),
        bracket: BracketReader::default(),
        delivery: RemoteDelivery::new(&shared),
        ack_due: None,
    };
    let mut close = registered.close;
    let outcome = session.read_loop(&mut reader, &mut buf, &mut decoder, &mut close).await;
    if let Err(error) = &outcome {
        match error {
            LinkError::ShuttingDown => tracing::debug!(neighbour = %session.peer, "link closed for shutdown"),
            _ if error.is_already_linked() => tracing::debug!(neighbour = %session.peer, %error, "link closed"),
            _ => tracing::info!(neighbour = %session.peer, %error, "link down"),
        }
        if let Some(reply) = error.reply() {
            session.send_frame(&reply);
        }
    }
    shared.links.deregister(&session.peer, registered.id, &shared.stats);
    // Calls on their way to the neighbour, or answers on their way back,
    // are lost with the link: their callers try again now rather than
    // when their waits run out.
    shared.raft_calls.fail_calls_to(&session.peer);
    // The writer ends once every sender is gone: the registry's (removed
    // above) and the session's (dropped here), after flushing what is queued.
    drop(session);
    let _ = tokio::time::timeout(CLOSE_GRACE, writer_task).await;
}

/// The reader side of one link.
struct Session {
    peer: BrokerName,
    sender: mpsc::Sender<Bytes>,
    shared: Arc<BrokerShared>,
    nonce: u64,
    /// This link's id in the registry (tells it from a later link to the same peer).
    link_id: u64,
    /// The peer's clock, sampled by a `LINK_TIME` exchange on every ping
    /// interval; forwarded messages' timestamps are carried into this
    /// broker's clock with it.
    clock: ClockFilter,
    /// The resync bracket being received; one cut off by the link going
    /// down is dropped with the session (§10.6).
    bracket: BracketReader,
    /// Local delivery of forwarded messages.
    delivery: RemoteDelivery,
    /// The link sequence of the last `FORWARD` read that needs a `LINK_ACK`,
    /// acknowledged (with everything before it) once the read is handled.
    ack_due: Option<u64>,
}

impl Session {
    /// Reads and handles frames, pings on every interval and ends the link
    /// when it is silent, closed, told to close, or the broker shuts down.
    async fn read_loop(
        &mut self,
        reader: &mut sift_tls::PeerReadHalf,
        buf: &mut BytesMut,
        decoder: &mut sift_proto::link::LinkDecoder,
        close: &mut tokio::sync::watch::Receiver<CloseReason>,
    ) -> Result<(), LinkError> {
        let interval = Duration::from_millis(self.shared.config.network.link_ping_interval_ms);
        let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut shutdown = self.shared.shutdown_watch();
        let mut last_heard = Instant::now();
        // Silence is counted in ticks with nothing read between them, not
        // only in elapsed time: a broker whose own runtime was starved
        // wakes to one late tick (missed ticks are delayed, not replayed)
        // and reads what its peer sent meanwhile before it can count three.
        let mut silent_ticks = 0u32;
        // The first clock sample, so that forwarded timestamps can be
        // carried over from the start instead of after one interval.
        self.send_frame(&LinkFrame::Time { request_id: self.nonce, origin_ns: sift_core::system_now_ns() });
        loop {
            if self.shared.is_shutting_down() {
                return Err(LinkError::ShuttingDown);
            }
            while let Some((frame, frame_bytes)) = self.next_frame(decoder, buf)? {
                last_heard = Instant::now();
                self.handle(frame, frame_bytes)?;
            }
            if let Some(up_to_link_sequence) = self.ack_due.take() {
                // Everything read so far is queued locally and on the
                // outgoing links: taken over (§10.8).
                bump(&self.shared.stats.link_acks_sent);
                self.send_frame(&LinkFrame::Ack { up_to_link_sequence });
            }
            // Forwarding into a congested link waits here, so that the
            // peer meets TCP flow control instead of drops further on.
            self.shared.links.wait_while_congested(&self.shared.stats).await;
            // Read up to a whole read buffer, not just the rest of the frame
            // the decoder is waiting for, and no more: what one read holds
            // must fit the link queues' headroom (see `congestion`).
            let read_size = self.shared.config.delivery.read_buffer_bytes;
            buf.reserve(read_size);
            let mut limited = (&mut *buf).limit(read_size);
            tokio::select! {
                read = reader.read_buf(&mut limited) => {
                    if read? == 0 {
                        return Err(LinkError::Closed);
                    }
                    silent_ticks = 0;
                    last_heard = Instant::now();
                }
                _ = ticker.tick() => {
                    silent_ticks += 1;
                    let silent = last_heard.elapsed();
                    if silent_ticks >= SILENT_INTERVALS && silent >= interval * SILENT_INTERVALS {
                        bump(&self.shared.stats.link_errors);
                        return Err(LinkError::Silent(silent));
                    }
                    self.nonce += 1;
                    self.send_frame(&LinkFrame::Ping { nonce: self.nonce });
                    self.send_frame(&LinkFrame::Time { request_id: self.nonce, origin_ns: sift_core::system_now_ns() });
                }
                _ = close.changed() => {
                    return Err(match *close.borrow() {
                        CloseReason::Replaced => LinkError::Replaced,
                        _ => LinkError::Overflow,
                    })
                }
                _ = shutdown.changed() => return Err(LinkError::ShuttingDown),
            }
        }
    }

    /// The next whole frame. A frame that is consumed but does not parse is
    /// answered with a non-fatal `LINK_ERROR` and skipped (§10.1); a broken
    /// length prefix ends the link. Comes with the bytes the frame took.
    fn next_frame(
        &self,
        decoder: &mut sift_proto::link::LinkDecoder,
        buf: &mut BytesMut,
    ) -> Result<Option<(LinkFrame, usize)>, LinkError> {
        loop {
            let before = buf.len();
            match decoder.decode(buf) {
                Ok(frame) => return Ok(frame.map(|frame| (frame, before - buf.len()))),
                Err(error) if error.is_fatal() => return Err(error.into()),
                Err(error) => self.report_malformed(&error),
            }
        }
    }

    fn report_malformed(&self, error: &DecodeError) {
        bump(&self.shared.stats.link_errors);
        tracing::debug!(neighbour = %self.peer, %error, "link frame skipped");
        self.send_frame(&error_frame(error.code().into(), false, error.to_string()));
    }

    /// Acts on one frame received after the handshake.
    fn handle(&mut self, frame: LinkFrame, frame_bytes: usize) -> Result<(), LinkError> {
        match frame {
            LinkFrame::Ping { nonce } => self.send_frame(&LinkFrame::Pong { nonce }),
            LinkFrame::Pong { .. } => {}
            LinkFrame::Time { request_id, origin_ns } => {
                let receive_ns = sift_core::system_now_ns();
                let reply = TimeReply { request_id, origin_ns, receive_ns, transmit_ns: sift_core::system_now_ns() };
                self.send_frame(&LinkFrame::TimeReply(reply));
            }
            LinkFrame::TimeReply(reply) => {
                let exchange = TimeExchange {
                    origin_ns: reply.origin_ns,
                    receive_ns: reply.receive_ns,
                    transmit_ns: reply.transmit_ns,
                    arrival_ns: sift_core::system_now_ns(),
                };
                self.clock.add_exchange(exchange);
                if let Some(estimate) = self.clock.estimate(exchange.arrival_ns) {
                    self.shared.links.set_clock(&self.peer, self.link_id, estimate);
                }
            }
            LinkFrame::State(state) => {
                bump(&self.shared.stats.link_states_received);
                self.shared.links.lock().apply_received(state, &self.peer, &self.shared.stats);
            }
            LinkFrame::Interest(_) | LinkFrame::InterestSyncBegin { .. } | LinkFrame::InterestSyncEnd { .. } => {
                let handled = self.interest(frame);
                if handled.is_err() {
                    bump(&self.shared.stats.link_errors);
                }
                return handled;
            }
            LinkFrame::Error(refusal) => return self.peer_error(refusal),
            LinkFrame::Hello(_) | LinkFrame::Welcome(_) => {
                bump(&self.shared.stats.link_errors);
                let got = if matches!(frame, LinkFrame::Hello(_)) { "LINK_HELLO" } else { "LINK_WELCOME" };
                return Err(LinkError::Unexpected { expected: "no handshake frame after the handshake", got });
            }
            LinkFrame::Forward(mut forward) => {
                self.carry_time(&mut forward.message);
                let shared = &self.shared;
                if forward.flags & forward_flags::NEEDS_LINK_ACK != 0 {
                    self.ack_due = Some(forward.link_sequence);
                }
                if let Some(travelling) = shared.links.receive_forward(forward, &self.peer, frame_bytes, &shared.stats)
                {
                    self.delivery.deliver(shared, &travelling);
                }
            }
            LinkFrame::Ack { up_to_link_sequence } => {
                bump(&self.shared.stats.link_acks_received);
                self.shared.links.acked(&self.peer, up_to_link_sequence, &self.shared.stats);
            }
            LinkFrame::DeliveryReport(report) => self.shared.links.receive_report(report, &self.shared.stats),
            LinkFrame::Raft(frame) => crate::replication::serve::receive(&self.shared, frame),
        }
        Ok(())
    }

    /// Carries a forwarded message's timestamp from the peer's clock into
    /// this broker's, widening its error bound by the offset's. Before the
    /// first clock sample it is carried unchanged.
    fn carry_time(&self, message: &mut Message) {
        let Some(estimate) = self.clock.estimate(sift_core::system_now_ns()) else { return };
        message.timestamp_ns = estimate.to_local(message.timestamp_ns);
        let error_ns = u64::from(message.time_error_ns).saturating_add(estimate.error_ns);
        message.time_error_ns = u32::try_from(error_ns).unwrap_or(u32::MAX);
    }

    /// Acts on an interest frame (§10.6): inside an open bracket it is
    /// collected, otherwise it is an increment; a completed bracket is
    /// applied. Gaps and broken brackets end the link.
    fn interest(&mut self, frame: LinkFrame) -> Result<(), LinkError> {
        let stats = &self.shared.stats;
        match frame {
            LinkFrame::Interest(interest) => {
                bump(&stats.interest_updates_received);
                if self.bracket.is_open() {
                    return self.bracket.interest(interest);
                }
                self.shared.links.lock().apply_interest(interest, &self.peer, stats)
            }
            LinkFrame::InterestSyncBegin { origin, sequence } => self.bracket.begin(origin, sequence),
            LinkFrame::InterestSyncEnd { origin, sequence } => {
                let bracket = self.bracket.end(&origin, sequence)?;
                self.shared.links.lock().apply_bracket(bracket, &self.peer, stats);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Logs a `LINK_ERROR` from the peer (§10.9); a fatal one ends the link.
    /// `already_linked` (a link that lost the tie-break of two links,
    /// §10.4) and `shutting_down` are routine ends, not errors.
    fn peer_error(&self, refusal: LinkErrorFrame) -> Result<(), LinkError> {
        if refusal.code == LinkErrorCode::AlreadyLinked {
            tracing::debug!(neighbour = %self.peer, "link replaced by the other link: {}", refusal.message);
        } else if refusal.code == LinkErrorCode::Common(sift_proto::ErrorCode::ShuttingDown) {
            tracing::debug!(neighbour = %self.peer, "the neighbour is shutting down");
        } else {
            bump(&self.shared.stats.link_errors);
            tracing::warn!(neighbour = %self.peer, code = %refusal.code, fatal = refusal.fatal, "LINK_ERROR: {}", refusal.message);
        }
        if refusal.fatal {
            return Err(LinkError::Refused { code: refusal.code, message: refusal.message });
        }
        Ok(())
    }

    /// Queues a frame of this session's own (ping, pong, error) on this
    /// link. When the queue is full the frame is dropped: the flooding path
    /// closes a link that does not keep up, and a lost ping only delays
    /// liveness detection by an interval.
    fn send_frame(&self, frame: &LinkFrame) {
        if let Some(bytes) = encode(frame) {
            let _ = self.sender.try_send(bytes);
        }
    }
}

/// Writes queued frames, a batch per system call, until every sender is
/// gone; then closes the socket's write side.
async fn write_loop(
    mut writer: PeerWriteHalf,
    mut receiver: mpsc::Receiver<Bytes>,
    congestion: Arc<LinkCongestion>,
    capacity: usize,
) {
    let mut batch: Vec<Bytes> = Vec::with_capacity(WRITE_BATCH_FRAMES);
    let mut out = BytesMut::new();
    while receiver.recv_many(&mut batch, WRITE_BATCH_FRAMES).await > 0 {
        out.clear();
        for bytes in batch.drain(..) {
            out.extend_from_slice(&bytes);
        }
        if writer.write_all(&out).await.is_err() {
            return;
        }
        congestion.after_write(receiver.len(), capacity);
    }
    let _ = writer.shutdown().await;
}
