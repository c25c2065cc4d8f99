//! Products of the 32-value blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with Q8_0 or Q8_1 activations, on bytes:
//! each block's integer sum kept in 8 lanes, lane `j` summing the products of values `4j` to `4j + 3`, and the
//! blocks taken two at a time, the first's lanes added into float32 lanes 0–7, the second's into 8–15 (a last
//! block of an odd count pairs with a block of zeros under a factor 0, which adds +0 and changes no lane). A
//! lane is exact in i32 and in float32 (`|q| ≤ 128`, `|qx| ≤ 127`: at most 65,024).
//!
//! The weights' integers fit a signed byte (`q − 8` or `q − 16`, `q`, or Q8_0's byte), and the activations'
//! quants lie in `[−127, 127]`: the instruction sets multiply them as bytes, 64 values an instruction with
//! AVX-512 VNNI (`vpdpbusd`, unsigned by signed, the activations offset by 128 and the offset's product taken
//! back with the weights' own sums) and 32 with AVX2 (`vpmaddubsw` on the weights' magnitudes and the
//! activations with the weights' signs, as ggml does, then `vpmaddwd` by ones).

use super::lanes::{Lanes, Portable};
use super::{Activations, BytePair, IntRows, Kernel, Offset, ACT_ROWS};
use std::ops::Range;

kernels!(
    rows;
    /// AVX-512 VNNI's `vpdpbusd` on 64 byte products at a time.
    ("AVX-512 VNNI", ["avx512f", "avx512bw", "avx512vnni"], avx512_vnni, super::lanes::Avx512),
    /// AVX2's `vpmaddubsw` and `vpmaddwd` on 32 byte products at a time.
    ("AVX2", ["avx2", "fma"], avx2, super::lanes::Avx2),
);

/// [`IntRows::dots`] on bytes, in lanes `L`: per weight row, each block pair's products added into the 16
/// float32 lanes of every slot, then the lanes' fixed float64 total ([`Lanes::totals`]) plus the min terms.
///
/// # Safety
/// The CPU must have `L`'s instruction sets.
#[inline(always)]
unsafe fn rows<L: QuadLanes>(w: &IntRows, x: &Activations, xs: Range<usize>, out: &mut [f32], ld: usize) {
    // Every slot takes a row of `xs` (the last one repeated where `xs` is short), so the loops over slots have
    // a fixed length and their accumulators stay in registers.
    let slots: [usize; ACT_ROWS] = std::array::from_fn(|i| (xs.start + i).min(xs.end - 1));
    // Rows of weights and of activations are padded to whole pairs of blocks, with zeros under factors 0.
    let pairs = (w.cols / 32).div_ceil(2);
    // Each activation row's bytes, offset bytes and pair scales as raw pointers, checked once here: as slices
    // (a pointer and a length each, twelve in all) they left too few registers for the loop.
    let n = x.rows;
    assert!(slots.iter().all(|&a| a < n) && x.bytes.len() == n * 64 * pairs);
    assert!(x.offset_bytes.len() == x.bytes.len() && x.pair_scales.len() == n * pairs);
    // (Loops, not `map`, which the compiler left as calls.)
    let mut xb: [*const [i8; 64]; ACT_ROWS] = [std::ptr::null(); ACT_ROWS];
    let mut xu: [*const [u8; 64]; ACT_ROWS] = [std::ptr::null(); ACT_ROWS];
    let mut xd: [*const [f32; 16]; ACT_ROWS] = [std::ptr::null(); ACT_ROWS];
    for (i, &a) in slots.iter().enumerate() {
        xb[i] = x.bytes[a * 64 * pairs..].as_ptr().cast();
        xu[i] = x.offset_bytes[a * 64 * pairs..].as_ptr().cast();
        xd[i] = x.pair_scales[a * pairs..].as_ptr();
    }
    for (r, wp) in w.pairs.chunks_exact(pairs.max(1)).enumerate().take(w.rows) {
        // SAFETY (here and below): the caller's CPU has `L`'s instruction set.
        let mut acc = [unsafe { L::zero() }; ACT_ROWS];
        for (p, pair) in wp.iter().enumerate() {
            // Pair `p` lies inside every activation row (`slots[i] < n`, `p < pairs`).
            let wv = unsafe { L::weights(pair) };
            for i in 0..ACT_ROWS {
                acc[i] = unsafe { L::add_pair(acc[i], &wv, &*xb[i].add(p), &*xu[i].add(p), &*xd[i].add(p)) };
            }
        }
        let mins = block_mins(w, r, x, slots);
        let terms = unsafe { L::totals(acc) };
        for i in 0..xs.len() {
            out[i * ld + r] = (terms[i] + mins[i]) as f32;
        }
    }
}

