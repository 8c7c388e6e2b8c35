//! Sift's STOMP 1.2 front-end (1.0 and 1.1 clients too).
//!
//! Like the HTTP front-end, it is a translator: each STOMP connection is a
//! native session of the broker's (a local session: frames as values, no
//! encoding), so SEND, SUBSCRIBE (with a JMS
//! `selector`, matched by the same index as a native SQL subscription),
//! ACK and NACK get the broker's routing, policies, limits and redelivery
//! unchanged. [`frame`] is the sans-IO codec, [`mapping`] the translation
//! of destinations, headers and messages, `session` one connection and
//! `server` the listener. `docs/PROTOCOLS.md` documents the mapping.

pub mod config;
mod door;
pub mod frame;
pub mod mapping;
mod server;
mod session;

pub use config::{StompConfig, DEFAULT_STOMP_LISTEN};
pub use server::{StompCounters, StompError, StompFrontEnd};
