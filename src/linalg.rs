//! Dense products on row-major slices.
//!
//! The products run on matrixmultiply's general-stride GEMM, called sequentially. faer's GEMM is not used
//! here: on AVX-512 machines its x86 backend faults on ordinary (not 64-byte aligned) slices, and the engine's
//! operands are views into plain vectors at arbitrary offsets. faer remains the crate's library for
//! decompositions, on its own aligned matrices.
//!
//! Results are identical at any thread count: [`matmul_transb`] splits its output into tiles of a fixed size
//! ([`ROW_TILE`] × [`COL_TILE`]), each tile is multiplied sequentially, and the split never depends on how many
//! threads run it, so every output element is computed by the same operations in the same order.

use crate::numeric::Real;
use rayon::prelude::*;

/// Rows of the output per parallel work item in [`matmul_transb`].
///
/// Large enough that the packed weight panel of a tile is reused over many rows (the GEMM packs both operands
/// of every call), small enough that a 512-token pass still yields several tiles per thread.
pub const ROW_TILE: usize = 256;

/// Columns of the output (rows of the weight) per parallel work item in [`matmul_transb`].
pub const COL_TILE: usize = 256;

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

/// `out[m × n] = a[m × k] · b[k × n]`, all row-major with the given strides. Sequential. Panics if a slice is
/// shorter than its view.
#[allow(clippy::too_many_arguments)]
pub fn gemm<T: Real>(
    out: &mut [T],
    ldo: usize,
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
    (m, n, k): (usize, usize, usize),
) {
    assert!(ldb >= n);
    strided_gemm(
        out,
        ldo,
        a,
        lda,
        (b, (ldb, 1), span(k, n, ldb)),
        (m, n, k),
        T::one(),
    );
}

/// The output of [`matmul_transb`], shared by the tasks that write its disjoint tiles.
struct TileOut<T>(*mut T);

// SAFETY: the pointer is only used to write tiles that no other task touches (see `matmul_transb`).
unsafe impl<T: Send> Send for TileOut<T> {}
// SAFETY: as above; tasks only write through it, each to its own tile.
unsafe impl<T: Send> Sync for TileOut<T> {}

/// `x[rows × k] · wᵀ` for a weight `w` stored as `n × k` (ggml's layout of `y = W x`), in parallel over fixed
/// tiles of the output ([`ROW_TILE`] rows × [`COL_TILE`] columns). Returns the `rows × n` product.
pub fn matmul_transb<T: Real>(x: &[T], rows: usize, k: usize, w: &[T], n: usize) -> Vec<T> {
    assert_eq!(x.len(), rows * k);
    assert_eq!(w.len(), n * k);
    let mut out = vec![T::zero(); rows * n];
    if k == 0 || rows == 0 || n == 0 {
        return out;
    }
    let col_tiles = n.div_ceil(COL_TILE);
    let tiles = rows.div_ceil(ROW_TILE) * col_tiles;
    let dst = TileOut(out.as_mut_ptr());
    (0..tiles).into_par_iter().for_each(|tile| {
        let (r0, c0) = ((tile / col_tiles) * ROW_TILE, (tile % col_tiles) * COL_TILE);
        let (m, nc) = (ROW_TILE.min(rows - r0), COL_TILE.min(n - c0));
        let dst = &dst;
        // SAFETY: `x` holds rows `r0..r0 + m` of `k` elements and `w` rows `c0..c0 + nc` (asserted lengths);
        // the output view, rows `r0..r0 + m` × columns `c0..c0 + nc` of the `rows × n` buffer with row stride
        // `n`, lies inside `out`, and distinct tiles address disjoint elements, so no two tasks write the same
        // element and none reads what another writes. `out` outlives the parallel loop.
        unsafe {
            T::gemm_raw(
                (m, k, nc),
                T::one(),
                (x.as_ptr().add(r0 * k), k as isize, 1),
                (w.as_ptr().add(c0 * k), 1, k as isize),
                (dst.0.add(r0 * n + c0), n as isize, 1),
            )
        }
    });
    out
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
    fn matmul_transb_matches_naive_and_is_thread_count_independent() {
        let (rows, k, n) = (ROW_TILE + 37, 19, COL_TILE + 23);
        let x: Vec<f64> = (0..rows * k)
            .map(|i| ((i * 7919) % 101) as f64 / 50.0 - 1.0)
            .collect();
        let w: Vec<f64> = (0..n * k)
            .map(|i| ((i * 104729) % 97) as f64 / 48.0 - 1.0)
            .collect();
        let got = matmul_transb(&x, rows, k, &w, n);
        let want = naive(&x, rows, k, &w, n);
        assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-12));
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let single = one.install(|| matmul_transb(&x, rows, k, &w, n));
        assert!(got
            .iter()
            .zip(&single)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn strided_views_at_odd_offsets() {
        // a: 3 x 2 view starting at offset 1 with row stride 5; b: 2 x 4 with row stride 6.
        let a: Vec<f64> = (0..20).map(|i| i as f64).collect();
        let b: Vec<f64> = (0..20).map(|i| (i as f64) * 0.5).collect();
        let mut out = vec![0.0; 3 * 4];
        gemm(&mut out, 4, &a[1..], 5, &b[3..], 6, (3, 4, 2));
        for r in 0..3 {
            for c in 0..4 {
                let want: f64 = (0..2).map(|i| a[1 + r * 5 + i] * b[3 + i * 6 + c]).sum();
                assert_eq!(out[r * 4 + c], want);
            }
        }
    }
}
