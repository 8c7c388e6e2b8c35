//! The frames of the broker link protocol and the fields they carry.

use bytes::Bytes;
use sift_core::Message;

use crate::FilterKind;

use super::LinkErrorCode;

/// Link frame type codes. They live in their own range, `0x40..=0x5F`, apart
/// from the client protocol's, so that a client that dials the link listener
/// by mistake (or a broker that dials a client listener) is told at once.
pub mod link_frame_type {
    /// Dialling broker → accepting broker: open the link.
    pub const LINK_HELLO: u8 = 0x40;
    /// Accepting broker → dialling broker: the link is open.
    pub const LINK_WELCOME: u8 = 0x41;
    /// Either way: are you there?
    pub const LINK_PING: u8 = 0x42;
    /// Either way: the answer to a ping.
    pub const LINK_PONG: u8 = 0x43;
    /// Either way: one broker's links and their costs (flooded).
    pub const LINK_STATE: u8 = 0x44;
    /// Either way: what time is it on your clock? (as the client `TIME`)
    pub const LINK_TIME: u8 = 0x45;
    /// Either way: the answer to `LINK_TIME` (as the client `TIME_REPLY`).
    pub const LINK_TIME_REPLY: u8 = 0x46;
    /// Either way: changes to one broker's subscription interest (flooded).
    pub const INTEREST: u8 = 0x48;
    /// Either way: a full copy of one broker's interest follows.
    pub const INTEREST_SYNC_BEGIN: u8 = 0x49;
    /// Either way: the full copy announced by `INTEREST_SYNC_BEGIN` is complete.
    pub const INTEREST_SYNC_END: u8 = 0x4A;
    /// Either way: a message on its way to interested brokers.
    pub const FORWARD: u8 = 0x50;
    /// Either way: forwarded messages taken over, cumulatively.
    pub const LINK_ACK: u8 = 0x51;
    /// Towards a message's origin: how its copies fared at one broker.
    pub const DELIVERY_REPORT: u8 = 0x52;
    /// Towards one broker: a call of a replicated stream's group, or its answer.
    pub const RAFT: u8 = 0x53;
    /// Either way: something was refused.
    pub const LINK_ERROR: u8 = 0x5F;
}

/// `LINK_HELLO`: the dialling broker's first frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkHello {
    /// Lowest link protocol version the dialler speaks.
    pub version_min: u16,
    /// Highest link protocol version the dialler speaks.
    pub version_max: u16,
    /// The cluster the dialler belongs to; brokers link only within one.
    pub cluster: String,
    /// The dialler's broker name, unique within the cluster.
    pub broker: String,
    /// The cost the dialler gives this link (for shortest paths).
    pub link_cost: u32,
}

/// `LINK_WELCOME`: the accepting broker's answer to `LINK_HELLO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkWelcome {
    /// The link protocol version both sides now speak.
    pub version: u16,
    /// The acceptor's cluster (equal to the dialler's, or it would have refused).
    pub cluster: String,
    /// The acceptor's broker name.
    pub broker: String,
    /// The cost the acceptor gives this link.
    pub link_cost: u32,
}

/// One up link of a broker, as reported in `LINK_STATE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkStateEntry {
    /// The broker at the other end.
    pub neighbour: String,
    /// The link's cost.
    pub cost: u32,
}

/// `LINK_STATE`: the links of `origin`, flooded through the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    /// The broker whose links these are.
    pub origin: String,
    /// `origin`'s link-state sequence; a higher one replaces a lower one.
    pub sequence: u64,
    /// Every link of `origin` that is up.
    pub links: Vec<LinkStateEntry>,
}

/// An entry added to a broker's interest: a subscription (or one standing
/// for several that it covers) that wants messages forwarded to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterestAdd {
    /// The origin's identifier for this entry, used to remove it.
    pub key: u64,
    /// Topic filter (`a.*.c`, `a.>`).
    pub topic_filter: String,
    /// Content filter language (the codes of `SUBSCRIBE`).
    pub filter_kind: FilterKind,
    /// Content filter text; empty with [`FilterKind::None`].
    pub filter: String,
    /// Queue group; empty for none.
    pub queue_group: String,
}

/// Wire tags of the changes in an `INTEREST` frame.
pub mod interest_change_tag {
    /// An entry is added.
    pub const ADD: u8 = 0x01;
    /// An entry is removed.
    pub const REMOVE: u8 = 0x02;
}

