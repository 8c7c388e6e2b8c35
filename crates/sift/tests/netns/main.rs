//! Brokers in separate network namespaces, linked over veth pairs, as on
//! separate hosts: `sift broker`, `sift sub`, `sift pub` and `sift admin`
//! run inside the namespaces with `ip netns exec`.
//!
//! Three namespaces in a line, west - middle - east, one broker in each;
//! middle dials west and east dials middle over the veth addresses. A
//! message published in west reaches a subscriber in east across both
//! links, and `sift admin links` in middle shows both neighbours.
//!
//! Needs root and iproute2. Without them the test prints a notice and
//! passes, unless `SIFT_REQUIRE_NETNS=1` (as in `scripts/test`), when it
//! fails saying what is missing.

mod lab;
mod multicast;

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};

use lab::Lab;

pub(crate) const SIFT: &str = env!("CARGO_BIN_EXE_sift");

/// Every broker serves its clients here, inside its own namespace.
pub(crate) const CLIENT_LISTEN: &str = "127.0.0.1:7400";
/// West's end of the west - middle pair; west accepts links on it.
const WEST_ADDRESS: &str = "10.77.1.1";
/// Middle's end of the west - middle pair.
const MIDDLE_WEST_ADDRESS: &str = "10.77.1.2";
/// Middle's end of the middle - east pair; middle accepts links on it.
const MIDDLE_EAST_ADDRESS: &str = "10.77.2.1";
/// East's end of the middle - east pair.
const EAST_ADDRESS: &str = "10.77.2.2";
/// The port links are accepted on.
const LINK_PORT: u16 = 7500;
/// Longest wait for links, interest and the delivery.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// Returns the lab when namespaces can be used here; otherwise fails when
/// `SIFT_REQUIRE_NETNS=1`, or prints a notice and returns `None`.
pub(crate) fn lab_or_skip() -> Option<Lab> {
    let Some(reason) = lab::unavailable_reason() else {
        return Some(Lab::new());
    };
    if std::env::var("SIFT_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("SIFT_REQUIRE_NETNS=1 but the network-namespace test cannot run: {reason}");
    }
    eprintln!("notice: skipping the network-namespace test: {reason} (set SIFT_REQUIRE_NETNS=1 to make this an error)");
    None
}

/// Polls `check` every 100 ms until it holds, failing after [`PATIENCE`].
pub(crate) fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts broker `name` in `namespace`, accepting links on `link_listen`
/// when given and dialling `dial` when given; returns once it listens.
pub(crate) fn start_broker(lab: &mut Lab, namespace: &str, name: &str, link_listen: Option<&str>, dial: Option<&str>) {
    let data = lab.data_dir(name).display().to_string();
    // Links between namespaces are not authenticated yet: the broker
    // serves them beyond loopback only when told to.
    let mut args = vec!["broker", "--name", name, "--listen", CLIENT_LISTEN, "--data", &data, "--allow-anonymous"];
    let link_listen = link_listen.map(|address| format!("{address}:{LINK_PORT}"));
    let dial = dial.map(|address| format!("{address}:{LINK_PORT}"));
    if let Some(address) = &link_listen {
        args.extend(["--link-listen", address]);
    }
    if let Some(address) = &dial {
        args.extend(["--link", address]);
    }
    let index = lab.spawn(namespace, SIFT, &args, Stdio::null());
    let mut first = String::new();
    BufReader::new(lab.stdout(index)).read_line(&mut first).expect("the broker prints its address");
    assert_eq!(first.trim(), format!("sift broker listening on {CLIENT_LISTEN}"), "broker {name} started");
}

/// `sift admin QUERY --json` against the broker of `namespace`, parsed;
/// `None` while the broker does not answer.
fn admin_json(lab: &Lab, namespace: &str, query: &str) -> Option<serde_json::Value> {
    let output = lab.run(namespace, SIFT, &["admin", "--server", CLIENT_LISTEN, query, "--json"]);
    if !output.status.success() {
        return None;
    }
    serde_json::from_slice(&output.stdout).ok()
}

/// The values of `field` in the objects of `list` in `document`, sorted.
fn fields(document: &serde_json::Value, list: &str, field: &str) -> Vec<String> {
    let entries = document[list].as_array().cloned().unwrap_or_default();
    let mut values: Vec<String> = entries.iter().filter_map(|entry| entry[field].as_str().map(String::from)).collect();
    values.sort_unstable();
    values
}

