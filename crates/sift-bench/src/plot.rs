//! SVG line plots of a report's tables, drawn with `plotters`.
//!
//! A [`Plot`] names a table, the x and y columns, optionally the columns
//! whose values split the rows into lines (one line per distinct
//! combination), optionally cells that a row must hold to be plotted (one
//! plot per matching rate from one table), and a linear or logarithmic
//! scale per axis. A log axis is
//! drawn by plotting `log_base(value)` on a linear axis whose ticks fall on
//! whole powers of the base and are labelled with the values, so that the
//! ticks of a size axis with base 4 read `64, 256, 1K, …`.
//!
//! `plotters` measures text with a TrueType font that must be registered
//! before anything is drawn; DejaVu Sans is bundled for that (the SVG names
//! the font family `sans-serif`, so viewers use their own).

use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::report::{Cell, Table};

/// Width of every plot, in SVG pixels.
const PLOT_WIDTH_PX: u32 = 800;
/// Height of every plot, in SVG pixels.
const PLOT_HEIGHT_PX: u32 = 500;
/// Most tick labels on a log axis; more would overlap.
const LOG_TICKS_MAX: usize = 12;
/// Most distinct lines in one plot: more could not be told apart.
const LINES_MAX: usize = 24;
/// Line colours, distinct on white and from each other; lines beyond
/// these reuse them in order.
const LINE_COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
    RGBColor(127, 127, 127),
];
/// The family name the bundled font is registered under, and which the SVG names.
const FONT_FAMILY: &str = "sans-serif";
/// DejaVu Sans (Bitstream Vera license, see `assets/DejaVuSans-LICENSE`).
static FONT_TTF: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// How an axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// Evenly spaced values.
    Linear,
    /// Evenly spaced powers of `base`, ticks on whole powers.
    Log {
        /// The base whose powers get ticks (2, 4, 10).
        base: f64,
    },
}

/// A line plot of one table of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plot {
    /// File name in the output directory (`throughput.svg`).
    pub file: String,
    /// Caption above the plot.
    pub title: String,
    /// Name of the table plotted.
    pub table: String,
    /// Column of the x values.
    pub x: String,
    /// Column of the y values.
    pub y: String,
    /// Columns whose values split the rows into lines, one per distinct
    /// combination; none for a single line.
    pub series: Vec<String>,
    /// Only rows holding these values are plotted, as (column, value);
    /// none for every row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<(String, Cell)>,
    /// Scale of the x axis.
    pub x_scale: Scale,
    /// Scale of the y axis.
    pub y_scale: Scale,
    /// Label of the x axis, with its unit.
    pub x_label: String,
    /// Label of the y axis, with its unit.
    pub y_label: String,
}

impl Plot {
    /// Plots column `y` of `table` against column `x`, both linear, with
    /// axis labels `name (unit)` from the columns.
    pub fn lines(file: &str, title: &str, table: &Table, x: &str, y: &str) -> Result<Plot, BenchError> {
        let label = |name: &str| match table.column(name) {
            Some(column) if column.unit.is_empty() => Ok(column.name.clone()),
            Some(column) => Ok(format!("{} ({})", column.name, column.unit)),
            None => Err(BenchError::plot(file, format!("table {} has no column {name}", table.name))),
        };
        Ok(Plot {
            file: file.to_string(),
            title: title.to_string(),
            table: table.name.clone(),
            x: x.to_string(),
            y: y.to_string(),
            series: Vec::new(),
            only: Vec::new(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            x_label: label(x)?,
            y_label: label(y)?,
        })
    }

    /// One line per distinct combination of these columns' values.
    pub fn series(mut self, columns: &[&str]) -> Plot {
        self.series = columns.iter().map(|column| column.to_string()).collect();
        self
    }

    /// Plots only the rows whose cell in `column` equals `value` (exactly:
    /// an integer cell equals only an integer value); calls add up.
    pub fn only(mut self, column: &str, value: impl Into<Cell>) -> Plot {
        self.only.push((column.to_string(), value.into()));
        self
    }

    /// A logarithmic x axis with ticks on the powers of `base`.
    pub fn log_x(mut self, base: f64) -> Plot {
        self.x_scale = Scale::Log { base };
        self
    }

    /// A logarithmic y axis with ticks on the powers of `base`.
    pub fn log_y(mut self, base: f64) -> Plot {
        self.y_scale = Scale::Log { base };
        self
    }

    /// Replaces the axis labels (keep the units in them).
    pub fn labels(mut self, x_label: &str, y_label: &str) -> Plot {
        self.x_label = x_label.to_string();
        self.y_label = y_label.to_string();
        self
    }
}

/// One line of a plot, in plot space (log axes already transformed).
#[derive(Debug, Clone, PartialEq)]
struct Line {
    label: String,
    points: Vec<(f64, f64)>,
}

impl Scale {
    fn validate(self, file: &str) -> Result<(), BenchError> {
        match self {
            Scale::Log { base } if !(base > 1.0 && base.is_finite()) => {
                Err(BenchError::plot(file, format!("log base {base} must be a finite number above 1")))
            }
            _ => Ok(()),
        }
    }

