//! The `sift` binary as a user runs it: broker, sub and pub as separate
//! processes talking over loopback.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a test waits for a line a process should print before it
/// fails and says what it was waiting for. It only turns a hang into a
/// failure that names its step: no test passes by waiting.
const STUCK_AFTER: Duration = Duration::from_secs(90);

/// `Command::output` that fails the test, naming the command, when the
/// command has not finished within [`STUCK_AFTER`] instead of hanging it.
trait OutputWithin {
    fn output_within(&mut self) -> std::io::Result<std::process::Output>;
}

impl OutputWithin for Command {
    fn output_within(&mut self) -> std::io::Result<std::process::Output> {
        let mut child = self.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let read_all = |mut pipe: Box<dyn std::io::Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                bytes
            })
        };
        let stdout = read_all(Box::new(child.stdout.take().expect("stdout")));
        let stderr = read_all(Box::new(child.stderr.take().expect("stderr")));
        let status = wait_within(&mut child, &format!("{self:?}"));
        let joined = |reader: std::thread::JoinHandle<Vec<u8>>| reader.join().unwrap_or_default();
        Ok(std::process::Output { status, stdout: joined(stdout), stderr: joined(stderr) })
    }
}

/// Waits for `child` to exit. A watchdog kills it, and the test fails
/// naming `what`, when it has not exited within [`STUCK_AFTER`]: a hang
/// becomes a failure, and nothing waits longer than the exit takes.
fn wait_within(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let (exited, exit_seen) = std::sync::mpsc::channel::<()>();
    let pid = child.id().to_string();
    let watchdog = std::thread::spawn(move || {
        let stuck = matches!(exit_seen.recv_timeout(STUCK_AFTER), Err(RecvTimeoutError::Timeout));
        if stuck {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
        stuck
    });
    let status = child.wait().expect("wait");
    let _ = exited.send(());
    assert!(!watchdog.join().unwrap_or(false), "{what} did not finish within {STUCK_AFTER:?}");
    status
}

/// The lines a child prints on one pipe, read on a thread of their own so
/// that a test waiting for one can give up (see [`STUCK_AFTER`]).
struct Lines {
    what: String,
    lines: Receiver<String>,
}

impl Lines {
    fn of(pipe: impl std::io::Read + Send + 'static, what: &str) -> Lines {
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { what: what.to_string(), lines }
    }

    /// The next line, or a failure naming the process and the step.
    fn next(&self, step: &str) -> String {
        match self.lines.recv_timeout(STUCK_AFTER) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("{} printed nothing for {STUCK_AFTER:?} ({step})", self.what),
            Err(RecvTimeoutError::Disconnected) => panic!("{} closed its output ({step})", self.what),
        }
    }

    /// Lines up to the first that contains `wanted`, which ends them.
    fn until(&self, wanted: &str) -> String {
        let mut seen = String::new();
        // A process that prints (debug lines, say) but never the wanted
        // line fails the test instead of holding it up.
        let deadline = std::time::Instant::now() + STUCK_AFTER;
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "{} never printed {wanted:?} in {STUCK_AFTER:?}; saw: {seen}",
                self.what
            );
            let line = self.next(&format!("waiting for {wanted:?}; saw: {seen}"));
            seen.push_str(&line);
            seen.push('\n');
            if line.contains(wanted) {
                return seen;
            }
        }
    }
}

const SIFT: &str = env!("CARGO_BIN_EXE_sift");

/// A child process killed when the test ends, pass or fail.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `sift broker` on an ephemeral port and returns it with its address.
fn start_broker(data: &std::path::Path) -> (Running, String) {
    start_broker_at(data, "127.0.0.1:0")
}

/// Starts `sift broker` listening on `listen` and returns it with its address.
fn start_broker_at(data: &std::path::Path, listen: &str) -> (Running, String) {
    let mut child = Command::new(SIFT)
        .args([
            "broker",
            "--listen",
            listen,
            "--http",
            "127.0.0.1:0",
            "--stomp",
            "127.0.0.1:0",
            "--mqtt",
            "127.0.0.1:0",
            "--amqp",
            "127.0.0.1:0",
            "--data",
        ])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("broker starts");
    let stdout = child.stdout.take().expect("stdout");
    let first = Lines::of(stdout, "the broker").next("its address");
    let address = first.trim().rsplit(' ').next().expect("address").to_string();
    assert!(first.starts_with("sift broker listening on 127.0.0.1:"), "{first}");
    (Running(child), address)
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sift-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Starts `sift sub` and waits until it says it is subscribed.
fn start_sub(address: &str, extra: &[&str]) -> Running {
    let mut child = Command::new(SIFT)
        .args(["sub", "--server", address])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sub starts");
    let stderr = child.stderr.take().expect("stderr");
    let line = Lines::of(stderr, "sub").next("its subscription");
    assert!(line.starts_with("subscribed to"), "{line}");
    Running(child)
}

fn wait_output(mut running: Running) -> (bool, String) {
    let status = wait_within(&mut running.0, "the process");
    let mut out = String::new();
    if let Some(stdout) = running.0.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            out.push_str(&line.expect("utf-8"));
            out.push('\n');
        }
    }
    (status.success(), out)
}

