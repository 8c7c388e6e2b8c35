//! `sift gateway`: joins a LAN's multicast group to the broker network
//! (FJM2D), carrying messages both ways by interest.

use std::io::Write;

use clap::Args;
use sift_client::multicast::Gateway;
use sift_client::{Client, ClientOptions};
use tokio::sync::watch;

use crate::multicast_cmd::MulticastArgs;
use crate::CliError;

/// Arguments of `sift gateway`.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// The broker the gateway publishes to and subscribes at.
    #[arg(long, default_value = "127.0.0.1:7400")]
    broker: String,
    /// The gateway's name: its client name and the `sift-gateway` tag on
    /// what it carries [default: gateway-<node id>].
    #[arg(long)]
    id: Option<String>,
    /// The LAN's group (`--multicast GROUP:PORT`, required) and NORM settings.
    #[command(flatten)]
    multicast: MulticastArgs,
}

/// Runs the gateway until SIGINT or SIGTERM.
pub async fn run(args: GatewayArgs) -> Result<(), CliError> {
    let Some(group) = args.multicast.multicast else {
        return Err(CliError::Usage("sift gateway needs --multicast GROUP:PORT".into()));
    };
    let options = args.multicast.options(group)?;
    let id = args.id.clone().unwrap_or_else(|| format!("gateway-{:08x}", options.node_id));
    let client_options = ClientOptions { name: id.clone(), ..ClientOptions::default() };
    let client = Client::connect(args.broker.as_str(), client_options).await?;
    let mut gateway =
        Gateway::open(&options, client.clone(), &id).map_err(|error| CliError::Usage(error.to_string()))?;
    println!("sift gateway {id} joins {group} to {}", args.broker);
    let _ = std::io::stdout().flush();
    let signals = crate::broker_cmd::Signals::install()?;
    let (stop_sender, stop) = watch::channel(false);
    tokio::spawn(async move {
        signals.wait().await;
        let _ = stop_sender.send(true);
    });
    let outcome = gateway.run(stop).await;
    let counters = gateway.counters();
    let _ = writeln!(
        std::io::stderr().lock(),
        "gateway: {} to the network, {} to the LAN, {} loops prevented, {} duplicates, {} invalid, {} subscriptions",
        counters.to_network,
        counters.to_lan,
        counters.loops_prevented,
        counters.duplicates,
        counters.invalid,
        counters.subscriptions
    );
    client.close().await;
    outcome.map_err(|error| CliError::Usage(error.to_string()))
}
