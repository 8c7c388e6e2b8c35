//! Sift's HTTP front-end: JSON publishing, subscriptions delivered as
//! server-sent events, over WebSocket or to a callback URL, the admin
//! reports, and Prometheus metrics.
//!
//! It is a translator, not a second broker. Every request is carried by a
//! local session of the broker's ([`sift_broker::InProcessConnector::local_opener`]:
//! frames as values, no encoding): a publish is a `PUBLISH` on one of
//! a few shared publishing sessions, a subscription is a session of its
//! own, and the broker matches, queues, acknowledges and applies its limits
//! exactly as for a socket client. What this crate adds is HTTP: parsing
//! and answering requests, turning deliveries into events, and the limits
//! of an HTTP server (body and header sizes, idle and slow-client timeouts).
//!
//! `docs/HTTP.md` specifies every endpoint.

mod admin;
mod callback;
mod caller;
pub mod config;
mod counters;
mod dashboard;
mod error;
mod metrics;
mod publish;
mod server;
mod spec;
mod sse;
mod state;
mod streams;
mod subscriptions;
mod ws;

pub use config::{HttpConfig, DEFAULT_HTTP_LISTEN};
pub use counters::HttpCounters;
pub use server::{HttpError, HttpFrontEnd, PLAIN_TEXT_REFUSAL};
