//! `sift admin`: asks a running broker about its links, routes, counters or
//! subscriptions.

use std::io::Write;
use std::time::Duration;

use clap::{Args, ValueEnum};
use sift_client::{AdminQuery, Client, ClientError, ClientOptions};

use crate::admin_table;
use crate::CliError;

/// How long to wait for the broker's reply once connected.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Arguments of `sift admin`.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// Broker address (its client listener).
    #[arg(long, env = "SIFT_SERVER", default_value = "127.0.0.1:7400")]
    server: String,
    #[command(flatten)]
    sign_in: crate::sign_in::SignInArgs,
    /// What to show: the broker's links, its routes and interest, or its counters.
    #[arg(value_enum)]
    query: QueryArg,
    /// Print the broker's JSON reply instead of a table.
    #[arg(long)]
    json: bool,
}

/// The queries, as named on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum QueryArg {
    /// Links to other brokers: neighbour, address, cost, uptime, traffic.
    Links,
    /// Reachable brokers with hops and next hop, and advertised interest.
    Routes,
    /// Every broker-wide counter.
    Stats,
    /// Every client connection with its subscriptions, filters and queue depths.
    Subscriptions,
}

impl From<QueryArg> for AdminQuery {
    fn from(query: QueryArg) -> AdminQuery {
        match query {
            QueryArg::Links => AdminQuery::Links,
            QueryArg::Routes => AdminQuery::Routes,
            QueryArg::Stats => AdminQuery::Stats,
            QueryArg::Subscriptions => AdminQuery::Subscriptions,
        }
    }
}

/// Runs `sift admin`.
pub async fn run(args: AdminArgs) -> Result<(), CliError> {
    let query = AdminQuery::from(args.query);
    // One question, one answer: a reconnect would only hide the failure.
    let options = ClientOptions {
        name: crate::guidance::client_name("admin", None),
        reconnect: false,
        credentials: args.sign_in.credentials()?,
        tls: args.sign_in.tls()?,
        ..ClientOptions::default()
    };
    let client = Client::connect(args.server.as_str(), options).await?;
    let reply = tokio::time::timeout(REPLY_TIMEOUT, client.admin(query)).await;
    client.close().await;
    let document = reply.map_err(|_| ClientError::Timeout(REPLY_TIMEOUT))??;
    let text = if args.json {
        // Printing a parsed value cannot fail; fall back to the compact form anyway.
        serde_json::to_string_pretty(&document).unwrap_or_else(|_| document.to_string())
    } else {
        admin_table::render(query, &document)
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}").map_err(CliError::Output)
}
