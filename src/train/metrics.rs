//! The measurements the training experiments report, as adapters from the trained models' outputs to the
//! crate's shared definitions in [`crate::analysis`] (the same statistics the theory checks and the real-model
//! scan use).

use crate::analysis::{cone, posym, rank, slash};
use serde::Serialize;

/// A causal attention matrix: row `i` holds the weights `S[i, 0..=i]`.
pub type CausalAttention = Vec<Vec<f64>>;

/// `SlashScore(Δ)` ([`slash::mean_slash_score`]) for `Δ = 0..=max_offset` over the prompts' attention maps.
/// Offsets no prompt is long enough for score 0.
pub fn slash_scores(maps: &[CausalAttention], max_offset: usize) -> Vec<f64> {
    let dense: Vec<(Vec<f64>, usize)> = maps
        .iter()
        .map(|s| {
            let n = s.len();
            let mut m = vec![0.0; n * n];
            for (i, row) in s.iter().enumerate() {
                m[i * n..i * n + row.len()].copy_from_slice(row);
            }
            (m, n)
        })
        .collect();
    (0..=max_offset)
        .map(|delta| {
            slash::mean_slash_score(dense.iter().map(|(m, n)| (m.as_slice(), *n)), delta)
                .unwrap_or(0.0)
        })
        .collect()
}

/// How close a set of vectors (the rows of a matrix) is to rank one ([`rank::rank_stats`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RankOneStats {
    /// `σ1² / Σ σ²` (1 = rank one).
    pub sigma1_share: f64,
    /// Entropy effective rank `exp(−Σ p ln p)`, `p = σ/Σσ` (1 = rank one).
    pub effective_rank: f64,
}

/// Rank-one statistics of `rows`, all of one length; NaN when the matrix is zero or its SVD fails.
pub fn rank_one_stats(rows: &[Vec<f64>]) -> RankOneStats {
    let n_cols = rows.first().map_or(0, Vec::len);
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    let stats = rank::singular_values(&flat, rows.len(), n_cols)
        .ok()
        .and_then(|s| rank::rank_stats(&s));
    RankOneStats {
        sigma1_share: stats.map_or(f64::NAN, |s| s.rank_one_share),
        effective_rank: stats.map_or(f64::NAN, |s| s.effective_rank),
    }
}

/// Mean angle (radians) of `vectors` to their mean direction ([`cone::cone_spread`]); NaN when undefined.
pub fn cone_spread(vectors: &[Vec<f64>]) -> f64 {
    cone::cone_spread(vectors).map_or(f64::NAN, |c| c.mean_angle)
}

/// Positional and symbolic scores of one head on one input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PosSymScores {
    /// `s_pos`: near 1 when the block attentions stay in place after their contents are swapped.
    pub positional: f64,
    /// `s_sym`: near 1 when the block attentions move with the contents.
    pub symbolic: f64,
}

/// The block-swap scores ([`posym::block_swap_scores`]) of a query attending over `context`: the last
/// `m · ⌊len/m⌋` context positions form `m` equal blocks (the leading `len mod m` positions are never swapped).
/// `tau_mean` is the temperature on block *mean* attentions, so the shared function (which weighs block
/// masses) gets `tau_mean · block_len`. `attend(context)` returns the query's attention over `context`.
/// Zero scores when the blocks are not well defined.
pub fn positional_symbolic_scores<T, F>(
    context: &[T],
    m: usize,
    tau_mean: f64,
    attend: F,
) -> PosSymScores
where
    T: Clone,
    F: Fn(&[T]) -> Vec<f64>,
{
    let block = context.len() / m.max(1);
    let start = context.len() - m * block;
    let scores = posym::block_swap_scores(m * block, m, tau_mean * block as f64, |perm| {
        let mut permuted = context[..start].to_vec();
        permuted.extend(perm.iter().map(|&p| context[start + p].clone()));
        attend(&permuted).split_off(start)
    });
    scores.map_or_else(PosSymScores::default, |s| PosSymScores {
        positional: s.s_pos,
        symbolic: s.s_sym,
    })
}
