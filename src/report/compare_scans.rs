//! Several scans side by side (`ropescope compare-scans`): the papers' cross-model tables. One column (or one
//! series) per model, each named by its model file and architecture: the models' shapes and runs, label counts,
//! slash-dominant heads (SDHs) per Δ on natural and random prompts with the intrinsic overlap, mean band shares
//! of query and key chunk norms and of Fourier amplitudes, the positional–symbolic plane, and the top heads by
//! slash score.
//!
//! Every number is read from the scans' `meta.json` and `summary.json` (the same fields `report.html` shows),
//! never recomputed another way; a figure of an analysis that did not run for a model is "not run", never 0.
//! The output directory holds `compare.json` (every table's numbers, [`Comparison`]) and `compare.html` (one
//! static page: inline CSS and SVG, no script, no network).

use super::catalog::posym_scores;
use super::data::ScanData;
use super::figures::{self, label_colour, Labels, Point, Series};
use super::findings::{mean_bands, posym_correlation};
use super::spec::significant;
use super::svg::escape;
use crate::error::{Error, Result};
use crate::io::inputs::Inputs;
use crate::io::staged::{Record, StagedDir, Staging};
use crate::scan::format::{Bands, HeadSummary, SlashHead};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Version of `compare.json`'s layout; grows when a field's meaning changes (fields are only ever added).
pub const COMPARE_FORMAT_VERSION: u32 = 1;
/// File name of the page in the output directory.
pub const COMPARE_HTML: &str = "compare.html";
/// File name of the numbers in the output directory.
pub const COMPARE_JSON: &str = "compare.json";
/// Rows of each model's top-heads table.
pub const TOP_HEADS: usize = 10;
/// The page's sections in order: `(anchor id, heading)`.
pub const SECTIONS: [(&str, &str); 6] = [
    ("models", "Models"),
    ("labels", "Labels"),
    ("sdh", "Slash-dominant heads"),
    ("bands", "Band shares"),
    ("posym", "Positional–symbolic plane"),
    ("top", "Top heads by slash score"),
];

/// `compare.json`: one entry per scan, in the order given on the command line.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    /// [`COMPARE_FORMAT_VERSION`].
    pub format_version: u32,
    /// Every label that occurs in any of the scans, sorted; each model's `labels.counts` has all of them.
    pub labels: Vec<String>,
    /// The models, in command-line order.
    pub models: Vec<ModelColumn>,
}

/// One scan's column of every table. A field is `null` when its analysis did not run for this scan.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModelColumn {
    /// Column heading: the model file's name and the architecture, `"name.gguf (llama)"`.
    pub name: String,
    /// The scan directory as given.
    pub scan_dir: String,
    /// The model file's name (its last path component, as `meta.json` records the file).
    pub model_file: String,
    /// SHA-256 of the model file (`meta.json`).
    pub model_sha256: String,
    /// Shape, prompts and precision of the run.
    pub model: ModelTable,
    /// Label counts and shares of heads.
    pub labels: LabelCounts,
    /// Slash-dominant heads (analysis `slash`; random-prompt fields need `intrinsic`).
    pub sdh: Option<SdhTable>,
    /// Mean band shares over heads.
    pub bands: BandTable,
    /// The positional–symbolic plane (analysis `posym`).
    pub posym: Option<PosymPlane>,
    /// The heads with the largest best slash score, best first (analysis `slash`).
    pub top_heads: Option<Vec<TopHead>>,
}

/// The model table of one scan, from `meta.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModelTable {
    /// `general.architecture`.
    pub architecture: String,
    /// Layers.
    pub n_layers: usize,
    /// Query heads per layer.
    pub n_heads: usize,
    /// Key/value heads per layer.
    pub n_kv_heads: usize,
    /// Query/key head dimension.
    pub head_dim: usize,
    /// The distinct RoPE bases of the layers, in order of first appearance.
    pub rope_bases: Vec<f64>,
    /// The prompt sets: name, count and lengths.
    pub prompt_sets: Vec<PromptSetRow>,
    /// `"f32"` or `"f64"`.
    pub precision: String,
    /// Analyses run, as `meta.json` lists them.
    pub analyses: Vec<String>,
}

