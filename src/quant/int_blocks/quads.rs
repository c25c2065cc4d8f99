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
use super::row_terms::{all_rows, BlockProducts};
use super::{Activations, IntRows, Kernel, ACT_ROWS};
use std::marker::PhantomData;
use std::ops::Range;

kernels!(
    Quads;
    /// AVX-512 VNNI's `vpdpbusd` on 64 byte products at a time.
    ("AVX-512 VNNI", ["avx512f", "avx512bw", "avx512vnni"], avx512_vnni, super::lanes::Avx512),
    /// AVX2's `vpmaddubsw` and `vpmaddwd` on 32 byte products at a time.
    ("AVX2", ["avx2", "fma"], avx2, super::lanes::Avx2),
);

/// Block products on bytes, two blocks at a time, in lanes `L`.
struct Quads<L>(PhantomData<L>);

impl<L: QuadLanes> BlockProducts for Quads<L> {
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
        let n_blocks = cols / 32;
        let wr = &w.bytes[r * cols..(r + 1) * cols];
        let dm = &w.dm[r * n_blocks..(r + 1) * n_blocks];
        // Each activation row's bytes, offset bytes and scales as raw pointers, checked once here: as slices
        // (a pointer and a length each, twelve in all) they left too few registers for the loop.
        let n = x.q8.d.len() / n_blocks;
        assert!(rows.iter().all(|&a| a < n) && x.bytes.len() == n * cols);
        let xb: [*const i8; ACT_ROWS] = rows.map(|a| x.bytes[a * cols..].as_ptr());
        let xu: [*const u8; ACT_ROWS] = rows.map(|a| x.offset_bytes[a * cols..].as_ptr());
        let xd: [*const f32; ACT_ROWS] = rows.map(|a| x.q8.d[a * n_blocks..].as_ptr());
        for b in (0..n_blocks - n_blocks % 2).step_by(2) {
            let at = 32 * b;
            let dmp: &[[f32; 2]; 2] = dm[b..b + 2].try_into().expect("two blocks");
            // SAFETY (here and below): the caller's CPU has `L`'s instruction set; blocks `b` and `b + 1` lie
            // inside every activation row (`rows[i] < n`, `b + 1 < n_blocks`).
            let wv = unsafe { L::weights(wr[at..at + 64].try_into().expect("two blocks"), dmp) };
            for i in 0..ACT_ROWS {
                acc[i] = unsafe {
                    L::add_pair(
                        acc[i],
                        &wv,
                        &*xb[i].add(at).cast::<[i8; 64]>(),
                        &*xu[i].add(at).cast::<[u8; 64]>(),
                        &*xd[i].add(b).cast::<[f32; 2]>(),
                    )
                };
            }
        }
        if n_blocks % 2 == 1 {
            // The last block of an odd count, beside a block of zeros whose factors are 0.
            let b = n_blocks - 1;
            let mut wp = [0i8; 64];
            wp[..32].copy_from_slice(&wr[32 * b..]);
            let wv = unsafe { L::weights(&wp, &[dm[b], [0.0; 2]]) };
            for (i, &a) in rows.iter().enumerate() {
                let (mut xp, mut up) = ([0i8; 64], [0u8; 64]);
                xp[..32].copy_from_slice(&x.bytes[a * cols + 32 * b..(a + 1) * cols]);
                up[..32].copy_from_slice(&x.offset_bytes[a * cols + 32 * b..(a + 1) * cols]);
                let d = [x.q8.d[a * n_blocks + b], 0.0];
                acc[i] = unsafe { L::add_pair(acc[i], &wv, &xp, &up, &d) };
            }
        }
    }
}

/// How a kernel forms two 32-value blocks' integer quad lanes and adds them, scaled, into its float32 lanes.
trait QuadLanes: Lanes {
    /// What the kernel keeps of a pair of weight blocks for every activation row.
    type W;

    /// The pair of weight blocks `w` (64 signed bytes), with their `[D, M]`, as the kernel reads them.
    ///
    /// # Safety
    /// The CPU must have the implementation's instruction set.
    unsafe fn weights(w: &[i8; 64], dm: &[[f32; 2]; 2]) -> Self::W;

    /// `acc + f · lanes`, lane by lane (a float32 product, then a float32 sum), where lanes 0–7 hold the first
    /// block's quad sums of `w · x` with the factor `f = fl(D·d)` of its `D` and the activations' scale
    /// `d[0]`, and lanes 8–15 the second's with `d[1]`. The activations come as signed bytes `x` and as
    /// `xu = x + 128`, unsigned: each kernel reads the form its instructions take.
    ///
    /// # Safety
    /// As [`QuadLanes::weights`].
    unsafe fn add_pair(
        acc: Self::Acc,
        w: &Self::W,
        x: &[i8; 64],
        xu: &[u8; 64],
        d: &[f32; 2],
    ) -> Self::Acc;
}

