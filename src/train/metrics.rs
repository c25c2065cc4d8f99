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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_scores_average_sub_diagonals_over_the_prompts_long_enough() {
        let a = vec![vec![1.0], vec![0.5, 0.5], vec![0.2, 0.3, 0.5]];
        let b = vec![vec![1.0], vec![0.4, 0.6]];
        // Δ = 0: (2/3 + 0.8) / 2; Δ = 1: (0.4 + 0.4) / 2; Δ = 2: the first prompt alone; Δ = 3: none.
        let want = [11.0 / 15.0, 0.4, 0.2, 0.0];
        let got = slash_scores(&[a, b], 3);
        assert_eq!(got.len(), 4);
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-15, "{g} against {w}");
        }
    }

    #[test]
    fn rank_one_stats_of_known_spectra() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        let one = rank_one_stats(&[vec![1.0, 2.0], vec![2.0, 4.0]]);
        assert!(close(one.sigma1_share, 1.0) && close(one.effective_rank, 1.0));
        // Singular values 4 and 3: share 16/25, p = (4/7, 3/7).
        let two = rank_one_stats(&[vec![3.0, 0.0], vec![0.0, 4.0]]);
        let (p, q): (f64, f64) = (4.0 / 7.0, 3.0 / 7.0);
        assert!(close(two.sigma1_share, 0.64));
        assert!(close(two.effective_rank, (-(p * p.ln() + q * q.ln())).exp()));
        let zero = rank_one_stats(&[vec![0.0, 0.0]]);
        assert!(zero.sigma1_share.is_nan() && zero.effective_rank.is_nan());
    }

    #[test]
    fn cone_spread_is_the_mean_angle_or_nan() {
        let spread = cone_spread(&[vec![1.0, 0.0], vec![0.0, 3.0]]);
        assert!((spread - std::f64::consts::FRAC_PI_4).abs() < 1e-15);
        assert!(cone_spread(&[vec![1.0, 0.0], vec![-1.0, 0.0]]).is_nan());
    }

    /// A query's attention over `context` (numbers): a share `positional` by position (growing with it) and the
    /// rest by content (growing with the number).
    fn attention(context: &[f64], positional: f64) -> Vec<f64> {
        let n = context.len() as f64;
        let by_position = (1..=context.len()).map(|p| p as f64 / (n * (n + 1.0) / 2.0));
        let content_total: f64 = context.iter().sum();
        by_position
            .zip(context)
            .map(|(p, c)| positional * p + (1.0 - positional) * c / content_total)
            .collect()
    }

    #[test]
    fn block_swap_scores_swap_the_last_blocks_with_the_temperature_of_block_means() {
        // 7 positions, 3 blocks of 2: position 0 is never swapped.
        let context = [9.0, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0];
        let attend = |positional: f64| {
            move |c: &[f64]| {
                assert_eq!((c.len(), c[0]), (7, 9.0), "the leading position stays");
                attention(c, positional)
            }
        };
        let by_position = positional_symbolic_scores(&context, 3, 0.5, attend(1.0));
        assert!((by_position.positional - 1.0).abs() < 1e-12);
        let by_content = positional_symbolic_scores(&context, 3, 0.5, attend(0.0));
        assert!((by_content.symbolic - 1.0).abs() < 1e-12);
        // A mixed head's scores depend on the pair weights: the shared function sees block masses, so its
        // temperature is the block-mean one times the block length.
        let mixed = positional_symbolic_scores(&context, 3, 0.5, attend(0.6));
        let shared = posym::block_swap_scores(6, 3, 0.5 * 2.0, |perm| {
            let mut c = vec![context[0]];
            c.extend(perm.iter().map(|&p| context[1 + p]));
            attention(&c, 0.6).split_off(1)
        })
        .unwrap();
        assert_eq!((mixed.positional, mixed.symbolic), (shared.s_pos, shared.s_sym));
        let other_tau = positional_symbolic_scores(&context, 3, 0.25, attend(0.6));
        assert_ne!(other_tau, mixed, "the temperature matters for this head");
        // Undefined blocks give zero scores.
        assert_eq!(
            positional_symbolic_scores(&context[..2], 3, 0.5, attend(0.6)),
            PosSymScores::default()
        );
    }
}
