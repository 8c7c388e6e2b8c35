//! A disposable lab of network namespaces joined by veth pairs, and the
//! processes started inside them. Dropping the lab kills every process by
//! its PID, deletes every namespace (which removes the veth ends in it) and
//! removes the brokers' data directory, whether the test passed or not.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Output, Stdio};

/// Names of namespaces and interfaces start with this, the test's PID and
/// the lab's number, so that concurrent runs and tests never collide. With
/// a PID of at most 7 digits, a lab number of one and two letters after
/// them, an interface name stays within the kernel's 15 bytes.
const NAME_PREFIX: &str = "sft";

/// Why the lab cannot run here: not root, no `ip`, or namespaces refused.
/// Found out once per process, since the tests of one binary ask at once.
pub fn unavailable_reason() -> Option<String> {
    static REASON: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    REASON.get_or_init(probe).clone()
}

fn probe() -> Option<String> {
    if !is_root() {
        return Some("the test is not running as root".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(output) if output.status.success() => {}
        _ => return Some("the `ip` command (iproute2) is missing".into()),
    }
    let probe = format!("{NAME_PREFIX}{}p", std::process::id());
    if let Err(error) = ip(&["netns", "add", &probe]) {
        return Some(format!("network namespaces cannot be created: {error}"));
    }
    let _ = ip(&["netns", "del", &probe]);
    None
}

/// True when the effective user is root, read from `/proc/self/status`.
fn is_root() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status.lines().find_map(|line| line.strip_prefix("Uid:")?.split_whitespace().nth(1));
    effective == Some("0")
}

/// Runs `ip` with `args`; the error is its standard error.
fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip").args(args).output().map_err(|error| format!("cannot run ip: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim()))
}

/// Namespaces, veth pairs and processes, all removed on drop.
pub struct Lab {
    prefix: String,
    namespaces: Vec<String>,
    processes: Vec<Child>,
    data_dir: PathBuf,
}

impl Lab {
    /// An empty lab named after this process.
    pub fn new() -> Lab {
        // Tests of one binary run at once: each lab gets a number of its own.
        static LABS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let number = LABS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prefix = format!("{NAME_PREFIX}{}{number}", std::process::id());
        let data_dir = std::env::temp_dir().join(format!("sift-netns-{}-{number}", std::process::id()));
        Lab { prefix, namespaces: Vec::new(), processes: Vec::new(), data_dir }
    }

    /// Creates namespace `<prefix><letter>` with its loopback up and
    /// returns its name.
    pub fn namespace(&mut self, letter: char) -> String {
        let name = format!("{}{letter}", self.prefix);
        // A namespace left by a killed run whose PID was reused goes first.
        let _ = ip(&["netns", "del", &name]);
        ip(&["netns", "add", &name]).expect("the namespace is created");
        self.namespaces.push(name.clone());
        ip(&["-n", &name, "link", "set", "lo", "up"]).expect("loopback comes up");
        name
    }

    /// Joins namespaces `left` and `right` with a veth pair whose ends get
    /// the /30 addresses `left_address` and `right_address`, and brings both
    /// up. Each end is created directly in its namespace.
    pub fn connect(&mut self, left: &str, left_address: &str, right: &str, right_address: &str) {
        let end_in = |namespace: &str, peer: &str| format!("{namespace}{}", peer.chars().last().unwrap_or('x'));
        let (left_end, right_end) = (end_in(left, right), end_in(right, left));
        let add = ["link", "add", &left_end, "netns", left, "type", "veth", "peer", "name", &right_end, "netns", right];
        ip(&add).expect("the veth pair is created");
        for (namespace, end, address) in [(left, &left_end, left_address), (right, &right_end, right_address)] {
            let cidr = format!("{address}/30");
            ip(&["-n", namespace, "addr", "add", &cidr, "dev", end]).expect("the address is set");
            ip(&["-n", namespace, "link", "set", end, "up"]).expect("the veth end comes up");
        }
    }

