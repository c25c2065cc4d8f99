//! Dense products on row-major slices.
//!
//! The weight products ([`matmul_transb_tiles`]; several of one input at once, [`matmul_transb_many`]) run on
//! [`block_sums`]: a GEMM that sums each output over short blocks of the inner dimension and in f64 across blocks; in
//! f32 over 128-long blocks, at about matrixmultiply's speed and several times closer to float64; in f64 over
//! matrixmultiply's own 256-long blocks, with its bits and a larger register tile. Attention's f32 products ([`gemm`])
//! sum the same way with nothing packed ([`unpacked`]). In f64 attention's products, and the Gram products
//! ([`gemm_transb`]), run on matrixmultiply's general-stride GEMM, called sequentially, which selects its kernel per
//! instruction set at run time. faer, run per weight tile, was slower in the engine (`docs/speed.md`, "Which GEMM"),
//! and saw faults on AVX-512 machines with operands that are not 64-byte aligned, as the engine's views into plain
//! vectors are (`tests/engine/faer_unaligned.rs` is the reproducer); faer remains the crate's library for
//! decompositions, on its own aligned matrices. [`peak`] measures the machine's FMA peak, the yardstick of the
//! benchmarks.
//!
//! Results are identical at any thread count: [`matmul_transb_tiles`] splits its output into column strips whose
//! width depends only on the shape and the kernel's register tile, each strip is multiplied sequentially, and
//! the split never depends on how many threads run it (nor does any element depend on where the strips are
//! cut), so every output element is computed by the same operations in the same order.

pub mod block_sums;
pub mod isa;
pub mod unpacked;
// The FMA peak is the benchmarks' yardstick; the engine never reads it.
#[cfg(feature = "internals")]
pub mod peak;

pub use isa::Isa;

use crate::numeric::Real;
use crate::profile::{count_flops, time, Step};
use rayon::prelude::*;

/// Number of elements a row-major `rows × cols` view with row stride `ld` spans.
fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

/// `out[m × n] = alpha · a[m × k] · B` where `B` is the `k × n` matrix whose element `(r, c)` sits at
/// `b[r · b_strides.0 + c · b_strides.1]` (both strides ≥ 0, and `b_span` elements long). `a` and `out` are
/// row-major with row strides `lda`, `ldo`. Panics if a slice is shorter than its view.
#[allow(clippy::too_many_arguments)]
fn strided_gemm<T: Real>(
    out: &mut [T],
    ldo: usize,
    a: &[T],
    lda: usize,
    (b, b_strides, b_span): (&[T], (usize, usize), usize),
    (m, n, k): (usize, usize, usize),
    alpha: T,
) {
    assert!(a.len() >= span(m, k, lda) && b.len() >= b_span && out.len() >= span(m, n, ldo));
    assert!(ldo >= n && lda >= k);
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: the assertions above keep every addressed element inside the slices; `out` is a unique borrow.
    unsafe {
        T::gemm_raw(
            (m, k, n),
            alpha,
            (a.as_ptr(), lda as isize, 1),
            (b.as_ptr(), b_strides.0 as isize, b_strides.1 as isize),
            (out.as_mut_ptr(), ldo as isize, 1),
        )
    }
}

/// `out[m × n] = alpha · a[m × k] · bᵀ` where `b` is `n × k` (a weight matrix stored as `out × in`).
///
/// All three are row-major with the given row strides (`lda`, `ldb`, `ldo` elements between row starts).
/// Sequential; callers parallelise over independent products. Panics if a slice is shorter than its view.
#[allow(clippy::too_many_arguments)]
pub fn gemm_transb<T: Real>(
    out: &mut [T],
    ldo: usize,
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
    (m, n, k): (usize, usize, usize),
    alpha: T,
) {
    assert!(ldb >= k);
    strided_gemm(
        out,
        ldo,
        a,
        lda,
        (b, (1, ldb), span(n, k, ldb)),
        (m, n, k),
        alpha,
    );
}

/// `out[m × n] = alpha · a[m × k] · b[k × n]`, all row-major with the given strides: attention's products.
/// Sequential. f32 runs [`unpacked`], f64 [`packed_gemm`] ([`Real::attention_product`]). Panics if a slice is
/// shorter than its view.
#[allow(clippy::too_many_arguments)]
pub fn gemm<T: Real>(
    out: &mut [T],
    ldo: usize,
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
    mnk: (usize, usize, usize),
    alpha: T,
) {
    T::attention_product(out, ldo, a, lda, b, ldb, mnk, alpha)
}