impl QuadLanes for Portable {
    /// The weights and the two `D`.
    type W = ([i8; 64], [f32; 2]);

    #[inline(always)]
    unsafe fn weights(w: &[i8; 64], dm: &[[f32; 2]; 2]) -> Self::W {
        (*w, [dm[0][0], dm[1][0]])
    }

    #[inline(always)]
    unsafe fn add_pair(
        mut acc: [f32; 16],
        (w, dw): &Self::W,
        x: &[i8; 64],
        _: &[u8; 64],
        d: &[f32; 2],
    ) -> [f32; 16] {
        let f = [dw[0] * d[0], dw[1] * d[1]];
        for (l, a) in acc.iter_mut().enumerate() {
            let quad = 4 * l;
            let s: i32 = (quad..quad + 4).map(|i| w[i] as i32 * x[i] as i32).sum();
            *a += f[l / 8] * s as f32;
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
    unsafe fn weights(w: &[i8; 64], dm: &[[f32; 2]; 2]) -> Self::W {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX-512F and VNNI; the 64 bytes are `w`'s, the 16 `dm`'s.
        unsafe {
            let wv = _mm512_loadu_si512(w.as_ptr().cast());
            let zero = _mm512_setzero_si512();
            // 0x80 as an unsigned byte is 128.
            let offset = _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(i8::MIN), wv);
            // [D₀, M₀, D₁, M₁]: D₀ to lanes 0–7, D₁ to 8–15.
            let dm = _mm512_castps128_ps512(_mm_loadu_ps(dm.as_ptr().cast()));
            let pick = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
            (wv, _mm512_sub_epi32(zero, offset), _mm512_permutexvar_ps(pick, dm))
        }
    }

    #[inline(always)]
    unsafe fn add_pair(
        acc: Self::Acc,
        (wv, minus_offset, dw): &Self::W,
        _: &[i8; 64],
        xu: &[u8; 64],
        d: &[f32; 2],
    ) -> Self::Acc {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX-512F and VNNI; the 64 bytes are `xu`'s, the 8 bytes `d`'s.
        unsafe {
            // Σ (x + 128)·w − 128·Σ w = Σ x·w, exactly.
            let lanes = _mm512_dpbusd_epi32(*minus_offset, _mm512_loadu_si512(xu.as_ptr().cast()), *wv);
            let pair = _mm512_castps128_ps512(_mm_castsi128_ps(_mm_loadu_si64(d.as_ptr().cast())));
            let halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
            let f = _mm512_mul_ps(*dw, _mm512_permutexvar_ps(halves, pair));
            _mm512_add_ps(acc, _mm512_mul_ps(f, _mm512_cvtepi32_ps(lanes)))
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl QuadLanes for super::lanes::Avx2 {
    /// Each block's weight magnitudes (unsigned) and weights, and the two `D`.
    type W = ([std::arch::x86_64::__m256i; 4], [f32; 2]);

    #[inline(always)]
    unsafe fn weights(w: &[i8; 64], dm: &[[f32; 2]; 2]) -> Self::W {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX2; the 64 bytes are `w`'s.
        unsafe {
            let w0 = _mm256_loadu_si256(w.as_ptr().cast());
            let w1 = _mm256_loadu_si256(w.as_ptr().add(32).cast());
            // |−128| is 0x80, 128 as an unsigned byte.
            (
                [_mm256_abs_epi8(w0), w0, _mm256_abs_epi8(w1), w1],
                [dm[0][0], dm[1][0]],
            )
        }
    }

    #[inline(always)]
    unsafe fn add_pair(
        [lo, hi]: Self::Acc,
        ([a0, w0, a1, w1], dw): &Self::W,
        x: &[i8; 64],
        _: &[u8; 64],
        d: &[f32; 2],
    ) -> Self::Acc {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX2; the 64 bytes are `x`'s.
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let x0 = _mm256_loadu_si256(x.as_ptr().cast());
            let x1 = _mm256_loadu_si256(x.as_ptr().add(32).cast());
            // |w|·(sign(w)·x) = w·x; a pair of them is at most 2·128·127, inside the saturating i16 sum.
            let l0 = _mm256_madd_epi16(_mm256_maddubs_epi16(*a0, _mm256_sign_epi8(x0, *w0)), ones);
            let l1 = _mm256_madd_epi16(_mm256_maddubs_epi16(*a1, _mm256_sign_epi8(x1, *w1)), ones);
            let (f0, f1) = (_mm256_set1_ps(dw[0] * d[0]), _mm256_set1_ps(dw[1] * d[1]));
            [
                _mm256_add_ps(lo, _mm256_mul_ps(f0, _mm256_cvtepi32_ps(l0))),
                _mm256_add_ps(hi, _mm256_mul_ps(f1, _mm256_cvtepi32_ps(l1))),
            ]
        }
    }
}
