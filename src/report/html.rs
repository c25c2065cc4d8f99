//! The self-contained report page: inline CSS, SVG and one small inline script, no network, no other file.
//! The findings (static HTML), a label-coloured layer × head grid whose cells link to each head's card
//! (`#L{l}H{h}`), the model-wide tables and figures, the per-head cards, and the run's parameters, step times and
//! model hash.
//!
//! The page stays light by drawing figures only when asked: each head card is a closed `<details>` holding its
//! figures as compact JSON ([`super::spec::Spec::page_json`]: plotted values to 4 significant digits, heatmap
//! cells as one byte each), which the page's script (`page.js`) draws as SVG when the card opens, from the grid,
//! from any head link, or from its own toggle. Tables of numbers are static HTML with the files' values.

use super::catalog::{self, FigureSpec, MapView};
use super::data::ScanData;
use super::figures::label_colour;
use super::findings;
use super::svg::{escape, tick_label};
use crate::scan::external::{HEAD_SET_RULE_FIELD, IN_HEAD_SET_FIELD};
use crate::scan::format::{HeadSummary, SlashHead};
use serde_json::{Map, Value};
use std::fmt::Write;

/// Query rows of each attention map the page embeds, at the file's own resolution (no averaging beyond the
/// file's), with all their causal columns. With the default 512-token prompts and 256×256 maps a row is 2
/// tokens, so the card shows queries 0–127 (8× Δmax = 16): the sink column and every slash the labels name,
/// with room to see them settle. 64 rows are 64·65/2 = 2080 one-byte cells per map, 5.5 kB of base64 for a
/// head's two maps, 1.5 MB for SmolLM2's 270 heads, which keeps the page under its 5 MB budget
/// (`tests/report/browser.rs`). `ropescope figures` draws every map whole.
pub const PAGE_MAP_ROWS: usize = 64;
/// Longest array printed in full in a table; longer ones are cut with a count.
const ARRAY_SHOWN: usize = 16;
/// Rows of a matrix printed in a table.
const MATRIX_ROWS: usize = 64;
/// The page's script: lazy figures, head links that open cards, sortable tables.
const SCRIPT: &str = include_str!("page.js");

/// The page's CSS, shared with the cross-model page ([`super::compare_scans`]).
pub(crate) const STYLE: &str = "body{font-family:DejaVu Sans,Liberation Sans,Arial,sans-serif;margin:20px;color:#222;max-width:1600px}\
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:3px;margin-top:28px}h3{font-size:15px;margin:6px 0}\
table{border-collapse:collapse;font-size:12px;margin:6px 0}td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}\
th{background:#f4f4f4}code{font-size:12px}\
table.sortable>tbody>tr:first-child>th{cursor:pointer}th[data-dir=asc]::after{content:\" ▲\"}th[data-dir=desc]::after{content:\" ▼\"}\
#grid td{padding:0;border:1px solid #fff}#grid th{font-weight:normal;font-size:11px;text-align:center}\
#grid a{display:block;width:44px;height:24px;line-height:24px;text-align:center;font-size:10px;text-decoration:none;color:#111}\
.legend span{display:inline-block;padding:2px 8px;margin:2px;font-size:11px;border-radius:2px}\
.figs{display:flex;flex-wrap:wrap;gap:8px}figure{margin:0;border:1px solid #eee}\
.hover{font-size:11px;color:#555;margin:2px 6px;min-height:14px}\
.missing{color:#888;font-style:italic;font-size:12px;padding:8px;width:360px}\
summary{cursor:pointer}summary h3{display:inline}details.lazy{margin:6px 0}\
section.head{border-top:1px solid #ddd;margin-top:4px;padding-top:4px}section.head:target{background:#fffbe6}\
.hash{font-family:monospace;word-break:break-all}\
.warn{background:#fff0e0;border:1px solid #e0a060;padding:4px 10px;margin:8px 0}\
#claims td{font-size:12px;vertical-align:top}.verdict{font-weight:bold}.verdict-supported{color:#1a7f37}\
.note{font-style:italic;color:#555}.verdict-contradicted{color:#b42318}.verdict-mixed{color:#9a6700}.verdict-not-measurable{color:#888}";

