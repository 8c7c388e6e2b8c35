//! CSV forms of a report's tables (RFC 4180: comma-separated, CRLF-free
//! `\n` line ends, fields quoted when they hold a comma, a quote, or a line
//! break, quotes doubled inside quotes).
//!
//! - `results.csv`, the **long** ("tidy") form, holds every table of the
//!   report, one line per cell, with the header `table,row,column,unit,value`:
//!   `table` is the table's name, `row` the row's index from 0 (its index in
//!   `results.json`), `column` and `unit` the column's name and unit, and
//!   `value` the cell (empty for an empty cell). Load it into any data frame
//!   and pivot as needed.
//! - `TABLE.csv`, the **wide** form of one table: a header of column names
//!   (with the unit in brackets, `size [B]`), then one line per row.

use std::fmt::Write as _;

use crate::report::{Cell, Report, Table};

/// Header line of the long form.
pub const LONG_HEADER: &str = "table,row,column,unit,value";

/// The long form of every table of `report`, header first.
pub fn long_form(report: &Report) -> String {
    let mut out = String::new();
    out.push_str(LONG_HEADER);
    out.push('\n');
    for table in &report.tables {
        for (index, row) in table.rows.iter().enumerate() {
            for (column, cell) in table.columns.iter().zip(row) {
                let fields = [field(&table.name), index.to_string(), field(&column.name), field(&column.unit)];
                let _ = writeln!(out, "{},{}", fields.join(","), field(&cell_text(cell)));
            }
        }
    }
    out
}

/// The wide form of one table: header, then one line per row.
pub fn wide_form(table: &Table) -> String {
    let header: Vec<String> = table
        .columns
        .iter()
        .map(|column| {
            if column.unit.is_empty() {
                field(&column.name)
            } else {
                field(&format!("{} [{}]", column.name, column.unit))
            }
        })
        .collect();
    let mut out = header.join(",");
    out.push('\n');
    for row in &table.rows {
        let cells: Vec<String> = row.iter().map(|cell| field(&cell_text(cell))).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// A cell as CSV text before quoting: numbers in full precision (the
/// shortest text that reads back as the same float), empty cells empty.
fn cell_text(cell: &Cell) -> String {
    match cell {
        Cell::Int(value) => value.to_string(),
        Cell::Float(value) => value.to_string(),
        Cell::Text(text) => text.clone(),
        Cell::Empty => String::new(),
    }
}

/// `text` as one CSV field, quoted when it must be.
pub fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut table = Table::new("runs", "Runs", &[("label", ""), ("size", "B"), ("rate", "Mbit/s")]);
        table.push_row(vec![Cell::from("plain"), Cell::from(64u64), Cell::from(1.25)]).expect("row");
        table.push_row(vec![Cell::from("a, \"quoted\"\nline"), Cell::from(1024u64), Cell::Empty]).expect("row");
        table
    }

    #[test]
    fn fields_with_commas_quotes_or_line_breaks_are_quoted() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field("cr\r"), "\"cr\r\"");
        assert_eq!(field(""), "");
    }

    #[test]
    fn the_wide_form_has_units_in_the_header_and_one_line_per_row() {
        let text = wide_form(&table());
        assert_eq!(text, "label,size [B],rate [Mbit/s]\nplain,64,1.25\n\"a, \"\"quoted\"\"\nline\",1024,\n");
    }

    #[test]
    fn the_long_form_has_one_line_per_cell_of_every_table() {
        let mut report = Report::new("demo", "Demo");
        report.tables.push(table());
        let mut other = Table::new("other", "Other", &[("x", "s")]);
        other.push_row(vec![Cell::from(0.5)]).expect("row");
        report.tables.push(other);
        let text = long_form(&report);
        let expected = concat!(
            "table,row,column,unit,value\n",
            "runs,0,label,,plain\n",
            "runs,0,size,B,64\n",
            "runs,0,rate,Mbit/s,1.25\n",
            "runs,1,label,,\"a, \"\"quoted\"\"\nline\"\n",
            "runs,1,size,B,1024\n",
            "runs,1,rate,Mbit/s,\n",
            "other,0,x,s,0.5\n",
        );
        assert_eq!(text, expected);
    }
}
