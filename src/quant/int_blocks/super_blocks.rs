//! Products of the K-quants' 256-value blocks (ggml's super-blocks: Q2_K to Q6_K) with Q8_K activations, on
//! bytes: each block's integer sum kept in 16 lanes, lane `l` summing `c·q·qx` over the values `p` with
//! `(p mod 64) / 4 = l` (four consecutive values of each 64-value group), where `c` is the value's sub-block
//! scale. A lane is exact in i32 and in float32 (`|c·q| ≤ 128·32` over 16 values, `|qx| ≤ 128`: below
//! 2^23).
//!
//! The weights' quants without their scales fit a signed byte (`q`, or `q − 32` for Q6_K, `q − 4` for Q3_K),
//! the sub-block scales a 16-bit integer: the instruction sets multiply each value as bytes, 64 values an
//! instruction with AVX-512BW and 32 with AVX2 (`vpmaddubsw`, the activations offset by 128 as the unsigned
//! side, into 16-bit pair sums), then each pair by its scale and adjacent pairs together (`vpmaddwd`, into the
//! quad lanes); the offset's product is taken back with the weights' own lane sums, so the lanes are exact.
//!
//! The sub-block mins of Q2_K, Q4_K and Q5_K (`−fl(d·M) · Σ_g m_g·Σ_g qx`) are kept in 8 more float32 lanes,
//! as ggml's x86 kernels keep theirs: lane `j` takes `m_2j·s_2j + m_2j+1·s_2j+1` (the sub-blocks' mins and
//! activation sums `s`, zeros past their count; exact integers) by one fused multiply-add per block, and the
//! lanes are summed in a fixed float64 tree at the end.

use super::lanes::{Lanes, Portable};
use super::row_terms::{all_rows, BlockProducts};
use super::{Activations, IntRows, Kernel, Offset, SuperBlock, ACT_ROWS};
use crate::quant::QK_K;
use std::marker::PhantomData;
use std::ops::Range;

kernels!(
    SuperBlocks;
    /// AVX-512BW's `vpmaddubsw` and `vpmaddwd` on 64 values at a time.
    ("AVX-512BW", ["avx512f", "avx512bw"], avx512, super::lanes::Avx512),
    /// AVX2's `vpmaddubsw` and `vpmaddwd` on 32 values at a time (as [`avx512`], in two halves).
    ("AVX2", ["avx2", "fma"], avx2, super::lanes::Avx2),
);

/// Block products of 256-value blocks on bytes, in lanes `L`.
struct SuperBlocks<L>(PhantomData<L>);

impl<L: SuperLanes> BlockProducts for SuperBlocks<L> {
    type L = L;

    #[inline(always)]
    unsafe fn row(
        acc: &mut [L::Acc; ACT_ROWS],
        w: &IntRows,
        r: usize,
        x: &Activations,
        rows: [usize; ACT_ROWS],
    ) -> [f64; ACT_ROWS] {
        // SAFETY: as this function's.
        unsafe {
            match w.layout.offset {
                Offset::SubBlocks => blocks::<L, true>(acc, w, r, x, rows),
                _ => blocks::<L, false>(acc, w, r, x, rows),
            }
        }
    }
}