#[test]
fn pub_and_sub_round_trip_with_typed_properties_and_json_output() {
    let data = temp_dir("roundtrip");
    let (_broker, address) = start_broker(&data);
    let sub = start_sub(&address, &["--topic", "jbi.>", "--count", "2", "--format", "json"]);
    let published = Command::new(SIFT)
        .args(["pub", "--server", &address, "--topic", "jbi.basic", "--count", "2", "--mode", "reliable"])
        .args(["--prop", "n=42", "--prop", "s=\"42\"", "--prop", "f=2.5", "--prop", "b=true", "--payload", "hello"])
        .args(["--await", "delivered"])
        .output_within()
        .expect("pub runs");
    assert!(published.status.success(), "{}", String::from_utf8_lossy(&published.stderr));
    let confirms = String::from_utf8(published.stdout).expect("utf-8");
    assert_eq!(confirms, "1: delivered to 1 of 1 matched\n2: delivered to 1 of 1 matched\n");
    let (ok, out) = wait_output(sub);
    assert!(ok, "sub exits 0 after --count");
    let lines: Vec<serde_json::Value> =
        out.lines().map(|line| serde_json::from_str(line).expect("one JSON object per line")).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["topic"], "jbi.basic");
    assert_eq!(lines[0]["payload"], "hello");
    assert_eq!(lines[0]["properties"]["n"], 42);
    assert_eq!(lines[0]["properties"]["s"], "42");
    assert_eq!(lines[0]["properties"]["f"], 2.5);
    assert_eq!(lines[0]["properties"]["b"], true);
    assert_eq!(lines[0]["priority"], 4);
    assert!(lines[0]["timestamp_ns"].as_u64().expect("number") > 0);
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn pub_reports_no_subscribers_and_bad_arguments_fail_clearly() {
    let data = temp_dir("nosubs");
    let (_broker, address) = start_broker(&data);
    let published =
        Command::new(SIFT).args(["pub", "--server", &address, "--topic", "nobody.here"]).output_within().expect("runs");
    assert!(published.status.success());
    assert_eq!(String::from_utf8_lossy(&published.stdout), "1: no subscribers\n");
    let bad_topic =
        Command::new(SIFT).args(["pub", "--server", &address, "--topic", "a..b"]).output_within().expect("runs");
    assert!(!bad_topic.status.success());
    assert!(String::from_utf8_lossy(&bad_topic.stderr).contains("--topic"));
    let bad_policy = Command::new(SIFT)
        .args(["sub", "--server", &address, "--topic", "a", "--policy", "sometimes"])
        .output_within()
        .expect("runs");
    assert!(!bad_policy.status.success());
    assert!(String::from_utf8_lossy(&bad_policy.stderr).contains("keep-last:N"));
    let persistent = Command::new(SIFT)
        .args(["pub", "--server", &address, "--topic", "t", "--mode", "persistent"])
        .output_within()
        .expect("runs");
    assert!(persistent.status.success(), "{persistent:?}");
    let confirmed = String::from_utf8_lossy(&persistent.stdout);
    assert!(confirmed.contains("stored in default #1"), "a persistent publish is stored: {confirmed}");
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn broker_stops_cleanly_on_sigterm() {
    let data = temp_dir("sigterm");
    let (mut broker, _address) = start_broker(&data);
    let pid = broker.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = broker.0.try_wait().expect("wait") {
            assert!(status.success(), "clean exit on SIGTERM: {status:?}");
            break;
        }
        assert!(Instant::now() < deadline, "broker did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(data.is_dir(), "the data directory was created");
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn every_subcommand_has_help() {
    for args in [
        &["--help"][..],
        &["broker", "--help"],
        &["pub", "--help"],
        &["sub", "--help"],
        &["bench", "--help"],
        &["bench", "pubsub", "--help"],
        &["bench", "fjm2", "--help"],
        &["admin", "--help"],
    ] {
        let output = Command::new(SIFT).args(args).output_within().expect("runs");
        assert!(output.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&output.stdout).contains("Usage"), "{args:?}");
    }
}

#[test]
fn bench_pubsub_runs_embedded_and_prints_json() {
    let out = temp_dir("bench-json");
    let output = Command::new(SIFT)
        .args(["bench", "pubsub", "--count", "2000", "--subs", "2", "--json", "--out"])
        .arg(&out)
        .output_within()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    // The `pubsub` table's one row holds the figures under their names.
    let table = &report["tables"][0];
    assert_eq!(table["name"], "pubsub");
    let figure = |name: &str| {
        let columns = table["columns"].as_array().expect("columns");
        let index = columns.iter().position(|column| column["name"] == name).expect("column");
        table["rows"][0][index].clone()
    };
    assert_eq!(figure("published"), 2000);
    assert_eq!(figure("delivered"), 4000);
    assert!(figure("latency_us_p99").as_f64().expect("number") > 0.0);
    assert!(out.join("results.json").is_file());
    // It says what it measured, and the embedded broker's start-up log
    // lines (streams recovered) stay out of a client command's output.
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("sift bench: measuring brokers embedded in this process"), "{said}");
    assert!(!said.contains(" INFO "), "{said}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn content_filters_on_the_command_line() {
    let data = temp_dir("filters");
    let (_broker, address) = start_broker(&data);
    let sub = start_sub(&address, &["--topic", "quotes.>", "--where", "price > 100", "--count", "1"]);
    let publish = |price: &str| {
        let output = Command::new(SIFT)
            .args(["pub", "--server", &address, "--topic", "quotes.nyse", "--mode", "reliable"])
            .args(["--prop", &format!("price={price}"), "--payload", price])
            .output_within()
            .expect("pub runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).expect("utf-8")
    };
    assert_eq!(publish("50"), "1: no subscribers\n", "the filter does not pass 50");
    assert!(publish("150").starts_with("1: matched 1"), "the confirm counts the content match");
    let (ok, out) = wait_output(sub);
    assert!(ok, "sub exits 0 after --count");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["[quotes.nyse] price=150 150"], "only the passing quote");
    let refused = Command::new(SIFT)
        .args(["sub", "--server", &address, "--topic", "quotes.>", "--where", "price >"])
        .output_within()
        .expect("runs");
    assert!(!refused.status.success(), "a filter that does not parse fails the command");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("sql") && stderr.contains("at byte 7"), "{stderr}");
    let two = Command::new(SIFT)
        .args(["sub", "--server", &address, "--topic", "q", "--tags", "a=1", "--regex", "q"])
        .output_within()
        .expect("runs");
    assert!(!two.status.success(), "at most one content filter");
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn admin_stats_as_json_counts_a_publish_and_tables_are_readable() {
    let data = temp_dir("admin");
    let (_broker, address) = start_broker(&data);
    let published =
        Command::new(SIFT).args(["pub", "--server", &address, "--topic", "admin.check"]).output_within().expect("runs");
    assert!(published.status.success());
    let stats =
        Command::new(SIFT).args(["admin", "--server", &address, "stats", "--json"]).output_within().expect("runs");
    assert!(stats.status.success(), "{}", String::from_utf8_lossy(&stats.stderr));
    let reply: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("stdout is JSON");
    assert_eq!(reply["query"], "stats");
    assert!(reply["counters"]["messages_published"].as_u64() >= Some(1), "{reply}");
    assert!(reply["counters"]["connections_accepted"].as_u64() >= Some(2), "{reply}");
    let table = Command::new(SIFT).args(["admin", "--server", &address, "links"]).output_within().expect("runs");
    assert!(table.status.success());
    assert!(String::from_utf8_lossy(&table.stdout).contains("no links up"));
    let routes = Command::new(SIFT).args(["admin", "--server", &address, "routes"]).output_within().expect("runs");
    assert!(String::from_utf8_lossy(&routes.stdout).contains("next_hop"));
    let unknown = Command::new(SIFT).args(["admin", "--server", &address, "queues"]).output_within().expect("runs");
    assert!(!unknown.status.success(), "an unknown query is a usage error");
    let _ = std::fs::remove_dir_all(&data);
}

/// Runs `sift ARGS` to completion and returns its standard output, failing
/// the test with its standard error when it fails.
fn sift_ok(args: &[&str]) -> String {
    let output = Command::new(SIFT).args(args).output_within().expect("runs");
    assert!(output.status.success(), "sift {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8")
}

#[test]
fn streams_durables_queries_and_verify_as_a_user_runs_them() {
    let data = temp_dir("streams");
    let (broker, address) = start_broker(&data);
    let server = ["--server", address.as_str()];
    let added = sift_ok(
        &[&["stream", "add", "orders", "--topic", "orders.>", "--max-age", "7d", "--fsync", "every:5"][..], &server]
            .concat(),
    );
    assert!(added.starts_with("orders topics=[\"orders.>\"] fsync=every:5"), "{added}");
    // A durable with a filter, created and left.
    let durable =
        ["sub", "--server", address.as_str(), "--topic", "orders.>", "--durable", "big", "--where", "qty > 5"];
    let created = start_sub(&address, &durable[3..]);
    drop(created);
    for (qty, payload) in [(1, "small"), (9, "big-one"), (7, "big-two")] {
        let printed = sift_ok(
            &[
                &[
                    "pub",
                    "--topic",
                    "orders.new",
                    "--mode",
                    "persistent",
                    "--prop",
                    &format!("qty={qty}"),
                    "--payload",
                    payload,
                ][..],
                &server,
            ]
            .concat(),
        );
        assert!(printed.contains("stored in orders #"), "{printed}");
    }
    let resumed = sift_ok(&[&durable[..], &["--count", "2"]].concat());
    assert!(resumed.contains("big-one") && resumed.contains("big-two") && !resumed.contains("small"), "{resumed}");
    let queried = sift_ok(&[&["query", "--stream", "orders", "--where", "qty < 8"][..], &server].concat());
    assert!(
        queried.contains("small")
            && queried.contains("big-two")
            && queried.ends_with("2 matched (3 scanned, 0 unreadable)\n"),
        "{queried}"
    );
    let replayed = sift_ok(
        &[&["sub", "--topic", "orders.>", "--stream", "orders", "--from", "last:1", "--count", "1"][..], &server]
            .concat(),
    );
    assert!(replayed.starts_with("#3 ") && replayed.contains("big-two"), "{replayed}");
    let durables = sift_ok(&[&["durable", "ls"][..], &server].concat());
    assert!(durables.contains("big stream=orders"), "{durables}");
    drop(broker);
    let verified = sift_ok(&["stream", "verify", "orders", "--data", data.to_str().expect("utf-8 path")]);
    assert!(verified.contains("3 records"), "{verified}");
    let _ = std::fs::remove_dir_all(&data);
}

/// Publishes `(topic, payload, offset from now in ms)` with the publisher's
/// own timestamps, through the Rust client (the CLI publisher stamps the
/// time of sending, which cannot be out of order).
fn publish_stamped(address: &str, messages: &[(&str, &str, u64)]) {
    use sift_client::{Client, ClientOptions};
    use sift_core::{Message, TopicName};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let options =
            ClientOptions { name: "stamper".into(), reconnect: false, publisher_time: true, ..Default::default() };
        let client = Client::connect(address, options).await.expect("client connects");
        let now_ns = client.now_ns();
        for (topic, payload, offset_ms) in messages {
            let mut message = Message::new(TopicName::new(*topic).expect("topic"), payload.to_string());
            message.timestamp_ns = now_ns + offset_ms * 1_000_000;
            client.publish(message).await.expect("publish");
        }
        client.ping().await.expect("the broker took them");
        client.close().await;
    });
}