/// [`gemm`] on matrixmultiply's GEMM, which packs both operands. Sequential. Panics if a slice is shorter than
/// its view.
#[allow(clippy::too_many_arguments)]
pub fn packed_gemm<T: Real>(
    out: &mut [T],
    ldo: usize,
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
    (m, n, k): (usize, usize, usize),
    alpha: T,
) {
    assert!(ldb >= n);
    strided_gemm(
        out,
        ldo,
        a,
        lda,
        (b, (ldb, 1), span(k, n, ldb)),
        (m, n, k),
        alpha,
    );
}

/// Columns `cols` of each whole row of the row-major `data` (rows `stride` apart), one row after another, copied
/// a row at a time into a vector allocated once (collecting a flattened iterator grew the vector by doubling):
/// a head's captured vectors, latent attention's latent, a layer's share of Gemma 4's per-layer inputs.
pub(crate) fn gather_columns<T: Copy>(data: &[T], stride: usize, cols: std::ops::Range<usize>) -> Vec<T> {
    let mut out = Vec::with_capacity(data.len() / stride * cols.len());
    for row in data.chunks_exact(stride) {
        out.extend_from_slice(&row[cols.clone()]);
    }
    out
}

/// A row-major output shared by the parallel tasks that each write their own disjoint column strip of it
/// ([`matmul_transb_tiles`], the integer products of `model::matrix`).
pub(crate) struct StripOut<T>(pub(crate) *mut T);

// SAFETY: the pointer is only used to write column strips that no other task touches (see
// `matmul_transb_tiles`).
unsafe impl<T: Send> Send for StripOut<T> {}
// SAFETY: as above; tasks only write through it, each to its own strip.
unsafe impl<T: Send> Sync for StripOut<T> {}

/// Weight rows per tile below which [`weight_tiles`] makes fewer tiles than eight: two tiles of 16 rows each.
pub const MIN_WEIGHT_TILE: usize = 16;

/// Largest number of weight rows per work item of [`matmul_transb_tiles`]: it bounds the produced tile (2 MiB
/// in f32 for 2048 inputs) while every item still multiplies enough weight rows to amortise packing the
/// activations.
pub const MAX_WEIGHT_TILE: usize = 256;

/// The weight rows of each parallel work item of a weight product for a weight of `n` rows, in order, cut in
/// multiples of `unit` rows (`1 ≤ unit ≤` [`MAX_WEIGHT_TILE`]): the kernel's register-tile width
/// ([`block_sums::panel_width`]), so that no tile multiplies padding, or the integer products' row group.
///
/// About eight tiles (one per [`MIN_WEIGHT_TILE`]` · 2` rows where there are fewer), so that even the small key
/// and value projections give every core of a laptop work, each of at most [`MAX_WEIGHT_TILE`] rows and, but
/// for the last, a multiple of `unit`, their sizes differing by at most one unit: cores that take equal numbers
/// of tiles get equal work. It depends on `n` and `unit` alone, never on the thread count (nor does any
/// result depend on where the tiles are cut: each output element is one tile's, computed whole).
pub fn weight_tiles(n: usize, unit: usize) -> Vec<std::ops::Range<usize>> {
    assert!((1..=MAX_WEIGHT_TILE).contains(&unit), "tile unit {unit}");
    let units = n.div_ceil(unit);
    let count = units
        .div_ceil(MAX_WEIGHT_TILE / unit)
        .max((n.div_ceil(MIN_WEIGHT_TILE) / 2).clamp(1, 8))
        .min(units);
    let end = |i: usize| (units * i / count * unit).min(n);
    (0..count).map(|i| end(i)..end(i + 1)).collect()
}

/// Runs `f` on the first `len` elements of the calling thread's buffer `cell` (grown as needed, never
/// shrunk, its contents whatever an earlier call left), or on a fresh buffer if `f` is re-entered on this thread
/// (a fill that waits on rayon work may run another tile meanwhile). Kept between calls, a tile buffer is
/// neither faulted in nor cleared for every product.
pub(crate) fn with_thread_buffer<T: Copy + Default, R>(
    cell: &'static std::thread::LocalKey<std::cell::RefCell<Vec<T>>>,
    len: usize,
    f: impl FnOnce(&mut [T]) -> R,
) -> R {
    cell.with(|buf| match buf.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, T::default());
            }
            f(&mut buf[..len])
        }
        Err(_) => f(&mut vec![T::default(); len]),
    })
}

