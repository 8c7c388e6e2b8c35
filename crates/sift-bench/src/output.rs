//! Writing a finished report: the output directory, the result files, and
//! what is printed.
//!
//! A run writes into its directory `results.json` (the whole [`Report`]),
//! `results.csv` (every table in long form, see [`crate::csv`]), one wide
//! `TABLE.csv` per table, `results.md`, and one SVG per plot. It prints the
//! tables in Markdown (or a scenario's own text, or with `--json` the
//! report as JSON) on standard output, and where the files went on
//! standard error, so that standard output stays parseable.

use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::options::CommonArgs;
use crate::report::Report;
use crate::{csv, markdown, plot};

/// Directory under which runs without `--out` get their own directory.
pub const RESULTS_ROOT: &str = "bench-results";
/// The whole report as JSON.
pub const RESULTS_JSON: &str = "results.json";
/// Every table in long form.
pub const RESULTS_CSV: &str = "results.csv";
/// The report in Markdown.
pub const RESULTS_MD: &str = "results.md";
/// Suffixes tried when two runs of a scenario start within the same second.
const DIRECTORY_SUFFIXES_MAX: u32 = 100;

/// What a run prints on standard output when not asked for JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Printed {
    /// Every table in Markdown.
    Tables,
    /// The scenario's own text (for output that scripts already parse).
    Text(String),
}

/// Writes the report's files, prints it on standard output, and returns the
/// directory written.
pub fn finish(report: &Report, common: &CommonArgs, printed: Printed) -> Result<PathBuf, BenchError> {
    finish_to(report, common, printed, &mut std::io::stdout().lock())
}

/// [`finish`], printing to `stdout`.
pub fn finish_to(
    report: &Report,
    common: &CommonArgs,
    printed: Printed,
    stdout: &mut impl std::io::Write,
) -> Result<PathBuf, BenchError> {
    let files = render(report)?;
    let directory = match &common.out {
        Some(directory) => prepare_given(directory)?,
        None => prepare_default(Path::new(RESULTS_ROOT), report)?,
    };
    for (name, contents) in &files {
        let path = directory.join(name);
        std::fs::write(&path, contents).map_err(|error| BenchError::file(path, error))?;
    }
    let text = if common.json {
        let mut json = serde_json::to_string_pretty(report)?;
        json.push('\n');
        json
    } else {
        match printed {
            Printed::Tables => markdown::tables(report),
            Printed::Text(text) => text,
        }
    };
    stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).map_err(BenchError::Stdout)?;
    let names: Vec<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
    eprintln!("results written to {}/ ({})", directory.display(), names.join(", "));
    Ok(directory)
}

/// Every result file's name and contents, plots drawn, before anything is
/// written: a plot that cannot be drawn leaves no half-written directory.
pub fn render(report: &Report) -> Result<Vec<(String, String)>, BenchError> {
    let mut files = vec![
        (RESULTS_JSON.to_string(), serde_json::to_string_pretty(report)? + "\n"),
        (RESULTS_CSV.to_string(), csv::long_form(report)),
        (RESULTS_MD.to_string(), markdown::document(report)),
    ];
    for table in &report.tables {
        files.push((format!("{}.csv", table.name), csv::wide_form(table)));
    }
    for figure in &report.plots {
        let Some(table) = report.table(&figure.table) else {
            return Err(BenchError::plot(&figure.file, format!("the report has no table {}", figure.table)));
        };
        files.push((figure.file.clone(), plot::render_svg(figure, table)?));
    }
    Ok(files)
}

/// A directory given with `--out`: used as is, created with its parents.
fn prepare_given(directory: &Path) -> Result<PathBuf, BenchError> {
    std::fs::create_dir_all(directory).map_err(|error| BenchError::file(directory, error))?;
    Ok(directory.to_path_buf())
}

/// `ROOT/SCENARIO-YYYYMMDDTHHMMSSZ`, newly created; `-2`, `-3`, … appended
/// when a run of the same second already has it.
fn prepare_default(root: &Path, report: &Report) -> Result<PathBuf, BenchError> {
    std::fs::create_dir_all(root).map_err(|error| BenchError::file(root, error))?;
    let stamp = report.started.replace(['-', ':'], "");
    let base = format!("{}-{stamp}", report.scenario);
    for attempt in 1..=DIRECTORY_SUFFIXES_MAX {
        let name = if attempt == 1 { base.clone() } else { format!("{base}-{attempt}") };
        let directory = root.join(name);
        match std::fs::create_dir(&directory) {
            Ok(()) => return Ok(directory),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(BenchError::file(directory, error)),
        }
    }
    let error = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "every suffix is taken");
    Err(BenchError::file(root.join(base), error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::Plot;
    use crate::report::{Cell, Table};

    fn report() -> Report {
        let mut report = Report::new("demo", "Demo");
        let mut table = Table::new("runs", "Runs", &[("size", "B"), ("rate", "Mbit/s")]);
        table.push_row(vec![Cell::from(64u64), Cell::from(10.0)]).expect("row");
        table.push_row(vec![Cell::from(256u64), Cell::from(30.0)]).expect("row");
        report.plots.push(Plot::lines("rate.svg", "Rate", &table, "size", "rate").expect("plot"));
        report.tables.push(table);
        report
    }

    fn scratch(name: &str) -> PathBuf {
        let directory = std::env::temp_dir().join(format!("sift-bench-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        directory
    }

    #[test]
    fn every_file_is_rendered_and_the_json_reads_back() {
        let report = report();
        let files = render(&report).expect("rendered");
        let names: Vec<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["results.json", "results.csv", "results.md", "runs.csv", "rate.svg"]);
        let back: Report = serde_json::from_str(&files[0].1).expect("json");
        assert_eq!(back, report);
        assert!(files[4].1.starts_with("<svg"));
    }

    #[test]
    fn a_plot_of_a_missing_table_fails_before_anything_is_written() {
        let mut report = report();
        report.plots[0].table = "missing".into();
        assert!(render(&report).is_err());
    }

    #[test]
    fn default_directories_are_per_run_and_never_reused() {
        let root = scratch("default");
        let report = report();
        let first = prepare_default(&root, &report).expect("first");
        let second = prepare_default(&root, &report).expect("second");
        let stamp = report.started.replace(['-', ':'], "");
        assert_eq!(first, root.join(format!("demo-{stamp}")));
        assert_eq!(second, root.join(format!("demo-{stamp}-2")));
        assert!(first.is_dir() && second.is_dir());
        std::fs::remove_dir_all(&root).expect("clean up");
    }

    #[test]
    fn finish_writes_into_the_given_directory() {
        let directory = scratch("given").join("nested");
        let common = CommonArgs { out: Some(directory.clone()), json: true, ..CommonArgs::default() };
        let mut printed = Vec::new();
        let written = finish_to(&report(), &common, Printed::Tables, &mut printed).expect("finished");
        assert_eq!(written, directory);
        let printed: Report = serde_json::from_slice(&printed).expect("--json prints the report");
        assert_eq!(printed.tables, report().tables);
        for name in ["results.json", "results.csv", "results.md", "runs.csv", "rate.svg"] {
            assert!(directory.join(name).is_file(), "{name} missing");
        }
        let csv = std::fs::read_to_string(directory.join("results.csv")).expect("csv");
        assert!(csv.starts_with("table,row,column,unit,value\nruns,0,size,B,64\n"), "{csv}");
        std::fs::remove_dir_all(directory.parent().expect("parent")).expect("clean up");
    }
}