#[test]
fn time_offsets_ordering_and_spacing_from_the_command_line() {
    let data = temp_dir("time");
    let (_broker, address) = start_broker(&data);
    let estimate: serde_json::Value =
        serde_json::from_str(sift_ok(&["time", "--server", &address, "--clock-shift-ms", "-2500", "--json"]).trim())
            .expect("one JSON estimate");
    let offset_ns = estimate["offset_ns"].as_i64().expect("offset");
    let error_ns = estimate["error_ns"].as_i64().expect("bound");
    assert!((offset_ns - 2_500_000_000).abs() <= error_ns, "a clock 2.5 s behind is found: {estimate}");

    let order = ["--order", "entries=4,release=1.0"];
    let ordered =
        start_sub(&address, &[&["--topic", "time.o", "--count", "4", "--format", "json"][..], &order].concat());
    let spaced =
        start_sub(&address, &["--topic", "time.s", "--count", "5", "--format", "json", "--tds", "max-delay=200"]);
    // Sent out of order, and all at once though stamped tens of ms apart.
    let offsets_ms = [0u64, 10, 30, 35, 70];
    let mut messages: Vec<(&str, &str, u64)> =
        vec![("time.o", "3", 3), ("time.o", "1", 1), ("time.o", "2", 2), ("time.o", "0", 0)];
    let labels = ["a", "b", "c", "d", "e"];
    messages.extend(offsets_ms.iter().zip(labels).map(|(offset, label)| ("time.s", label, *offset)));
    publish_stamped(&address, &messages);

    let (ok, out) = wait_output(ordered);
    assert!(ok);
    assert_eq!(json_payloads(&out), ["0", "1", "2", "3"], "released in publisher-time order");

    let (ok, out) = wait_output(spaced);
    assert!(ok);
    let lines: Vec<serde_json::Value> = out.lines().map(|line| serde_json::from_str(line).expect("json")).collect();
    assert_eq!(lines.len(), offsets_ms.len());
    let field =
        |line: &serde_json::Value, name: &str| line[name].as_u64().unwrap_or_else(|| panic!("{name} in {line}"));
    // How closely the spacing matches is the time-delivery unit tests'
    // business, with a clock they move; here, under whatever load the
    // machine has, the command releases all five in the order they were
    // stamped, none before its send time plus the playout delay.
    for pair in lines.windows(2) {
        let stamped_later = field(&pair[1], "local_timestamp_ns") > field(&pair[0], "local_timestamp_ns");
        assert!(stamped_later, "released in stamp order: {out}");
        assert!(field(&pair[1], "released_ns") >= field(&pair[0], "released_ns"), "{out}");
    }
    for line in &lines {
        let target_ns = field(line, "local_timestamp_ns") + 200_000_000;
        let early_ns = target_ns.saturating_sub(field(line, "released_ns"));
        assert!(line["late"] == true || early_ns < 1_000_000, "released {early_ns} ns before its time: {out}");
    }
    let _ = std::fs::remove_dir_all(&data);
}

