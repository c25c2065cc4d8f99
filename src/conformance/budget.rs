//! The error budget: how far an honest engine running in a given precision may be from float64, stage by stage,
//! derived a priori from the stage's own inputs and magnitudes (`theory/conformance-budget.md`).
//!
//! Each stage is judged from the other engine's own inputs: its post-RoPE queries from its pre-RoPE queries,
//! its attention probabilities from its post-RoPE queries and keys. Rounding done before the stage is then in
//! the inputs and cancels, so the budget stays a few roundings wide however deep the stage lies in the model,
//! while a mistake inside the stage (a wrong frequency, magnitude, pairing, scale or mask) shows whole.
//!
//! The bounds count the roundings an engine must do (the angle `p · g` and the frequency `g` in at least
//! float32, cosine and sine, the products and sums in the working precision, one rounding of each stored
//! result), worst case where a stage has a few operations per element and of the probabilistic `λ √n u` kind
//! (Higham and Mary, 2019) for the length-`d` dot products of the scores; every bound is multiplied by
//! [`SAFETY`].

use std::fmt;
use std::str::FromStr;

/// Factor on every bound, for what the bounds do not count (a library's `cos` within a few ulp instead of one,
/// a fused multiply-add here and not there). A deviation of `SAFETY` times the counted rounding is still
/// rounding; one of `10 · SAFETY` is not.
pub const SAFETY: f64 = 4.0;

/// `λ` of the probabilistic dot-product bound `|Δ(Σ aᵢbᵢ)| ≤ λ √n u Σ|aᵢbᵢ|`, which fails with probability at
/// most `2 exp(−λ²/2)` per dot product under the model of independent rounding errors (`λ = 6`: 3·10⁻⁸).
pub const LAMBDA: f64 = 6.0;

/// Relative error, in float32 ulps, allowed in an engine's frequencies `g_l = base^(−2l/d)`: a power in
/// float32 (HF computes `1 / base^(arange / d)` in float32) is within a few ulp.
pub const FREQUENCY_ULPS: f64 = 4.0;

/// Unit roundoff of float32, `2⁻²⁴`: the least precision of an engine's angles, frequencies, accumulations and
/// softmax. An engine that computes positions times frequencies in bfloat16 loses whole radians at long context,
/// which is a mistake, not a precision.
pub const U32: f64 = 5.960_464_477_539_063e-8;

/// The working precision of an engine's tensors: the precision its stored queries, keys, scores and
/// probabilities are rounded to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// IEEE single precision.
    F32,
    /// bfloat16: 8 significant bits.
    Bf16,
    /// IEEE half precision: 11 significant bits.
    F16,
}

impl Precision {
    /// Every precision, in the order the command line lists them.
    pub const ALL: [Precision; 3] = [Precision::F32, Precision::Bf16, Precision::F16];

    /// The unit roundoff `u`: half the distance from 1 to the next representable number.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            Precision::F32 => U32,
            Precision::Bf16 => 2f64.powi(-8),
            Precision::F16 => 2f64.powi(-11),
        }
    }

    /// The name used on the command line and in JSON (`f32`, `bf16`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown precision '{s}' (f32, bf16, f16)"))
    }
}

/// The budget of one rotated coordinate: the coordinate `y` of the pair `(x_a, x_b)` rotated to position `pos`
/// by the angular frequency `g` with magnitude `m` (YaRN's and LongRoPE's factor on cosine and sine).
///
/// Counted: the frequency's relative error ([`FREQUENCY_ULPS`] float32 ulps) and the angle's rounding, both
/// growing with `pos · g`; cosine and sine in float32 and their rounding to `precision`; the two products and
/// the sum in `precision`; the rounding of the stored result.
pub fn rotated_coordinate(
    (x_a, x_b): (f64, f64),
    y: f64,
    pos: usize,
    g: f64,
    m: f64,
    precision: Precision,
) -> f64 {
    let u = precision.unit_roundoff();
    let angle = pos as f64 * g.abs() * (FREQUENCY_ULPS + 1.0) * U32;
    SAFETY * (m.abs() * (x_a.abs() + x_b.abs()) * (angle + U32 + 3.0 * u) + u * y.abs())
}

