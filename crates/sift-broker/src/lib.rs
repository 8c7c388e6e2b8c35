//! The Sift broker.
//!
//! The path of a message: a connection's reader ([`connection`]) decodes a
//! `PUBLISH`, stamps it, looks its topic up in the [`router`] (through a
//! per-connection match cache), and pushes one shared copy into the
//! [`outbox`] of each matching subscriber ([`delivery`]), where the
//! subscription's bounded queue applies its policy. Each connection's
//! [`writer`] drains its outbox to the socket in batches. Reliable deliveries
//! wait in the outbox until acknowledged and are requeued when late; a
//! [`report`] tells an await=delivered publisher when all acks are in.

pub mod access;
mod auth_config;
pub mod broker_tls;
pub mod budget;
pub mod config;
pub mod conn;
pub mod connection;
pub mod delivery;
pub mod door;
pub mod door_writer;
pub mod front_end;
pub mod incoming;
pub mod link;
pub mod local;
mod network_config;
pub mod outbox;
mod pipeline;
pub mod publish;
pub mod replication;
pub mod report;
pub mod router;
pub mod scheduler;
pub mod server;
pub mod session;
pub mod shared;
pub mod stats;
pub mod store;
pub mod subscription;
pub mod topology_file;
pub mod usage;
pub mod writer;

/// TLS for the doors and links (the `sift-tls` crate), for front-end crates.
pub use sift_tls as tls;

pub use config::{Config, ConfigError, StorageConfig, StreamDefinition};
pub use link::LinkInfo;
pub use server::{BrokerError, DialHandle, InProcessConnector, InProcessError, RunningBroker};
pub use stats::StatsSnapshot;
