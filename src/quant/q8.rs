//! Activations quantized as llama.cpp's CPU backend quantizes them before a product with a quantized weight.
//!
//! ggml does not multiply a quantized weight by float32 activations: `ggml_compute_forward_mul_mat` first
//! converts each row of activations to the weight type's `vec_dot_type` (`type_traits_cpu` in
//! `ggml/src/ggml-cpu/ggml-cpu.c`), eight-bit quants with a scale per block, and then takes integer dot products
//! block by block ([`super::int_blocks`]). The three such types:
//!
//! - **Q8_0** (with Q4_0, Q5_0 and Q8_0 weights): per 32 values, `d = amax/127` stored as float16 and
//!   `q = round(x · id)`;
//! - **Q8_1** (with Q4_1 and Q5_1): Q8_0's quants and scale, and `s = d · Σq` stored as float16;
//! - **Q8_K** (with the K-quants): per 256 values, `iscale = −127/max` where `max` is the value of largest
//!   magnitude, `q = min(127, round(iscale · x))` rounded half to even, `d = 1/iscale` kept in float32.
//!
//! How Q8_0 and Q8_1 form `id` and round halves depends on the instruction set llama.cpp was built for
//! ([`Q8Rounding`]); Q8_K is quantized by the same scalar code on every one (llama.cpp's AVX2 quantizer of four
//! rows at once, used with repacked Q4_K weights, picks the opposite sign when `+max` and `−max` both occur,
//! which negates both `d` and the quants and leaves every product equal).

use half::f16;
use rayon::prelude::*;

/// The blocks activations are quantized to before a product with a weight type (ggml's `vec_dot_type`).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Q8Kind {
    /// 32 values: a float16 scale and 32 quants.
    Q8_0,
    /// 32 values: as Q8_0, with the float16 sum `d · Σq`.
    Q8_1,
    /// 256 values: a float32 scale and 256 quants.
    Q8_K,
}

impl Q8Kind {
    /// Values per block.
    pub fn block_len(self) -> usize {
        match self {
            Q8Kind::Q8_0 | Q8Kind::Q8_1 => 32,
            Q8Kind::Q8_K => super::QK_K,
        }
    }
}

/// How llama.cpp's Q8_0 and Q8_1 quantizers form the scale's inverse and round halves, which depends on the
/// instruction set it was compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Q8Rounding {
    /// x86 with AVX or AVX2 (`arch/x86/quants.c`): `id = 127/amax`, halves to even.
    X86,
    /// ARM with NEON (`arch/arm/quants.c`): `id = 1/(amax/127)`, halves to even.
    Neon,
    /// The scalar reference (`ggml-quants.c`, other targets): `id = 1/(amax/127)`, halves away from zero.
    Scalar,
}

impl Q8Rounding {
    /// The rounding of a llama.cpp built for the machine this crate is built for.
    pub fn native() -> Self {
        if cfg!(target_arch = "x86_64") {
            Q8Rounding::X86
        } else if cfg!(target_arch = "aarch64") {
            Q8Rounding::Neon
        } else {
            Q8Rounding::Scalar
        }
    }
}

/// `rows` rows of `cols` activations in blocks of one [`Q8Kind`]: each block's quants (widened to i16 for the
/// dot products), its scale, and for Q8_1 its stored sum.
#[derive(Clone, Debug)]
pub struct Q8Rows {
    /// The block type.
    pub kind: Q8Kind,
    /// Values per row.
    pub cols: usize,
    /// `rows × cols` quants.
    pub q: Vec<i16>,
    /// Each block's scale `d` (float16 values for Q8_0 and Q8_1), `rows × cols / block_len`.
    pub d: Vec<f32>,
    /// Q8_1: each block's float16 `d · Σq`; empty otherwise.
    pub s: Vec<f32>,
}

impl Q8Rows {
    /// The rows of `x` (row-major, `cols` each) quantized to `kind` with `rounding`. Panics unless `cols` is a
    /// whole number of blocks and `x` a whole number of rows; the values must be finite.
    pub fn quantize(x: &[f32], cols: usize, kind: Q8Kind, rounding: Q8Rounding) -> Self {
        let len = kind.block_len();
        assert!(cols.is_multiple_of(len) && x.len().is_multiple_of(cols.max(1)));
        let blocks = x.len() / len;
        let mut out = Q8Rows {
            kind,
            cols,
            q: vec![0; x.len()],
            d: Vec::new(),
            s: Vec::new(),
        };
        // Blocks are independent: quantized in parallel, each with its scale and stored sum.
        let mut scales: Vec<(f32, f32)> = Vec::with_capacity(blocks);
        out.q
            .par_chunks_exact_mut(len)
            .zip(x.par_chunks_exact(len))
            .map(|(qb, xb)| match kind {
                Q8Kind::Q8_0 | Q8Kind::Q8_1 => {
                    let (d, sum) = q8_0_block(xb, qb, rounding);
                    let s = f16::from_f32(d * sum as f32).to_f32();
                    (f16::from_f32(d).to_f32(), s)
                }
                Q8Kind::Q8_K => (q8_k_block(xb, qb), 0.0),
            })
            .collect_into_vec(&mut scales);
        out.d = scales.iter().map(|&(d, _)| d).collect();
        if kind == Q8Kind::Q8_1 {
            out.s = scales.iter().map(|&(_, s)| s).collect();
        }
        out
    }
}

