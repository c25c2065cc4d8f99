//! The files of `ropescope head` (one head on one prompt) and its terminal picture: each quantity as `.npy` and
//! CSV, the figures as square SVG (and the map as PNG), and `head.json` last, which records the run.

use super::HeadView;
use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::io::npy;
use crate::report::png;
use crate::report::spec::{Heat, Plot, Spec, Text};
use crate::report::svg::{tick_label, viridis, Scale};
use serde_json::json;
use std::path::Path;

/// The record `head.json` holds beside the arrays: where the view came from.
#[derive(Clone, Debug)]
pub struct HeadRecord<'a> {
    /// The model file's name and sha256.
    pub model: (&'a str, &'a str),
    /// The prompt's ids.
    pub ids: &'a [u32],
    /// Arithmetic precision (`f64` or `f32`).
    pub precision: &'a str,
    /// The command line, argument by argument.
    pub command: &'a [String],
}

/// Smallest side, in pixels, of the PNG map: small maps are scaled up by whole pixels.
const PNG_MIN_SIDE: usize = 512;

fn text_file(path: &Path, content: &str) -> Result<()> {
    write_atomic(path, |w| w.write_all(content.as_bytes()))
}

/// Writes every file of `view` into `dir` (which exists), `head.json` last.
pub fn write(dir: &Path, view: &HeadView, record: &HeadRecord<'_>) -> Result<()> {
    let w = view.window.len();
    let (best_delta, best_score) = view.best();
    npy::write(&dir.join("attention.npy"), &[w, w], &view.map)?;
    let mut csv = format!(
        "query,{}\n",
        view.window
            .clone()
            .map(|j| format!("key_{j}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    for (r, i) in view.window.clone().enumerate() {
        let row: Vec<String> = view.map[r * w..(r + 1) * w]
            .iter()
            .map(|v| format!("{v:e}"))
            .collect();
        csv.push_str(&format!("{i},{}\n", row.join(",")));
    }
    text_file(&dir.join("attention.csv"), &csv)?;
    npy::write(&dir.join("slash.npy"), &[view.slash.len()], &view.slash)?;
    let mut csv = String::from("delta,slash_score\n");
    for (d, s) in view.slash.iter().enumerate() {
        csv.push_str(&format!("{d},{s:e}\n"));
    }
    text_file(&dir.join("slash.csv"), &csv)?;
    let c = view.frequencies.len();
    let (qn, kn) = &view.chunk_norms;
    let amplitude: Vec<f64> = view.spectrum.iter().map(|t| t.amplitude).collect();
    let phase: Vec<f64> = view.spectrum.iter().map(|t| t.phase).collect();
    for (name, values) in [
        ("chunk_frequency", &view.frequencies),
        ("chunk_norms_q", qn),
        ("chunk_norms_k", kn),
        ("fourier_amplitude", &amplitude),
        ("fourier_phase", &phase),
    ] {
        npy::write(&dir.join(format!("{name}.npy")), &[c], values)?;
    }
    let mut csv = String::from("chunk,frequency,q_norm,k_norm,amplitude,phase\n");
    for l in 0..c {
        csv.push_str(&format!(
            "{l},{:e},{:e},{:e},{:e},{:e}\n",
            view.frequencies[l], qn[l], kn[l], amplitude[l], phase[l]
        ));
    }
    text_file(&dir.join("chunks.csv"), &csv)?;
    for (name, spec) in figures(view) {
        text_file(&dir.join(format!("{name}.svg")), &spec.svg())?;
    }
    write_atomic(&dir.join("attention.png"), |f| f.write_all(&map_png(view)))?;
    let meta = json!({
        "producer": format!("ropescope {}", env!("CARGO_PKG_VERSION")),
        "model_file": record.model.0,
        "model_sha256": record.model.1,
        "precision": record.precision,
        "layer": view.layer,
        "head": view.head,
        "kv_head": view.kv_head,
        "n_tokens": view.n_tokens,
        "ids": record.ids,
        "window": [view.window.start, view.window.end],
        "delta_max": view.slash.len().saturating_sub(1),
        "best_delta": best_delta,
        "best_score": best_score,
        "sink": view.sink,
        "learned_sink": view.learned_sink,
        "unrotated_amplitude": view.unrotated_amplitude,
        "command": record.command,
        "complete": true,
    });
    let text = serde_json::to_string_pretty(&meta).map_err(|e| Error::Internal(e.to_string()))?;
    text_file(&dir.join("head.json"), &text)
}

/// The head's figures: its map (square), slash profile, chunk norms and logit spectrum.
pub fn figures(view: &HeadView) -> Vec<(&'static str, Spec)> {
    let id = format!("L{}H{}", view.layer, view.head);
    let w = view.window.len();
    let (start, end) = (view.window.start as f64, view.window.end as f64);
    let (best_delta, best_score) = view.best();
    let text = |title: String, x: &str, y: &str, caption: Vec<String>| Text {
        title,
        x: x.into(),
        y: y.into(),
        caption,
    };
    let chunk_ticks: Vec<(f64, String)> = (0..view.frequencies.len())
        .step_by(view.frequencies.len().div_ceil(5).max(1))
        .map(|l| (l as f64, tick_label(view.frequencies[l])))
        .collect();
    let mut sink = vec![format!("mean attention on key 0: {}", tick_label(view.sink))];
    if let Some(m) = view.learned_sink {
        sink.push(format!("learned sink: {} of a row on average (not drawn)", tick_label(m)));
    }
    vec![
        (
            "attention",
            Spec {
                text: text(
                    format!("{id} · attention, positions {}–{}", view.window.start, view.window.end - 1),
                    "key position j",
                    "query position i",
                    [
                        vec![format!("{} tokens; one cell per query and key; colour ∝ √attention", view.n_tokens)],
                        sink,
                    ]
                    .concat(),
                ),
                plot: Plot::Heatmap(Heat {
                    values: view.map.clone(),
                    rows: w,
                    cols: w,
                    causal: false,
                    scale: Scale::Sqrt,
                    colour_label: "attn".into(),
                    xticks: Vec::new(),
                    y_range: (start, end),
                    x_range: (start, end),
                    categorical_rows: false,
                    range: None,
                }),
            },
        ),
        (
            "slash",
            Spec {
                text: text(
                    format!("{id} · slash score over Δ"),
                    "offset Δ",
                    "mean S[i, i−Δ]",
                    vec![format!(
                        "best Δ = {best_delta}, SlashScore {}: the mean attention on the Δ-th sub-diagonal",
                        tick_label(best_score)
                    )],
                ),
                plot: Plot::Lines {
                    series: vec![("SlashScore".into(), view.slash.clone())],
                    reference: None,
                },
            },
        ),
        (
            "chunk_norms",
            Spec {
                text: text(
                    format!("{id} · q, k chunk norms"),
                    "frequency g_l, rad/token (chunk 0 fastest, left)",
                    "mean ‖chunk‖₂",
                    vec!["pre-RoPE queries and keys, mean over the prompt's tokens".into()],
                ),
                plot: Plot::Bars {
                    series: vec![
                        ("q".into(), view.chunk_norms.0.clone()),
                        ("k".into(), view.chunk_norms.1.clone()),
                    ],
                    xticks: chunk_ticks.clone(),
                },
            },
        ),
        (
            "spectrum",
            Spec {
                text: text(
                    format!("{id} · logit spectrum A_l"),
                    "frequency g_l, rad/token (chunk 0 fastest, left)",
                    "A_l = ‖q̄⁽ˡ⁾‖ ‖k̄⁽ˡ⁾‖",
                    vec![format!(
                        "logit of the mean q and k: Σ A_l cos(g_l Δ + φ_l) + c; unrotated part's amplitude {}",
                        tick_label(view.unrotated_amplitude)
                    )],
                ),
                plot: Plot::Bars {
                    series: vec![(
                        "A_l".into(),
                        view.spectrum.iter().map(|t| t.amplitude).collect(),
                    )],
                    xticks: chunk_ticks,
                },
            },
        ),
    ]
}

/// The map as a PNG, one square of whole pixels per cell (at least [`PNG_MIN_SIDE`] pixels a side), colour
/// ∝ √attention on the viridis scale from 0 to the largest cell.
pub fn map_png(view: &HeadView) -> Vec<u8> {
    let w = view.window.len().max(1);
    let scale = PNG_MIN_SIDE.div_ceil(w).max(1);
    let hi = view.map.iter().copied().fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    png::encode(w * scale, w * scale, |r, c| {
        let v = view.map.get((r / scale) * w + c / scale).copied().unwrap_or(0.0);
        viridis(Scale::Sqrt.unit(v, 0.0, hi))
    })
}

/// The map drawn with characters for a terminal: at most `side` rows and columns, each the largest attention
/// of the cells it covers, in five shades by √attention from 0 to the largest cell.
pub fn terminal_map(view: &HeadView, side: usize) -> String {
    const SHADES: [char; 5] = [' ', '░', '▒', '▓', '█'];
    let w = view.window.len();
    let n = w.min(side.max(1));
    let hi = view.map.iter().copied().fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    let bin = |k: usize| k * w / n..((k + 1) * w / n).max(k * w / n + 1);
    let mut out = String::new();
    for r in 0..n {
        out.push_str("  ");
        for c in 0..n {
            let v = bin(r)
                .flat_map(|i| bin(c).map(move |j| (i, j)))
                .map(|(i, j)| view.map[i * w + j])
                .fold(0.0, f64::max);
            let shade = ((v / hi).sqrt() * (SHADES.len() - 1) as f64).round() as usize;
            out.push(SHADES[shade.min(SHADES.len() - 1)]);
        }
        out.push('\n');
    }
    out
}