/// One change to a broker's interest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterestChange {
    /// See [`InterestAdd`].
    Add(InterestAdd),
    /// The entry with this key is gone.
    Remove {
        /// The key it was added with.
        key: u64,
    },
}

/// `INTEREST`: changes to `origin`'s interest, applied in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interest {
    /// The broker whose interest changes.
    pub origin: String,
    /// `origin`'s interest sequence: one more than the previous increment,
    /// or the bracket's sequence inside a full resync.
    pub sequence: u64,
    /// The changes, in order.
    pub changes: Vec<InterestChange>,
}

/// Flags of a `FORWARD`.
pub mod forward_flags {
    /// The receiver must acknowledge this frame with `LINK_ACK`; the sender
    /// keeps it for retransmission until then.
    pub const NEEDS_LINK_ACK: u8 = 0x01;
    /// Queue-group assignments follow the flags. The encoder sets this bit
    /// from [`super::Forward::groups`] and the decoder clears it again, so
    /// that `Forward::flags` never carries it.
    pub const GROUPS: u8 = 0x02;
    /// The origin awaits a `DELIVERY_REPORT` from every broker that receives
    /// the message (the publisher asked for await=delivered); the frame
    /// carries how long the origin waits.
    pub const AWAITS_REPORT: u8 = 0x04;
    /// Target brokers follow the queue groups: the message is re-routed to
    /// these brokers along each broker's own shortest paths, not down the
    /// origin's tree. Set from [`super::Forward::targets`] like `GROUPS`.
    pub const TARGETS: u8 = 0x08;
}

/// One queue group of a forwarded message and the broker chosen to serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupAssignment {
    /// The queue group.
    pub group: String,
    /// The broker that delivers the message to one member of the group.
    pub broker: String,
}

/// `FORWARD`: a message on its way to interested brokers.
#[derive(Debug, Clone, PartialEq)]
pub struct Forward {
    /// The broker where the message was published.
    pub origin: String,
    /// The origin's number for the message, which with `origin` identifies
    /// it in the whole cluster (for dropping duplicates).
    pub origin_sequence: u64,
    /// The sender's number for this frame on this link, acknowledged by
    /// `LINK_ACK`.
    pub link_sequence: u64,
    /// [`forward_flags`], without [`forward_flags::GROUPS`] and
    /// [`forward_flags::TARGETS`].
    pub flags: u8,
    /// Queue groups the origin assigned to brokers other than itself.
    pub groups: Vec<GroupAssignment>,
    /// When not empty, the brokers a re-routed message still has to reach.
    pub targets: Vec<String>,
    /// With `AWAITS_REPORT`, how long the origin waits for reports, in
    /// milliseconds; 0 otherwise (and not on the wire).
    pub await_timeout_ms: u32,
    /// The message, with its hop count.
    pub message: Box<Message>,
}

/// `DELIVERY_REPORT`: how the copies of one forwarded message fared at one
/// broker, sent towards the message's origin when the origin awaits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryReportFrame {
    /// The message's origin, where the report goes.
    pub origin: String,
    /// The origin's number for the message.
    pub origin_sequence: u64,
    /// The broker reporting.
    pub reporter: String,
    /// Subscriptions of the reporter the message matched.
    pub matched: u32,
    /// Of those, how many acknowledged it.
    pub acked: u32,
    /// Labels of those that did not, each suffixed with `@reporter`.
    pub pending: Vec<String>,
}

/// `RAFT`: a call between the replicas of a replicated stream (or a
/// publish forwarded to the stream's leader), or its answer, routed hop by
/// hop to the broker named `to` as a delivery report is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftFrame {
    /// The broker it goes to.
    pub to: String,
    /// The broker it comes from, where the answer goes.
    pub from: String,
    /// The caller's number for the call, echoed by the answer.
    pub call_id: u64,
    /// The replicated stream.
    pub stream: String,
    /// What is called (see `docs/PROTOCOL.md` §10).
    pub kind: u8,
    /// [`raft_flags`].
    pub flags: u8,
    /// The call's or the answer's bytes; for a failed answer, why (UTF-8).
    pub body: Bytes,
}

/// Bits of [`RaftFrame::flags`].
pub mod raft_flags {
    /// The frame answers a call.
    pub const REPLY: u8 = 0x01;
    /// The answer says the call failed; its body says why.
    pub const FAILED: u8 = 0x02;
}