/// For weight row `r` and the activation rows `rows`: Q4_1's and Q5_1's min terms `Σ_blocks fl(M·s)`, with
/// Q8_1's sums `s`, added in float32 in block order as ggml adds them (zero for the other types). A pass of
/// its own, so that the loop of block products holds nothing else; the rows' sums are independent, so their
/// additions overlap.
#[inline(always)]
fn block_mins(w: &IntRows, r: usize, x: &Activations, rows: [usize; ACT_ROWS]) -> [f64; ACT_ROWS] {
    let mut sums = [0.0f32; ACT_ROWS];
    if w.layout.offset == Offset::Block {
        let n_blocks = w.cols / 32;
        let dm = &w.dm[r * n_blocks..(r + 1) * n_blocks];
        // (Loops, not `map`, which the compiler left as calls.)
        let mut s: [&[f32]; ACT_ROWS] = [&[]; ACT_ROWS];
        for (s, &a) in s.iter_mut().zip(&rows) {
            *s = &x.q8.s[a * n_blocks..(a + 1) * n_blocks];
        }
        for (b, &[_, mw]) in dm.iter().enumerate() {
            for (m, s) in sums.iter_mut().zip(&s) {
                *m += mw * s[b];
            }
        }
    }
    let mut terms = [0.0; ACT_ROWS];
    for (t, &m) in terms.iter_mut().zip(&sums) {
        *t = m as f64;
    }
    terms
}

/// How a kernel forms two 32-value blocks' integer quad lanes and adds them, scaled, into its float32 lanes.
trait QuadLanes: Lanes {
    /// What the kernel keeps of a pair of weight blocks for every activation row.
    type W;

    /// The pair of weight blocks as the kernel reads them.
    ///
    /// # Safety
    /// The CPU must have the implementation's instruction set.
    unsafe fn weights(pair: &BytePair) -> Self::W;

    /// `acc + f · lanes`, lane by lane in one fused multiply-add, where lanes 0–7 hold the first block's quad
    /// sums of `w · x` with the factor `f = fl(D·d)` of its `D` and the activations' scale `d` (`d[0..8]`),
    /// and lanes 8–15 the second's (`d[8..16]`). The activations come as signed bytes `x` and as
    /// `xu = x + 128`, unsigned: each kernel reads the form its instructions take.
    ///
    /// # Safety
    /// As [`QuadLanes::weights`].
    unsafe fn add_pair(
        acc: Self::Acc,
        w: &Self::W,
        x: &[i8; 64],
        xu: &[u8; 64],
        d: &[f32; 16],
    ) -> Self::Acc;
}

impl QuadLanes for Portable {
    /// The weights and the two `D`.
    type W = ([i8; 64], [f32; 2]);

    #[inline(always)]
    unsafe fn weights(pair: &BytePair) -> Self::W {
        (pair.w, [pair.d[0], pair.d[8]])
    }

