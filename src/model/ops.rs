//! Element-wise operations of the forward pass: RMSNorm, activations, soft-capping, softmax.
//!
//! RMSNorm and softmax reduce a whole row to one number (the mean of squares, the sum of exponentials) that
//! scales every element of the row, so an f32 rounding of that sum moves the whole row together: they
//! accumulate it in f64 whatever the engine's precision, and RMSNorm also scales in f64, rounding each result
//! once. This halves the f32 engine's error (`docs/correctness.md`, "Precision of the f32 engine"). Exponentials and the
//! feed-forward activations are plain arithmetic the compiler vectorizes ([`Real::exp_nonpositive`]).

use super::config::Activation;
use crate::numeric::{sum_f64, Real};
use multiversion::multiversion;
use rayon::prelude::*;

/// A norm's ε, and whether the norm is computed as ggml computes it ([`super::Arithmetic::Ggml`]).
#[derive(Clone, Copy, Debug)]
pub struct NormEps {
    /// ε.
    pub eps: f64,
    /// RMSNorm in ggml's float32 steps (`ggml_compute_forward_rms_norm_f32`) instead of in f64 rounded once.
    pub ggml: bool,
}

/// RMSNorm of one vector in place: `x_i ← x_i / sqrt(mean(x²) + eps) · w_i`, computed in f64 and rounded once
/// (or in ggml's steps).
pub fn rms_norm<T: Real>(x: &mut [T], w: &[T], eps: NormEps) {
    let scale = RmsScale::of(x, eps);
    for (v, &g) in x.iter_mut().zip(w) {
        *v = scale.apply(*v, g);
    }
}

/// A row's RMS scale: `1 / sqrt(mean(x²) + eps)` in f64, or ggml's float32 one.
#[derive(Clone, Copy)]
enum RmsScale {
    /// In f64; a value is `x · inv · w` in f64, rounded once.
    Exact(f64),
    /// ggml's: the float32 squares summed in f64 in order, the mean rounded to float32, `1/sqrtf(mean + ε)` in
    /// float32 with ε a float32; a value is `(x · scale) · w` in float32.
    Ggml(f32),
}

impl RmsScale {
    fn of<S: Real>(x: &[S], eps: NormEps) -> Self {
        if eps.ggml {
            let sum: f64 = x
                .iter()
                .map(|v| {
                    let v = v.to_f64_exact() as f32;
                    (v * v) as f64
                })
                .sum();
            let mean = (sum / x.len() as f64) as f32;
            return RmsScale::Ggml(1.0f32 / (mean + eps.eps as f32).sqrt());
        }
        let mean_sq = x
            .iter()
            .map(|v| {
                let v = v.to_f64_exact();
                v * v
            })
            .sum::<f64>()
            / x.len() as f64;
        RmsScale::Exact(1.0 / (mean_sq + eps.eps).sqrt())
    }

    /// The normed value of `x` with gain `w`.
    #[inline]
    fn apply<S: Real, T: Real>(self, x: S, w: T) -> T {
        match self {
            RmsScale::Exact(inv) => T::of_f64(x.to_f64_exact() * inv * w.to_f64_exact()),
            RmsScale::Ggml(scale) => {
                T::of_f32((x.to_f64_exact() as f32 * scale) * w.to_f64_exact() as f32)
            }
        }
    }
}

/// RMSNorm of every `w.len()`-wide segment of `x` (rows of a matrix, or heads within rows), in parallel.
pub fn rms_norm_segments<T: Real>(x: &mut [T], w: &[T], eps: NormEps) {
    x.par_chunks_mut(w.len())
        .for_each(|seg| rms_norm(seg, w, eps));
}

