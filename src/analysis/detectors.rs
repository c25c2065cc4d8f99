//! Head detectors with TransformerLens's definitions (`transformer_lens/head_detector.py`, `detect_head`).
//!
//! A detection pattern `D` is a lower-triangular 0/1 matrix over one sequence of `T` tokens. For a head's
//! causal attention `A`, TransformerLens defines two scores:
//!
//! - `"mul"`: `Σ(A∘D) / ΣA`, over all rows (row 0 included), the share of the head's attention on the
//!   pattern;
//! - `"abs"`: `1 − mean(|A − D|) · T = 1 − Σ_{i, j≤i} |A_ij − D_ij| / T`, from −1 (mismatch) to 1 (match).
//!   TransformerLens rounds `Σ|A − D| / T` to three decimals; we do not.
//!
//! With `exclude_bos`, column 0 is dropped from both (`A[:, 0] = 0` for "mul", `|A − D|[:, 0] = 0` for
//! "abs"); with `exclude_current_token`, the diagonal likewise. Over several sequences the score is the mean
//! of the per-sequence scores (`torch.stack(batch_scores).mean(0)`). The patterns are TransformerLens's:
//! previous-token `D[i, i−1] = 1`; duplicate-token `D[i, j] = 1` for `j < i` with `x_j = x_i`; induction
//! `D[i, j] = 1` for `1 ≤ j ≤ i` with `x_{j−1} = x_i`, `j − 1 < i` (the duplicate pattern shifted one column
//! right); and two of ours in the same form: diagonal `D[i, i] = 1` and BOS/sink `D[i, 0] = 1`.
//!
//! Scores are computed on two sets of sequences: the caller's prompts (text) and `n_random` repeated random
//! sequences (`[BOS] r r`, `r` uniform over the vocabulary without BOS, `L` tokens). Each block of attention
//! rows is reduced as it arrives: `ΣA` and, per pattern, `Σ(A∘D)` and `Σ_{D=1}(|A − 1| − A)` (so that
//! `Σ|A − D| = ΣA + Σ_{D=1}(|A − 1| − A)`); no `T × T` matrix is kept. On a repeated sequence only the rows
//! of the second copy carry induction or duplicate targets, so those "mul" scores are at most
//! `L / (2L + 1)` with BOS: the default thresholds account for that.

mod patterns;

use crate::capture::{AttentionBlock, Capture, HeadCapture, HeadInfo, LayerPlan};
use crate::error::{Error, Result};
use crate::model::{ForwardOptions, Model};
use crate::numeric::Real;
use patterns::SequenceIndex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::sync::Arc;

pub use patterns::{Pattern, PATTERNS};

/// Default number of repeated random sequences (ARENA's induction exercise uses a batch of ten of length 50).
pub const DEFAULT_RANDOM_SEQUENCES: usize = 10;
/// Default length `L` of each random half.
pub const DEFAULT_RANDOM_LENGTH: usize = 50;
/// Default seed of the random sequences.
pub const DEFAULT_RANDOM_SEED: u64 = 0;

/// "mul" score from which a head is labelled with a pattern.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DetectorThresholds {
    /// Previous-token (on text): half of all attention on `i − 1`.
    pub previous_token: f64,
    /// Duplicate-token (on repeated sequences, ceiling ≈ 0.5): 0.25.
    pub duplicate_token: f64,
    /// Induction (on repeated sequences, ceiling ≈ 0.5): 0.25.
    pub induction: f64,
    /// Diagonal (on text): half of all attention on the current token.
    pub diagonal: f64,
    /// BOS/sink (on text): half of all attention on position 0.
    pub sink: f64,
}

impl Default for DetectorThresholds {
    fn default() -> Self {
        Self {
            previous_token: 0.5,
            duplicate_token: 0.25,
            induction: 0.25,
            diagonal: 0.5,
            sink: 0.5,
        }
    }
}

