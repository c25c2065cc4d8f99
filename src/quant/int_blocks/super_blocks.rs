//! Products of the K-quants' 256-value blocks (ggml's super-blocks: Q2_K to Q6_K) with Q8_K activations, on
//! bytes, sixteen weight rows at a time: every vector holds one lane per weight row of a [`RowBlock`], so a
//! sub-block's products add up in its lanes before its scale multiplies them once.
//!
//! Per weight row, activation row and block, the integer sum `Σ c·q·qx` (`c` the value's sub-block scale) is
//! formed exactly in i32: the quants `q` as signed bytes (`q`, `q − 32` for Q6_K, `q − 4` for Q3_K), the
//! activations offset by 128 as unsigned bytes, four products at a time (`vpdpbusd` with AVX-512 VNNI,
//! `vpmaddubsw` and `vpmaddwd` with AVX2), the sums of each sub-block multiplied by its scale, and the
//! offset's product taken back with the weights' own sums (`−128 · Σ c·q`, kept with the block). That sum is
//! converted to float32 (rounded to nearest beyond 2^24, as ggml's conversions are) and added in float32 in
//! block order by one fused multiply-add with `fl(D·d)`. The sub-block mins of Q2_K, Q4_K and Q5_K
//! (`−fl(d·M) · Σ_g m_g·s_g`, `s_g` the activations' sub-block sums, an exact integer) go the same way into a
//! second float32 sum, as ggml keeps its mins apart; the result is the two sums added in float64 and rounded
//! once. Every step is fixed, so the bits are the same on every instruction set.

use super::{Activations, IntRows, Kernel, Offset, RowBlock, ACT_ROWS, ROW_GROUP};
use crate::quant::QK_K;
use std::ops::Range;

kernels!(
    rows;
    /// AVX-512 VNNI's `vpdpbusd`: four products for each of the 16 rows an instruction.
    ("AVX-512 VNNI", ["avx512f", "avx512bw", "avx512vnni"], avx512_vnni, super::lanes::Avx512),
    /// AVX2's `vpmaddubsw` and `vpmaddwd` on the 16 rows in two vectors.
    ("AVX2", ["avx2", "fma"], avx2, super::lanes::Avx2),
);

/// [`IntRows::dots`] of 256-value blocks with the operations of `V`.
///
/// # Safety
/// The CPU must have `V`'s instruction sets.
#[inline(always)]
unsafe fn rows<V: RowOps>(w: &IntRows, x: &Activations, xs: Range<usize>, out: &mut [f32], ld: usize) {
    let cols = w.cols;
    let n_blocks = cols / QK_K;
    let n = x.rows;
    let mins = w.layout.offset == Offset::SubBlocks;
    // Each activation row's bytes, scales and sub-block sums as raw pointers, checked once here.
    assert!(xs.end <= n && x.offset_bytes.len() == n * cols && x.q8.d.len() == n * n_blocks);
    assert!(!mins || x.sums.len() == n * n_blocks);
    assert_eq!(w.row_blocks.len(), w.rows.div_ceil(ROW_GROUP) * n_blocks);
    // Every slot takes a row of `xs` (the last one repeated where `xs` is short), so the loops over slots have
    // a fixed length and their accumulators stay in registers.
    let mut acts = Slots {
        xu: [std::ptr::null(); ACT_ROWS],
        d: [std::ptr::null(); ACT_ROWS],
        sums: [std::ptr::null(); ACT_ROWS],
    };
    // (Loops, not `map`, which the compiler left as calls.)
    for i in 0..ACT_ROWS {
        let a = (xs.start + i).min(xs.end - 1);
        acts.xu[i] = x.offset_bytes[a * cols..].as_ptr();
        acts.d[i] = x.q8.d[a * n_blocks..].as_ptr();
        if mins {
            acts.sums[i] = x.sums[a * n_blocks..].as_ptr();
        }
    }
    for (g, blocks) in w.row_blocks.chunks_exact(n_blocks.max(1)).enumerate() {
        // SAFETY: the CPU has `V`'s instruction sets; every block of `blocks` lies inside each activation row.
        let sums = unsafe {
            match (mins, w.layout.group) {
                (true, 32) => products::<V, true, 8>(blocks, &acts),
                (true, _) => products::<V, true, 4>(blocks, &acts),
                (false, 32) => products::<V, false, 8>(blocks, &acts),
                (false, _) => products::<V, false, 4>(blocks, &acts),
            }
        };
        let (first, live) = (g * ROW_GROUP, (w.rows - g * ROW_GROUP).min(ROW_GROUP));
        for (i, sums) in sums.iter().enumerate().take(xs.len()) {
            out[i * ld + first..][..live].copy_from_slice(&sums[..live]);
        }
    }
}

