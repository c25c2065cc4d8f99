//! Lemma A.1 of *Round and Round We Go* (Appendix A.1): for a rational `g ≠ 0` (RoPE's `g_l` are rational, being
//! floating-point numbers) and an integer `n`, `n g ≡ 0 (mod 2π)` only when `n = 0`, since π is irrational.
//! Numerically: the distance of `n g` to the nearest multiple of 2π is positive for every `n ≠ 0`, and the
//! check reports how close it comes.

use std::f64::consts::TAU;

/// The `n ∈ 1..=n_max` whose `n g` comes closest to a multiple of 2π, with that distance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NearestReturn {
    /// The multiplier `n`.
    pub n: u64,
    /// `min_k |n g − 2πk|`.
    pub distance: f64,
}

/// `min_k |x − 2πk|`, in `[0, π]`.
pub fn distance_to_multiple_of_two_pi(x: f64) -> f64 {
    let r = x.rem_euclid(TAU);
    r.min(TAU - r)
}

/// The closest return of the rotation by `g`: the `n ∈ 1..=n_max` minimising the distance of `n g` to `2πℤ`
/// (the smallest such `n` on ties). `None` when `n_max == 0`.
pub fn nearest_return(g: f64, n_max: u64) -> Option<NearestReturn> {
    (1..=n_max)
        .map(|n| NearestReturn {
            n,
            distance: distance_to_multiple_of_two_pi(n as f64 * g),
        })
        .reduce(|best, x| if x.distance < best.distance { x } else { best })
}

/// An upper bound on the floating-point error of [`distance_to_multiple_of_two_pi`]`(n g)` for `n ≤ n_max`:
/// the product `n g` is off by at most `n g ε/2`, and reducing by the rounded 2π adds at most `(n g / 2π + 1)`
/// times its error `2π ε/2`. A distance above this bound is certainly non-zero.
pub fn rounding_bound(g: f64, n_max: u64) -> f64 {
    let x = n_max as f64 * g.abs();
    (x + x + TAU) * f64::EPSILON
}
