//! Every figure of a scan, by name: what each shows, drawn from the directory's files. The HTML report and
//! `ropescope figures` both take their figures from here, so the two always agree.

use super::data::{ScanData, Tensor};
use super::figures::{
    bars, block_mean, heatmap, label_colour, lines, scatter, HeatmapStyle, Labels, Matrix, Point,
    Series,
};
use super::svg::{tick_label, Scale};
use crate::scan::labels::POSYM_FIELDS;

/// Singular values shown by the rank figure (the leading ones carry the rank-one story).
const SINGULAR_SHOWN: usize = 16;

/// One figure: a file-name stem, a title, and the SVG or why there is none.
pub struct Figure {
    /// File-name stem (`L0H1_attention_natural`), also the HTML anchor of the figure.
    pub name: String,
    /// Human title.
    pub title: String,
    /// The SVG document, or the reason it is absent (`not run: …`).
    pub content: Result<String, String>,
}

impl Figure {
    fn new(name: String, title: String, content: Result<String, String>) -> Self {
        Self {
            name,
            title,
            content,
        }
    }
}

/// The "not run" reason of a figure whose files are absent.
fn not_run(analysis: &str, file: &str) -> String {
    format!("not run: analysis `{analysis}` ({file} absent)")
}

/// Display options.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Largest side at which attention maps are drawn (block-averaged further when the file's map is larger);
    /// `None` draws the file's map as it is.
    pub max_map_side: Option<usize>,
}

/// Every figure: the model-wide ones, then each head's.
pub fn all(data: &ScanData, opts: Options) -> Vec<Figure> {
    let mut out = model_wide(data);
    for h in &data.summary.heads {
        out.extend(head(data, h.layer, h.head, opts));
    }
    out
}

/// Model-wide figures: the positional–symbolic plane and the frequency-usage heatmaps.
pub fn model_wide(data: &ScanData) -> Vec<Figure> {
    let mut out = vec![posym_plane(data)];
    out.extend(frequency_usage(data));
    out
}

/// One head's figures: attention maps (natural, random), slash profile, chunk norms, A_l spectrum, rank.
pub fn head(data: &ScanData, layer: usize, head: usize, opts: Options) -> Vec<Figure> {
    let tag = format!("L{layer}H{head}");
    let mut out: Vec<Figure> = (0..2)
        .map(|set| attention(data, (layer, head), set, opts))
        .collect();
    out.push(slash_profile(data, layer, head));
    out.push(chunk_norms(data, layer, head));
    out.push(spectrum(data, layer, head));
    out.push(rank(data, layer, head));
    for f in &mut out {
        f.name = format!("{tag}_{}", f.name);
    }
    out
}

fn set_name(set: usize) -> &'static str {
    ["natural", "random"][set]
}

/// Attention map of the set's first prompt, downsampled for display when needed (said in the caption).
fn attention(data: &ScanData, (l, h): (usize, usize), set: usize, opts: Options) -> Figure {
    let name = format!("attention_{}", set_name(set));
    let title = format!("L{l}H{h} · attention, {} prompt", set_name(set));
    let file = format!("attention_map_{}.npy", set_name(set));
    let Some(map) = data.attention[set].as_ref().and_then(|t| t.at(&[l, h])) else {
        return Figure::new(name, title, Err(not_run("slash", &file)));
    };
    let side = data.attention[set].as_ref().map_or(0, |t| t.shape[2]);
    let n = data.first_prompt_length(set).unwrap_or(side);
    let shown = opts.max_map_side.map_or(side, |m| m.min(side));
    let values = block_mean(map, side, shown);
    let mut caption = vec![format!(
        "first {} prompt, N = {n} tokens; colour ∝ √attention",
        set_name(set)
    )];
    if shown < n {
        let block = n as f64 / shown as f64;
        caption.push(format!(
            "downsampled: {shown}×{shown} cells, each the mean of a {}×{} block",
            tick_label(block),
            tick_label(block)
        ));
        caption.push("of the N×N map (future entries count as 0)".into());
    }
    let labels = Labels {
        title: &title,
        x: "key position j",
        y: "query position i",
        caption: &caption,
    };
    let style = HeatmapStyle {
        scale: Scale::Sqrt,
        colour_label: "attn",
        xticks: Vec::new(),
        y_range: (0.0, n as f64),
        x_range: (0.0, n as f64),
        categorical_rows: false,
    };
    let m = Matrix {
        values: &values,
        rows: shown,
        cols: shown,
    };
    let svg = heatmap(&labels, &m, &style);
    Figure::new(name, title, Ok(svg))
}