/// Where each slot's activation row starts: its quants plus 128, its block scales `d`, its sub-block sums (null
/// without sub-block mins).
struct Slots {
    xu: [*const u8; ACT_ROWS],
    d: [*const f32; ACT_ROWS],
    sums: [*const [i16; 16]; ACT_ROWS],
}

/// The 16 rows of `blocks` (one row group, in block order) times each slot's activation row, for sub-blocks of
/// `4·QUADS` values, with the mins' sum where `MINS`.
///
/// # Safety
/// The CPU must have `V`'s instruction sets; each slot's row holds at least `blocks.len()` blocks.
#[inline(always)]
unsafe fn products<V: RowOps, const MINS: bool, const QUADS: usize>(
    blocks: &[RowBlock],
    x: &Slots,
) -> [[f32; ROW_GROUP]; ACT_ROWS] {
    // SAFETY (every block below): as this function's; block `b` of each slot's row lies inside it, and the
    // quad `4j` of the block inside the block.
    unsafe {
        let mut acc = [V::f_zero(); ACT_ROWS];
        let mut min_acc = [V::f_zero(); ACT_ROWS];
        for (b, blk) in blocks.iter().enumerate() {
            let mut sum = [V::load(&blk.minus_offset); ACT_ROWS];
            for s in 0..64 / QUADS {
                // Two partial sums per slot, so that more products are in flight.
                let mut t = [[V::zero(); 2]; ACT_ROWS];
                for j in (s * QUADS..(s + 1) * QUADS).step_by(2) {
                    let (q0, q1) = (V::load_q(&blk.q[j]), V::load_q(&blk.q[j + 1]));
                    for (t, xu) in t.iter_mut().zip(&x.xu) {
                        let xq = xu.add(QK_K * b + 4 * j);
                        t[0] = V::dot(t[0], q0, xq.cast::<[u8; 4]>().read());
                        t[1] = V::dot(t[1], q1, xq.add(4).cast::<[u8; 4]>().read());
                    }
                }
                let c = V::load(&blk.c[s]);
                for i in 0..ACT_ROWS {
                    sum[i] = V::add(sum[i], V::mul(V::add(t[i][0], t[i][1]), c));
                }
            }
            for i in 0..ACT_ROWS {
                let d = *x.d[i].add(b);
                acc[i] = V::fma(acc[i], &blk.d, d, sum[i]);
                if MINS {
                    let sums = &*x.sums[i].add(b);
                    let mut m = V::zero();
                    for (pair, s) in blk.m.iter().zip(sums.chunks_exact(2)).take(32 / QUADS) {
                        m = V::add(m, V::madd(pair, [s[0], s[1]]));
                    }
                    // (`fl(−M·d) = −fl(M·d)`: the term is subtracted.)
                    min_acc[i] = V::fma(min_acc[i], &blk.minus_m, d, m);
                }
            }
        }
        let mut out = [[0.0; ROW_GROUP]; ACT_ROWS];
        for i in 0..ACT_ROWS {
            out[i] = V::finish(acc[i], min_acc[i]);
        }
        out
    }
}

/// The operations of the kernel on 16 lanes, one per weight row, in an instruction set.
trait RowOps {
    /// 16 i32 lanes.
    type I: Copy;
    /// 16 float32 lanes.
    type F: Copy;
    /// A quad of 16 rows' quants as loaded.
    type Q: Copy;