/// Every `w.len()`-wide row of `x` (the residual stream, kept in f64) RMS-normed in f64 and rounded once to `T`
/// (or in ggml's steps, from the row's float32 values).
pub fn rms_normed<S: Real, T: Real>(x: &[S], w: &[T], eps: NormEps) -> Vec<T> {
    let mut out = vec![T::zero(); x.len()];
    out.par_chunks_mut(w.len())
        .zip(x.par_chunks(w.len()))
        .for_each(|(o, row)| {
            let scale = RmsScale::of(row, eps);
            for ((o, &v), &g) in o.iter_mut().zip(row).zip(w) {
                *o = scale.apply(v, g);
            }
        });
    out
}

/// Every `w.len()`-wide row of `x` LayerNormed, `(x_i − μ) / sqrt(σ² + eps) · w_i + b_i` with the row's mean `μ`
/// and biased variance `σ²`, computed in f64 (two passes) and rounded once to `T`.
pub fn layer_normed<S: Real, T: Real>(x: &[S], w: &[T], b: Option<&[T]>, eps: NormEps) -> Vec<T> {
    let eps = eps.eps;
    let mut out = vec![T::zero(); x.len()];
    out.par_chunks_mut(w.len())
        .zip(x.par_chunks(w.len()))
        .for_each(|(o, row)| {
            let n = row.len() as f64;
            let mean = row.iter().map(|v| v.to_f64_exact()).sum::<f64>() / n;
            let var = row
                .iter()
                .map(|v| {
                    let d = v.to_f64_exact() - mean;
                    d * d
                })
                .sum::<f64>()
                / n;
            let inv = 1.0 / (var + eps).sqrt();
            for (i, (o, v)) in o.iter_mut().zip(row).enumerate() {
                let shift = b.map_or(0.0, |b| b[i].to_f64_exact());
                *o = T::of_f64((v.to_f64_exact() - mean) * inv * w[i].to_f64_exact() + shift);
            }
        });
    out
}

/// `act(x)`, element-wise, in place (the plain feed-forward block).
pub fn activate<T: Real>(x: &mut [T], act: Activation) {
    x.par_chunks_mut(4096).for_each(|c| match act {
        Activation::Silu => c.iter_mut().for_each(|v| *v = silu(*v)),
        Activation::GeluTanh => c.iter_mut().for_each(|v| *v = gelu_tanh(*v)),
        Activation::GeluTanhF16Table => c.iter_mut().for_each(|v| *v = gelu_f16_table(*v)),
        Activation::GeluErf => c.iter_mut().for_each(|v| *v = gelu_erf(*v)),
        // The architectures give the clamped SwiGLU only to gated experts (gpt_oss).
        Activation::ClampedSwiglu { .. } => unreachable!("a clamped SwiGLU needs a gate"),
    });
}

/// SiLU, `x·σ(x)`, through [`logistic`].
#[inline(always)]
fn silu<T: Real>(x: T) -> T {
    x * logistic(x)
}

/// GELU's tanh approximation `½x(1 + tanh u) = x·σ(2u)` with `u = √(2/π)(x + 0.044715x³)`, through
/// [`logistic`].
#[inline(always)]
fn gelu_tanh<T: Real>(x: T) -> T {
    let c = T::of_f64(2.0 * (2.0 / std::f64::consts::PI).sqrt());
    let cubic = T::of_f64(0.044715);
    x * logistic(c * (x + cubic * x * x * x))
}

/// ggml's GELU by table ([`Activation::GeluTanhF16Table`]), from the input's float32 value.
fn gelu_f16_table<T: Real>(x: T) -> T {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    let x = x.to_f64_exact() as f32;
    if x <= -10.0 {
        return T::zero();
    }
    if x >= 10.0 {
        return T::of_f32(x);
    }
    // ggml_table_gelu_f16, filled as ggml-cpu.c fills it: ggml_gelu_f32 in float32 (libm's tanhf) of every
    // float16 value, rounded to float16.
    let table = TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| {
                let f = half::f16::from_bits(bits).to_f32();
                let g = 0.5f32
                    * f
                    * (1.0f32 + (0.797_884_6_f32 * f * (1.0f32 + 0.044715f32 * f * f)).tanh());
                half::f16::from_f32(g).to_f32()
            })
            .collect()
    });
    T::of_f32(table[half::f16::from_f32(x).to_bits() as usize])
}

