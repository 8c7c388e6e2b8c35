//! Smoke test of `sift bench`: every scenario runs with `--quick` as a user
//! would run it, and writes result files that parse and hold what they
//! should. A new scenario adds one test that calls [`smoke`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const SIFT: &str = env!("CARGO_BIN_EXE_sift");

/// Longest a `--quick` run may take here (debug build, shared machine).
const QUICK_RUN_LIMIT: Duration = Duration::from_secs(120);

#[test]
fn pubsub_quick() {
    let report = smoke("pubsub", &[]);
    let row = &report["tables"][0]["rows"][0];
    // Columns 7 and 8 are `published` and `delivered`: nothing is lost on an idle loopback.
    assert_eq!((row[7].as_u64(), row[8].as_u64()), (Some(20_000), Some(20_000)), "{row}");
}

#[test]
fn pubsub_quick_latency_through_a_chain() {
    smoke("pubsub", &["--latency", "--chain", "2", "--count", "200"]);
}

#[test]
fn fjm2_quick() {
    smoke("fjm2", &[]);
}

#[test]
fn dds_quick() {
    let report = smoke("dds", &[]);
    let points = &report["tables"][0];
    let columns: Vec<&str> =
        points["columns"].as_array().expect("columns").iter().filter_map(|c| c["name"].as_str()).collect();
    let rows = points["rows"].as_array().expect("rows");
    // 3 fans × 2 modes × 2 policies × 2 sizes × 2 rates.
    assert_eq!(rows.len(), 48);
    for row in rows {
        let number = |name: &str| row[columns.iter().position(|c| *c == name).expect(name)].as_f64().expect(name);
        // --quick publishes for 0.25 s, at least 20 messages per publisher.
        let per_publisher = (number("rate_hz") * 0.25).round().max(20.0);
        assert_eq!(number("published"), per_publisher * number("publishers"), "{row}");
        let owed = number("published") * number("subscribers");
        // Every delivery owed arrived or was overwritten or dropped by its queue's policy, as the broker counted.
        assert_eq!(number("delivered") + number("dropped"), owed, "{row}");
        if row[columns.iter().position(|c| *c == "policy").expect("policy")] == "block" {
            assert_eq!(number("delivered"), owed, "keep-all loses nothing at these rates: {row}");
        }
        assert!(number("latency_us_max") >= number("latency_us_mean") && number("latency_us_mean") > 0.0, "{row}");
        assert!(number("delivery_overhead_bytes_per_msg") > 0.0 && number("subscriber_cpu_us_per_msg") > 0.0, "{row}");
    }
}

#[test]
fn jbi_quick() {
    let report = smoke("jbi", &[]);
    let table = |name: &str| {
        let table = report["tables"].as_array().expect("tables").iter().find(|table| table["name"] == name);
        let table = table.unwrap_or_else(|| panic!("no table {name}"));
        let columns: Vec<&str> =
            table["columns"].as_array().expect("columns").iter().map(|c| c["name"].as_str().expect("name")).collect();
        let at = move |row: &serde_json::Value, column: &str| {
            row[columns.iter().position(|c| *c == column).expect(column)].clone()
        };
        (table["rows"].as_array().expect("rows").clone(), at)
    };
    let experiments = [
        ("fast_slow", 2),
        ("steady_increase", 3),
        ("payload_increase", 2),
        ("steady_payload", 6),
        ("heavy_load", 1),
        ("saturation", 2),
    ];
    for (name, count) in experiments {
        let (rows, at) = table(name);
        assert_eq!(rows.len(), count, "{name}");
        for row in &rows {
            // Each publisher published the level's 250 objects; sync delivery lost nothing.
            assert_eq!(
                at(row, "objects_published").as_u64(),
                Some(250 * at(row, "publishers").as_u64().expect("publishers")),
                "{name} {row}"
            );
            assert!(at(row, "objects_delivered").as_u64().is_some_and(|delivered| delivered > 0), "{name} {row}");
            assert_eq!((at(row, "lost").as_u64(), at(row, "incomplete").as_u64()), (Some(0), Some(0)), "{name} {row}");
        }
        // Fast and slow runs (and all payloads) deliver the same objects: the filters decide, not the link.
        let delivered = |row: &serde_json::Value| at(row, "objects_delivered");
        if name != "steady_increase" && name != "steady_payload" {
            assert!(rows.iter().all(|row| delivered(row) == delivered(&rows[0])), "{name}");
        }
    }
    // The report's figures stand beside Sift's at level 250 (Fig. 28: 78.70 objects/s, software, fast).
    let (rows, at) = table("fast_slow");
    assert_eq!(at(&rows[0], "seed_software_per_s").as_f64(), Some(78.70373));
    // The slow subscriber's emulated 100 Mbit/s link was busy for its deliveries, and the run waited for it.
    let (rows, at) = table("slow_impact");
    let (slow_s, busy_s) =
        (at(&rows[0], "slow_time_s").as_f64().expect("slow"), at(&rows[0], "slow_link_busy_s").as_f64().expect("busy"));
    assert!(busy_s > 0.0 && slow_s >= busy_s, "{slow_s} s for {busy_s} s on the link");
    let (rows, at) = table("sync_async_comparison");
    assert_eq!(rows.len(), 4 + 3, "Sift's sync and async runs, fast and slow, and Table 2's three rows");
    assert_eq!(at(&rows[0], "lost").as_u64(), Some(0), "sync loses nothing");
}