/// The report page of a scan directory.
pub fn render(data: &ScanData) -> String {
    let meta = &data.meta;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>ropescope report: {}</title><style>{STYLE}</style></head><body>\n",
        escape(&meta.model_file)
    );
    let _ = writeln!(
        out,
        "<h1>ropescope scan of {}</h1><p>{} layers × {} heads, {}; sha256 <span class=\"hash\">{}</span></p>\
         <noscript><p class=\"warn\">This page draws its figures with its own inline script, which is off: the \
         tables are all here; <code>ropescope figures DIR</code> writes every figure as an SVG file.</p></noscript>",
        escape(&meta.model_file),
        meta.model.n_layers,
        meta.model.n_heads,
        escape(&meta.model.architecture),
        escape(&meta.model_sha256)
    );
    warnings(&mut out, data);
    super::findings_html::render(&mut out, data);
    super::glossary::render(&mut out, data);
    contents(&mut out);
    grid(&mut out, data);
    let mut model_figures = Map::new();
    model_wide(&mut out, data, &mut model_figures);
    let _ = writeln!(
        out,
        "<h2 id=\"heads\">Heads</h2><p>Each card opens on a click (or from the grid and any head link) and then \
         draws its figures. Attention maps show the first {PAGE_MAP_ROWS} query rows of the scan's maps at their own \
         resolution, coloured from 0 to the map's largest cell below the first row (the first row's cell is the \
         same in every head); <code>ropescope figures DIR</code> draws them whole.</p>"
    );
    let mut head_figures = Map::new();
    for h in &data.summary.heads {
        head_section(&mut out, data, h, &mut head_figures);
    }
    run_section(&mut out, data);
    // The figures' data, one block per group (the script parses a block when it first draws from it): one
    // block rather than one per card, which Chromium parses in half the time.
    out.push_str(&json_block(MODEL_FIGURES, &Value::Object(model_figures)));
    out.push_str(&json_block(HEAD_FIGURES, &Value::Object(head_figures)));
    out.push_str("<script>");
    out.push_str(SCRIPT);
    out.push_str("</script>\n</body></html>\n");
    out
}

/// Figures into `out`: a placeholder per figure the script draws, a scatter as inline SVG, a "not run" note
/// for a figure without data. Returns the figures the script draws, as JSON, to be filed under the key its
/// `<details>` names (`data-figures`) in the JSON block it names (`data-block`).
#[must_use]
fn lazy_figures(out: &mut String, figures: Vec<FigureSpec>) -> Value {
    let mut json = Vec::new();
    for f in figures {
        match f.spec {
            Ok(spec) => match spec.page_json() {
                Value::Null => {
                    let _ = write!(out, "<figure id=\"{}\">{}</figure>", f.name, spec.svg());
                }
                mut v => {
                    let _ = write!(out, "<figure id=\"{}\"></figure>", f.name);
                    v["name"] = f.name.into();
                    json.push(v);
                }
            },
            Err(why) => {
                let _ = write!(
                    out,
                    "<div class=\"missing\" id=\"{}\">{}: {}</div>",
                    f.name,
                    escape(&f.title),
                    escape(&why)
                );
            }
        }
    }
    Value::Array(json)
}

/// Id of the JSON block of the model-wide figures.
const MODEL_FIGURES: &str = "model-figures";
/// Id of the JSON block of the head cards' figures, by card id.
const HEAD_FIGURES: &str = "head-figures";

