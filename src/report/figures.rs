//! The figure kinds, each a function returning a standalone SVG document: heatmap with colour bar, grouped
//! bars, line profiles, and a scatter plane on `[0, 1]²`. They take plain numbers; [`super::catalog`] decides
//! what each figure shows.

use super::png;
use super::svg::{
    colour_bar, nice_ticks, numeric_ticks, tick_label, viridis, Anchor, Plot, Scale, Svg,
};

/// Width of every figure, pixels.
const WIDTH: f64 = 380.0;
/// Height of the plot area, pixels.
const PLOT_H: f64 = 180.0;
/// Top margin (title).
const TOP: f64 = 30.0;
/// Left margin (y ticks and label).
const LEFT: f64 = 58.0;
/// Space below the plot for x ticks and the x label.
const BELOW: f64 = 42.0;
/// Height of one caption line.
const CAPTION_LINE: f64 = 13.0;
/// Colours of data series, in order (colour-blind safe: Okabe–Ito).
pub const SERIES: [&str; 4] = ["#0072B2", "#E69F00", "#009E73", "#CC79A7"];

/// Text shared by every figure: a title, axis labels and caption lines (notes such as downsampling).
pub struct Labels<'a> {
    /// Title above the plot.
    pub title: &'a str,
    /// x-axis label.
    pub x: &'a str,
    /// y-axis label.
    pub y: &'a str,
    /// Caption lines below the figure.
    pub caption: &'a [String],
}

/// A document with room for the caption; returns it and the plot box (data ranges to be set), `PLOT_H` tall, or
/// as tall as it is wide when `square`.
fn canvas(labels: &Labels, right: f64, square: bool) -> (Svg, Plot) {
    let w = WIDTH - LEFT - right;
    let plot_h = if square { w } else { PLOT_H };
    let height = TOP + plot_h + BELOW + CAPTION_LINE * labels.caption.len() as f64 + 6.0;
    let mut svg = Svg::new(WIDTH, height);
    svg.text(
        (WIDTH / 2.0, 18.0),
        labels.title,
        13.0,
        Anchor::Middle,
        false,
    );
    let plot = Plot {
        x: LEFT,
        y: TOP,
        w,
        h: plot_h,
        xr: (0.0, 1.0),
        yr: (0.0, 1.0),
    };
    for (k, line) in labels.caption.iter().enumerate() {
        let y = TOP + plot_h + BELOW + CAPTION_LINE * (k as f64 + 1.0);
        svg.text((8.0, y), line, 10.0, Anchor::Start, false);
    }
    (svg, plot)
}

/// A data series: a name for the legend, and values (at x = 0, 1, 2, … unless the figure says otherwise).
pub struct Series<'a> {
    /// Legend entry.
    pub name: &'a str,
    /// Values.
    pub values: &'a [f64],
}

/// Right margin of a plot: room for the legend when there is more than one series.
fn legend_margin(series: &[Series]) -> f64 {
    if series.len() > 1 {
        72.0
    } else {
        12.0
    }
}

/// Legend entries right of the plot, so they never cover data.
fn legend(svg: &mut Svg, plot: &Plot, series: &[Series]) {
    if series.len() < 2 {
        return;
    }
    for (k, s) in series.iter().enumerate() {
        let y = plot.y + 8.0 + 14.0 * k as f64;
        let x = plot.x + plot.w + 8.0;
        svg.rect(x, y - 7.0, 10.0, 8.0, SERIES[k % SERIES.len()]);
        svg.text((x + 14.0, y), s.name, 10.0, Anchor::Start, false);
    }
}

/// The largest finite value of all series (at least `floor`).
fn max_of(series: &[Series], floor: f64) -> f64 {
    series
        .iter()
        .flat_map(|s| s.values.iter())
        .copied()
        .filter(|v| v.is_finite())
        .fold(floor, f64::max)
}

/// Grouped bars: bar group `i` holds every series' value `i`. `xticks` label the groups.
pub fn bars(labels: &Labels, series: &[Series], xticks: &[(f64, String)]) -> String {
    let (mut svg, mut plot) = canvas(labels, legend_margin(series), false);
    let n = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    plot.xr = (-0.5, n as f64 - 0.5);
    plot.yr = (0.0, max_of(series, 0.0) * 1.08);
    if plot.yr.1 <= 0.0 {
        plot.yr.1 = 1.0;
    }
    let group = plot.w / n.max(1) as f64 * 0.8;
    let width = group / series.len().max(1) as f64;
    for (k, s) in series.iter().enumerate() {
        for (i, &v) in s.values.iter().enumerate() {
            if !v.is_finite() {
                continue;
            }
            let x = plot.px(i as f64) - group / 2.0 + width * k as f64;
            let y = plot.py(v.max(0.0));
            svg.rect(x, y, width, plot.py(0.0) - y, SERIES[k % SERIES.len()]);
        }
    }
    let yticks = numeric_ticks(plot.yr.0, plot.yr.1, 4);
    plot.axes(&mut svg, (xticks, &yticks), labels.x, labels.y);
    legend(&mut svg, &plot, series);
    svg.finish()
}

