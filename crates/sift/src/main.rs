//! `sift`: the broker, the command-line publisher and subscriber, and the
//! benchmark driver, in one binary.

mod admin_cmd;
mod admin_table;
mod allocator;
mod bench;
mod broker_cmd;
mod broker_doors;
mod gateway_cmd;
mod gateway_registry;
mod guidance;
mod multicast_cmd;
mod passwd_cmd;
mod pub_cmd;
mod query_cmd;
mod registry_cmd;
mod sign_in;
mod stream_cmd;
mod sub_cmd;
mod sub_files;
mod sub_timing;
mod time_cmd;
mod token_cmd;
mod watch_cmd;

use clap::{Parser, Subcommand};

/// mimalloc: the broker allocates on one thread (the publisher's reader) and
/// frees on another (the subscriber's writer); mimalloc's free lists make
/// that cross-thread pattern cheap where the system allocator contends.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sift: a content-based publish/subscribe broker.
#[derive(Debug, Parser)]
#[command(
    name = "sift",
    version,
    about = "Sift: a content-based publish/subscribe broker, and the commands that use it",
    after_help = "The broker address comes from --server, else the SIFT_SERVER environment variable, else \
                  127.0.0.1:7400. SIFT_LOG=debug (error, warn, info, debug, trace) logs more; a broker \
                  then shows each connection and each request it refuses.",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a broker until SIGINT or SIGTERM.
    Broker(broker_cmd::BrokerArgs),
    /// Publish messages.
    Pub(pub_cmd::PubArgs),
    /// Subscribe and print deliveries.
    Sub(sub_cmd::SubArgs),
    /// Measure throughput and latency.
    Bench(bench::BenchArgs),
    /// Show a running broker's links, routes or counters.
    Admin(admin_cmd::AdminArgs),
    /// Add, list, describe, remove or verify streams.
    Stream(stream_cmd::StreamArgs),
    /// List, describe or remove durable subscriptions.
    Durable(stream_cmd::DurableArgs),
    /// Search a stream's stored messages (the archive query service).
    Query(query_cmd::QueryArgs),
    /// Estimate this machine's clock offset from a broker's, with its error bound.
    Time(time_cmd::TimeArgs),
    /// Join a LAN's multicast group to the broker network (FJM2D).
    Gateway(gateway_cmd::GatewayArgs),
    /// Serve the registry where gateways find each other (FJM2-Admin).
    Registry(registry_cmd::RegistryArgs),
    /// Count what crosses a NORM multicast group, per sender (data, repairs, NACKs).
    Watch(watch_cmd::WatchArgs),
    /// Print the argon2id hash of a password (from standard input or SIFT_PASSWORD) for a users file.
    Passwd(passwd_cmd::PasswdArgs),
    /// Make an Ed25519 key pair for bearer tokens, or issue a token (a JWT) with one.
    Token(token_cmd::TokenArgs),
}

/// The environment variable that sets the log level (`error`, `warn`,
/// `info`, `debug`, `trace`). `debug` shows the broker's connections and
/// every request it refuses.
const LOG_LEVEL_VARIABLE: &str = "SIFT_LOG";

impl Command {
    /// The log level when `SIFT_LOG` is not set: the servers say what they
    /// do (`info`); a client command prints only its own output and
    /// problems (`warn`), so that an embedded broker's start-up lines (its
    /// streams recovered, say) stay out of `stream add` or `bench` output.
    fn default_log_level(&self) -> tracing::Level {
        match self {
            Command::Broker(_) | Command::Gateway(_) | Command::Registry(_) => tracing::Level::INFO,
            _ => tracing::Level::WARN,
        }
    }
}

/// The log level `SIFT_LOG` names, or `default`.
fn log_level(default: tracing::Level) -> tracing::Level {
    match std::env::var(LOG_LEVEL_VARIABLE).map(|text| text.to_ascii_lowercase()).as_deref() {
        Ok("error") => tracing::Level::ERROR,
        Ok("warn") => tracing::Level::WARN,
        Ok("info") => tracing::Level::INFO,
        Ok("debug") => tracing::Level::DEBUG,
        Ok("trace") => tracing::Level::TRACE,
        _ => default,
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Broker(_) | Command::Bench(_) | Command::Gateway(_) | Command::Registry(_)) {
        allocator::settle();
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(log_level(cli.command.default_log_level()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Broker(args) => broker_cmd::run(args).await,
            Command::Pub(args) => pub_cmd::run(args).await,
            Command::Sub(args) => sub_cmd::run(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Admin(args) => admin_cmd::run(args).await,
            Command::Stream(args) => stream_cmd::run_stream(args).await,
            Command::Durable(args) => stream_cmd::run_durable(args).await,
            Command::Query(args) => query_cmd::run(args).await,
            Command::Time(args) => time_cmd::run(args).await,
            Command::Gateway(args) => gateway_cmd::run(args).await,
            Command::Registry(args) => registry_cmd::run(args).await,
            Command::Watch(args) => watch_cmd::run(args).await,
            Command::Passwd(args) => passwd_cmd::run(args),
            Command::Token(args) => token_cmd::run(args),
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error of a CLI command, printed as `error: ...` with exit status 1.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An argument is invalid.
    #[error("{0}")]
    Usage(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The broker could not start.
    #[error(transparent)]
    Broker(#[from] sift_broker::BrokerError),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] sift_broker::ConfigError),
    /// The HTTP front-end failed to start.
    #[error(transparent)]
    Http(#[from] sift_http::HttpError),
    /// The STOMP front-end failed to start.
    #[error(transparent)]
    Stomp(#[from] sift_stomp::StompError),
    /// The MQTT front-end failed to start.
    #[error(transparent)]
    Mqtt(#[from] sift_mqtt::MqttError),
    /// The AMQP front-end failed to start.
    #[error(transparent)]
    Amqp(#[from] sift_amqp::AmqpError),
    /// A client call failed.
    #[error(transparent)]
    Client(#[from] sift_client::ClientError),
    /// Writing output failed.
    #[error("cannot write output: {0}")]
    Output(std::io::Error),
    /// A benchmark failed.
    #[error(transparent)]
    Bench(#[from] sift_bench::BenchError),
}
