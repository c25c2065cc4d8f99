//! The measurements of DEFINITIONS.md that the training experiments report, in minimal private versions.

use super::softmax::softmax_in_place;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::svd::{self, ComputeSvdVectors};
use faer::{Mat, Par};
use serde::Serialize;

/// A causal attention matrix: row `i` holds the weights `S[i, 0..=i]`.
pub type CausalAttention = Vec<Vec<f64>>;

/// `SlashScore(Δ)` of DEFINITIONS.md for `Δ = 0..=max_offset`: over the prompts, the mean of
/// `1/(N−Δ) Σ_{i ≥ Δ} S[i, i−Δ]` (0-based rows). Prompts shorter than `Δ + 1` do not count for that `Δ`.
pub fn slash_scores(maps: &[CausalAttention], max_offset: usize) -> Vec<f64> {
    (0..=max_offset)
        .map(|delta| {
            let per_prompt: Vec<f64> = maps
                .iter()
                .filter(|s| s.len() > delta)
                .map(|s| {
                    let sum: f64 = (delta..s.len()).map(|i| s[i][i - delta]).sum();
                    sum / (s.len() - delta) as f64
                })
                .collect();
            per_prompt.iter().sum::<f64>() / per_prompt.len().max(1) as f64
        })
        .collect()
}

/// How close a set of vectors (the rows of a matrix) is to rank one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RankOneStats {
    /// `σ1² / Σ σ²`: the share of the squared Frobenius norm in the top singular direction (1 = rank one).
    pub sigma1_share: f64,
    /// `exp(H(p))` with `p = σ²/Σσ²`: the entropy effective rank (1 = rank one).
    pub effective_rank: f64,
}

/// Rank-one statistics (DEFINITIONS.md, Slash-dominant heads, OPEN rank-one statistic) of `rows`, all of one
/// length. The singular values come from faer, run sequentially so the result does not depend on the threads.
pub fn rank_one_stats(rows: &[Vec<f64>]) -> RankOneStats {
    let n_cols = rows.first().map_or(0, Vec::len);
    let a = Mat::from_fn(rows.len(), n_cols, |i, j| rows[i][j]);
    let mut s = faer::diag::Diag::<f64>::zeros(rows.len().min(n_cols));
    let scratch = svd::svd_scratch::<f64>(
        a.nrows(),
        a.ncols(),
        ComputeSvdVectors::No,
        ComputeSvdVectors::No,
        Par::Seq,
        Default::default(),
    );
    let ok = svd::svd(
        a.as_ref(),
        s.as_mut(),
        None,
        None,
        Par::Seq,
        MemStack::new(&mut MemBuffer::new(scratch)),
        Default::default(),
    );
    let sq: Vec<f64> = match ok {
        Ok(()) => s.column_vector().iter().map(|x| x * x).collect(),
        Err(_) => vec![f64::NAN],
    };
    let total: f64 = sq.iter().sum();
    if total <= 0.0 || !total.is_finite() {
        return RankOneStats {
            sigma1_share: f64::NAN,
            effective_rank: f64::NAN,
        };
    }
    let top = sq.iter().copied().fold(0.0, f64::max);
    let entropy: f64 = sq
        .iter()
        .map(|x| x / total)
        .filter(|&p| p > 0.0)
        .map(|p| -p * p.ln())
        .sum();
    RankOneStats {
        sigma1_share: top / total,
        effective_rank: entropy.exp(),
    }
}

/// Angular spread of `vectors` around their mean direction: the mean angle (radians) between each vector and the
/// mean of the unit vectors. Small for embeddings on a narrow cone (DEFINITIONS.md, OPEN cone condition).
pub fn cone_spread(vectors: &[Vec<f64>]) -> f64 {
    let unit = |v: &[f64]| {
        let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        v.iter().map(|x| x / n).collect::<Vec<f64>>()
    };
    let units: Vec<Vec<f64>> = vectors.iter().map(|v| unit(v)).collect();
    let dim = units.first().map_or(0, Vec::len);
    let mean: Vec<f64> = (0..dim)
        .map(|k| units.iter().map(|u| u[k]).sum::<f64>())
        .collect();
    let axis = unit(&mean);
    let angles: f64 = units
        .iter()
        .map(|u| {
            let c: f64 = u.iter().zip(&axis).map(|(a, b)| a * b).sum();
            c.clamp(-1.0, 1.0).acos()
        })
        .sum();
    angles / units.len().max(1) as f64
}

