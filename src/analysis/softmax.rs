//! Softmax and causal attention from pre-softmax logits.
//!
//! The softmax of the crate's definitions on slices: the analyses, the theory checks and the training
//! experiments (whose backward pass is `train::softmax`) all call [`softmax_in_place`]. The engine has its own,
//! `model::ops::masked_softmax`: generic over the engine's precision, its exponentials vectorized in `T`
//! (`Real::exp_nonpositive`, within 2 ulp) and summed in f64 in four lanes, it is a different rounding of the
//! same mathematics, agreeing with this one to a few ulp in f64 (`model::ops::tests`), and the f64 engine's
//! outputs are defined by its bits.

/// Replaces `a` by its softmax `α_i = exp(a_i − max a) / Σ_k exp(a_k − max a)`, shifted by the maximum so that
/// it never overflows: libm's `exp`, the sum from the first entry to the last, one division per entry.
pub fn softmax_in_place(a: &mut [f64]) {
    let max = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    for x in a.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    for x in a.iter_mut() {
        *x /= sum;
    }
}

/// [`softmax_in_place`] of a copy of `logits`. Returns an empty vector for an empty input.
pub fn softmax(logits: &[f64]) -> Vec<f64> {
    let mut alpha = logits.to_vec();
    softmax_in_place(&mut alpha);
    alpha
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
    fn softmax_is_normalised_and_shift_invariant() {
        // softmax(0, ln 2, ln 5) = (1, 2, 5) / 8, also far from zero, where an unshifted exp overflows (there
        // `1000 + ln 2` is rounded to 1.1e-13).
        for shift in [0.0, 1000.0] {
            let mut a = [shift, shift + 2f64.ln(), shift + 5f64.ln()];
            softmax_in_place(&mut a);
            for (p, want) in a.iter().zip([0.125, 0.25, 0.625]) {
                assert!((p - want).abs() < 1e-12, "{p} against {want}");
            }
        }
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
