//! A figure as data: what [`super::catalog`] decides a figure shows (values, axes, captions), drawn either as a
//! standalone SVG by [`super::figures`] (`ropescope figures`) or, from its [`Spec::page_json`], by the report
//! page's script when the figure's card is opened. The two drawings share this one description, so the page and
//! the SVG files show the same numbers with the same words.

use super::figures::{self, HeatmapStyle, Labels, Matrix, Point, Series};
use super::png::base64;
use super::svg::{Scale, Tick};
use serde_json::{json, Value};

/// Significant digits of the plotted values a page embeds: more than a 180-pixel plot can show, and what a
/// hover text prints (the same digits, so it never claims more than the page holds).
pub const PAGE_DIGITS: usize = 4;

/// The text of a figure.
#[derive(Clone, Debug)]
pub struct Text {
    /// Title above the plot.
    pub title: String,
    /// x-axis label.
    pub x: String,
    /// y-axis label.
    pub y: String,
    /// Caption lines below the plot.
    pub caption: Vec<String>,
}

/// A named series of values at x = 0, 1, 2, ….
pub type NamedSeries = (String, Vec<f64>);

/// A heatmap: a `rows × cols` matrix and how it reads.
#[derive(Clone, Debug)]
pub struct Heat {
    /// Values, row-major.
    pub values: Vec<f64>,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Only cells with column ≤ row hold data (a causal attention window); the others are 0.
    pub causal: bool,
    /// Value-to-colour scale.
    pub scale: Scale,
    /// Label of the colour bar.
    pub colour_label: String,
    /// x ticks at column positions; empty: numeric ticks of `x_range`.
    pub xticks: Vec<Tick>,
    /// Data value of the first and one past the last row.
    pub y_range: (f64, f64),
    /// Data value of the first and one past the last column.
    pub x_range: (f64, f64),
    /// Rows are categories (heads, layers).
    pub categorical_rows: bool,
    /// The colour range, values beyond it saturating; `None`: [`figures::value_range`] of the values.
    pub range: Option<(f64, f64)>,
}

/// The kinds of plot.
#[derive(Clone, Debug)]
pub enum Plot {
    /// Grouped bars, with x tick labels.
    Bars {
        /// Series.
        series: Vec<NamedSeries>,
        /// x ticks `(group, label)`.
        xticks: Vec<Tick>,
    },
    /// Line profiles, with an optional dashed horizontal reference `(y, label)`.
    Lines {
        /// Series.
        series: Vec<NamedSeries>,
        /// Reference line.
        reference: Option<(f64, String)>,
    },
    /// A heatmap with its colour bar.
    Heatmap(Heat),
    /// Points on `[0, 1]²` and a legend of `(colour, name)`.
    Scatter {
        /// Points.
        points: Vec<Point>,
        /// Legend.
        legend: Vec<(String, String)>,
    },
}

/// A figure's text and plot.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Title, axis labels, caption.
    pub text: Text,
    /// What is drawn.
    pub plot: Plot,
}

/// `v` rounded to [`PAGE_DIGITS`] significant digits, `null` when not finite.
fn rounded(v: f64) -> Value {
    if !v.is_finite() {
        return Value::Null;
    }
    let s = format!("{:.*e}", PAGE_DIGITS - 1, v);
    s.parse::<f64>().map_or(Value::Null, Value::from)
}

/// `v` with `digits` significant digits, in fixed notation (`0.771`, `12.3`, `1234`).
pub fn significant(v: f64, digits: usize) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let magnitude = v.abs().log10().floor() as i64;
    let decimals = (digits as i64 - 1 - magnitude).max(0) as usize;
    format!("{v:.decimals$}")
}

fn ticks_json(ticks: &[Tick]) -> Value {
    ticks.iter().map(|(v, s)| json!([v, s])).collect()
}

fn series_json(series: &[NamedSeries]) -> Value {
    series
        .iter()
        .map(|(name, v)| json!({"name": name, "values": v.iter().map(|&x| rounded(x)).collect::<Vec<_>>()}))
        .collect()
}

/// Borrowed views of named series, as the SVG figures take them.
fn borrow(series: &[NamedSeries]) -> Vec<Series<'_>> {
    series
        .iter()
        .map(|(name, values)| Series { name, values })
        .collect()
}

