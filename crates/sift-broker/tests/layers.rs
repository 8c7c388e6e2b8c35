//! The broker crate is built in layers, and this test keeps it so: a module
//! may name (`use crate::…`, `crate::…::item`, `super::…`) modules of its own
//! layer and of the layers below, never one above. The layers, lowest first,
//! are drawn in `docs/ARCHITECTURE.md` ("Layers of the broker crate"):
//!
//! 1. settings and utilities: configuration, counters, the memory budget,
//!    door names, on-disk helpers, the link wire formats;
//! 2. connection data: a connection's shared half, its outbox, subscriptions,
//!    delivery reports and the confirm gate;
//! 3. state, store and delivery: the router, the stream store, stream
//!    consumers, the link routing state, the pipeline stages and delivery
//!    into outboxes; each takes only the handles it uses;
//! 4. core and engine: [`BrokerShared`], which assembles the handles, the
//!    publish path and the link sessions;
//! 5. sessions: the one session machine behind every client door;
//! 6. adapters: the socket reader and writer, and local sessions;
//! 7. assembly: starting and stopping a broker, front-end harness, topology
//!    files.
//!
//! A new file must be given its layer here, or the test fails and says so.
//! Code after `#[cfg(test)]` is not checked: tests may reach any layer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Layer of each module path, by longest matching prefix (`link/` covers
/// every file of that directory that has no entry of its own).
const LAYERS: &[(&str, u8)] = &[
    // 1. settings and utilities
    ("config", 1),
    ("http_config", 1),
    ("mqtt_config", 1),
    ("stomp_config", 1),
    ("network_config", 1),
    ("auth_config", 1),
    ("stats", 1),
    ("budget", 1),
    ("door", 1),
    ("broker_tls", 1),
    ("incoming", 1),
    ("store/lock", 1),
    ("store/ranges", 1),
    ("store/cursor", 1),
    ("store/durable", 1),
    ("store/settings", 1),
    ("link/interest_wire", 1),
    ("link/hop_cache", 1),
    ("link/frames", 1),
    ("link/error", 1),
    ("link/bracket", 1),
    ("link/congestion", 1),
    // 2. connection data
    ("conn", 2),
    ("outbox", 2),
    ("subscription", 2),
    ("report", 2),
    ("store/gate", 2),
    // 3. state, store and delivery
    ("router", 3),
    ("access", 3),
    ("usage", 3),
    ("delivery", 3),
    ("pipeline", 3),
    ("store", 3),
    ("link/network", 3),
    ("link/forward", 3),
    ("link/interest", 3),
    ("link/retransmit", 3),
    ("link/report_route", 3),
    ("link/topology", 3),
    ("link/groups", 3),
    ("link/routes", 3),
    ("link/raft_route", 3),
    ("replication", 3),
    // 4. core and engine
    ("shared", 4),
    ("publish", 4),
    ("scheduler", 4),
    ("link", 4),
    ("replication/serve", 4),
    ("replication/place", 4),
    ("replication/members", 4),
    // 5. sessions
    ("session", 5),
    // 6. adapters
    ("connection", 6),
    ("writer", 6),
    ("local", 6),
    ("door_writer", 6),
    // 7. assembly
    ("server", 7),
    ("front_end", 7),
    ("topology_file", 7),
    ("lib", 7),
];

const LAYER_NAMES: [&str; 8] =
    ["", "settings", "connection data", "state and store", "core and engine", "sessions", "adapters", "assembly"];

