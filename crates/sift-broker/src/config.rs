//! Broker configuration: every limit and policy, with its default.
//!
//! The defaults are what `sift broker` runs with when given no file; a TOML
//! file (`--config sift.toml`) overrides any subset of them. Unknown keys are
//! rejected so that a misspelt limit is an error, not a silent default.
//! `docs/ARCHITECTURE.md` lists every option; `sift.example.toml` shows them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;
use serde::Deserialize;
use sift_proto::QueuePolicy;

pub use crate::store::settings::{StorageConfig, StreamDefinition};

pub use crate::auth_config::{
    AuthConfig, AUTH_FAILURE_DELAY_MS_MAX_DEFAULT, AUTH_FAILURE_DELAY_MS_MIN_DEFAULT, AUTH_FAILURE_NAMES_MAX_DEFAULT,
};
pub use crate::network_config::{
    LinkTarget, NetworkConfig, RoutingMode, DEFAULT_CLUSTER, DEFAULT_LINK_COST, DEFAULT_LINK_HANDSHAKE_TIMEOUT_MS,
    DEFAULT_LINK_PING_INTERVAL_MS, DEFAULT_LINK_RECONNECT_DELAY_MAX_MS, DEFAULT_LINK_RECONNECT_DELAY_MIN_MS,
    DEFAULT_LINK_SEND_QUEUE_FRAMES, DEFAULT_NETWORK_NAME,
};

/// Address `sift broker` listens on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7400";
/// Bytes each direction of an in-process connection's pipe holds by default.
pub const IN_PROCESS_PIPE_BYTES_DEFAULT: usize = 256 * 1024;

/// Default of `delivery.local_batches`: frame batches in flight each way on
/// a local session. A batch holds up to 64 KiB (one `write_batch_bytes` of
/// deliveries, or a client write), so 4 of them hold what the in-process
/// pipe they replace held (256 KiB).
pub const LOCAL_BATCHES_DEFAULT: usize = 4;
/// Default of `limits.memory_bytes_max`: 1 GiB queued towards clients
/// across the broker, so that many connections that do not read cannot
/// together hold more than that, whatever each one's own bound.
pub const MEMORY_BYTES_MAX_DEFAULT: u64 = 1 << 30;
/// Directory the broker keeps its data in by default.
pub const DEFAULT_DATA_DIR: &str = "./sift-data";

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("invalid config file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's explanation, with line and column.
        source: Box<toml::de::Error>,
    },
    /// A value is out of its allowed range.
    #[error("invalid config: {0}")]
    Invalid(String),
}

impl From<toml::de::Error> for ConfigError {
    /// A parse error of text not yet tied to a file ([`ConfigError::at`]).
    fn from(source: toml::de::Error) -> ConfigError {
        ConfigError::Parse { path: PathBuf::from("<text>"), source: Box::new(source) }
    }
}

impl ConfigError {
    /// The error, naming `path` as the file whose text it is about.
    pub fn at(self, path: &Path) -> ConfigError {
        match self {
            ConfigError::Parse { source, .. } => ConfigError::Parse { path: path.to_path_buf(), source },
            other => other,
        }
    }
}

/// The whole broker configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The broker's name, sent to clients in `WELCOME`.
    pub name: String,
    /// Address to listen on for native-protocol clients.
    pub listen: SocketAddr,
    /// Directory for the broker's data.
    pub data_dir: PathBuf,
    /// Limits checked at ingress.
    pub limits: Limits,
    /// Delivery queues, acknowledgements and flow control.
    pub delivery: DeliveryConfig,
    /// Links to other brokers of the cluster.
    pub network: NetworkConfig,
    /// Where and how messages are stored.
    pub storage: StorageConfig,
    /// Who may connect and what each may do.
    pub auth: AuthConfig,
    /// TLS (`[tls]`: `cert`, `key`, `client_ca`): the native door and
    /// broker links speak only TLS when it is set, and each front-end does
    /// unless its own section names other files. Links then need
    /// `client_ca`, the CA their certificates chain to (mutual TLS).
    pub tls: Option<sift_tls::TlsFiles>,
    /// `[http]`, `[stomp]`, `[mqtt]` and `[amqp]` belong to the front-end crates,
    /// which read them from the same file (`HttpConfig::from_toml` in
    /// `sift-http`, and so on); the broker lets them through unread.
    #[serde(rename = "http")]
    pub http_section: IgnoredAny,
    /// See `http_section`.
    #[serde(rename = "stomp")]
    pub stomp_section: IgnoredAny,
    /// See `http_section`.
    #[serde(rename = "mqtt")]
    pub mqtt_section: IgnoredAny,
    /// See `http_section`.
    #[serde(rename = "amqp")]
    pub amqp_section: IgnoredAny,
    /// Streams the broker keeps (`[[streams]]`); created at start when
    /// missing, and their definitions win over stored ones.
    pub streams: Vec<StreamDefinition>,
    /// Remove `data_dir` when the broker shuts down: set by
    /// [`Config::scratch`] for embedded brokers (tests, benchmarks) that
    /// must neither share a data directory nor leave one behind. Never read
    /// from a file.
    #[serde(skip)]
    pub remove_data_dir_on_shutdown: bool,
}

