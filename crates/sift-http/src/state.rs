//! What every handler shares: the configuration, the way into the broker,
//! the publishing sessions and the counters.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::config::HttpConfig;
use sift_broker::InProcessConnector;
use sift_client::{Client, ClientError, ClientOptions};

use crate::counters::HttpCounters;

/// State shared by the handlers of one HTTP front-end.
#[derive(Debug)]
pub(crate) struct AppState {
    /// `[http]` as configured.
    pub config: HttpConfig,
    /// Opens sessions into the broker.
    pub connector: InProcessConnector,
    /// Sessions that carry `POST /v1/messages`, used in turn.
    publishers: Vec<Client>,
    next_publisher: AtomicUsize,
    /// This front-end's counters.
    pub counters: Arc<HttpCounters>,
    /// The Prometheus exposition of `GET /metrics`.
    pub metrics: crate::metrics::Exporter,
    /// HTTP subscriptions, by id.
    pub subscriptions: crate::subscriptions::Registry,
    /// Turns true when the front-end stops (upgraded WebSockets watch it).
    pub stopping: tokio::sync::watch::Receiver<bool>,
}

impl AppState {
    /// Opens the publishing sessions.
    pub(crate) async fn open(
        config: HttpConfig,
        connector: InProcessConnector,
        stopping: tokio::sync::watch::Receiver<bool>,
    ) -> Result<AppState, ClientError> {
        let counters = Arc::new(HttpCounters::default());
        connector.register_door(sift_broker::door::Door::Http, counters.clone());
        let mut publishers = Vec::with_capacity(config.publish_sessions as usize);
        for index in 0..config.publish_sessions {
            publishers.push(session(&connector, format!("http-publish-{index}")).await?);
        }
        Ok(AppState {
            config,
            connector,
            publishers,
            next_publisher: AtomicUsize::new(0),
            counters,
            metrics: crate::metrics::Exporter::new(),
            subscriptions: crate::subscriptions::Registry::default(),
            stopping,
        })
    }

    /// The next publishing session, in turn. Its name (`http-publish-N`)
    /// is stamped as the publisher of what it publishes.
    pub(crate) fn publisher(&self) -> &Client {
        let index = self.next_publisher.fetch_add(1, Ordering::Relaxed) % self.publishers.len();
        &self.publishers[index]
    }

    /// Closes the subscriptions and the publishing sessions.
    pub(crate) async fn close(&self) {
        self.subscriptions.close_all().await;
        for publisher in &self.publishers {
            publisher.close().await;
        }
    }
}

/// A new in-process session named `name`. It reconnects if the broker
/// closes it (for a limit), as a native client would.
pub(crate) async fn session(connector: &InProcessConnector, name: String) -> Result<Client, ClientError> {
    let options = ClientOptions { name, reconnect: true, clock_sync_interval: None, ..ClientOptions::default() };
    let origin = sift_broker::door::Origin { door: sift_broker::door::Door::Http, peer: None };
    Client::connect_local(connector.local_opener(origin), options).await
}
