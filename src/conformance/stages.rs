//! Every stage of a dump judged on its own (`ropescope conformance check`): for each layer of another engine's
//! dump in the reference layout, its RoPE stage (`q` from `q_pre`, `k` from `k_pre`) and its attention stage
//! (`attn` from `q` and `k`), each against its budget, with the mistake that explains a stage beyond it.

use super::attention::{self, AttentionCheck, AttentionInputs, AttentionMistake};
use super::budget::Precision;
use super::rotation::{self, ChunkRate, RotationCheck, RotationLayout, RotationMistake, Vectors};
use crate::error::{Error, Result};
use crate::io::npy::Array;
use crate::model::Model;
use crate::reference::diverge::{check_dump_ids, dump_rows, read_listing};
use crate::rope::{Pairing, RopeSpec};
use serde::Serialize;
use std::fmt;
use std::path::Path;

/// One layer's stages, each present when the dump holds its files.
#[derive(Clone, Debug, Serialize)]
pub struct LayerStages {
    /// The layer.
    pub layer: usize,
    /// The queries' RoPE stage (`q_pre_L{l}.npy` → `q_L{l}.npy`).
    pub q: Option<RotationCheck>,
    /// The keys' RoPE stage (`k_pre_L{l}.npy` → `k_L{l}.npy`).
    pub k: Option<RotationCheck>,
    /// The attention stage (`q_L{l}.npy`, `k_L{l}.npy` → `attn_L{l}.npy`).
    pub attention: Option<AttentionCheck>,
}

/// What `ropescope conformance check` reports (and writes with `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct StageReport {
    /// The engine's working precision the budgets are for.
    pub precision: Precision,
    /// Number of tokens.
    pub n_tokens: usize,
    /// Query rows of the dump's attention, `[A, B]`.
    pub rows: [usize; 2],
    /// Every layer with a stage to judge, ascending.
    pub layers: Vec<LayerStages>,
    /// Number of stages judged.
    pub stages: usize,
    /// Whether every stage is within its budget.
    pub within: bool,
    /// One line: `within budget: ...` or the first stage beyond it and its mistake.
    pub verdict: String,
}

impl fmt::Display for RotationMistake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RotationMistake::Magnitude { ratio } => {
                write!(f, "magnitude: every rotated pair scaled by {ratio:.6} (a cos/sin factor applied wrongly)")
            }
            RotationMistake::PositionOffset { offset } => write!(
                f,
                "position offset: position p rotated as p {} {} (cancels in q·k)",
                if *offset < 0 { "−" } else { "+" },
                offset.unsigned_abs()
            ),
            RotationMistake::Pairing { engine, expected } => {
                write!(
                    f,
                    "pairing: pairs rotated {engine} where the model's are {expected}"
                )
            }
            RotationMistake::WholeHead { rot_dim, head_dim } => write!(
                f,
                "partial rotation ignored: all {head_dim} coordinates rotated at the rates of the base over \
                 {head_dim}, where the model rotates {rot_dim}"
            ),
            RotationMistake::Layout { permutation } => {
                write!(
                    f,
                    "layout: the right rotation stored permuted ({permutation})"
                )
            }
            RotationMistake::Frequency {
                chunks,
                magnitude,
                engine_base: Some(base),
                expected_base,
            } if chunks.len() > 3 => {
                let (first, last) = (chunks[0].chunk, chunks[chunks.len() - 1].chunk);
                write!(
                    f,
                    "frequency: chunks {first}–{last} turn at the rates of base {base:.6e}, not the model's \
                     {expected_base:.6e}"
                )?;
                if *magnitude != 1.0 {
                    write!(f, ", and every pair scaled by {magnitude:.6}")?;
                }
                Ok(())
            }
            RotationMistake::Frequency {
                chunks, magnitude, ..
            } => {
                write!(
                    f,
                    "frequency: chunks {} turn at another rate",
                    chunk_runs(chunks)
                )?;
                if *magnitude != 1.0 {
                    write!(f, ", and every pair scaled by {magnitude:.6}")?;
                }
                Ok(())
            }
        }
    }
}

