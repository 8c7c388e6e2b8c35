//! The doors of `sift broker`: the front-ends' listeners, bound before the
//! broker opens its data directory, and bind errors that say what to do.
//!
//! A broker that cannot start must leave its data directory as it found
//! it, so every address is bound first: the front-ends' here, the native
//! and link listeners by `RunningBroker::start` before it opens storage.
//! The usual reason a bind fails is a second broker on the same machine
//! with the defaults, so the error names the flag of the door that failed
//! and every door's address, which is what the user has to change.

use std::net::SocketAddr;

use sift_broker::{BrokerError, Config};
use tokio::net::TcpListener;

use crate::CliError;

/// One door: its flag, and its address or `None` when it is off.
struct Door {
    flag: &'static str,
    address: Option<SocketAddr>,
}

/// Every door a broker's configuration opens, for bind errors.
pub struct DoorPlan {
    doors: Vec<Door>,
}

impl DoorPlan {
    /// The doors of `config`.
    pub fn of(config: &Config) -> DoorPlan {
        let enabled = |on: bool, address: SocketAddr| on.then_some(address);
        DoorPlan {
            doors: vec![
                Door { flag: "--listen", address: Some(config.listen) },
                Door { flag: "--link-listen", address: config.network.link_listen },
                Door { flag: "--http", address: enabled(config.http.enabled, config.http.listen) },
                Door { flag: "--stomp", address: enabled(config.stomp.enabled, config.stomp.listen) },
                Door { flag: "--mqtt", address: enabled(config.mqtt.enabled, config.mqtt.listen) },
            ],
        }
    }

    /// The error for a door that could not be bound: what failed (the
    /// address and its flag), why, and when the address is taken, the
    /// flags that move each door elsewhere.
    pub fn bind_error(&self, flag: &str, address: SocketAddr, error: &std::io::Error) -> CliError {
        let mut text = format!("cannot listen on {address} ({flag}): {error}");
        if error.kind() == std::io::ErrorKind::AddrInUse {
            let doors: Vec<String> = self
                .doors
                .iter()
                .filter_map(|door| door.address.map(|address| format!("{} {address}", door.flag)))
                .collect();
            text.push_str(&format!(
                "\n  is another broker running? Give this one free addresses (port 0 picks one), \
                 or `off` for a front-end it does not need (--http, --stomp, --mqtt).\
                 \n  This broker's doors: {}",
                doors.join(", ")
            ));
        }
        CliError::Usage(text)
    }

    /// A broker start error, with a bind failure told as [`DoorPlan::bind_error`].
    pub fn broker_error(&self, error: BrokerError) -> CliError {
        match &error {
            BrokerError::Bind { address, source } => self.bind_error("--listen", *address, source),
            BrokerError::BindLinks { address, source } => self.bind_error("--link-listen", *address, source),
            _ => CliError::Broker(error),
        }
    }
}

/// The front-ends' listeners, bound; `None` for a front-end that is off.
#[derive(Default)]
pub struct BoundDoors {
    /// The HTTP front-end's.
    pub http: Option<TcpListener>,
    /// The STOMP front-end's.
    pub stomp: Option<TcpListener>,
    /// The MQTT front-end's.
    pub mqtt: Option<TcpListener>,
}

impl BoundDoors {
    /// Binds the listener of each enabled front-end of `config`.
    pub async fn bind(config: &Config, plan: &DoorPlan) -> Result<BoundDoors, CliError> {
        Ok(BoundDoors {
            http: bind_if(config.http.enabled, "--http", config.http.listen, plan).await?,
            stomp: bind_if(config.stomp.enabled, "--stomp", config.stomp.listen, plan).await?,
            mqtt: bind_if(config.mqtt.enabled, "--mqtt", config.mqtt.listen, plan).await?,
        })
    }
}

async fn bind_if(
    enabled: bool,
    flag: &str,
    address: SocketAddr,
    plan: &DoorPlan,
) -> Result<Option<TcpListener>, CliError> {
    if !enabled {
        return Ok(None);
    }
    match TcpListener::bind(address).await {
        Ok(listener) => Ok(Some(listener)),
        Err(error) => Err(plan.bind_error(flag, address, &error)),
    }
}
