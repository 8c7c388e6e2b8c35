//! Parsing, every validation error, variants, broker configurations, and
//! the hop counts of the GES topology shipped in `topologies/ges22.toml`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{routing_topology_of, TopologyError, TopologyFile, TopologyFileError, TopologyLink};

const TRIANGLE: &str = r#"
description = "a line that a variant closes"
network_cluster = "demo"
brokers = [
  { name = "a", cluster = "left", super_cluster = "west" },
  { name = "b" },
  { name = "c", cluster = "right" },
]
links = [
  { between = ["a", "b"] },
  { between = ["b", "c"], cost = 3 },
]
[variants.closed]
description = "closes the triangle"
add = [{ between = ["c", "a"] }]
[variants.swapped]
remove = [{ between = ["c", "b"] }]
add = [{ between = ["a", "c"], cost = 2 }]
"#;

fn triangle() -> TopologyFile {
    TopologyFile::parse(TRIANGLE).expect("the example is valid")
}

/// The error for `text`, which must be invalid.
fn error_of(text: &str) -> TopologyError {
    TopologyFile::parse(text).expect_err("the topology is invalid")
}

/// A file of brokers a, b and c with `links` and `rest` (variants).
fn with_links(links: &str, rest: &str) -> String {
    format!("brokers = [{{ name = \"a\" }}, {{ name = \"b\" }}, {{ name = \"c\" }}]\nlinks = [{links}]\n{rest}")
}

fn ges22_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../topologies/ges22.toml")
}

#[test]
fn a_topology_parses_with_labels_default_costs_and_variants() {
    let file = triangle();
    assert_eq!(file.description(), Some("a line that a variant closes"));
    assert_eq!(file.network_cluster(), "demo");
    assert_eq!(file.broker_names(), ["a", "b", "c"]);
    assert_eq!(file.brokers()[0].cluster.as_deref(), Some("left"));
    assert_eq!(file.brokers()[0].super_cluster.as_deref(), Some("west"));
    assert_eq!(file.brokers()[1].cluster, None);
    assert_eq!(file.variant_names(), ["closed", "swapped"]);
    let base = file.links(None).expect("base");
    assert_eq!(base, [TopologyLink::new("a", "b"), TopologyLink { cost: 3, ..TopologyLink::new("b", "c") }]);
    let closed = file.links(Some("closed")).expect("variant");
    assert_eq!(closed.len(), 3);
    assert!(closed[2].joins("a", "c"));
    let swapped = file.links(Some("swapped")).expect("variant");
    assert_eq!(swapped, [TopologyLink::new("a", "b"), TopologyLink { cost: 2, ..TopologyLink::new("a", "c") }]);
    let default_cluster = TopologyFile::parse("brokers = [{ name = \"x\" }]").expect("valid");
    assert_eq!(default_cluster.network_cluster(), crate::config::DEFAULT_CLUSTER);
    assert!(default_cluster.links(None).expect("base").is_empty());
}

#[test]
fn unknown_variants_are_errors_naming_the_known_ones() {
    let error = triangle().links(Some("open")).expect_err("no such variant");
    assert!(matches!(&error, TopologyError::UnknownVariant { name, .. } if name == "open"), "{error:?}");
    assert_eq!(error.to_string(), "no variant \"open\" in the topology (variants: closed, swapped)");
    let none = TopologyFile::parse("brokers = [{ name = \"x\" }]").expect("valid");
    assert!(none.routing_topology(Some("v")).expect_err("unknown").to_string().contains("variants: none"));
}

#[test]
fn malformed_text_and_unknown_keys_are_parse_errors() {
    assert!(matches!(error_of("brokers = ["), TopologyError::Parse { .. }));
    let misspelt = error_of("brokers = [{ name = \"a\", clutser = \"x\" }]");
    assert!(misspelt.to_string().contains("clutser"), "{misspelt}");
    let missing = error_of("links = []");
    assert!(missing.to_string().contains("brokers"), "{missing}");
}