/// A weight of [`matmul_transb_many`]: `n` rows of `k` values that `fill(r0..r1, buf)` writes (row-major, `k`
/// each) tile by tile, or [`block_sums::Panels`] packed once.
pub enum WeightTiles<'a, T> {
    /// `(n, fill)`.
    Fill(usize, &'a (dyn Fn(std::ops::Range<usize>, &mut [T]) + Sync)),
    /// The weight packed for the kernel of [`Isa::best`].
    Packed(&'a block_sums::Panels<T>),
}

impl<T: Real> WeightTiles<'_, T> {
    /// The weight's rows.
    fn rows(&self) -> usize {
        match self {
            WeightTiles::Fill(n, _) => *n,
            WeightTiles::Packed(p) => p.rows(),
        }
    }
}

/// `x[rows × k] · wᵀ` for a weight `w` (`n × k`, stored as `out × in`, ggml's layout of `y = W x`) that is
/// produced tile by tile: `fill(r0..r1, buf)` must write weight rows `r0..r1` (row-major, `k` each) into `buf`.
/// Returns the `rows × n` product: [`matmul_transb_many`] of the one weight.
pub fn matmul_transb_tiles<T: Real>(
    x: &[T],
    rows: usize,
    k: usize,
    n: usize,
    fill: impl Fn(std::ops::Range<usize>, &mut [T]) + Sync,
) -> Vec<T> {
    let mut outs = matmul_transb_many(x, rows, k, &[WeightTiles::Fill(n, &fill)]);
    outs.pop().expect("one product")
}