/// Limits checked at ingress. A violation gets an `ERROR` frame naming the limit.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest frame accepted (the length prefix value). Larger is fatal.
    pub max_frame_bytes: u32,
    /// Largest message payload accepted.
    pub max_payload_bytes: u32,
    /// Most subscriptions one connection may hold.
    pub max_subscriptions_per_connection: u32,
    /// Longest content filter text accepted.
    pub max_filter_bytes: u32,
    /// Most client connections served at once.
    pub max_connections: u32,
    /// Time allowed between accepting a connection and its `HELLO`.
    pub handshake_timeout_ms: u64,
    /// Most bytes queued towards one connection (deliveries and responses).
    pub max_pending_bytes_per_connection: u64,
    /// Bytes queued towards clients across every connection at once (the
    /// broker's memory budget); past it a delivery meets its
    /// subscription's slow-consumer policy as at a full queue.
    pub memory_bytes_max: u64,
    /// Furthest a `PUBLISHER_TIME` timestamp may be from the broker's clock;
    /// a publish beyond it is refused (`invalid_field`), since a publisher
    /// whose clock mapping is that wrong would misorder every receiver.
    pub publisher_time_skew_ms_max: u64,
    /// Messages held for a later delivery time (`JMSDeliveryTime`) at once;
    /// a publish past it is refused (`queue_full`).
    pub scheduled_max: usize,
}

/// Delivery queues, acknowledgements and flow control.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeliveryConfig {
    /// Queue bound (messages) of a subscription that does not choose one.
    pub queue_capacity_default: u32,
    /// Largest queue bound a subscription may ask for.
    pub queue_capacity_max: u32,
    /// Policy of a subscription that does not choose one: `block`,
    /// `keep-last:N`, `drop-new` or `disconnect`.
    pub policy_default: String,
    /// Time a reliable delivery may stay unacknowledged before redelivery.
    pub ack_timeout_ms: u32,
    /// Reliable deliveries in flight per subscription, when it does not choose.
    pub max_unacked_default: u32,
    /// Largest in-flight window a subscription may ask for.
    pub max_unacked_max: u32,
    /// Redeliveries before a message is dropped and counted; 0 = no limit.
    pub max_redeliveries: u32,
    /// Unconfirmed reliable publishes a client may have (told in `WELCOME`).
    pub publish_window: u32,
    /// Wait for acknowledgements of an await=delivered publish, by default.
    pub await_timeout_ms_default: u32,
    /// Longest await=delivered wait a publisher may ask for.
    pub await_timeout_ms_max: u32,
    /// Topics remembered by each connection's match cache.
    pub match_cache_entries_max: usize,
    /// Bytes a connection writer gathers before one write system call.
    pub write_batch_bytes: usize,
    /// Bytes a connection reader asks the socket for at a time.
    pub read_buffer_bytes: usize,
    /// Bytes of each chunk a connection reader encodes published messages
    /// into; a chunk is freed with the last delivery encoded in it.
    pub encode_arena_bytes: usize,
    /// Bytes of later publishes a connection reads ahead and holds while one
    /// of its publishes waits for space in a full `block` queue; reading on
    /// lets its acks and pings through, so it never waits on itself.
    pub blocked_read_ahead_bytes: usize,
    /// Bytes each direction of an in-process connection's pipe holds (the
    /// HTTP front-end's sessions): the counterpart of a socket's buffers.
    pub in_process_pipe_bytes: usize,
    /// Frame batches in flight each way on a local session (a protocol
    /// front-end's): the counterpart of a socket's buffers.
    pub local_batches: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            name: "sift".to_string(),
            listen: DEFAULT_LISTEN.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 7400))),
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            limits: Limits::default(),
            delivery: DeliveryConfig::default(),
            network: NetworkConfig::default(),
            storage: StorageConfig::default(),
            auth: AuthConfig::default(),
            tls: None,
            http_section: IgnoredAny,
            stomp_section: IgnoredAny,
            mqtt_section: IgnoredAny,
            amqp_section: IgnoredAny,
            streams: Vec::new(),
            remove_data_dir_on_shutdown: false,
        }
    }
}

