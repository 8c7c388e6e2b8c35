//! The Sift routing core: the message model, topic names and filters, and the
//! subject trie that maps a topic to the subscriptions that want it.
//!
//! This crate does no I/O on purpose. Everything here is a pure data structure
//! or function, so it is tested alone (unit and property tests) and reused
//! unchanged by the broker, the client, the benchmarks and, later, the broker
//! network, which evaluates remote interest with the same index.

pub mod clock;
pub mod histogram;
pub mod message;
pub mod topic;
pub mod trie;
pub mod workload;

pub use clock::{system_now_ns, Clock, ClockEstimate, ClockFilter, ClockSample, ManualClock, TimeExchange};
pub use histogram::{HistogramSnapshot, LatencyHistogram};
pub use message::{
    DeliveryMode, Message, MessageError, Priority, Value, DELIVERY_TIME_PROPERTY, GROUP_PROPERTY, MSG_ID_PROPERTY,
};
pub use topic::{TopicError, TopicFilter, TopicName};
pub use trie::{MatchCache, MatchResult, SubjectTrie};
