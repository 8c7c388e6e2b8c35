//! The brokers a run measures: a running one given by address, or brokers
//! the bench starts in its own process (one, or a chain linked broker to
//! broker), and where publishers and subscribers connect.

use std::time::{Duration, Instant};

use sift_broker::config::LinkTarget;
use sift_broker::{Config, RunningBroker};

use crate::error::BenchError;
use crate::options::CommonArgs;

/// How long embedded brokers may take to link up and share interest.
const NETWORK_READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often readiness is checked while waiting for it.
const NETWORK_READY_POLL: Duration = Duration::from_millis(20);

/// Where publishers and subscribers connect, and the brokers the bench
/// started itself (stopped by [`Endpoints::shutdown`]).
pub struct Endpoints {
    publish: String,
    subscribe: String,
    embedded: Vec<RunningBroker>,
}

impl Endpoints {
    /// The running broker of `--server`, or else one embedded broker.
    pub async fn from_options(common: &CommonArgs) -> Result<Endpoints, BenchError> {
        crate::tls::setup(common)?;
        crate::signing::setup(common)?;
        match &common.server {
            Some(address) => Ok(Endpoints::remote(address, None)),
            None => Endpoints::chain(1).await,
        }
    }

    /// Running brokers: publishers connect to `publish`, subscribers to
    /// `subscribe` (the same broker when `None`).
    pub fn remote(publish: &str, subscribe: Option<&str>) -> Endpoints {
        let subscribe = subscribe.unwrap_or(publish).to_string();
        Endpoints { publish: publish.to_string(), subscribe, embedded: Vec::new() }
    }

    /// `length` embedded brokers on loopback, each linked to the previous
    /// one, returned once every one of them knows the whole chain.
    /// Publishers connect to the first, subscribers to the last.
    pub async fn chain(length: usize) -> Result<Endpoints, BenchError> {
        if length == 0 {
            return Err(BenchError::Usage("a chain needs at least 1 broker".into()));
        }
        let mut embedded: Vec<RunningBroker> = Vec::with_capacity(length);
        for index in 0..length {
            let mut config = Config::scratch();
            let name = format!("bench-{index}");
            config.tls = crate::tls::embedded_broker(&name)?;
            config.auth.users_file = crate::signing::users_file();
            if length > 1 {
                config.network.name = name;
                config.network.link_listen = Some(([127, 0, 0, 1], 0).into());
                let previous = embedded.last().and_then(RunningBroker::link_addr);
                config.network.links =
                    previous.map(|address| LinkTarget::new(address.to_string())).into_iter().collect();
            }
            match RunningBroker::start(config).await {
                Ok(broker) => embedded.push(broker),
                Err(error) => {
                    Endpoints { publish: String::new(), subscribe: String::new(), embedded }.shutdown().await;
                    return Err(error.into());
                }
            }
        }
        let endpoints = Endpoints {
            publish: embedded[0].local_addr().to_string(),
            subscribe: embedded[length - 1].local_addr().to_string(),
            embedded,
        };
        let ready = endpoints
            .wait_until("the chain's brokers know each other", |first| first.topology_brokers().len() == length)
            .await;
        match ready {
            Ok(()) => Ok(endpoints),
            Err(error) => {
                endpoints.shutdown().await;
                Err(error)
            }
        }
    }

    /// `count` embedded brokers on loopback, each linked to every other
    /// (as a replicated stream's members are), returned once each knows
    /// them all. Publishers and subscribers connect to the first.
    pub async fn mesh(count: usize) -> Result<Endpoints, BenchError> {
        let mut embedded: Vec<RunningBroker> = Vec::with_capacity(count);
        for index in 0..count {
            let mut config = Config::scratch();
            let name = format!("bench-{index}");
            config.tls = crate::tls::embedded_broker(&name)?;
            config.auth.users_file = crate::signing::users_file();
            config.network.name = name;
            config.network.link_listen = Some(([127, 0, 0, 1], 0).into());
            config.network.links = embedded
                .iter()
                .filter_map(RunningBroker::link_addr)
                .map(|address| LinkTarget::new(address.to_string()))
                .collect();
            match RunningBroker::start(config).await {
                Ok(broker) => embedded.push(broker),
                Err(error) => {
                    Endpoints { publish: String::new(), subscribe: String::new(), embedded }.shutdown().await;
                    return Err(error.into());
                }
            }
        }
        let address = embedded[0].local_addr().to_string();
        let endpoints = Endpoints { publish: address.clone(), subscribe: address, embedded };
        let ready =
            endpoints.wait_until("the brokers know each other", |first| first.topology_brokers().len() == count);
        match ready.await {
            Ok(()) => Ok(endpoints),
            Err(error) => {
                endpoints.shutdown().await;
                Err(error)
            }
        }
    }

    /// One embedded broker with `config` (its listen address should be an
    /// ephemeral loopback port).
    pub async fn single(config: Config) -> Result<Endpoints, BenchError> {
        let broker = RunningBroker::start(config).await?;
        let address = broker.local_addr().to_string();
        Ok(Endpoints { publish: address.clone(), subscribe: address, embedded: vec![broker] })
    }

    /// Address publishers connect to.
    pub fn publish_addr(&self) -> &str {
        &self.publish
    }

    /// Address subscribers connect to.
    pub fn subscribe_addr(&self) -> &str {
        &self.subscribe
    }

    /// The brokers the bench started, first (publishers') to last; empty
    /// for running brokers.
    pub fn embedded(&self) -> &[RunningBroker] {
        &self.embedded
    }

    /// Waits until the first embedded broker holds the subscribers' interest
    /// (nothing to wait for with one broker or a running network).
    pub async fn interest_ready(&self) -> Result<(), BenchError> {
        if self.embedded.len() < 2 {
            return Ok(());
        }
        self.wait_until("the subscribers' interest reaches the publishers' broker", |first| {
            !first.remote_interest().is_empty()
        })
        .await
    }

    /// Waits until the first embedded broker holds no interest from other
    /// brokers. Runs call it after their subscribers closed: otherwise the
    /// next run's [`Endpoints::interest_ready`] could pass on the departing
    /// subscribers' interest, and the next run lose its first messages when
    /// the withdrawal arrives just before the new subscribers' interest.
    pub async fn interest_gone(&self) -> Result<(), BenchError> {
        if self.embedded.len() < 2 {
            return Ok(());
        }
        self.wait_until("the last run's subscribers' interest leaves the publishers' broker", |first| {
            first.remote_interest().is_empty()
        })
        .await
    }

    async fn wait_until(&self, what: &str, ready: impl Fn(&RunningBroker) -> bool) -> Result<(), BenchError> {
        let Some(first) = self.embedded.first() else { return Ok(()) };
        poll_until(what, NETWORK_READY_TIMEOUT, NETWORK_READY_POLL, || ready(first)).await
    }

    /// Stops the embedded brokers, last first.
    pub async fn shutdown(self) {
        for broker in self.embedded.into_iter().rev() {
            broker.shutdown().await;
        }
        crate::tls::cleanup();
        crate::signing::cleanup();
    }
}

/// Looks at `ready` every `poll` until it holds; fails naming `what` once
/// `timeout` has passed.
pub(crate) async fn poll_until(
    what: &str,
    timeout: Duration,
    poll: Duration,
    ready: impl Fn() -> bool,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + timeout;
    while !ready() {
        if Instant::now() > deadline {
            return Err(BenchError::Timeout(what.to_string()));
        }
        tokio::time::sleep(poll).await;
    }
    Ok(())
}