/// Mean slash score over Δ, natural and random prompts, with κ.
fn slash_profile(data: &ScanData, l: usize, h: usize) -> Figure {
    let (name, title) = (
        "slash".to_string(),
        format!("L{l}H{h} · slash score over Δ"),
    );
    let Some(natural) = data.slash[0].as_ref().and_then(|t| t.at(&[l, h])) else {
        return Figure::new(name, title, Err(not_run("slash", "slash_natural.npy")));
    };
    let mut series = vec![Series {
        name: "natural",
        values: natural,
    }];
    if let Some(random) = data.slash[1].as_ref().and_then(|t| t.at(&[l, h])) {
        series.push(Series {
            name: "random",
            values: random,
        });
    }
    let mut caption = Vec::new();
    if let Some(s) = head_summary(data, l, h).and_then(|s| s.slash.as_ref()) {
        caption.push(format!(
            "best Δ = {} (score {}), sink = {}",
            s.best_delta,
            tick_label(s.best_score),
            tick_label(s.sink)
        ));
    }
    let labels = Labels {
        title: &title,
        x: "offset Δ",
        y: "mean S[i, i−Δ]",
        caption: &caption,
    };
    let kappa = data.meta.parameters.kappa;
    let svg = lines(&labels, &series, Some((kappa, "κ")));
    Figure::new(name, title, Ok(svg))
}

/// x ticks of a chunk axis: a few chunks labelled with their frequency `g_l` (rad/token).
fn chunk_ticks(data: &ScanData, l: usize, n: usize) -> Vec<(f64, String)> {
    let freq = data.chunk_frequency.as_ref().and_then(|t| t.at(&[l]));
    let step = n.div_ceil(5).max(1);
    (0..n)
        .step_by(step)
        .map(|c| {
            let label = match freq.and_then(|f| f.get(c)) {
                Some(&g) => tick_label(g),
                None => c.to_string(),
            };
            (c as f64, label)
        })
        .collect()
}

/// The x label of a chunk axis.
fn chunk_axis(data: &ScanData) -> &'static str {
    if data.chunk_frequency.is_some() {
        "frequency g_l, rad/token (chunk 0 fastest, left)"
    } else {
        "chunk l (0 fastest)"
    }
}