/// GELU with the error function, `½x(1 + erf(x/√2))`, in f64 (libm's `erf`: std has none) and rounded once.
#[inline(always)]
fn gelu_erf<T: Real>(x: T) -> T {
    let v = x.to_f64_exact();
    T::of_f64(0.5 * v * (1.0 + libm::erf(v * std::f64::consts::FRAC_1_SQRT_2)))
}

/// `act(gate) · up`, element-wise, into `gate`.
pub fn gated<T: Real>(gate: &mut [T], up: &[T], act: Activation) {
    const CHUNK: usize = 4096;
    gate.par_chunks_mut(CHUNK)
        .zip(up.par_chunks(CHUNK))
        .for_each(|(g, u)| gated_chunk(g, u, act));
}

/// [`gated`] on one chunk: SiLU and GELU-tanh go through [`logistic`], so the loop vectorizes; compiled like
/// [`masked_softmax`], with the same bits on every instruction set. The activation is chosen once per chunk,
/// outside the loop.
#[multiversion(targets("x86_64+avx2+fma", "aarch64+neon"))]
fn gated_chunk<T: Real>(gate: &mut [T], up: &[T], act: Activation) {
    gated_chunk_portable(gate, up, act)
}

/// [`gated_chunk`]'s arithmetic, compiled for whichever instruction set its caller is.
#[inline(always)]
fn gated_chunk_portable<T: Real>(gate: &mut [T], up: &[T], act: Activation) {
    let pairs = gate.iter_mut().zip(up);
    match act {
        Activation::Silu => pairs.for_each(|(g, &u)| *g = silu(*g) * u),
        Activation::GeluTanh => pairs.for_each(|(g, &u)| *g = gelu_tanh(*g) * u),
        Activation::GeluTanhF16Table => pairs.for_each(|(g, &u)| *g = gelu_f16_table(*g) * u),
        Activation::GeluErf => pairs.for_each(|(g, &u)| *g = gelu_erf(*g) * u),
        Activation::ClampedSwiglu { alpha, limit } => {
            let (alpha, limit) = (T::of_f64(alpha), T::of_f64(limit));
            pairs.for_each(|(g, &u)| {
                let x = g.min(limit);
                let y = u.max(-limit).min(limit);
                *g = (y + T::one()) * (x * logistic(alpha * x));
            })
        }
    }
}

