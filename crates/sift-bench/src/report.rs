//! The result model every scenario fills in: a [`Report`] of [`Table`]s and
//! [`Plot`]s, written by [`crate::output`] as `results.json` (this model,
//! serialised as is), CSV, Markdown and SVG.

use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::machine::Machine;
use crate::plot::Plot;
use crate::timestamp::UtcTime;

/// Everything one run of a scenario measured, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The scenario's name (`pubsub`, `fjm2`), as given to `sift bench`.
    pub scenario: String,
    /// What the scenario reproduces, in a line.
    pub title: String,
    /// The command line that produced the report, program name without its directory.
    pub command: String,
    /// When the run started, UTC, RFC 3339 (`2024-05-01T12:34:56Z`).
    pub started: String,
    /// The machine it ran on.
    pub machine: Machine,
    /// The run's parameters, in the order the scenario set them.
    pub parameters: Vec<Parameter>,
    /// The measured figures, and any reference figures beside them.
    pub tables: Vec<Table>,
    /// Plots drawn from the tables.
    pub plots: Vec<Plot>,
    /// Remarks a reader needs to read the figures right.
    pub notes: Vec<String>,
}

impl Report {
    /// An empty report of `scenario`, started now, on this machine, for the
    /// command line of this process.
    pub fn new(scenario: &str, title: &str) -> Report {
        Report {
            scenario: scenario.to_string(),
            title: title.to_string(),
            command: command_line(std::env::args()),
            started: UtcTime::now().rfc3339(),
            machine: Machine::detect(),
            parameters: Vec::new(),
            tables: Vec::new(),
            plots: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Records a parameter of the run.
    pub fn parameter(&mut self, name: &str, value: impl Into<Cell>) {
        self.parameters.push(Parameter { name: name.to_string(), value: value.into() });
    }

    /// Adds a remark for the reader.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// The table called `name`.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|table| table.name == name)
    }
}

/// A named parameter of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parameter {
    /// Its name, as the flag that sets it where there is one.
    pub name: String,
    /// Its value.
    pub value: Cell,
}

/// One column of a [`Table`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    /// Its name: a lowercase identifier, unit last (`latency_us_p99`).
    pub name: String,
    /// Unit of its values (`B`, `Mbit/s`, `µs`); empty when it has none.
    pub unit: String,
}

/// A value in a table: a number, a text, or nothing.
///
/// In JSON an integer or a float is a number, a text a string and an empty
/// cell `null`; non-finite floats become empty cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Cell {
    /// An integer (counts, sizes).
    Int(i64),
    /// A measurement.
    Float(f64),
    /// A label.
    Text(String),
    /// No value.
    Empty,
}

impl Cell {
    /// The value as a number, when it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Int(value) => Some(*value as f64),
            Cell::Float(value) => Some(*value),
            Cell::Text(_) | Cell::Empty => None,
        }
    }
}

impl From<i64> for Cell {
    fn from(value: i64) -> Cell {
        Cell::Int(value)
    }
}

impl From<u64> for Cell {
    fn from(value: u64) -> Cell {
        i64::try_from(value).map_or(Cell::Float(value as f64), Cell::Int)
    }
}

impl From<usize> for Cell {
    fn from(value: usize) -> Cell {
        Cell::from(value as u64)
    }
}

impl From<u32> for Cell {
    fn from(value: u32) -> Cell {
        Cell::Int(i64::from(value))
    }
}

impl From<f64> for Cell {
    fn from(value: f64) -> Cell {
        if value.is_finite() {
            Cell::Float(value)
        } else {
            Cell::Empty
        }
    }
}

impl From<bool> for Cell {
    fn from(value: bool) -> Cell {
        Cell::Text(value.to_string())
    }
}

impl From<&str> for Cell {
    fn from(value: &str) -> Cell {
        Cell::Text(value.to_string())
    }
}

impl From<String> for Cell {
    fn from(value: String) -> Cell {
        Cell::Text(value)
    }
}

impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(value: Option<T>) -> Cell {
        value.map_or(Cell::Empty, Into::into)
    }
}

/// A table of results: named columns with units, and rows of cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// File-name-safe identifier; also the name of its wide CSV (`NAME.csv`).
    pub name: String,
    /// Caption for people.
    pub title: String,
    /// The columns, in order.
    pub columns: Vec<Column>,
    /// The rows; each has one cell per column.
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// An empty table; `columns` are (name, unit) pairs, unit `""` for none.
    pub fn new(name: &str, title: &str, columns: &[(&str, &str)]) -> Table {
        let columns =
            columns.iter().map(|(name, unit)| Column { name: name.to_string(), unit: unit.to_string() }).collect();
        Table { name: name.to_string(), title: title.to_string(), columns, rows: Vec::new() }
    }

    /// Appends a row, which must have one cell per column.
    pub fn push_row(&mut self, row: Vec<Cell>) -> Result<(), BenchError> {
        if row.len() != self.columns.len() {
            return Err(BenchError::Table {
                table: self.name.clone(),
                reason: format!("a row of {} cells for {} columns", row.len(), self.columns.len()),
            });
        }
        self.rows.push(row);
        Ok(())
    }

    /// Index of the column called `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|column| column.name == name)
    }

    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|column| column.name == name)
    }

    /// The cell of row `row` in column `name`.
    pub fn cell(&self, row: usize, name: &str) -> Option<&Cell> {
        self.rows.get(row)?.get(self.column_index(name)?)
    }
}

/// The command line as a user would type it: the program's file name
/// without its directory, then the arguments, quoted for a POSIX shell
/// where they need it.
pub fn command_line(args: impl IntoIterator<Item = String>) -> String {
    let mut args = args.into_iter();
    let program = args.next().unwrap_or_default();
    let program =
        std::path::Path::new(&program).file_name().map_or(program.clone(), |name| name.to_string_lossy().into());
    std::iter::once(program).chain(args.map(|arg| shell_quote(&arg))).collect::<Vec<_>>().join(" ")
}

fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ',' | ':' | '=' | '+'));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_must_fit_the_columns() {
        let mut table = Table::new("t", "T", &[("size", "B"), ("rate", "msgs/s")]);
        table.push_row(vec![Cell::from(64u64), Cell::from(1.5)]).expect("fits");
        let error = table.push_row(vec![Cell::from(1u64)]).expect_err("too short");
        assert!(error.to_string().contains("a row of 1 cells for 2 columns"), "{error}");
        assert_eq!(table.cell(0, "rate"), Some(&Cell::Float(1.5)));
        assert_eq!(table.cell(0, "missing"), None);
    }

    #[test]
    fn cells_serialise_as_plain_json_values_and_back() {
        let cells = vec![Cell::from(3u64), Cell::from(2.5), Cell::from("a"), Cell::Empty, Cell::from(f64::NAN)];
        let json = serde_json::to_string(&cells).expect("json");
        assert_eq!(json, r#"[3,2.5,"a",null,null]"#);
        let back: Vec<Cell> = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, vec![Cell::Int(3), Cell::Float(2.5), Cell::from("a"), Cell::Empty, Cell::Empty]);
    }

    #[test]
    fn the_command_line_drops_the_program_directory_and_quotes_what_needs_it() {
        let args = ["/some/dir/sift", "bench", "fjm2", "--out", "my results", "--sizes", "64,256", "it's"];
        let line = command_line(args.iter().map(|arg| arg.to_string()));
        assert_eq!(line, r"sift bench fjm2 --out 'my results' --sizes 64,256 'it'\''s'");
    }

    #[test]
    fn a_new_report_knows_when_and_where_it_ran() {
        let mut report = Report::new("demo", "A demo");
        report.parameter("count", 10u64);
        assert!(report.started.ends_with('Z') && report.started.len() == 20, "{}", report.started);
        assert!(report.machine.cpus >= 1);
        assert_eq!(report.parameters[0].value, Cell::Int(10));
    }
}
