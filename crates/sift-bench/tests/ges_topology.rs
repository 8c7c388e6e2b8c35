//! `sift bench ges --topology FILE`: a network of the user's own, its
//! variants, and the errors for a file that lacks what the scenario needs.

use std::path::{Path, PathBuf};

use sift_bench::scenarios::ges::{self, GesArgs};
use sift_bench::CommonArgs;

/// Three brokers in a line; `closed` links the ends.
const LINE: &str = r#"
    description = "a line of three, closed into a triangle by a variant"
    brokers = [{ name = "a" }, { name = "b" }, { name = "c" }]
    links = [{ between = ["a", "b"] }, { between = ["b", "c"] }]
    [variants.closed]
    add = [{ between = ["a", "c"] }]
"#;

/// A fresh scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sift-bench-ges-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

fn args(topology: &Path, out: PathBuf) -> GesArgs {
    GesArgs {
        topology: Some(topology.to_path_buf()),
        variant: None,
        shortcut: "closed".into(),
        publisher: "a".into(),
        measure_at: vec!["a".into(), "c".into()],
        subscribers_per_broker: 1,
        rates: vec![200],
        sizes: vec![64],
        matching: vec![50],
        shortcut_matching: vec![50],
        seconds: Some(0.2),
        samples_min: 10,
        point_seconds_max: 15.0,
        replication: vec![3],
        seed: 7,
        common: CommonArgs { out: Some(out), quick: true, json: true, ..CommonArgs::default() },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topology_file_and_its_variant_are_measured_hop_by_hop() {
    let dir = scratch("line");
    let topology = dir.join("line.toml");
    std::fs::write(&topology, LINE).expect("topology written");
    let out = dir.join("out");
    ges::run(args(&topology, out.clone())).await.expect("the run succeeds");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("results")).expect("JSON");
    let latency = &report["tables"][0];
    let index = |name: &str| {
        let columns = latency["columns"].as_array().expect("columns");
        columns.iter().position(|column| column["name"] == name).expect("column")
    };
    let rows: Vec<(String, String, u64, u64, u64)> = latency["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            let text = |name: &str| row[index(name)].as_str().expect("text").to_string();
            let number = |name: &str| row[index(name)].as_u64().expect("number");
            (text("variant"), text("broker"), number("server_hops"), number("expected"), number("received"))
        })
        .collect();
    // 40 events (0.2 s at 200 msgs/s), half of them matching each subscriber.
    let expected = [("base", "a", 1), ("base", "c", 3), ("closed", "a", 1), ("closed", "c", 2)];
    assert_eq!(rows.len(), expected.len(), "{rows:?}");
    for (row, (variant, broker, hops)) in rows.iter().zip(expected) {
        assert_eq!((row.0.as_str(), row.1.as_str(), row.2), (variant, broker, hops), "{rows:?}");
        assert_eq!((row.3, row.4), (20, 20), "{rows:?}");
    }
    assert_eq!(report["parameters"][0]["value"], topology.display().to_string());
    // The persistent client of a stream kept by all three brokers got
    // every event (200 with --quick).
    let replicated = report["tables"].as_array().expect("tables").iter().find(|table| table["name"] == "replicated");
    let row = &replicated.expect("the replicated table")["rows"][0];
    assert_eq!((row[0].as_u64(), row[2].as_u64(), row[3].as_u64()), (Some(3), Some(200), Some(200)), "{row}");
    assert_eq!(row[1].as_str().map(|members| members.split(' ').count()), Some(3), "{row}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topology_without_the_brokers_or_the_variant_asked_for_is_refused() {
    let dir = scratch("refused");
    let topology = dir.join("line.toml");
    std::fs::write(&topology, LINE).expect("topology written");
    let defaults = GesArgs { publisher: "22".into(), ..args(&topology, dir.join("out")) };
    let error = ges::run(defaults).await.expect_err("no broker 22");
    assert!(error.to_string().contains(r#"has no broker "22""#), "{error}");
    assert!(error.to_string().contains("its brokers: a, b, c"), "{error}");
    let no_variant = GesArgs { shortcut: "shortcut".into(), ..args(&topology, dir.join("out")) };
    let error = ges::run(no_variant).await.expect_err("no variant shortcut");
    assert!(error.to_string().contains(r#"no variant "shortcut" (its variants: closed)"#), "{error}");
    assert!(error.to_string().contains("--shortcut none"), "{error}");
    let error = ges::run(args(&dir.join("missing.toml"), dir.join("out"))).await.expect_err("no file");
    assert!(error.to_string().contains("missing.toml"), "{error}");
    assert!(!dir.join("out").exists(), "nothing was written");
    std::fs::remove_dir_all(&dir).expect("clean up");
}
