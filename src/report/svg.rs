//! A small hand-written SVG builder: elements, a plot frame with axes and ticks, colour maps and a colour bar.
//!
//! Hand-written rather than `plotters`: the report needs five kinds of figure, all boxes, lines, dots and text.
//! `plotters` with only its SVG backend (no `ttf`, so no system fonts) still adds `plotters`, `plotters-backend`,
//! `plotters-svg` and their feature machinery, and without `ttf` it cannot measure text either, so its label
//! layout would be as approximate as this one. Here every coordinate is ours, the output is deterministic
//! (figures diff cleanly), and nothing depends on what is installed on the machine.

use std::fmt::Write;

/// Font stack of every text element: generic families only, so nothing is fetched.
const FONT: &str = "DejaVu Sans, Liberation Sans, Arial, sans-serif";

/// An SVG document under construction.
pub struct Svg {
    width: f64,
    height: f64,
    body: String,
}

/// Horizontal anchor of a text element.
#[derive(Clone, Copy)]
pub enum Anchor {
    /// Text starts at `x`.
    Start,
    /// Text is centred on `x`.
    Middle,
    /// Text ends at `x`.
    End,
}

impl Anchor {
    fn name(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

impl Svg {
    /// An empty `width × height` document (pixels).
    pub fn new(width: f64, height: f64) -> Self {
        Self {
            width,
            height,
            body: String::new(),
        }
    }

    /// A filled rectangle.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str) {
        let _ = write!(
            self.body,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}"/>"#,
            num(x),
            num(y),
            num(w),
            num(h)
        );
    }

    /// A rectangle outline.
    pub fn frame(&mut self, x: f64, y: f64, w: f64, h: f64, stroke: &str) {
        let _ = write!(
            self.body,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="{stroke}"/>"#,
            num(x),
            num(y),
            num(w),
            num(h)
        );
    }

    /// A straight line; `dash` draws it dashed.
    pub fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, dash: bool) {
        let dash = if dash {
            r#" stroke-dasharray="4 3""#
        } else {
            ""
        };
        let _ = write!(
            self.body,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{stroke}"{dash}/>"#,
            num(x1),
            num(y1),
            num(x2),
            num(y2)
        );
    }

    /// A polyline through `points`.
    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: &str) {
        let pts: Vec<String> = points
            .iter()
            .map(|&(x, y)| format!("{},{}", num(x), num(y)))
            .collect();
        let _ = write!(
            self.body,
            r#"<polyline points="{}" fill="none" stroke="{stroke}" stroke-width="1.5"/>"#,
            pts.join(" ")
        );
    }

    /// A dot of radius `r` with a hover title.
    pub fn dot(&mut self, (x, y): (f64, f64), r: f64, fill: &str, title: &str) {
        let _ = write!(
            self.body,
            r##"<circle cx="{}" cy="{}" r="{}" fill="{fill}" stroke="#333" stroke-width="0.5"><title>{}</title></circle>"##,
            num(x),
            num(y),
            num(r),
            escape(title)
        );
    }

    /// Text of `size` pixels; `rotate` turns it 90° counter-clockwise about its anchor (for y-axis labels).
    pub fn text(&mut self, (x, y): (f64, f64), s: &str, size: f64, anchor: Anchor, rotate: bool) {
        let rot = if rotate {
            format!(r#" transform="rotate(-90 {} {})""#, num(x), num(y))
        } else {
            String::new()
        };
        let _ = write!(
            self.body,
            r#"<text x="{}" y="{}" font-size="{}" text-anchor="{}"{rot}>{}</text>"#,
            num(x),
            num(y),
            num(size),
            anchor.name(),
            escape(s)
        );
    }

    /// A raster image (a `data:` URI) drawn pixelated into the box: heatmaps are pictures, not thousands of
    /// rectangles, so a 256×256 map stays a few hundred kilobytes.
    pub fn image(&mut self, x: f64, y: f64, w: f64, h: f64, data_uri: &str) {
        let _ = write!(
            self.body,
            r#"<image x="{}" y="{}" width="{}" height="{}" preserveAspectRatio="none" style="image-rendering:pixelated" href="{data_uri}"/>"#,
            num(x),
            num(y),
            num(w),
            num(h)
        );
    }

    /// The finished document, with a white background.
    pub fn finish(self) -> String {
        format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="{FONT}"><rect width="{w}" height="{h}" fill="white"/>{}</svg>"#,
            self.body,
            w = num(self.width),
            h = num(self.height),
        )
    }
}

/// A number for an SVG attribute: at most two decimals, no trailing zeros.
fn num(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    let s = format!("{:.2}", v);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// `s` with the XML special characters escaped.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A tick label: short, in scientific notation when very small or large.
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e4).contains(&a) {
        format!("{v:.0e}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').into()
    }
}

