//! The conformance matrix (`ropescope conformance run`): every family of a vectors set against every
//! configuration of an engine's dumps, one verdict per cell from the stage-by-stage budget
//! ([`check_dump`]) and the top-1 tokens, written as `conformance.json` and a page.

use super::budget::Precision;
use super::stages::{check_dump, StageReport};
use super::vectors::{Family, Manifest};
use crate::error::{Error, Result};
use crate::io::input_file::{read_capped, MAX_JSON_BYTES};
use crate::io::npy::Array;
use crate::model::Model;
use serde::Serialize;
use std::path::Path;

/// The `format` of `conformance.json`.
pub const FORMAT: &str = "ropescope-conformance";

/// The version of `conformance.json`'s format.
pub const FORMAT_VERSION: u32 = 1;

/// One cell's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Every stage equal to the float64 recomputation from the engine's own inputs.
    #[serde(rename = "exact")]
    Exact,
    /// Every stage within the budget of the engine's precision.
    #[serde(rename = "within budget")]
    WithinBudget,
    /// A stage beyond budget, but the same top-1 tokens as the float64 pass on every compared row.
    #[serde(rename = "degraded")]
    Degraded,
    /// A stage beyond budget and other top-1 tokens (or no logits to tell), or a dump that cannot be judged.
    #[serde(rename = "wrong")]
    Wrong,
    /// The engine did not run the family (no dump, or its `meta.json` says `refused`).
    #[serde(rename = "refused")]
    Refused,
}

impl Verdict {
    /// The verdict as `conformance.json` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Exact => "exact",
            Verdict::WithinBudget => "within budget",
            Verdict::Degraded => "degraded",
            Verdict::Wrong => "wrong",
            Verdict::Refused => "refused",
        }
    }
}

/// Where a cell first leaves its budget.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FirstStage {
    /// The layer.
    pub layer: usize,
    /// `q`, `k` or `attn`.
    pub stage: String,
    /// The head of the worst element there.
    pub head: usize,
}

/// One family against one engine configuration.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// The family (the vectors entry).
    pub family: String,
    /// The engine configuration (the dump's directory name; `default` for a dump directly under the family).
    pub config: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The precision whose budget judged it.
    pub precision: Option<Precision>,
    /// The largest ratio of deviation to budget over the stages.
    pub worst_ratio: Option<f64>,
    /// The first stage beyond budget.
    pub first: Option<FirstStage>,
    /// That stage's result in words, with the mistake that explains it; or why the cell is refused or cannot
    /// be judged.
    pub detail: String,
    /// Whether the dump's top-1 tokens equal the float64 pass's on every row both hold (`None` without logits).
    pub top1_agree: Option<bool>,
    /// Number of stages judged.
    pub stages: usize,
}

/// `conformance.json`.
#[derive(Clone, Debug, Serialize)]
pub struct ConformanceReport {
    /// [`FORMAT`].
    pub format: &'static str,
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The ropescope version that wrote it.
    pub producer: String,
    /// The engine as given (`dumps:DIR`).
    pub engine: String,
    /// Every cell, family by family, configurations in name order.
    pub cells: Vec<Cell>,
    /// Always true: written last.
    pub complete: bool,
}

/// The configurations of one family under an engine's dump root: `root/FAMILY` itself when it holds `ids.npy`,
/// else each of its subdirectories that does, in name order.
fn configs(family_dir: &Path) -> Result<Vec<(String, std::path::PathBuf)>> {
    if family_dir.join("ids.npy").is_file() {
        return Ok(vec![("default".into(), family_dir.to_path_buf())]);
    }
    let mut out: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(family_dir)
        .map_err(|e| Error::io(family_dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("ids.npy").is_file())
        .map(|p| {
            (
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                p,
            )
        })
        .collect();
    out.sort();
    Ok(out)
}

/// The dump's `meta.json` as JSON, if it has one.
fn dump_meta(dir: &Path) -> Result<Option<serde_json::Value>> {
    let path = dir.join("meta.json");
    if !path.exists() {
        return Ok(None);
    }
    let bytes = read_capped(&path, MAX_JSON_BYTES, "a dump's meta.json")?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::bad_data(&path, format!("not JSON ({e})")))
}