/// One block of 32 quantized as Q8_0: writes the quants, returns the unrounded scale `amax/127` and `Σq`.
fn q8_0_block(x: &[f32], q: &mut [i16], rounding: Q8Rounding) -> (f32, i32) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = match rounding {
        Q8Rounding::X86 if amax != 0.0 => 127.0 / amax,
        Q8Rounding::Neon | Q8Rounding::Scalar if d != 0.0 => 1.0 / d,
        _ => 0.0,
    };
    let mut sum = 0;
    for (q, &v) in q.iter_mut().zip(x) {
        let r = match rounding {
            Q8Rounding::X86 | Q8Rounding::Neon => round_half_even(v * id),
            Q8Rounding::Scalar => (v * id).round(),
        };
        // The instructions saturate to the byte range; `|v · id| ≤ 127` up to rounding.
        *q = r.clamp(-128.0, 127.0) as i16;
        sum += *q as i32;
    }
    (d, sum)
}

/// `v` rounded to an integer, halves to even, for `|v| ≤ 2²²`: ggml's `nearest_int`, which adds `1.5·2²³` so
/// that the float32 sum keeps no fraction (inline, where `round_ties_even` is a call to libm's `rintf` on
/// targets without SSE4.1).
#[inline(always)]
fn round_half_even(v: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (v + MAGIC) - MAGIC
}

/// One block of 256 quantized as Q8_K: writes the quants and returns the scale `1/iscale`.
fn q8_k_block(x: &[f32], q: &mut [i16]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax == 0.0 {
        q.fill(0);
        return 0.0;
    }
    let iscale = -127.0 / max;
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (round_half_even(iscale * v) as i32).min(127) as i16;
    }
    1.0 / iscale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q8_0_scales_by_the_largest_magnitude_and_rounds_as_each_instruction_set() {
        // amax 12.7 (scale 0.1): each value's quant follows the instruction set's own `id` and rounding.
        let mut x = vec![0.0f32; 32];
        x[0] = -12.7;
        x[1] = 0.05;
        x[2] = 0.15;
        x[3] = 6.35;
        for rounding in [Q8Rounding::X86, Q8Rounding::Neon, Q8Rounding::Scalar] {
            let r = Q8Rows::quantize(&x, 32, Q8Kind::Q8_1, rounding);
            assert_eq!(r.q[0], -127);
            assert_eq!(r.d[0], f16::from_f32(12.7f32 / 127.0).to_f32());
            let sum: i32 = r.q.iter().map(|&v| v as i32).sum();
            assert_eq!(
                r.s[0],
                f16::from_f32((12.7f32 / 127.0) * sum as f32).to_f32()
            );
            let expect = |v: f32| {
                let id = match rounding {
                    Q8Rounding::X86 => 127.0 / 12.7f32,
                    _ => 1.0 / (12.7f32 / 127.0),
                };
                match rounding {
                    Q8Rounding::Scalar => (v * id).round(),
                    _ => (v * id).round_ties_even(),
                }
            };
            for (i, (&q, &v)) in r.q.iter().zip(&x).enumerate().take(4).skip(1) {
                assert_eq!(q as f32, expect(v), "{rounding:?} value {i}");
            }
        }
        // A block of zeros has scale 0 and quants 0.
        let z = Q8Rows::quantize(&[0.0; 32], 32, Q8Kind::Q8_0, Q8Rounding::X86);
        assert_eq!((z.d[0], z.q.iter().all(|&q| q == 0)), (0.0, true));
    }

    #[test]
    fn halves_round_to_even_on_simd_and_away_from_zero_in_the_scalar_reference() {
        // amax 127 gives id = 1 on every path, so 2.5 is an exact half.
        let mut x = vec![0.0f32; 32];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -3.5;
        let simd = Q8Rows::quantize(&x, 32, Q8Kind::Q8_0, Q8Rounding::X86);
        let scalar = Q8Rows::quantize(&x, 32, Q8Kind::Q8_0, Q8Rounding::Scalar);
        assert_eq!((simd.q[1], simd.q[2]), (2, -4));
        assert_eq!((scalar.q[1], scalar.q[2]), (3, -4));
    }

    #[test]
    fn q8_k_takes_the_signed_maximum_and_keeps_a_float32_scale() {
        let x: Vec<f32> = (0..512)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let r = Q8Rows::quantize(&x, 256, Q8Kind::Q8_K, Q8Rounding::X86);
        assert_eq!((r.q.len(), r.d.len()), (512, 2));
        for (b, xb) in x.chunks(256).enumerate() {
            let max = xb
                .iter()
                .fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
            let iscale = -127.0 / max;
            assert_eq!(r.d[b], 1.0 / iscale);
            for (i, &v) in xb.iter().enumerate() {
                assert_eq!(
                    r.q[b * 256 + i] as f32,
                    (iscale * v).round_ties_even().min(127.0)
                );
            }
            // d · q reproduces each value to within half a step.
            let step = r.d[b].abs();
            assert!(
                xb.iter()
                    .enumerate()
                    .all(|(i, &v)| (r.d[b] * r.q[b * 256 + i] as f32 - v).abs()
                        <= 0.5 * step * 1.0001)
            );
        }
    }
}
