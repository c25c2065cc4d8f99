//! Products of the K-quants' 256-value blocks with Q8_K activations, on 16-bit integers: each block's integer
//! sum kept in 16 lanes, lane `l` summing the products of values `32c + 2l` and `32c + 2l + 1` over the block's
//! 32-value chunks `c`, the sub-block scales folded into the weights (`c·q` fits an i16). The lanes are exact in
//! i32 (`|c·q| ≤ 128·32`, `|qx| ≤ 128`, at most 256 values) and in float32 (below 2^24).

use super::lanes::{Lanes, Portable};
use super::row_terms::{all_rows, BlockProducts};
use super::{Activations, IntRows, Kernel, ACT_ROWS};
use crate::quant::QK_K;
use std::marker::PhantomData;
use std::ops::Range;

kernels!(
    Pairs;
    /// AVX-512BW's `vpmaddwd` on 32 pairs at a time. Written with intrinsics because the compiler does not
    /// vectorize the 256-value blocks' pair sums (it widens every product to 32 bits).
    ("AVX-512BW", ["avx512f", "avx512bw"], avx512, super::lanes::Avx512),
    /// AVX2's `vpmaddwd` on 16 pairs at a time (as [`avx512`], in two halves).
    ("AVX2", ["avx2", "fma"], avx2, super::lanes::Avx2),
);

/// Block products on 16-bit pairs, in lanes `L`.
struct Pairs<L>(PhantomData<L>);

impl<L: PairLanes> BlockProducts for Pairs<L> {
    type L = L;

    #[inline(always)]
    unsafe fn row(
        acc: &mut [L::Acc; ACT_ROWS],
        w: &IntRows,
        r: usize,
        x: &Activations,
        rows: [usize; ACT_ROWS],
    ) {
        let cols = w.cols;
        let n_blocks = cols / QK_K;
        let wr = &w.q[r * cols..(r + 1) * cols];
        let dm = &w.dm[r * n_blocks..(r + 1) * n_blocks];
        // Each activation row's quants and scales as raw pointers, checked once here (as slices they left too
        // few registers for the loop).
        let n = x.q8.d.len() / n_blocks;
        assert!(rows.iter().all(|&a| a < n) && x.q8.q.len() == n * cols);
        // (Loops, not `map`, which the compiler left as calls.)
        let mut xq: [*const i16; ACT_ROWS] = [std::ptr::null(); ACT_ROWS];
        let mut xd: [*const f32; ACT_ROWS] = [std::ptr::null(); ACT_ROWS];
        for (i, &a) in rows.iter().enumerate() {
            xq[i] = x.q8.q[a * cols..].as_ptr();
            xd[i] = x.q8.d[a * n_blocks..].as_ptr();
        }
        for (b, &[dw, _]) in dm.iter().enumerate() {
            let wb: &[i16; QK_K] = wr[b * QK_K..(b + 1) * QK_K].try_into().expect("a block");
            for i in 0..ACT_ROWS {
                // SAFETY: the caller's CPU has `L`'s instruction set; block `b` lies inside every activation
                // row (`rows[i] < n`, `b < n_blocks`).
                acc[i] = unsafe {
                    let xb = &*xq[i].add(b * QK_K).cast::<[i16; QK_K]>();
                    L::add_block(acc[i], wb, xb, dw * *xd[i].add(b))
                };
            }
        }
    }
}

/// How a kernel forms a 256-value block's 16 integer pair lanes and adds them, scaled, into its float32 lanes.
trait PairLanes: Lanes {
    /// `acc + f · lanes`, lane by lane in one fused multiply-add.
    ///
    /// # Safety
    /// The CPU must have the implementation's instruction set.
    unsafe fn add_block(acc: Self::Acc, w: &[i16; QK_K], x: &[i16; QK_K], f: f32) -> Self::Acc;
}

impl PairLanes for Portable {
    #[inline(always)]
    unsafe fn add_block(
        mut acc: [f32; 16],
        w: &[i16; QK_K],
        x: &[i16; QK_K],
        f: f32,
    ) -> [f32; 16] {
        let mut lanes = [0i32; 16];
        for (wc, xc) in w.chunks_exact(32).zip(x.chunks_exact(32)) {
            for (l, lane) in lanes.iter_mut().enumerate() {
                let i = 2 * l;
                *lane += wc[i] as i32 * xc[i] as i32 + wc[i + 1] as i32 * xc[i + 1] as i32;
            }
        }
        for (a, &v) in acc.iter_mut().zip(&lanes) {
            *a = f.mul_add(v as f32, *a);
        }
        acc
    }
}

#[cfg(target_arch = "x86_64")]
impl PairLanes for super::lanes::Avx512 {
    #[inline(always)]
    unsafe fn add_block(acc: Self::Acc, w: &[i16; QK_K], x: &[i16; QK_K], f: f32) -> Self::Acc {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX-512F and BW; chunk `c` of 32 i16 values lies inside both blocks.
        unsafe {
            let mut sum = _mm512_setzero_si512();
            for c in 0..QK_K / 32 {
                let a = _mm512_loadu_si512(w.as_ptr().add(32 * c).cast());
                let b = _mm512_loadu_si512(x.as_ptr().add(32 * c).cast());
                sum = _mm512_add_epi32(sum, _mm512_madd_epi16(a, b));
            }
            _mm512_fmadd_ps(_mm512_set1_ps(f), _mm512_cvtepi32_ps(sum), acc)
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl PairLanes for super::lanes::Avx2 {
    #[inline(always)]
    unsafe fn add_block(
        [lo, hi]: Self::Acc,
        w: &[i16; QK_K],
        x: &[i16; QK_K],
        f: f32,
    ) -> Self::Acc {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX2 and FMA; chunk `c` of 32 i16 values, read in two halves, lies inside both
        // blocks.
        unsafe {
            let (mut slo, mut shi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            for c in 0..QK_K / 32 {
                let wl = _mm256_loadu_si256(w.as_ptr().add(32 * c).cast());
                let wh = _mm256_loadu_si256(w.as_ptr().add(32 * c + 16).cast());
                let xl = _mm256_loadu_si256(x.as_ptr().add(32 * c).cast());
                let xh = _mm256_loadu_si256(x.as_ptr().add(32 * c + 16).cast());
                slo = _mm256_add_epi32(slo, _mm256_madd_epi16(wl, xl));
                shi = _mm256_add_epi32(shi, _mm256_madd_epi16(wh, xh));
            }
            let f = _mm256_set1_ps(f);
            [
                _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(slo), lo),
                _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(shi), hi),
            ]
        }
    }
}