#[test]
fn broker_errors_name_the_entries() {
    assert!(matches!(error_of("brokers = []"), TopologyError::NoBrokers));
    let empty = error_of("brokers = [{ name = \"a\" }, { name = \"\" }]");
    assert!(matches!(&empty, TopologyError::BadBrokerName { place, .. } if place == "brokers entry 2"), "{empty:?}");
    let duplicate = error_of("brokers = [{ name = \"a\" }, { name = \"b\" }, { name = \"a\" }]");
    assert_eq!(duplicate.to_string(), "broker \"a\" is listed twice, at brokers entry 1 and at brokers entry 3");
}

#[test]
fn link_errors_name_the_link_and_the_broker() {
    let unknown = error_of(&with_links(r#"{ between = ["a", "b"] }, { between = ["b", "z"] }"#, ""));
    assert_eq!(unknown.to_string(), "links entry 2: broker \"z\" is not among the topology's brokers");
    let itself = error_of(&with_links(r#"{ between = ["c", "c"] }"#, ""));
    assert!(matches!(&itself, TopologyError::SelfLink { name, .. } if name == "c"), "{itself:?}");
    let twice = error_of(&with_links(r#"{ between = ["a", "b"] }, { between = ["b", "a"], cost = 2 }"#, ""));
    assert_eq!(twice.to_string(), "links entry 2: the link b - a is already given at links entry 1");
    let free = error_of(&with_links(r#"{ between = ["a", "b"], cost = 0 }"#, ""));
    assert!(matches!(free, TopologyError::ZeroCost { .. }), "{free:?}");
}

#[test]
fn variant_errors_name_the_variant_and_the_entry() {
    let base = r#"{ between = ["a", "b"] }"#;
    let unknown = error_of(&with_links(base, "[variants.v]\nadd = [{ between = [\"a\", \"q\"] }]"));
    assert_eq!(unknown.to_string(), "variant \"v\", add entry 1: broker \"q\" is not among the topology's brokers");
    let twice = error_of(&with_links(base, "[variants.v]\nadd = [{ between = [\"b\", \"a\"] }]"));
    assert!(matches!(&twice, TopologyError::DuplicateLink { first, .. } if first == "links entry 1"), "{twice:?}");
    let missing = error_of(&with_links(base, "[variants.v]\nremove = [{ between = [\"b\", \"c\"] }]"));
    assert_eq!(
        missing.to_string(),
        "variant \"v\", remove entry 1: cannot remove b - c, which is not a link of the base topology"
    );
    let itself = error_of(&with_links(base, "[variants.v]\nadd = [{ between = [\"a\", \"a\"] }]"));
    assert!(matches!(itself, TopologyError::SelfLink { .. }), "{itself:?}");
    let readded = with_links(
        base,
        "[variants.v]\nremove = [{ between = [\"a\", \"b\"] }]\nadd = [{ between = [\"a\", \"b\"], cost = 4 }]",
    );
    let file = TopologyFile::parse(&readded).expect("a removed link may come back with another cost");
    assert_eq!(file.links(Some("v")).expect("variant")[0].cost, 4);
}

#[test]
fn loading_a_missing_or_invalid_file_names_it() {
    let missing = PathBuf::from("no/such/topology.toml");
    let error = TopologyFile::load(&missing).expect_err("missing file");
    assert!(matches!(error, TopologyFileError::Read { .. }));
    assert!(error.to_string().contains("no/such/topology.toml"), "{error}");
    let invalid = std::env::temp_dir().join(format!("sift-topology-invalid-{}.toml", std::process::id()));
    std::fs::write(&invalid, "brokers = []").expect("temporary file written");
    let error = TopologyFile::load(&invalid).expect_err("invalid file");
    let _ = std::fs::remove_file(&invalid);
    assert!(matches!(error, TopologyFileError::Invalid { source: TopologyError::NoBrokers, .. }), "{error:?}");
}

#[test]
fn a_broker_dials_only_the_neighbours_started_before_it() {
    let file = triangle();
    let links = file.links(Some("closed")).expect("variant");
    let address = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let mut started = HashMap::new();
    let first = file.broker_config("a", &links, &started);
    assert!(first.network.links.is_empty());
    assert_eq!((first.name.as_str(), first.network.name.as_str(), first.network.cluster.as_str()), ("a", "a", "demo"));
    assert_eq!(first.listen.port(), 0);
    assert_eq!(first.network.link_listen.map(|listen| listen.port()), Some(0));
    started.insert("a".to_string(), address(7001));
    started.insert("b".to_string(), address(7002));
    let last = file.broker_config("c", &links, &started);
    let dials: Vec<(String, u32)> = last.network.links.iter().map(|link| (link.address.clone(), link.cost)).collect();
    assert_eq!(dials, [("127.0.0.1:7002".to_string(), 3), ("127.0.0.1:7001".to_string(), 1)]);
    last.validate().expect("the configuration is valid");
}

#[tokio::test]
async fn a_started_network_links_every_broker() {
    let file = triangle();
    let brokers = file
        .start_network(Some("closed"), |config| config.network.link_reconnect_delay_max_ms = 200)
        .await
        .expect("the network starts");
    let names: Vec<&str> = brokers.iter().map(|broker| broker.network_name()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !brokers.iter().all(|broker| broker.links().len() == 2 && broker.topology_brokers().len() == 3) {
        assert!(tokio::time::Instant::now() < deadline, "the triangle did not come up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(brokers[0].shortest_path_hops("c"), Some(1));
    for broker in brokers {
        broker.shutdown().await;
    }
}

#[tokio::test]
async fn a_broker_that_cannot_start_is_named() {
    let file = triangle();
    let error = file
        .start_network(None, |config| {
            if config.network.name == "b" {
                config.network.link_ping_interval_ms = 0;
            }
        })
        .await
        .expect_err("broker b refuses its configuration");
    assert!(error.to_string().starts_with("cannot start broker \"b\" of the topology"), "{error}");
}

#[test]
fn ges22_has_the_seed_topologys_hop_counts() {
    // Server hops (brokers an event passes through) are links + 1.
    let file = TopologyFile::load(&ges22_path()).expect("topologies/ges22.toml is valid");
    assert_eq!(file.brokers().len(), 22);
    assert!(file.brokers().iter().all(|broker| broker.cluster.is_some() && broker.super_cluster.is_some()));
    let base = file.routing_topology(None).expect("base").tree("22");
    assert_eq!(base.len(), 22, "every broker is reachable");
    let hops = |broker: &str| base.hops(broker).map(|links| links + 1);
    assert_eq!((hops("22"), hops("1"), hops("10"), hops("7")), (Some(1), Some(2), Some(9), Some(6)));
    let path: Vec<String> = base.path("10").iter().map(|name| name.to_string()).collect();
    assert_eq!(path, ["22", "1", "2", "4", "5", "7", "8", "9", "10"]);
    let shortcut = file.routing_topology(Some("shortcut")).expect("variant").tree("22");
    let hops = |broker: &str| shortcut.hops(broker).map(|links| links + 1);
    assert_eq!((hops("22"), hops("1"), hops("10")), (Some(1), Some(2), Some(4)));
}

#[test]
fn ges22_needs_both_shortcut_links() {
    let file = TopologyFile::load(&ges22_path()).expect("topologies/ges22.toml is valid");
    let names = file.broker_names();
    let added = &file.variant("shortcut").expect("the variant exists").add;
    assert_eq!(added.len(), 2);
    for (kept, expected_server_hops) in [(&added[0], 5), (&added[1], 8)] {
        let mut links = file.links(None).expect("base");
        links.push(kept.clone());
        let tree = routing_topology_of(&names, &links).expect("valid").tree("22");
        assert_eq!(tree.hops("10").map(|links| links + 1), Some(expected_server_hops), "{kept:?} alone");
    }
}