/// Scratch data directories made by this process so far.
static SCRATCH_DIRS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Config {
    /// The defaults for an embedded broker: an ephemeral loopback port and
    /// a data directory of its own under the system's temporary directory,
    /// removed when the broker shuts down.
    pub fn scratch() -> Config {
        let number = SCRATCH_DIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("sift-scratch-{}-{number}-{}", std::process::id(), sift_core::system_now_ns());
        Config {
            listen: ([127, 0, 0, 1], 0).into(),
            data_dir: std::env::temp_dir().join(name),
            remove_data_dir_on_shutdown: true,
            ..Config::default()
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: 8 * 1024 * 1024,
            max_payload_bytes: 4 * 1024 * 1024,
            max_subscriptions_per_connection: 10_000,
            max_filter_bytes: 4096,
            max_connections: 10_000,
            handshake_timeout_ms: 5_000,
            max_pending_bytes_per_connection: 64 * 1024 * 1024,
            memory_bytes_max: MEMORY_BYTES_MAX_DEFAULT,
            publisher_time_skew_ms_max: 60_000,
            scheduled_max: 100_000,
        }
    }
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            queue_capacity_default: 65_536,
            queue_capacity_max: 1_048_576,
            policy_default: "block".to_string(),
            ack_timeout_ms: 30_000,
            max_unacked_default: 1_000,
            max_unacked_max: 65_536,
            max_redeliveries: 0,
            publish_window: 1_024,
            await_timeout_ms_default: 10_000,
            await_timeout_ms_max: 300_000,
            match_cache_entries_max: 4_096,
            write_batch_bytes: 64 * 1024,
            read_buffer_bytes: 64 * 1024,
            encode_arena_bytes: 64 * 1024,
            blocked_read_ahead_bytes: 1024 * 1024,
            in_process_pipe_bytes: IN_PROCESS_PIPE_BYTES_DEFAULT,
            local_batches: LOCAL_BATCHES_DEFAULT,
        }
    }
}