/// [`BlockProducts::row`] of the 256-value blocks, with the sub-block mins' lanes where `MINS`.
///
/// # Safety
/// As [`BlockProducts::row`].
#[inline(always)]
unsafe fn blocks<L: SuperLanes, const MINS: bool>(
    acc: &mut [L::Acc; ACT_ROWS],
    w: &IntRows,
    r: usize,
    x: &Activations,
    rows: [usize; ACT_ROWS],
) -> [f64; ACT_ROWS] {
    {
        let cols = w.cols;
        let n_blocks = cols / QK_K;
        let wr = &w.supers[r * n_blocks..(r + 1) * n_blocks];
        let dm = &w.dm[r * n_blocks..(r + 1) * n_blocks];
        // Each activation row's quants, offset bytes, scales and sub-block sums as raw pointers, checked once
        // here (as slices they left too few registers for the loop).
        let n = x.rows;
        assert!(rows.iter().all(|&a| a < n) && x.q8.q.len() == n * cols && x.offset_bytes.len() == n * cols);
        assert!(x.q8.d.len() == n * n_blocks && (!MINS || x.sums.len() == n * n_blocks));
        // (Loops, not `map`, which the compiler left as calls.)
        let mut xq: [*const [i16; QK_K]; ACT_ROWS] = [std::ptr::null(); ACT_ROWS];
        let mut xu: [*const [u8; QK_K]; ACT_ROWS] = [std::ptr::null(); ACT_ROWS];
        let mut xd: [*const f32; ACT_ROWS] = [std::ptr::null(); ACT_ROWS];
        let mut xs: [*const [i16; 16]; ACT_ROWS] = [std::ptr::null(); ACT_ROWS];
        for (i, &a) in rows.iter().enumerate() {
            xq[i] = x.q8.q[a * cols..].as_ptr().cast();
            xu[i] = x.offset_bytes[a * cols..].as_ptr().cast();
            xd[i] = x.q8.d[a * n_blocks..].as_ptr();
            if MINS {
                xs[i] = x.sums[a * n_blocks..].as_ptr();
            }
        }
        // SAFETY (here and below): the caller's CPU has `L`'s instruction set.
        let mut mins = [unsafe { L::min_zero() }; ACT_ROWS];
        for (b, (block, &[dw, mw])) in wr.iter().zip(dm).enumerate() {
            // Block `b` lies inside every activation row (`rows[i] < n`, `b < n_blocks`).
            let wv = unsafe { L::weights(block) };
            for i in 0..ACT_ROWS {
                unsafe {
                    let d = *xd[i].add(b);
                    acc[i] = L::add_block(acc[i], &wv, &*xq[i].add(b), &*xu[i].add(b), dw * d);
                    if MINS {
                        mins[i] = L::add_mins(mins[i], &block.mins, &*xs[i].add(b), -(d * mw));
                    }
                }
            }
        }
        match MINS {
            true => unsafe { L::min_totals(mins) },
            false => [0.0; ACT_ROWS],
        }
    }
}

/// How a kernel forms a 256-value block's 16 integer lanes and adds them, scaled, into its float32 lanes, and
/// its sub-block mins' 8 lanes into theirs.
trait SuperLanes: Lanes {
    /// What the kernel keeps of a weight block for every activation row.
    type W;

    /// The mins' 8 float32 lanes.
    type Mins: Copy;

    /// The weight block as the kernel reads it.
    ///
    /// # Safety
    /// The CPU must have the implementation's instruction set.
    unsafe fn weights(block: &SuperBlock) -> Self::W;

    /// `acc + f · lanes`, lane by lane in one fused multiply-add. The activations come as their quants `x`
    /// and as `xu = x + 128`, unsigned bytes: each kernel reads the form its instructions take.
    ///
    /// # Safety
    /// As [`SuperLanes::weights`].
    unsafe fn add_block(acc: Self::Acc, w: &Self::W, x: &[i16; QK_K], xu: &[u8; QK_K], f: f32) -> Self::Acc;

    /// Mins' lanes of zeros.
    ///
    /// # Safety
    /// As [`SuperLanes::weights`].
    unsafe fn min_zero() -> Self::Mins;

    /// `acc + f · lanes`, lane `j` being `m[2j]·s[2j] + m[2j+1]·s[2j+1]`, in one fused multiply-add.
    ///
    /// # Safety
    /// As [`SuperLanes::weights`].
    unsafe fn add_mins(acc: Self::Mins, m: &[i16; 16], s: &[i16; 16], f: f32) -> Self::Mins;

    /// Each slot's sum of its mins' lanes in float64, in a fixed tree: lanes `j` and `j + 4` first, then
    /// `j` and `j + 2`, then the last two.
    ///
    /// # Safety
    /// As [`SuperLanes::weights`].
    unsafe fn min_totals(acc: [Self::Mins; ACT_ROWS]) -> [f64; ACT_ROWS];
}

impl SuperLanes for Portable {
    /// The block itself.
    type W = SuperBlock;
    type Mins = [f32; 8];

    #[inline(always)]
    unsafe fn weights(block: &SuperBlock) -> SuperBlock {
        *block
    }