/// One mebibyte.
const MIB: usize = 1024 * 1024;

/// Writes a file of `mebibytes` MiB whose every block differs.
fn write_blocks(path: &std::path::Path, mebibytes: usize) {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let mut block = vec![0u8; MIB];
    for number in 0..mebibytes {
        for (offset, byte) in block.iter_mut().enumerate() {
            *byte = (offset as u8).wrapping_mul(31) ^ (number as u8) ^ ((offset >> 11) as u8);
        }
        file.write_all(&block).expect("write");
    }
    file.flush().expect("flush");
}

/// True when two files hold the same bytes (read a block at a time).
fn same_bytes(left: &std::path::Path, right: &std::path::Path) -> bool {
    use std::io::Read;
    let (mut left, mut right) = (std::fs::File::open(left).expect("open"), std::fs::File::open(right).expect("open"));
    let (mut left_block, mut right_block) = (vec![0u8; MIB], vec![0u8; MIB]);
    loop {
        let read = left.read(&mut left_block).expect("read");
        let mut filled = 0;
        while filled < read {
            let got = right.read(&mut right_block[filled..read]).expect("read");
            if got == 0 {
                return false;
            }
            filled += got;
        }
        if left_block[..read] != right_block[..read] {
            return false;
        }
        if read == 0 {
            return right.read(&mut right_block).expect("read") == 0;
        }
    }
}