/// One prompt set of a scan.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PromptSetRow {
    /// `natural` or `random`.
    pub name: String,
    /// Number of prompts.
    pub count: usize,
    /// Distinct prompt lengths, tokens, ascending.
    pub lengths: Vec<usize>,
}

/// Label counts of one scan (`summary.json`'s `label` of every head).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LabelCounts {
    /// Heads in all.
    pub heads: usize,
    /// Heads per label, for every label of [`Comparison::labels`] (0 where this model has none).
    pub counts: BTreeMap<String, usize>,
    /// `count / heads` per label.
    pub shares: BTreeMap<String, f64>,
}

/// The (κ, Δ)-slash-dominant heads of one scan (`summary.json`'s `slash_dominant`, `intrinsic` and per-head
/// `slash` records).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SdhTable {
    /// κ.
    pub kappa: f64,
    /// Δmax of the scan.
    pub delta_max: usize,
    /// Heads slash-dominant at some Δ on natural prompts (distinct (layer, head) of `slash_dominant.natural`;
    /// the same heads as those with `slash.slash_dominant`).
    pub natural_heads: usize,
    /// The same on random prompts; `null` without `intrinsic`.
    pub random_heads: Option<usize>,
    /// (layer, head, Δ) triples of `slash_dominant.natural`.
    pub natural_triples: usize,
    /// Triples of `slash_dominant.random`; `null` without `intrinsic`.
    pub random_triples: Option<usize>,
    /// Natural-prompt SDHs whose score at the same Δ is ≥ κ on random prompts too (`random_slash_dominant`);
    /// `null` without `intrinsic`.
    pub still_dominant_on_random: Option<usize>,
    /// Triples per Δ, `Δ = 0..=Δmax`.
    pub per_delta: Vec<SdhAtDelta>,
    /// `summary.json`'s `intrinsic`; `null` without that analysis.
    pub intrinsic: Option<crate::scan::format::Intrinsic>,
}

/// SDH triples at one Δ.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SdhAtDelta {
    /// The offset.
    pub delta: usize,
    /// Natural-prompt triples at this Δ.
    pub natural: usize,
    /// Random-prompt triples at this Δ; `null` without `intrinsic`.
    pub random: Option<usize>,
}

/// Mean band shares over the heads of one scan (`low`, `medium`, `high` of each head's record, averaged with
/// each head weighted equally).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BandTable {
    /// Shares of query chunk norm (`frequency.q`); `null` without `frequency`.
    pub query_norm: Option<Bands>,
    /// Shares of key chunk norm (`frequency.k`); `null` without `frequency`.
    pub key_norm: Option<Bands>,
    /// Shares of the Fourier amplitudes `Σ A_l` (`fourier.amplitude_shares`); `null` without `fourier`.
    pub fourier_amplitude: Option<Bands>,
}

/// Every head's positional and symbolic score.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PosymPlane {
    /// `(layer, head, s_pos, s_sym, label)` of each head with scores.
    pub heads: Vec<(usize, usize, f64, f64, String)>,
    /// Pearson correlation of `s_pos` and `s_sym` over those heads (as the report's findings compute it).
    pub pearson: f64,
}

/// One row of a top-heads table.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TopHead {
    /// Layer.
    pub layer: usize,
    /// Query head.
    pub head: usize,
    /// The head's label.
    pub label: String,
    /// Offset of its best slash score (natural prompts).
    pub best_delta: usize,
    /// That score.
    pub best_score: f64,
    /// The score at the same Δ on random prompts; `null` without `intrinsic`.
    pub random_score_at_best_delta: Option<f64>,
    /// Mean attention on key 0 (natural prompts).
    pub sink: f64,
}

/// The last component of a path as text (the whole text when it has none).
fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

/// Whether the scan ran analysis `name` (`meta.json`'s `analyses`).
fn ran(data: &ScanData, name: &str) -> bool {
    data.meta.analyses.iter().any(|a| a == name)
}

/// Distinct (layer, head) of a set of triples.
fn distinct_heads(triples: &[SlashHead]) -> usize {
    triples
        .iter()
        .map(|s| (s.layer, s.head))
        .collect::<BTreeSet<_>>()
        .len()
}

