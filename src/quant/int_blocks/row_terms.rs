//! The frame every integer kernel shares: for each weight row and up to [`ACT_ROWS`] activation rows, the
//! integer block products scaled and added into [`Lanes`] by the kernel's [`BlockProducts`], the lanes' fixed
//! float64 total, and the min terms the kernel forms (each kernel keeps the offsets of its types).

use super::lanes::Lanes;
use super::{Activations, IntRows, ACT_ROWS};
use std::ops::Range;

/// How a kernel adds the integer products of a weight row's blocks into its lanes.
pub(super) trait BlockProducts {
    /// The lanes it adds into.
    type L: Lanes;

    /// Adds, for every slot `i` and block `b` of weight row `r`, `fl(D_b·d_b) ·` (block `b`'s integer lanes
    /// with activation row `rows[i]`) into `acc[i]`, in block order; returns each slot's min terms (zero for
    /// types without mins).
    ///
    /// # Safety
    /// The CPU must have the instruction sets of `L` and of the implementation.
    unsafe fn row(
        acc: &mut [<Self::L as Lanes>::Acc; ACT_ROWS],
        w: &IntRows,
        r: usize,
        x: &Activations,
        rows: [usize; ACT_ROWS],
    ) -> [f64; ACT_ROWS];
}

/// Every weight row's products with the activation rows `xs`, the blocks' integer lanes added by `K`.
///
/// # Safety
/// As [`BlockProducts::row`].
#[inline(always)]
pub(super) unsafe fn all_rows<K: BlockProducts>(
    w: &IntRows,
    x: &Activations,
    xs: Range<usize>,
    out: &mut [f32],
    ld: usize,
) {
    // Every slot takes a row of `xs` (the last one repeated where `xs` is short), so the loops over slots have
    // a fixed length and their accumulators stay in registers.
    let rows: [usize; ACT_ROWS] = std::array::from_fn(|i| (xs.start + i).min(xs.end - 1));
    for r in 0..w.rows {
        // SAFETY: as this function's.
        let terms = unsafe { row_terms::<K>(w, r, x, rows) };
        for i in 0..xs.len() {
            out[i * ld + r] = terms[i] as f32;
        }
    }
}

/// For weight row `r` and the activation rows `rows`: the lanes' float64 total ([`Lanes::totals`]) of
/// `Σ_blocks fl(D·d) · (block's integer lanes)`, kept in 16 float32 lanes across blocks, plus the min terms
/// the kernel returns.
///
/// # Safety
/// As [`BlockProducts::row`].
#[inline(always)]
unsafe fn row_terms<K: BlockProducts>(
    w: &IntRows,
    r: usize,
    x: &Activations,
    rows: [usize; ACT_ROWS],
) -> [f64; ACT_ROWS] {
    // SAFETY (here and below): `K`'s instruction sets were detected before the kernel was chosen.
    let mut acc = [unsafe { K::L::zero() }; ACT_ROWS];
    let mins = unsafe { K::row(&mut acc, w, r, x, rows) };
    let mut terms = unsafe { K::L::totals(acc) };
    for (t, &m) in terms.iter_mut().zip(&mins) {
        *t += m;
    }
    terms
}