    /// Lanes of zeros.
    ///
    /// # Safety
    /// The CPU must have the implementation's instruction set (every method).
    unsafe fn zero() -> Self::I;
    /// The lanes `v`.
    unsafe fn load(v: &[i32; ROW_GROUP]) -> Self::I;
    /// A quad of 16 rows' quants (row `r`'s four in bytes `4r` to `4r + 3`).
    unsafe fn load_q(q: &[i8; 64]) -> Self::Q;
    /// `t + Σ_k x[k]·q[4r + k]` in lane `r`.
    unsafe fn dot(t: Self::I, q: Self::Q, x: [u8; 4]) -> Self::I;
    /// `a + b`.
    unsafe fn add(a: Self::I, b: Self::I) -> Self::I;
    /// `a · c`.
    unsafe fn mul(a: Self::I, c: Self::I) -> Self::I;
    /// `lo(p)·s[0] + hi(p)·s[1]` in lane `r`, `lo` and `hi` the 16-bit halves of `p[r]`.
    unsafe fn madd(p: &[i32; ROW_GROUP], s: [i16; 2]) -> Self::I;
    /// Lanes of float32 zeros.
    unsafe fn f_zero() -> Self::F;
    /// `acc + fl(f·d) · v` in one rounding, `v` converted to float32.
    unsafe fn fma(acc: Self::F, f: &[f32; ROW_GROUP], d: f32, v: Self::I) -> Self::F;
    /// `a + b` in float64, rounded to float32.
    unsafe fn finish(a: Self::F, b: Self::F) -> [f32; ROW_GROUP];
}

impl RowOps for super::lanes::Portable {
    type I = [i32; ROW_GROUP];
    type F = [f32; ROW_GROUP];
    type Q = [i8; 64];

    #[inline(always)]
    unsafe fn zero() -> Self::I {
        [0; ROW_GROUP]
    }

    #[inline(always)]
    unsafe fn load(v: &[i32; ROW_GROUP]) -> Self::I {
        *v
    }

    #[inline(always)]
    unsafe fn load_q(q: &[i8; 64]) -> Self::Q {
        *q
    }

    #[inline(always)]
    unsafe fn dot(mut t: Self::I, q: Self::Q, x: [u8; 4]) -> Self::I {
        for (t, q) in t.iter_mut().zip(q.chunks_exact(4)) {
            *t += (0..4).map(|k| x[k] as i32 * q[k] as i32).sum::<i32>();
        }
        t
    }

    #[inline(always)]
    unsafe fn add(mut a: Self::I, b: Self::I) -> Self::I {
        for (a, b) in a.iter_mut().zip(b) {
            *a += b;
        }
        a
    }

    #[inline(always)]
    unsafe fn mul(mut a: Self::I, c: Self::I) -> Self::I {
        for (a, c) in a.iter_mut().zip(c) {
            *a *= c;
        }
        a
    }

    #[inline(always)]
    unsafe fn madd(p: &[i32; ROW_GROUP], s: [i16; 2]) -> Self::I {
        std::array::from_fn(|r| (p[r] as i16) as i32 * s[0] as i32 + (p[r] >> 16) * s[1] as i32)
    }

    #[inline(always)]
    unsafe fn f_zero() -> Self::F {
        [0.0; ROW_GROUP]
    }

    #[inline(always)]
    unsafe fn fma(mut acc: Self::F, f: &[f32; ROW_GROUP], d: f32, v: Self::I) -> Self::F {
        for ((a, &f), v) in acc.iter_mut().zip(f).zip(v) {
            *a = (f * d).mul_add(v as f32, *a);
        }
        acc
    }

    #[inline(always)]
    unsafe fn finish(a: Self::F, b: Self::F) -> [f32; ROW_GROUP] {
        std::array::from_fn(|r| (a[r] as f64 + b[r] as f64) as f32)
    }
}

