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

use std::path::Path;

use sift_amqp::AmqpConfig;
use sift_broker::{BrokerError, Config, ConfigError};
use sift_http::HttpConfig;
use sift_mqtt::MqttConfig;
use sift_stomp::StompConfig;
use tokio::net::TcpListener;

use crate::CliError;

/// The sections of the configuration file each front-end crate owns.
#[derive(Debug, Clone, Default)]
pub struct FrontEndConfigs {
    /// `[http]`.
    pub http: HttpConfig,
    /// `[stomp]`.
    pub stomp: StompConfig,
    /// `[mqtt]`.
    pub mqtt: MqttConfig,
    /// `[amqp]`.
    pub amqp: AmqpConfig,
}

impl FrontEndConfigs {
    /// Gives every front-end without TLS files of its own the broker's
    /// (`--tls-cert`, `[tls]`): with TLS on, every door speaks it.
    pub fn inherit_tls(&mut self, broker_tls: Option<&sift_broker::tls::TlsFiles>) {
        let Some(files) = broker_tls else { return };
        for door_tls in [&mut self.http.tls, &mut self.stomp.tls, &mut self.mqtt.tls, &mut self.amqp.tls] {
            if door_tls.is_none() {
                *door_tls = Some(files.clone());
            }
        }
    }
}

/// Reads a configuration file once: the broker's part, and each
/// front-end's section by the crate that owns it.
pub fn load_config(path: &Path) -> Result<(Config, FrontEndConfigs), ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    let read = || -> Result<(Config, FrontEndConfigs), ConfigError> {
        let front_ends = FrontEndConfigs {
            http: HttpConfig::from_toml(&text)?,
            stomp: StompConfig::from_toml(&text)?,
            mqtt: MqttConfig::from_toml(&text)?,
            amqp: AmqpConfig::from_toml(&text)?,
        };
        Ok((Config::from_toml(&text)?, front_ends))
    };
    read().map_err(|error| error.at(path))
}

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
    /// The doors of `config` and `front_ends`.
    pub fn of(config: &Config, front_ends: &FrontEndConfigs) -> DoorPlan {
        let FrontEndConfigs { http, stomp, mqtt, amqp } = front_ends;
        let enabled = |on: bool, address: SocketAddr| on.then_some(address);
        DoorPlan {
            doors: vec![
                Door { flag: "--listen", address: Some(config.listen) },
                Door { flag: "--link-listen", address: config.network.link_listen },
                Door { flag: "--http", address: enabled(http.enabled, http.listen) },
                Door { flag: "--stomp", address: enabled(stomp.enabled, stomp.listen) },
                Door { flag: "--mqtt", address: enabled(mqtt.enabled, mqtt.listen) },
                Door { flag: "--amqp", address: enabled(amqp.enabled, amqp.listen) },
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
                 or `off` for a front-end it does not need (--http, --stomp, --mqtt, --amqp).\
                 \n  This broker's doors: {}",
                doors.join(", ")
            ));
        }
        CliError::Usage(text)
    }

    /// Refuses a broker that would let anyone in from another machine:
    /// without a users file every client door is open, and broker links
    /// are authenticated only by mutual TLS (`--tls-client-ca`), so such a
    /// door on an address other than loopback needs `--allow-anonymous`
    /// (`auth.allow_anonymous`).
    pub fn check_exposure(&self, config: &Config) -> Result<(), CliError> {
        if config.auth.allow_anonymous {
            return Ok(());
        }
        let has_users = config.auth.users_file.is_some();
        let links_mutual = config.tls.as_ref().is_some_and(|tls| tls.client_ca.is_some());
        let exposed: Vec<String> = self
            .doors
            .iter()
            .filter(|door| match door.flag {
                "--link-listen" => !links_mutual,
                _ => !has_users,
            })
            .filter_map(|door| door.address.filter(|address| !address.ip().is_loopback()).map(|a| (door.flag, a)))
            .map(|(flag, address)| format!("{flag} {address}"))
            .collect();
        if exposed.is_empty() {
            return Ok(());
        }
        let why = match has_users {
            false => "there is no users file, so every client may do everything",
            true => "broker links are authenticated only by mutual TLS (--tls-cert, --tls-key, --tls-client-ca)",
        };
        Err(CliError::Usage(format!(
            "refusing to serve {} beyond this machine: {why}.\n  Give a users file (--users FILE, see `sift passwd`), \
             listen on loopback (127.0.0.1), or pass --allow-anonymous to serve it open",
            exposed.join(", ")
        )))
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
    /// The AMQP front-end's.
    pub amqp: Option<TcpListener>,
}

impl BoundDoors {
    /// Binds the listener of each enabled front-end.
    pub async fn bind(front_ends: &FrontEndConfigs, plan: &DoorPlan) -> Result<BoundDoors, CliError> {
        let FrontEndConfigs { http, stomp, mqtt, amqp } = front_ends;
        Ok(BoundDoors {
            http: bind_if(http.enabled, "--http", http.listen, plan).await?,
            stomp: bind_if(stomp.enabled, "--stomp", stomp.listen, plan).await?,
            mqtt: bind_if(mqtt.enabled, "--mqtt", mqtt.listen, plan).await?,
            amqp: bind_if(amqp.enabled, "--amqp", amqp.listen, plan).await?,
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
