//! Element-wise operations of the forward pass: RMSNorm, activations, soft-capping, softmax.
//!
//! RMSNorm and softmax reduce a whole row to one number (the mean of squares, the sum of exponentials) that
//! scales every element of the row, so an f32 rounding of that sum moves the whole row together: they
//! accumulate it in f64 whatever the engine's precision, and RMSNorm also scales in f64, rounding each result
//! once. This halves the f32 engine's error (README, "Precision of the f32
//! engine").

use super::config::Activation;
use crate::numeric::{sum_f64, Real};
use multiversion::multiversion;
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
/// exponentials are computed in `T` (each within 2 ulp, by [`Real::exp_nonpositive`], a loop the compiler
/// vectorizes), their sum and the divisions in f64.
///
/// Compiled for AVX2 and for NEON besides the baseline, the widest the CPU has chosen at run time. The code
/// has no fused multiply-add to contract, so every version gives the same bits
/// (`tests::softmax_is_the_same_on_every_instruction_set`).
#[multiversion(targets("x86_64+avx2+fma", "aarch64+neon"))]
pub fn masked_softmax<T: Real>(logits: &[T], probs: &mut [T], range: std::ops::Range<usize>) {
    softmax_portable(logits, probs, range)
}

/// [`masked_softmax`]'s arithmetic, compiled for whichever instruction set its caller is.
#[inline(always)]
fn softmax_portable<T: Real>(logits: &[T], probs: &mut [T], range: std::ops::Range<usize>) {
    probs[..range.start].fill(T::zero());
    probs[range.end..].fill(T::zero());
    let vis = &logits[range.clone()];
    let max = vis.iter().copied().fold(T::neg_infinity(), T::max);
    let exps = &mut probs[range];
    for (p, &l) in exps.iter_mut().zip(vis) {
        *p = (l - max).exp_nonpositive();
    }
    let sum = sum_f64(exps);
    for p in exps {
        *p = T::of_f64(p.to_f64_exact() / sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_matches_the_definition_in_f64() {
        let logits: Vec<f64> = (0..37)
            .map(|i| ((i * 7919) % 101) as f64 * 0.37 - 20.0)
            .collect();
        let mut probs = vec![1.0; 40];
        let mut padded = logits.clone();
        padded.extend([5.0, 5.0, 5.0]);
        masked_softmax(&padded, &mut probs, 0..37);
        let expect = crate::analysis::softmax::softmax(&logits);
        for (p, e) in probs.iter().zip(&expect) {
            assert!((p - e).abs() <= 4.0 * f64::EPSILON * e, "{p} against {e}");
        }
        assert_eq!(&probs[37..], &[0.0; 3]);
    }

    /// The dispatched softmax (AVX2 or NEON where the CPU has it) against the same arithmetic compiled for the
    /// baseline instruction set, bit for bit, in both precisions, on rows longer than any vector and with
    /// tails of every length.
    #[test]
    fn softmax_is_the_same_on_every_instruction_set() {
        fn check<T: Real>() {
            for n in [1, 2, 3, 5, 8, 13, 31, 64, 100, 1027] {
                let logits: Vec<T> = (0..n + 3)
                    .map(|i| T::of_f64(((i * 7919) % 1009) as f64 * 0.031 - 15.0))
                    .collect();
                let (mut fast, mut base) = (vec![T::one(); n + 3], vec![T::one(); n + 3]);
                masked_softmax(&logits, &mut fast, 1..n + 1);
                softmax_portable(&logits, &mut base, 1..n + 1);
                let bits = |v: &[T]| {
                    v.iter()
                        .map(|x| x.to_f64_exact().to_bits())
                        .collect::<Vec<_>>()
                };
                assert_eq!(bits(&fast), bits(&base), "{} row of {n}", T::NAME);
            }
        }
        check::<f32>();
        check::<f64>();
    }
}
