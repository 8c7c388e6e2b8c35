//! `sift bench fjm2 --transport multicast`: the FJM2 throughput benchmark
//! with no broker, over NORM reliable multicast on a LAN this run makes.
//!
//! **The LAN.** A Linux bridge in a namespace of its own, a sender
//! namespace and one namespace per receiver plugged into it (veth pairs,
//! multicast snooping off), as hosts on one switch. Needs root and
//! iproute2; everything is removed at the end. A software bridge forwards
//! in the sending process's context: the kernel time of copying each
//! packet to every port is charged to the sender, which a hardware switch
//! would do instead. So the sender's user time (its own work, NORM's
//! included) is reported beside its total.
//!
//! **A point.** N `sift sub --multicast --format none` receivers join, one
//! `sift pub --multicast --mode reliable` sends M messages of one size as
//! fast as NORM's rate allows, then flushes. The sender's rate is the
//! payload it sent over the time to its flush; a receiver's rate is the
//! payload over the time from the start of the sender to its last message.
//! Each process reports its own CPU time, so CPU per message is the
//! sender's (or the receivers' mean) over M. Loss comes from NORM's own
//! hooks: each receiver drops that share of the packets it receives, and
//! repairs bring them back.
//!
//! A watcher host on the same bridge (`sift watch`) counts what crosses
//! it: repairs (retransmitted data packets) and NACKs.
//!
//! The thesis's claim to test: with multicast the sender's cost does not
//! grow with the receivers, where a broker sends one copy per subscriber.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::plot::Plot;
use crate::report::{Cell, Report, Table};
use crate::shaped::ip;

/// The group and port of the run.
const GROUP: &str = "239.255.90.1:7900";
/// Longest a receiver may take after the sender started.
const RECEIVE_PATIENCE: Duration = Duration::from_secs(120);

/// The grid of a multicast run.
#[derive(Debug, Clone)]
pub struct MulticastPlan {
    /// Message sizes.
    pub sizes: Vec<usize>,
    /// Receiver counts.
    pub fanouts: Vec<usize>,
    /// Receive loss percentages.
    pub losses: Vec<f64>,
    /// Payload bytes per point (messages = this over the size, bounded).
    pub bytes: u64,
    /// NORM transmit rate, Mbit/s.
    pub rate_mbit: f64,
}

/// One point measured.
#[derive(Debug, Clone)]
struct Point {
    size: usize,
    receivers: usize,
    loss: f64,
    messages: u64,
    sender_seconds: f64,
    sender_cpu_ms: f64,
    sender_user_ms: f64,
    receiver_seconds_max: f64,
    receiver_cpu_ms_mean: f64,
    received_min: u64,
    repairs: u64,
    nacks: u64,
}

/// A process killed when dropped (a point that fails leaves none behind).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The namespaces of the LAN, removed on drop.
struct Lan {
    namespaces: Vec<String>,
}

impl Drop for Lan {
    fn drop(&mut self) {
        for namespace in &self.namespaces {
            let _ = ip(&["netns", "del", namespace]);
        }
    }
}