/// Positional and symbolic scores of one head on one input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PosSymScores {
    /// `s_pos`: near 1 when the block attentions stay in place after their contents are swapped.
    pub positional: f64,
    /// `s_sym`: near 1 when the block attentions move with the contents.
    pub symbolic: f64,
}

/// The block-swap positional and symbolic scores of DEFINITIONS.md (Decoupling Positional and Symbolic
/// Attention) for one input. `attend(context)` returns the last query's attention over the context positions.
/// The last `m · ⌊len/m⌋` context positions are split into `m` contiguous blocks of equal length (the leading
/// `len mod m` positions belong to no block); for each pair `i < j` the blocks' contents are swapped,
/// `v = (d_i, d_j)`, `v' = (d'_i, d'_j)`, `s_pos = cos(v', v)`, `s_sym = cos(v', (d_j, d_i))`, aggregated with
/// weights `softmax(|d_i − d_j| / τ)` over the pairs.
pub fn positional_symbolic_scores<T, F>(
    context: &[T],
    m: usize,
    tau: f64,
    attend: F,
) -> PosSymScores
where
    T: Clone,
    F: Fn(&[T]) -> Vec<f64>,
{
    let block = context.len() / m.max(1);
    if m < 2 || block == 0 {
        return PosSymScores::default();
    }
    let start = context.len() - m * block;
    let block_means = |attn: &[f64]| -> Vec<f64> {
        (0..m)
            .map(|b| {
                attn[start + b * block..start + (b + 1) * block]
                    .iter()
                    .sum::<f64>()
                    / block as f64
            })
            .collect()
    };
    let d = block_means(&attend(context));
    let mut weights = Vec::new();
    let mut scores = Vec::new();
    for i in 0..m {
        for j in i + 1..m {
            let mut swapped = context.to_vec();
            for k in 0..block {
                swapped.swap(start + i * block + k, start + j * block + k);
            }
            let d2 = block_means(&attend(&swapped));
            let v2 = [d2[i], d2[j]];
            scores.push((cosine(&v2, &[d[i], d[j]]), cosine(&v2, &[d[j], d[i]])));
            weights.push((d[i] - d[j]).abs() / tau);
        }
    }
    softmax_in_place(&mut weights);
    let mut out = PosSymScores::default();
    for (w, (p, s)) in weights.iter().zip(scores) {
        out.positional += w * p;
        out.symbolic += w * s;
    }
    out
}

fn cosine(a: &[f64; 2], b: &[f64; 2]) -> f64 {
    let dot = a[0] * b[0] + a[1] * b[1];
    let n = (a[0].hypot(a[1])) * (b[0].hypot(b[1]));
    if n > 0.0 {
        dot / n
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_score_of_a_pure_previous_token_map() {
        let n = 6;
        let map: CausalAttention = (0..n)
            .map(|i| {
                (0..=i)
                    .map(|j| {
                        if j + 1 == i || (i == 0 && j == 0) {
                            1.0
                        } else {
                            0.0
                        }
                    })
                    .collect()
            })
            .collect();
        let s = slash_scores(&[map], 2);
        assert!((s[1] - 1.0).abs() < 1e-12);
        assert!(s[0] < 0.2 && s[2] == 0.0);
    }

    #[test]
    fn rank_one_rows_have_share_one() {
        let rows: Vec<Vec<f64>> = (1..5)
            .map(|k| vec![k as f64, 2.0 * k as f64, -(k as f64)])
            .collect();
        let r = rank_one_stats(&rows);
        assert!((r.sigma1_share - 1.0).abs() < 1e-12);
        assert!((r.effective_rank - 1.0).abs() < 1e-9);
    }

    #[test]
    fn positional_and_symbolic_heads_land_on_their_axes() {
        let context: Vec<usize> = (0..8).collect();
        // Attends by position: always the same weights.
        let positional = |_: &[usize]| vec![0.5, 0.3, 0.1, 0.04, 0.03, 0.01, 0.01, 0.01];
        // Attends by content: weight follows token 0 wherever it is.
        let symbolic = |c: &[usize]| {
            let raw: Vec<f64> = c.iter().map(|&t| if t == 0 { 10.0 } else { 1.0 }).collect();
            let s: f64 = raw.iter().sum();
            raw.iter().map(|x| x / s).collect::<Vec<f64>>()
        };
        let p = positional_symbolic_scores(&context, 4, 0.1, positional);
        let s = positional_symbolic_scores(&context, 4, 0.1, symbolic);
        assert!(p.positional > 0.99 && p.symbolic < 0.8);
        assert!(s.symbolic > 0.99 && s.positional < 0.8);
    }
}
