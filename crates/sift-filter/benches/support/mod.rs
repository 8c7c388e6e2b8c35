//! What the content benchmarks share: Criterion's settings, short enough
//! for two cores and a grid of sizes.

use std::time::Duration;

use criterion::Criterion;

/// Ten samples of two seconds each after half a second of warm-up, no plots.
pub fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .without_plots()
}
