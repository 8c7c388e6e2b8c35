//! The one error type of the benchmark framework and its scenarios.

use std::path::PathBuf;

/// Why a benchmark could not run or could not write its results.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An argument or a combination of arguments is invalid.
    #[error("{0}")]
    Usage(String),
    /// Something the run waits for did not happen in time.
    #[error("timed out waiting until {0}")]
    Timeout(String),
    /// An embedded broker could not start.
    #[error(transparent)]
    Broker(#[from] sift_broker::BrokerError),
    /// A topology file could not be read or is invalid.
    #[error(transparent)]
    TopologyFile(#[from] sift_broker::topology_file::TopologyFileError),
    /// A topology's text is invalid, or names a variant it does not define.
    #[error(transparent)]
    Topology(#[from] sift_broker::topology_file::TopologyError),
    /// The brokers of a topology could not all be started.
    #[error(transparent)]
    NetworkStart(#[from] sift_broker::topology_file::NetworkStartError),
    /// A client call failed.
    #[error(transparent)]
    Client(#[from] sift_client::ClientError),
    /// A publisher or subscriber task panicked or was cancelled.
    #[error("a {role} task failed: {reason}")]
    Task {
        /// `publisher` or `subscriber`.
        role: &'static str,
        /// The join error, as text.
        reason: String,
    },
    /// A result file or directory could not be written.
    #[error("{path}: {source}")]
    File {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Standard output could not be written.
    #[error("cannot write to standard output: {0}")]
    Stdout(std::io::Error),
    /// The report could not be encoded as JSON.
    #[error("cannot encode the report as JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A table was built inconsistently (a scenario bug, reported rather than panicking).
    #[error("table {table}: {reason}")]
    Table {
        /// The table's name.
        table: String,
        /// What is wrong.
        reason: String,
    },
    /// A plot could not be drawn.
    #[error("plot {plot}: {reason}")]
    Plot {
        /// The plot's file name.
        plot: String,
        /// What went wrong.
        reason: String,
    },
}

impl BenchError {
    /// A [`BenchError::File`] for `path`.
    pub fn file(path: impl Into<PathBuf>, source: std::io::Error) -> BenchError {
        BenchError::File { path: path.into(), source }
    }

    /// A [`BenchError::Plot`] for the plot written to `file`.
    pub fn plot(file: &str, reason: impl std::fmt::Display) -> BenchError {
        BenchError::Plot { plot: file.to_string(), reason: reason.to_string() }
    }
}
