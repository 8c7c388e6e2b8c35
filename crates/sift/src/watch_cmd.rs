//! `sift watch --multicast GROUP:PORT`: a passive member of a NORM group
//! that counts what crosses it, per sender: data, repairs (inferred, see
//! `sift_norm::packet`), NACKs, commands, and packets it never saw. It
//! sends nothing, so it can watch a LAN's traffic beside its senders and
//! receivers; the totals come out on SIGINT or SIGTERM.

use std::io::Write;
use std::net::SocketAddrV4;
use std::time::Duration;

use clap::Args;
use sift_norm::{Tally, Watcher};

use crate::CliError;

/// Arguments of `sift watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The multicast group to watch (GROUP:PORT).
    #[arg(long, value_name = "GROUP:PORT")]
    pub multicast: SocketAddrV4,
    /// The interface to join on.
    #[arg(long, value_name = "NAME")]
    pub iface: Option<String>,
    /// Print each sender's counts every this many milliseconds (0: only
    /// the totals at the end).
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Print the totals as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Watches until SIGINT or SIGTERM, then prints the totals.
pub async fn run(args: WatchArgs) -> Result<(), CliError> {
    let mut watcher =
        Watcher::open(args.multicast, args.iface.as_deref()).map_err(|error| CliError::Usage(error.to_string()))?;
    let stop = crate::broker_cmd::Signals::install()?.wait();
    tokio::pin!(stop);
    let period = Duration::from_millis(args.interval_ms.max(1));
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    eprintln!("watching {}", args.multicast);
    loop {
        tokio::select! {
            () = &mut stop => break,
            recorded = watcher.record_next() => recorded.map_err(|error| CliError::Usage(error.to_string()))?,
            _ = ticks.tick(), if args.interval_ms > 0 => print_lines(&watcher.tally)?,
        }
    }
    if args.json {
        let text = serde_json::to_string(&watcher.tally).map_err(|error| CliError::Usage(error.to_string()))?;
        write_out(&text)
    } else {
        print_lines(&watcher.tally)
    }
}

/// One line per sender, then one of the group's totals.
fn print_lines(tally: &Tally) -> Result<(), CliError> {
    let mut text = String::new();
    for (id, sender) in &tally.senders {
        text.push_str(&format!(
            "sender {id:08x}: {} packets, {} bytes, {} data, {} repairs, {} nacks, {} commands, {} unseen, {} restarts\n",
            sender.packets,
            sender.bytes,
            sender.data,
            sender.repairs,
            sender.nacks,
            sender.commands,
            sender.unseen,
            sender.restarts
        ));
    }
    text.push_str(&format!(
        "group: {} repairs, {} nacks, {} acks, {} malformed, {} untracked",
        tally.repairs(),
        tally.nacks,
        tally.acks,
        tally.malformed,
        tally.untracked
    ));
    write_out(&text)
}

fn write_out(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").and_then(|()| out.flush()).map_err(CliError::Output)
}