/// The model table of a scan, from its `meta.json`.
fn model_table(data: &ScanData) -> ModelTable {
    let m = &data.meta;
    let mut bases: Vec<f64> = Vec::new();
    for &b in &m.model.rope_bases {
        if !bases.contains(&b) {
            bases.push(b);
        }
    }
    ModelTable {
        architecture: m.model.architecture.clone(),
        n_layers: m.model.n_layers,
        n_heads: m.model.n_heads,
        n_kv_heads: m.model.n_kv_heads,
        head_dim: m.model.head_dim,
        rope_bases: bases,
        prompt_sets: m
            .prompt_sets
            .iter()
            .map(|p| PromptSetRow {
                name: p.name.clone(),
                count: p.count,
                lengths: p
                    .lengths
                    .iter()
                    .copied()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect(),
            })
            .collect(),
        precision: m.precision.clone(),
        analyses: m.analyses.clone(),
    }
}

/// The SDH table of a scan; `None` without `slash`.
fn sdh_table(data: &ScanData) -> Option<SdhTable> {
    let sets = data.summary.slash_dominant.as_ref()?;
    let intrinsic = ran(data, "intrinsic") || data.summary.intrinsic.is_some();
    let delta_max = data.meta.parameters.delta_max;
    let count_at = |v: &[SlashHead], d: usize| v.iter().filter(|s| s.delta == d).count();
    let with_slash = data.summary.heads.iter().filter_map(|h| h.slash.as_ref());
    Some(SdhTable {
        kappa: sets.kappa,
        delta_max,
        natural_heads: distinct_heads(&sets.natural),
        random_heads: intrinsic.then(|| distinct_heads(&sets.random)),
        natural_triples: sets.natural.len(),
        random_triples: intrinsic.then_some(sets.random.len()),
        still_dominant_on_random: intrinsic.then(|| {
            with_slash
                .filter(|s| s.slash_dominant && s.random_slash_dominant == Some(true))
                .count()
        }),
        per_delta: (0..=delta_max)
            .map(|d| SdhAtDelta {
                delta: d,
                natural: count_at(&sets.natural, d),
                random: intrinsic.then(|| count_at(&sets.random, d)),
            })
            .collect(),
        intrinsic: data.summary.intrinsic.clone(),
    })
}