    #[inline(always)]
    unsafe fn add_block(
        mut acc: [f32; 16],
        w: &SuperBlock,
        x: &[i16; QK_K],
        _: &[u8; QK_K],
        f: f32,
    ) -> [f32; 16] {
        let mut lanes = [0i32; 16];
        for ((q, c), x) in w.q.chunks_exact(64).zip(&w.c).zip(x.chunks_exact(64)) {
            for (l, lane) in lanes.iter_mut().enumerate() {
                for p in 4 * l..4 * l + 4 {
                    *lane += c[p / 2] as i32 * q[p] as i32 * x[p] as i32;
                }
            }
        }
        for (a, &v) in acc.iter_mut().zip(&lanes) {
            *a = f.mul_add(v as f32, *a);
        }
        acc
    }

    #[inline(always)]
    unsafe fn min_zero() -> [f32; 8] {
        [0.0; 8]
    }

    #[inline(always)]
    unsafe fn add_mins(mut acc: [f32; 8], m: &[i16; 16], s: &[i16; 16], f: f32) -> [f32; 8] {
        for (j, a) in acc.iter_mut().enumerate() {
            let v = m[2 * j] as i32 * s[2 * j] as i32 + m[2 * j + 1] as i32 * s[2 * j + 1] as i32;
            *a = f.mul_add(v as f32, *a);
        }
        acc
    }

    #[inline(always)]
    unsafe fn min_totals(acc: [[f32; 8]; ACT_ROWS]) -> [f64; ACT_ROWS] {
        let mut out = [0.0; ACT_ROWS];
        for (o, acc) in out.iter_mut().zip(&acc) {
            let h4: [f64; 4] = std::array::from_fn(|j| acc[j] as f64 + acc[j + 4] as f64);
            *o = (h4[0] + h4[2]) + (h4[1] + h4[3]);
        }
        out
    }
}

#[cfg(target_arch = "x86_64")]
impl SuperLanes for super::lanes::Avx512 {
    /// The four groups' quants and pair scales, and `−128 ·` each lane's `Σ c·q`.
    type W = (
        [std::arch::x86_64::__m512i; 4],
        [std::arch::x86_64::__m512i; 4],
        std::arch::x86_64::__m512i,
    );
    type Mins = std::arch::x86_64::__m256;

    #[inline(always)]
    unsafe fn weights(block: &SuperBlock) -> Self::W {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX-512F; every load reads 64 bytes of `block`'s fields.
        unsafe {
            let mut q = [_mm512_setzero_si512(); 4];
            let mut c = [_mm512_setzero_si512(); 4];
            for g in 0..4 {
                q[g] = _mm512_loadu_si512(block.q.as_ptr().add(64 * g).cast());
                c[g] = _mm512_loadu_si512(block.c[g].as_ptr().cast());
            }
            (q, c, _mm512_loadu_si512(block.minus_offset.as_ptr().cast()))
        }
    }

    #[inline(always)]
    unsafe fn add_block(
        acc: Self::Acc,
        (q, c, minus_offset): &Self::W,
        _: &[i16; QK_K],
        xu: &[u8; QK_K],
        f: f32,
    ) -> Self::Acc {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX-512F and BW; group `g`'s 64 bytes lie inside `xu`.
        unsafe {
            let mut lanes = *minus_offset;
            for g in 0..4 {
                let xg = _mm512_loadu_si512(xu.as_ptr().add(64 * g).cast());
                // (x + 128)·q + (x' + 128)·q' is at most 2·255·32 in magnitude: the i16 sums do not saturate.
                let pairs = _mm512_maddubs_epi16(xg, q[g]);
                lanes = _mm512_add_epi32(lanes, _mm512_madd_epi16(pairs, c[g]));
            }
            _mm512_fmadd_ps(_mm512_set1_ps(f), _mm512_cvtepi32_ps(lanes), acc)
        }
    }

