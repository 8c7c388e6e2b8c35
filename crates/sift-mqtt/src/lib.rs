//! Sift's MQTT 3.1.1 and 5.0 front-end.
//!
//! Like the HTTP and STOMP front-ends, it is a translator: each MQTT
//! session is a native session of the broker's (a local session: frames as
//! values, no encoding), so a PUBLISH is
//! routed, and a SUBSCRIBE (with an optional content filter in the user
//! property `sift-sql`) is matched and queued, by the broker itself, with
//! its policies and limits. [`codec`] is the seam with the
//! `mqtt-protocol-core` codec (which parses, encodes and keeps each
//! connection's protocol state), [`topic`] and [`message`] the
//! translation, [`retained`] the retained messages, `sessions` what
//! outlives a connection, `session` one connection and `server` the
//! listener. `docs/PROTOCOLS.md` documents the mapping.

pub mod codec;
pub mod config;
mod door;
pub mod journal;
pub mod message;
mod publish;
pub mod retained;
mod server;
mod session;
mod sessions;
mod subscriptions;
pub mod topic;

pub use config::{MqttConfig, DEFAULT_MQTT_LISTEN};
pub use server::{MqttCounters, MqttError, MqttFrontEnd};