/// About `n` round tick values covering `[lo, hi]`.
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo || n == 0 {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// An axis tick: data value and label.
pub type Tick = (f64, String);

/// A plot area: pixel box and the data ranges it maps.
#[derive(Clone, Copy)]
pub struct Plot {
    /// Left edge, pixels.
    pub x: f64,
    /// Top edge, pixels.
    pub y: f64,
    /// Width, pixels.
    pub w: f64,
    /// Height, pixels.
    pub h: f64,
    /// Data range of the x axis.
    pub xr: (f64, f64),
    /// Data range of the y axis.
    pub yr: (f64, f64),
}

impl Plot {
    /// Pixel x of data value `v`.
    pub fn px(&self, v: f64) -> f64 {
        let (a, b) = self.xr;
        let span = if b > a { b - a } else { 1.0 };
        self.x + (v - a) / span * self.w
    }

    /// Pixel y of data value `v` (up is larger).
    pub fn py(&self, v: f64) -> f64 {
        let (a, b) = self.yr;
        let span = if b > a { b - a } else { 1.0 };
        self.y + self.h - (v - a) / span * self.h
    }

    /// Draws the box, ticks with labels on both axes and the axis titles. Ticks are `(data value, label)`.
    pub fn axes(
        &self,
        svg: &mut Svg,
        (xticks, yticks): (&[Tick], &[Tick]),
        xlabel: &str,
        ylabel: &str,
    ) {
        svg.frame(self.x, self.y, self.w, self.h, "#444");
        let bottom = self.y + self.h;
        for (v, label) in xticks {
            let x = self.px(*v);
            svg.line((x, bottom), (x, bottom + 4.0), "#444", false);
            svg.text((x, bottom + 15.0), label, 10.0, Anchor::Middle, false);
        }
        for (v, label) in yticks {
            let y = self.py(*v);
            svg.line((self.x - 4.0, y), (self.x, y), "#444", false);
            svg.text((self.x - 6.0, y + 3.5), label, 10.0, Anchor::End, false);
        }
        svg.text(
            (self.x + self.w / 2.0, bottom + 32.0),
            xlabel,
            11.0,
            Anchor::Middle,
            false,
        );
        svg.text(
            (self.x - 42.0, self.y + self.h / 2.0),
            ylabel,
            11.0,
            Anchor::Middle,
            true,
        );
    }
}

/// Numeric x ticks of a plot's range as `(value, label)`.
pub fn numeric_ticks(lo: f64, hi: f64, n: usize) -> Vec<(f64, String)> {
    nice_ticks(lo, hi, n)
        .into_iter()
        .map(|v| (v, tick_label(v)))
        .collect()
}

/// Viridis colour map at `t ∈ [0, 1]` (clamped), as RGB: perceptually uniform and readable in greyscale.
pub fn viridis(t: f64) -> [u8; 3] {
    const STOPS: [[f64; 3]; 9] = [
        [68.0, 1.0, 84.0],
        [71.0, 44.0, 122.0],
        [59.0, 81.0, 139.0],
        [44.0, 113.0, 142.0],
        [33.0, 144.0, 141.0],
        [39.0, 173.0, 129.0],
        [92.0, 200.0, 99.0],
        [170.0, 220.0, 50.0],
        [253.0, 231.0, 37.0],
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let f = t * (STOPS.len() - 1) as f64;
    let i = (f.floor() as usize).min(STOPS.len() - 2);
    let u = f - i as f64;
    let mix = |k: usize| (STOPS[i][k] + (STOPS[i + 1][k] - STOPS[i][k]) * u).round() as u8;
    [mix(0), mix(1), mix(2)]
}

/// `#rrggbb` of an RGB triple.
pub fn hex([r, g, b]: [u8; 3]) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// How values map to colour.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// Colour proportional to the value.
    Linear,
    /// Colour proportional to its square root: attention maps are dominated by a few large entries (the sink),
    /// and the square root keeps the diagonals visible. The colour bar is labelled in the values themselves.
    Sqrt,
}

impl Scale {
    /// Position in `[0, 1]` of `v` on a scale from `lo` to `hi`.
    pub fn unit(self, v: f64, lo: f64, hi: f64) -> f64 {
        let (v, lo, hi) = match self {
            Scale::Linear => (v, lo, hi),
            Scale::Sqrt => (v.max(0.0).sqrt(), lo.max(0.0).sqrt(), hi.max(0.0).sqrt()),
        };
        if hi > lo {
            ((v - lo) / (hi - lo)).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// Draws a vertical colour bar at `(x, y)`, `h` tall, for values `lo..hi` on `scale`, with ticks and `label`.
pub fn colour_bar(
    svg: &mut Svg,
    (x, y, h): (f64, f64, f64),
    (lo, hi): (f64, f64),
    scale: Scale,
    label: &str,
) {
    const STEPS: usize = 48;
    let step = h / STEPS as f64;
    for k in 0..STEPS {
        let t = (k as f64 + 0.5) / STEPS as f64;
        svg.rect(
            x,
            y + h - (k + 1) as f64 * step,
            12.0,
            step + 0.3,
            &hex(viridis(t)),
        );
    }
    svg.frame(x, y, 12.0, h, "#444");
    for v in nice_ticks(lo, hi, 4) {
        let ty = y + h - scale.unit(v, lo, hi) * h;
        svg.line((x + 12.0, ty), (x + 16.0, ty), "#444", false);
        svg.text(
            (x + 18.0, ty + 3.5),
            &tick_label(v),
            9.0,
            Anchor::Start,
            false,
        );
    }
    svg.text((x + 6.0, y - 6.0), label, 10.0, Anchor::Middle, false);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside() {
        assert_eq!(nice_ticks(0.0, 1.0, 4), vec![0.0, 0.5, 1.0]);
        assert!(nice_ticks(0.0, 8.0, 4)
            .iter()
            .all(|&t| (0.0..=8.0).contains(&t)));
        assert_eq!(nice_ticks(1.0, 1.0, 4), vec![1.0]);
    }

    #[test]
    fn text_is_escaped_and_numbers_short() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(num(1.0), "1");
        assert_eq!(num(-0.001), "0");
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(viridis(0.0), [68, 1, 84]);
        assert_eq!(viridis(2.0), [253, 231, 37]);
    }
}
