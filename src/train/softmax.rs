//! Softmax's vector-Jacobian product and the cross-entropy loss, shared by the attention rows and the output
//! layers; the softmax itself is the analyses' ([`softmax_in_place`]).

use crate::analysis::softmax::softmax_in_place;

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
