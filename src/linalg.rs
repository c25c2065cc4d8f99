//! Dense products on row-major slices.
//!
//! The products run on matrixmultiply's general-stride GEMM, called sequentially. faer's GEMM is not used
//! here: on AVX-512 machines its x86 backend faults on ordinary (not 64-byte aligned) slices, and the engine's
//! operands are views into plain vectors at arbitrary offsets. faer remains the crate's library for
//! decompositions, on its own aligned matrices.
//!
//! Results are identical at any thread count: work is split into row chunks of a fixed size
//! ([`ROW_CHUNK`]), each chunk is multiplied sequentially, and the split never depends on how many threads
//! run it, so every output element is computed by the same operations in the same order.

use crate::numeric::Real;
use rayon::prelude::*;

/// Rows per parallel work item in [`matmul_transb`].
pub const ROW_CHUNK: usize = 16;

/// Number of elements a row-major `rows × cols` view with row stride `ld` spans.
fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
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
    assert!(
        a.len() >= span(m, k, lda) && b.len() >= span(n, k, ldb) && out.len() >= span(m, n, ldo)
    );
    assert!(ldo >= n && lda >= k && ldb >= k);
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: the assertions above keep every addressed element inside the slices; `out` is a unique borrow.
    unsafe {
        T::gemm_raw(
            (m, k, n),
            alpha,
            (a.as_ptr(), lda as isize, 1),
            (b.as_ptr(), 1, ldb as isize),
            (out.as_mut_ptr(), ldo as isize, 1),
        )
    }
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
    assert!(
        a.len() >= span(m, k, lda) && b.len() >= span(k, n, ldb) && out.len() >= span(m, n, ldo)
    );
    assert!(ldo >= n && lda >= k && ldb >= n);
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: as in `gemm_transb`.
    unsafe {
        T::gemm_raw(
            (m, k, n),
            T::one(),
            (a.as_ptr(), lda as isize, 1),
            (b.as_ptr(), ldb as isize, 1),
            (out.as_mut_ptr(), ldo as isize, 1),
        )
    }
}

/// `x[rows × k] · wᵀ` for a weight `w` stored as `n × k` (ggml's layout of `y = W x`), in parallel over
/// fixed chunks of rows. Returns the `rows × n` product.
pub fn matmul_transb<T: Real>(x: &[T], rows: usize, k: usize, w: &[T], n: usize) -> Vec<T> {
    assert_eq!(x.len(), rows * k);
    assert_eq!(w.len(), n * k);
    let mut out = vec![T::zero(); rows * n];
    if k == 0 {
        return out;
    }
    out.par_chunks_mut(ROW_CHUNK * n)
        .zip(x.par_chunks(ROW_CHUNK * k))
        .for_each(|(o, xa)| {
            let m = xa.len() / k;
            gemm_transb(o, n, xa, k, w, k, (m, n, k), T::one());
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
        let (rows, k, n) = (37, 19, 23);
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