/// The [`TOP_HEADS`] heads with the largest best slash score; `None` without `slash`.
fn top_heads(data: &ScanData) -> Option<Vec<TopHead>> {
    let mut rows: Vec<TopHead> = data
        .summary
        .heads
        .iter()
        .filter_map(|h| {
            let s = h.slash.as_ref()?;
            Some(TopHead {
                layer: h.layer,
                head: h.head,
                label: h.label.clone(),
                best_delta: s.best_delta,
                best_score: s.best_score,
                random_score_at_best_delta: s.random_score_at_best_delta,
                sink: s.sink,
            })
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    // Stable: equal scores keep the layer, head order.
    rows.sort_by(|a, b| b.best_score.total_cmp(&a.best_score));
    rows.truncate(TOP_HEADS);
    Some(rows)
}

/// Every head's positional and symbolic score; `None` without `posym`.
fn posym_plane(data: &ScanData) -> Option<PosymPlane> {
    let heads: Vec<(usize, usize, f64, f64, String)> = data
        .summary
        .heads
        .iter()
        .filter_map(|h: &HeadSummary| {
            let (p, s) = posym_scores(h)?;
            Some((h.layer, h.head, p, s, h.label.clone()))
        })
        .collect();
    let (pearson, _) = posym_correlation(data)?;
    (!heads.is_empty()).then_some(PosymPlane { heads, pearson })
}

/// The column of one scan; `labels` is every label of all the scans.
fn column(data: &ScanData, labels: &[String]) -> ModelColumn {
    let heads = &data.summary.heads;
    let mut counts: BTreeMap<String, usize> = labels.iter().map(|l| (l.clone(), 0)).collect();
    for h in heads {
        *counts.entry(h.label.clone()).or_default() += 1;
    }
    let n = heads.len();
    let shares = counts
        .iter()
        .map(|(l, &c)| (l.clone(), if n > 0 { c as f64 / n as f64 } else { 0.0 }))
        .collect();
    let model_file = file_name(&data.meta.model_file);
    ModelColumn {
        name: format!("{model_file} ({})", data.meta.model.architecture),
        scan_dir: data.dir.display().to_string(),
        model_file,
        model_sha256: data.meta.model_sha256.clone(),
        model: model_table(data),
        labels: LabelCounts {
            heads: n,
            counts,
            shares,
        },
        sdh: sdh_table(data),
        bands: BandTable {
            query_norm: mean_bands(heads.iter().filter_map(|h| Some(&h.frequency.as_ref()?.q))),
            key_norm: mean_bands(heads.iter().filter_map(|h| Some(&h.frequency.as_ref()?.k))),
            fourier_amplitude: mean_bands(
                heads
                    .iter()
                    .filter_map(|h| Some(&h.fourier.as_ref()?.amplitude_shares)),
            ),
        },
        posym: posym_plane(data),
        top_heads: top_heads(data),
    }
}

/// The comparison of the scans, in the order given.
pub fn compare(scans: &[ScanData]) -> Comparison {
    let labels: Vec<String> = scans
        .iter()
        .flat_map(|d| d.summary.heads.iter().map(|h| h.label.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    Comparison {
        format_version: COMPARE_FORMAT_VERSION,
        models: scans.iter().map(|d| column(d, &labels)).collect(),
        labels,
    }
}

/// Reads the scan directories (each must be complete, as [`ScanData::open`] checks; at least two) and writes
/// `out/compare.html` and last `out/compare.json`, the directory whole and at once ([`StagedDir`], taken
/// before the scans are read; an output that is or holds one of them is refused, and an existing non-empty
/// `out` unless `force` and it is a previous comparison). Returns the page's path.
pub fn write_comparison(dirs: &[PathBuf], out: &Path, force: bool) -> Result<PathBuf> {
    if dirs.len() < 2 {
        return Err(Error::Argument(format!(
            "compare-scans needs at least 2 scan directories to set side by side, got {}",
            dirs.len()
        )));
    }
    for (i, a) in dirs.iter().enumerate() {
        let same = |b: &&PathBuf| a.canonicalize().is_ok_and(|c| b.canonicalize().is_ok_and(|d| c == d));
        if let Some(b) = dirs[i + 1..].iter().find(same) {
            return Err(Error::Argument(format!(
                "{} and {} are the same scan directory; give each scan once",
                a.display(),
                b.display()
            )));
        }
    }
    let staged = StagedDir::begin(
        out,
        &Staging {
            force,
            inputs: &Inputs::new(dirs),
            records: &[Record::COMPARE],
        },
    )?;
    let scans = dirs
        .iter()
        .map(|d| ScanData::open(d))
        .collect::<Result<Vec<_>>>()?;
    let comparison = compare(&scans);
    let json = serde_json::to_string_pretty(&comparison)
        .map_err(|e| Error::Internal(format!("compare.json: {e}")))?;
    let page = render(&comparison);
    let write = |name: &str, text: &str| {
        let path = staged.path().join(name);
        crate::io::write_atomic(&path, |w| w.write_all(text.as_bytes()))
    };
    write(COMPARE_HTML, &page)?;
    write(COMPARE_JSON, &(json + "\n"))?;
    let target = staged.commit()?;
    Ok(target.join(COMPARE_HTML))
}

/// "not run" in a table cell.
const NOT_RUN: &str = "<span class=\"missing\">not run</span>";

/// A number for a table cell: 3 significant digits.
fn num(v: f64) -> String {
    significant(v, 3)
}

/// A share as a percentage with one decimal.
fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// The name of model `k` in legends, which have room for a few characters only: `#` and its 1-based number,
/// the number of its column in the tables.
fn short(k: usize) -> String {
    format!("#{}", k + 1)
}

/// Caption lines of a figure with one series per model: which model each legend entry is (three per line),
/// then which models did not run the figure's analysis (`missing(model)`).
fn key_caption(c: &Comparison, missing: impl Fn(&ModelColumn) -> bool) -> Vec<String> {
    let entries: Vec<String> = c
        .models
        .iter()
        .enumerate()
        .map(|(k, m)| format!("{} {}", short(k), m.model.architecture))
        .collect();
    let mut lines: Vec<String> = entries.chunks(3).map(|e| e.join(", ")).collect();
    let not_run: Vec<String> = c
        .models
        .iter()
        .enumerate()
        .filter(|(_, m)| missing(m))
        .map(|(k, _)| short(k))
        .collect();
    if !not_run.is_empty() {
        lines.push(format!("not run: {}", not_run.join(", ")));
    }
    lines
}

/// A table with one column per model: the header, then `rows` of `(row heading, cell per model)` (cells are
/// HTML).
fn side_by_side(out: &mut String, c: &Comparison, rows: &[(String, Vec<String>)]) {
    out.push_str("<table><tr><th></th>");
    for (k, m) in c.models.iter().enumerate() {
        let _ = write!(out, "<th>{}: {}</th>", k + 1, escape(&m.name));
    }
    out.push_str("</tr>");
    for (heading, cells) in rows {
        let _ = write!(out, "<tr><th>{heading}</th>");
        for cell in cells {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>\n");
}

/// Cells of one row: `f` of each model.
fn cells(c: &Comparison, f: impl Fn(&ModelColumn) -> String) -> Vec<String> {
    c.models.iter().map(f).collect()
}

/// Section *Models*: shape, prompts, precision and analyses of each scan.
fn models_section(out: &mut String, c: &Comparison) {
    let bases = |m: &ModelColumn| {
        m.model
            .rope_bases
            .iter()
            .map(|b| format!("{b:e}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let sets = |m: &ModelColumn| {
        m.model
            .prompt_sets
            .iter()
            .map(|p| {
                let lengths: Vec<String> = p.lengths.iter().map(usize::to_string).collect();
                format!("{} {} × {}", p.name, p.count, lengths.join("/"))
            })
            .collect::<Vec<_>>()
            .join("<br/>")
    };
    let rows = vec![
        (
            "architecture".into(),
            cells(c, |m| escape(&m.model.architecture)),
        ),
        (
            "layers × heads (q / kv)".into(),
            cells(c, |m| {
                format!(
                    "{} × {} / {}",
                    m.model.n_layers, m.model.n_heads, m.model.n_kv_heads
                )
            }),
        ),
        (
            "head dimension".into(),
            cells(c, |m| m.model.head_dim.to_string()),
        ),
        ("RoPE bases".into(), cells(c, bases)),
        ("prompt sets (count × length)".into(), cells(c, sets)),
        ("precision".into(), cells(c, |m| escape(&m.model.precision))),
        (
            "analyses".into(),
            cells(c, |m| escape(&m.model.analyses.join(", "))),
        ),
        (
            "scan directory".into(),
            cells(c, |m| format!("<code>{}</code>", escape(&m.scan_dir))),
        ),
        (
            "model sha256".into(),
            cells(c, |m| {
                format!("<span class=\"hash\">{}</span>", escape(&m.model_sha256))
            }),
        ),
    ];
    side_by_side(out, c, &rows);
}

/// Section *Labels*: heads per label and their share.
fn labels_section(out: &mut String, c: &Comparison) {
    let mut rows = vec![(
        "heads".to_string(),
        cells(c, |m| m.labels.heads.to_string()),
    )];
    for l in &c.labels {
        let swatch = format!(
            "<span style=\"display:inline-block;width:10px;height:10px;background:{}\"></span> {}",
            label_colour(l),
            escape(l)
        );
        rows.push((
            swatch,
            cells(c, |m| {
                let n = m.labels.counts.get(l).copied().unwrap_or(0);
                let share = m.labels.shares.get(l).copied().unwrap_or(0.0);
                format!("{n} ({})", pct(share))
            }),
        ));
    }
    out.push_str(
        "<p>Heads per label (share of the model's heads), from each head's <code>label</code>.</p>",
    );
    side_by_side(out, c, &rows);
}

/// Section *Slash-dominant heads*: counts, intrinsic overlap, counts per Δ as a table and grouped bars.
fn sdh_section(out: &mut String, c: &Comparison) {
    out.push_str(
        "<p>A (κ, Δ)-slash-dominant head has a mean slash score <code>SlashScore(Δ) ≥ κ</code> at some \
         Δ ≤ Δmax; heads are distinct (layer, head), triples (layer, head, Δ) count a head once per Δ. From \
         <code>summary.json</code>'s <code>slash_dominant</code>, per-head <code>slash</code> and \
         <code>intrinsic</code>.</p>",
    );
    let sdh =
        |f: &dyn Fn(&SdhTable) -> String| cells(c, |m| m.sdh.as_ref().map_or(NOT_RUN.into(), f));
    let opt = |v: Option<usize>| v.map_or(NOT_RUN.to_string(), |n| n.to_string());
    let intr = |f: fn(&crate::scan::format::Intrinsic) -> f64| {
        sdh(&|s| s.intrinsic.as_ref().map_or(NOT_RUN.into(), |i| num(f(i))))
    };
    let rows = vec![
        ("κ".into(), sdh(&|s| num(s.kappa))),
        ("Δmax".into(), sdh(&|s| s.delta_max.to_string())),
        (
            "SDHs, natural prompts (triples)".into(),
            sdh(&|s| format!("{} ({})", s.natural_heads, s.natural_triples)),
        ),
        (
            "SDHs, random prompts (triples)".into(),
            sdh(&|s| match (s.random_heads, s.random_triples) {
                (Some(h), Some(t)) => format!("{h} ({t})"),
                _ => NOT_RUN.into(),
            }),
        ),
        (
            "natural SDHs still ≥ κ at their Δ on random prompts".into(),
            sdh(&|s| opt(s.still_dominant_on_random)),
        ),
        (
            "Jaccard of triples natural vs random".into(),
            intr(|i| i.jaccard),
        ),
        ("Jaccard of heads".into(), intr(|i| i.jaccard_heads)),
        (
            "Pearson of all slash scores".into(),
            intr(|i| i.pearson_all),
        ),
        (
            "Pearson of best score per head".into(),
            intr(|i| i.pearson_best),
        ),
    ];
    side_by_side(out, c, &rows);
    let delta_max = c
        .models
        .iter()
        .filter_map(|m| m.sdh.as_ref().map(|s| s.delta_max))
        .max();
    let Some(delta_max) = delta_max else {
        out.push_str("<div class=\"missing\">SDH per Δ: not run for any model</div>");
        return;
    };
    let mut rows = Vec::new();
    for d in 0..=delta_max {
        let cell = |m: &ModelColumn| -> String {
            let Some(s) = &m.sdh else {
                return NOT_RUN.into();
            };
            match s.per_delta.get(d) {
                None => "beyond Δmax".into(),
                Some(a) => format!("{} / {}", a.natural, opt(a.random)),
            }
        };
        rows.push((format!("Δ = {d}"), cells(c, cell)));
    }
    out.push_str("<h3>SDH triples per Δ (natural / random prompts)</h3>");
    side_by_side(out, c, &rows);
    out.push_str("<div class=\"figs\">");
    for (set, random) in [("natural", false), ("random", true)] {
        let names: Vec<String> = c.models.iter().enumerate().map(|(k, _)| short(k)).collect();
        let values: Vec<Vec<f64>> = c
            .models
            .iter()
            .map(|m| {
                (0..=delta_max)
                    .map(|d| {
                        let a = m.sdh.as_ref().and_then(|s| s.per_delta.get(d));
                        let v = if random {
                            a.and_then(|a| a.random)
                        } else {
                            a.map(|a| a.natural)
                        };
                        v.map_or(f64::NAN, |n| n as f64)
                    })
                    .collect()
            })
            .collect();
        let series: Vec<Series> = names
            .iter()
            .zip(&values)
            .map(|(name, values)| Series { name, values })
            .collect();
        let missing = key_caption(c, |m| {
            m.sdh
                .as_ref()
                .is_none_or(|s| random && s.random_triples.is_none())
        });
        let step = (delta_max / 8).max(1);
        let xticks: Vec<(f64, String)> = (0..=delta_max)
            .step_by(step)
            .map(|d| (d as f64, d.to_string()))
            .collect();
        let title = format!("SDH triples per Δ, {set} prompts");
        let labels = Labels {
            title: &title,
            x: "Δ",
            y: "slash-dominant heads",
            caption: &missing,
        };
        bars_figure(out, &labels, &series, &xticks);
    }
    out.push_str("</div>\n");
}

/// Appends a grouped bar chart as a `<figure>`.
fn bars_figure(
    out: &mut String,
    labels: &Labels<'_>,
    series: &[Series<'_>],
    xticks: &[(f64, String)],
) {
    let _ = write!(
        out,
        "<figure>{}</figure>",
        figures::bars(labels, series, xticks)
    );
}

/// Section *Band shares*: the mean shares as a table and grouped bars.
fn bands_section(out: &mut String, c: &Comparison) {
    out.push_str(
        "<p>Mean over heads (each head weighted equally) of each head's shares in the low, medium and high \
         bands (edges in each scan's <code>meta.json</code>): of its query and key chunk norms \
         (<code>frequency</code>) and of its logit's Fourier amplitudes Σ A<sub>l</sub> (<code>fourier</code>).</p>",
    );
    type Pick = fn(&BandTable) -> Option<Bands>;
    let kinds: [(&str, Pick); 3] = [
        ("query chunk norm", |b| b.query_norm),
        ("key chunk norm", |b| b.key_norm),
        ("Fourier amplitude", |b| b.fourier_amplitude),
    ];
    let mut rows = Vec::new();
    for (name, pick) in kinds {
        rows.push((
            format!("{name}: low / medium / high"),
            cells(c, |m| {
                pick(&m.bands).map_or(NOT_RUN.into(), |b| {
                    format!("{} / {} / {}", num(b.low), num(b.medium), num(b.high))
                })
            }),
        ));
    }
    side_by_side(out, c, &rows);
    out.push_str("<div class=\"figs\">");
    let names: Vec<String> = c.models.iter().enumerate().map(|(k, _)| short(k)).collect();
    let xticks: Vec<(f64, String)> = ["low", "medium", "high"]
        .iter()
        .enumerate()
        .map(|(i, s)| (i as f64, s.to_string()))
        .collect();
    for (name, pick) in kinds {
        let values: Vec<Vec<f64>> = c
            .models
            .iter()
            .map(|m| pick(&m.bands).map_or(vec![f64::NAN; 3], |b| vec![b.low, b.medium, b.high]))
            .collect();
        let series: Vec<Series> = names
            .iter()
            .zip(&values)
            .map(|(name, values)| Series { name, values })
            .collect();
        let missing = key_caption(c, |m| pick(&m.bands).is_none());
        let title = format!("band shares of {name}");
        let labels = Labels {
            title: &title,
            x: "band",
            y: "mean share over heads",
            caption: &missing,
        };
        bars_figure(out, &labels, &series, &xticks);
    }
    out.push_str("</div>\n");
}

/// Section *Positional–symbolic plane*: one scatter per model and the correlations.
fn posym_section(out: &mut String, c: &Comparison) {
    out.push_str(
        "<p>Each head's positional score s<sub>pos</sub> against its symbolic score s<sub>sym</sub> \
         (<code>posym</code> records in <code>summary.json</code>), coloured by label; r is their Pearson \
         correlation over heads.</p><div class=\"figs\">",
    );
    for (k, m) in c.models.iter().enumerate() {
        let title = format!("{}: {}", k + 1, m.model_file);
        let Some(p) = &m.posym else {
            let _ = write!(
                out,
                "<div class=\"missing\">{}: not run</div>",
                escape(&title)
            );
            continue;
        };
        let mut legend: Vec<(String, String)> = Vec::new();
        let points: Vec<Point> = p
            .heads
            .iter()
            .map(|(l, h, pos, sym, label)| {
                let colour = label_colour(label);
                let kind = label.split('(').next().unwrap_or(label).to_string();
                if !legend.iter().any(|(_, k)| *k == kind) {
                    legend.push((colour.clone(), kind));
                }
                Point {
                    x: *pos,
                    y: *sym,
                    colour,
                    title: format!("L{l}H{h} {label}"),
                }
            })
            .collect();
        let caption = vec![
            format!("{}, {} heads", m.model.architecture, p.heads.len()),
            format!(
                "r(s_pos, s_sym) = {}; dashed: s_pos = s_sym",
                num(p.pearson)
            ),
        ];
        let labels = Labels {
            title: &title,
            x: "positional score s_pos",
            y: "symbolic score s_sym",
            caption: &caption,
        };
        let _ = write!(
            out,
            "<figure>{}</figure>",
            figures::scatter(&labels, &points, &legend)
        );
    }
    out.push_str("</div>\n");
    let rows = vec![
        (
            "heads with scores".into(),
            cells(c, |m| {
                m.posym
                    .as_ref()
                    .map_or(NOT_RUN.into(), |p| p.heads.len().to_string())
            }),
        ),
        (
            "r(s_pos, s_sym)".into(),
            cells(c, |m| {
                m.posym.as_ref().map_or(NOT_RUN.into(), |p| num(p.pearson))
            }),
        ),
    ];
    side_by_side(out, c, &rows);
}

/// Section *Top heads by slash score*: one short table per model.
fn top_section(out: &mut String, c: &Comparison) {
    let _ = write!(
        out,
        "<p>The {TOP_HEADS} heads of each model with the largest best slash score on natural prompts (Δ of \
         that score; the score at the same Δ on random prompts; mean attention on key 0).</p>"
    );
    out.push_str("<div class=\"figs\">");
    for (k, m) in c.models.iter().enumerate() {
        let _ = write!(out, "<div><h3>{}: {}</h3>", k + 1, escape(&m.name));
        match &m.top_heads {
            None => out.push_str("<div class=\"missing\">not run</div>"),
            Some(rows) => {
                out.push_str(
                    "<table><tr><th>head</th><th>label</th><th>Δ</th><th>score</th><th>random</th>\
                     <th>sink</th></tr>",
                );
                for r in rows {
                    let random = r.random_score_at_best_delta.map_or(NOT_RUN.into(), num);
                    let _ = write!(
                        out,
                        "<tr><td>L{}H{}</td><td>{}</td><td>{}</td><td>{}</td><td>{random}</td><td>{}</td></tr>",
                        r.layer,
                        r.head,
                        escape(&r.label),
                        r.best_delta,
                        num(r.best_score),
                        num(r.sink)
                    );
                }
                out.push_str("</table>");
            }
        }
        out.push_str("</div>");
    }
    out.push_str("</div>\n");
}

/// The page: static HTML with inline CSS and SVG figures, no script.
pub fn render(c: &Comparison) -> String {
    let mut out = String::new();
    let names: Vec<String> = c.models.iter().map(|m| m.name.clone()).collect();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>ropescope comparison: {}</title>\
         <style>{}</style></head><body>\n<h1>ropescope: {} scans side by side</h1>\n<ol>",
        escape(&names.join(" · ")),
        super::html::STYLE,
        c.models.len()
    );
    for m in &c.models {
        let _ = write!(
            out,
            "<li>{} — <code>{}</code></li>",
            escape(&m.name),
            escape(&m.scan_dir)
        );
    }
    out.push_str("</ol><p>Every number is read from the scans' <code>meta.json</code> and <code>summary.json</code>; \
                  <code>compare.json</code> beside this page holds them all. \"not run\": the analysis did not run \
                  in that scan.</p>\n<nav><ol>");
    for (id, heading) in SECTIONS {
        let _ = write!(out, "<li><a href=\"#{id}\">{heading}</a></li>");
    }
    out.push_str("</ol></nav>\n");
    type Section = fn(&mut String, &Comparison);
    let bodies: [Section; 6] = [
        models_section,
        labels_section,
        sdh_section,
        bands_section,
        posym_section,
        top_section,
    ];
    for ((id, heading), body) in SECTIONS.iter().zip(bodies) {
        let _ = writeln!(out, "<h2 id=\"{id}\">{heading}</h2>");
        body(&mut out, c);
    }
    out.push_str("</body></html>\n");
    out
}