/// `LINK_ERROR`: a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkErrorFrame {
    /// What went wrong.
    pub code: LinkErrorCode,
    /// True when the sender closes the link after this frame.
    pub fatal: bool,
    /// A human-readable explanation.
    pub message: String,
}

/// One frame of the broker link protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkFrame {
    /// See [`LinkHello`].
    Hello(LinkHello),
    /// See [`LinkWelcome`].
    Welcome(LinkWelcome),
    /// Liveness probe carrying a nonce that the `LINK_PONG` echoes.
    Ping {
        /// Echoed in the answer.
        nonce: u64,
    },
    /// Answer to `LINK_PING`.
    Pong {
        /// The ping's nonce.
        nonce: u64,
    },
    /// A clock exchange request, as the client protocol's `TIME`.
    Time {
        /// Echoed in the reply.
        request_id: u64,
        /// The sender's clock when it sent the request.
        origin_ns: u64,
    },
    /// The answer to `LINK_TIME`.
    TimeReply(crate::TimeReply),
    /// See [`LinkState`].
    State(LinkState),
    /// See [`Interest`].
    Interest(Interest),
    /// A full copy of `origin`'s interest at `sequence` follows, as
    /// `INTEREST` frames of additions, up to `INTEREST_SYNC_END`.
    InterestSyncBegin {
        /// The broker whose interest is copied.
        origin: String,
        /// The interest sequence the copy is as of.
        sequence: u64,
    },
    /// The copy opened by `INTEREST_SYNC_BEGIN` is complete.
    InterestSyncEnd {
        /// The broker whose interest was copied.
        origin: String,
        /// The interest sequence the copy is as of.
        sequence: u64,
    },
    /// See [`Forward`].
    Forward(Forward),
    /// Every `FORWARD` up to this link sequence has been taken over.
    Ack {
        /// The highest link sequence covered.
        up_to_link_sequence: u64,
    },
    /// See [`DeliveryReportFrame`].
    DeliveryReport(DeliveryReportFrame),
    /// See [`RaftFrame`].
    Raft(RaftFrame),
    /// See [`LinkErrorFrame`].
    Error(LinkErrorFrame),
}

impl LinkFrame {
    /// The frame's type code.
    pub fn type_code(&self) -> u8 {
        use link_frame_type::*;
        match self {
            LinkFrame::Hello(_) => LINK_HELLO,
            LinkFrame::Welcome(_) => LINK_WELCOME,
            LinkFrame::Ping { .. } => LINK_PING,
            LinkFrame::Pong { .. } => LINK_PONG,
            LinkFrame::Time { .. } => LINK_TIME,
            LinkFrame::TimeReply(_) => LINK_TIME_REPLY,
            LinkFrame::State(_) => LINK_STATE,
            LinkFrame::Interest(_) => INTEREST,
            LinkFrame::InterestSyncBegin { .. } => INTEREST_SYNC_BEGIN,
            LinkFrame::InterestSyncEnd { .. } => INTEREST_SYNC_END,
            LinkFrame::Forward(_) => FORWARD,
            LinkFrame::Ack { .. } => LINK_ACK,
            LinkFrame::DeliveryReport(_) => DELIVERY_REPORT,
            LinkFrame::Raft(_) => RAFT,
            LinkFrame::Error(_) => LINK_ERROR,
        }
    }

    /// The frame's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        link_frame_name(self.type_code())
    }
}

/// The name of a link frame type code, or `"UNKNOWN"`.
pub fn link_frame_name(code: u8) -> &'static str {
    use link_frame_type::*;
    match code {
        LINK_HELLO => "LINK_HELLO",
        LINK_WELCOME => "LINK_WELCOME",
        LINK_PING => "LINK_PING",
        LINK_PONG => "LINK_PONG",
        LINK_TIME => "LINK_TIME",
        LINK_TIME_REPLY => "LINK_TIME_REPLY",
        LINK_STATE => "LINK_STATE",
        INTEREST => "INTEREST",
        INTEREST_SYNC_BEGIN => "INTEREST_SYNC_BEGIN",
        INTEREST_SYNC_END => "INTEREST_SYNC_END",
        FORWARD => "FORWARD",
        LINK_ACK => "LINK_ACK",
        DELIVERY_REPORT => "DELIVERY_REPORT",
        RAFT => "RAFT",
        LINK_ERROR => "LINK_ERROR",
        _ => "UNKNOWN",
    }
}
