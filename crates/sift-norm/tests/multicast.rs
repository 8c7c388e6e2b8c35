//! NORM through the real library, in a network namespace this test makes:
//! the test re-runs itself inside `ip netns exec` (a namespace with its
//! loopback up and a multicast route on it), so that no packet leaves the
//! namespace, and removes the namespace afterwards. Needs root and
//! iproute2; without them it prints a notice and passes, unless
//! `SIFT_REQUIRE_NETNS=1` (as in `scripts/test`). Loss comes from the
//! library's own hooks (`NormSetTxLoss`, `NormSetRxLoss`).

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use sift_norm::{Event, Session, SessionOptions};

/// Set in the re-run inside the namespace.
const INNER: &str = "SIFT_NORM_TEST_INNER";
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 255, 77, 1);
const MESSAGES: usize = 300;
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs test `name` of this binary inside a fresh namespace; false when
/// namespaces are not available here (after a notice).
fn in_namespace(name: &str) -> bool {
    if std::env::var_os(INNER).is_some() {
        return true;
    }
    let namespace = format!("sftn{}{}", std::process::id(), name.len());
    let ip = |args: &[&str]| Command::new("ip").args(args).status().map(|status| status.success()).unwrap_or(false);
    if !ip(&["netns", "add", &namespace]) {
        assert!(std::env::var("SIFT_REQUIRE_NETNS").as_deref() != Ok("1"), "network namespaces are required");
        eprintln!("notice: skipping {name}: cannot create a network namespace (root and iproute2 needed)");
        return false;
    }
    let ready = ip(&["-n", &namespace, "link", "set", "lo", "up"])
        && ip(&["-n", &namespace, "link", "set", "lo", "multicast", "on"])
        && ip(&["-n", &namespace, "route", "add", "224.0.0.0/4", "dev", "lo"]);
    let status = ready.then(|| {
        let exe = std::env::current_exe().expect("the test binary");
        Command::new("ip")
            .args(["netns", "exec", &namespace])
            .arg(exe)
            .args(["--exact", name, "--nocapture"])
            .env(INNER, "1")
            .status()
    });
    ip(&["netns", "del", &namespace]);
    let status = status.expect("the namespace is set up").expect("the test re-runs");
    assert!(status.success(), "{name} failed inside the namespace");
    false
}

fn options(node_id: u32, port: u16) -> SessionOptions {
    SessionOptions { loopback: true, interface: Some("lo".into()), ..SessionOptions::new(GROUP, port, node_id) }
}

/// Collects `count` messages from `session`, in order, failing after PATIENCE.
async fn collect(mut session: Session, count: usize) -> (Vec<Bytes>, Session) {
    let mut got = Vec::with_capacity(count);
    while got.len() < count {
        let event = tokio::time::timeout(PATIENCE, session.next_event()).await.expect("messages keep coming");
        match event.expect("session open") {
            Event::Message { data, .. } => got.push(data),
            Event::Lost { sender } => panic!("a message of {sender} was lost"),
            _ => {}
        }
    }
    (got, session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_reaches_two_receivers_under_injected_loss() {
    if !in_namespace("every_message_reaches_two_receivers_under_injected_loss") {
        return;
    }
    let port = 17_001;
    let clean = Session::open(&options(2, port), false, true).expect("receiver");
    let lossy =
        Session::open(&SessionOptions { rx_loss_percent: 5.0, ..options(3, port) }, false, true).expect("receiver");
    let sender =
        Session::open(&SessionOptions { tx_loss_percent: 2.0, ..options(1, port) }, true, false).expect("sender");
    let receiving = tokio::spawn(async move { tokio::join!(collect(clean, MESSAGES), collect(lossy, MESSAGES)) });
    let messages: Vec<Bytes> = (0..MESSAGES).map(|index| Bytes::from(format!("{index:05}").repeat(700))).collect();
    for message in &messages {
        sender.send(0, Bytes::from_static(b"t"), message.clone()).await;
    }
    sender.flush().await;
    let ((clean, _clean), (lossy, lossy_session)) = receiving.await.expect("receivers");
    // NORM completes objects in the order their repairs finish, not in
    // the order they were sent: a receiver that wants order restores it
    // (the Sift multicast transport does, by publisher sequence).
    let sorted = |mut got: Vec<Bytes>| {
        got.sort();
        got
    };
    assert!(sorted(clean) == messages, "the clean receiver got every message once");
    assert!(sorted(lossy) == messages, "the lossy receiver got every message once, repaired");
    assert_eq!(lossy_session.counters().aborted.load(std::sync::atomic::Ordering::Relaxed), 0);
}