/// `3 ×1.4255, 6–31 ×8.0000`: the chunks with the engine's rate over the expected one (to 4 decimals, 6 within
/// 10⁻³ of 1), consecutive chunks whose ratios print alike written as one run.
fn chunk_runs(chunks: &[ChunkRate]) -> String {
    let mut runs: Vec<(usize, usize, String)> = Vec::new();
    for c in chunks {
        let r = c.engine / c.expected;
        let ratio = match (r - 1.0).abs() < 1e-3 {
            true => format!("{r:.6}"),
            false => format!("{r:.4}"),
        };
        match runs.last_mut() {
            Some((_, last, r)) if *last + 1 == c.chunk && *r == ratio => *last = c.chunk,
            _ => runs.push((c.chunk, c.chunk, ratio)),
        }
    }
    runs.iter()
        .map(|(a, b, r)| match a == b {
            true => format!("{a} ×{r}"),
            false => format!("{a}–{b} ×{r}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for AttentionMistake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttentionMistake::Mask { extra, missing } => write!(
                f,
                "mask: {extra} masked keys given weight, {missing} visible keys given none"
            ),
            AttentionMistake::Scale { factor } => {
                write!(
                    f,
                    "scale: scores multiplied by {factor:.6} times the model's scale"
                )
            }
        }
    }
}

/// One stage's outcome in words: `within budget (0.31)`, or its ratio and mistake.
fn describe(ratio: f64, mistake: Option<String>) -> String {
    match (ratio <= 1.0, mistake) {
        (true, _) => format!("within budget ({ratio:.2})"),
        (false, Some(m)) => format!("{ratio:.3e} × budget: {m}"),
        (false, None) => format!("{ratio:.3e} × budget: no single kind of mistake explains it"),
    }
}

impl StageReport {
    /// The largest ratio of deviation to budget over every stage (0 without stages).
    pub fn worst_ratio(&self) -> f64 {
        self.layers
            .iter()
            .flat_map(|l| {
                [
                    l.q.as_ref().map(|c| c.ratio),
                    l.k.as_ref().map(|c| c.ratio),
                    l.attention.as_ref().map(|c| c.ratio),
                ]
            })
            .flatten()
            .fold(0.0, f64::max)
    }
}

impl LayerStages {
    /// `(stage name, description, within)` of each stage present, in computation order.
    pub fn lines(&self) -> Vec<(&'static str, String, bool)> {
        let rot = |c: &RotationCheck| describe(c.ratio, c.mistake.as_ref().map(|m| m.to_string()));
        let mut out = Vec::new();
        if let Some(c) = &self.q {
            out.push(("q", rot(c), c.within()));
        }
        if let Some(c) = &self.k {
            out.push(("k", rot(c), c.within()));
        }
        if let Some(c) = &self.attention {
            let text = describe(c.ratio, c.mistake.as_ref().map(|m| m.to_string()));
            out.push(("attn", text, c.within()));
        }
        out
    }
}

/// `[heads, t, hd]` vectors over `data`.
fn vectors(data: &[f64], heads: usize, t: usize, hd: usize) -> Vectors<'_> {
    Vectors {
        data,
        heads,
        positions: t,
        head_dim: hd,
    }
}

/// Reads `dir/name` if it exists, as f64 values with their shape.
fn read_if(dir: &Path, name: &str) -> Result<Option<(Vec<usize>, Vec<f64>)>> {
    let path = dir.join(name);
    if !path.exists() {
        return Ok(None);
    }
    let a = Array::read(&path)?;
    Ok(Some((a.shape.clone(), a.to_f64())))
}

/// Checks that `shape` is `want`, naming the file otherwise.
fn expect_shape(dir: &Path, name: &str, shape: &[usize], want: &[usize]) -> Result<()> {
    if shape != want {
        return Err(Error::bad_data(
            dir.join(name),
            format!("shape {shape:?}, expected {want:?} for this model and prompt"),
        ));
    }
    Ok(())
}

