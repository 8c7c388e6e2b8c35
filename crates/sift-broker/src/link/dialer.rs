//! One dialer per configured link: connect, handshake, run the link, and
//! after a failure try again after an exponentially growing delay.

use std::sync::Arc;
use std::time::Duration;

use crate::config::LinkTarget;
use crate::shared::BrokerShared;
use crate::stats::bump;

use super::error::LinkError;
use super::{handshake, session};

/// The wait before the next attempt: doubled after each failure, from
/// `min` up to `max`, and back to `min` once a link was up.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    fn new(min: Duration, max: Duration) -> Backoff {
        Backoff { min, max, next: min }
    }

    /// The wait to use now; the one after it is twice as long.
    fn step(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    fn reset(&mut self) {
        self.next = self.min;
    }
}

/// Keeps the link to `target` up until the broker shuts down.
pub(crate) async fn run(target: LinkTarget, shared: Arc<BrokerShared>) {
    let network = &shared.config.network;
    let mut backoff = Backoff::new(
        Duration::from_millis(network.link_reconnect_delay_min_ms),
        Duration::from_millis(network.link_reconnect_delay_max_ms),
    );
    let mut shutdown = shared.shutdown_watch();
    while !shared.is_shutting_down() {
        let attempt = tokio::select! {
            attempt = handshake::dial(&target.address, target.cost, &shared) => attempt,
            _ = shutdown.changed() => return,
        };
        match attempt {
            Ok(link) => {
                shared.links.clear_failure(&target.address);
                session::run(link, shared.clone()).await;
                backoff.reset();
            }
            // Both brokers dial each other and the other connection was
            // kept: routine, and the back-off spaces the next look.
            Err(error) if error.is_already_linked() => already_linked(&target.address, &error, &shared),
            Err(error) => failed(&target.address, &error, &shared),
        }
        let wait = backoff.step();
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Remembers and logs quietly an attempt that found the link already up.
fn already_linked(address: &str, error: &LinkError, shared: &BrokerShared) {
    bump(&shared.stats.link_connect_failures);
    shared.links.record_failure(address, error);
    tracing::debug!(address, %error, "link already up (dialled by the peer); will look again later");
}

/// Counts, remembers and logs a failed attempt. Configuration errors (a
/// cluster or name clash) are warnings, naming both sides; an unreachable
/// peer is routine while it starts or restarts, so it is logged quietly.
fn failed(address: &str, error: &LinkError, shared: &BrokerShared) {
    bump(&shared.stats.link_connect_failures);
    if matches!(error, LinkError::Refused { .. }) {
        bump(&shared.stats.link_errors);
    }
    shared.links.record_failure(address, error);
    let network = &shared.config.network;
    if error.is_configuration_error() {
        tracing::warn!(
            address,
            broker = %network.name,
            cluster = %network.cluster,
            %error,
            "link refused: fix the configuration of one of the two brokers"
        );
    } else {
        tracing::debug!(address, %error, "link attempt failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_maximum_and_resets() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
        let waits: Vec<u128> = (0..4).map(|_| backoff.step().as_millis()).collect();
        assert_eq!(waits, [100, 200, 350, 350]);
        backoff.reset();
        assert_eq!(backoff.step(), Duration::from_millis(100));
    }
}
