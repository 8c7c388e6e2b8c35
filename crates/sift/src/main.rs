//! `sift`: the broker, the command-line publisher and subscriber, and the
//! benchmark driver, in one binary.

mod admin_cmd;
mod admin_table;
mod bench;
mod broker_cmd;
mod broker_doors;
mod gateway_cmd;
mod gateway_registry;
mod multicast_cmd;
mod pub_cmd;
mod query_cmd;
mod registry_cmd;
mod stream_cmd;
mod sub_cmd;
mod sub_files;
mod sub_timing;
mod time_cmd;
mod watch_cmd;

use clap::{Parser, Subcommand};

/// mimalloc: the broker allocates on one thread (the publisher's reader) and
/// frees on another (the subscriber's writer); mimalloc's free lists make
/// that cross-thread pattern cheap where the system allocator contends.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sift: a content-based publish/subscribe broker.
#[derive(Debug, Parser)]
#[command(name = "sift", version, about, propagate_version = true)]
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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(match std::env::var("SIFT_LOG").as_deref() {
            Ok("debug") => tracing::Level::DEBUG,
            Ok("trace") => tracing::Level::TRACE,
            Ok("warn") => tracing::Level::WARN,
            _ => tracing::Level::INFO,
        })
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
