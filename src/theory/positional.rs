//! Positional heads of *Round and Round We Go*: Prop 3.1 (a key that makes any distance maximal) and Thm 5.3
//! (diagonal and previous-token heads to any precision), with the exact query norm the construction needs.

use super::head::Rotation;

/// Prop 3.1's key for query `q` and distance `r`: `k = R^r q`. Then `q^T R^{j−i} k = Σ_l |q^(l)|² cos((j−i+r) g_l)`,
/// largest exactly when the key sits `r` positions before the query.
pub fn key_peaking_at_distance(rotation: &Rotation, q: &[f64], r: usize) -> Vec<f64> {
    rotation.at(q, r)
}

/// The two positional patterns of Thm 5.3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PositionalPattern {
    /// `α_{i,i} > 1 − ε`: every query attends to itself.
    Diagonal,
    /// `α_{i,i−1} > 1 − ε`: every query attends to the previous token.
    PreviousToken,
}

impl PositionalPattern {
    /// How many positions before the query the target sits (0 or 1).
    pub fn offset(self) -> usize {
        match self {
            Self::Diagonal => 0,
            Self::PreviousToken => 1,
        }
    }

    /// The target key of query row `i`, or `None` when the row has none (row 0 of a previous-token head).
    pub fn target(self, i: usize) -> Option<usize> {
        i.checked_sub(self.offset())
    }
}

/// Thm 5.3's construction for `n` tokens: every query is `ψ`, every key `R^o ψ` with `o` the pattern's offset
/// (`o = 0`: queries and keys equal; `o = 1`: keys one unit rotation ahead). Returns `(queries, keys)`.
pub fn construction(
    rotation: &Rotation,
    psi: &[f64],
    pattern: PositionalPattern,
    n: usize,
) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let key = rotation.at(psi, pattern.offset());
    (vec![psi.to_vec(); n], vec![key; n])
}

/// `c(δ) = Σ_l w_l cos(g_l δ)` for the unit direction of `psi` (`w_l = |ψ^(l)|² / |ψ|²`), so that in the
/// construction a key `δ` positions after the target has logit `|ψ|² c(δ)`, and the target `|ψ|²`.
pub fn relative_logit(rotation: &Rotation, psi: &[f64], delta: i64) -> f64 {
    let spec = rotation.spec();
    let norm_sq: f64 = psi.iter().map(|x| x * x).sum();
    rotation
        .frequencies()
        .iter()
        .enumerate()
        .map(|(l, &g)| {
            let (a, b) = spec.chunk_dims(l);
            (psi[a] * psi[a] + psi[b] * psi[b]) / norm_sq * (g * delta as f64).cos()
        })
        .sum()
}

/// The offsets `δ = j − target` of the competitors of the target in the last row `i = n − 1`. Every earlier
/// row's competitors are a subset, so the last row is the one that needs the largest norm.
pub fn competitor_offsets(pattern: PositionalPattern, n: usize) -> Vec<i64> {
    let Some(target) = n.checked_sub(1).and_then(|i| pattern.target(i)) else {
        return Vec::new();
    };
    (0..n)
        .filter(|&j| j != target)
        .map(|j| j as i64 - target as i64)
        .collect()
}

/// The exact scale `s*` at which a softmax with target logit `s` and competitor logits `s c_k` (`c_k < 1`)
/// reaches target weight `1 − ε`: the root of `Σ_k exp(s (c_k − 1)) = ε / (1 − ε)`. The weight exceeds `1 − ε`
/// for every `s > s*` and not for `s ≤ s*` (the sum strictly decreases in `s`).
///
/// `None` when `ε ∉ (0, 1/2)`, there are no competitors, or some `c_k ≥ 1` (a tie no scale can break).
pub fn sharpness_threshold(cosines: &[f64], eps: f64) -> Option<f64> {
    // `sufficient_scale` refuses exactly these inputs, and brackets the root from above.
    let mut hi = sufficient_scale(cosines, eps)?;
    let goal = eps / (1.0 - eps);
    let excess = |s: f64| cosines.iter().map(|&c| (s * (c - 1.0)).exp()).sum::<f64>() - goal;
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if excess(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

/// A closed-form scale that suffices: `ln(K (1 − ε) / ε) / (1 − max_k c_k)` with `K` competitors, since each
/// term is at most `exp(−s (1 − max c))`. `None` under the same conditions as [`sharpness_threshold`].
pub fn sufficient_scale(cosines: &[f64], eps: f64) -> Option<f64> {
    let c_max = cosines.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !(eps > 0.0 && eps < 0.5) || cosines.is_empty() || c_max >= 1.0 {
        return None;
    }
    let k = cosines.len() as f64;
    Some((k * (1.0 - eps) / eps).ln().max(0.0) / (1.0 - c_max))
}

/// Thm 5.3 made quantitative: the exact `‖ψ‖²` above which the construction along the direction of `psi`
/// gives `α_{i,target} > 1 − ε` in every row `i < n`, and below which the last row fails. `None` when
/// [`sharpness_threshold`] is undefined (for instance a frequency that is a rational multiple of 2π, which makes
/// a competitor tie with the target).
pub fn required_norm_squared(
    rotation: &Rotation,
    psi: &[f64],
    pattern: PositionalPattern,
    n: usize,
    eps: f64,
) -> Option<f64> {
    let cosines: Vec<f64> = competitor_offsets(pattern, n)
        .into_iter()
        .map(|delta| relative_logit(rotation, psi, delta))
        .collect();
    sharpness_threshold(&cosines, eps)
}
