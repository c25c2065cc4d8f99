//! How close a matrix (the queries or keys of a head, one row per token) is to rank one.
//!
//! Two statistics of the singular values `σ_1 ≥ σ_2 ≥ … ≥ 0`, both reported because the slash paper does not
//! publish its own: the rank-one share `σ_1² / Σ σ_k²` (1 exactly for rank one) and the entropy effective rank
//! `exp(−Σ p_k ln p_k)` with `p_k = σ_k / Σ σ` (Roy & Vetterli, 2007; 1 exactly for rank one, `r` for `r`
//! equal singular values).

pub use faer::linalg::svd::SvdError;

/// Both rank statistics of one matrix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankStats {
    /// `σ_1² / Σ σ_k²`, in `(0, 1]`.
    pub rank_one_share: f64,
    /// `exp(−Σ p_k ln p_k)`, `p_k = σ_k / Σ σ`, in `[1, min(rows, cols)]`.
    pub effective_rank: f64,
}

/// Singular values, largest first, of the row-major `rows × cols` matrix `data`, computed by faer's SVD run
/// sequentially (faer's parallel SVD rounds differently at different thread counts; results here must not
/// depend on them).
///
/// # Panics
/// If `data.len() != rows * cols`.
#[track_caller]
pub fn singular_values(data: &[f64], rows: usize, cols: usize) -> Result<Vec<f64>, SvdError> {
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::svd::{self, ComputeSvdVectors};
    assert_eq!(data.len(), rows * cols, "data must be a rows × cols matrix");
    let a = faer::Mat::from_fn(rows, cols, |r, c| data[r * cols + c]);
    let mut s = faer::diag::Diag::<f64>::zeros(rows.min(cols));
    let no = ComputeSvdVectors::No;
    let scratch = svd::svd_scratch::<f64>(rows, cols, no, no, faer::Par::Seq, Default::default());
    svd::svd(
        a.as_ref(),
        s.as_mut(),
        None,
        None,
        faer::Par::Seq,
        MemStack::new(&mut MemBuffer::new(scratch)),
        Default::default(),
    )?;
    let mut values: Vec<f64> = s.column_vector().iter().copied().collect();
    values.sort_by(|a, b| b.total_cmp(a));
    Ok(values)
}

/// Rank statistics from singular values; `None` when they are all zero (or there are none).
pub fn rank_stats(singular_values: &[f64]) -> Option<RankStats> {
    let sum: f64 = singular_values.iter().sum();
    let sum_sq: f64 = singular_values.iter().map(|s| s * s).sum();
    let largest = singular_values.iter().copied().fold(0.0, f64::max);
    if sum <= 0.0 {
        return None;
    }
    let entropy: f64 = singular_values
        .iter()
        .map(|s| s / sum)
        .filter(|&p| p > 0.0)
        .map(|p| -p * p.ln())
        .sum();
    Some(RankStats {
        rank_one_share: largest * largest / sum_sq,
        effective_rank: entropy.exp(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_one_and_identity_matrices() {
        let outer: Vec<f64> = (0..3)
            .flat_map(|r| (0..2).map(move |c| (r + 1) as f64 * (c as f64 - 0.5)))
            .collect();
        let stats = rank_stats(&singular_values(&outer, 3, 2).unwrap()).unwrap();
        assert!((stats.rank_one_share - 1.0).abs() < 1e-12);
        assert!((stats.effective_rank - 1.0).abs() < 1e-6);
        let eye = [1.0, 0.0, 0.0, 1.0];
        let stats = rank_stats(&singular_values(&eye, 2, 2).unwrap()).unwrap();
        assert!((stats.rank_one_share - 0.5).abs() < 1e-12);
        assert!((stats.effective_rank - 2.0).abs() < 1e-12);
        assert_eq!(rank_stats(&[0.0, 0.0]), None);
        // Exact zeros add nothing to the entropy (and no 0·ln 0 = NaN).
        let stats = rank_stats(&[2.0, 0.0, 0.0]).unwrap();
        assert_eq!((stats.rank_one_share, stats.effective_rank), (1.0, 1.0));
    }
}
