//! A progress bar over a scenario's grid points, on standard error.
//!
//! It is drawn only when standard error is a terminal, the run is expected
//! to take at least [`PROGRESS_MIN_EXPECTED`], and the report is not being
//! printed as JSON; otherwise every call is a no-op, so scenarios call it
//! unconditionally.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Runs expected to be shorter than this get no bar: it would only flicker.
pub const PROGRESS_MIN_EXPECTED: Duration = Duration::from_secs(3);

/// How often the bar redraws its elapsed time while a point runs.
const PROGRESS_TICK: Duration = Duration::from_millis(250);

/// The bar's layout: elapsed time, bar, points done of all, current point.
const PROGRESS_TEMPLATE: &str = "{elapsed:>4} [{bar:30}] {pos}/{len} {msg}";

/// Progress over the points of one run; cleared when dropped.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Progress over `points` grid points expected to take `expected` in
    /// all; `quiet` (JSON output) hides it.
    pub fn new(points: u64, expected: Duration, quiet: bool) -> Progress {
        let shown = !quiet && expected >= PROGRESS_MIN_EXPECTED && std::io::stderr().is_terminal();
        if !shown {
            return Progress { bar: None };
        }
        let bar = ProgressBar::new(points);
        if let Ok(style) = ProgressStyle::with_template(PROGRESS_TEMPLATE) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(PROGRESS_TICK);
        Progress { bar: Some(bar) }
    }

    /// A progress that never draws.
    pub fn hidden() -> Progress {
        Progress { bar: None }
    }

    /// Whether the bar is drawn.
    pub fn is_shown(&self) -> bool {
        self.bar.is_some()
    }

    /// Names the point now running (`16K 1 → 2 reliable`).
    pub fn begin(&self, label: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(label.to_string());
        }
    }

    /// Counts one point as done.
    pub fn advance(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_or_quiet_runs_get_no_bar() {
        assert!(!Progress::new(10, Duration::from_millis(500), false).is_shown());
        assert!(!Progress::new(10, Duration::from_secs(600), true).is_shown());
        let hidden = Progress::hidden();
        hidden.begin("point");
        hidden.advance();
        assert!(!hidden.is_shown());
    }
}
