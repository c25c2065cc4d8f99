//! Softmax and its vector-Jacobian product, shared by the attention rows and the output layers.

/// Replaces `a` by `softmax(a)`, computed stably (shifted by the maximum).
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

/// Given `s = softmax(a)` and `ds = ∂L/∂s`, returns `∂L/∂a = s ⊙ (ds − ⟨s, ds⟩)`.
pub fn softmax_backward(s: &[f64], ds: &[f64]) -> Vec<f64> {
    let inner: f64 = s.iter().zip(ds).map(|(p, d)| p * d).sum();
    s.iter().zip(ds).map(|(p, d)| p * (d - inner)).collect()
}

/// Cross-entropy `−log softmax(z)[target]` and its gradient `softmax(z) − onehot(target)` with respect to `z`.
pub fn cross_entropy(z: &[f64], target: usize) -> (f64, Vec<f64>) {
    let mut p = z.to_vec();
    softmax_in_place(&mut p);
    let loss = -p[target].max(f64::MIN_POSITIVE).ln();
    p[target] -= 1.0;
    (loss, p)
}

/// Index of the largest entry (the first one on ties).
pub fn argmax(z: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in z.iter().enumerate() {
        if x > z[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn softmax_backward_is_the_jacobian_transpose() {
        // ∂s_i/∂a_j = s_i (δ_ij − s_j), applied to ds by hand.
        let a = [0.3, -1.2, 0.8, 0.0];
        let ds = [1.0, -2.0, 0.5, 3.0];
        let mut s = a;
        softmax_in_place(&mut s);
        let got = softmax_backward(&s, &ds);
        for (j, g) in got.iter().enumerate() {
            let want: f64 = (0..4)
                .map(|i| ds[i] * s[i] * (if i == j { 1.0 } else { 0.0 } - s[j]))
                .sum();
            assert!((g - want).abs() < 1e-15, "{g} against {want}");
        }
    }

    #[test]
    fn cross_entropy_is_the_negative_log_probability_with_its_gradient() {
        let z = [0.0, 2f64.ln(), 5f64.ln()];
        let (loss, grad) = cross_entropy(&z, 1);
        assert!((loss - 4f64.ln()).abs() < 1e-15);
        for (g, want) in grad.iter().zip([0.125, 0.25 - 1.0, 0.625]) {
            assert!((g - want).abs() < 1e-15, "{g} against {want}");
        }
        // A vanishing probability gives a large finite loss, not infinity.
        let (loss, _) = cross_entropy(&[0.0, -1e6], 1);
        assert!(loss.is_finite() && loss > 700.0);
    }

    #[test]
    fn argmax_takes_the_first_of_equal_maxima() {
        assert_eq!(argmax(&[1.0, 3.0, 2.0, 3.0]), 1);
        assert_eq!(argmax(&[-1.0, -2.0]), 0);
        assert_eq!(argmax(&[0.0, 0.0, 0.5]), 2);
    }
}
