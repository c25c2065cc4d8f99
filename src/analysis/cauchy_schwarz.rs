//! Cauchy–Schwarz alignment tables (Round and Round We Go, Appendix E.1, Tables 3–5).
//!
//! The activation of query `i` and key `j` is bounded by Cauchy–Schwarz:
//! `scale · q_iᵀ k_j ≤ scale · ‖q_i‖ ‖k_j‖` (RoPE rotations keep norms, so the bound is the same before and
//! after RoPE). The paper sets `scale = 1/√d`; we use the model's own logit scale (`1/√d` for most
//! architectures). For a diagonal head the activations `(i, i)` should be close to the bound (queries and keys
//! aligned, Theorem 5.3's construction); for a previous-token head the activations `(i, i−1)`.
//!
//! The paper's tables list, for the first eight tokens of one sequence (BOS, 1..7), the upper bound and the
//! diagonal and previous-token activations; they print a single bound row per token, and we give the bound
//! of each pair (`‖q_i‖‖k_i‖` and `‖q_i‖‖k_{i−1}‖`). [`HeadTable::table`] is that table for the first prompt.
//! Beyond the paper, every target head also gets summaries over all prompts: for the diagonal pairs, the
//! previous-token pairs and a non-targeted baseline (every visible pair `j ≤ i − 2`), the mean activation,
//! the mean bound and the mean ratio activation/bound (`cos ∠(q_i, k_j)` after RoPE), plus the same cosine
//! before RoPE, which tells whether the alignment is built into the vectors or made by the rotation.
//! Summaries skip positions below `summary_start` (BOS, whose vectors are outliers), as queries and as keys.

use crate::analysis::detectors::Pattern;
use crate::capture::{Capture, HeadCapture, HeadInfo, HeadRows, HeadVectors, LayerPlan};
use crate::error::{Error, Result};
use crate::model::{ForwardOptions, Model};
use crate::numeric::Real;
use serde::Serialize;

/// Default number of leading positions in the per-token table (the paper's BOS and tokens 1–7).
pub const DEFAULT_TABLE_POSITIONS: usize = 8;
/// Default first position of the summaries: 1, leaving BOS out.
pub const DEFAULT_SUMMARY_START: usize = 1;

/// Which pairs a head is expected to align.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadKind {
    /// Pairs `(i, i)`.
    Diagonal,
    /// Pairs `(i, i−1)`.
    PreviousToken,
}

impl TryFrom<Pattern> for HeadKind {
    type Error = Pattern;
    /// The kind of a detector label, for the two patterns this analysis tables.
    fn try_from(p: Pattern) -> std::result::Result<Self, Pattern> {
        match p {
            Pattern::Diagonal => Ok(HeadKind::Diagonal),
            Pattern::PreviousToken => Ok(HeadKind::PreviousToken),
            other => Err(other),
        }
    }
}

/// A head to table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TargetHead {
    /// Layer.
    pub layer: usize,
    /// Query head.
    pub head: usize,
    /// What it is expected to align.
    pub kind: HeadKind,
}

/// Parameters of the tables.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CauchySchwarzParams {
    /// Heads to table (the detectors' diagonal and previous-token heads).
    pub heads: Vec<TargetHead>,
    /// Leading positions of the first prompt in each per-token table ([`DEFAULT_TABLE_POSITIONS`]).
    pub table_positions: usize,
    /// Positions below this are left out of the summaries ([`DEFAULT_SUMMARY_START`]).
    pub summary_start: usize,
}

impl Default for CauchySchwarzParams {
    fn default() -> Self {
        Self {
            heads: Vec::new(),
            table_positions: DEFAULT_TABLE_POSITIONS,
            summary_start: DEFAULT_SUMMARY_START,
        }
    }
}

/// One token's column of the table.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TableColumn {
    /// Position `i`.
    pub position: usize,
    /// Token id at `i`.
    pub token: u32,
    /// `scale · ‖q_i‖ ‖k_i‖`.
    pub diagonal_bound: f64,
    /// `scale · q_i · k_i` after RoPE.
    pub diagonal: f64,
    /// `scale · ‖q_i‖ ‖k_{i−1}‖` (`None` at 0).
    pub previous_bound: Option<f64>,
    /// `scale · q_i · k_{i−1}` after RoPE (`None` at 0).
    pub previous: Option<f64>,
}

/// Means over a set of pairs `(i, j)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PairStats {
    /// Number of pairs.
    pub n_pairs: u64,
    /// Mean `scale · q_i · k_j` after RoPE.
    pub mean_activation: f64,
    /// Mean `scale · ‖q_i‖ ‖k_j‖`.
    pub mean_bound: f64,
    /// Mean `q_i · k_j / (‖q_i‖ ‖k_j‖)` after RoPE (pairs with a zero vector skipped).
    pub mean_ratio: f64,
    /// Mean of the same cosine before RoPE.
    pub mean_pre_rope_ratio: f64,
}

