//! Every figure of a scan, by name: what each shows, drawn from the directory's files. The HTML report and
//! `ropescope figures` both take their figures from here, so the two always agree.

use super::data::{ScanData, Tensor};
use super::figures::{block_mean, label_colour, Point};
use super::spec::{Heat, NamedSeries, Plot, Spec, Text};
use super::svg::{tick_label, Scale};
use crate::scan::format::Bands;
use crate::scan::labels::POSYM_FIELDS;

/// Singular values shown by the rank figure (the leading ones carry the rank-one story).
const SINGULAR_SHOWN: usize = 16;

/// One figure: a file-name stem and the SVG (whose title it draws) or why there is none.
pub struct Figure {
    /// File-name stem (`L0H1_attention_natural`), also the HTML anchor of the figure.
    pub name: String,
    /// The SVG document, or the reason it is absent (`not run: …`).
    pub content: Result<String, String>,
}

/// One figure as data: a file-name stem, a title, and its [`Spec`] or why there is none.
pub struct FigureSpec {
    /// File-name stem, also the HTML anchor of the figure.
    pub name: String,
    /// Human title.
    pub title: String,
    /// What the figure shows, or the reason it is absent (`not run: …`).
    pub spec: Result<Spec, String>,
}

impl FigureSpec {
    fn new(name: String, title: String, spec: Result<Spec, String>) -> Self {
        Self { name, title, spec }
    }

    /// The figure drawn as SVG.
    pub fn render(self) -> Figure {
        Figure {
            content: self.spec.map(|s| s.svg()),
            name: self.name,
        }
    }
}

/// A figure's text.
fn text(title: &str, x: &str, y: &str, caption: Vec<String>) -> Text {
    Text {
        title: title.into(),
        x: x.into(),
        y: y.into(),
        caption,
    }
}

/// Owned copies of named series, skipping absent ones.
fn named<'a>(series: impl IntoIterator<Item = (&'a str, Option<&'a [f64]>)>) -> Vec<NamedSeries> {
    series
        .into_iter()
        .filter_map(|(name, v)| Some((name.to_string(), v?.to_vec())))
        .collect()
}

/// The "not run" reason of a figure whose files are absent.
fn not_run(analysis: &str, file: &str) -> String {
    format!("not run: analysis `{analysis}` ({file} absent)")
}

/// Why a per-frequency figure of layer `l` is absent on a NoPE layer.
fn nope_layer(l: usize) -> String {
    format!("layer {l} is a NoPE layer: nothing rotates, so it has no frequencies to show")
}

/// Display options.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Largest side at which attention maps are drawn (block-averaged further when the file's map is larger);
    /// `None` draws the file's map as it is.
    pub max_map_side: Option<usize>,
}

/// Which part of an attention map a figure shows, and at what resolution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MapView {
    /// The whole map, block-averaged further to at most this side (`None`: the file's map as it is).
    Whole(Option<usize>),
    /// The first rows of the file's map (query bins) and their causal columns, at the file's resolution.
    FirstRows(usize),
}

impl From<Options> for MapView {
    fn from(opts: Options) -> Self {
        MapView::Whole(opts.max_map_side)
    }
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
    model_wide_specs(data)
        .into_iter()
        .map(FigureSpec::render)
        .collect()
}

/// Model-wide figures as data: the positional–symbolic plane, the slash score over Δ, then the frequency-usage
/// heatmaps (per layer, q then k, each followed by its layer overview).
pub fn model_wide_specs(data: &ScanData) -> Vec<FigureSpec> {
    let mut out = vec![posym_plane(data), slash_by_delta(data)];
    out.extend(frequency_usage(data));
    out
}

/// One head's figures: attention maps (natural, random), slash profile, chunk norms, A_l spectrum, rank.
pub fn head(data: &ScanData, layer: usize, head: usize, opts: Options) -> Vec<Figure> {
    head_specs(data, layer, head, opts.into())
        .into_iter()
        .map(FigureSpec::render)
        .collect()
}