/// The opening tag of a `<details>` whose figures the script draws when it opens, from `block` under `key`.
fn lazy_details(id: &str, block: &str, key: &str, open: bool) -> String {
    let id = if id.is_empty() {
        String::new()
    } else {
        format!(" id=\"{id}\"")
    };
    let open = if open { " open" } else { "" };
    format!("<details class=\"lazy\"{id} data-block=\"{block}\" data-figures=\"{key}\"{open}>")
}

/// A `<script type="application/json">` block of `v`; `<` is written `\u003c`, so no text ends the block.
fn json_block(id: &str, v: &Value) -> String {
    format!(
        "<script type=\"application/json\" id=\"{id}\">{}</script>\n",
        v.to_string().replace('<', "\\u003c")
    )
}

/// The table of contents, after the findings.
fn contents(out: &mut String) {
    out.push_str(
        "<nav id=\"toc\"><h2>Contents</h2><ol>\
         <li><a href=\"#findings\">Findings</a>: <a href=\"#f-sdh\">slash-dominant heads</a> · \
         <a href=\"#f-top\">top heads</a> · <a href=\"#f-bands\">bands</a> · \
         <a href=\"#f-posym\">positional–symbolic</a> · <a href=\"#f-ablation\">ablation</a> · \
         <a href=\"#f-cs\">Cauchy–Schwarz</a> · <a href=\"#f-detectors\">detectors</a> · <a href=\"#f-cone\">cone</a></li>\
         <li><a href=\"#glossary\">Definitions and parameters</a></li>\
         <li><a href=\"#grid\">Head labels</a> (each cell opens the head's card)</li>\
         <li><a href=\"#model\">Model-wide figures and tables</a></li>\
         <li><a href=\"#heads\">Per-head cards</a></li>\
         <li><a href=\"#run\">Run and parameters</a></li></ol></nav>\n",
    );
}

/// The scan's warnings (`summary.json`), before anything else.
fn warnings(out: &mut String, data: &ScanData) {
    if data.summary.warnings.is_empty() {
        return;
    }
    out.push_str("<div class=\"warn\" id=\"warnings\"><b>Warnings</b><ul>");
    for w in &data.summary.warnings {
        let _ = write!(out, "<li>{}</li>", escape(w));
    }
    out.push_str("</ul></div>\n");
}

/// A short cell text for a label.
fn abbreviation(label: &str) -> String {
    match label {
        "sink" => "sink".into(),
        "previous-token" => "prev".into(),
        "diagonal" => "diag".into(),
        "induction" => "ind".into(),
        "positional" => "pos".into(),
        "symbolic" => "sym".into(),
        "mixed" => "·".into(),
        other => match other.strip_prefix("slash(") {
            Some(d) => format!("Δ{}", d.trim_end_matches(')')),
            None => escape(other),
        },
    }
}

