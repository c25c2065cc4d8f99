//! Pearson correlation, the one the scan, the positional/symbolic analysis and the report share.

/// Pearson's correlation of `x` and `y` (equal lengths): the covariance over the product of the standard
/// deviations, with means taken as the sum divided by `n`. `None` for fewer than two pairs or a constant series,
/// where it is undefined.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    debug_assert_eq!(x.len(), y.len());
    if x.len() < 2 {
        return None;
    }
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
    (vx > 0.0 && vy > 0.0).then(|| cov / (vx * vy).sqrt())
}