impl Lan {
    /// A bridge with a sender and `receivers` receivers: (namespace, interface) each.
    fn build(receivers: usize) -> Result<(Lan, Vec<(String, String)>), BenchError> {
        let prefix = format!("sfb{}", std::process::id());
        let mut lan = Lan { namespaces: Vec::new() };
        let switch = format!("{prefix}s");
        lan.add_namespace(&switch)?;
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"])?;
        ip(&["-n", &switch, "link", "set", "br0", "up"])?;
        // A switch runs no firewall: keep the bridge's packets out of
        // netfilter (per namespace; absent without br_netfilter, then moot).
        let _ = Command::new("ip")
            .args(["netns", "exec", &switch, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=0"])
            .stderr(Stdio::null())
            .status();
        let mut hosts = Vec::new();
        for index in 0..=receivers {
            let host = format!("{prefix}h{index}");
            lan.add_namespace(&host)?;
            let (end, port) = (format!("{host}l"), format!("{host}p"));
            ip(&["link", "add", &end, "netns", &host, "type", "veth", "peer", "name", &port, "netns", &switch])?;
            ip(&["-n", &switch, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &switch, "link", "set", &port, "up"])?;
            ip(&["-n", &host, "addr", "add", &format!("10.90.0.{}/24", index + 1), "dev", &end])?;
            ip(&["-n", &host, "link", "set", &end, "up"])?;
            ip(&["-n", &host, "route", "add", "224.0.0.0/4", "dev", &end])?;
            hosts.push((host, end));
        }
        Ok((lan, hosts))
    }

    fn add_namespace(&mut self, name: &str) -> Result<(), BenchError> {
        let _ = ip(&["netns", "del", name]);
        ip(&["netns", "add", name])?;
        self.namespaces.push(name.to_string());
        ip(&["-n", name, "link", "set", "lo", "up"])
    }
}

/// `sift ARGS` in `namespace`, with standard output and error piped.
fn sift_in(namespace: &str, args: &[String]) -> Result<Child, BenchError> {
    let binary = std::env::current_exe().map_err(|source| BenchError::File { path: "sift".into(), source })?;
    Command::new("ip")
        .args(["netns", "exec", namespace])
        .arg(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| BenchError::Usage(format!("cannot run sift in {namespace}: {error}")))
}

/// The number before `unit` in `text` (`"... 12.5 ms CPU"`).
fn number_before(text: &str, unit: &str) -> Option<f64> {
    let before = text.split(unit).next()?;
    before.rsplit([' ', '(']).find(|word| !word.is_empty())?.parse().ok()
}

/// Runs every point and adds the tables and plots.
pub fn run(plan: &MulticastPlan, report: &mut Report, quiet: bool) -> Result<(), BenchError> {
    let most = plan.fanouts.iter().copied().max().unwrap_or(1);
    // One host more than the most receivers: the watcher, always the last.
    let (lan, hosts) = Lan::build(most + 1)?;
    let mut points = Vec::new();
    for &loss in &plan.losses {
        for &size in &plan.sizes {
            for &receivers in &plan.fanouts {
                if !quiet {
                    eprintln!("fjm2 multicast: {size} B to {receivers} receivers, {loss} % loss");
                }
                points.push(measure(&hosts, plan, size, receivers, loss)?);
            }
        }
    }
    drop(lan);
    fill(report, &points)
}

/// One point: receivers join, the sender sends, everyone reports.
fn measure(
    hosts: &[(String, String)],
    plan: &MulticastPlan,
    size: usize,
    receivers: usize,
    loss: f64,
) -> Result<Point, BenchError> {
    let messages = (plan.bytes / size.max(1) as u64).clamp(1_000, 200_000);
    let common = |host: &(String, String)| -> Vec<String> {
        let rate = plan.rate_mbit.to_string();
        ["--multicast", GROUP, "--iface", &host.1, "--topic", "bench.fjm2", "--rate-mbit", &rate]
            .iter()
            .map(|text| text.to_string())
            .collect()
    };
    let mut subscribers = Vec::new();
    for host in &hosts[1..=receivers] {
        let mut args: Vec<String> = vec!["sub".into()];
        args.extend(common(host));
        args.extend(["--count".into(), messages.to_string(), "--format".into(), "none".into()]);
        args.extend(["--norm-rx-loss".into(), loss.to_string()]);
        let mut child = sift_in(&host.0, &args)?;
        let mut stderr = BufReader::new(child.stderr.take().ok_or(BenchError::Usage("stderr".into()))?);
        let mut line = String::new();
        let _ = stderr.read_line(&mut line);
        if !line.starts_with("subscribed") {
            return Err(BenchError::Usage(format!("a receiver did not join: {line:?}")));
        }
        subscribers.push((Killed(child), stderr));
    }
    let mut args: Vec<String> = vec!["pub".into()];
    args.extend(common(&hosts[0]));
    args.extend(
        ["--size", &size.to_string(), "--count", &messages.to_string(), "--mode", "reliable"].map(String::from),
    );
    let watcher = start_watcher(hosts.last().ok_or(BenchError::Usage("no hosts".into()))?)?;
    let started = Instant::now();
    let mut sender = Killed(sift_in(&hosts[0].0, &args)?);
    let mut sent = String::new();
    let _ = BufReader::new(sender.0.stdout.take().ok_or(BenchError::Usage("stdout".into()))?).read_line(&mut sent);
    let sender_seconds =
        number_before(&sent, " s,").ok_or_else(|| BenchError::Usage(format!("sender said {sent:?}")))?;
    let sender_cpu_ms = number_before(&sent, " ms CPU").unwrap_or(0.0);
    let sender_user_ms = number_before(&sent, " ms user").unwrap_or(0.0);
    let (mut seconds_max, mut cpu_total, mut received_min) = (0.0f64, 0.0, u64::MAX);
    for (mut child, stderr) in subscribers {
        let status = wait_bounded(&mut child.0, started + RECEIVE_PATIENCE);
        seconds_max = seconds_max.max(started.elapsed().as_secs_f64());
        let last = stderr
            .lines()
            .map_while(Result::ok)
            .filter(|line| line.starts_with("multicast:"))
            .last()
            .unwrap_or_default();
        cpu_total += number_before(&last, " ms CPU").unwrap_or(0.0);
        let received = number_before(&last, " received").unwrap_or(0.0) as u64;
        received_min = received_min.min(if status { received } else { received.min(messages - 1) });
    }
    let _ = sender.0.wait();
    let (repairs, nacks) = stop_watcher(watcher)?;
    Ok(Point {
        size,
        receivers,
        loss,
        messages,
        sender_seconds,
        sender_cpu_ms,
        sender_user_ms,
        receiver_seconds_max: seconds_max,
        receiver_cpu_ms_mean: cpu_total / receivers as f64,
        received_min,
        repairs,
        nacks,
    })
}

/// `sift watch` on `host`, once it has joined the group.
fn start_watcher(host: &(String, String)) -> Result<Killed, BenchError> {
    let args = ["watch", "--multicast", GROUP, "--iface", &host.1, "--interval-ms", "0", "--json"];
    let mut child = sift_in(&host.0, &args.map(String::from))?;
    let mut line = String::new();
    if let Some(stderr) = child.stderr.as_mut() {
        let _ = BufReader::new(stderr).read_line(&mut line);
    }
    if !line.starts_with("watching") {
        return Err(BenchError::Usage(format!("the watcher did not start: {line:?}")));
    }
    Ok(Killed(child))
}

/// Stops the watcher (SIGTERM) and reads its totals: repairs and NACKs.
fn stop_watcher(mut watcher: Killed) -> Result<(u64, u64), BenchError> {
    let pid = watcher.0.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let mut text = String::new();
    if let Some(stdout) = watcher.0.stdout.as_mut() {
        let _ = std::io::Read::read_to_string(stdout, &mut text);
    }
    let tally: serde_json::Value = serde_json::from_str(text.trim())
        .map_err(|error| BenchError::Usage(format!("watcher said {text:?}: {error}")))?;
    let repairs = tally["senders"]
        .as_object()
        .map(|senders| senders.values().filter_map(|sender| sender["repairs"].as_u64()).sum())
        .unwrap_or(0);
    Ok((repairs, tally["nacks"].as_u64().unwrap_or(0)))
}

/// Waits for `child` until `deadline`; kills it then. True when it exited by itself.
fn wait_bounded(child: &mut Child, deadline: Instant) -> bool {
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.success();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

const COLUMNS: [(&str, &str); 13] = [
    ("size", "B"),
    ("receivers", ""),
    ("loss", "%"),
    ("messages", ""),
    ("sender_mbit_per_s", "Mbit/s"),
    ("receiver_mbit_per_s", "Mbit/s"),
    ("sender_cpu_us_per_msg", "µs"),
    ("sender_user_us_per_msg", "µs"),
    ("receiver_cpu_us_per_msg", "µs"),
    ("received_min", "msgs"),
    ("sender_seconds", "s"),
    ("repairs", "packets"),
    ("nacks", "packets"),
];

fn fill(report: &mut Report, points: &[Point]) -> Result<(), BenchError> {
    let title = "Sift over NORM multicast, no broker: sender and slowest receiver against size, receivers and loss";
    let mut table = Table::new("multicast", title, &COLUMNS);
    for point in points {
        let bits = (point.messages * point.size as u64 * 8) as f64;
        table.push_row(vec![
            point.size.into(),
            point.receivers.into(),
            point.loss.into(),
            point.messages.into(),
            (bits / point.sender_seconds.max(1e-9) / 1e6).into(),
            (bits / point.receiver_seconds_max.max(1e-9) / 1e6).into(),
            (point.sender_cpu_ms * 1e3 / point.messages as f64).into(),
            (point.sender_user_ms * 1e3 / point.messages as f64).into(),
            (point.receiver_cpu_ms_mean * 1e3 / point.messages as f64).into(),
            point.received_min.into(),
            point.sender_seconds.into(),
            point.repairs.into(),
            point.nacks.into(),
        ])?;
    }
    let plot = Plot::lines(
        "multicast.svg",
        "Sender throughput over NORM against size, by receivers",
        &table,
        "size",
        "sender_mbit_per_s",
    )?
    .only("loss", Cell::from(0.0))
    .series(&["receivers"])
    .log_x(4.0)
    .labels("message size (B)", "sender Mbit/s");
    report.plots.push(plot);
    report.tables.push(table);
    report.note("The sender's rate is taken up to its flush (every receiver has had its chance at repairs); a receiver's from the sender's start to its last message, so it includes starting the sender's process.");
    Ok(())
}
