//! Element-wise operations of the forward pass: RMSNorm, activations, soft-capping, softmax.
//!
//! RMSNorm and softmax reduce a whole row to one number (the mean of squares, the sum of exponentials) that
//! scales every element of the row, so an f32 rounding of that sum moves the whole row together: they
//! accumulate it in f64 whatever the engine's precision, and RMSNorm also scales in f64, rounding each result
//! once. This halves the f32 engine's error (README, "Precision of the f32 engine"). For `f64` it is the same
//! arithmetic as before, bit for bit.

use super::config::Activation;
use crate::numeric::Real;
use rayon::prelude::*;

/// RMSNorm of one vector in place: `x_i ← x_i / sqrt(mean(x²) + eps) · w_i`, computed in f64 and rounded once.
pub fn rms_norm<T: Real>(x: &mut [T], w: &[T], eps: f64) {
    let n = x.len() as f64;
    let mean_sq = x
        .iter()
        .map(|v| {
            let v = v.to_f64_exact();
            v * v
        })
        .sum::<f64>()
        / n;
    let inv = 1.0 / (mean_sq + eps).sqrt();
    for (v, &g) in x.iter_mut().zip(w) {
        *v = T::of_f64(v.to_f64_exact() * inv * g.to_f64_exact());
    }
}

/// RMSNorm of every `w.len()`-wide segment of `x` (rows of a matrix, or heads within rows), in parallel.
pub fn rms_norm_segments<T: Real>(x: &mut [T], w: &[T], eps: f64) {
    x.par_chunks_mut(w.len())
        .for_each(|seg| rms_norm(seg, w, eps));
}

/// Copy of `x` with RMSNorm applied to every row.
pub fn rms_normed<T: Real>(x: &[T], w: &[T], eps: f64) -> Vec<T> {
    let mut out = x.to_vec();
    rms_norm_segments(&mut out, w, eps);
    out
}

/// `act(gate) · up`, element-wise, into `gate`.
pub fn gated<T: Real>(gate: &mut [T], up: &[T], act: Activation) {
    gate.par_iter_mut()
        .zip(up.par_iter())
        .for_each(|(g, &u)| *g = activate(*g, act) * u);
}

fn activate<T: Real>(x: T, act: Activation) -> T {
    match act {
        Activation::Silu => x / (T::one() + (-x).exp()),
        Activation::GeluTanh => {
            let half = T::of_f64(0.5);
            let c = T::of_f64((2.0 / std::f64::consts::PI).sqrt());
            let cubic = T::of_f64(0.044715);
            half * x * (T::one() + (c * (x + cubic * x * x * x)).tanh())
        }
    }
}

/// Soft-capping `c · tanh(x / c)` in place.
pub fn softcap<T: Real>(x: &mut [T], cap: f64) {
    let c = T::of_f64(cap);
    for v in x {
        *v = (*v / c).tanh() * c;
    }
}

/// Softmax of `logits[range]` into `probs[range]`; every other entry of `probs` is set to exactly zero. The
/// exponentials are computed in `T` (each within an ulp on its own), their sum and the divisions in f64.
pub fn masked_softmax<T: Real>(logits: &[T], probs: &mut [T], range: std::ops::Range<usize>) {
    probs.iter_mut().for_each(|p| *p = T::zero());
    let vis = &logits[range.clone()];
    let max = vis.iter().copied().fold(T::neg_infinity(), T::max);
    let mut sum = 0.0;
    for (p, &l) in probs[range.clone()].iter_mut().zip(vis) {
        *p = (l - max).exp();
        sum += p.to_f64_exact();
    }
    for p in &mut probs[range] {
        *p = T::of_f64(p.to_f64_exact() / sum);
    }
}