/// One head's figures as data, attention maps as `view` says.
pub fn head_specs(data: &ScanData, layer: usize, head: usize, view: MapView) -> Vec<FigureSpec> {
    let tag = format!("L{layer}H{head}");
    let mut out: Vec<FigureSpec> = (0..2)
        .map(|set| attention(data, (layer, head), set, view))
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

/// Attention map of the set's first prompt: the whole map, downsampled for display when needed, or its first
/// rows at the file's resolution (said in the caption either way).
fn attention(data: &ScanData, (l, h): (usize, usize), set: usize, view: MapView) -> FigureSpec {
    let name = format!("attention_{}", set_name(set));
    let title = format!("L{l}H{h} · attention, {} prompt", set_name(set));
    let file = format!("attention_map_{}.npy", set_name(set));
    let Some(map) = data.attention[set].as_ref().and_then(|t| t.at(&[l, h])) else {
        // The random prompts run with `intrinsic`; the maps of both sets with `slash`.
        let analysis = if set == 0 { "slash" } else { "intrinsic" };
        return FigureSpec::new(name, title, Err(not_run(analysis, &file)));
    };
    let map: Vec<f64> = map.iter().map(|&v| f64::from(v)).collect();
    let map = map.as_slice();
    let side = data.attention[set].as_ref().map_or(0, |t| t.shape[2]);
    let n = data.first_prompt_length(set).unwrap_or(side);
    let heat = |values: Vec<f64>, rows: usize, causal: bool, extent: f64| Heat {
        values,
        rows,
        cols: rows,
        causal,
        scale: Scale::Sqrt,
        colour_label: "attn".into(),
        xticks: Vec::new(),
        y_range: (0.0, extent),
        x_range: (0.0, extent),
        categorical_rows: false,
        range: None,
    };
    let (caption, heat) = match view {
        MapView::Whole(max_side) => {
            let shown = max_side.map_or(side, |m| m.min(side));
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
            (caption, heat(values, shown, false, n as f64))
        }
        MapView::FirstRows(rows) => {
            let rows = rows.min(side);
            let values: Vec<f64> = (0..rows)
                .flat_map(|r| map[r * side..r * side + rows].iter().copied())
                .collect();
            let block = n as f64 / side.max(1) as f64;
            let extent = rows as f64 * block;
            // The first row's cell is the same in every head (its queries see only its own keys, so it holds
            // their whole attention: 1 / block), so the colours run to the largest cell below it.
            let below = if rows > 1 {
                &values[rows..]
            } else {
                &values[..]
            };
            let (_, hi) = super::figures::value_range(below);
            let first = values.first().copied().unwrap_or(0.0);
            let cells = if side < n {
                format!(
                    "cells as in {file}: each the mean of a {}×{} block",
                    tick_label(block),
                    tick_label(block)
                )
            } else {
                format!("cells as in {file}: one token each")
            };
            let mut caption = vec![
                format!(
                    "first {} prompt (N = {n} tokens): queries 0–{}, all their keys",
                    set_name(set),
                    (extent.ceil() as usize).max(1) - 1
                ),
                cells,
            ];
            if rows > 1 {
                let first_queries = (block.ceil() as usize).max(1) - 1;
                caption.push(format!(
                    "colour ∝ √attention from 0 to {}, the largest cell below row 0",
                    super::spec::significant(hi, 3)
                ));
                caption.push(format!(
                    "(row 0 is {} in any head: queries 0–{first_queries} see only keys 0–{first_queries})",
                    super::spec::significant(first, 3)
                ));
            } else {
                caption.push(format!(
                    "colour ∝ √attention from 0 to {}",
                    super::spec::significant(hi, 3)
                ));
            }
            let mut heat = heat(values, rows, true, extent);
            heat.range = Some((0.0, hi));
            (caption, heat)
        }
    };
    let mut caption = caption;
    caption.extend(masks_caption(data, l, h, set));
    let spec = Spec {
        text: text(&title, "key position j", "query position i", caption),
        plot: Plot::Heatmap(heat),
    };
    FigureSpec::new(name, title, Ok(spec))
}

/// Mean slash score over Δ, natural and random prompts, with κ.
fn slash_profile(data: &ScanData, l: usize, h: usize) -> FigureSpec {
    let (name, title) = (
        "slash".to_string(),
        format!("L{l}H{h} · slash score over Δ"),
    );
    let Some(natural) = data.slash[0].as_ref().and_then(|t| t.at(&[l, h])) else {
        return FigureSpec::new(name, title, Err(not_run("slash", "slash_natural.npy")));
    };
    let random = data.slash[1].as_ref().and_then(|t| t.at(&[l, h]));
    let series = named([("natural", Some(natural)), ("random", random)]);
    let mut caption = Vec::new();
    if let Some(s) = head_summary(data, l, h).and_then(|s| s.slash.as_ref()) {
        caption.push(format!(
            "best Δ = {} (score {}), sink = {}",
            s.best_delta,
            tick_label(s.best_score),
            tick_label(s.sink)
        ));
    }
    let kappa = data.meta.parameters.kappa;
    let spec = Spec {
        text: text(&title, "offset Δ", "mean S[i, i−Δ]", caption),
        plot: Plot::Lines {
            series,
            reference: Some((kappa, "κ".into())),
        },
    };
    FigureSpec::new(name, title, Ok(spec))
}

/// Head `(l, h)`'s row of a per-head array cut to the layer's own `width` (a narrower layer's row is padded with
/// NaN to the widest layer's).
fn head_row(t: &Option<Tensor>, l: usize, h: usize, width: usize) -> Option<&[f64]> {
    t.as_ref()?.at(&[l, h]).map(|r| &r[..width.min(r.len())])
}

/// What shapes a head's map beyond causality: the layer's sliding window or chunked attention (the blocks the
/// map shows), and the mass a learned sink takes from each row, which the map cannot show.
fn masks_caption(data: &ScanData, l: usize, h: usize, set: usize) -> Vec<String> {
    let model = &data.meta.model;
    let mut lines = Vec::new();
    if let Some(Some(w)) = model.windows.get(l) {
        lines.push(format!(
            "sliding window: query i sees keys i−{} to i",
            w - 1
        ));
    }
    if let Some(Some(c)) = model.chunks.get(l) {
        lines.push(format!(
            "chunked attention: a query sees only its own block of {c} positions (edges at 0, {c}, {}, …)",
            2 * c
        ));
    }
    let learned = head_summary(data, l, h)
        .and_then(|s| s.slash.as_ref())
        .and_then(|s| s.learned_sink);
    if let (0, Some(m)) = (set, learned) {
        lines.push(format!(
            "learned sink: takes {} of a row on average, attention on no key (not drawn)",
            pct(m)
        ));
    }
    lines
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
fn chunk_norms(data: &ScanData, l: usize, h: usize) -> FigureSpec {
    let (name, title) = (
        "chunk_norms".to_string(),
        format!("L{l}H{h} · q, k chunk norms"),
    );
    if data.meta.model.is_nope(l) {
        return FigureSpec::new(name, title, Err(nope_layer(l)));
    }
    let chunks = data.meta.model.chunks_of(l);
    let q = head_row(&data.chunk_norms_q, l, h, chunks);
    let k = head_row(&data.chunk_norms_k, l, h, chunks);
    let series = named([("q", q), ("k", k)]);
    if series.is_empty() {
        return FigureSpec::new(name, title, Err(not_run("frequency", "chunk_norms_*.npy")));
    }
    let n = series[0].1.len();
    let caption = match head_summary(data, l, h).and_then(|s| s.frequency.as_ref()) {
        Some(f) => vec![format!("q share {}; k {}", shares(&f.q), shares(&f.k))],
        None => Vec::new(),
    };
    let spec = Spec {
        text: text(&title, chunk_axis(data), "mean ‖chunk‖₂", caption),
        plot: Plot::Bars {
            series,
            xticks: chunk_ticks(data, l, n),
        },
    };
    FigureSpec::new(name, title, Ok(spec))
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// `low/med/high a/b/c`, and the share of the coordinates that never rotate where the head has them.
fn shares(b: &Bands) -> String {
    let bands = format!(
        "low/med/high {}/{}/{}",
        pct(b.low),
        pct(b.medium),
        pct(b.high)
    );
    match b.nope {
        Some(n) => format!("{bands}, unrotated (NoPE) {}", pct(n)),
        None => bands,
    }
}

/// The Fourier amplitudes `A_l` of the mean query and key.
fn spectrum(data: &ScanData, l: usize, h: usize) -> FigureSpec {
    let (name, title) = (
        "spectrum".to_string(),
        format!("L{l}H{h} · logit spectrum A_l"),
    );
    if data.meta.model.is_nope(l) {
        return FigureSpec::new(name, title, Err(nope_layer(l)));
    }
    let Some(a) = head_row(&data.fourier_amplitude, l, h, data.meta.model.chunks_of(l)) else {
        return FigureSpec::new(
            name,
            title,
            Err(not_run("fourier", "fourier_amplitude_natural.npy")),
        );
    };
    let caption = match head_summary(data, l, h).and_then(|s| s.fourier.as_ref()) {
        Some(f) => vec![format!(
            "predicted Δ = {}, measured Δ = {}; A share {}",
            f.predicted_delta,
            f.measured_delta.map_or("–".into(), |d| d.to_string()),
            shares(&f.amplitude_shares)
        )],
        None => Vec::new(),
    };
    let spec = Spec {
        text: text(&title, chunk_axis(data), "A_l = ‖q̄⁽ˡ⁾‖ ‖k̄⁽ˡ⁾‖", caption),
        plot: Plot::Bars {
            series: named([("A_l", Some(a))]),
            xticks: chunk_ticks(data, l, a.len()),
        },
    };
    FigureSpec::new(name, title, Ok(spec))
}

/// Shares `σ_k² / Σσ²` of the leading singular values of the stacked pre-RoPE queries and keys.
fn rank(data: &ScanData, l: usize, h: usize) -> FigureSpec {
    let (name, title) = ("rank".to_string(), format!("L{l}H{h} · rank-one structure"));
    let share = |t: &Option<Tensor>| -> Option<Vec<f64>> {
        let s = head_row(t, l, h, data.meta.model.head_dim_of(l))?;
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
    let series = named([("q", q.as_deref()), ("k", k.as_deref())]);
    if series.is_empty() {
        return FigureSpec::new(name, title, Err(not_run("rank", "singular_values_*.npy")));
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
    let n = series[0].1.len();
    let xticks: Vec<(f64, String)> = (0..n)
        .step_by(n.div_ceil(6).max(1))
        .map(|k| (k as f64, (k + 1).to_string()))
        .collect();
    let spec = Spec {
        text: text(
            &title,
            "singular value k (largest first)",
            "σ_k² / Σσ²",
            caption,
        ),
        plot: Plot::Bars { series, xticks },
    };
    FigureSpec::new(name, title, Ok(spec))
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

/// The slash score over Δ of the whole model: the mean over heads and the largest head, on natural and (where
/// they ran) random prompts, with κ.
fn slash_by_delta(data: &ScanData) -> FigureSpec {
    let (name, title) = (
        "slash_by_delta".to_string(),
        "slash score over Δ, all heads".to_string(),
    );
    let mut series = Vec::new();
    for (set, tensor) in data.slash.iter().enumerate() {
        let Some(t) = tensor else { continue };
        let width = t.shape[2];
        let heads = t.data.len() / width.max(1);
        let at = |d: usize| (0..heads).map(move |h| t.data[h * width + d]);
        let mean: Vec<f64> = (0..width)
            .map(|d| at(d).sum::<f64>() / heads.max(1) as f64)
            .collect();
        let max: Vec<f64> = (0..width).map(|d| at(d).fold(0.0, f64::max)).collect();
        series.push((format!("mean over heads, {}", set_name(set)), mean));
        series.push((format!("largest head, {}", set_name(set)), max));
    }
    if series.is_empty() {
        return FigureSpec::new(name, title, Err(not_run("slash", "slash_natural.npy")));
    }
    let kappa = data.meta.parameters.kappa;
    let spec = Spec {
        text: text(
            &title,
            "offset Δ",
            "SlashScore(Δ)",
            vec![
                "SlashScore(Δ): mean attention on the Δ-th sub-diagonal, over each set's prompts".into(),
                format!("a head reaching κ = {kappa} at some Δ is slash-dominant there"),
            ],
        ),
        plot: Plot::Lines {
            series,
            reference: Some((kappa, "κ".into())),
        },
    };
    FigureSpec::new(name, title, Ok(spec))
}

/// All heads on the positional–symbolic plane, coloured by label.
fn posym_plane(data: &ScanData) -> FigureSpec {
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
        return FigureSpec::new(name, title, Err(not_run("posym", "posym.json")));
    }
    let caption = vec![format!("{} heads; dashed: s_pos = s_sym", points.len())];
    let spec = Spec {
        text: text(
            &title,
            "positional score s_pos",
            "symbolic score s_sym",
            caption,
        ),
        plot: Plot::Scatter { points, legend },
    };
    FigureSpec::new(name, title, Ok(spec))
}

/// Frequency-usage heatmaps (Barbero et al., Figs 3–4): per layer, head × chunk mean norms of q and of k, and
/// the layer × chunk mean over heads.
fn frequency_usage(data: &ScanData) -> Vec<FigureSpec> {
    let (l_count, h_count) = (data.meta.model.n_layers, data.meta.model.n_heads);
    let mut out = Vec::new();
    for (which, tensor) in [("q", &data.chunk_norms_q), ("k", &data.chunk_norms_k)] {
        let Some(t) = tensor else {
            let file = format!("chunk_norms_{which}_natural.npy");
            out.push(FigureSpec::new(
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
            if data.meta.model.is_nope(l) {
                let name = format!("frequency_usage_{which}_L{l}");
                out.push(FigureSpec::new(name, title, Err(nope_layer(l))));
                continue;
            }
            let m = (values.to_vec(), h_count, c);
            out.push(usage_map(data, (&title, "head"), m, which, Some(l)));
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
        out.push(usage_map(
            data,
            (&title, "layer"),
            (means, l_count, c),
            which,
            None,
        ));
    }
    out
}

/// One frequency-usage heatmap of a `(values, rows, cols)` matrix: of one layer's heads, or (`layer` `None`)
/// of the layers.
fn usage_map(
    data: &ScanData,
    (title, rows_name): (&str, &str),
    (values, rows, cols): (Vec<f64>, usize, usize),
    which: &str,
    layer: Option<usize>,
) -> FigureSpec {
    let mut caption = vec![format!(
        "mean ‖{which}^(l)‖₂ over all tokens of the natural prompts"
    )];
    let model = &data.meta.model;
    let nope: Vec<String> = (0..model.n_layers)
        .filter(|&l| model.is_nope(l))
        .map(|l| l.to_string())
        .collect();
    if layer.is_none() && !nope.is_empty() {
        caption.push(format!(
            "NoPE layers ({}) rotate nothing: their rows have no value",
            nope.join(", ")
        ));
    }
    // Layers of different types (Gemma's local and global layers) turn their chunks at different frequencies: a
    // heatmap of all layers is then indexed by chunk, each type's frequencies stated below it.
    let types = layer_types(data);
    let mixed = layer.is_none() && types.len() > 1;
    if mixed {
        for (layers, freq) in &types {
            let turning: Vec<f64> = freq.iter().copied().filter(|g| g.is_finite() && *g > 0.0).collect();
            let (fast, slow) = (turning.first(), turning.last());
            caption.push(format!(
                "layers {}: chunk 0 at g = {}, the slowest turning chunk at g = {}",
                ranges(layers),
                fast.map_or("–".into(), |g| tick_label(*g)),
                slow.map_or("–".into(), |g| tick_label(*g))
            ));
        }
    }
    let xticks = match mixed {
        true => (0..cols)
            .step_by(cols.div_ceil(5).max(1))
            .map(|c| (c as f64 + 0.5, c.to_string()))
            .collect(),
        false => chunk_ticks(data, layer.unwrap_or(0), cols)
            .into_iter()
            .map(|(c, s)| (c + 0.5, s))
            .collect(),
    };
    let heat = Heat {
        values,
        rows,
        cols,
        causal: false,
        scale: Scale::Linear,
        colour_label: format!("‖{which}‖"),
        xticks,
        y_range: (0.0, rows as f64),
        x_range: (0.0, cols as f64),
        categorical_rows: true,
        range: None,
    };
    let name = match layer {
        Some(l) => format!("frequency_usage_{which}_L{l}"),
        None => format!("frequency_usage_{which}_layers"),
    };
    let x = match mixed {
        true => "chunk l (0 fastest); frequencies by layer type below",
        false => chunk_axis(data),
    };
    let spec = Spec {
        text: text(title, x, rows_name, caption),
        plot: Plot::Heatmap(heat),
    };
    FigureSpec::new(name, title.to_string(), Ok(spec))
}

/// The layers that rotate, grouped by their chunk frequencies (one group per layer type), in layer order; one
/// group when every layer turns at the same frequencies or `chunk_frequency.npy` is absent.
pub(crate) fn layer_types(data: &ScanData) -> Vec<(Vec<usize>, Vec<f64>)> {
    let model = &data.meta.model;
    let mut types: Vec<(Vec<usize>, Vec<f64>)> = Vec::new();
    let Some(t) = data.chunk_frequency.as_ref() else {
        return types;
    };
    for l in (0..model.n_layers).filter(|&l| !model.is_nope(l)) {
        let Some(row) = t.at(&[l]) else { continue };
        let same = |f: &Vec<f64>| f.iter().zip(row).all(|(a, b)| a.to_bits() == b.to_bits());
        match types.iter_mut().find(|(_, f)| same(f)) {
            Some((layers, _)) => layers.push(l),
            None => types.push((vec![l], row.to_vec())),
        }
    }
    types
}

/// Layer indices as runs: `0–4, 6–10, 12`.
pub(crate) fn ranges(layers: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &l in layers {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == l => *end = l,
            _ => runs.push((l, l)),
        }
    }
    runs.iter()
        .map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}–{b}") })
        .collect::<Vec<_>>()
        .join(", ")
}
