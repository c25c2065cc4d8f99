//! The floating-point types the engine computes in.
//!
//! Every numeric routine is written once, generic over [`Real`], and instantiated for `f64` (the golden
//! precision: every operation, including RoPE angles and their sines and cosines, in f64) and `f32` (fast).

use num_traits::{Float, FloatConst, FromPrimitive, ToPrimitive};
use std::fmt::{Debug, Display};
use std::iter::Sum;

/// Sum of `xs` widened to f64, in a fixed order the compiler can vectorize: element `i` into partial sum
/// `i mod 4`, then `(s₀ + s₁) + (s₂ + s₃)` plus the tail. (A plain left-to-right sum is one dependent
/// addition per element, several times slower over long attention rows.)
pub fn sum_f64<T: Real>(xs: &[T]) -> f64 {
    let mut acc = [0.0f64; 4];
    let chunks = xs.chunks_exact(4);
    let tail: f64 = chunks.remainder().iter().map(|v| v.to_f64_exact()).sum();
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v.to_f64_exact();
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// A real scalar the engine can compute in: `f32` or `f64`.
pub trait Real:
    Float
    + FloatConst
    + FromPrimitive
    + ToPrimitive
    + Sum
    + Debug
    + Display
    + Default
    + Send
    + Sync
    + crate::linalg::block_sums::BlockElement
{
    /// Name of the precision as the CLI and output metadata spell it (`"f32"` or `"f64"`).
    const NAME: &'static str;

    /// Widens or narrows an `f64` into this type (round to nearest).
    fn of_f64(x: f64) -> Self;

    /// Widens an `f32` into this type; exact for both precisions.
    fn of_f32(x: f32) -> Self;

    /// Converts to `f64`; exact for both precisions.
    fn to_f64_exact(self) -> f64;

    /// `e^self` for `self ≤ 0`, within 2 ulp (0 where the result would leave the normal range, NaN for NaN),
    /// in plain arithmetic a loop can vectorize: [`exp_nonpositive_f32`], [`exp_nonpositive_f64`].
    fn exp_nonpositive(self) -> Self;

    /// Fills `out` with the f32 values `produce` writes into a buffer of `out.len()` elements, widened exactly.
    /// For `f32` the buffer is `out` itself.
    fn fill_from_f32(out: &mut [Self], produce: impl FnOnce(&mut [f32]));

    /// `c ← alpha · a · b` for an `m × k` matrix `a` and a `k × n` matrix `b`, each given by a pointer and its
    /// row and column strides (matrixmultiply's general-stride GEMM).
    ///
    /// # Safety
    /// Every element addressed by the shapes and strides must be inside the pointed-to allocations, and `c`
    /// must not overlap `a` or `b`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_raw(
        mkn: (usize, usize, usize),
        alpha: Self,
        a: (*const Self, isize, isize),
        b: (*const Self, isize, isize),
        c: (*mut Self, isize, isize),
    );

    /// `out[m × n] = alpha · a[m × k] · b[k × n]`, all row-major with the given row strides: attention's
    /// products (`linalg::gemm`). f32 sums as the weight products do, reading both operands in place
    /// (`linalg::unpacked`); f64 runs matrixmultiply's GEMM, the golden path's order of operations. Panics if
    /// a slice is shorter than its view.
    #[allow(clippy::too_many_arguments)]
    fn attention_product(
        out: &mut [Self],
        ldo: usize,
        a: &[Self],
        lda: usize,
        b: &[Self],
        ldb: usize,
        mnk: (usize, usize, usize),
        alpha: Self,
    );

    /// Divides every element of `xs` by `sum` in f64 and rounds the quotient to this type: f64 divides; f32
    /// multiplies by the f64 reciprocal, whose product is within 2⁻⁵¹ relative of the quotient and so rounds
    /// to the same f32 but in the rarest ties, at a fraction of a division's cost.
    fn divide_all(xs: &mut [Self], sum: f64);

    /// Whether a head whose attention no capture takes runs the fused online softmax
    /// (`model::attention::online`) instead of materialising its scores and probabilities: f32 does; f64, the
    /// golden path, keeps its order of operations and its bits.
    const ONLINE_SOFTMAX: bool;

    /// Runs `f` on a buffer of `len` elements with unspecified contents, kept by the calling thread between
    /// calls (`linalg::with_thread_buffer`): the weight products produce each tile into it.
    fn with_tile_buffer<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R;
}

/// The precision of a run, one of the two [`Real`] types by name: `--precision` on the command line, the
/// `precision` argument of the Python package, the `precision` of a scan's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Single precision: fast.
    F32,
    /// Double precision: every operation in f64 (the golden reference).
    F64,
}

impl Precision {
    /// Both precisions, single first.
    pub const ALL: [Precision; 2] = [Precision::F32, Precision::F64];

