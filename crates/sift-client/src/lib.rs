//! Async Rust client for Sift's native protocol.
//!
//! ```no_run
//! # async fn example() -> Result<(), sift_client::ClientError> {
//! use sift_client::{Client, ClientOptions, SubscribeOptions};
//! use sift_core::{Message, TopicName};
//!
//! let client = Client::connect("127.0.0.1:7400", ClientOptions::default()).await?;
//! let mut subscription = client.subscribe(SubscribeOptions::new("jbi.>")).await?;
//! let topic = TopicName::new("jbi.basic").expect("valid topic");
//! let confirm = client.publish_confirmed(Message::new(topic, "hello"), Default::default()).await?;
//! println!("matched {}", confirm.matched);
//! if let Some(delivery) = subscription.next().await {
//!     println!("{:?}", delivery.message.payload);
//! }
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! One background task per client keeps the connection: it reads frames and
//! dispatches them (confirms to their waiting publisher, deliveries to their
//! subscription's channel), and a writer task sends whatever the API calls
//! appended to a shared buffer, so that many publishes share one system call.
//! When the connection drops, the client reconnects with backoff, opens its
//! subscriptions again under the same ids and resends reliable publishes that
//! were not confirmed (at-least-once).

mod admin;
mod connection;
pub mod cpu;
pub mod error;
pub mod json;
mod liveness;
pub mod multicast;
mod options;
mod ordering;
mod outgoing;
mod query;
mod subscription;
mod tds;
mod time;
pub mod transfer;
mod transport;

pub use admin::{DeclaredQueues, DECLARED_QUEUES_REMEMBERED_MAX};
pub use connection::Client;
pub use error::ClientError;
pub use options::{
    durable_name_part, queue_durable_name, AckPolicy, ClientOptions, Credentials, PublishOptions, SubscribeOptions,
    CLOCK_SYNC_INTERVAL_DEFAULT, PINGS_OUTSTANDING_MAX_DEFAULT, PING_INTERVAL_DEFAULT,
};
pub use ordering::{OrderingBuffer, OrderingConfig, OrderingCounters, OrderingError, ORDERING_ENTRIES_MAX};
pub use query::{QueryEvent, QueryOptions, QueryResults};
pub use sift_core::ClockEstimate;
pub use sift_proto::{AdminQuery, Confirm, ConfirmStatus, FilterKind, QueuePolicy};
pub use sift_proto::{GapReason, ManageOp, StartPosition, StreamSource};
/// TLS for clients (the `sift-tls` crate): `ClientTls::load` reads `--tls-ca` and a client certificate.
pub use sift_tls::{ClientTls, ClientTlsFiles};
pub use subscription::{Delivery, Gap, Subscription, SubscriptionEvent};
pub use tds::{Release, TdsConfig, TdsCounters, TimeDifferential, TDS_ENTRIES_DEFAULT};
pub use time::{system_now_ns, ClockSource, LocalTime, CLOCK_SYNC_BURST};
pub use transport::{Endpoint, LocalLink, LocalOpener, PipeOpener};

/// Sleeps until `deadline`, or for ever without one: a `select!` branch
/// for a timer that may not be set.
pub async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