    /// Where `value` goes on the axis; `None` for values a log axis cannot show.
    fn position(self, value: f64) -> Option<f64> {
        match self {
            Scale::Linear => Some(value),
            Scale::Log { base } => (value > 0.0).then(|| value.log(base)),
        }
    }

    fn value_at(self, position: f64) -> f64 {
        match self {
            Scale::Linear => position,
            Scale::Log { base } => base.powf(position),
        }
    }
}

/// The plot as an SVG document.
pub fn render_svg(plot: &Plot, table: &Table) -> Result<String, BenchError> {
    plot.x_scale.validate(&plot.file)?;
    plot.y_scale.validate(&plot.file)?;
    register_bundled_font().map_err(|reason| BenchError::plot(&plot.file, reason))?;
    let lines = lines(plot, table)?;
    let mut svg = String::new();
    draw(plot, table, &lines, &mut svg).map_err(|reason| BenchError::plot(&plot.file, reason))?;
    Ok(svg)
}

fn register_bundled_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            register_font(FONT_FAMILY, FontStyle::Normal, FONT_TTF)
                .map_err(|_| "the bundled font is not a readable TrueType font".to_string())
        })
        .clone()
}

/// The table's rows as lines, split by the series columns and sorted by x.
fn lines(plot: &Plot, table: &Table) -> Result<Vec<Line>, BenchError> {
    let column = |name: &str| {
        table
            .column_index(name)
            .ok_or_else(|| BenchError::plot(&plot.file, format!("no column {name} in {}", table.name)))
    };
    let (x, y) = (column(&plot.x)?, column(&plot.y)?);
    let series = plot.series.iter().map(|name| column(name)).collect::<Result<Vec<_>, _>>()?;
    let only = plot
        .only
        .iter()
        .map(|(name, value)| column(name).map(|index| (index, value)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut lines: Vec<Line> = Vec::new();
    for row in table.rows.iter().filter(|row| only.iter().all(|(index, value)| row[*index] == **value)) {
        let position = row[x].as_f64().and_then(|value| plot.x_scale.position(value));
        let height = row[y].as_f64().and_then(|value| plot.y_scale.position(value));
        let (Some(position), Some(height)) = (position, height) else { continue };
        let label = series.iter().map(|index| series_text(&row[*index])).collect::<Vec<_>>().join(", ");
        match lines.iter().position(|line| line.label == label) {
            Some(index) => lines[index].points.push((position, height)),
            None if lines.len() < LINES_MAX => lines.push(Line { label, points: vec![(position, height)] }),
            None => return Err(BenchError::plot(&plot.file, format!("more than {LINES_MAX} lines"))),
        }
    }
    if lines.is_empty() {
        return Err(BenchError::plot(
            &plot.file,
            format!("no numeric ({}, {}) points in {}", plot.x, plot.y, table.name),
        ));
    }
    for line in &mut lines {
        line.points.sort_by(|left, right| left.0.total_cmp(&right.0));
    }
    Ok(lines)
}

fn series_text(cell: &Cell) -> String {
    match cell {
        Cell::Text(text) => text.clone(),
        Cell::Empty => "-".to_string(),
        number => crate::markdown::human(number),
    }
}

/// The axis range in plot space: the data's extent, padded; a linear y
/// axis of non-negative values starts at 0.
fn axis_range(values: impl Iterator<Item = f64> + Clone, scale: Scale, from_zero: bool) -> std::ops::Range<f64> {
    let low = values.clone().fold(f64::INFINITY, f64::min);
    let high = values.fold(f64::NEG_INFINITY, f64::max);
    match scale {
        Scale::Log { .. } => (low - 0.2)..(high + 0.2),
        Scale::Linear if high <= low => (low - 1.0)..(high + 1.0),
        Scale::Linear => {
            let pad = (high - low) * 0.05;
            let low = if from_zero && low >= 0.0 { 0.0 } else { low - pad };
            low..(high + pad)
        }
    }
}

/// How many tick labels an axis gets: one per whole power on a log axis.
fn tick_count(range: &std::ops::Range<f64>, scale: Scale) -> usize {
    match scale {
        Scale::Linear => 10,
        Scale::Log { .. } => ((range.end.floor() - range.start.ceil()) as usize + 1).clamp(2, LOG_TICKS_MAX),
    }
}

/// A tick label: byte sizes in binary multiples (`1K`, `64K`, `1M`),
/// other values with at most three decimals and no trailing zeros.
fn tick_text(value: f64, unit: &str) -> String {
    let rounded = value.round();
    if unit == "B" && rounded >= 1024.0 && (value - rounded).abs() < 1e-6 {
        for (multiple, suffix) in [(1024.0 * 1024.0 * 1024.0, "G"), (1024.0 * 1024.0, "M"), (1024.0, "K")] {
            if rounded >= multiple && rounded % multiple == 0.0 {
                return format!("{}{suffix}", rounded / multiple);
            }
        }
    }
    if value.abs() >= 1000.0 {
        return format!("{value:.0}");
    }
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn draw(plot: &Plot, table: &Table, lines: &[Line], svg: &mut String) -> Result<(), String> {
    let unit = |name: &str| table.column(name).map(|column| column.unit.clone()).unwrap_or_default();
    let (x_unit, y_unit) = (unit(&plot.x), unit(&plot.y));
    let points = lines.iter().flat_map(|line| line.points.iter());
    let x_range = axis_range(points.clone().map(|point| point.0), plot.x_scale, false);
    let y_range = axis_range(points.map(|point| point.1), plot.y_scale, true);
    let (x_ticks, y_ticks) = (tick_count(&x_range, plot.x_scale), tick_count(&y_range, plot.y_scale));
    let root = SVGBackend::with_string(svg, (PLOT_WIDTH_PX, PLOT_HEIGHT_PX)).into_drawing_area();
    root.fill(&WHITE).map_err(|error| error.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&plot.title, (FONT_FAMILY, 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x_range, y_range)
        .map_err(|error| error.to_string())?;
    let x_format = |position: &f64| tick_text(plot.x_scale.value_at(*position), &x_unit);
    let y_format = |position: &f64| tick_text(plot.y_scale.value_at(*position), &y_unit);
    chart
        .configure_mesh()
        .x_desc(plot.x_label.as_str())
        .y_desc(plot.y_label.as_str())
        .x_labels(x_ticks)
        .y_labels(y_ticks)
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .label_style((FONT_FAMILY, 15))
        .draw()
        .map_err(|error| error.to_string())?;
    for (index, line) in lines.iter().enumerate() {
        let color = LINE_COLORS[index % LINE_COLORS.len()];
        chart
            .draw_series(LineSeries::new(line.points.iter().copied(), color.stroke_width(2)))
            .map_err(|error| error.to_string())?
            .label(line.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(line.points.iter().map(|point| Circle::new(*point, 3, color.filled())))
            .map_err(|error| error.to_string())?;
    }
    if lines.len() > 1 || !lines[0].label.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT_FAMILY, 15))
            .draw()
            .map_err(|error| error.to_string())?;
    }
    root.present().map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut table = Table::new("runs", "Runs", &[("size", "B"), ("fanout", ""), ("mode", ""), ("rate", "Mbit/s")]);
        for (size, fanout, mode, rate) in [
            (64, "1 → 1", "best-effort", 100.0),
            (65536, "1 → 1", "best-effort", 9000.0),
            (64, "1 → 2", "reliable", 50.0),
        ] {
            let row = vec![Cell::from(size as u64), Cell::from(fanout), Cell::from(mode), Cell::from(rate)];
            table.push_row(row).expect("row");
        }
        table
    }

    #[test]
    fn a_plot_is_an_svg_with_title_labels_ticks_and_a_legend() {
        let table = table();
        let plot = Plot::lines("rate.svg", "Rate against size", &table, "size", "rate")
            .expect("columns exist")
            .series(&["fanout", "mode"])
            .log_x(4.0);
        let svg = render_svg(&plot, &table).expect("drawn");
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
        // plotters writes each text on a line of its own inside its element.
        let texts = [
            "Rate against size",
            "size (B)",
            "rate (Mbit/s)",
            "1 → 1, best-effort",
            "1 → 2, reliable",
            "64",
            "1K",
            "64K",
        ];
        for text in texts {
            assert!(svg.contains(&format!("\n{text}\n</text>")), "{text} missing");
        }
        // Axes are 1 px wide; the two data lines and their two legend marks are 2 px.
        assert_eq!(svg.matches("stroke-width=\"2\" points=").count(), 4, "one line per series");
    }

    #[test]
    fn the_rows_split_into_sorted_lines_by_the_series_columns() {
        let table = table();
        let plot = Plot::lines("r.svg", "R", &table, "size", "rate").expect("plot").series(&["fanout"]).log_x(4.0);
        let lines = lines(&plot, &table).expect("lines");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].label, "1 → 1");
        assert_eq!(lines[0].points, vec![(3.0, 100.0), (8.0, 9000.0)]);
    }

    #[test]
    fn only_the_rows_holding_the_chosen_cells_are_plotted() {
        let table = table();
        let plot = Plot::lines("r.svg", "R", &table, "size", "rate").expect("plot").only("mode", "best-effort");
        let drawn = lines(&plot, &table).expect("lines");
        assert_eq!(drawn.len(), 1);
        assert_eq!(drawn[0].points, vec![(64.0, 100.0), (65536.0, 9000.0)]);
        let none = Plot::lines("r.svg", "R", &table, "size", "rate").expect("plot").only("fanout", "1 → 3");
        assert!(lines(&none, &table).is_err(), "no row is left to plot");
        let missing = Plot::lines("r.svg", "R", &table, "size", "rate").expect("plot").only("nope", 1u64);
        assert!(render_svg(&missing, &table).is_err());
    }

    #[test]
    fn bad_plots_are_errors_not_panics() {
        let table = table();
        assert!(Plot::lines("r.svg", "R", &table, "size", "missing").is_err());
        let plot = Plot::lines("r.svg", "R", &table, "size", "mode").expect("columns exist");
        let error = render_svg(&plot, &table).expect_err("text is not a number");
        assert!(error.to_string().contains("no numeric"), "{error}");
        let plot = Plot::lines("r.svg", "R", &table, "size", "rate").expect("plot").log_y(1.0);
        assert!(render_svg(&plot, &table).is_err());
        let plot = Plot::lines("r.svg", "R", &table, "size", "rate").expect("plot").series(&["nope"]);
        assert!(render_svg(&plot, &table).is_err());
    }

    #[test]
    fn tick_labels_read_as_values() {
        assert_eq!(tick_text(64.0, "B"), "64");
        assert_eq!(tick_text(4096.0, "B"), "4K");
        assert_eq!(tick_text(1_048_576.0, "B"), "1M");
        assert_eq!(tick_text(1500.0, "B"), "1500");
        assert_eq!(tick_text(2.5, "Mbit/s"), "2.5");
        assert_eq!(tick_text(12_345.6, ""), "12346");
    }
}