/// The layer × head grid coloured by label, each cell a link to the head's section, and its legend.
fn grid(out: &mut String, data: &ScanData) {
    let (layers, heads) = (data.meta.model.n_layers, data.meta.model.n_heads);
    out.push_str("<h2 id=\"labels\">Head labels</h2><table id=\"grid\"><tr><th></th>");
    for h in 0..heads {
        let _ = write!(out, "<th>H{h}</th>");
    }
    out.push_str("</tr>\n");
    let model = &data.meta.model;
    for l in 0..layers {
        // Rows say what kind of layer they are: NoPE layers rotate nothing, global layers of a model with
        // sliding-window layers see every key, p-RoPE layers leave some chunks still.
        let kind = match (model.is_nope(l), model.windows.get(l)) {
            (true, _) => " NoPE",
            (false, Some(None)) if model.windows.iter().any(Option::is_some) => " global",
            _ => "",
        };
        let p_rope = match findings::still_chunks(data, l) {
            0 => String::new(),
            n => {
                let all = model.chunks_of(l);
                format!(" p-RoPE {}/{all}", all - n)
            }
        };
        let _ = write!(out, "<tr><th>L{l}{kind}{p_rope}</th>");
        for h in 0..heads {
            match data
                .summary
                .heads
                .iter()
                .find(|s| s.layer == l && s.head == h)
            {
                Some(s) => {
                    let _ = write!(
                        out,
                        "<td style=\"background:{}\"><a href=\"#L{l}H{h}\" title=\"L{l} H{h}: {}\">{}</a></td>",
                        label_colour(&s.label),
                        escape(&s.label),
                        abbreviation(&s.label)
                    );
                }
                None => out.push_str("<td>–</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table><p class=\"legend\">");
    let kinds = [
        "sink",
        "diagonal",
        "previous-token",
        "slash(Δ)",
        "induction",
        "positional",
        "symbolic",
        "mixed",
    ];
    for k in kinds {
        let _ = write!(
            out,
            "<span style=\"background:{}\">{}</span>",
            label_colour(k),
            escape(k)
        );
    }
    out.push_str("</p>\n");
}

/// Model-wide figures and tables: slash-dominant heads, intrinsic-ness, every head's scores (sortable), the
/// positional–symbolic plane (inline SVG), and the frequency-usage heatmaps (drawn when opened).
fn model_wide(out: &mut String, data: &ScanData, figures_json: &mut Map<String, Value>) {
    out.push_str("<h2 id=\"model\">Model-wide</h2><h3>Slash-dominant heads, by natural score</h3>");
    sdh_table(out, data);
    out.push_str("<h3>Intrinsic-ness (natural against random prompts)</h3>");
    optional_json(out, data.summary.intrinsic.as_ref(), "intrinsic");
    heads_table(out, data);
    let mut figures = catalog::model_wide_specs(data).into_iter();
    out.push_str("<h3>Positional–symbolic plane</h3><div class=\"figs\">");
    let plane = lazy_figures(out, figures.by_ref().take(1).collect());
    debug_assert_eq!(plane, Value::Array(Vec::new()), "the plane is inline SVG");
    out.push_str("</div>\n");
    let _ = write!(
        out,
        "{}<summary><h3>Slash score over Δ, all heads</h3></summary><div class=\"figs\">",
        lazy_details("slash-by-delta", MODEL_FIGURES, "slash-by-delta", true)
    );
    figures_json.insert(
        "slash-by-delta".to_string(),
        lazy_figures(out, figures.by_ref().take(1).collect()),
    );
    out.push_str("</div></details>\n");
    let (layers, overview): (Vec<FigureSpec>, Vec<FigureSpec>) =
        figures.partition(|f| f.name.contains("_L"));
    let count = layers.len();
    for (id, title, figures, open) in [
        (
            "frequency-usage",
            "Frequency usage, layers (mean over heads)".to_string(),
            overview,
            true,
        ),
        (
            "frequency-usage-layers",
            format!("Frequency usage of each layer's heads ({count} heatmaps, drawn when opened)"),
            layers,
            false,
        ),
    ] {
        let _ = write!(
            out,
            "{}<summary><h3>{title}</h3></summary><div class=\"figs\">",
            lazy_details(id, MODEL_FIGURES, id, open)
        );
        figures_json.insert(id.to_string(), lazy_figures(out, figures));
        out.push_str("</div></details>\n");
    }
}

/// A number of a head's record as the cards print it (`scalar`), with its value for sorting.
fn score_cell(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("<td>{x:.4}</td>"),
        _ => "<td>–</td>".into(),
    }
}

/// Every head, one row each: label and the main score of each analysis, sortable by any column.
fn heads_table(out: &mut String, data: &ScanData) {
    let heads = &data.summary.heads;
    let _ = write!(
        out,
        "<details id=\"all-heads\"><summary><h3>All {} heads, one row each (click a column to sort)</h3></summary>\
         <table class=\"sortable\"><tr><th>head</th><th>label</th><th>best Δ</th><th>slash score at best Δ</th>\
         <th>random prompts, same Δ</th><th>sink</th><th>s_pos</th><th>s_sym</th><th>induction</th>\
         <th>previous-token</th><th>q rank-one share</th><th>A share, high band</th></tr>",
        heads.len()
    );
    let n_heads = data.meta.model.n_heads.max(1);
    let field =
        |r: &Option<Value>, k: &str| r.as_ref().and_then(|r| r.get(k)).and_then(Value::as_f64);
    for h in heads {
        let slash = h.slash.as_ref();
        let _ = write!(
            out,
            "<tr><td data-sort=\"{}\"><a href=\"#L{l}H{hd}\">L{l} H{hd}</a></td><td>{}</td><td>{}</td>",
            h.layer * n_heads + h.head,
            escape(&h.label),
            slash.map_or("–".into(), |s| s.best_delta.to_string()),
            l = h.layer,
            hd = h.head
        );
        for v in [
            slash.map(|s| s.best_score),
            slash.and_then(|s| s.random_score_at_best_delta),
            slash.map(|s| s.sink),
            field(&h.posym, "s_pos"),
            field(&h.posym, "s_sym"),
            field(&h.detectors, "induction"),
            field(&h.detectors, "previous_token"),
            h.rank.as_ref().map(|r| r.q_rank_one_share),
            h.fourier.as_ref().map(|f| f.amplitude_shares.high),
        ] {
            out.push_str(&score_cell(v));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></details>\n");
}

/// A serialisable value as a table, or "not run".
fn optional_json<T: serde::Serialize>(out: &mut String, v: Option<&T>, analysis: &str) {
    match v.and_then(|v| serde_json::to_value(v).ok()) {
        Some(v) => json_html(out, &v, 0),
        None => {
            let _ = write!(
                out,
                "<p class=\"missing\">not run: analysis `{analysis}`</p>"
            );
        }
    }
}

/// The (κ, Δ)-slash-dominant heads of both prompt sets, with their scores.
fn sdh_table(out: &mut String, data: &ScanData) {
    let Some(sets) = &data.summary.slash_dominant else {
        out.push_str("<p class=\"missing\">not run: analysis `slash`</p>");
        return;
    };
    let mut all: Vec<SlashHead> = sets.natural.iter().chain(&sets.random).copied().collect();
    all.sort();
    all.dedup();
    let random = match findings::random_ran(data) {
        true => format!(
            "{} (head, Δ) pairs in {} distinct heads on random prompts",
            sets.random.len(),
            findings::distinct_heads(&sets.random).len()
        ),
        false => "random prompts not run (analysis `intrinsic`)".into(),
    };
    let _ = write!(
        out,
        "<p>κ = {}: {} (head, Δ) pairs in {} distinct heads on natural prompts; {random}.</p>",
        tick_label(sets.kappa),
        sets.natural.len(),
        findings::distinct_heads(&sets.natural).len(),
    );
    if all.is_empty() {
        return;
    }
    out.push_str("<table class=\"sortable\"><tr><th>head</th><th>Δ</th><th>natural score</th><th>random score</th><th>natural</th><th>random</th></tr>");
    let n_heads = data.meta.model.n_heads.max(1);
    let score_value = |set: usize, s: &SlashHead| {
        data.slash[set]
            .as_ref()
            .and_then(|t| t.at(&[s.layer, s.head]))
            .and_then(|v| v.get(s.delta))
            .copied()
            .unwrap_or(f64::NEG_INFINITY)
    };
    let score = |set: usize, s: &SlashHead| match score_value(set, s) {
        v if v.is_finite() => format!("{v:.4}"),
        _ => "–".to_string(),
    };
    all.sort_by(|a, b| score_value(0, b).total_cmp(&score_value(0, a)));
    for s in &all {
        let mark = |list: &[SlashHead]| if list.contains(s) { "✓" } else { "" };
        let _ = write!(
            out,
            "<tr><td data-sort=\"{}\"><a href=\"#L{l}H{h}\">L{l} H{h}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            s.layer * n_heads + s.head,
            s.delta,
            score(0, s),
            score(1, s),
            mark(&sets.natural),
            mark(&sets.random),
            l = s.layer,
            h = s.head
        );
    }
    out.push_str("</table>");
}

/// One head's card: a closed `<details>` with placeholders for its figures (drawn by the script when opened),
/// every score of the summary (analyses that did not run say so, and those that ran without a score for this
/// head), and the figures' data.
fn head_section(
    out: &mut String,
    data: &ScanData,
    h: &HeadSummary,
    figures_json: &mut Map<String, Value>,
) {
    let id = format!("L{}H{}", h.layer, h.head);
    let _ = write!(
        out,
        "<section class=\"head\" id=\"{id}\">{}<summary><h3>Layer {l}, head {hd} (KV head {}): {}</h3> <a href=\"#grid\">↑ grid</a></summary><div class=\"figs\">",
        lazy_details("", HEAD_FIGURES, &id, false),
        h.kv_head,
        escape(&h.label),
        l = h.layer,
        hd = h.head
    );
    let specs = catalog::head_specs(data, h.layer, h.head, MapView::FirstRows(PAGE_MAP_ROWS));
    figures_json.insert(id, lazy_figures(out, specs));
    out.push_str("</div><table><tr><th>analysis</th><th>scores</th></tr>");
    let scores = [
        ("slash", serde_json::to_value(&h.slash)),
        ("rank", serde_json::to_value(&h.rank)),
        ("fourier", serde_json::to_value(&h.fourier)),
        ("frequency", serde_json::to_value(&h.frequency)),
        ("cone", serde_json::to_value(&h.cone)),
        ("posym", serde_json::to_value(&h.posym)),
        ("detectors", serde_json::to_value(&h.detectors)),
        ("cauchy-schwarz", serde_json::to_value(&h.cauchy_schwarz)),
        ("ablation", serde_json::to_value(&h.ablation)),
    ];
    for (name, v) in scores {
        let _ = write!(out, "<tr><td>{name}</td><td>");
        match v {
            // An analysis that ran can have no score for a head: a NoPE head has no frequencies, latent
            // attention no key projection for the cone.
            Ok(Value::Null) | Err(_) if data.meta.analyses.iter().any(|a| a == name) => {
                out.push_str("<span class=\"missing\">not measured for this head</span>")
            }
            Ok(Value::Null) | Err(_) => out.push_str("<span class=\"missing\">not run</span>"),
            Ok(v) if v.get(IN_HEAD_SET_FIELD) == Some(&Value::Bool(false)) => {
                let rule = v.get(HEAD_SET_RULE_FIELD).and_then(Value::as_str);
                let _ = write!(
                    out,
                    "<span class=\"missing\">not in this analysis's head set ({})</span>",
                    escape(rule.unwrap_or("rule not recorded"))
                );
            }
            Ok(v) if name == "ablation" => ablation_scores(out, &v),
            Ok(v) if name == "cone" => inline_scores(out, &degrees(&v)),
            Ok(v) if name == "cauchy-schwarz" => cauchy_schwarz_scores(out, &v),
            Ok(v) => inline_scores(out, &v),
        }
        out.push_str("</td></tr>");
    }
    out.push_str("</table></details></section>\n");
}

/// A record of angles in radians with each angle in degrees (the unit of the whole page).
fn degrees(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| {
                    let deg = x.as_f64().map(|r| format!("{:.1}°", r.to_degrees()));
                    (
                        k.replace("_angle", "_angle_deg"),
                        deg.map_or(x.clone(), Value::from),
                    )
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A head's Cauchy–Schwarz record: mean cosines and activations of its target and other pairs.
fn cauchy_schwarz_scores(out: &mut String, v: &Value) {
    let _ = write!(
        out,
        "tabled as {}<table><tr><th>pairs</th><th>count</th><th>mean cos(q_i, k_j) after RoPE</th><th>before RoPE</th><th>mean q·k (scaled)</th><th>mean ‖q‖‖k‖ (scaled)</th></tr>",
        escape(v["kind"].as_str().unwrap_or("?"))
    );
    for (field, pairs) in [
        ("diagonal", "(i, i)"),
        ("previous", "(i, i−1)"),
        ("baseline", "(i, j ≤ i−2)"),
    ] {
        let p = &v[field];
        let _ = write!(
            out,
            "<tr><td>{pairs}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            scalar(&p["n_pairs"]),
            scalar(&p["mean_ratio"]),
            scalar(&p["mean_pre_rope_ratio"]),
            scalar(&p["mean_activation"]),
            scalar(&p["mean_bound"])
        );
    }
    out.push_str("</table>");
}

/// A head's ablation record as a table: the slash peak under each variant beside the model's loss change.
fn ablation_scores(out: &mut String, v: &Value) {
    let (Some(baseline), Some(variants)) = (v.get("baseline"), v["variants"].as_array()) else {
        return inline_scores(out, v);
    };
    out.push_str("<table><tr><th>variant</th><th>loss change (nats)</th><th>peak Δ</th><th>peak score</th><th>score change at the baseline's Δ</th></tr>");
    let _ = write!(
        out,
        "<tr><td>baseline</td><td>0</td><td>{}</td><td>{}</td><td>0</td></tr>",
        scalar(&baseline["peak_delta"]),
        scalar(&baseline["peak_score"])
    );
    for r in variants {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&variant_name(&r["variant"])),
            scalar(&r["loss_change"]),
            scalar(&r["peak_delta"]),
            scalar(&r["peak_score"]),
            scalar(&r["baseline_peak_change"])
        );
    }
    out.push_str("</table>");
}

/// The name of an ablation variant (`p-RoPE p = 0.75`, `reversed p = 0.25`, `high band masked`, `NoPE`).
pub fn variant_name(v: &Value) -> String {
    let p = v["p"].as_f64();
    match (v["kind"].as_str(), p) {
        (Some("p_rope"), Some(0.0)) => "NoPE (p = 0)".into(),
        (Some("p_rope"), Some(p)) => format!("p-RoPE p = {}", tick_label(p)),
        (Some("reversed"), Some(p)) => format!("reversed p = {}", tick_label(p)),
        (Some("band_masked"), _) => format!("{} band masked", v["band"].as_str().unwrap_or("?")),
        (Some(kind), _) => kind.to_string(),
        _ => v.to_string(),
    }
}

/// The fields of an object as `name = value` pairs on one line (nested objects dotted).
fn inline_scores(out: &mut String, v: &Value) {
    let mut pairs = Vec::new();
    flatten("", v, &mut pairs);
    let text: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{} = {}", escape(k), v))
        .collect();
    out.push_str(&text.join(", "));
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        other => out.push((prefix.to_string(), scalar(other))),
    }
}

/// A scalar (or a short array) as escaped text.
fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "–".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => format!("{f:.4}"),
            _ => n.to_string(),
        },
        Value::String(s) => escape(s),
        Value::Array(a) => {
            let shown: Vec<String> = a.iter().take(ARRAY_SHOWN).map(scalar).collect();
            let more = if a.len() > ARRAY_SHOWN {
                format!(", … ({} values)", a.len())
            } else {
                String::new()
            };
            format!("[{}{more}]", shown.join(", "))
        }
        Value::Object(_) => "{…}".into(),
    }
}