/// Starts `sift sub` in `namespace` for one message and waits until it is
/// subscribed; returns its index in the lab.
fn start_subscriber(lab: &mut Lab, namespace: &str, topic: &str) -> usize {
    start_subscriber_counting(lab, namespace, topic, 1)
}

/// Starts `sift sub` in `namespace` for `count` messages and waits until it
/// is subscribed; returns its index in the lab.
pub(crate) fn start_subscriber_counting(lab: &mut Lab, namespace: &str, topic: &str, count: u32) -> usize {
    let count = count.to_string();
    let args = ["sub", "--server", CLIENT_LISTEN, "--topic", topic, "--count", &count, "--format", "json"];
    let index = lab.spawn(namespace, SIFT, &args, Stdio::piped());
    let stderr = lab.process(index).stderr.take().expect("standard error is piped");
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).expect("the subscriber reports");
    assert!(line.starts_with("subscribed to"), "{line}");
    index
}

/// Waits for process `index` to exit successfully and returns its output.
pub(crate) fn finished_output(lab: &mut Lab, index: usize) -> String {
    Output::of(lab, index).finished(lab, index)
}

/// A process's standard output, read as it comes on a thread of its own
/// (a subscriber whose output nobody read would stall on a full pipe).
pub(crate) struct Output(std::sync::mpsc::Receiver<String>);

impl Output {
    /// Starts reading process `index`'s standard output to its end.
    pub(crate) fn of(lab: &mut Lab, index: usize) -> Output {
        let mut stdout = lab.stdout(index);
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            let _ = sender.send(text);
        });
        Output(receiver)
    }

    /// Waits until the process closed its output (it exits after its
    /// `--count`), at most [`PATIENCE`]; checks that it exited 0 and
    /// returns the output.
    pub(crate) fn finished(self, lab: &mut Lab, index: usize) -> String {
        let output = self.0.recv_timeout(PATIENCE).expect("the subscriber received its messages in time");
        let status = lab.process(index).wait().expect("the process can be waited for");
        assert!(status.success(), "the subscriber exits 0, not {status}");
        output
    }
}

#[test]
fn a_message_published_in_one_namespace_reaches_a_subscriber_in_another() {
    let Some(mut lab) = lab_or_skip() else { return };
    let west = lab.namespace('w');
    let middle = lab.namespace('m');
    let east = lab.namespace('e');
    lab.connect(&west, WEST_ADDRESS, &middle, MIDDLE_WEST_ADDRESS);
    lab.connect(&middle, MIDDLE_EAST_ADDRESS, &east, EAST_ADDRESS);
    start_broker(&mut lab, &west, "ns-west", Some(WEST_ADDRESS), None);
    start_broker(&mut lab, &middle, "ns-middle", Some(MIDDLE_EAST_ADDRESS), Some(WEST_ADDRESS));
    start_broker(&mut lab, &east, "ns-east", None, Some(MIDDLE_EAST_ADDRESS));

    eventually("the middle broker has both links up", || {
        admin_json(&lab, &middle, "links")
            .is_some_and(|links| fields(&links, "links", "neighbour") == ["ns-east", "ns-west"])
    });
    let table = lab.run(&middle, SIFT, &["admin", "--server", CLIENT_LISTEN, "links"]);
    assert!(table.status.success(), "{}", String::from_utf8_lossy(&table.stderr));
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.starts_with("broker ns-middle"), "{table}");
    for shown in ["ns-west", &format!("{WEST_ADDRESS}:{LINK_PORT}"), "ns-east", EAST_ADDRESS] {
        assert!(table.contains(shown), "the links table shows {shown}:\n{table}");
    }

    let subscriber = start_subscriber(&mut lab, &east, "netns.>");
    eventually("west knows east's interest, two links away", || {
        admin_json(&lab, &west, "routes").is_some_and(|routes| {
            fields(&routes, "remote_interest", "broker") == ["ns-east"]
                && routes["routes"]
                    .as_array()
                    .is_some_and(|list| list.iter().any(|route| route["broker"] == "ns-east" && route["hops"] == 2))
        })
    });
    let payload = "across two veth links";
    let published =
        lab.run(&west, SIFT, &["pub", "--server", CLIENT_LISTEN, "--topic", "netns.hello", "--payload", payload]);
    assert!(published.status.success(), "{}", String::from_utf8_lossy(&published.stderr));
    let received = finished_output(&mut lab, subscriber);
    let delivery: serde_json::Value = serde_json::from_str(received.trim()).expect("one JSON delivery");
    assert_eq!(delivery["topic"], "netns.hello");
    assert_eq!(delivery["payload"], payload);
}