impl DetectorThresholds {
    /// The threshold of `pattern`.
    pub fn of(&self, pattern: Pattern) -> f64 {
        match pattern {
            Pattern::PreviousToken => self.previous_token,
            Pattern::DuplicateToken => self.duplicate_token,
            Pattern::Induction => self.induction,
            Pattern::Diagonal => self.diagonal,
            Pattern::Sink => self.sink,
        }
    }
}

/// Parameters of the detectors.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DetectorParams {
    /// Token put at position 0 of every random sequence and never drawn inside it (the model's BOS);
    /// `None` for models without one.
    pub bos_token: Option<u32>,
    /// Number of repeated random sequences.
    pub n_random: usize,
    /// Length `L` of the random half; each sequence has `2L` tokens (plus BOS).
    pub random_length: usize,
    /// Seed of the random sequences (ChaCha8).
    pub seed: u64,
    /// TransformerLens's `exclude_bos`: leave column 0 out of both scores.
    pub exclude_bos: bool,
    /// TransformerLens's `exclude_current_token`: leave the diagonal out of both scores.
    pub exclude_current_token: bool,
    /// Labelling thresholds on the "mul" scores.
    pub thresholds: DetectorThresholds,
}

impl Default for DetectorParams {
    fn default() -> Self {
        Self {
            bos_token: None,
            n_random: DEFAULT_RANDOM_SEQUENCES,
            random_length: DEFAULT_RANDOM_LENGTH,
            seed: DEFAULT_RANDOM_SEED,
            exclude_bos: false,
            exclude_current_token: false,
            thresholds: DetectorThresholds::default(),
        }
    }
}

/// Both scores of one pattern for every head, `[layer][head]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PatternScores {
    /// The pattern.
    pub pattern: Pattern,
    /// "mul" score, mean over sequences (sequences with `ΣA = 0` after exclusions are skipped; NaN, written
    /// as null, when all are).
    pub mul: Vec<Vec<f64>>,
    /// "abs" score, mean over sequences (NaN, written as null, on an empty set).
    pub abs: Vec<Vec<f64>>,
}

/// Scores of every pattern on one set of sequences.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SetScores {
    /// Number of sequences.
    pub n_sequences: usize,
    /// One entry per pattern, in [`PATTERNS`] order.
    pub patterns: Vec<PatternScores>,
}

impl SetScores {
    /// The scores of `pattern`.
    pub fn get(&self, pattern: Pattern) -> &PatternScores {
        &self.patterns[pattern as usize]
    }
}

/// A head whose "mul" score reaches its pattern's threshold.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Label {
    /// Layer.
    pub layer: usize,
    /// Query head.
    pub head: usize,
    /// The pattern it matches.
    pub kind: Pattern,
    /// Its "mul" score.
    pub score: f64,
}

/// Result of the detectors.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DetectorReport {
    /// Scores on the caller's prompts.
    pub text: SetScores,
    /// Scores on the repeated random sequences.
    pub repeated: SetScores,
    /// Labelled heads: previous-token, diagonal and sink from the text scores, duplicate-token and induction
    /// from the repeated sequences; ordered by pattern, then layer and head.
    pub labels: Vec<Label>,
}

/// Forward passes [`run`] does: one per prompt and one per random sequence.
pub fn passes(n_prompts: usize, params: &DetectorParams) -> u64 {
    (n_prompts + params.n_random) as u64
}