/// The precision a dump states in its `meta.json` (`dtype`: float32, bfloat16, float16), else `default`.
fn precision_of(meta: Option<&serde_json::Value>, default: Precision) -> Precision {
    match meta.and_then(|m| m["dtype"].as_str()) {
        Some("bfloat16") => Precision::Bf16,
        Some("float16") => Precision::F16,
        Some("float32") => Precision::F32,
        _ => default,
    }
}

/// Runs every family of `manifest` (in the vectors directory `vectors`) against the engine's dumps under `root`
/// (`root/FAMILY[/CONFIG]`, reference layout), each judged with the precision its `meta.json` states or
/// `default`.
pub fn run_dumps(
    vectors: &Path,
    manifest: &Manifest,
    root: &Path,
    default: Precision,
) -> Result<Vec<Cell>> {
    let mut cells = Vec::new();
    for family in &manifest.families {
        let dir = root.join(&family.name);
        let refused = |config: &str, detail: String| Cell {
            family: family.name.clone(),
            config: config.into(),
            verdict: Verdict::Refused,
            precision: None,
            worst_ratio: None,
            first: None,
            detail,
            top1_agree: None,
            stages: 0,
        };
        if !dir.is_dir() {
            cells.push(refused("-", "no dump: the engine did not run it".into()));
            continue;
        }
        let file = crate::gguf::GgufFile::open(vectors.join(&family.model_file))?;
        let model = Model::<f64>::load(&file)?;
        for (config, cdir) in configs(&dir)? {
            let meta = dump_meta(&cdir)?;
            if let Some(why) = meta.as_ref().and_then(|m| m["refused"].as_str()) {
                cells.push(refused(&config, format!("refused: {why}")));
                continue;
            }
            let precision = precision_of(meta.as_ref(), default);
            let top1 = top1_agreement(vectors, family, &cdir)?;
            let cell = match check_dump(&model, &family.ids, &cdir, precision) {
                Ok(report) => judged(family, &config, precision, &report, top1),
                Err(e) => Cell {
                    verdict: Verdict::Wrong,
                    precision: Some(precision),
                    detail: format!("cannot be judged: {e}"),
                    top1_agree: top1,
                    ..refused(&config, String::new())
                },
            };
            cells.push(cell);
        }
    }
    Ok(cells)
}

/// A judged cell's verdict from its stage report and top-1 agreement.
fn judged(
    family: &Family,
    config: &str,
    precision: Precision,
    report: &StageReport,
    top1: Option<bool>,
) -> Cell {
    let worst = (report.stages > 0).then(|| report.worst_ratio());
    let first = report.layers.iter().find_map(|l| {
        [
            ("q", l.q.as_ref().map(|c| (c.ratio, c.worst.0))),
            ("k", l.k.as_ref().map(|c| (c.ratio, c.worst.0))),
            ("attn", l.attention.as_ref().map(|c| (c.ratio, c.worst.0))),
        ]
        .into_iter()
        .find_map(|(stage, r)| match r {
            Some((ratio, head)) if ratio > 1.0 => Some(FirstStage {
                layer: l.layer,
                stage: stage.into(),
                head,
            }),
            _ => None,
        })
    });
    let verdict = match (report.stages, report.within, top1) {
        (0, _, _) => Verdict::Wrong,
        (_, true, _) if worst == Some(0.0) => Verdict::Exact,
        (_, true, _) => Verdict::WithinBudget,
        (_, false, Some(true)) => Verdict::Degraded,
        (_, false, _) => Verdict::Wrong,
    };
    let detail = match report.stages {
        0 => "cannot be judged: the dump holds no stage".to_string(),
        _ => report.verdict.clone(),
    };
    Cell {
        family: family.name.clone(),
        config: config.into(),
        verdict,
        precision: Some(precision),
        worst_ratio: worst,
        first,
        detail,
        top1_agree: top1,
        stages: report.stages,
    }
}