/// Line profiles over x = 0, 1, …, with an optional dashed horizontal reference `(y, label)`.
pub fn lines(labels: &Labels, series: &[Series], reference: Option<(f64, &str)>) -> String {
    let (mut svg, mut plot) = canvas(labels, legend_margin(series), false);
    let n = series.iter().map(|s| s.values.len()).max().unwrap_or(1);
    plot.xr = (0.0, (n.max(2) - 1) as f64);
    let top = max_of(series, reference.map_or(0.0, |r| r.0)) * 1.08;
    plot.yr = (0.0, if top > 0.0 { top } else { 1.0 });
    if let Some((y, name)) = reference {
        let py = plot.py(y);
        svg.line((plot.x, py), (plot.x + plot.w, py), "#888", true);
        svg.text((plot.x + 4.0, py - 3.0), name, 9.0, Anchor::Start, false);
    }
    for (k, s) in series.iter().enumerate() {
        let colour = SERIES[k % SERIES.len()];
        let points: Vec<(f64, f64)> = s
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(i, &v)| (plot.px(i as f64), plot.py(v)))
            .collect();
        svg.polyline(&points, colour);
        for &p in &points {
            svg.dot(p, 2.0, colour, s.name);
        }
    }
    let xticks = numeric_ticks(plot.xr.0, plot.xr.1, 6);
    let yticks = numeric_ticks(plot.yr.0, plot.yr.1, 4);
    plot.axes(&mut svg, (&xticks, &yticks), labels.x, labels.y);
    legend(&mut svg, &plot, series);
    svg.finish()
}

/// A point of a scatter plane.
#[derive(Clone, Debug)]
pub struct Point {
    /// x in `[0, 1]`.
    pub x: f64,
    /// y in `[0, 1]`.
    pub y: f64,
    /// Fill colour.
    pub colour: String,
    /// Hover text.
    pub title: String,
}

/// Points on the plane `[0, 1]²` with the diagonal `y = x` dashed, and a legend of `(colour, name)`.
pub fn scatter(labels: &Labels, points: &[Point], legend: &[(String, String)]) -> String {
    let (mut svg, mut plot) = canvas(labels, 110.0, false);
    plot.w = plot.h;
    svg.line(
        (plot.px(0.0), plot.py(0.0)),
        (plot.px(1.0), plot.py(1.0)),
        "#bbb",
        true,
    );
    for p in points {
        let (x, y) = (p.x.clamp(0.0, 1.0), p.y.clamp(0.0, 1.0));
        svg.dot((plot.px(x), plot.py(y)), 4.0, &p.colour, &p.title);
    }
    let ticks = numeric_ticks(0.0, 1.0, 4);
    plot.axes(&mut svg, (&ticks, &ticks), labels.x, labels.y);
    for (k, (colour, name)) in legend.iter().enumerate() {
        let (x, y) = (plot.x + plot.w + 14.0, plot.y + 8.0 + 14.0 * k as f64);
        svg.dot((x, y - 3.0), 4.0, colour, name);
        svg.text((x + 8.0, y), name, 10.0, Anchor::Start, false);
    }
    svg.finish()
}

/// A matrix to draw as a heatmap: `rows × cols` values in row-major order.
pub struct Matrix<'a> {
    /// Values, row-major.
    pub values: &'a [f64],
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
}

/// How a heatmap's axes and colours read.
pub struct HeatmapStyle<'a> {
    /// Value-to-colour scale.
    pub scale: Scale,
    /// Label of the colour bar.
    pub colour_label: &'a str,
    /// Tick labels of the x axis at column centres `(column, label)`; empty: numeric column ticks.
    pub xticks: Vec<(f64, String)>,
    /// Data value of the first and one past the last row (for y tick labels), e.g. `(0, N)` for query
    /// positions; rows are drawn top to bottom.
    pub y_range: (f64, f64),
    /// Data value of the first and one past the last column.
    pub x_range: (f64, f64),
    /// Rows are categories (heads, layers): label row centres with their index instead of numeric ticks.
    pub categorical_rows: bool,
    /// The colour range `(lo, hi)`, values beyond it saturating; `None`: [`value_range`] of the values.
    pub range: Option<(f64, f64)>,
    /// A square plot (an attention map: keys against queries), taller than the other figures.
    pub square: bool,
}