#[test]
fn no_module_names_a_module_of_a_higher_layer() {
    let source_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = module_files(&source_root);
    let known: Vec<String> = modules.keys().cloned().collect();
    let mut problems = Vec::new();
    for (module, file) in &modules {
        let Some(own_layer) = layer_of(module) else {
            problems.push(format!("{module}: has no layer in tests/layers.rs"));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read a source file");
        for target in referenced_modules(module, &checked_part(&text), &known) {
            let target_layer = layer_of(&target).unwrap_or(0);
            if target_layer > own_layer {
                problems.push(format!(
                    "{module} ({}) names {target} ({})",
                    LAYER_NAMES[own_layer as usize], LAYER_NAMES[target_layer as usize]
                ));
            }
        }
    }
    assert!(problems.is_empty(), "uses that run up the layers:\n  {}", problems.join("\n  "));
}

#[test]
fn the_scanner_resolves_paths_and_brace_lists() {
    let known: Vec<String> =
        ["conn", "outbox", "store", "store/consumer", "link", "link/network"].iter().map(|s| s.to_string()).collect();
    let text = "use crate::{conn::ConnShared, outbox::{Entry, Routed}};\nuse super::network::X;\n// crate::store here is a comment\nfn f() { crate::store::consumer::run(); }";
    let found = referenced_modules("link/forward", &checked_part(text), &known);
    assert_eq!(found, vec!["conn", "link/network", "outbox", "store/consumer"]);
}

/// The layer of a module: its longest matching entry in [`LAYERS`].
fn layer_of(module: &str) -> Option<u8> {
    LAYERS
        .iter()
        .filter(|(prefix, _)| module == *prefix || module.starts_with(&format!("{prefix}/")))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, layer)| *layer)
}

/// Every source file by its module path (`store/consumer`, `link`).
fn module_files(root: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                let relative = path.strip_prefix(root).expect("under the root").with_extension("");
                let mut module = relative.to_string_lossy().replace('\\', "/");
                if let Some(parent) = module.strip_suffix("/mod") {
                    module = parent.to_string();
                }
                found.insert(module, path);
            }
        }
    }
    found
}

/// The text before the file's tests, without `//` comments.
fn checked_part(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The modules a file names, each resolved to the longest known module path.
fn referenced_modules(module: &str, text: &str, known: &[String]) -> Vec<String> {
    let parent = module.rsplit_once('/').map(|(parent, _)| parent.to_string()).unwrap_or_default();
    let mut paths = Vec::new();
    for (marker, base) in [("crate::", String::new()), ("super::", parent)] {
        let mut rest = text;
        while let Some(at) = rest.find(marker) {
            let before = rest[..at].chars().last();
            rest = &rest[at + marker.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            for path in expand_paths(rest) {
                let joined = if base.is_empty() { path } else { format!("{base}/{path}") };
                paths.push(joined);
            }
        }
    }
    let mut resolved: Vec<String> = paths.iter().filter_map(|path| longest_known(path, known)).collect();
    resolved.retain(|target| target != module);
    resolved.sort();
    resolved.dedup();
    resolved
}

/// The module paths (`a/b/c`) of a `use` tail such as `a::b::{c, d::e}` or
/// `a::item`; a brace list yields one path per entry.
fn expand_paths(tail: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut rest = tail;
    loop {
        let length = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if length == 0 {
            break;
        }
        segments.push(&rest[..length]);
        rest = &rest[length..];
        if let Some(after) = rest.strip_prefix("::") {
            rest = after;
        } else {
            break;
        }
    }
    let prefix = segments.join("/");
    if !rest.starts_with('{') {
        return vec![prefix];
    }
    let mut depth = 0;
    let mut entries = Vec::new();
    let mut entry_start = 1;
    for (index, character) in rest.char_indices() {
        match character {
            '{' => depth += 1,
            '}' | ',' if depth == 1 => {
                entries.push(rest[entry_start..index].trim());
                entry_start = index + 1;
                if character == '}' {
                    break;
                }
            }
            '}' => depth -= 1,
            _ => {}
        }
    }
    entries
        .into_iter()
        .filter(|entry| !entry.is_empty() && *entry != "self")
        .flat_map(expand_paths)
        .map(|path| if prefix.is_empty() { path } else { format!("{prefix}/{path}") })
        .collect()
}

fn longest_known(path: &str, known: &[String]) -> Option<String> {
    let mut candidate = path;
    loop {
        if known.iter().any(|module| module == candidate) {
            return Some(candidate.to_string());
        }
        candidate = candidate.rsplit_once('/')?.0;
    }
}
