//! The frame every integer kernel shares: for each weight row and up to [`ACT_ROWS`] activation rows, the
//! integer block products scaled and added into [`Lanes`] by the kernel's [`BlockProducts`], the min terms
//! added in float32 in block order, and the lanes' fixed float64 total.

use super::lanes::Lanes;
use super::{Activations, IntRows, Offset, ACT_ROWS};
use std::ops::Range;

/// How a kernel adds the integer products of a weight row's blocks into its lanes.
pub(super) trait BlockProducts {
    /// The lanes it adds into.
    type L: Lanes;

    /// Adds, for every slot `i` and block `b` of weight row `r`, `fl(D_b·d_b) ·` (block `b`'s integer lanes
    /// with activation row `rows[i]`) into `acc[i]`, in block order.
    ///
    /// # Safety
    /// The CPU must have the instruction sets of `L` and of the implementation.
    unsafe fn row(
        acc: &mut [<Self::L as Lanes>::Acc; ACT_ROWS],
        w: &IntRows,
        r: usize,
        x: &Activations,
        rows: [usize; ACT_ROWS],
    );
}

/// Every weight row's products with the activation rows `xs`, the blocks' integer lanes added by `K`.
///
/// # Safety
/// As [`BlockProducts::run`].
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

/// For weight row `r` and the activation rows `rows`: `Σ_blocks fl(D·d) · (block's integer lanes)`, kept in
/// 16 float32 lanes across blocks, plus the min terms (`fl(M·s)` or `−fl(d·M)·Σ_g m_g·Σ_g qx` per block),
/// added in float32 in block order as ggml adds them; the lanes' float64 total ([`Lanes::total`]) plus the min
/// terms at the end.
///
/// # Safety
/// As [`BlockProducts::run`].
#[inline(always)]
unsafe fn row_terms<K: BlockProducts>(
    w: &IntRows,
    r: usize,
    x: &Activations,
    rows: [usize; ACT_ROWS],
) -> [f64; ACT_ROWS] {
    let n_blocks = w.cols / w.layout.kind.block_len();
    let groups = w.layout.kind.block_len() / w.layout.group;
    let dm = &w.dm[r * n_blocks..(r + 1) * n_blocks];
    // SAFETY (here and below): `K`'s instruction sets were detected before the kernel was chosen.
    let mut acc = [unsafe { K::L::zero() }; ACT_ROWS];
    unsafe { K::row(&mut acc, w, r, x, rows) };
    // The min terms in a second pass, so that the loop above holds nothing but the block products; block by
    // block, each activation row's sum in block order (the rows' sums are independent, so their additions
    // overlap).
    let mut mins_acc = [0.0f32; ACT_ROWS];
    match w.layout.offset {
        Offset::None => {}
        Offset::Block => {
            // (Loops, not `map`, which the compiler left as calls.)
            let mut s: [&[f32]; ACT_ROWS] = [&[]; ACT_ROWS];
            for (s, &a) in s.iter_mut().zip(&rows) {
                *s = &x.q8.s[a * n_blocks..(a + 1) * n_blocks];
            }
            for (b, &[_, mw]) in dm.iter().enumerate() {
                for (m, s) in mins_acc.iter_mut().zip(&s) {
                    *m += mw * s[b];
                }
            }
        }
        Offset::SubBlocks => {
            let mins = &w.mins[r * n_blocks * groups..(r + 1) * n_blocks * groups];
            let mut sums: [&[i32]; ACT_ROWS] = [&[]; ACT_ROWS];
            let mut xd: [&[f32]; ACT_ROWS] = [&[]; ACT_ROWS];
            for ((s, d), &a) in sums.iter_mut().zip(&mut xd).zip(&rows) {
                *s = x.sums[a].as_slice();
                *d = &x.q8.d[a * n_blocks..(a + 1) * n_blocks];
            }
            for (b, (mn, &[_, mw])) in mins.chunks_exact(groups).zip(dm).enumerate() {
                for ((m, sums), xd) in mins_acc.iter_mut().zip(&sums).zip(&xd) {
                    let s = &sums[b * groups..(b + 1) * groups];
                    let s2: i32 = mn.iter().zip(s).map(|(&m, &s)| m as i32 * s).sum();
                    *m -= (xd[b] * mw) * s2 as f32;
                }
            }
        }
    }
    let mut terms = unsafe { K::L::totals(acc) };
    for (t, &m) in terms.iter_mut().zip(&mins_acc) {
        *t += m as f64;
    }
    terms
}