/// The repeated random sequences `[BOS] r r` of `params` for a vocabulary of `vocab` tokens: each `r` has
/// `random_length` tokens drawn uniformly from the vocabulary without BOS (ChaCha8 seeded with `seed`).
pub fn random_sequences(vocab: usize, params: &DetectorParams) -> Result<Vec<Vec<u32>>> {
    let bos = params.bos_token;
    if bos.is_some_and(|b| b as usize >= vocab) {
        return Err(Error::Argument(format!(
            "BOS token {bos:?} is outside the vocabulary of {vocab} tokens"
        )));
    }
    let drawable = vocab - usize::from(bos.is_some());
    if drawable == 0 || params.random_length == 0 {
        return Err(Error::Argument(
            "repeated random sequences need a non-empty half and a token other than BOS".into(),
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let mut draw = || {
        let t = rng.random_range(0..drawable as u32);
        match bos {
            Some(b) if t >= b => t + 1,
            _ => t,
        }
    };
    Ok((0..params.n_random)
        .map(|_| {
            let half: Vec<u32> = (0..params.random_length).map(|_| draw()).collect();
            bos.into_iter()
                .chain(half.iter().copied())
                .chain(half.iter().copied())
                .collect()
        })
        .collect())
}

/// Runs the detectors on `prompts` (text) and on the repeated random sequences of `params`.
pub fn run<T: Real>(
    model: &Model<T>,
    prompts: &[Vec<u32>],
    params: &DetectorParams,
    progress: &dyn Fn(u64),
) -> Result<DetectorReport> {
    if prompts.is_empty() {
        return Err(Error::Argument(
            "the detectors need at least one prompt".into(),
        ));
    }
    let random = if params.n_random == 0 {
        Vec::new()
    } else {
        random_sequences(model.config.vocab_size, params)?
    };
    if let Some(short) = prompts.iter().chain(&random).find(|s| s.len() < 2) {
        return Err(Error::Argument(format!(
            "the detectors need sequences of at least 2 tokens, got {}",
            short.len()
        )));
    }
    let mut done = 0u64;
    let mut score_set = |seqs: &[Vec<u32>]| -> Result<SetScores> {
        let c = &model.config;
        let mut mean = SetMean::new(c.n_layers * c.n_heads);
        for ids in seqs {
            let mut cap = DetectorCapture::new(ids, c.n_layers, c.n_heads, params);
            model.forward(ids, &ForwardOptions::default(), &mut cap)?;
            mean.add(&cap.heads, ids.len());
            done += 1;
            progress(done);
        }
        Ok(mean.finish(seqs.len(), c.n_layers, c.n_heads))
    };
    let text = score_set(prompts)?;
    let repeated = score_set(&random)?;
    let labels = labels(&text, &repeated, &params.thresholds);
    Ok(DetectorReport {
        text,
        repeated,
        labels,
    })
}

fn labels(text: &SetScores, repeated: &SetScores, th: &DetectorThresholds) -> Vec<Label> {
    let mut out = Vec::new();
    for pattern in PATTERNS {
        let set = match pattern {
            Pattern::DuplicateToken | Pattern::Induction => repeated,
            _ => text,
        };
        for (layer, row) in set.get(pattern).mul.iter().enumerate() {
            for (head, &score) in row.iter().enumerate() {
                if score >= th.of(pattern) {
                    out.push(Label {
                        layer,
                        head,
                        kind: pattern,
                        score,
                    });
                }
            }
        }
    }
    out
}

/// One head's sums over one sequence: `ΣA`, and per pattern `Σ(A∘D)` and `Σ_{D=1}(|A − 1| − A)`.
#[derive(Clone, Debug, Default)]
struct HeadSums {
    total: f64,
    hit: [f64; PATTERNS.len()],
    miss: [f64; PATTERNS.len()],
}

/// Running means of per-sequence scores.
struct SetMean {
    mul: Vec<[(f64, usize); PATTERNS.len()]>,
    abs: Vec<[f64; PATTERNS.len()]>,
}

impl SetMean {
    fn new(n: usize) -> Self {
        Self {
            mul: vec![[(0.0, 0); PATTERNS.len()]; n],
            abs: vec![[0.0; PATTERNS.len()]; n],
        }
    }

    fn add(&mut self, heads: &[HeadSums], t: usize) {
        for ((mul, abs), s) in self.mul.iter_mut().zip(&mut self.abs).zip(heads) {
            for p in 0..PATTERNS.len() {
                if s.total > 0.0 {
                    mul[p].0 += s.hit[p] / s.total;
                    mul[p].1 += 1;
                }
                abs[p] += 1.0 - (s.total + s.miss[p]) / t as f64;
            }
        }
    }

    fn finish(&self, n_seq: usize, n_layers: usize, n_heads: usize) -> SetScores {
        let grid = |f: &dyn Fn(usize) -> f64| -> Vec<Vec<f64>> {
            (0..n_layers)
                .map(|l| (0..n_heads).map(|h| f(l * n_heads + h)).collect())
                .collect()
        };
        let patterns = PATTERNS
            .iter()
            .enumerate()
            .map(|(p, &pattern)| PatternScores {
                pattern,
                mul: grid(&|i| {
                    let (sum, n) = self.mul[i][p];
                    if n == 0 {
                        f64::NAN
                    } else {
                        sum / n as f64
                    }
                }),
                abs: grid(&|i| self.abs[i][p] / n_seq as f64),
            })
            .collect();
        SetScores {
            n_sequences: n_seq,
            patterns,
        }
    }
}

/// Streams one sequence's attention into per-head [`HeadSums`].
struct DetectorCapture {
    index: Arc<SequenceIndex>,
    n_heads: usize,
    exclude_bos: bool,
    exclude_current: bool,
    heads: Vec<HeadSums>,
}

impl DetectorCapture {
    fn new(ids: &[u32], n_layers: usize, n_heads: usize, params: &DetectorParams) -> Self {
        Self {
            index: Arc::new(SequenceIndex::new(ids)),
            n_heads,
            exclude_bos: params.exclude_bos,
            exclude_current: params.exclude_current_token,
            heads: vec![HeadSums::default(); n_layers * n_heads],
        }
    }
}

/// Per-head state of a [`DetectorCapture`].
struct DetectorHead {
    index: Arc<SequenceIndex>,
    exclude_bos: bool,
    exclude_current: bool,
    sums: HeadSums,
}

impl DetectorHead {
    fn kept(&self, i: usize, j: usize) -> bool {
        !(self.exclude_bos && j == 0 || self.exclude_current && j == i)
    }
}

impl<T: Real> HeadCapture<T> for DetectorHead {
    fn block(&mut self, _info: &HeadInfo, b: &AttentionBlock<'_, T>) {
        for i in b.rows.clone() {
            let row = b.probs_row(i);
            let at = |j: usize| {
                if b.cols.contains(&j) {
                    row[j - b.cols.start].to_f64_exact()
                } else {
                    0.0
                }
            };
            let total: f64 = (b.cols.start..b.cols.end.min(i + 1))
                .filter(|&j| self.kept(i, j))
                .map(at)
                .sum();
            self.sums.total += total;
            for (p, &pattern) in PATTERNS.iter().enumerate() {
                let (mut hit, mut miss) = (0.0, 0.0);
                self.index.for_each_target(pattern, i, |j| {
                    if self.kept(i, j) {
                        let a = at(j);
                        hit += a;
                        miss += (a - 1.0).abs() - a;
                    }
                });
                self.sums.hit[p] += hit;
                self.sums.miss[p] += miss;
            }
        }
    }
}

impl<T: Real> Capture<T> for DetectorCapture {
    type Head = DetectorHead;

    fn plan(&self, _layer: usize) -> LayerPlan {
        LayerPlan {
            attention: true,
            ..LayerPlan::default()
        }
    }

    fn begin_head(&self, _info: &HeadInfo) -> DetectorHead {
        DetectorHead {
            index: Arc::clone(&self.index),
            exclude_bos: self.exclude_bos,
            exclude_current: self.exclude_current,
            sums: HeadSums::default(),
        }
    }

    fn end_head(&mut self, info: &HeadInfo, head: DetectorHead) {
        self.heads[info.layer * self.n_heads + info.head] = head.sums;
    }
}