    #[inline(always)]
    unsafe fn min_zero() -> Self::Mins {
        // SAFETY: the caller's CPU has AVX-512F, and with it AVX.
        unsafe { std::arch::x86_64::_mm256_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn add_mins(acc: Self::Mins, m: &[i16; 16], s: &[i16; 16], f: f32) -> Self::Mins {
        // SAFETY: the caller's CPU has AVX-512F, and with it AVX2 and FMA.
        unsafe { avx2_add_mins(acc, m, s, f) }
    }

    #[inline(always)]
    unsafe fn min_totals(acc: [Self::Mins; ACT_ROWS]) -> [f64; ACT_ROWS] {
        // SAFETY: as `add_mins`'.
        unsafe { avx_min_totals(acc) }
    }
}

#[cfg(target_arch = "x86_64")]
impl SuperLanes for super::lanes::Avx2 {
    /// The block itself, read where it is used (its quants and scales would fill every AVX2 register).
    type W = *const SuperBlock;
    type Mins = std::arch::x86_64::__m256;

    #[inline(always)]
    unsafe fn weights(block: &SuperBlock) -> Self::W {
        block
    }

    #[inline(always)]
    unsafe fn add_block(
        [lo, hi]: Self::Acc,
        w: &Self::W,
        _: &[i16; QK_K],
        xu: &[u8; QK_K],
        f: f32,
    ) -> Self::Acc {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX2 and FMA; `w` points at a live block (it came from a reference),
        // and every load reads 32 bytes of its fields or of `xu` at offsets below their lengths.
        unsafe {
            let w = &**w;
            // Lanes 0–7 from the first 32 values of each group, 8–15 from the last 32. (Loops, not closures,
            // which would not inherit the kernel's instruction sets.)
            let mut halves = [_mm256_setzero_si256(); 2];
            for (h, lanes) in halves.iter_mut().enumerate() {
                *lanes = _mm256_loadu_si256(w.minus_offset.as_ptr().add(8 * h).cast());
                for g in 0..4 {
                    let at = 64 * g + 32 * h;
                    let xg = _mm256_loadu_si256(xu.as_ptr().add(at).cast());
                    let pairs = _mm256_maddubs_epi16(xg, _mm256_loadu_si256(w.q.as_ptr().add(at).cast()));
                    let c = _mm256_loadu_si256(w.c[g].as_ptr().add(16 * h).cast());
                    *lanes = _mm256_add_epi32(*lanes, _mm256_madd_epi16(pairs, c));
                }
            }
            let f = _mm256_set1_ps(f);
            [
                _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(halves[0]), lo),
                _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(halves[1]), hi),
            ]
        }
    }

    #[inline(always)]
    unsafe fn min_zero() -> Self::Mins {
        // SAFETY: the caller's CPU has AVX.
        unsafe { std::arch::x86_64::_mm256_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn add_mins(acc: Self::Mins, m: &[i16; 16], s: &[i16; 16], f: f32) -> Self::Mins {
        // SAFETY: the caller's CPU has AVX2 and FMA.
        unsafe { avx2_add_mins(acc, m, s, f) }
    }

    #[inline(always)]
    unsafe fn min_totals(acc: [Self::Mins; ACT_ROWS]) -> [f64; ACT_ROWS] {
        // SAFETY: the caller's CPU has AVX.
        unsafe { avx_min_totals(acc) }
    }
}

/// [`SuperLanes::add_mins`] on AVX2: `vpmaddwd` of the mins and sums, one fused multiply-add.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn avx2_add_mins(
    acc: std::arch::x86_64::__m256,
    m: &[i16; 16],
    s: &[i16; 16],
    f: f32,
) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: the caller's CPU has AVX2 and FMA; each load reads the 32 bytes of `m` or `s`.
    unsafe {
        let lanes = _mm256_madd_epi16(
            _mm256_loadu_si256(m.as_ptr().cast()),
            _mm256_loadu_si256(s.as_ptr().cast()),
        );
        _mm256_fmadd_ps(_mm256_set1_ps(f), _mm256_cvtepi32_ps(lanes), acc)
    }
}

/// [`SuperLanes::min_totals`] on AVX.
///
/// # Safety
/// The CPU must have AVX.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn avx_min_totals(acc: [std::arch::x86_64::__m256; ACT_ROWS]) -> [f64; ACT_ROWS] {
    use std::arch::x86_64::*;
    let mut out = [0.0; ACT_ROWS];
    for (o, &a) in out.iter_mut().zip(&acc) {
        // SAFETY: the caller's CPU has AVX.
        *o = unsafe {
            let h4 = _mm256_add_pd(
                _mm256_cvtps_pd(_mm256_castps256_ps128(a)),
                _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)),
            );
            super::lanes::last_two(h4)
        };
    }
    out
}