    /// The name, [`Real::NAME`] of its type: `"f32"` or `"f64"`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => f32::NAME,
            Precision::F64 => f64::NAME,
        }
    }

    /// The precision named `name` (exactly `"f32"` or `"f64"`), `None` for any other string.
    pub fn from_name(name: &str) -> Option<Precision> {
        Precision::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl Real for f32 {
    const NAME: &'static str = "f32";
    const ONLINE_SOFTMAX: bool = true;
    fn with_tile_buffer<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R {
        thread_local! {
            static TILE: std::cell::RefCell<Vec<f32>> = std::cell::RefCell::default();
        }
        crate::linalg::with_thread_buffer(&TILE, len, f)
    }
    fn of_f64(x: f64) -> Self {
        x as f32
    }
    fn of_f32(x: f32) -> Self {
        x
    }
    fn to_f64_exact(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn exp_nonpositive(self) -> Self {
        exp_nonpositive_f32(self)
    }
    fn fill_from_f32(out: &mut [Self], produce: impl FnOnce(&mut [f32])) {
        produce(out)
    }
    unsafe fn gemm_raw(
        (m, k, n): (usize, usize, usize),
        alpha: Self,
        a: (*const Self, isize, isize),
        b: (*const Self, isize, isize),
        c: (*mut Self, isize, isize),
    ) {
        matrixmultiply::sgemm(
            m, k, n, alpha, a.0, a.1, a.2, b.0, b.1, b.2, 0.0, c.0, c.1, c.2,
        )
    }
    #[inline(always)]
    fn divide_all(xs: &mut [Self], sum: f64) {
        let reciprocal = 1.0 / sum;
        for x in xs {
            *x = (f64::from(*x) * reciprocal) as f32;
        }
    }
    fn attention_product(
        out: &mut [Self],
        ldo: usize,
        a: &[Self],
        lda: usize,
        b: &[Self],
        ldb: usize,
        mnk: (usize, usize, usize),
        alpha: Self,
    ) {
        use crate::linalg::{unpacked::product, Isa};
        product(Isa::best(), out, ldo, a, lda, b, ldb, mnk, alpha)
    }
}

impl Real for f64 {
    const NAME: &'static str = "f64";
    const ONLINE_SOFTMAX: bool = false;
    fn with_tile_buffer<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R {
        thread_local! {
            static TILE: std::cell::RefCell<Vec<f64>> = std::cell::RefCell::default();
        }
        crate::linalg::with_thread_buffer(&TILE, len, f)
    }
    fn of_f64(x: f64) -> Self {
        x
    }
    fn of_f32(x: f32) -> Self {
        x as f64
    }
    fn to_f64_exact(self) -> f64 {
        self
    }
    #[inline(always)]
    fn exp_nonpositive(self) -> Self {
        exp_nonpositive_f64(self)
    }
    fn fill_from_f32(out: &mut [Self], produce: impl FnOnce(&mut [f32])) {
        let mut narrow = vec![0f32; out.len()];
        produce(&mut narrow);
        for (o, v) in out.iter_mut().zip(narrow) {
            *o = v as f64;
        }
    }
    unsafe fn gemm_raw(
        (m, k, n): (usize, usize, usize),
        alpha: Self,
        a: (*const Self, isize, isize),
        b: (*const Self, isize, isize),
        c: (*mut Self, isize, isize),
    ) {
        matrixmultiply::dgemm(
            m, k, n, alpha, a.0, a.1, a.2, b.0, b.1, b.2, 0.0, c.0, c.1, c.2,
        )
    }
    #[inline(always)]
    fn divide_all(xs: &mut [Self], sum: f64) {
        for x in xs {
            *x /= sum;
        }
    }
    fn attention_product(
        out: &mut [Self],
        ldo: usize,
        a: &[Self],
        lda: usize,
        b: &[Self],
        ldb: usize,
        mnk: (usize, usize, usize),
        alpha: Self,
    ) {
        crate::linalg::packed_gemm(out, ldo, a, lda, b, ldb, mnk, alpha)
    }
}

// The exponentials of softmax are written by hand because libm's `exp` and `expf` are one call per element,
// which keeps a softmax loop from vectorizing: with them, softmax took a third of attention's time. Both use
// plain operations only (no fused multiply-add), so every instruction set gives the same bits.

/// `1/k!` for `k = 0..=13`, the Taylor coefficients of `e^r`.
const INV_FACTORIAL: [f64; 14] = {
    let mut c = [1.0f64; 14];
    let mut k = 1;
    while k < 14 {
        c[k] = c[k - 1] / k as f64;
        k += 1;
    }
    c
};

/// `e^x` for `x ≤ 0` in f64, within 2 ulp (`tests::f64_exp_is_within_two_ulp`); 0 below −708, where the
/// true value (< 3.3e-308) leaves the normal range; NaN for NaN.
///
/// Cody–Waite reduction `x = n·ln 2 + r`, `|r| ≤ ln 2 / 2`, with fdlibm's two-part ln 2 (`n·LN2_HI` is
/// exact); `e^r` by its Taylor series to degree 13 (truncation below 5e-18 relative); `2ⁿ` from its exponent
/// bits. Adding and subtracting 1.5·2⁵² rounds `x·log₂e` to the integer `n` and leaves `n` in the low bits.
#[inline(always)]
pub fn exp_nonpositive_f64(x: f64) -> f64 {
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    const LN2_HI: f64 = 0.693_147_180_369_123_8; // 0x3FE62E42FEE00000: 21 trailing zero bits
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let t = x * std::f64::consts::LOG2_E + SHIFT;
    let n = t - SHIFT;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = INV_FACTORIAL[13];
    for &c in INV_FACTORIAL[..13].iter().rev() {
        p = p * r + c;
    }
    let exponent = t.to_bits().wrapping_sub(SHIFT.to_bits()).wrapping_add(1023) << 52;
    let e = p * f64::from_bits(exponent);
    if x < -708.0 {
        0.0
    } else {
        e
    }
}

/// `e^x` for `x ≤ 0` in f32, within 2 ulp (`tests::f32_exp_is_within_two_ulp`); 0 below −87, where the
/// true value (< 1.7e-38) nears the end of the normal range; NaN for NaN.
///
/// The same reduction as [`exp_nonpositive_f64`] in f32 (ln 2 split as 355/512 plus a correction, `n` rounded
/// by 1.5·2²³), with the Taylor series to degree 7 (truncation below 6e-9 relative).
#[inline(always)]
pub fn exp_nonpositive_f32(x: f32) -> f32 {
    const SHIFT: f32 = 12_582_912.0;
    const LN2_HI: f32 = 0.693_359_4; // exactly 355/512
    const LN2_LO: f32 = -2.121_944_4e-4;
    let t = x * std::f32::consts::LOG2_E + SHIFT;
    let n = t - SHIFT;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = INV_FACTORIAL[7] as f32;
    for &c in INV_FACTORIAL[..7].iter().rev() {
        p = p * r + c as f32;
    }
    let exponent = t.to_bits().wrapping_sub(SHIFT.to_bits()).wrapping_add(127) << 23;
    let e = p * f32::from_bits(exponent);
    if x < -87.0 {
        0.0
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precisions_are_named_as_their_types() {
        assert_eq!(Precision::F32.name(), f32::NAME);
        assert_eq!(Precision::F64.name(), f64::NAME);
        for p in Precision::ALL {
            assert_eq!(Precision::from_name(p.name()), Some(p));
        }
        assert_eq!(Precision::from_name("F64"), None);
        assert_eq!(Precision::from_name("f16"), None);
    }

    #[test]
    fn f64_exp_is_within_two_ulp() {
        // A dense grid over [−708, 0], every multiple of ln 2 (where n changes) with its neighbours and the
        // midpoints between them (where |r| is largest), and arguments so small that e^x rounds to 1.
        let mut xs: Vec<f64> = (0..=2_000_000).map(|i| -708.0 * i as f64 / 2e6).collect();
        for k in 0..=1020 {
            let m = -(k as f64) * std::f64::consts::LN_2;
            xs.extend([
                m,
                m.next_up(),
                m.next_down(),
                m - 0.5 * std::f64::consts::LN_2,
            ]);
        }
        xs.extend([-0.0, -1e-300, -1e-17, -1e-9, -708.0]);
        let worst = xs
            .iter()
            .filter(|&&x| (-708.0..=0.0).contains(&x))
            .map(|&x| exp_nonpositive_f64(x).to_bits().abs_diff(x.exp().to_bits()))
            .max()
            .unwrap();
        assert!(worst <= 2, "worst error {worst} ulp");
        assert_eq!(exp_nonpositive_f64(0.0), 1.0);
        assert_eq!(exp_nonpositive_f64(-709.0), 0.0);
        assert_eq!(exp_nonpositive_f64(f64::NEG_INFINITY), 0.0);
        assert!(exp_nonpositive_f64(f64::NAN).is_nan());
    }

    #[test]
    fn f32_exp_is_within_two_ulp() {
        // Every 7th f32 from −87 to 0 (about 160 million values), against f64's exp rounded to f32.
        let (lo, hi) = ((-87.0f32).to_bits(), (-0.0f32).to_bits());
        let worst = (hi..=lo)
            .step_by(7)
            .chain([lo, hi])
            .map(f32::from_bits)
            .map(|x| {
                let exact = ((x as f64).exp() as f32).to_bits();
                exp_nonpositive_f32(x).to_bits().abs_diff(exact)
            })
            .max()
            .unwrap();
        assert!(worst <= 2, "worst error {worst} ulp");
        assert_eq!(exp_nonpositive_f32(0.0), 1.0);
        assert_eq!(exp_nonpositive_f32(-88.0), 0.0);
        assert_eq!(exp_nonpositive_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_nonpositive_f32(f32::NAN).is_nan());
    }

    #[test]
    fn sum_f64_adds_every_element_in_its_stated_order() {
        let xs: Vec<f32> = (1..=11).map(|i| i as f32 * 0.1).collect();
        let v: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
        let expect = ((v[0] + v[4]) + (v[1] + v[5]))
            + ((v[2] + v[6]) + (v[3] + v[7]))
            + (v[8] + v[9] + v[10]);
        assert_eq!(sum_f64(&xs), expect);
    }
}
