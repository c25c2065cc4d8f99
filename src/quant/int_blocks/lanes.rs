//! The instruction sets the integer kernels are written for, one marker type each (`Portable`, `Avx512`,
//! `Avx2`), and the 16 float32 lanes the 32-value blocks' kernels add their scaled block sums into, with their
//! fixed float64 total: one representation per instruction set, the same numbers on each.

use super::ACT_ROWS;

/// 16 float32 lanes and their total.
pub(super) trait Lanes {
    /// 16 float32 lanes, in registers where the instruction set has them.
    type Acc: Copy;

    /// Lanes of zeros.
    ///
    /// # Safety
    /// The CPU must have the implementation's instruction set.
    unsafe fn zero() -> Self::Acc;

    /// The lanes' sum in float64, in a fixed tree: lanes `l` and `l + 8` first, then `l` and `l + 4`, then `l`
    /// and `l + 2`, then the last two.
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn total(acc: Self::Acc) -> f64;

    /// Every slot's [`Lanes::total`] (an instruction set may form them together).
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    #[inline(always)]
    unsafe fn totals(acc: [Self::Acc; ACT_ROWS]) -> [f64; ACT_ROWS] {
        // A loop, not a closure: a closure does not inherit the kernel's instruction sets, so the intrinsics
        // inside `total` would become calls.
        let mut out = [0.0; ACT_ROWS];
        for i in 0..ACT_ROWS {
            // SAFETY: as this function's.
            out[i] = unsafe { Self::total(acc[i]) };
        }
        out
    }
}

/// Plain Rust, any CPU.
pub(super) struct Portable;

impl Lanes for Portable {
    type Acc = [f32; 16];

    #[inline(always)]
    unsafe fn zero() -> [f32; 16] {
        [0.0; 16]
    }

    #[inline(always)]
    unsafe fn total(acc: [f32; 16]) -> f64 {
        let v = acc.map(f64::from);
        let h8: [f64; 8] = std::array::from_fn(|l| v[l] + v[l + 8]);
        let h4: [f64; 4] = std::array::from_fn(|l| h8[l] + h8[l + 4]);
        (h4[0] + h4[2]) + (h4[1] + h4[3])
    }
}

/// AVX-512: lanes in one vector.
#[cfg(target_arch = "x86_64")]
pub(super) struct Avx512;

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx512 {
    type Acc = std::arch::x86_64::__m512;

    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        // SAFETY: the caller's CPU has AVX-512F.
        unsafe { std::arch::x86_64::_mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn total(acc: Self::Acc) -> f64 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX-512F.
        unsafe {
            let h8 = h8(acc);
            let h4 = _mm256_add_pd(
                _mm512_castpd512_pd256(h8),
                _mm512_extractf64x4_pd(h8, 1),
            );
            last_two(h4)
        }
    }

    /// The four slots' trees side by side: each step of [`Lanes::total`] on two or four slots at once.
    #[inline(always)]
    unsafe fn totals(acc: [Self::Acc; ACT_ROWS]) -> [f64; ACT_ROWS] {
        use std::arch::x86_64::*;
        const _: () = assert!(ACT_ROWS == 4, "written for four slots");
        // SAFETY: the caller's CPU has AVX-512F; the store writes the four floats of `out`.
        unsafe {
            // Lanes l and l + 4 of two slots' h8: [the first's h4, the second's h4].
            #[inline(always)]
            unsafe fn h4(a: __m512, b: __m512) -> __m512d {
                // SAFETY: as `totals`'.
                unsafe {
                    let (a, b) = (h8(a), h8(b));
                    _mm512_add_pd(
                        _mm512_shuffle_f64x2::<0b01_00_01_00>(a, b),
                        _mm512_shuffle_f64x2::<0b11_10_11_10>(a, b),
                    )
                }
            }
            let (s01, s23) = (h4(acc[0], acc[1]), h4(acc[2], acc[3]));
            // l and l + 2: the slots' (h4[0] + h4[2], h4[1] + h4[3]), slots 0 to 3 in 128-bit lanes 0 to 3.
            let h2 = _mm512_add_pd(
                _mm512_shuffle_f64x2::<0b10_00_10_00>(s01, s23),
                _mm512_shuffle_f64x2::<0b11_01_11_01>(s01, s23),
            );
            // The last two of each slot.
            let even = _mm512_permutexvar_pd(_mm512_set_epi64(0, 0, 0, 0, 6, 4, 2, 0), h2);
            let odd = _mm512_permutexvar_pd(_mm512_set_epi64(0, 0, 0, 0, 7, 5, 3, 1), h2);
            let mut out = [0.0; ACT_ROWS];
            _mm256_storeu_pd(
                out.as_mut_ptr(),
                _mm256_add_pd(_mm512_castpd512_pd256(even), _mm512_castpd512_pd256(odd)),
            );
            out
        }
    }
}

/// AVX2: lanes in two vectors, 0–7 and 8–15.
#[cfg(target_arch = "x86_64")]
pub(super) struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx2 {
    type Acc = [std::arch::x86_64::__m256; 2];

    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        // SAFETY: the caller's CPU has AVX.
        unsafe { [std::arch::x86_64::_mm256_setzero_ps(); 2] }
    }

    #[inline(always)]
    unsafe fn total([lo, hi]: Self::Acc) -> f64 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX.
        unsafe {
            // Lanes 0–3 and 4–7 of `lo` meet lanes 8–11 and 12–15 of `hi`.
            let a = _mm256_add_pd(
                _mm256_cvtps_pd(_mm256_castps256_ps128(lo)),
                _mm256_cvtps_pd(_mm256_castps256_ps128(hi)),
            );
            let b = _mm256_add_pd(
                _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)),
                _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)),
            );
            last_two(_mm256_add_pd(a, b))
        }
    }
}

/// The first step of [`Lanes::total`]'s tree on 16 float32 lanes: lanes `l` and `l + 8` in float64.
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn h8(acc: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512d {
    use std::arch::x86_64::*;
    // SAFETY: the caller's CPU has AVX-512F.
    unsafe {
        let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(acc));
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
        _mm512_add_pd(lo, _mm512_cvtps_pd(hi))
    }
}

/// The last two steps of [`Lanes::total`]'s tree on four float64 lanes: `(0 + 2) + (1 + 3)`.
///
/// # Safety
/// The CPU must have AVX.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn last_two(h4: std::arch::x86_64::__m256d) -> f64 {
    use std::arch::x86_64::*;
    // SAFETY: the caller's CPU has AVX.
    unsafe {
        let h2 = _mm_add_pd(_mm256_castpd256_pd128(h4), _mm256_extractf128_pd(h4, 1));
        _mm_cvtsd_f64(h2) + _mm_cvtsd_f64(_mm_unpackhi_pd(h2, h2))
    }
}