/// A JSON value as nested tables: objects as key/value rows, arrays of number arrays as matrices.
fn json_html(out: &mut String, v: &Value, depth: usize) {
    match v {
        Value::Object(map) if depth < 4 => {
            out.push_str("<table>");
            for (k, v) in map {
                let _ = write!(out, "<tr><th>{}</th><td>", escape(k));
                json_html(out, v, depth + 1);
                out.push_str("</td></tr>");
            }
            out.push_str("</table>");
        }
        Value::Array(rows) if rows.iter().all(|r| r.is_array()) && !rows.is_empty() => {
            out.push_str("<table>");
            for (i, r) in rows.iter().take(MATRIX_ROWS).enumerate() {
                let _ = write!(out, "<tr><th>{i}</th>");
                if let Value::Array(cells) = r {
                    for c in cells.iter().take(ARRAY_SHOWN) {
                        let _ = write!(out, "<td>{}</td>", scalar(c));
                    }
                }
                out.push_str("</tr>");
            }
            out.push_str("</table>");
            if rows.len() > MATRIX_ROWS {
                let _ = write!(out, "<p>… ({} rows)</p>", rows.len());
            }
        }
        other => out.push_str(&scalar(other)),
    }
}

/// The time of each step of the scan (`meta.json` `step_seconds`), with its share of the whole scan.
fn step_times(out: &mut String, data: &ScanData) {
    let meta = &data.meta;
    out.push_str("<h3 id=\"steps\">Time per step</h3>");
    if meta.step_seconds.is_empty() {
        out.push_str(
            "<p class=\"missing\">not recorded: this meta.json has no step_seconds (written by an older ropescope)</p>",
        );
        return;
    }
    let share = |s: f64| {
        if meta.elapsed_seconds > 0.0 {
            format!("{:.1}%", 100.0 * s / meta.elapsed_seconds)
        } else {
            "–".into()
        }
    };
    out.push_str("<table id=\"step-seconds\" class=\"sortable\"><tr><th>step</th><th>seconds</th><th>share of the scan</th></tr>");
    for t in &meta.step_seconds {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{:.2}</td><td>{}</td></tr>",
            escape(&t.step),
            t.seconds,
            share(t.seconds)
        );
    }
    let total: f64 = meta.step_seconds.iter().map(|t| t.seconds).sum();
    let _ = write!(
        out,
        "<tr><th>all steps</th><th>{total:.2}</th><th>{}</th></tr><tr><th>whole scan (elapsed)</th><th>{:.2}</th><th>{}</th></tr></table>",
        share(total),
        meta.elapsed_seconds,
        share(meta.elapsed_seconds)
    );
}