/// The tables of one head.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeadTable {
    /// The head.
    pub target: TargetHead,
    /// Per-token table of the first prompt.
    pub table: Vec<TableColumn>,
    /// Pairs `(i, i)`.
    pub diagonal: PairStats,
    /// Pairs `(i, i−1)`.
    pub previous: PairStats,
    /// Visible pairs `(i, j)` with `j ≤ i − 2`.
    pub baseline: PairStats,
}

/// Result: one entry per target head, in parameter order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CauchySchwarzReport {
    /// Tables per head.
    pub heads: Vec<HeadTable>,
}

/// Forward passes [`run`] does: one per prompt, none without target heads.
pub fn passes(n_prompts: usize, params: &CauchySchwarzParams) -> u64 {
    if params.heads.is_empty() {
        0
    } else {
        n_prompts as u64
    }
}

/// Builds the tables of `params.heads` over `prompts`.
pub fn run<T: Real>(
    model: &Model<T>,
    prompts: &[Vec<u32>],
    params: &CauchySchwarzParams,
    progress: &dyn Fn(u64),
) -> Result<CauchySchwarzReport> {
    let c = &model.config;
    if let Some(t) = params
        .heads
        .iter()
        .find(|t| t.layer >= c.n_layers || t.head >= c.n_heads)
    {
        return Err(Error::Argument(format!(
            "head {}:{} is not in a model of {} layers and {} heads",
            t.layer, t.head, c.n_layers, c.n_heads
        )));
    }
    let mut sums = vec![Sums::default(); params.heads.len()];
    let mut tables = vec![Vec::new(); params.heads.len()];
    if !params.heads.is_empty() {
        for (n, ids) in prompts.iter().enumerate() {
            let mut cap = AlignmentCapture {
                ids,
                targets: &params.heads,
                table_positions: if n == 0 { params.table_positions } else { 0 },
                summary_start: params.summary_start,
                done: Vec::new(),
            };
            model.forward(ids, &ForwardOptions::default(), &mut cap)?;
            for (index, head) in cap.done {
                sums[index].merge(&head.sums);
                if n == 0 {
                    tables[index] = head.table;
                }
            }
            progress(n as u64 + 1);
        }
    }
    Ok(CauchySchwarzReport {
        heads: params
            .heads
            .iter()
            .zip(sums.iter().zip(tables))
            .map(|(&target, (s, table))| HeadTable {
                target,
                table,
                diagonal: s.diagonal.stats(),
                previous: s.previous.stats(),
                baseline: s.baseline.stats(),
            })
            .collect(),
    })
}

/// Running sums over a set of pairs.
#[derive(Clone, Copy, Debug, Default)]
struct PairSums {
    n: u64,
    activation: f64,
    bound: f64,
    ratio: f64,
    n_ratio: u64,
    pre_ratio: f64,
    n_pre_ratio: u64,
}

impl PairSums {
    fn add(&mut self, p: &Pair) {
        self.n += 1;
        self.activation += p.activation;
        self.bound += p.bound;
        if p.bound > 0.0 {
            self.ratio += p.activation / p.bound;
            self.n_ratio += 1;
        }
        if let Some(r) = p.pre_ratio {
            self.pre_ratio += r;
            self.n_pre_ratio += 1;
        }
    }

    fn merge(&mut self, o: &PairSums) {
        self.n += o.n;
        self.activation += o.activation;
        self.bound += o.bound;
        self.ratio += o.ratio;
        self.n_ratio += o.n_ratio;
        self.pre_ratio += o.pre_ratio;
        self.n_pre_ratio += o.n_pre_ratio;
    }

    fn stats(&self) -> PairStats {
        let mean = |s: f64, n: u64| if n == 0 { f64::NAN } else { s / n as f64 };
        PairStats {
            n_pairs: self.n,
            mean_activation: mean(self.activation, self.n),
            mean_bound: mean(self.bound, self.n),
            mean_ratio: mean(self.ratio, self.n_ratio),
            mean_pre_rope_ratio: mean(self.pre_ratio, self.n_pre_ratio),
        }
    }
}

/// Sums of the three pair sets of one head.
#[derive(Clone, Copy, Debug, Default)]
struct Sums {
    diagonal: PairSums,
    previous: PairSums,
    baseline: PairSums,
}