/// `x[rows × k] · wᵢᵀ` for each weight `wᵢ` of `weights` (`nᵢ × k` each), as one product: the
/// activations packed once, and the tiles of every weight in one parallel loop. Returns the `rows × nᵢ`
/// products in order. Projections of the same input (a layer's queries, keys and values; the feed-forward
/// gate and up) computed so pack their input once instead of once each and join the threads once, and the
/// small key and value projections' tiles share the cores with the others'.
///
/// Runs in parallel over the fixed tiles of [`weight_tiles`]`(nᵢ, `[`block_sums::panel_width`]`)` of each
/// weight; each tile is produced once and multiplied with all `rows` rows of `x` sequentially, so every output
/// element is computed by the same operations in the same order at any thread count, and is the same whether
/// its weight is multiplied alone or with others.
pub fn matmul_transb_many<T: Real>(
    x: &[T],
    rows: usize,
    k: usize,
    weights: &[WeightTiles<'_, T>],
) -> Vec<Vec<T>> {
    assert_eq!(x.len(), rows * k);
    let isa = Isa::best();
    for w in weights {
        if let WeightTiles::Packed(p) = w {
            assert!(p.isa() == isa && p.cols() == k, "panels of {} × {} for {}", p.rows(), p.cols(), p.isa());
        }
    }
    if k == 0 || rows == 0 {
        return weights.iter().map(|w| vec![T::zero(); rows * w.rows()]).collect();
    }
    // Not cleared first: every element is written by exactly one tile's product.
    let mut outs: Vec<Vec<T>> = weights.iter().map(|w| Vec::with_capacity(rows * w.rows())).collect();
    let unit = block_sums::panel_width::<T>(isa);
    let packed = block_sums::pack_activations(x, rows, k);
    let dsts: Vec<StripOut<T>> = outs.iter_mut().map(|o| StripOut(o.as_mut_ptr())).collect();
    let tiles: Vec<(usize, std::ops::Range<usize>)> = weights
        .iter()
        .enumerate()
        .flat_map(|(i, w)| weight_tiles(w.rows(), unit).into_iter().map(move |tile| (i, tile)))
        .collect();
    tiles.into_par_iter().for_each(|(i, tile)| {
        let (n, dst) = (weights[i].rows(), &dsts[i]);
        // SAFETY (both arms): `packed` holds `rows × k` activations (asserted) and the weight tile `nc × k`
        // values; the output view, columns `c0..c0 + nc` of every row of weight `i`'s `rows × n` buffer with
        // row stride `n`, lies inside `outs[i]`, and distinct tiles address disjoint columns or distinct
        // buffers, so no two tasks write the same element and none reads what another writes. `outs` outlives
        // the parallel loop.
        match &weights[i] {
            WeightTiles::Fill(_, fill) => T::with_tile_buffer(tile.len() * k, |w| {
                time(Step::Dequantize, || fill(tile.clone(), w));
                time(Step::Multiply, || unsafe {
                    let at = dst.0.add(tile.start);
                    block_sums::tile_product(isa, &packed, rows, k, w, tile.len(), at, n)
                });
            }),
            WeightTiles::Packed(p) => time(Step::Multiply, || unsafe {
                let at = dst.0.add(tile.start);
                block_sums::panels_product(&packed, rows, p, tile.clone(), at, n)
            }),
        }
        count_flops(Step::Multiply, 2 * rows * k * tile.len());
    });
    for (out, w) in outs.iter_mut().zip(weights) {
        // SAFETY: the tiles of each weight cover its columns `0..n` (`weight_tiles`), and each tile's product
        // wrote its columns of every row.
        unsafe { out.set_len(rows * w.rows()) };
    }
    outs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f64], rows: usize, k: usize, w: &[f64], n: usize) -> Vec<f64> {
        let mut out = vec![0.0; rows * n];
        for r in 0..rows {
            for c in 0..n {
                out[r * n + c] = (0..k).map(|i| x[r * k + i] * w[c * k + i]).sum();
            }
        }
        out
    }

    #[test]
    fn matmul_transb_tiles_matches_naive_and_is_thread_count_independent() {
        let (rows, k, n) = (300, 19, 8 * MAX_WEIGHT_TILE + 23);
        let x: Vec<f64> = (0..rows * k)
            .map(|i| ((i * 7919) % 101) as f64 / 50.0 - 1.0)
            .collect();
        let w: Vec<f64> = (0..n * k)
            .map(|i| ((i * 104729) % 97) as f64 / 48.0 - 1.0)
            .collect();
        let product = || {
            matmul_transb_tiles(&x, rows, k, n, |r, buf| {
                buf.copy_from_slice(&w[r.start * k..r.end * k])
            })
        };
        let got = product();
        let want = naive(&x, rows, k, &w, n);
        assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-12));
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let single = one.install(product);
        assert!(got
            .iter()
            .zip(&single)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn weights_multiplied_together_give_each_ones_bits_alone() {
        // f32 over two blocks of the inner index, so that the f64 sums across blocks are in play; the middle
        // weight has fewer rows than one tile, the last none.
        let (rows, k) = (37, 2 * block_sums::BLOCK + 5);
        let value = |i: usize, m: usize| ((i * m) % 211) as f32 / 105.0 - 1.0;
        let x: Vec<f32> = (0..rows * k).map(|i| value(i, 7919)).collect();
        let sizes = [3 * MAX_WEIGHT_TILE + 40, 9, 0];
        let weights: Vec<Vec<f32>> = sizes
            .iter()
            .enumerate()
            .map(|(j, &n)| (0..n * k).map(|i| value(i + j, 104729)).collect())
            .collect();
        let fills: Vec<_> = weights
            .iter()
            .map(|w| move |r: std::ops::Range<usize>, buf: &mut [f32]| buf.copy_from_slice(&w[r.start * k..r.end * k]))
            .collect();
        let tiles: Vec<WeightTiles<'_, f32>> = sizes
            .iter()
            .zip(&fills)
            .map(|(&n, f)| WeightTiles::Fill(n, f as &(dyn Fn(std::ops::Range<usize>, &mut [f32]) + Sync)))
            .collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let together = matmul_transb_many(&x, rows, k, &tiles);
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let single = one.install(|| matmul_transb_many(&x, rows, k, &tiles));
        assert_eq!(together.len(), sizes.len());
        for (i, (&n, w)) in sizes.iter().zip(&weights).enumerate() {
            let alone = matmul_transb_tiles(&x, rows, k, n, |r, buf| buf.copy_from_slice(&w[r.start * k..r.end * k]));
            assert_eq!(together[i].len(), rows * n);
            assert_eq!(bits(&together[i]), bits(&alone), "weight {i}");
            assert_eq!(bits(&single[i]), bits(&alone), "weight {i}, one thread");
        }
        // And the products are the products: a few elements against f64 sums.
        for (r, c) in [(0, 0), (rows - 1, sizes[0] - 1), (5, 700)] {
            let exact: f64 = (0..k).map(|p| x[r * k + p] as f64 * weights[0][c * k + p] as f64).sum();
            assert!((together[0][r * sizes[0] + c] as f64 - exact).abs() < 1e-4 * (1.0 + exact.abs()));
        }
        // No rows or no inner index: zeros of the right shapes.
        let empty = matmul_transb_many(&x[..0], 0, k, &tiles);
        assert!(empty.iter().all(Vec::is_empty));
        let nothing = |_: std::ops::Range<usize>, _: &mut [f32]| {};
        let no_inner = matmul_transb_many(&[], 3, 0, &[WeightTiles::Fill(2, &nothing)]);
        assert_eq!(no_inner, vec![vec![0.0; 6]]);
    }

    #[test]
    fn weight_tiles_cover_the_rows_in_near_equal_multiples_of_their_unit() {
        for unit in [8, 16, 24, 32] {
            tiles_of(unit);
        }
        // SmolLM2's width: eight tiles of 64 and 80 rows alternating, 288 rows in each half, in units of 16; of
        // 64 and 96 rows in units of 32 (no AVX-512 f32 panel padded), 288 rows in each half again.
        let sizes = |unit| -> Vec<usize> { weight_tiles(576, unit).iter().map(|t| t.len()).collect() };
        assert_eq!(sizes(16), [64, 80, 64, 80, 64, 80, 64, 80]);
        assert_eq!(sizes(32), [64, 64, 64, 96, 64, 64, 64, 96]);
        // The key and value projections' 192 rows: six tiles, three for each of two cores.
        assert_eq!(weight_tiles(192, 32).len(), 6);
        assert_eq!(weight_tiles(192, 24).len(), 6);
    }

    /// Checks [`weight_tiles`] in units of `unit` over many widths.
    fn tiles_of(unit: usize) {
        assert!(weight_tiles(0, unit).is_empty());
        for n in (1..5000).chain([49_152, 262_144]) {
            let tiles = weight_tiles(n, unit);
            assert_eq!(
                (tiles[0].start, tiles.last().unwrap().end),
                (0, n),
                "n = {n}"
            );
            assert!(tiles.windows(2).all(|t| t[0].end == t[1].start), "n = {n}");
            let full = &tiles[..tiles.len() - 1];
            assert!(full.iter().all(|t| t.len() % unit == 0), "n = {n}");
            let (lo, hi) = full.iter().fold((usize::MAX, 0), |(lo, hi), t| {
                (lo.min(t.len()), hi.max(t.len()))
            });
            assert!(
                full.is_empty() || (lo >= unit && hi <= lo + unit),
                "n = {n}"
            );
            assert!(
                tiles
                    .iter()
                    .all(|t| !t.is_empty() && t.len() <= MAX_WEIGHT_TILE),
                "n = {n}"
            );
            // About eight, so that small projections still give every core work.
            assert!(
                tiles.len() >= (n.div_ceil(MIN_WEIGHT_TILE) / 2).clamp(1, 8).min(n.div_ceil(unit)),
                "n = {n}"
            );
        }
    }

    #[test]
    fn a_thread_buffer_is_kept_between_calls_and_fresh_when_re_entered() {
        thread_local! {
            static BUF: std::cell::RefCell<Vec<u32>> = std::cell::RefCell::default();
        }
        with_thread_buffer(&BUF, 4, |b| b.copy_from_slice(&[1, 2, 3, 4]));
        // A shorter request sees the start of what the last call left; a re-entered call gets its own buffer.
        let (kept, inner) = with_thread_buffer(&BUF, 2, |outer| {
            let inner = with_thread_buffer(&BUF, 3, |b| {
                b.fill(9);
                b.to_vec()
            });
            (outer.to_vec(), inner)
        });
        assert_eq!((kept, inner), (vec![1, 2], vec![9, 9, 9]));
        assert_eq!(with_thread_buffer(&BUF, 4, |b| b.to_vec()), [1, 2, 3, 4]);
    }

    #[test]
    fn strided_views_at_odd_offsets() {
        // a: 3 x 2 view starting at offset 1 with row stride 5; b: 2 x 4 with row stride 6.
        let a: Vec<f64> = (0..20).map(|i| i as f64).collect();
        let b: Vec<f64> = (0..20).map(|i| (i as f64) * 0.5).collect();
        let mut out = vec![0.0; 3 * 4];
        gemm(&mut out, 4, &a[1..], 5, &b[3..], 6, (3, 4, 2), 1.0);
        for r in 0..3 {
            for c in 0..4 {
                let want: f64 = (0..2).map(|i| a[1 + r * 5 + i] * b[3 + i * 6 + c]).sum();
                assert_eq!(out[r * 4 + c], want);
            }
        }
    }
}