    #[inline(always)]
    unsafe fn add_pair(
        mut acc: [f32; 16],
        (w, dw): &Self::W,
        x: &[i8; 64],
        _: &[u8; 64],
        d: &[f32; 16],
    ) -> [f32; 16] {
        let f = [dw[0] * d[0], dw[1] * d[8]];
        for (l, a) in acc.iter_mut().enumerate() {
            let quad = 4 * l;
            let s: i32 = (quad..quad + 4).map(|i| w[i] as i32 * x[i] as i32).sum();
            *a = f[l / 8].mul_add(s as f32, *a);
        }
        acc
    }
}

#[cfg(target_arch = "x86_64")]
impl QuadLanes for super::lanes::Avx512 {
    /// The weights, minus 128 times each quad's sum of them, and the two `D` across lanes 0–7 and 8–15.
    type W = (
        std::arch::x86_64::__m512i,
        std::arch::x86_64::__m512i,
        std::arch::x86_64::__m512,
    );

    #[inline(always)]
    unsafe fn weights(pair: &BytePair) -> Self::W {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX-512F; the loads read `pair`'s fields, 64 bytes each.
        unsafe {
            (
                _mm512_loadu_si512(pair.w.as_ptr().cast()),
                _mm512_loadu_si512(pair.minus_offset.as_ptr().cast()),
                _mm512_loadu_ps(pair.d.as_ptr()),
            )
        }
    }

    #[inline(always)]
    unsafe fn add_pair(
        acc: Self::Acc,
        (wv, minus_offset, dw): &Self::W,
        _: &[i8; 64],
        xu: &[u8; 64],
        d: &[f32; 16],
    ) -> Self::Acc {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX-512F and VNNI; the 64 bytes are `xu`'s, the 16 floats `d`'s.
        unsafe {
            // Σ (x + 128)·w − 128·Σ w = Σ x·w, exactly.
            let lanes = _mm512_dpbusd_epi32(*minus_offset, _mm512_loadu_si512(xu.as_ptr().cast()), *wv);
            let f = _mm512_mul_ps(*dw, _mm512_loadu_ps(d.as_ptr()));
            _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(lanes), acc)
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl QuadLanes for super::lanes::Avx2 {
    /// Each block's weight magnitudes (unsigned) and weights, and the two `D`.
    type W = ([std::arch::x86_64::__m256i; 4], [f32; 2]);

    #[inline(always)]
    unsafe fn weights(pair: &BytePair) -> Self::W {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX2; the 64 bytes are `pair.w`'s.
        unsafe {
            let w0 = _mm256_loadu_si256(pair.w.as_ptr().cast());
            let w1 = _mm256_loadu_si256(pair.w.as_ptr().add(32).cast());
            // |−128| is 0x80, 128 as an unsigned byte.
            (
                [_mm256_abs_epi8(w0), w0, _mm256_abs_epi8(w1), w1],
                [pair.d[0], pair.d[8]],
            )
        }
    }

    #[inline(always)]
    unsafe fn add_pair(
        [lo, hi]: Self::Acc,
        ([a0, w0, a1, w1], dw): &Self::W,
        x: &[i8; 64],
        _: &[u8; 64],
        d: &[f32; 16],
    ) -> Self::Acc {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX2 and FMA; the 64 bytes are `x`'s.
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let x0 = _mm256_loadu_si256(x.as_ptr().cast());
            let x1 = _mm256_loadu_si256(x.as_ptr().add(32).cast());
            // |w|·(sign(w)·x) = w·x; a pair of them is at most 2·128·127, inside the saturating i16 sum.
            let l0 = _mm256_madd_epi16(_mm256_maddubs_epi16(*a0, _mm256_sign_epi8(x0, *w0)), ones);
            let l1 = _mm256_madd_epi16(_mm256_maddubs_epi16(*a1, _mm256_sign_epi8(x1, *w1)), ones);
            let (f0, f1) = (_mm256_set1_ps(dw[0] * d[0]), _mm256_set1_ps(dw[1] * d[8]));
            [
                _mm256_fmadd_ps(f0, _mm256_cvtepi32_ps(l0), lo),
                _mm256_fmadd_ps(f1, _mm256_cvtepi32_ps(l1), hi),
            ]
        }
    }
}