impl Sums {
    fn merge(&mut self, o: &Sums) {
        self.diagonal.merge(&o.diagonal);
        self.previous.merge(&o.previous);
        self.baseline.merge(&o.baseline);
    }
}

/// Activation, bound and pre-RoPE cosine of one pair.
struct Pair {
    activation: f64,
    bound: f64,
    pre_ratio: Option<f64>,
}

/// One head's vectors, widened to f64, with their norms.
struct Vectors<'a, T> {
    v: &'a HeadVectors<'a, T>,
    scale: f64,
    q_norm: Vec<f64>,
    k_norm: Vec<f64>,
    q_pre_norm: Vec<f64>,
    k_pre_norm: Vec<f64>,
}

fn dot<T: Real>(a: &[T], b: &[T]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.to_f64_exact() * y.to_f64_exact())
        .sum()
}

fn norms<T: Real>(rows: &HeadRows<'_, T>) -> Vec<f64> {
    (0..rows.len())
        .map(|i| dot(rows.row(i), rows.row(i)).sqrt())
        .collect()
}

impl<'a, T: Real> Vectors<'a, T> {
    fn new(v: &'a HeadVectors<'a, T>, scale: f64) -> Self {
        Self {
            v,
            scale,
            q_norm: norms(&v.q),
            k_norm: norms(&v.k),
            q_pre_norm: norms(&v.q_pre),
            k_pre_norm: norms(&v.k_pre),
        }
    }

    fn pair(&self, i: usize, j: usize) -> Pair {
        let pre_bound = self.q_pre_norm[i] * self.k_pre_norm[j];
        Pair {
            activation: self.scale * dot(self.v.q.row(i), self.v.k.row(j)),
            bound: self.scale * self.q_norm[i] * self.k_norm[j],
            pre_ratio: (pre_bound > 0.0)
                .then(|| dot(self.v.q_pre.row(i), self.v.k_pre.row(j)) / pre_bound),
        }
    }
}

/// Tables the target heads of one prompt.
struct AlignmentCapture<'a> {
    ids: &'a [u32],
    targets: &'a [TargetHead],
    table_positions: usize,
    summary_start: usize,
    /// Finished target heads: (index in `targets`, state).
    done: Vec<(usize, AlignmentHead)>,
}

/// Per-head state; `targets` (indices into the parameters' heads) is empty for heads that are not targets.
#[derive(Clone, Default)]
struct AlignmentHead {
    targets: Vec<usize>,
    ids: Vec<u32>,
    table_positions: usize,
    summary_start: usize,
    sums: Sums,
    table: Vec<TableColumn>,
}

impl<T: Real> HeadCapture<T> for AlignmentHead {
    fn vectors(&mut self, info: &HeadInfo, v: &HeadVectors<'_, T>) {
        if self.targets.is_empty() {
            return;
        }
        let x = Vectors::new(v, info.scale);
        let n = v.q.len();
        for i in 0..n.min(self.table_positions) {
            let diag = x.pair(i, i);
            let prev = (i > 0).then(|| x.pair(i, i - 1));
            self.table.push(TableColumn {
                position: i,
                token: self.ids[i],
                diagonal_bound: diag.bound,
                diagonal: diag.activation,
                previous_bound: prev.as_ref().map(|p| p.bound),
                previous: prev.as_ref().map(|p| p.activation),
            });
        }
        let start = self.summary_start;
        for i in start..n {
            self.sums.diagonal.add(&x.pair(i, i));
            if i > start && i > info.first_visible(i) {
                self.sums.previous.add(&x.pair(i, i - 1));
            }
            for j in start.max(info.first_visible(i))..i.saturating_sub(1) {
                self.sums.baseline.add(&x.pair(i, j));
            }
        }
    }
}

impl<T: Real> Capture<T> for AlignmentCapture<'_> {
    type Head = AlignmentHead;

    fn plan(&self, layer: usize) -> LayerPlan {
        LayerPlan {
            vectors: self.targets.iter().any(|t| t.layer == layer),
            ..LayerPlan::default()
        }
    }

    fn begin_head(&self, info: &HeadInfo) -> AlignmentHead {
        let targets: Vec<usize> = (0..self.targets.len())
            .filter(|&n| self.targets[n].layer == info.layer && self.targets[n].head == info.head)
            .collect();
        AlignmentHead {
            ids: if targets.is_empty() {
                Vec::new()
            } else {
                self.ids.to_vec()
            },
            targets,
            table_positions: self.table_positions,
            summary_start: self.summary_start,
            ..AlignmentHead::default()
        }
    }

    fn end_head(&mut self, _info: &HeadInfo, head: AlignmentHead) {
        for &index in &head.targets {
            self.done.push((index, head.clone()));
        }
    }
}
