//! Bounds behind the slash-pattern checks (reconstructed from *Demystifying the Slash Pattern in Attention*).
//!
//! With constant pre-RoPE queries `q` and keys `k` the logits depend only on `i − j` (a Toeplitz matrix), so the
//! attention pattern and every slash score are the same for every prompt. These functions bound how far that
//! stays true when queries and keys are only close to rank one, and how large the amplitude of such a head must
//! be for a slash peak when only some RoPE frequencies carry it.

use super::head::Rotation;
use super::positional::relative_logit;
use crate::analysis::softmax::softmax;

/// Per-row bounds `η_i ≥ max_{j ≤ i} |a_σ[i,j] − a_0[i,j]|` for queries `q + σ n_i` and keys `k + σ m_j` against the
/// noiseless `q`, `k`: by Cauchy–Schwarz (RoPE preserves norms)
/// `η_i = max_{j ≤ i} σ (|q| |m_j| + |n_i| |k|) + σ² |n_i| |m_j|`. The noise norms are given per token.
pub fn rank_one_logit_perturbation(
    q_norm: f64,
    k_norm: f64,
    query_noise_norms: &[f64],
    key_noise_norms: &[f64],
    sigma: f64,
) -> Vec<f64> {
    let mut largest_key_noise: f64 = 0.0;
    query_noise_norms
        .iter()
        .zip(key_noise_norms)
        .map(|(&nq, &nk)| {
            largest_key_noise = largest_key_noise.max(nk);
            sigma * (q_norm * largest_key_noise + nq * k_norm)
                + sigma * sigma * nq * largest_key_noise
        })
        .collect()
}

/// Bound on `|SlashScore'(Δ) − SlashScore(Δ)|` when every logit of row `i` moves by at most `row_bounds[i]`.
///
/// Write the target weight of row `i` as `S = 1/(1 + e^{−x})` with `x = a[i,i−Δ] − ln Σ_{j≠i−Δ} e^{a[i,j]}`.
/// Moving every logit of the row by at most `η_i` moves `x` by at most `2η_i`, so with `u = e^{2η_i} − 1`
/// the weight moves by at most `S(1−S) u / (1 + min(S, 1−S) u)`: the larger of the rise `sigmoid(x + 2η_i) − S`
/// and the fall `S − sigmoid(x − 2η_i)`. That is attained when the target's logit moves by `±η_i` and every
/// other logit of the row by `∓η_i`, so no smaller bound holds for every perturbation within the `η_i`.
/// (The cruder `S (e^{2η_i} − 1)` exceeds it by the factor `(1 + min(S, 1−S) u)/(1 − S)`, unbounded as
/// `S → 1`.) The result is `1/(n−Δ) Σ_{i ≥ Δ}` of the row bounds. `attention` is the unperturbed row-major
/// `n × n` matrix. `None` when `Δ ≥ n`, `row_bounds` is shorter than `n` or
/// `attention` is not `n × n`.
pub fn slash_deviation_bound(
    attention: &[f64],
    n: usize,
    delta: usize,
    row_bounds: &[f64],
) -> Option<f64> {
    if delta >= n || row_bounds.len() < n || attention.len() != n * n {
        return None;
    }
    let total: f64 = (delta..n)
        .map(|i| {
            let s = attention[i * n + i - delta];
            let u = (2.0 * row_bounds[i]).exp_m1();
            s * (1.0 - s) * u / (1.0 + s.min(1.0 - s) * u)
        })
        .sum();
    Some(total / (n - delta) as f64)
}

/// Bound on the rank-one deficit `1 − σ_1²/Σσ²` of queries `W_Q x_t` for embeddings on a cone around the unit axis
/// `a` (every `x_t = cos θ_t a + sin θ_t z_t`, `z_t ⊥ a` unit, `θ_t ≤ θ_max`) and `W_Q = s u aᵀ + W_⊥` with
/// `W_⊥ a = 0`: the rank-one matrix with rows `s cos θ_t u` is within `n sin²θ_max ‖W_⊥‖₂²` of `Q` in squared
/// Frobenius norm, and by Eckart–Young that bounds `Σσ² − σ_1²`. Arguments: `n` tokens, `θ_max`, `‖W_⊥‖₂`, `‖Q‖_F²`.
pub fn cone_rank_one_deficit_bound(
    n: usize,
    max_angle: f64,
    perp_spectral_norm: f64,
    q_frobenius_sq: f64,
) -> f64 {
    n as f64 * (max_angle.sin() * perp_spectral_norm).powi(2) / q_frobenius_sq
}

/// `SlashScore(Δ)` of the rank-one head with constant queries `ψ` and keys `R^Δ ψ` (Prop 3.1's construction) over
/// `n` tokens, for `‖ψ‖² = budget` along the unit direction `direction` (so `Σ_l A_l = budget`). The key `δ` tokens
/// before the query has logit `budget · c(δ − Δ)` with `c` from [`relative_logit`]; row `i` (`i ≥ Δ`) puts
/// `e^{budget c(0)} / Σ_{δ ≤ i} e^{budget c(δ − Δ)}` on the slash. `None` when `Δ ≥ n`.
pub fn rank_one_slash_score(
    rotation: &Rotation,
    direction: &[f64],
    budget: f64,
    n: usize,
    delta: usize,
) -> Option<f64> {
    if delta >= n {
        return None;
    }
    let logits: Vec<f64> = (0..n)
        .map(|d| budget * relative_logit(rotation, direction, d as i64 - delta as i64))
        .collect();
    let total: f64 = (delta..n).map(|i| softmax(&logits[..=i])[delta]).sum();
    Some(total / (n - delta) as f64)
}

/// The smallest budget `‖ψ‖²` at which [`rank_one_slash_score`] reaches `kappa`, by bisection to a relative width
/// of `10⁻¹⁰` (every row's slash weight grows with the budget when `Δ` is the unique maximum of `c`, so the score
/// does). `None` when even `max_budget` does not reach `kappa` (or `Δ ≥ n`).
pub fn minimal_slash_budget(
    rotation: &Rotation,
    direction: &[f64],
    n: usize,
    delta: usize,
    kappa: f64,
    max_budget: f64,
) -> Option<f64> {
    let reaches =
        |b: f64| rank_one_slash_score(rotation, direction, b, n, delta).map(|s| s >= kappa);
    if !reaches(max_budget)? {
        return None;
    }
    if reaches(0.0)? {
        return Some(0.0);
    }
    let (mut lo, mut hi) = (0.0, max_budget);
    // At most 200 halvings: enough for the relative width unless the answer is below 2⁻¹⁶⁰ of `max_budget`, and
    // a search that cannot converge still ends.
    for _ in 0..200 {
        if hi - lo <= 1e-10 * hi {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if reaches(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}
