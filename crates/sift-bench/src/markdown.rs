//! The Markdown form of a report (`results.md`): title, machine, command,
//! parameters, each table, the plots linked, and the notes.

use std::fmt::Write as _;

use crate::report::{Cell, Report, Table};

/// The whole report as a Markdown document.
pub fn document(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", report.title);
    let _ = writeln!(out, "- scenario: `{}`", report.scenario);
    let _ = writeln!(out, "- command: `{}`", report.command);
    let _ = writeln!(out, "- started: {}", report.started);
    let _ = writeln!(out, "- machine: {}", report.machine.describe());
    for parameter in &report.parameters {
        let _ = writeln!(out, "- {}: {}", parameter.name, escape(&human(&parameter.value)));
    }
    for table in &report.tables {
        let _ = writeln!(out, "\n## {}\n", table.title);
        out.push_str(&table_text(table));
    }
    for plot in &report.plots {
        let _ = writeln!(out, "\n![{}]({})", plot.title, plot.file);
    }
    if !report.notes.is_empty() {
        out.push_str("\n## Notes\n\n");
        for note in &report.notes {
            let _ = writeln!(out, "- {}", escape(note));
        }
    }
    out
}

/// Every table of the report, each under its title: what `sift bench`
/// prints on standard output.
pub fn tables(report: &Report) -> String {
    let mut out = String::new();
    for (index, table) in report.tables.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "{}\n", table.title);
        out.push_str(&table_text(table));
    }
    out
}

/// One table in Markdown: header with units, alignment row (numbers to the
/// right), one line per row.
pub fn table_text(table: &Table) -> String {
    let mut out = String::new();
    let header: Vec<String> = table
        .columns
        .iter()
        .map(|column| {
            if column.unit.is_empty() {
                escape(&column.name)
            } else {
                escape(&format!("{} ({})", column.name, column.unit))
            }
        })
        .collect();
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let alignment: Vec<&str> = (0..table.columns.len())
        .map(|index| if table.rows.iter().any(|row| row[index].as_f64().is_some()) { "---:" } else { "---" })
        .collect();
    let _ = writeln!(out, "| {} |", alignment.join(" | "));
    for row in &table.rows {
        let cells: Vec<String> = row.iter().map(|cell| escape(&human(cell))).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// A cell for people: integers as they are, floats to about four
/// significant digits (no fewer than the integer part), texts as they are.
pub fn human(cell: &Cell) -> String {
    match cell {
        Cell::Int(value) => value.to_string(),
        Cell::Float(value) => human_float(*value),
        Cell::Text(text) => text.clone(),
        Cell::Empty => String::new(),
    }
}

fn human_float(value: f64) -> String {
    let magnitude = value.abs();
    let decimals = if magnitude >= 1000.0 || magnitude == 0.0 {
        0
    } else if magnitude >= 100.0 {
        1
    } else if magnitude >= 10.0 {
        2
    } else {
        3
    };
    format!("{value:.decimals$}")
}

/// Text safe inside a table cell or list item: pipes escaped, line breaks
/// turned into spaces.
fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::Plot;

    fn report() -> Report {
        let mut report = Report::new("demo", "Demo run");
        report.parameter("count", 1000u64);
        let mut table = Table::new("runs", "Runs", &[("mode", ""), ("size", "B"), ("rate", "Mbit/s")]);
        table.push_row(vec![Cell::from("a|b"), Cell::from(64u64), Cell::from(1234.567)]).expect("row");
        table.push_row(vec![Cell::from("two\nlines"), Cell::from(256u64), Cell::from(0.5)]).expect("row");
        report.plots.push(Plot::lines("rate.svg", "Rate against size", &table, "size", "rate").expect("plot"));
        report.tables.push(table);
        report.note("figures are medians");
        report
    }

    #[test]
    fn tables_have_units_alignment_and_escaped_cells() {
        let text = tables(&report());
        let expected = concat!(
            "Runs\n\n",
            "| mode | size (B) | rate (Mbit/s) |\n",
            "| --- | ---: | ---: |\n",
            "| a\\|b | 64 | 1235 |\n",
            "| two lines | 256 | 0.500 |\n",
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn the_document_has_the_context_the_tables_the_plots_and_the_notes() {
        let text = document(&report());
        assert!(text.starts_with("# Demo run\n"), "{text}");
        for part in ["- scenario: `demo`", "- machine: ", "- count: 1000", "## Runs", "![Rate against size](rate.svg)"]
        {
            assert!(text.contains(part), "{part} missing from\n{text}");
        }
        assert!(text.ends_with("## Notes\n\n- figures are medians\n"), "{text}");
    }

    #[test]
    fn floats_keep_about_four_significant_digits() {
        assert_eq!(human(&Cell::Float(2_417_908.4)), "2417908");
        assert_eq!(human(&Cell::Float(129.34)), "129.3");
        assert_eq!(human(&Cell::Float(73.04)), "73.04");
        assert_eq!(human(&Cell::Float(0.1234)), "0.123");
        assert_eq!(human(&Cell::Float(0.0)), "0");
    }
}