#[cfg(target_arch = "x86_64")]
impl RowOps for super::lanes::Avx512 {
    type I = std::arch::x86_64::__m512i;
    type F = std::arch::x86_64::__m512;
    type Q = std::arch::x86_64::__m512i;

    // SAFETY (every method): the caller's CPU has AVX-512F, BW and VNNI; every load reads the 64 bytes of
    // its argument.
    #[inline(always)]
    unsafe fn zero() -> Self::I {
        unsafe { std::arch::x86_64::_mm512_setzero_si512() }
    }

    #[inline(always)]
    unsafe fn load(v: &[i32; ROW_GROUP]) -> Self::I {
        unsafe { std::arch::x86_64::_mm512_loadu_si512(v.as_ptr().cast()) }
    }

    #[inline(always)]
    unsafe fn load_q(q: &[i8; 64]) -> Self::Q {
        unsafe { std::arch::x86_64::_mm512_loadu_si512(q.as_ptr().cast()) }
    }

    #[inline(always)]
    unsafe fn dot(t: Self::I, q: Self::Q, x: [u8; 4]) -> Self::I {
        use std::arch::x86_64::*;
        unsafe { _mm512_dpbusd_epi32(t, _mm512_set1_epi32(i32::from_le_bytes(x)), q) }
    }

    #[inline(always)]
    unsafe fn add(a: Self::I, b: Self::I) -> Self::I {
        unsafe { std::arch::x86_64::_mm512_add_epi32(a, b) }
    }

    #[inline(always)]
    unsafe fn mul(a: Self::I, c: Self::I) -> Self::I {
        unsafe { std::arch::x86_64::_mm512_mullo_epi32(a, c) }
    }

    #[inline(always)]
    unsafe fn madd(p: &[i32; ROW_GROUP], s: [i16; 2]) -> Self::I {
        use std::arch::x86_64::*;
        unsafe {
            let s = (s[0] as u16 as u32 | (s[1] as u16 as u32) << 16) as i32;
            _mm512_madd_epi16(_mm512_loadu_si512(p.as_ptr().cast()), _mm512_set1_epi32(s))
        }
    }