/// Whether the dump's logits (`logits.npy`, its rows from `meta.json`) have the float64 logits' top-1 token on
/// every row both hold; `None` when the dump has no logits or no row in common.
fn top1_agreement(vectors: &Path, family: &Family, dump: &Path) -> Result<Option<bool>> {
    let path = dump.join("logits.npy");
    if !path.exists() {
        return Ok(None);
    }
    let t = family.ids.len();
    let rows = crate::reference::diverge::dump_rows(dump, t)?;
    let theirs = Array::read(&path)?;
    let ours = Array::read(&vectors.join(&family.name).join("logits.npy"))?;
    let v = *ours.shape.last().unwrap_or(&0);
    if theirs.shape != [rows.len(), v] {
        return Err(Error::bad_data(
            &path,
            format!("shape {:?}, expected [{}, {v}]", theirs.shape, rows.len()),
        ));
    }
    let (a, b) = (theirs.to_f64(), ours.to_f64());
    let argmax = |row: &[f64]| {
        row.iter()
            .enumerate()
            .fold(
                (0, f64::NEG_INFINITY),
                |m, (i, &x)| if x > m.1 { (i, x) } else { m },
            )
            .0
    };
    let [oa, ob] = family.rows;
    let common = rows.start.max(oa)..rows.end.min(ob);
    if common.is_empty() {
        return Ok(None);
    }
    Ok(Some(common.into_iter().all(|r| {
        let x = &a[(r - rows.start) * v..][..v];
        let y = &b[(r - oa) * v..][..v];
        argmax(x) == argmax(y)
    })))
}

/// The matrix as one HTML page: families down, configurations across, each cell its verdict, worst ratio and
/// first stage beyond budget with its mistake.
pub fn html(report: &ConformanceReport) -> String {
    let esc = crate::report::svg::escape;
    let mut configs: Vec<&str> = report.cells.iter().map(|c| c.config.as_str()).collect();
    configs.sort_unstable();
    configs.dedup();
    let mut families: Vec<&str> = report.cells.iter().map(|c| c.family.as_str()).collect();
    families.dedup();
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>ropescope conformance: {}</title>\
         <style>{}\ntd.c{{font-size:12px;vertical-align:top;max-width:320px}}td.exact,td.within{{background:#e3f4e3}}\
         td.degraded{{background:#fff3cd}}td.wrong{{background:#f8d7da}}td.refused{{background:#e9ecef}}</style></head>\
         <body>\n<h1>ropescope conformance: {}</h1>\n<p>Each RoPE and attention stage of the engine's dump judged \
         from the engine's own inputs against the rounding budget of its precision \
         (<code>theory/conformance-budget.md</code>): <b>exact</b>, <b>within budget</b>, <b>degraded</b> (beyond \
         budget, the same top-1 tokens as the float64 pass), <b>wrong</b> (beyond budget; the first stage and the \
         kind of mistake are named), <b>refused</b> (not run). The ratio is the largest deviation over its \
         budget.</p>\n<table>\n<tr><th>family</th>",
        esc(&report.engine),
        crate::report::html::STYLE,
        esc(&report.engine)
    );
    for c in &configs {
        out.push_str(&format!("<th>{}</th>", esc(c)));
    }
    out.push_str("</tr>\n");
    for f in &families {
        out.push_str(&format!("<tr><td>{}</td>", esc(f)));
        for c in &configs {
            match report
                .cells
                .iter()
                .find(|x| x.family == *f && x.config == *c)
            {
                None => out.push_str("<td></td>"),
                Some(cell) => {
                    let class = match cell.verdict {
                        Verdict::WithinBudget => "within",
                        other => other.name(),
                    };
                    let ratio = cell
                        .worst_ratio
                        .map_or(String::new(), |r| format!(" ({r:.2})"));
                    let detail = match cell.verdict {
                        Verdict::Exact | Verdict::WithinBudget => String::new(),
                        _ => format!("<br/>{}", esc(&cell.detail)),
                    };
                    out.push_str(&format!(
                        "<td class=\"c {class}\"><b>{}</b>{ratio}{detail}</td>",
                        cell.verdict.name()
                    ));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n</body></html>\n");
    out
}
