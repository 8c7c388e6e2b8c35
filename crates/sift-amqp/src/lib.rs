//! The AMQP 1.0 front-end: JMS applications on Apache Qpid JMS (and any
//! AMQP 1.0 client) reach Sift unchanged.
//!
//! Each AMQP connection is carried on one native local session of the
//! broker: producers' messages are published through it, consumers are
//! its subscriptions, and dispositions are its acknowledgements, so that
//! matching, queues, limits and permissions are the broker's own. This
//! crate translates: SASL to the session's sign-in ([`sasl`]), link
//! attaches to publishers and subscriptions, and messages between the AMQP
//! sections and the JMS mapping ([`message_in`], [`message_out`]).

pub mod commits;
pub mod condition;
pub mod config;
mod connection;
pub mod consumer;
pub mod drain;
pub mod encoding;
pub mod jms;
pub mod message_in;
pub mod message_out;
pub mod node;
mod producer;
pub mod sasl;
pub mod server;
mod session;
pub mod stream;
pub mod transactions;
pub mod wire;

pub use config::AmqpConfig;
pub use server::{AmqpCounters, AmqpError, AmqpFrontEnd};
