//! A gateway's side of the registry (FJM2-Admin): register this gateway's
//! link address, renew it, and keep a link to every other gateway the
//! registry lists, dropping the ones it no longer lists.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sift_bench::http_load::HttpConnection;
use sift_broker::config::LinkTarget;
use sift_broker::{DialHandle, RunningBroker};
use tokio::sync::watch;

/// How long a registration holds without renewal.
pub const REGISTRATION_TTL: Duration = Duration::from_secs(15);
/// How long one wait for a registry change lasts (then the gateway renews).
const WATCH_WAIT: Duration = Duration::from_secs(2);
/// Pause after the registry could not be reached.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// The registry at `address`, as one gateway uses it.
pub struct RegistryLink {
    address: SocketAddr,
    name: String,
    advertise: String,
    tls: Option<sift_client::ClientTls>,
}

impl RegistryLink {
    /// Gateway `name`, reachable by its peers at `advertise`; the registry
    /// is reached over TLS when `tls` is given.
    pub fn new(address: SocketAddr, name: &str, advertise: &str, tls: Option<sift_client::ClientTls>) -> RegistryLink {
        RegistryLink { address, name: name.to_string(), advertise: advertise.to_string(), tls }
    }

    async fn call(&self, method: &str, path: &str, body: String) -> Result<(u16, serde_json::Value), String> {
        let mut connection =
            HttpConnection::open_with(self.address, self.tls.as_ref()).await.map_err(|error| error.to_string())?;
        let (status, answer) = connection
            .send(method, path, "application/json", Bytes::from(body))
            .await
            .map_err(|error| error.to_string())?;
        Ok((status.as_u16(), serde_json::from_slice(&answer).unwrap_or(serde_json::Value::Null)))
    }

    async fn register(&self) -> Result<(), String> {
        let body = serde_json::json!({ "link_address": self.advertise, "ttl_ms": REGISTRATION_TTL.as_millis() as u64 });
        match self.call("PUT", &format!("/gateways/{}", self.name), body.to_string()).await? {
            (200, _) => Ok(()),
            (status, answer) => Err(format!("registry refused the registration: {status} {answer}")),
        }
    }

    /// Removes this gateway's registration (on the way out).
    pub async fn deregister(&self) {
        let _ = self.call("DELETE", &format!("/gateways/{}", self.name), String::new()).await;
    }

    /// The registry's version and the other gateways, after waiting up to
    /// `wait` for a change from `after`.
    async fn peers(&self, after: Option<u64>, wait: Duration) -> Result<(u64, HashMap<String, String>), String> {
        let path = match after {
            Some(version) => format!("/gateways?after={version}&wait_ms={}", wait.as_millis()),
            None => "/gateways".to_string(),
        };
        let (_, answer) = self.call("GET", &path, String::new()).await?;
        let version = answer["version"].as_u64().unwrap_or(0);
        let peers = answer["gateways"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|entry| {
                Some((entry["name"].as_str()?.to_string(), entry["link_address"].as_str()?.to_string()))
            })
            .filter(|(name, _)| *name != self.name)
            .collect();
        Ok((version, peers))
    }

    /// Registers, renews every third of the ttl, and links `broker` to the
    /// listed peers until `stop`.
    pub async fn keep(&self, broker: &RunningBroker, mut stop: watch::Receiver<bool>) {
        let mut links: HashMap<String, (String, DialHandle)> = HashMap::new();
        let mut version = None;
        let mut renew_at = Instant::now();
        loop {
            if *stop.borrow() {
                return;
            }
            if Instant::now() >= renew_at {
                match self.register().await {
                    Ok(()) => renew_at = Instant::now() + REGISTRATION_TTL / 3,
                    Err(error) => tracing::warn!(%error, "gateway registration failed"),
                }
            }
            let listed = tokio::select! {
                listed = self.peers(version, WATCH_WAIT) => listed,
                _ = stop.changed() => return,
            };
            match listed {
                Ok((now, peers)) => {
                    version = Some(now);
                    follow(broker, &mut links, peers);
                }
                Err(error) => {
                    tracing::warn!(%error, "registry unreachable");
                    tokio::time::sleep(RETRY_DELAY).await;
                }
            }
        }
    }
}

/// Dials each listed peer not linked yet (or at a new address), and stops
/// dialling peers no longer listed.
fn follow(broker: &RunningBroker, links: &mut HashMap<String, (String, DialHandle)>, peers: HashMap<String, String>) {
    links.retain(|name, (address, _)| peers.get(name) == Some(address));
    for (name, address) in peers {
        if let std::collections::hash_map::Entry::Vacant(slot) = links.entry(name) {
            tracing::info!(peer = %slot.key(), %address, "linking to a gateway from the registry");
            let handle = broker.dial(LinkTarget::new(address.clone()));
            slot.insert((address, handle));
        }
    }
}