impl Config {
    /// Reads a TOML file over the defaults and checks the result.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Config::from_toml(&text).map_err(|error| error.at(path))
    }

    /// Parses TOML text over the defaults and checks the result.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(ConfigError::from)?;
        config.validate()?;
        Ok(config)
    }

    /// The default subscription policy, parsed.
    pub fn policy_default(&self) -> QueuePolicy {
        self.delivery.policy_default.parse().unwrap_or(QueuePolicy::Block)
    }

    /// Checks that limits are coherent and non-zero where zero makes no sense.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let limits = &self.limits;
        let delivery = &self.delivery;
        let positive = [
            ("limits.max_frame_bytes", u64::from(limits.max_frame_bytes)),
            ("limits.max_connections", u64::from(limits.max_connections)),
            ("limits.handshake_timeout_ms", limits.handshake_timeout_ms),
            ("limits.max_pending_bytes_per_connection", limits.max_pending_bytes_per_connection),
            ("limits.memory_bytes_max", limits.memory_bytes_max),
            ("delivery.queue_capacity_default", u64::from(delivery.queue_capacity_default)),
            ("delivery.ack_timeout_ms", u64::from(delivery.ack_timeout_ms)),
            ("delivery.max_unacked_default", u64::from(delivery.max_unacked_default)),
            ("delivery.publish_window", u64::from(delivery.publish_window)),
            ("delivery.write_batch_bytes", delivery.write_batch_bytes as u64),
            ("delivery.read_buffer_bytes", delivery.read_buffer_bytes as u64),
            ("delivery.encode_arena_bytes", delivery.encode_arena_bytes as u64),
            ("delivery.in_process_pipe_bytes", delivery.in_process_pipe_bytes as u64),
            ("delivery.local_batches", delivery.local_batches as u64),
        ];
        require_positive(&positive).map_err(ConfigError::Invalid)?;
        self.auth.validate()?;
        if limits.max_payload_bytes >= limits.max_frame_bytes {
            return Err(ConfigError::Invalid(format!(
                "limits.max_payload_bytes ({}) must be below limits.max_frame_bytes ({}) to leave room for headers",
                limits.max_payload_bytes, limits.max_frame_bytes
            )));
        }
        if delivery.queue_capacity_default > delivery.queue_capacity_max {
            return Err(ConfigError::Invalid("delivery.queue_capacity_default exceeds queue_capacity_max".into()));
        }
        if delivery.max_unacked_default > delivery.max_unacked_max {
            return Err(ConfigError::Invalid("delivery.max_unacked_default exceeds max_unacked_max".into()));
        }
        delivery
            .policy_default
            .parse::<QueuePolicy>()
            .map_err(|error| ConfigError::Invalid(format!("delivery.policy_default: {error}")))?;
        self.network.validate()?;
        self.storage.validate().map_err(ConfigError::Invalid)?;
        for stream in &self.streams {
            stream.parse(&self.storage).map_err(|error| ConfigError::Invalid(format!("[[streams]]: {error}")))?;
        }
        Ok(())
    }
}

/// Checks options that make no sense at 0; the error names the first that is.
pub fn require_positive(options: &[(&str, u64)]) -> Result<(), String> {
    match options.iter().find(|(_, value)| *value == 0) {
        Some((name, _)) => Err(format!("{name} must be greater than 0")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_the_defaults() {
        let config = Config::from_toml("").expect("defaults are valid");
        assert_eq!(config.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(config.limits.max_frame_bytes, 8 * 1024 * 1024);
        assert_eq!(config.policy_default(), QueuePolicy::Block);
    }

    #[test]
    fn a_tls_section_names_the_files_and_unknown_keys_in_it_are_refused() {
        let config =
            Config::from_toml("[tls]\ncert = \"s.pem\"\nkey = \"k.pem\"\nclient_ca = \"ca.pem\"\n").expect("valid");
        let tls = config.tls.expect("TLS set");
        assert_eq!((tls.cert.to_str(), tls.key.to_str()), (Some("s.pem"), Some("k.pem")));
        assert_eq!(tls.client_ca.as_deref().and_then(|path| path.to_str()), Some("ca.pem"));
        assert!(Config::from_toml("").expect("defaults").tls.is_none());
        let error =
            Config::from_toml("[tls]\ncert = \"s.pem\"\nkey = \"k.pem\"\nverify = true\n").expect_err("refused");
        assert!(error.to_string().contains("verify"), "{error}");
    }

    #[test]
    fn partial_files_override_only_what_they_name() {
        let config = Config::from_toml("[limits]\nmax_connections = 3\n[delivery]\npolicy_default = \"keep-last:5\"\n")
            .expect("valid");
        assert_eq!(config.limits.max_connections, 3);
        assert_eq!(config.limits.max_subscriptions_per_connection, 10_000);
        assert_eq!(config.policy_default(), QueuePolicy::KeepLast(5));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let misspelt = Config::from_toml("[limits]\nmax_conections = 3\n").expect_err("unknown key");
        assert!(misspelt.to_string().contains("max_conections"), "{misspelt}");
        let zero = Config::from_toml("[limits]\nmax_connections = 0\n").expect_err("zero");
        assert!(zero.to_string().contains("limits.max_connections"), "{zero}");
        let policy = Config::from_toml("[delivery]\npolicy_default = \"sometimes\"\n").expect_err("bad policy");
        assert!(policy.to_string().contains("sometimes"), "{policy}");
        let payload = Config::from_toml("[limits]\nmax_payload_bytes = 100\nmax_frame_bytes = 100\n");
        assert!(payload.is_err());
    }
}