/// The budget of a coordinate that does not rotate (past a partial rotation, a chunk of frequency 0, a NoPE
/// layer): the value passes through, at most rounded once to `precision`.
pub fn unrotated_coordinate(x: f64, precision: Precision) -> f64 {
    SAFETY * precision.unit_roundoff() * x.abs()
}

/// The budget of one attention score `s = scale · q·k` (soft-capped or not) computed from the engine's own
/// `q` and `k`: the length-`d` dot product accumulated in at least float32 (`λ √d u₃₂ scale Σ|qᵢkᵢ|`), then the
/// score rounded to `precision` twice (the product and the scaling) and, with soft-capping, three times more.
pub fn score(
    abs_dot: f64,
    d: usize,
    scale: f64,
    s: f64,
    softcap: bool,
    precision: Precision,
) -> f64 {
    let roundings = if softcap { 5.0 } else { 2.0 };
    SAFETY
        * (LAMBDA * (d as f64).sqrt() * U32 * scale.abs() * abs_dot
            + roundings * precision.unit_roundoff() * s.abs())
}

/// The budgets of one row of attention probabilities `p = softmax(s)` (with a sink logit, if any, as one more
/// entry), from the scores' budgets `score_budget` and the row's exact probabilities `p` and scores `s`
/// (visible keys only, in the same order).
///
/// First order, a perturbation `Δs` moves `p_j` by `p_j (Δs_j − Σ_k p_k Δs_k)`; the softmax itself, computed in
/// float32 (as HF does in every precision), adds `p_j u₃₂ (|s_j − max s| + 2 + log₂ n)` (the exponential's
/// argument and value, and the sum); the result is rounded once to `precision`. An exact zero (a masked key) has
/// no budget: a masked key must get exactly nothing.
pub fn probabilities(p: &[f64], s: &[f64], score_budget: &[f64], precision: Precision) -> Vec<f64> {
    let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean_shift: f64 = p.iter().zip(score_budget).map(|(p, b)| p * b).sum();
    let softmax_roundings = 2.0 + (p.len().max(1) as f64).log2();
    p.iter()
        .zip(s)
        .zip(score_budget)
        .map(|((&p, &s), &b)| {
            p * (b + mean_shift)
                + SAFETY
                    * p
                    * (U32 * ((s - max).abs() + softmax_roundings) + precision.unit_roundoff())
                + f32::MIN_POSITIVE as f64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precisions_parse_by_name_and_order_by_roundoff() {
        for p in Precision::ALL {
            assert_eq!(p.name().parse::<Precision>().unwrap(), p);
        }
        assert!("f64"
            .parse::<Precision>()
            .unwrap_err()
            .contains("f32, bf16, f16"));
        assert_eq!(U32, f32::EPSILON as f64 / 2.0);
        assert!(Precision::F32.unit_roundoff() < Precision::F16.unit_roundoff());
        assert!(Precision::F16.unit_roundoff() < Precision::Bf16.unit_roundoff());
    }

    #[test]
    fn the_rotation_budget_grows_with_the_angle_and_the_precision() {
        let at = |pos, prec| rotated_coordinate((1.0, 1.0), 1.0, pos, 1.0, 1.0, prec);
        assert!(at(1000, Precision::F32) > 100.0 * at(0, Precision::F32));
        assert!(at(0, Precision::Bf16) > 1000.0 * at(0, Precision::F32));
        assert_eq!(unrotated_coordinate(0.0, Precision::Bf16), 0.0);
    }

    #[test]
    fn a_key_of_probability_zero_has_no_budget_beyond_underflow() {
        let b = probabilities(&[1.0, 0.0], &[0.0, -1e9], &[0.1, 0.1], Precision::Bf16);
        assert!(b[1] <= f32::MIN_POSITIVE as f64);
        assert!(b[0] > 0.2);
    }
}
