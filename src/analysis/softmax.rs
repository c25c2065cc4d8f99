//! Softmax and causal attention from pre-softmax logits.

/// Softmax `α_i = exp(a_i − max a) / Σ_k exp(a_k − max a)`, shifted by the maximum so that it never overflows.
///
/// Returns an empty vector for an empty input.
pub fn softmax(logits: &[f64]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|&a| (a - max).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.into_iter().map(|e| e / total).collect()
}

/// Causal attention `S` (row-major `n × n`) from the logits `a` (row-major `n × n`): row `i` is
/// `softmax(a[i, 0..=i])` and `S[i, j] = 0` for `j > i`. The upper triangle of `logits` is never read.
///
/// # Panics
/// If `logits.len() != n * n`.
#[track_caller]
pub fn causal_attention(logits: &[f64], n: usize) -> Vec<f64> {
    assert_eq!(logits.len(), n * n, "logits must be an n × n matrix");
    let mut attention = vec![0.0; n * n];
    for i in 0..n {
        let row = softmax(&logits[i * n..i * n + i + 1]);
        attention[i * n..i * n + i + 1].copy_from_slice(&row);
    }
    attention
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_sums_to_one_and_survives_huge_logits() {
        let alpha = softmax(&[1000.0, 999.0, -1000.0]);
        assert!((alpha.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        assert!((alpha[0] / alpha[1] - 1f64.exp()).abs() < 1e-12);
    }

    #[test]
    fn causal_attention_is_lower_triangular_and_row_stochastic() {
        let n = 4;
        let logits: Vec<f64> = (0..n * n).map(|x| (x as f64 * 0.7).sin()).collect();
        let s = causal_attention(&logits, n);
        for i in 0..n {
            let row = &s[i * n..(i + 1) * n];
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-15);
            assert!(row[i + 1..].iter().all(|&x| x == 0.0));
        }
    }
}
