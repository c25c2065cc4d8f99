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