    #[inline(always)]
    unsafe fn f_zero() -> Self::F {
        unsafe { std::arch::x86_64::_mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn fma(acc: Self::F, f: &[f32; ROW_GROUP], d: f32, v: Self::I) -> Self::F {
        use std::arch::x86_64::*;
        unsafe {
            let f = _mm512_mul_ps(_mm512_loadu_ps(f.as_ptr()), _mm512_set1_ps(d));
            _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(v), acc)
        }
    }

    #[inline(always)]
    unsafe fn finish(a: Self::F, b: Self::F) -> [f32; ROW_GROUP] {
        use std::arch::x86_64::*;
        unsafe {
            // (No closure for the high halves: it would not inherit the kernel's instruction sets.)
            let halves = [
                (_mm512_castps512_ps256(a), _mm512_castps512_ps256(b)),
                (
                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)),
                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(b), 1)),
                ),
            ];
            let mut out = [0.0; ROW_GROUP];
            for (h, (a, b)) in halves.into_iter().enumerate() {
                let sum = _mm512_add_pd(_mm512_cvtps_pd(a), _mm512_cvtps_pd(b));
                _mm256_storeu_ps(out.as_mut_ptr().add(8 * h), _mm512_cvtpd_ps(sum));
            }
            out
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl RowOps for super::lanes::Avx2 {
    type I = [std::arch::x86_64::__m256i; 2];
    type F = [std::arch::x86_64::__m256; 2];
    type Q = [std::arch::x86_64::__m256i; 2];

    // SAFETY (every method): the caller's CPU has AVX2 and FMA; every load reads 32 bytes inside its argument.
    #[inline(always)]
    unsafe fn zero() -> Self::I {
        unsafe { [std::arch::x86_64::_mm256_setzero_si256(); 2] }
    }

    #[inline(always)]
    unsafe fn load(v: &[i32; ROW_GROUP]) -> Self::I {
        use std::arch::x86_64::*;
        unsafe { [_mm256_loadu_si256(v.as_ptr().cast()), _mm256_loadu_si256(v.as_ptr().add(8).cast())] }
    }

    #[inline(always)]
    unsafe fn load_q(q: &[i8; 64]) -> Self::Q {
        use std::arch::x86_64::*;
        unsafe { [_mm256_loadu_si256(q.as_ptr().cast()), _mm256_loadu_si256(q.as_ptr().add(32).cast())] }
    }

    #[inline(always)]
    unsafe fn dot([t0, t1]: Self::I, [q0, q1]: Self::Q, x: [u8; 4]) -> Self::I {
        use std::arch::x86_64::*;
        unsafe {
            // (x + 128)·q + (x' + 128)·q' is at most 2·255·32 in magnitude: the i16 sums do not saturate.
            let (x, ones) = (_mm256_set1_epi32(i32::from_le_bytes(x)), _mm256_set1_epi16(1));
            [
                _mm256_add_epi32(t0, _mm256_madd_epi16(_mm256_maddubs_epi16(x, q0), ones)),
                _mm256_add_epi32(t1, _mm256_madd_epi16(_mm256_maddubs_epi16(x, q1), ones)),
            ]
        }
    }

    #[inline(always)]
    unsafe fn add([a0, a1]: Self::I, [b0, b1]: Self::I) -> Self::I {
        use std::arch::x86_64::*;
        unsafe { [_mm256_add_epi32(a0, b0), _mm256_add_epi32(a1, b1)] }
    }

    #[inline(always)]
    unsafe fn mul([a0, a1]: Self::I, [c0, c1]: Self::I) -> Self::I {
        use std::arch::x86_64::*;
        unsafe { [_mm256_mullo_epi32(a0, c0), _mm256_mullo_epi32(a1, c1)] }
    }

    #[inline(always)]
    unsafe fn madd(p: &[i32; ROW_GROUP], s: [i16; 2]) -> Self::I {
        use std::arch::x86_64::*;
        unsafe {
            let s = _mm256_set1_epi32((s[0] as u16 as u32 | (s[1] as u16 as u32) << 16) as i32);
            let [p0, p1] = Self::load(p);
            [_mm256_madd_epi16(p0, s), _mm256_madd_epi16(p1, s)]
        }
    }

    #[inline(always)]
    unsafe fn f_zero() -> Self::F {
        unsafe { [std::arch::x86_64::_mm256_setzero_ps(); 2] }
    }

    #[inline(always)]
    unsafe fn fma([a0, a1]: Self::F, f: &[f32; ROW_GROUP], d: f32, [v0, v1]: Self::I) -> Self::F {
        use std::arch::x86_64::*;
        unsafe {
            let d = _mm256_set1_ps(d);
            let (f0, f1) = (_mm256_loadu_ps(f.as_ptr()), _mm256_loadu_ps(f.as_ptr().add(8)));
            [
                _mm256_fmadd_ps(_mm256_mul_ps(f0, d), _mm256_cvtepi32_ps(v0), a0),
                _mm256_fmadd_ps(_mm256_mul_ps(f1, d), _mm256_cvtepi32_ps(v1), a1),
            ]
        }
    }

    #[inline(always)]
    unsafe fn finish(a: Self::F, b: Self::F) -> [f32; ROW_GROUP] {
        use std::arch::x86_64::*;
        unsafe {
            let mut out = [0.0; ROW_GROUP];
            for h in 0..2 {
                for (k, lo) in [true, false].into_iter().enumerate() {
                    let (x, y) = match lo {
                        true => (_mm256_castps256_ps128(a[h]), _mm256_castps256_ps128(b[h])),
                        false => (_mm256_extractf128_ps(a[h], 1), _mm256_extractf128_ps(b[h], 1)),
                    };
                    let sum = _mm256_add_pd(_mm256_cvtps_pd(x), _mm256_cvtps_pd(y));
                    _mm_storeu_ps(out.as_mut_ptr().add(8 * h + 4 * k), _mm256_cvtpd_ps(sum));
                }
            }
            out
        }
    }
}
