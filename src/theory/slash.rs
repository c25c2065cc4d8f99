//! Bounds behind the slash-pattern checks (reconstructed from *Demystifying the Slash Pattern in Attention*).
//!
//! With constant pre-RoPE queries `q` and keys `k` the logits depend only on `i − j` (a Toeplitz matrix), so the
//! attention pattern and every slash score are the same for every prompt. These functions bound how far that
//! stays true when queries and keys are only close to rank one.

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

/// Bound on `|SlashScore'(Δ) − SlashScore(Δ)|` when every logit of row `i` moves by at most `row_bounds[i]`:
/// each weight then changes by a factor in `[e^{−2η_i}, e^{2η_i}]`, so
/// `|S'[i,j] − S[i,j]| ≤ S[i,j] (e^{2η_i} − 1)` and the bound is `1/(n−Δ) Σ_{i ≥ Δ} S[i,i−Δ] (e^{2η_i} − 1)`.
/// `attention` is the unperturbed row-major `n × n` matrix. `None` when `Δ ≥ n` or `row_bounds` is shorter than `n`.
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
        .map(|i| attention[i * n + i - delta] * (2.0 * row_bounds[i]).exp_m1())
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
