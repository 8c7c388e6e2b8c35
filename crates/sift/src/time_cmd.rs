//! `sift time`: estimates this machine's clock offset from a broker's with
//! `TIME` exchanges, as NTP does, and prints it with its error bound.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use sift_client::{Client, ClientOptions, ClockEstimate, ClockSource};

use crate::CliError;

/// Arguments of `sift time`.
#[derive(Debug, Args)]
pub struct TimeArgs {
    /// Broker address (its client listener).
    #[arg(long, env = "SIFT_SERVER", default_value = "127.0.0.1:7400")]
    server: String,
    #[command(flatten)]
    sign_in: crate::sign_in::SignInArgs,
    /// Exchanges per estimate; the one with the shortest round trip wins.
    #[arg(long, default_value_t = 8)]
    samples: u32,
    /// Estimates to print, one per `--interval-ms`; 0 keeps going until interrupted.
    #[arg(long, default_value_t = 1)]
    count: u64,
    /// Pause between estimates.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Print each estimate as a JSON object.
    #[arg(long)]
    json: bool,
    /// Read this machine's clock shifted by this much (to see an offset found).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    clock_shift_ms: i64,
}

/// Runs `sift time`.
pub async fn run(args: TimeArgs) -> Result<(), CliError> {
    if args.samples == 0 {
        return Err(CliError::Usage("--samples must be at least 1".into()));
    }
    let clock = ClockSource::shifted(args.clock_shift_ms.saturating_mul(1_000_000));
    let options = ClientOptions {
        name: crate::guidance::client_name("time", None),
        reconnect: false,
        clock,
        clock_sync_interval: None,
        credentials: args.sign_in.credentials()?,
        tls: args.sign_in.tls()?,
        ..ClientOptions::default()
    };
    let client = Client::connect(args.server.as_str(), options).await?;
    let mut printed = 0u64;
    let outcome = loop {
        let estimate = match client.sync_clock(args.samples).await {
            Ok(estimate) => estimate,
            Err(error) => break Err(CliError::from(error)),
        };
        if let Err(error) = print(&estimate, args.json) {
            break Err(error);
        }
        printed += 1;
        if args.count != 0 && printed >= args.count {
            break Ok(());
        }
        tokio::time::sleep(Duration::from_millis(args.interval_ms)).await;
    };
    client.close().await;
    outcome
}

/// Prints one estimate: the offset is the broker's clock minus this one's.
fn print(estimate: &ClockEstimate, json: bool) -> Result<(), CliError> {
    let line = if json {
        serde_json::json!({
            "offset_ns": estimate.offset_ns,
            "round_trip_ns": estimate.round_trip_ns,
            "error_ns": estimate.error_ns,
            "samples": estimate.samples,
        })
        .to_string()
    } else {
        format!(
            "offset {:+.3} ms ± {:.3} ms (broker clock minus this one), round trip {:.3} ms, {} samples",
            estimate.offset_ns as f64 / 1e6,
            estimate.error_ns as f64 / 1e6,
            estimate.round_trip_ns as f64 / 1e6,
            estimate.samples
        )
    };
    writeln!(std::io::stdout().lock(), "{line}").map_err(CliError::Output)
}
