//! Lemmas A.1 and A.2 of *Round and Round We Go* (Appendix A): for a rational `g ≠ 0` (RoPE's `g_l` are rational,
//! being floating-point numbers) and an integer `n`, `n g ≡ 0 (mod 2π)` only when `n = 0`, since π is irrational
//! (A.1); and the angles `n g mod 2π` are dense in `[0, 2π]` (A.2). Numerically: the distance of `n g` to the
//! nearest multiple of 2π is positive for every `n ≠ 0`, and the check reports how close it comes; and every
//! target angle of a grid is reached within `δ` by some `n ≤ N(δ)`, with `N` growing as `δ` shrinks.

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

/// Lemma A.2 on a finite range: the least `N ≤ n_max` such that each of the `targets` angles `2π t / targets`
/// (`t = 0..targets`) is within `delta` (on the circle) of `n g mod 2π` for some `n ∈ 1..=N`; `None` when some
/// target is still unreached at `n_max` (or `targets == 0`, or `delta` is not positive).
pub fn covering_length(g: f64, targets: usize, delta: f64, n_max: u64) -> Option<u64> {
    if targets == 0 || delta.is_nan() || delta <= 0.0 {
        return None;
    }
    let step = TAU / targets as f64;
    let mut reached = vec![false; targets];
    let mut left = targets;
    // The targets within `delta` of `x` lie among the indices `(x ± delta) / step`, taken round the circle.
    let reach = (delta / step).ceil() as i64 + 1;
    for n in 1..=n_max {
        let x = (n as f64 * g).rem_euclid(TAU);
        let centre = (x / step).round() as i64;
        for t in centre - reach..=centre + reach {
            let i = t.rem_euclid(targets as i64) as usize;
            if !reached[i] && distance_to_multiple_of_two_pi(x - i as f64 * step) <= delta {
                reached[i] = true;
                left -= 1;
            }
        }
        if left == 0 {
            return Some(n);
        }
    }
    None
}
