//! The options every scenario takes, to be flattened into its own clap
//! arguments with `#[command(flatten)]`.

use std::path::PathBuf;

/// Options common to all scenarios: where the broker is, where the results
/// go, the reduced grid, and JSON output.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CommonArgs {
    /// Broker to measure; without it the bench starts its own, embedded in
    /// this process.
    #[arg(long, value_name = "ADDR", env = "SIFT_SERVER")]
    pub server: Option<String>,
    /// Directory for the result files, used as is (created if missing);
    /// default `bench-results/SCENARIO-YYYYMMDDTHHMMSSZ/`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run a reduced grid with small counts: under a minute, for smoke tests.
    #[arg(long)]
    pub quick: bool,
    /// Print the whole report as JSON on standard output instead of tables,
    /// and draw no progress bar.
    #[arg(long)]
    pub json: bool,
    /// Clients speak TLS: embedded brokers get a certificate made for the
    /// run; a `--server` broker's CA is `--tls-ca`.
    #[arg(long)]
    pub tls: bool,
    /// Every message is signed by its publisher and verified by its
    /// subscriber (Ed25519); embedded brokers also require the signature.
    #[arg(long)]
    pub sign: bool,
    /// With `--tls --server`: the CA the broker's certificate chains to.
    #[arg(long, value_name = "PEM", requires = "tls")]
    pub tls_ca: Option<PathBuf>,
}