/// The names in `dir`.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries.filter_map(Result::ok).map(|entry| entry.file_name().to_string_lossy().into_owned()).collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_gibibyte_transfer_and_a_receiver_killed_halfway() {
    let data = temp_dir("transfer");
    std::fs::create_dir_all(&data).expect("dir");
    let (_broker, address) = start_broker(&data.join("broker"));
    let source = data.join("big.bin");
    write_blocks(&source, 1024);
    let source_text = source.to_str().expect("utf-8 path");

    // The whole gibibyte over two streams, checked byte for byte.
    let saved = data.join("saved");
    let saved_text = saved.to_str().expect("utf-8 path");
    let receiver =
        start_sub(&address, &["--topic", "files.big", "--count", "1", "--save-dir", saved_text, "--streams", "2"]);
    let sent = sift_ok(&["pub", "--server", &address, "--topic", "files.big", "--file", source_text, "--streams", "2"]);
    assert!(sent.contains("1073741824 bytes in 1024 fragments over 2 streams"), "{sent}");
    let (ok, out) = wait_output(receiver);
    assert!(ok, "the receiver exits 0 once the transfer is saved");
    assert!(out.contains("checksums match"), "{out}");
    assert!(same_bytes(&source, &saved.join("big.bin")), "the saved gibibyte differs");

    // A receiver killed while the fragments arrive leaves only its
    // partial file, never a file under the final name that is not whole.
    let halfway = data.join("halfway");
    let halfway_text = halfway.to_str().expect("utf-8 path");
    let mut killed = Running(
        Command::new(SIFT)
            .args(["sub", "--server", &address, "--topic", "files.half", "--save-dir", halfway_text])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sub starts"),
    );
    let (said, reports) = std::sync::mpsc::channel();
    let stderr = killed.0.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = said.send(line);
        }
    });
    let report = |what: &str| {
        let line = reports.recv_timeout(STUCK_AFTER).unwrap_or_else(|_| panic!("the receiver said {what}"));
        assert!(line.starts_with(what), "{line}");
    };
    report("subscribed to");
    let mut publisher = Command::new(SIFT)
        .args(["pub", "--server", &address, "--topic", "files.half", "--file", source_text])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pub starts");
    // The first fragment is written: the transfer is in progress.
    report("receiving big.bin: 1073741824 bytes in 1024 fragments");
    assert!(names_in(&halfway).iter().any(|name| name.ends_with(".part")), "the partial file exists");
    killed.0.kill().expect("SIGKILL the receiver");
    let _ = killed.0.wait();
    assert!(publisher.wait().expect("pub ends").success(), "the publisher finishes without its receiver");
    let final_path = halfway.join("big.bin");
    assert!(
        !final_path.exists() || same_bytes(&source, &final_path),
        "a file under the final name is whole: {:?}",
        names_in(&halfway)
    );
    let _ = std::fs::remove_dir_all(&data);
}

