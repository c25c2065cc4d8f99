//! The floating-point types the engine computes in.
//!
//! Every numeric routine is written once, generic over [`Real`], and instantiated for `f64` (the golden
//! precision: every operation, including RoPE angles and their sines and cosines, in f64) and `f32` (fast).

use num_traits::{Float, FloatConst, FromPrimitive, ToPrimitive};
use std::fmt::{Debug, Display};
use std::iter::Sum;

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
    + 'static
{
    /// Name of the precision as the CLI and output metadata spell it (`"f32"` or `"f64"`).
    const NAME: &'static str;

    /// Widens or narrows an `f64` into this type (round to nearest).
    fn of_f64(x: f64) -> Self;

    /// Widens an `f32` into this type; exact for both precisions.
    fn of_f32(x: f32) -> Self;

    /// Converts to `f64`; exact for both precisions.
    fn to_f64_exact(self) -> f64;

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
}

impl Real for f32 {
    const NAME: &'static str = "f32";
    fn of_f64(x: f64) -> Self {
        x as f32
    }
    fn of_f32(x: f32) -> Self {
        x
    }
    fn to_f64_exact(self) -> f64 {
        self as f64
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
}

impl Real for f64 {
    const NAME: &'static str = "f64";
    fn of_f64(x: f64) -> Self {
        x
    }
    fn of_f32(x: f32) -> Self {
        x as f64
    }
    fn to_f64_exact(self) -> f64 {
        self
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
}
