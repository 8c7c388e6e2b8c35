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
    /// Find the other gateways through this registry (`sift registry`)
    /// instead of using `--broker`: the gateway then runs its own broker,
    /// registers its link address and links to every gateway listed.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "broker")]
    registry: Option<std::net::SocketAddr>,
    /// With --registry: where the gateway's broker accepts links.
    #[arg(long, value_name = "ADDR", requires = "registry")]
    link_listen: Option<std::net::SocketAddr>,
    /// With --registry: the link address to register, as the other gateways
    /// reach it [default: the bound --link-listen address].
    #[arg(long, value_name = "HOST:PORT", requires = "registry")]
    advertise: Option<String>,
    /// Speak TLS to the broker or registry and on the gateway's links,
    /// trusting this CA (PEM); with --registry it is also the CA the other
    /// gateways' certificates chain to.
    #[arg(long, value_name = "PEM")]
    tls_ca: Option<std::path::PathBuf>,
    /// With --registry: the certificate the gateway's broker presents on its
    /// links (PEM; its first DNS name must be --id), with --tls-key.
    #[arg(long, value_name = "PEM", requires_all = ["tls_key", "tls_ca", "registry"])]
    tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// The LAN's group (`--multicast GROUP:PORT`, required) and NORM settings.
    #[command(flatten)]
    multicast: MulticastArgs,
}

impl GatewayArgs {
    /// The TLS to reach the broker or registry with, when --tls-ca is given.
    fn client_tls(&self) -> Result<Option<sift_client::ClientTls>, CliError> {
        let Some(ca) = &self.tls_ca else { return Ok(None) };
        let files = sift_client::ClientTlsFiles { ca: Some(ca.clone()), cert: None, key: None };
        sift_client::ClientTls::load(&files).map(Some).map_err(|error| CliError::Usage(error.to_string()))
    }
}

/// Runs the gateway until SIGINT or SIGTERM.
pub async fn run(args: GatewayArgs) -> Result<(), CliError> {
    let Some(group) = args.multicast.multicast else {
        return Err(CliError::Usage("sift gateway needs --multicast GROUP:PORT".into()));
    };
    let options = args.multicast.options(group)?;
    let id = args.id.clone().unwrap_or_else(|| format!("gateway-{:08x}", options.node_id));
    let signals = crate::broker_cmd::Signals::install()?;
    let (stop_sender, stop) = watch::channel(false);
    tokio::spawn(async move {
        signals.wait().await;
        let _ = stop_sender.send(true);
    });
    match args.registry {
        None => {
            let client_options =
                ClientOptions { name: id.clone(), tls: args.client_tls()?, ..ClientOptions::default() };
            let client = Client::connect(args.broker.as_str(), client_options).await?;
            println!("sift gateway {id} joins {group} to {}", args.broker);
            carry(&options, client, &id, stop).await
        }
        Some(registry) => with_registry(&args, &options, registry, &id, stop).await,
    }
}

/// Registry mode: the gateway's own broker, linked to the gateways the
/// registry lists.
async fn with_registry(
    args: &GatewayArgs,
    options: &sift_client::multicast::MulticastOptions,
    registry: std::net::SocketAddr,
    id: &str,
    stop: watch::Receiver<bool>,
) -> Result<(), CliError> {
    let Some(link_listen) = args.link_listen else {
        return Err(CliError::Usage(
            "--registry needs --link-listen ADDR (where the other gateways link to this one)".into(),
        ));
    };
    let mut config = sift_broker::Config::scratch();
    config.network.name = id.to_string();
    config.network.cluster = GATEWAY_CLUSTER.to_string();
    config.network.link_listen = Some(link_listen);
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        // Links between gateways run mutual TLS under this CA.
        config.tls =
            Some(sift_broker::tls::TlsFiles { cert: cert.clone(), key: key.clone(), client_ca: args.tls_ca.clone() });
    }
    let broker = sift_broker::RunningBroker::start(config).await?;
    let bound = broker.link_addr().map_or(link_listen.to_string(), |address| address.to_string());
    let advertise = args.advertise.clone().unwrap_or(bound.clone());
    let client_options = ClientOptions { name: id.to_string(), clock_sync_interval: None, ..ClientOptions::default() };
    let client = Client::connect_in_process(broker.connector().opener(), client_options).await?;
    println!("sift gateway {id} joins {} through registry {registry}, links on {bound} as {advertise}", options.group);
    let link = crate::gateway_registry::RegistryLink::new(registry, id, &advertise, args.client_tls()?);
    let (carried, ()) = tokio::join!(carry(options, client, id, stop.clone()), link.keep(&broker, stop));
    link.deregister().await;
    broker.shutdown().await;
    carried
}

/// The cluster gateways' brokers form.
const GATEWAY_CLUSTER: &str = "fjm2";

/// Carries messages between the LAN and `client`'s broker until `stop`.
async fn carry(
    options: &sift_client::multicast::MulticastOptions,
    client: Client,
    id: &str,
    stop: watch::Receiver<bool>,
) -> Result<(), CliError> {
    let _ = std::io::stdout().flush();
    let mut gateway = Gateway::open(options, client.clone(), id).map_err(|error| CliError::Usage(error.to_string()))?;
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
