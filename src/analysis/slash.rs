//! Slash scores: how much attention a head puts on the `Δ`-th sub-diagonal.
//!
//! For one prompt of `N` tokens with causal attention `S`, `SlashScore(Δ) = 1/(N−Δ) · Σ_{i=Δ+1..N} S_{i,i−Δ}`
//! (1-based as in the slash paper; 0-based here the rows are `i = Δ..N−1`). Over a prompt distribution the score
//! is the mean over prompts. A head is (κ, Δ)-slash-dominant when `SlashScore(Δ) ≥ κ`.

/// Default κ of (κ, Δ)-slash dominance. The slash paper's public text leaves κ open; 0.1 marks a sub-diagonal
/// that on average receives ten percent of every row's attention, far above the `1/(i+1)` of uniform attention
/// once rows are longer than ten tokens.
pub const DEFAULT_SLASH_KAPPA: f64 = 0.1;

/// `SlashScore(Δ)` of one causal attention matrix `attention` (row-major `n × n`): the mean of `S[i, i−Δ]` over
/// the `n − Δ` rows `i = Δ..n−1`. `None` when `Δ ≥ n` (no such sub-diagonal).
///
/// # Panics
/// If `attention.len() != n * n`.
#[track_caller]
pub fn slash_score(attention: &[f64], n: usize, delta: usize) -> Option<f64> {
    assert_eq!(attention.len(), n * n, "attention must be an n × n matrix");
    if delta >= n {
        return None;
    }
    let total: f64 = (delta..n).map(|i| attention[i * n + i - delta]).sum();
    Some(total / (n - delta) as f64)
}

/// `SlashScore(Δ)` for every `Δ = 0..n−1`: the slash profile of one attention matrix.
#[track_caller]
pub fn slash_profile(attention: &[f64], n: usize) -> Vec<f64> {
    (0..n)
        .filter_map(|delta| slash_score(attention, n, delta))
        .collect()
}

/// `E_P[SlashScore(Δ)]`: the mean slash score over prompts, each given as `(attention, n)`. Prompts shorter than
/// `Δ + 1` tokens have no such sub-diagonal and are skipped; `None` when no prompt has one.
pub fn mean_slash_score<'a>(
    prompts: impl IntoIterator<Item = (&'a [f64], usize)>,
    delta: usize,
) -> Option<f64> {
    let scores: Vec<f64> = prompts
        .into_iter()
        .filter_map(|(attention, n)| slash_score(attention, n, delta))
        .collect();
    (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64)
}

/// Whether a slash score makes the head (κ, Δ)-slash-dominant: `score ≥ kappa`.
pub fn is_slash_dominant(score: f64, kappa: f64) -> bool {
    score >= kappa
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_attention_has_unit_diagonal_score() {
        let n = 5;
        let mut s = vec![0.0; n * n];
        (0..n).for_each(|i| s[i * n + i] = 1.0);
        assert_eq!(slash_score(&s, n, 0), Some(1.0));
        assert_eq!(slash_score(&s, n, 1), Some(0.0));
        assert_eq!(slash_score(&s, n, n), None);
        assert_eq!(slash_profile(&s, n).len(), n);
        assert_eq!(mean_slash_score([(&s[..], n), (&s[..], n)], 0), Some(1.0));
        assert!(is_slash_dominant(1.0, DEFAULT_SLASH_KAPPA));
    }

    #[test]
    fn mean_slash_score_averages_prompts_and_skips_those_too_short() {
        let eye = [1.0, 0.0, 0.0, 1.0];
        // Previous-token attention over three tokens (the first row can only attend to itself).
        let prev = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
        let one = [1.0];
        let prompts = [(&eye[..], 2), (&prev[..], 3), (&one[..], 1)];
        assert_eq!(mean_slash_score(prompts, 1), Some(0.5));
        assert_eq!(mean_slash_score(prompts, 2), Some(0.0));
        assert_eq!(mean_slash_score([(&one[..], 1)], 1), None);
    }
}