/// The logistic function `σ(z) = 1/(1 + e^{−z})`, from `e = e^{−|z|} ≤ 1` (so the exponential never
/// overflows): `1/(1 + e)` for `z ≥ 0`, `e/(1 + e)` below. libm's `tanh` and `exp` are a call per element,
/// which kept the feed-forward activations from vectorizing.
#[inline(always)]
fn logistic<T: Real>(z: T) -> T {
    let e = (-z.abs()).exp_nonpositive();
    let s = T::one() / (T::one() + e);
    if z >= T::zero() {
        s
    } else {
        e * s
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
/// vectorizes), their sum in f64, and the quotients by [`Real::divide_all`]. A `sink` logit joins the softmax
/// as one more entry (in the maximum and the sum, as HF's GPT-OSS concatenates it to the row) whose
/// probability is returned; without a sink the return is zero.
///
/// This is the engine's one softmax, apart from the crate's softmax of definitions on f64 slices
/// (`analysis::softmax::softmax_in_place`, libm's `exp`, a left-to-right sum) that the analyses, theory checks
/// and training call: the same mathematics rounded differently (to 4 ulp in f64,
/// `tests::softmax_matches_the_definition_in_f64`), and the bits the f64 engine's outputs are held to.
///
/// Compiled for AVX-512F, AVX2 and NEON besides the baseline, the widest the CPU has chosen at run time. The
/// code has no fused multiply-add to contract, so every version gives the same bits
/// (`tests::softmax_is_the_same_on_every_instruction_set`).
#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
pub fn masked_softmax<T: Real>(
    logits: &[T],
    probs: &mut [T],
    range: std::ops::Range<usize>,
    sink: Option<T>,
) -> T {
    softmax_portable(logits, probs, range, sink)
}

/// [`masked_softmax`]'s arithmetic, compiled for whichever instruction set its caller is.
#[inline(always)]
fn softmax_portable<T: Real>(
    logits: &[T],
    probs: &mut [T],
    range: std::ops::Range<usize>,
    sink: Option<T>,
) -> T {
    probs[..range.start].fill(T::zero());
    probs[range.end..].fill(T::zero());
    let vis = &logits[range.clone()];
    let start = sink.unwrap_or(T::neg_infinity());
    let max = lane_max(vis, start);
    let exps = &mut probs[range];
    for (p, &l) in exps.iter_mut().zip(vis) {
        *p = (l - max).exp_nonpositive();
    }
    let sink_exp = sink.map_or(0.0, |s| (s - max).exp_nonpositive().to_f64_exact());
    let sum = sum_f64(exps) + sink_exp;
    T::divide_all(exps, sum);
    T::of_f64(sink_exp / sum)
}

/// One tile of keys of a row's online softmax (`attention::online`). `max` and `sum` hold the row's
/// running maximum and f64 sum of exponentials over the keys before the tile; they are brought up to the
/// tile's visible scores `row[range]`, which are replaced by `e^(s − max)` at the new maximum (the rest of
/// `row` by 0, masked). Returns the factor `e^(old max − new max)` the sum was multiplied by, and the caller's
/// weighted values must be: 1 where the maximum did not grow, the range is empty, or nothing came before.
///
/// Compiled for the same instruction sets as [`masked_softmax`], with the same bits on every one.
#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
pub fn online_softmax_tile<T: Real>(
    row: &mut [T],
    range: std::ops::Range<usize>,
    max: &mut T,
    sum: &mut f64,
) -> f64 {
    online_tile_portable(row, range, max, sum)
}

/// [`online_softmax_tile`]'s arithmetic, compiled for whichever instruction set its caller is.
#[inline(always)]
fn online_tile_portable<T: Real>(
    row: &mut [T],
    range: std::ops::Range<usize>,
    max: &mut T,
    sum: &mut f64,
) -> f64 {
    if range.is_empty() {
        row.fill(T::zero());
        return 1.0;
    }
    row[..range.start].fill(T::zero());
    row[range.end..].fill(T::zero());
    let exps = &mut row[range];
    let new_max = lane_max(exps, *max);
    // Before the first visible key (and no sink) the sum and the weighted values are zero: nothing to rescale.
    // The factor is taken in f64: it multiplies every term before this tile at once.
    let rescale = if new_max > *max && *max > T::neg_infinity() {
        (max.to_f64_exact() - new_max.to_f64_exact()).exp()
    } else {
        1.0
    };
    for p in exps.iter_mut() {
        *p = (*p - new_max).exp_nonpositive();
    }
    *sum = *sum * rescale + sum_f64(exps);
    *max = new_max;
    rescale
}

/// The largest of `start` and `xs`, taken in 16 independent lanes so that the loop vectorizes (a single
/// running maximum is one dependent comparison per element). The maximum is the same whatever the order: no
/// logit is NaN, and a zero's sign, the one thing the order could change, does not change `l − max`'s
/// exponential.
#[inline(always)]
fn lane_max<T: Real>(xs: &[T], start: T) -> T {
    let mut lanes = [start; 16];
    let chunks = xs.chunks_exact(16);
    let tail = chunks.remainder().iter().copied().fold(start, T::max);
    for c in chunks {
        for (m, &x) in lanes.iter_mut().zip(c) {
            *m = m.max(x);
        }
    }
    lanes.into_iter().fold(tail, T::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ggml's GELU by table: 0 at or below −10, the input at or above 10, and between them the tanh
    /// approximation, in float32, at the float16 rounding of the input, rounded to float16.
    #[test]
    fn ggml_gelu_is_the_float16_table_of_the_tanh_approximation() {
        let reference = |x: f32| {
            let h = half::f16::from_f32(x).to_f32() as f64;
            let g = 0.5
                * h
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (h + 0.044715 * h * h * h)).tanh());
            half::f16::from_f64(g).to_f32()
        };
        for x in [
            -10.0f32, -9.99, -3.3, -0.5, -1e-3, 0.0, 1e-3, 0.7, 1.2345, 4.0, 9.99, 10.0, 25.0,
        ] {
            let got = gelu_f16_table(x);
            if x <= -10.0 {
                assert_eq!(got, 0.0);
            } else if x >= 10.0 {
                assert_eq!(got, x);
            } else {
                // float16 values: equal, or one float16 step apart where float32 and float64 round differently.
                let step = half::f16::from_f32(got).to_f32().abs().max(6.1e-5) * 2f32.powi(-10);
                assert!(
                    (got - reference(x)).abs() <= step,
                    "{x}: {got} against {}",
                    reference(x)
                );
                assert_eq!(
                    half::f16::from_f32(got).to_f32(),
                    got,
                    "{x}: a float16 value"
                );
            }
        }
        // Through the gated path too: act(gate) · up.
        let mut gate = vec![0.7f32, -11.0, 12.0];
        gated(&mut gate, &[2.0, 2.0, 2.0], Activation::GeluTanhF16Table);
        assert_eq!(gate, vec![2.0 * gelu_f16_table(0.7f32), 0.0, 24.0]);
    }

    #[test]
    fn softmax_matches_the_definition_in_f64() {
        let logits: Vec<f64> = (0..37)
            .map(|i| ((i * 7919) % 101) as f64 * 0.37 - 20.0)
            .collect();
        let mut probs = vec![1.0; 40];
        let mut padded = logits.clone();
        padded.extend([5.0, 5.0, 5.0]);
        let no_sink = masked_softmax(&padded, &mut probs, 0..37, None);
        let expect = crate::analysis::softmax::softmax(&logits);
        for (p, e) in probs.iter().zip(&expect) {
            assert!((p - e).abs() <= 4.0 * f64::EPSILON * e, "{p} against {e}");
        }
        assert_eq!(&probs[37..], &[0.0; 3]);
        assert_eq!(no_sink, 0.0);
    }

    /// A sink is one more softmax entry: the row with the sink appended, its last probability the sink's mass,
    /// and the probabilities over the keys sum to one minus it. A sink above every logit sets the maximum.
    #[test]
    fn a_sink_is_one_more_entry_of_the_softmax() {
        let logits: Vec<f64> = (0..21).map(|i| (i as f64 * 1.7).sin() * 4.0).collect();
        for sink in [-3.0, 0.5, 9.0] {
            let mut probs = vec![1.0; 21];
            let mass = masked_softmax(&logits, &mut probs, 2..19, Some(sink));
            let mut row = logits[2..19].to_vec();
            row.push(sink);
            let expect = crate::analysis::softmax::softmax(&row);
            for (p, e) in probs[2..19].iter().zip(&expect) {
                assert!((p - e).abs() <= 4.0 * f64::EPSILON * e, "{p} against {e}");
            }
            assert!((mass - expect[17]).abs() <= 4.0 * f64::EPSILON * expect[17]);
            let total: f64 = probs.iter().sum::<f64>() + mass;
            assert!((total - 1.0).abs() < 1e-15, "{total}");
            assert_eq!(&probs[..2], &[0.0; 2]);
        }
    }

    #[test]
    fn activations_match_their_definitions() {
        let xs: Vec<f64> = (0..=400).map(|i| (i as f64 - 200.0) * 0.05).collect();
        let mut silu = xs.clone();
        gated(&mut silu, &vec![1.0; xs.len()], Activation::Silu);
        let mut gelu = xs.clone();
        gated(&mut gelu, &vec![1.0; xs.len()], Activation::GeluTanh);
        for ((&x, s), g) in xs.iter().zip(&silu).zip(&gelu) {
            let want_silu = x / (1.0 + (-x).exp());
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            let want_gelu = 0.5 * x * (1.0 + u.tanh());
            assert!((s - want_silu).abs() <= 4.0 * f64::EPSILON * want_silu.abs().max(1.0));
            assert!((g - want_gelu).abs() <= 4.0 * f64::EPSILON * want_gelu.abs().max(1.0));
        }
        let mut far = [-100.0f32, -90.0, 90.0, f32::NAN];
        gated(&mut far, &[1.0; 4], Activation::Silu);
        assert_eq!(&far[..3], &[-0.0, -0.0, 90.0]);
        assert!(far[3].is_nan());
    }

    /// The dispatched softmax (AVX2 or NEON where the CPU has it) against the same arithmetic compiled for the
    /// baseline instruction set, bit for bit, in both precisions, on rows longer than any vector and with
    /// tails of every length, and two tiles of the online softmax the same way.
    #[test]
    fn softmax_is_the_same_on_every_instruction_set() {
        fn check<T: Real>() {
            for n in [1, 2, 3, 5, 8, 13, 31, 64, 100, 1027] {
                let logits: Vec<T> = (0..n + 3)
                    .map(|i| T::of_f64(((i * 7919) % 1009) as f64 * 0.031 - 15.0))
                    .collect();
                let (mut fast, mut base) = (vec![T::one(); n + 3], vec![T::one(); n + 3]);
                let sink = Some(T::of_f64(0.25));
                let fast_sink = masked_softmax(&logits, &mut fast, 1..n + 1, sink);
                let base_sink = softmax_portable(&logits, &mut base, 1..n + 1, sink);
                assert_eq!(fast_sink.to_f64_exact(), base_sink.to_f64_exact());
                let bits = |v: &[T]| {
                    v.iter()
                        .map(|x| x.to_f64_exact().to_bits())
                        .collect::<Vec<_>>()
                };
                assert_eq!(bits(&fast), bits(&base), "{} row of {n}", T::NAME);
                // Two tiles of the online softmax, the second raising the maximum: the same bits too.
                let (mut fast, mut base) = (logits.clone(), logits.clone());
                let start = T::of_f64(0.25);
                let (mut fast_state, mut base_state) = ((start, 1.0), (start, 1.0));
                for (tile, scale) in [(0..n / 2, 1.0), (n / 2..n + 3, 3.0)] {
                    let (f, b) = (&mut fast[tile.clone()], &mut base[tile.clone()]);
                    f.iter_mut()
                        .chain(b.iter_mut())
                        .for_each(|x| *x = *x * T::of_f64(scale));
                    let visible = 1.min(f.len())..f.len();
                    let (fm, fs) = &mut fast_state;
                    let (bm, bs) = &mut base_state;
                    let fast_rescale = online_softmax_tile(f, visible.clone(), fm, fs);
                    let base_rescale = online_tile_portable(b, visible, bm, bs);
                    assert_eq!(fast_rescale.to_bits(), base_rescale.to_bits());
                }
                assert_eq!(bits(&fast), bits(&base), "{} online row of {n}", T::NAME);
                assert_eq!(fast_state.0.to_f64_exact(), base_state.0.to_f64_exact());
                assert_eq!(fast_state.1.to_bits(), base_state.1.to_bits());
                let up: Vec<T> = logits.iter().rev().copied().collect();
                for act in [Activation::Silu, Activation::GeluTanh] {
                    let (mut fast, mut base) = (logits.clone(), logits.clone());
                    gated_chunk(&mut fast, &up, act);
                    gated_chunk_portable(&mut base, &up, act);
                    assert_eq!(bits(&fast), bits(&base), "{} {act:?}", T::NAME);
                }
            }
        }
        check::<f32>();
        check::<f64>();
    }
}