/// The run: model, hash, shape, prompts, parameters, analyses, step times, versions.
fn run_section(out: &mut String, data: &ScanData) {
    let meta = &data.meta;
    out.push_str("<h2 id=\"run\">Run</h2><table>");
    let rows = [
        ("model file", escape(&meta.model_file)),
        (
            "model sha256",
            format!("<span class=\"hash\">{}</span>", escape(&meta.model_sha256)),
        ),
        ("precision", escape(&meta.precision)),
        ("arithmetic", meta.arithmetic.name().to_string()),
        ("analyses run", escape(&meta.analyses.join(", "))),
        ("ropescope", escape(&meta.ropescope_version)),
        ("format version", meta.format_version.to_string()),
        ("elapsed", format!("{:.1} s", meta.elapsed_seconds)),
    ];
    for (k, v) in rows {
        let _ = write!(out, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    out.push_str("</table>");
    step_times(out, data);
    out.push_str("<h3>Parameters</h3>");
    optional_json(out, Some(&meta.parameters), "parameters");
    out.push_str("<h3>Model</h3>");
    optional_json(out, Some(&meta.model), "model");
    out.push_str("<h3>Prompt sets</h3><table class=\"sortable\"><tr><th>set</th><th>prompts</th><th>lengths</th><th>sources</th></tr>");
    for s in &meta.prompt_sets {
        let lengths: Vec<Value> = s.lengths.iter().map(|&n| n.into()).collect();
        let sources: Vec<Value> = s.sources.iter().map(|n| n.as_str().into()).collect();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&s.name),
            s.count,
            scalar(&Value::Array(lengths)),
            scalar(&Value::Array(sources))
        );
    }
    out.push_str("</table>\n");
}
