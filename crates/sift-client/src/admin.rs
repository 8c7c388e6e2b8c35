//! `Client::admin`: asks the broker to describe itself.

use sift_proto::AdminQuery;

use crate::{Client, ClientError};

impl Client {
    /// Sends an `ADMIN` for `query` and returns the broker's JSON reply,
    /// parsed (its schema is in `docs/PROTOCOL.md`, `ADMIN_REPLY`).
    ///
    /// Fails with [`ClientError::Disconnected`] when the connection is down
    /// or drops before the reply, and with [`ClientError::InvalidReply`]
    /// when the reply is not JSON.
    pub async fn admin(&self, query: AdminQuery) -> Result<serde_json::Value, ClientError> {
        let receiver = self.start_admin(query)?;
        let json = receiver.await.map_err(|_| ClientError::Disconnected)??;
        serde_json::from_str(&json).map_err(|error| ClientError::InvalidReply(format!("{query} reply: {error}")))
    }
}

impl Client {
    /// Declares the queue `name` (`MANAGE queue_declare`, `docs/PROTOCOL.md`
    /// §6.17): from now on what is sent on the topic `name` waits in the
    /// broker's queue stream until a consumer of the queue
    /// ([`crate::SubscribeOptions::queue`]) takes it. Declaring it again
    /// changes nothing.
    pub async fn declare_queue(&self, name: &str) -> Result<(), ClientError> {
        self.manage(sift_proto::ManageOp::QueueDeclare, serde_json::json!({ "name": name })).await.map(|_| ())
    }

    /// Declares the queue `name` unless `declared` shows this connection
    /// did already: a front-end declares each queue it meets once.
    pub async fn declare_queue_once(&self, declared: &DeclaredQueues, name: &str) -> Result<(), ClientError> {
        if declared.contains(name) {
            return Ok(());
        }
        self.declare_queue(name).await?;
        declared.insert(name);
        Ok(())
    }

    /// Sends a `MANAGE` request (streams and durable subscriptions,
    /// `docs/PROTOCOL.md` §6.17) with `body` as its JSON, and returns the
    /// broker's JSON reply, parsed.
    pub async fn manage(
        &self,
        op: sift_proto::ManageOp,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, ClientError> {
        let body = body.to_string();
        let receiver = self.start_json_request(|request_id| sift_proto::Frame::Manage { request_id, op, body })?;
        let json = receiver.await.map_err(|_| ClientError::Disconnected)??;
        serde_json::from_str(&json).map_err(|error| ClientError::InvalidReply(format!("{} reply: {error}", op.name())))
    }
}

/// Queues a connection remembers having declared; past it, it declares
/// again (which changes nothing at the broker).
pub const DECLARED_QUEUES_REMEMBERED_MAX: usize = 4_096;

/// The queues one connection declared ([`Client::declare_queue_once`]),
/// at most [`DECLARED_QUEUES_REMEMBERED_MAX`].
#[derive(Debug, Default)]
pub struct DeclaredQueues {
    names: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl DeclaredQueues {
    fn names(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.names.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn contains(&self, name: &str) -> bool {
        self.names().contains(name)
    }

    fn insert(&self, name: &str) {
        let mut names = self.names();
        if names.len() < DECLARED_QUEUES_REMEMBERED_MAX {
            names.insert(name.to_string());
        }
    }
}