#[test]
fn ges_quick() {
    let report = smoke("ges", &[]);
    let latency = &report["tables"][0];
    let cell = |row: &serde_json::Value, name: &str| row[column(latency, name)].clone();
    let rows = latency["rows"].as_array().expect("rows");
    // Base 100 % and 10 % and shortcut 10 %, two rates and two sizes each, three measuring subscribers.
    assert_eq!(rows.len(), 3 * 2 * 2 * 3);
    for row in rows {
        let (published, matching) = (cell(row, "published"), cell(row, "matching_percent"));
        let expected = published.as_u64().expect("published") * matching.as_u64().expect("matching") / 100;
        assert_eq!(cell(row, "expected").as_u64(), Some(expected), "{row}");
        assert_eq!(cell(row, "received").as_u64(), Some(expected), "every matching event arrives: {row}");
        assert_eq!(cell(row, "background_lost").as_u64(), Some(0), "{row}");
        let hops = match (cell(row, "variant").as_str(), cell(row, "broker").as_str()) {
            (_, Some("22")) => 1,
            (_, Some("1")) => 2,
            (Some("base"), Some("10")) => 9,
            (Some("shortcut"), Some("10")) => 4,
            other => panic!("no measuring subscriber at {other:?}"),
        };
        assert_eq!(cell(row, "server_hops").as_u64(), Some(hops), "{row}");
    }
    // §8.3.4: each persistent client receives every event it missed while away.
    let persistent = report["tables"].as_array().expect("tables").iter().find(|table| table["name"] == "persistent");
    let persistent = persistent.expect("the persistent-client table");
    let rows = persistent["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 3, "one persistent client at each measuring broker");
    for row in rows {
        let missed = row[column(persistent, "missed")].as_u64();
        assert_eq!(row[column(persistent, "received")].as_u64(), missed, "{row}");
        assert!(missed > Some(0), "{row}");
    }
}

#[test]
fn nb_quick() {
    let report = smoke("nb", &[]);
    let transit = &report["tables"][0];
    let rows = transit["rows"].as_array().expect("rows");
    // Chains of 1 and 3 brokers, 64 B and 4 KB, 50 messages each, every one timed.
    assert_eq!(rows.len(), 4);
    for row in rows {
        for name in ["published", "delivered", "samples"] {
            assert_eq!(row[column(transit, name)].as_u64(), Some(50), "{name}: {row}");
        }
    }
    assert_eq!(report["tables"][1]["name"], "per_hop");
}

#[test]
fn nb_tds_quick() {
    if let Err(reason) = sift_bench::toxiproxy::find_server() {
        assert!(std::env::var("SIFT_REQUIRE_TOXIPROXY").as_deref() != Ok("1"), "Toxiproxy is required: {reason}");
        eprintln!("notice: skipping sift bench nb tds: {reason}");
        return;
    }
    let report = smoke("nb", &["tds"]);
    let jitter = &report["tables"][0];
    let rows = jitter["rows"].as_array().expect("rows");
    // Two streams, three release modes.
    assert_eq!(rows.len(), 6);
    for row in rows {
        assert_eq!(row[column(jitter, "sent")], row[column(jitter, "received")], "nothing lost: {row}");
        assert!(row[column(jitter, "output_jitter_us_mean")].as_f64() > Some(0.0), "{row}");
    }
}

#[test]
fn nb_transfer_quick() {
    let report = smoke("nb", &["transfer"]);
    let transfer = &report["tables"][0];
    let rows = transfer["rows"].as_array().expect("rows");
    // 1 and 16 MiB, over 1 and 4 streams, on loopback.
    assert_eq!(rows.len(), 4);
    for row in rows {
        assert!(row[column(transfer, "throughput")].as_f64() > Some(0.0), "{row}");
    }
}

#[test]
fn persist_quick() {
    let report = smoke("persist", &["--count", "200", "--read-count", "500"]);
    let publishing = &report["tables"][0];
    // Policies always and os, 128 B, one publisher, windows 1 and 256.
    assert_eq!(publishing["rows"].as_array().map(Vec::len), Some(4));
    for row in publishing["rows"].as_array().expect("rows") {
        assert!(row[column(publishing, "msgs/s")].as_f64() > Some(0.0), "{row}");
    }
    let reading = &report["tables"][1];
    let rows = reading["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 6, "two replays and a query in each of the four languages");
    for row in rows {
        assert_eq!(row[column(reading, "messages")].as_u64(), Some(500), "every stored message read: {row}");
    }
}

#[test]
fn http_quick() {
    let report = smoke("http", &[]);
    let tables = report["tables"].as_array().expect("tables");
    let [publishing, events, watching] = [0, 1, 2].map(|index| &tables[index]);
    assert_eq!(publishing["rows"].as_array().map(Vec::len), Some(2), "1 and 8 connections");
    for row in publishing["rows"].as_array().expect("rows") {
        assert!(row[column(publishing, "requests/s")].as_f64() > Some(0.0), "{row}");
    }
    assert!(events["rows"][0][column(events, "events/s")].as_f64() > Some(0.0), "{events}");
    let rows = watching["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "one round without and with the watcher");
    assert!(rows.iter().all(|row| row[column(watching, "msgs/s")].as_f64() > Some(0.0)), "{watching}");
    assert!(rows[1][column(watching, "scrapes")].as_u64() >= Some(1), "the watcher polled: {watching}");
}

#[test]
fn stomp_quick() {
    let report = smoke("stomp", &[]);
    let table = &report["tables"][0];
    let rows = table["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4, "plain1, sel1000, sel1000none, pubonly");
    for row in rows {
        assert!(row[column(table, "publish msgs/s")].as_f64() > Some(0.0), "{row}");
    }
    let delivered = |mode: &str| {
        let row = rows.iter().find(|row| row[column(table, "mode")] == mode).expect(mode);
        row[column(table, "deliveries")].as_u64()
    };
    assert_eq!(delivered("plain1"), Some(2000), "every plain message delivered");
    assert!(delivered("sel1000") > Some(2000), "about 10 selectors match each message");
    assert_eq!(delivered("sel1000none"), Some(0));
}

#[test]
fn jbi_quick_over_http() {
    let report = smoke("jbi", &["--via", "http", "--experiments", "fast_slow"]);
    assert_eq!(
        report["parameters"].as_array().map(|parameters| {
            parameters.iter().any(|parameter| parameter["name"] == "via" && parameter["value"] == "http")
        }),
        Some(true),
        "{}",
        report["parameters"]
    );
    let table = report["tables"].as_array().expect("tables").iter().find(|table| table["name"] == "fast_slow");
    let table = table.expect("the fast/slow table");
    for row in table["rows"].as_array().expect("rows") {
        assert_eq!(row[column(table, "lost")].as_u64(), Some(0), "{row}");
    }
}

/// Index of the column called `name` in a table of a report.
fn column(table: &serde_json::Value, name: &str) -> usize {
    let columns = table["columns"].as_array().expect("columns");
    columns.iter().position(|column| column["name"] == name).unwrap_or_else(|| panic!("no column {name}"))
}

/// A child process killed when the test ends, pass or fail.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `sift bench SCENARIO --quick --json --out DIR EXTRA…` and checks its
/// output and files; returns the parsed report.
fn smoke(scenario: &str, extra: &[&str]) -> serde_json::Value {
    let out = scratch_dir(scenario, extra);
    // Output goes to files: a pipe nobody reads while the run lasts could fill and stall it.
    let (stdout_path, stderr_path) = (out.with_extension("stdout"), out.with_extension("stderr"));
    let stdout = std::fs::File::create(&stdout_path).expect("stdout file");
    let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
    let child = Command::new(SIFT)
        .args(["bench", scenario, "--quick", "--json", "--out"])
        .arg(&out)
        .args(extra)
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .expect("sift bench starts");
    let mut running = Running(child);
    let status = wait(&mut running, scenario);
    let stderr = std::fs::read_to_string(&stderr_path).expect("stderr");
    assert!(status.success(), "sift bench {scenario} failed: {stderr}");
    assert!(stderr.contains(&format!("results written to {}", out.display())), "{stderr}");

    let printed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stdout_path).expect("stdout")).expect("--json prints JSON");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("results.json"))
            .expect("results.json is JSON");
    assert_eq!(printed, report, "--json prints the report written to results.json");
    assert_eq!(report["scenario"], scenario);
    assert!(report["command"].as_str().expect("command").starts_with(&format!("sift bench {scenario} --quick")));
    check_tables(&report, &out);
    check_plots(&report, &out);
    assert!(std::fs::read_to_string(out.join("results.md")).expect("results.md").starts_with("# "));
    std::fs::remove_dir_all(&out).expect("clean up");
    std::fs::remove_file(&stdout_path).expect("clean up");
    std::fs::remove_file(&stderr_path).expect("clean up");
    report
}

/// Every table has rows of one number or text per column, and every cell
/// is a line of `results.csv`.
fn check_tables(report: &serde_json::Value, out: &Path) {
    let tables = report["tables"].as_array().expect("tables");
    assert!(!tables.is_empty(), "no tables");
    let csv = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("table,row,column,unit,value"));
    let mut cells = 0;
    for table in tables {
        let name = table["name"].as_str().expect("table name");
        let columns = table["columns"].as_array().expect("columns").len();
        let rows = table["rows"].as_array().expect("rows");
        assert!(!rows.is_empty(), "table {name} has no rows");
        assert!(rows.iter().all(|row| row.as_array().map(Vec::len) == Some(columns)), "ragged table {name}");
        cells += rows.len() * columns;
        assert!(out.join(format!("{name}.csv")).is_file(), "{name}.csv missing");
    }
    // Cells hold no line breaks in these scenarios, so one cell is one line.
    assert_eq!(lines.count(), cells);
    // The first table holds measured numbers, not only labels.
    let first = &tables[0]["rows"][0];
    assert!(first.as_array().expect("row").iter().any(|cell| cell.as_f64().is_some_and(|value| value > 0.0)));
}

/// Every plot the report lists is an SVG file.
fn check_plots(report: &serde_json::Value, out: &Path) {
    let plots = report["plots"].as_array().expect("plots");
    assert!(!plots.is_empty(), "no plots");
    for plot in plots {
        let file = plot["file"].as_str().expect("plot file");
        let svg = std::fs::read_to_string(out.join(file)).expect("plot written");
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{file} is not an SVG");
        assert!(svg.contains(plot["title"].as_str().expect("title")), "{file} lacks its title");
    }
}

fn wait(running: &mut Running, scenario: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + QUICK_RUN_LIMIT;
    loop {
        if let Some(status) = running.0.try_wait().expect("wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "sift bench {scenario} --quick did not finish in {QUICK_RUN_LIMIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A fresh directory per scenario and arguments, so that tests can run in parallel.
fn scratch_dir(scenario: &str, extra: &[&str]) -> PathBuf {
    let variant: String = extra.concat().chars().filter(char::is_ascii_alphanumeric).collect();
    let dir = std::env::temp_dir().join(format!("sift-bench-smoke-{scenario}-{variant}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
