//! Toxiproxy for the tests, on top of `sift_bench::toxiproxy`: a test
//! finds the server or skips with a notice, unless
//! `SIFT_REQUIRE_TOXIPROXY=1` (as in `scripts/test`), when it fails.

use std::path::{Path, PathBuf};

pub use sift_bench::toxiproxy::Toxiproxy;

/// The server binary, or `None` after a notice when it is missing and not
/// required.
pub fn server_or_skip() -> Option<PathBuf> {
    match sift_bench::toxiproxy::find_server() {
        Ok(path) => Some(path),
        Err(reason) if std::env::var("SIFT_REQUIRE_TOXIPROXY").as_deref() == Ok("1") => {
            panic!("SIFT_REQUIRE_TOXIPROXY=1 but Toxiproxy cannot be found: {reason}")
        }
        Err(reason) => {
            eprintln!(
                "notice: skipping a Toxiproxy test: {reason} (set SIFT_TOXIPROXY_SERVER, or \
                 SIFT_REQUIRE_TOXIPROXY=1 to make this an error)"
            );
            None
        }
    }
}

/// Starts the server for one test.
pub async fn start(binary: &Path) -> Toxiproxy {
    Toxiproxy::start(binary).await.expect("Toxiproxy starts")
}