/// One HTTP/1.1 request to `address` (a new connection, `Connection: close`):
/// the status and the body.
fn http(address: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).expect("the registry accepts");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("request sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).and_then(|code| code.parse().ok()).expect("a status");
    (status, body.to_string())
}

/// The gateway names of a registry listing, and its version.
fn listing(body: &str) -> (u64, Vec<String>) {
    let document: serde_json::Value = serde_json::from_str(body).expect("JSON");
    let names = document["gateways"]
        .as_array()
        .expect("gateways")
        .iter()
        .map(|gateway| gateway["name"].as_str().expect("name").to_string())
        .collect();
    (document["version"].as_u64().expect("version"), names)
}

#[test]
fn the_registry_lists_notifies_and_forgets_gateways() {
    let mut child = Command::new(SIFT)
        .args(["registry", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("registry starts");
    let first = Lines::of(child.stdout.take().expect("stdout"), "the registry").next("its address");
    let _registry = Running(child);
    let address = first.trim().rsplit(' ').next().expect("address").to_string();

    let (status, _) = http(&address, "PUT", "/gateways/gw-a", r#"{"link_address": "10.0.0.1:7500", "ttl_ms": 60000}"#);
    assert_eq!(status, 200);
    let (status, body) = http(&address, "PUT", "/gateways/gw-x", r#"{"link_address": "nowhere", "ttl_ms": 60000}"#);
    assert_eq!(status, 400, "{body}");
    let (_, body) = http(&address, "GET", "/gateways", "");
    let (version, names) = listing(&body);
    assert_eq!(names, ["gw-a"]);

    // A reader waiting for a change is woken by a new gateway.
    let waiting = {
        let address = address.clone();
        std::thread::spawn(move || http(&address, "GET", &format!("/gateways?after={version}&wait_ms=20000"), ""))
    };
    let (status, _) = http(&address, "PUT", "/gateways/gw-b", r#"{"link_address": "10.0.0.2:7500", "ttl_ms": 60000}"#);
    assert_eq!(status, 200);
    let (_, body) = waiting.join().expect("the waiting reader");
    let (version, names) = listing(&body);
    assert_eq!(names, ["gw-a", "gw-b"]);

    // A gateway that stops renewing lapses, and that is a change too.
    let (status, _) = http(&address, "PUT", "/gateways/gw-c", r#"{"link_address": "10.0.0.3:7500", "ttl_ms": 200}"#);
    assert_eq!(status, 200);
    let mut seen = version + 1;
    loop {
        let (_, body) = http(&address, "GET", &format!("/gateways?after={seen}&wait_ms=20000"), "");
        let (now, names) = listing(&body);
        assert!(now > seen || names.contains(&"gw-c".to_string()), "the wait ended without a change");
        if !names.contains(&"gw-c".to_string()) {
            assert_eq!(names, ["gw-a", "gw-b"]);
            break;
        }
        seen = now;
    }
    let (status, _) = http(&address, "DELETE", "/gateways/gw-a", "");
    assert_eq!(status, 204);
    let (_, body) = http(&address, "GET", "/gateways", "");
    assert_eq!(listing(&body).1, ["gw-b"]);
}

/// Runs `sift ARGS` to completion and returns its exit success and standard error.
fn sift_fails_with(args: &[&str]) -> String {
    let output = Command::new(SIFT).args(args).output_within().expect("sift runs");
    assert!(!output.status.success(), "sift {args:?} fails");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn multicast_options_are_checked_before_anything_is_joined() {
    let group = "239.66.0.1:7600";
    let error = sift_fails_with(&["watch", "--multicast", group, "--iface", "no-such-if0"]);
    assert!(error.contains("no network interface named \"no-such-if0\""), "{error}");
    for command in ["sub", "pub"] {
        let error = sift_fails_with(&[command, "--multicast", group, "--topic", "a", "--iface", "no-such-if0"]);
        assert!(error.contains("--iface: no network interface named \"no-such-if0\""), "{error}");
    }
    let error = sift_fails_with(&["sub", "--multicast", group, "--topic", "a", "--rx-buffer-kb", "0"]);
    assert!(error.contains("--rx-buffer-kb must be from 1"), "{error}");
    let error = sift_fails_with(&["sub", "--multicast", group, "--topic", "a", "--norm-rx-loss", "101"]);
    assert!(error.contains("--norm-rx-loss is a percentage"), "{error}");
    let error = sift_fails_with(&["pub", "--multicast", group, "--topic", "a", "--rate-mbit", "0"]);
    assert!(error.contains("--rate-mbit must be above 0"), "{error}");
}

/// Publishes `payload` persistently on `topic` and returns the confirm line.
fn publish_persistent(address: &str, topic: &str, payload: &str) -> String {
    let printed =
        sift_ok(&["pub", "--server", address, "--topic", topic, "--mode", "persistent", "--payload", payload]);
    assert!(printed.contains("stored in default #"), "{printed}");
    printed
}

#[test]
fn a_data_directory_has_one_broker_and_keeps_its_confirmed_messages_through_kill_9() {
    let data = temp_dir("one-owner");
    let (mut first, address) = start_broker(&data);
    for payload in ["first-1", "first-2", "first-3"] {
        publish_persistent(&address, "jobs.new", payload);
    }
    // A second broker with other ports but the same directory is refused,
    // naming the directory and the holder, and changes nothing.
    let data_text = data.to_str().expect("utf-8 path");
    let refused = sift_fails_with(&[
        "broker",
        "--listen",
        "127.0.0.1:0",
        "--http",
        "off",
        "--stomp",
        "off",
        "--mqtt",
        "off",
        "--amqp",
        "off",
        "--data",
        data_text,
    ]);
    let holder = format!("{data_text} is in use by broker pid {}", first.0.id());
    assert!(refused.contains(&holder) && refused.contains("--data DIR"), "{refused}");
    // Verifying reads, so it runs beside the broker, and says so.
    let verify =
        Command::new(SIFT).args(["stream", "verify", "default", "--data", data_text]).output_within().expect("runs");
    let note = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success() && note.contains(&holder) && note.contains("read-only"), "{note}");
    first.0.kill().expect("SIGKILL");
    first.0.wait().expect("reaped");
    let (_restarted, address) = start_broker(&data);
    let queried = sift_ok(&["query", "--stream", "default", "--server", &address]);
    for payload in ["first-1", "first-2", "first-3"] {
        assert!(queried.contains(payload), "{payload} lost: {queried}");
    }
    assert!(queried.ends_with("3 matched (3 scanned, 0 unreadable)\n"), "{queried}");
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn a_taken_address_refuses_the_start_naming_the_flag_and_leaves_no_data_behind() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken_address = taken.local_addr().expect("address").to_string();
    let data = temp_dir("taken-address");
    let data_text = data.to_str().expect("utf-8 path");
    for flag in ["--listen", "--http", "--stomp", "--mqtt", "--amqp"] {
        let mut args = vec!["broker", "--data", data_text];
        for other in ["--listen", "--http", "--stomp", "--mqtt", "--amqp"] {
            args.extend([other, if other == flag { taken_address.as_str() } else { "127.0.0.1:0" }]);
        }
        let refused = sift_fails_with(&args);
        let what = format!("cannot listen on {taken_address} ({flag})");
        assert!(refused.contains(&what) && refused.contains("another broker running"), "{refused}");
        assert!(!data.exists(), "a refused start made {}", data.display());
    }
}

/// The text payload of each line of `sift sub --format json` output.
fn json_payloads(output: &str) -> Vec<String> {
    let payload = |line: &str| {
        let delivery: serde_json::Value = serde_json::from_str(line).expect("json");
        delivery["payload"].as_str().expect("text").to_string()
    };
    output.lines().map(payload).collect()
}

/// Reads lines from `reader` until one contains `wanted`; fails when the
/// stream ends first. Returns the lines read.
#[test]
fn sub_says_when_it_loses_and_regains_the_broker_and_keeps_receiving() {
    let data = temp_dir("regain");
    let (mut broker, address) = start_broker(&data);
    let mut sub = Command::new(SIFT)
        .args(["sub", "--topic", "alerts.>", "--count", "1"])
        .env("SIFT_SERVER", &address)
        // What the client does shows in the failure's lines, if it fails.
        .env("SIFT_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sub starts");
    let errors = Lines::of(sub.stderr.take().expect("stderr"), "sub");
    let sub = Running(sub);
    errors.until("subscribed to alerts.>");
    broker.0.kill().expect("SIGKILL");
    broker.0.wait().expect("reaped");
    errors.until(&format!("lost the broker at {address}; reconnecting"));
    let (_restarted, again) = start_broker_at(&data, &address);
    assert_eq!(again, address);
    errors.until(&format!("reconnected to {address}"));
    let confirm = sift_ok(&["pub", "--server", &address, "--topic", "alerts.disk", "--payload", "after"]);
    assert!(confirm.contains("matched 1"), "{confirm}");
    let (finished, out) = wait_output(sub);
    assert!(finished && out.contains("after"), "{out}");
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn pub_reads_standard_input_and_sub_reads_a_whole_stream_without_a_topic() {
    use std::io::Write;
    let data = temp_dir("stdin");
    let (_broker, address) = start_broker(&data);
    let mut publisher = Command::new(SIFT)
        .args(["pub", "--topic", "logs.app", "--mode", "persistent", "--stdin-lines"])
        .env("SIFT_SERVER", &address)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("pub starts");
    publisher.stdin.take().expect("stdin").write_all(b"first line\nsecond line\n").expect("written");
    let printed = publisher.wait_with_output().expect("pub ends");
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(
        printed.contains("1: matched 0, stored in default #1")
            && printed.contains("2: matched 0, stored in default #2"),
        "{printed}"
    );
    let mut whole = Command::new(SIFT)
        .args(["pub", "--server", &address, "--topic", "logs.db", "--mode", "persistent", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("pub starts");
    whole.stdin.take().expect("stdin").write_all(b"one\ntwo\n").expect("written");
    assert!(whole.wait_with_output().expect("pub ends").status.success());
    let read = sift_ok(&[
        "sub", "--server", &address, "--stream", "default", "--from", "first", "--count", "3", "--format", "json",
    ]);
    assert_eq!(json_payloads(&read), ["first line", "second line", "one\ntwo\n"]);
    let refused = sift_fails_with(&["sub", "--server", &address]);
    assert!(refused.contains("--topic is needed"), "{refused}");
    let warned = sift_fails_with(&["sub", "--server", "127.0.0.1:1", "--topic", "logs/#"]);
    assert!(warned.contains("did you mean \"logs.>\""), "{warned}");
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn passwd_prints_a_hash_of_the_password_on_standard_input() {
    use std::io::Write;
    let mut child = Command::new(SIFT)
        .arg("passwd")
        .env_remove("SIFT_PASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sift passwd starts");
    child.stdin.take().expect("stdin").write_all(b"correct horse\n").expect("write the password");
    let output = child.wait_with_output().expect("sift passwd ends");
    assert!(output.status.success(), "{output:?}");
    let hash = String::from_utf8(output.stdout).expect("utf-8");
    let hash = hash.trim_end();
    assert!(sift_auth::password::verify("correct horse", hash), "{hash}");
    assert!(!sift_auth::password::verify("correct horse\n", hash), "the line end is not part of the password");
}