    /// Creates bridge `name` in namespace `switch` (multicast snooping off,
    /// so that every port gets every group, as a hub would) and brings it up.
    pub fn bridge(&mut self, switch: &str, name: &str) {
        ip(&["-n", switch, "link", "add", name, "type", "bridge", "mcast_snooping", "0"])
            .expect("the bridge is created");
        ip(&["-n", switch, "link", "set", name, "up"]).expect("the bridge comes up");
    }

    /// Plugs namespace `host` into `bridge` of `switch` with a veth pair;
    /// the host end gets `address/24` and a route for multicast groups.
    /// Returns the host end's name.
    pub fn attach(&mut self, host: &str, address: &str, switch: &str, bridge: &str) -> String {
        let host_end = format!("{host}l");
        let port = format!("{host}p");
        let add = ["link", "add", &host_end, "netns", host, "type", "veth", "peer", "name", &port, "netns", switch];
        ip(&add).expect("the veth pair is created");
        ip(&["-n", switch, "link", "set", &port, "master", bridge]).expect("the port joins the bridge");
        ip(&["-n", switch, "link", "set", &port, "up"]).expect("the port comes up");
        ip(&["-n", host, "addr", "add", &format!("{address}/24"), "dev", &host_end]).expect("the address is set");
        ip(&["-n", host, "link", "set", &host_end, "up"]).expect("the host end comes up");
        ip(&["-n", host, "route", "add", "224.0.0.0/4", "dev", &host_end]).expect("the multicast route is set");
        host_end
    }

    /// Joins `namespace` to this (the test's own) namespace with a veth
    /// pair: this end gets `here/30`, the namespace's end `there/30`.
    pub fn uplink(&mut self, namespace: &str, here: &str, there: &str) {
        let (here_end, there_end) = (format!("{namespace}u"), format!("{namespace}d"));
        ip(&["link", "add", &here_end, "type", "veth", "peer", "name", &there_end, "netns", namespace])
            .expect("the uplink is created");
        ip(&["addr", "add", &format!("{here}/30"), "dev", &here_end]).expect("this end's address is set");
        ip(&["link", "set", &here_end, "up"]).expect("this end comes up");
        ip(&["-n", namespace, "addr", "add", &format!("{there}/30"), "dev", &there_end])
            .expect("the far address is set");
        ip(&["-n", namespace, "link", "set", &there_end, "up"]).expect("the far end comes up");
    }

    /// The directory for broker `name`'s data, inside the lab's.
    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.data_dir.join(name)
    }

    /// Starts `program args` in `namespace` with its standard output piped
    /// and standard error as given; the lab kills it on drop. Returns its
    /// index for [`Lab::process`].
    pub fn spawn(&mut self, namespace: &str, program: &str, args: &[&str], stderr: Stdio) -> usize {
        let child = Command::new("ip")
            .args(["netns", "exec", namespace, program])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("the process starts");
        self.processes.push(child);
        self.processes.len() - 1
    }

    /// The process started as `index`.
    pub fn process(&mut self, index: usize) -> &mut Child {
        &mut self.processes[index]
    }

    /// The standard output of process `index`, taken once.
    pub fn stdout(&mut self, index: usize) -> ChildStdout {
        self.processes[index].stdout.take().expect("standard output is piped and not taken yet")
    }

    /// Runs `program args` in `namespace` to completion.
    pub fn run(&self, namespace: &str, program: &str, args: &[&str]) -> Output {
        Command::new("ip").args(["netns", "exec", namespace, program]).args(args).output().expect("the command runs")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // `ip netns exec` replaces itself with the program, so each PID is
        // the program's own.
        for process in &mut self.processes {
            let _ = process.kill();
            let _ = process.wait();
        }
        for namespace in &self.namespaces {
            if let Err(error) = ip(&["netns", "del", namespace]) {
                eprintln!("netns test: could not delete namespace {namespace}: {error}");
            }
        }
        let _ = fs::remove_dir_all(&self.data_dir);
    }
}
