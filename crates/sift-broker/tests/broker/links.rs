//! Broker links: real brokers in one process, linked over loopback on
//! ephemeral ports, building and repairing their topology.

use std::net::SocketAddr;

use bytes::BytesMut;
use sift_broker::config::RoutingMode;
use sift_broker::RunningBroker;
use sift_proto::link::{LinkDecoder, LinkFrame, LinkHello, LINK_PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::PATIENCE;
use crate::network_support::{eventually, link_addr, linked_broker, names, node, shutdown_all};

/// A broker named `name` in `cluster`, accepting links on an ephemeral port
/// (or on `listen`) and dialling `dials`.
async fn node_at(name: &str, cluster: &str, listen: Option<SocketAddr>, dials: &[SocketAddr]) -> RunningBroker {
    linked_broker(name, cluster, listen, dials, RoutingMode::Interest).await
}

/// Waits until every broker knows exactly `expected` and the hop counts
/// `hops` (from, to, links) hold.
async fn converged_with_hops(brokers: &[&RunningBroker], expected: &[&str], hops: &[(usize, &str, u32)]) {
    let expected = names(expected);
    eventually("every broker knows the whole topology", || {
        brokers.iter().all(|broker| broker.topology_brokers() == expected)
            && hops.iter().all(|(from, to, count)| brokers[*from].shortest_path_hops(to) == Some(*count))
    })
    .await;
}

#[tokio::test]
async fn a_chain_of_three_learns_every_name_and_distance() {
    let first = node("a", &[]).await;
    let second = node("b", &[link_addr(&first)]).await;
    let third = node("c", &[link_addr(&second)]).await;
    let hops = [(0, "b", 1), (0, "c", 2), (1, "a", 1), (1, "c", 1), (2, "a", 2), (2, "b", 1), (0, "a", 0)];
    converged_with_hops(&[&first, &second, &third], &["a", "b", "c"], &hops).await;
    let middle: Vec<String> = second.links().into_iter().map(|link| link.neighbour).collect();
    assert_eq!(middle, names(&["a", "c"]));
    assert!(second.links().iter().all(|link| link.cost == 1));
    assert_eq!(second.stats().links_up, 2);
    assert!(first.stats().link_states_received > 0);
    shutdown_all(vec![third, second, first]).await;
}

#[tokio::test]
async fn a_cluster_mismatch_is_refused_clearly_and_never_up() {
    let acceptor = node_at("b", "two", None, &[]).await;
    let dialler = node_at("a", "one", None, &[link_addr(&acceptor)]).await;
    eventually("the dialler records the refusal", || !dialler.link_failures().is_empty()).await;
    let failure = &dialler.link_failures()[0];
    for expected in ["cluster_mismatch", "\"one\"", "\"two\"", "\"a\"", "\"b\""] {
        assert!(failure.error.contains(expected), "{expected} missing from: {}", failure.error);
    }
    eventually("the acceptor counts its refusal", || acceptor.stats().link_errors > 0).await;
    assert!(dialler.stats().link_connect_failures > 0);
    for broker in [&acceptor, &dialler] {
        assert_eq!(broker.stats().links_established, 0);
        assert!(broker.links().is_empty());
        assert_eq!(broker.topology_brokers(), names(&[broker.network_name()]));
    }
    shutdown_all(vec![dialler, acceptor]).await;
}

#[tokio::test]
async fn a_cut_link_is_forgotten_and_a_restarted_broker_relinks() {
    let first = node("a", &[]).await;
    let third = node("c", &[]).await;
    let third_addr = link_addr(&third);
    let second = node("b", &[link_addr(&first), third_addr]).await;
    converged_with_hops(&[&first, &second, &third], &["a", "b", "c"], &[(0, "c", 2)]).await;

    third.shutdown().await;
    converged_with_hops(&[&first, &second], &["a", "b"], &[(0, "b", 1)]).await;
    assert_eq!(first.shortest_path_hops("c"), None);
    let neighbours: Vec<String> = second.links().into_iter().map(|link| link.neighbour).collect();
    assert_eq!(neighbours, names(&["a"]));
    let failures_before = second.stats().link_connect_failures;
    eventually("the dialler keeps trying the stopped broker", || {
        second.stats().link_connect_failures > failures_before
    })
    .await;

    let restarted = node_at("c", "test", Some(third_addr), &[]).await;
    converged_with_hops(&[&first, &second, &restarted], &["a", "b", "c"], &[(0, "c", 2), (2, "a", 2)]).await;
    assert!(second.link_failures().is_empty(), "{:?}", second.link_failures());
    shutdown_all(vec![restarted, second, first]).await;
}

#[tokio::test]
async fn a_ring_of_four_converges() {
    let first = node("a", &[]).await;
    let second = node("b", &[link_addr(&first)]).await;
    let third = node("c", &[link_addr(&second)]).await;
    let fourth = node("d", &[link_addr(&third), link_addr(&first)]).await;
    let hops = [(0, "b", 1), (0, "c", 2), (0, "d", 1), (1, "d", 2), (2, "a", 2), (3, "b", 2)];
    converged_with_hops(&[&first, &second, &third, &fourth], &["a", "b", "c", "d"], &hops).await;
    for broker in [&first, &second, &third, &fourth] {
        assert_eq!(broker.links().len(), 2, "{} has two neighbours", broker.network_name());
    }
    shutdown_all(vec![fourth, third, second, first]).await;
}

#[tokio::test]
async fn brokers_that_dial_each_other_keep_one_link_quietly() {
    // The second broker's link address is chosen first, so that each can
    // be told to dial the other.
    let reserved = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let second_addr = reserved.local_addr().expect("bound");
    drop(reserved);
    let first = node_at("a", "test", None, &[second_addr]).await;
    let second = node_at("b", "test", Some(second_addr), &[link_addr(&first)]).await;
    converged_with_hops(&[&first, &second], &["a", "b"], &[(0, "b", 1), (1, "a", 1)]).await;
    // The losing dialler finds the link up and says so, as a routine outcome.
    eventually("a dialler finds the link already up", || {
        [&first, &second]
            .iter()
            .any(|broker| broker.link_failures().iter().any(|failure| failure.error.contains("already_linked")))
    })
    .await;
    for broker in [&first, &second] {
        assert_eq!(broker.links().len(), 1, "{} has one link", broker.network_name());
        assert_eq!(broker.stats().link_errors, 0, "{}: nothing counted as an error", broker.network_name());
        let failures = broker.link_failures();
        assert!(failures.iter().all(|failure| !failure.error.contains("duplicate_broker_name")), "{failures:?}");
    }
    shutdown_all(vec![second, first]).await;
}

#[tokio::test]
async fn duplicate_names_and_self_links_are_refused() {
    let first = node("a", &[]).await;
    let twin = node("a", &[link_addr(&first)]).await;
    eventually("the twin is refused", || {
        twin.link_failures().iter().any(|failure| failure.error.contains("duplicate_broker_name"))
    })
    .await;
    let own = node("s", &[]).await;
    let looped = node_at("s", "test", None, &[link_addr(&own)]).await;
    eventually("the self-link is refused", || !looped.link_failures().is_empty()).await;
    for broker in [&first, &twin, &own, &looped] {
        assert_eq!(broker.stats().links_established, 0);
    }
    shutdown_all(vec![looped, own, twin, first]).await;
}

/// Reads link frames until `want` accepts one, within [`PATIENCE`].
async fn read_until(stream: &mut TcpStream, buf: &mut BytesMut, want: impl Fn(&LinkFrame) -> bool) -> LinkFrame {
    let mut decoder = LinkDecoder::new(1 << 20);
    let read = async {
        loop {
            while let Some(frame) = decoder.decode(buf).expect("valid link frames") {
                if want(&frame) {
                    return frame;
                }
            }
            assert!(stream.read_buf(buf).await.expect("read") > 0, "broker closed the link early");
        }
    };
    tokio::time::timeout(PATIENCE, read).await.expect("frame in time")
}

#[tokio::test]
async fn a_silent_link_is_dropped_after_three_ping_intervals() {
    let broker = node("a", &[]).await;
    let mut stream = TcpStream::connect(link_addr(&broker)).await.expect("connect");
    let hello = LinkHello {
        version_min: 1,
        version_max: LINK_PROTOCOL_VERSION,
        cluster: "test".into(),
        broker: "mute".into(),
        link_cost: 3,
    };
    let mut bytes = BytesMut::new();
    LinkFrame::Hello(hello).encode(&mut bytes).expect("encode");
    stream.write_all(&bytes).await.expect("write");
    let mut buf = BytesMut::new();
    let welcome = read_until(&mut stream, &mut buf, |frame| matches!(frame, LinkFrame::Welcome(_))).await;
    assert!(matches!(welcome, LinkFrame::Welcome(ref welcome) if welcome.broker == "a"));
    eventually("the link is up", || broker.links().len() == 1).await;
    assert_eq!(broker.links()[0].cost, 3, "the larger of the two costs");
    read_until(&mut stream, &mut buf, |frame| matches!(frame, LinkFrame::Ping { .. })).await;
    // Never answer: the broker must give up on its own.
    eventually("the silent link is dropped", || broker.links().is_empty()).await;
    assert_eq!(broker.stats().links_up, 0);
    assert!(broker.stats().link_errors > 0);
    broker.shutdown().await;
}