/// Judges every stage of the dump directory `dir` (the reference layout) of a pass of `model` over `ids` by an
/// engine working in `precision`; a dump without any stage gives a report of none (`stages` 0). Errors: `dir`
/// unreadable, a file that is not a readable `.npy`, a layer the model does not have, `ids.npy` holding other
/// ids, a shape that does not fit the model and prompt.
pub fn check_dump(
    model: &Model<f64>,
    ids: &[u32],
    dir: &Path,
    precision: Precision,
) -> Result<StageReport> {
    let c = &model.config;
    let listing = read_listing(dir, c.n_layers)?;
    check_dump_ids(dir, &listing, ids)?;
    let t = ids.len();
    let rows = dump_rows(dir, t)?;
    let mut layers = Vec::new();
    let mut candidate: Vec<usize> = listing.tensors.keys().map(|(l, _)| *l).collect();
    candidate.dedup();
    for l in candidate {
        let lc = &c.layers[l];
        let (hd, kvh) = (lc.head_dim(), lc.n_kv_heads);
        // The reference layout stores every head half-split, its rotated part first (`reference::write`).
        let layout = RotationLayout {
            spec: RopeSpec {
                pairing: Pairing::HalfSplit,
                ..lc.rope.spec(t)
            },
            first: 0,
        };
        let read = |kind: &str, heads: usize| -> Result<Option<Vec<f64>>> {
            let name = format!("{kind}_L{l}.npy");
            match read_if(dir, &name)? {
                Some((shape, data)) => {
                    expect_shape(dir, &name, &shape, &[heads, t, hd])?;
                    Ok(Some(data))
                }
                None => Ok(None),
            }
        };
        let (q_pre, q) = (read("q_pre", c.n_heads)?, read("q", c.n_heads)?);
        let (k_pre, k) = (read("k_pre", kvh)?, read("k", kvh)?);
        let rot = |pre: &Option<Vec<f64>>, post: &Option<Vec<f64>>, heads| match (pre, post) {
            (Some(pre), Some(post)) => Some(rotation::check(
                vectors(pre, heads, t, hd),
                vectors(post, heads, t, hd),
                &layout,
                precision,
            )),
            _ => None,
        };
        let (q_check, k_check) = (rot(&q_pre, &q, c.n_heads), rot(&k_pre, &k, kvh));
        let attn_name = format!("attn_L{l}.npy");
        let attention = match (&q, &k, read_if(dir, &attn_name)?) {
            (Some(q), Some(k), Some((shape, probs))) => {
                expect_shape(dir, &attn_name, &shape, &[c.n_heads, rows.len(), t])?;
                let inputs = AttentionInputs {
                    q: vectors(q, c.n_heads, t, hd),
                    k: vectors(k, kvh, t, hd),
                    probs: &probs,
                    rows: rows.clone(),
                };
                let heads = model.head_infos(l, t);
                Some(attention::check(&inputs, &heads, c.attn_softcap, precision))
            }
            _ => None,
        };
        if q_check.is_some() || k_check.is_some() || attention.is_some() {
            layers.push(LayerStages {
                layer: l,
                q: q_check,
                k: k_check,
                attention,
            });
        }
    }
    let stages: usize = layers.iter().map(|l| l.lines().len()).sum();
    let first = layers.iter().find_map(|l| {
        l.lines()
            .into_iter()
            .find(|(_, _, within)| !within)
            .map(|(stage, text, _)| format!("layer {} {stage}: {text}", l.layer))
    });
    let within = first.is_none();
    let verdict = match first {
        None if stages == 0 => "no stage to judge".to_string(),
        None => format!(
            "within budget: {stages} stages of {} layers ({precision})",
            layers.len()
        ),
        Some(first) => format!("beyond budget ({precision}), first at {first}"),
    };
    Ok(StageReport {
        precision,
        n_tokens: t,
        rows: [rows.start, rows.end],
        layers,
        stages,
        within,
        verdict,
    })
}