impl Spec {
    fn labels(&self) -> Labels<'_> {
        Labels {
            title: &self.text.title,
            x: &self.text.x,
            y: &self.text.y,
            caption: &self.text.caption,
        }
    }

    /// The standalone SVG document.
    pub fn svg(&self) -> String {
        let labels = self.labels();
        match &self.plot {
            Plot::Bars { series, xticks } => figures::bars(&labels, &borrow(series), xticks),
            Plot::Lines { series, reference } => figures::lines(
                &labels,
                &borrow(series),
                reference.as_ref().map(|(y, s)| (*y, s.as_str())),
            ),
            Plot::Heatmap(h) => {
                let m = Matrix {
                    values: &h.values,
                    rows: h.rows,
                    cols: h.cols,
                };
                let style = HeatmapStyle {
                    scale: h.scale,
                    colour_label: &h.colour_label,
                    xticks: h.xticks.clone(),
                    y_range: h.y_range,
                    x_range: h.x_range,
                    categorical_rows: h.categorical_rows,
                    range: h.range,
                    // Attention maps (keys against queries) are square.
                    square: h.rows == h.cols && !h.categorical_rows,
                };
                figures::heatmap(&labels, &m, &style)
            }
            Plot::Scatter { points, legend } => figures::scatter(&labels, points, legend),
        }
    }

    /// The figure as the page's script draws it (`null` for a scatter, which the page draws as SVG): text, and
    /// plotted values to [`PAGE_DIGITS`] significant digits. A heatmap's cells are one byte each, base64
    /// (`codes`): the colour position `round(255 · t)`, `t ∈ [0, 1]` on its scale from `lo` to `hi` (its
    /// `range`, or [`figures::value_range`], as the SVG uses); `above` (`below`) says some cells lie beyond `hi`
    /// (`lo`), coded 255 (0); `hi_text` states `hi` to 3 significant digits. A causal heatmap holds only the cells of
    /// columns ≤ row, row after row.
    pub fn page_json(&self) -> Value {
        let t = &self.text;
        let mut v = json!({"title": t.title, "x": t.x, "y": t.y, "caption": t.caption});
        match &self.plot {
            Plot::Bars { series, xticks } => {
                v["kind"] = "bars".into();
                v["series"] = series_json(series);
                v["xticks"] = ticks_json(xticks);
            }
            Plot::Lines { series, reference } => {
                v["kind"] = "lines".into();
                v["series"] = series_json(series);
                v["reference"] = reference
                    .as_ref()
                    .map_or(Value::Null, |(y, s)| json!([y, s]));
            }
            Plot::Heatmap(h) => {
                let (lo, hi) = h.range.unwrap_or_else(|| figures::value_range(&h.values));
                let above = h.values.iter().any(|&x| x > hi);
                let below = h.values.iter().any(|&x| x < lo);
                let mut codes = Vec::with_capacity(h.values.len());
                for r in 0..h.rows {
                    let cols = if h.causal {
                        (r + 1).min(h.cols)
                    } else {
                        h.cols
                    };
                    for c in 0..cols {
                        let x = h.values.get(r * h.cols + c).copied().unwrap_or(f64::NAN);
                        codes.push((255.0 * h.scale.unit(x, lo, hi)).round() as u8);
                    }
                }
                v["kind"] = "heatmap".into();
                v["rows"] = h.rows.into();
                v["cols"] = h.cols.into();
                v["causal"] = h.causal.into();
                v["scale"] = match h.scale {
                    Scale::Linear => "linear",
                    Scale::Sqrt => "sqrt",
                }
                .into();
                v["lo"] = lo.into();
                v["hi"] = hi.into();
                v["hi_text"] = significant(hi, 3).into();
                v["above"] = above.into();
                v["below"] = below.into();
                v["label"] = h.colour_label.as_str().into();
                v["xticks"] = ticks_json(&h.xticks);
                v["y_range"] = json!([h.y_range.0, h.y_range.1]);
                v["x_range"] = json!([h.x_range.0, h.x_range.1]);
                v["categorical"] = h.categorical_rows.into();
                v["codes"] = base64(&codes).into();
            }
            Plot::Scatter { .. } => return Value::Null,
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits() {
        assert_eq!(significant(0.77123, 3), "0.771");
        assert_eq!(significant(12.345, 3), "12.3");
        assert_eq!(significant(1234.5, 3), "1234");
        assert_eq!(significant(0.0012345, 3), "0.00123");
        assert_eq!(rounded(0.123456), Value::from(0.1235));
        assert_eq!(rounded(f64::NAN), Value::Null);
    }

    #[test]
    fn causal_heatmap_keeps_the_lower_triangle() {
        let spec = Spec {
            text: Text {
                title: "t".into(),
                x: "x".into(),
                y: "y".into(),
                caption: Vec::new(),
            },
            plot: Plot::Heatmap(Heat {
                values: vec![1.0, 0.0, 0.0, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0],
                rows: 3,
                cols: 3,
                causal: true,
                scale: Scale::Sqrt,
                colour_label: "attn".into(),
                xticks: Vec::new(),
                y_range: (0.0, 3.0),
                x_range: (0.0, 3.0),
                categorical_rows: false,
                range: None,
            }),
        };
        let v = spec.page_json();
        // 1 + 2 + 3 cells: 255 at the maximum, √0.25 = 0.5 → 128, zeros elsewhere.
        assert_eq!(v["codes"], base64(&[255, 128, 0, 0, 0, 0]));
        assert_eq!((v["lo"].as_f64(), v["hi"].as_f64()), (Some(0.0), Some(1.0)));
        assert_eq!(v["hi_text"], "1.00");
    }
}
