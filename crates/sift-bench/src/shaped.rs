//! A bandwidth- and delay-limited path to a broker, made on this machine:
//! the broker runs in a network namespace of its own, joined to this one
//! by a veth pair shaped with `tc tbf` at a rate each way, and clients
//! reach it through Toxiproxy, which adds a one-way latency in each
//! direction. Everything is removed on drop (the broker killed by its PID,
//! the namespace deleted, which deletes the veth pair). Needs root and
//! iproute2; the kernel's `netem` is not used (not every kernel has it).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::error::BenchError;
use crate::toxiproxy::{find_server, Toxiproxy};

/// Addresses of the veth pair: this side and the broker's.
const HOST_ADDRESS: &str = "10.203.91.1";
const BROKER_ADDRESS: &str = "10.203.91.2";
/// The broker's port in its namespace.
const BROKER_PORT: u16 = 7400;
/// `tc tbf` bucket: large enough for the rate at the kernel's tick.
const TBF_BURST: &str = "1mb";
/// `tc tbf` queue limit, as the time a packet may wait.
const TBF_LATENCY: &str = "200ms";

/// The shaped path and what runs on it.
pub struct ShapedPath {
    namespace: String,
    broker: Option<Child>,
    data_dir: PathBuf,
    _toxiproxy: Toxiproxy,
    /// Where clients connect: Toxiproxy's listener in front of the broker.
    pub address: SocketAddr,
}

impl ShapedPath {
    /// Starts the broker (this same `sift` binary) behind a path of `mbit`
    /// Mbit/s each way and `latency_ms` each way.
    pub async fn start(mbit: u64, latency_ms: u64, broker_config: &[&str]) -> Result<ShapedPath, BenchError> {
        let namespace = format!("sftb{}", std::process::id());
        let host_end = format!("{namespace}h");
        let broker_end = format!("{namespace}n");
        let _ = ip(&["netns", "del", &namespace]);
        ip(&["netns", "add", &namespace])?;
        let data_dir = std::env::temp_dir().join(format!("sift-shaped-{}", std::process::id()));
        let toxiproxy = Toxiproxy::start(&find_server().map_err(BenchError::Usage)?).await?;
        let mut path = ShapedPath {
            namespace: namespace.clone(),
            broker: None,
            data_dir: data_dir.clone(),
            _toxiproxy: toxiproxy,
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        ip(&["link", "add", &host_end, "type", "veth", "peer", "name", &broker_end, "netns", &namespace])?;
        ip(&["addr", "add", &format!("{HOST_ADDRESS}/30"), "dev", &host_end])?;
        ip(&["link", "set", &host_end, "up"])?;
        ip(&["-n", &namespace, "addr", "add", &format!("{BROKER_ADDRESS}/30"), "dev", &broker_end])?;
        ip(&["-n", &namespace, "link", "set", &broker_end, "up"])?;
        ip(&["-n", &namespace, "link", "set", "lo", "up"])?;
        let rate = format!("{mbit}mbit");
        let shape =
            ["qdisc", "add", "dev", "", "root", "tbf", "rate", &rate, "burst", TBF_BURST, "latency", TBF_LATENCY];
        tc(None, &with_device(&shape, &host_end))?;
        tc(Some(&namespace), &with_device(&shape, &broker_end))?;
        path.broker = Some(start_broker(&namespace, &data_dir, broker_config)?);
        let upstream =
            SocketAddr::new(BROKER_ADDRESS.parse().map_err(|_| BenchError::Usage("address".into()))?, BROKER_PORT);
        path.address = path._toxiproxy.proxy("shaped", upstream).await?;
        for stream in ["upstream", "downstream"] {
            path._toxiproxy.add_stream_latency("shaped", stream, latency_ms, 0).await?;
        }
        Ok(path)
    }
}

impl Drop for ShapedPath {
    fn drop(&mut self) {
        if let Some(mut broker) = self.broker.take() {
            let _ = broker.kill();
            let _ = broker.wait();
        }
        let _ = ip(&["netns", "del", &self.namespace]);
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// `args` with the empty device slot filled.
fn with_device<'a>(args: &[&'a str], device: &'a str) -> Vec<&'a str> {
    args.iter().map(|arg| if arg.is_empty() { device } else { *arg }).collect()
}

/// Starts `sift broker` in `namespace` and waits for its listening line.
fn start_broker(namespace: &str, data_dir: &std::path::Path, config: &[&str]) -> Result<Child, BenchError> {
    let binary = std::env::current_exe().map_err(|source| BenchError::File { path: "sift".into(), source })?;
    let listen = format!("{BROKER_ADDRESS}:{BROKER_PORT}");
    let mut child = Command::new("ip")
        .args(["netns", "exec", namespace])
        .arg(&binary)
        .args(["broker", "--listen", &listen, "--allow-anonymous", "--http", "off", "--stomp", "off", "--mqtt", "off"])
        .args(["--amqp", "off"])
        .arg("--data")
        .arg(data_dir)
        .args(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| BenchError::Usage(format!("cannot start the broker in {namespace}: {error}")))?;
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = BufReader::new(stdout).read_line(&mut line);
    }
    if !line.contains("listening on") {
        let _ = child.kill();
        return Err(BenchError::Usage(format!("the broker in {namespace} did not start: {line:?}")));
    }
    Ok(child)
}

/// Runs `ip args`; the error carries its standard error.
pub(crate) fn ip(args: &[&str]) -> Result<(), BenchError> {
    run("ip", args)
}

/// Runs `tc args`, in `namespace` when given.
fn tc(namespace: Option<&str>, args: &[&str]) -> Result<(), BenchError> {
    match namespace {
        Some(namespace) => run("ip", &[&["netns", "exec", namespace, "tc"][..], args].concat()),
        None => run("tc", args),
    }
}

fn run(program: &str, args: &[&str]) -> Result<(), BenchError> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|error| BenchError::Usage(format!("cannot run {program} (root and iproute2 are needed): {error}")))?;
    match output.status.success() {
        true => Ok(()),
        false => Err(BenchError::Usage(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))),
    }
}