/// A heatmap (a pixelated raster, top row first) with axes and a colour bar scaled to the data's range.
pub fn heatmap(labels: &Labels, m: &Matrix, style: &HeatmapStyle) -> String {
    let (mut svg, mut plot) = canvas(labels, 64.0, style.square);
    let (lo, hi) = style.range.unwrap_or_else(|| value_range(m.values));
    if m.rows > 0 && m.cols > 0 && m.values.len() == m.rows * m.cols {
        let uri = png::data_uri(m.cols, m.rows, |r, c| {
            viridis(style.scale.unit(m.values[r * m.cols + c], lo, hi))
        });
        svg.image(plot.x, plot.y, plot.w, plot.h, &uri);
    }
    let bar = (plot.x + plot.w + 12.0, plot.y, plot.h);
    colour_bar(&mut svg, bar, (lo, hi), style.scale, style.colour_label);
    // Rows run downwards: the plot maps the negated row value, so row `v` sits at `py(-v)`.
    plot.xr = style.x_range;
    plot.yr = (-style.y_range.1, -style.y_range.0);
    let xticks = if style.xticks.is_empty() {
        numeric_ticks(style.x_range.0, style.x_range.1, 4)
    } else {
        style.xticks.clone()
    };
    let yticks: Vec<(f64, String)> = if style.categorical_rows {
        let step = m.rows.div_ceil(8).max(1);
        (0..m.rows)
            .step_by(step)
            .map(|r| (-(style.y_range.0 + r as f64 + 0.5), r.to_string()))
            .collect()
    } else {
        nice_ticks(style.y_range.0, style.y_range.1, 4)
            .into_iter()
            .map(|v| (-v, tick_label(v)))
            .collect()
    };
    plot.axes(&mut svg, (&xticks, &yticks), labels.x, labels.y);
    svg.finish()
}

/// The colour range of a heatmap: from the smallest finite value (or 0, when all are positive) to the largest;
/// `(0, 1)` when the values do not span a range.
pub fn value_range(values: &[f64]) -> (f64, f64) {
    let finite = || values.iter().copied().filter(|v| v.is_finite());
    let hi = finite().fold(f64::NEG_INFINITY, f64::max);
    let lo = finite().fold(f64::INFINITY, f64::min).min(0.0);
    if hi > lo {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

/// The colour of a label's grid cell (see [`super::html`]): one hue per kind of head.
pub fn label_colour(label: &str) -> String {
    let kind = label.split('(').next().unwrap_or(label);
    let c = match kind {
        "sink" => "#7f7f7f",
        "diagonal" => "#9467bd",
        "previous-token" => "#d62728",
        "slash" => "#ff7f0e",
        "induction" => "#2ca02c",
        "positional" => "#1f77b4",
        "symbolic" => "#17becf",
        _ => "#e6e6e6",
    };
    c.into()
}

/// Block means of a `side × side` map shown at `shown × shown` (row bin `⌊i·shown/side⌋`, as the scan bins).
pub fn block_mean(values: &[f64], side: usize, shown: usize) -> Vec<f64> {
    if shown >= side || shown == 0 {
        return values.to_vec();
    }
    let mut sum = vec![0.0; shown * shown];
    let mut count = vec![0usize; shown * shown];
    for i in 0..side {
        for j in 0..side {
            let b = (i * shown / side) * shown + j * shown / side;
            sum[b] += values.get(i * side + j).copied().unwrap_or(0.0);
            count[b] += 1;
        }
    }
    sum.iter()
        .zip(&count)
        .map(|(s, &c)| s / c.max(1) as f64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_mean_averages_blocks() {
        let v: Vec<f64> = (0..16).map(f64::from).collect();
        assert_eq!(block_mean(&v, 4, 2), vec![2.5, 4.5, 10.5, 12.5]);
        assert_eq!(block_mean(&v, 4, 8), v);
    }

    #[test]
    fn labels_map_to_kinds() {
        assert_eq!(label_colour("slash(3)"), label_colour("slash(7)"));
        assert_ne!(label_colour("sink"), label_colour("mixed"));
    }
}