/// Mean chunk norms of pre-RoPE q and k over frequency.
fn chunk_norms(data: &ScanData, l: usize, h: usize) -> Figure {
    let (name, title) = (
        "chunk_norms".to_string(),
        format!("L{l}H{h} · q, k chunk norms"),
    );
    let q = data.chunk_norms_q.as_ref().and_then(|t| t.at(&[l, h]));
    let k = data.chunk_norms_k.as_ref().and_then(|t| t.at(&[l, h]));
    let series: Vec<Series> = [("q", q), ("k", k)]
        .into_iter()
        .filter_map(|(name, v)| Some(Series { name, values: v? }))
        .collect();
    if series.is_empty() {
        return Figure::new(name, title, Err(not_run("frequency", "chunk_norms_*.npy")));
    }
    let n = series[0].values.len();
    let caption = match head_summary(data, l, h).and_then(|s| s.frequency.as_ref()) {
        Some(f) => vec![format!(
            "q share low/med/high {}/{}/{}; k {}/{}/{}",
            pct(f.q.low),
            pct(f.q.medium),
            pct(f.q.high),
            pct(f.k.low),
            pct(f.k.medium),
            pct(f.k.high)
        )],
        None => Vec::new(),
    };
    let labels = Labels {
        title: &title,
        x: chunk_axis(data),
        y: "mean ‖chunk‖₂",
        caption: &caption,
    };
    let svg = bars(&labels, &series, &chunk_ticks(data, l, n));
    Figure::new(name, title, Ok(svg))
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// The Fourier amplitudes `A_l` of the mean query and key.
fn spectrum(data: &ScanData, l: usize, h: usize) -> Figure {
    let (name, title) = (
        "spectrum".to_string(),
        format!("L{l}H{h} · logit spectrum A_l"),
    );
    let Some(a) = data.fourier_amplitude.as_ref().and_then(|t| t.at(&[l, h])) else {
        return Figure::new(
            name,
            title,
            Err(not_run("fourier", "fourier_amplitude_natural.npy")),
        );
    };
    let caption = match head_summary(data, l, h).and_then(|s| s.fourier.as_ref()) {
        Some(f) => vec![format!(
            "predicted Δ = {}, measured Δ = {}; A share high {}",
            f.predicted_delta,
            f.measured_delta.map_or("–".into(), |d| d.to_string()),
            pct(f.amplitude_shares.high)
        )],
        None => Vec::new(),
    };
    let labels = Labels {
        title: &title,
        x: chunk_axis(data),
        y: "A_l = ‖q̄⁽ˡ⁾‖ ‖k̄⁽ˡ⁾‖",
        caption: &caption,
    };
    let series = [Series {
        name: "A_l",
        values: a,
    }];
    let svg = bars(&labels, &series, &chunk_ticks(data, l, a.len()));
    Figure::new(name, title, Ok(svg))
}

/// Shares `σ_k² / Σσ²` of the leading singular values of the stacked pre-RoPE queries and keys.
fn rank(data: &ScanData, l: usize, h: usize) -> Figure {
    let (name, title) = ("rank".to_string(), format!("L{l}H{h} · rank-one structure"));
    let share = |t: &Option<Tensor>| -> Option<Vec<f64>> {
        let s = t.as_ref()?.at(&[l, h])?;
        let total: f64 = s.iter().map(|v| v * v).sum();
        let total = if total > 0.0 { total } else { 1.0 };
        Some(
            s.iter()
                .take(SINGULAR_SHOWN)
                .map(|v| v * v / total)
                .collect(),
        )
    };
    let (q, k) = (share(&data.singular_q), share(&data.singular_k));
    let series: Vec<Series> = [("q", q.as_deref()), ("k", k.as_deref())]
        .into_iter()
        .filter_map(|(name, v)| Some(Series { name, values: v? }))
        .collect();
    if series.is_empty() {
        return Figure::new(name, title, Err(not_run("rank", "singular_values_*.npy")));
    }
    let caption = match head_summary(data, l, h).and_then(|s| s.rank.as_ref()) {
        Some(r) => vec![format!(
            "rank-one share q {}, k {}; effective rank q {}, k {}",
            tick_label(r.q_rank_one_share),
            tick_label(r.k_rank_one_share),
            tick_label(r.q_effective_rank),
            tick_label(r.k_effective_rank)
        )],
        None => Vec::new(),
    };
    let labels = Labels {
        title: &title,
        x: "singular value k (largest first)",
        y: "σ_k² / Σσ²",
        caption: &caption,
    };
    let n = series[0].values.len();
    let ticks: Vec<(f64, String)> = (0..n)
        .step_by(n.div_ceil(6).max(1))
        .map(|k| (k as f64, (k + 1).to_string()))
        .collect();
    let svg = bars(&labels, &series, &ticks);
    Figure::new(name, title, Ok(svg))
}

/// The summary of head `(l, h)`.
fn head_summary(data: &ScanData, l: usize, h: usize) -> Option<&crate::scan::format::HeadSummary> {
    data.summary
        .heads
        .iter()
        .find(|s| s.layer == l && s.head == h)
}

/// The positional and symbolic scores of a head, when `posym` ran for it.
pub fn posym_scores(h: &crate::scan::format::HeadSummary) -> Option<(f64, f64)> {
    let p = h.posym.as_ref()?;
    let get = |k: &str| p.get(k)?.as_f64();
    Some((get(POSYM_FIELDS.0)?, get(POSYM_FIELDS.1)?))
}

/// All heads on the positional–symbolic plane, coloured by label.
fn posym_plane(data: &ScanData) -> Figure {
    let (name, title) = (
        "posym_plane".to_string(),
        "positional–symbolic plane".to_string(),
    );
    let mut points = Vec::new();
    let mut legend: Vec<(String, String)> = Vec::new();
    for h in &data.summary.heads {
        let Some((pos, sym)) = posym_scores(h) else {
            continue;
        };
        let colour = label_colour(&h.label);
        let kind = h.label.split('(').next().unwrap_or(&h.label).to_string();
        if !legend.iter().any(|(_, k)| *k == kind) {
            legend.push((colour.clone(), kind));
        }
        points.push(Point {
            x: pos,
            y: sym,
            colour,
            title: format!("L{}H{} {}", h.layer, h.head, h.label),
        });
    }
    if points.is_empty() {
        return Figure::new(name, title, Err(not_run("posym", "posym.json")));
    }
    let caption = vec![format!("{} heads; dashed: s_pos = s_sym", points.len())];
    let labels = Labels {
        title: &title,
        x: "positional score s_pos",
        y: "symbolic score s_sym",
        caption: &caption,
    };
    let svg = scatter(&labels, &points, &legend);
    Figure::new(name, title, Ok(svg))
}

/// Frequency-usage heatmaps (Barbero et al., Figs 3–4): per layer, head × chunk mean norms of q and of k, and
/// the layer × chunk mean over heads.
fn frequency_usage(data: &ScanData) -> Vec<Figure> {
    let (l_count, h_count) = (data.meta.model.n_layers, data.meta.model.n_heads);
    let mut out = Vec::new();
    for (which, tensor) in [("q", &data.chunk_norms_q), ("k", &data.chunk_norms_k)] {
        let Some(t) = tensor else {
            let file = format!("chunk_norms_{which}_natural.npy");
            out.push(Figure::new(
                format!("frequency_usage_{which}"),
                format!("frequency usage of {which}"),
                Err(not_run("frequency", &file)),
            ));
            continue;
        };
        let c = t.shape[2];
        for l in 0..l_count {
            let Some(values) = t.at(&[l]) else { continue };
            let title = format!("frequency usage of {which}, layer {l}");
            let m = Matrix {
                values,
                rows: h_count,
                cols: c,
            };
            out.push(usage_map(data, (&title, "head"), &m, which, Some(l)));
        }
        let means: Vec<f64> = (0..l_count * c)
            .map(|i| {
                let (l, chunk) = (i / c, i % c);
                let sum: f64 = (0..h_count)
                    .filter_map(|h| t.at(&[l, h]).and_then(|v| v.get(chunk)))
                    .sum();
                sum / h_count.max(1) as f64
            })
            .collect();
        let title = format!("frequency usage of {which}, layers (mean over heads)");
        let m = Matrix {
            values: &means,
            rows: l_count,
            cols: c,
        };
        out.push(usage_map(data, (&title, "layer"), &m, which, None));
    }
    out
}

/// One frequency-usage heatmap: of one layer's heads, or (`layer` `None`) of the layers.
fn usage_map(
    data: &ScanData,
    (title, rows): (&str, &str),
    m: &Matrix,
    which: &str,
    layer: Option<usize>,
) -> Figure {
    let colour_label = format!("‖{which}‖");
    let caption = vec![format!(
        "mean ‖{which}^(l)‖₂ over all tokens of the natural prompts"
    )];
    let labels = Labels {
        title,
        x: chunk_axis(data),
        y: rows,
        caption: &caption,
    };
    let xticks = chunk_ticks(data, layer.unwrap_or(0), m.cols)
        .into_iter()
        .map(|(c, s)| (c + 0.5, s))
        .collect();
    let style = HeatmapStyle {
        scale: Scale::Linear,
        colour_label: &colour_label,
        xticks,
        y_range: (0.0, m.rows as f64),
        x_range: (0.0, m.cols as f64),
        categorical_rows: true,
    };
    let name = match layer {
        Some(l) => format!("frequency_usage_{which}_L{l}"),
        None => format!("frequency_usage_{which}_layers"),
    };
    let svg = heatmap(&labels, m, &style);
    Figure::new(name, title.to_string(), Ok(svg))
}
