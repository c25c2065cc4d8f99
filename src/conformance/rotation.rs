//! The RoPE stage judged on its own: another engine's post-RoPE queries or keys against ropescope's rotation of
//! that engine's own pre-RoPE vectors, within [`budget`]; and, where they are beyond it, which
//! kind of mistake explains them.
//!
//! The kinds are those engines have shipped: a *magnitude* (every rotated pair scaled by one constant, as a YaRN
//! or DeepSeek factor applied twice or not at all; row 0 is off too), a *frequency* (some chunks turn at another
//! rate: row 0 and every norm exact, the angle error growing with the position), a *position offset* (every
//! position shifted by a constant: q and k both move, `q·k` does not), a *pairing* (pairs rotated as
//! interleaved where they are half-split, or the reverse) and a *layout* (the right rotation, stored in the
//! other pairing's order). Each is tried as a hypothesis: its parameters fitted, the vectors predicted, and the
//! prediction held to the same budget.

use super::budget::{self, Precision};
use crate::rope::{Pairing, RopeSpec};
use serde::Serialize;

/// Largest position offset tried, in either direction.
pub const MAX_OFFSET: i64 = 8;

/// Where a layer's rotation acts inside each head of width `head_dim`.
#[derive(Clone, Debug, PartialEq)]
pub struct RotationLayout {
    /// The layer's rotary embedding, its frequencies resolved for the sequence's length.
    pub spec: RopeSpec,
    /// First rotated coordinate of each head: 0, or `head_dim − rot_dim` where the rotated part is stored last
    /// (multi-head latent attention, whose heads are `[no-RoPE part | RoPE part]`).
    pub first: usize,
}

impl RotationLayout {
    /// The coordinates of chunk `l` inside a head.
    fn dims(&self, pairing: Pairing, l: usize) -> (usize, usize) {
        let r = self.spec.rot_dim;
        let (a, b) = match pairing {
            Pairing::Adjacent => (2 * l, 2 * l + 1),
            Pairing::HalfSplit => (l, l + r / 2),
        };
        (self.first + a, self.first + b)
    }

    /// Whether coordinate `i` of a head is rotated by some chunk of nonzero frequency.
    fn rotates(&self, pairing: Pairing, i: usize) -> bool {
        (0..self.spec.n_chunks()).any(|l| {
            let (a, b) = self.dims(pairing, l);
            self.spec.rotates(l) && (a == i || b == i)
        })
    }
}

/// Vectors of one stage: `[heads, positions, head_dim]`, row-major, positions from 0.
#[derive(Clone, Copy, Debug)]
pub struct Vectors<'a> {
    /// The values.
    pub data: &'a [f64],
    /// Number of heads.
    pub heads: usize,
    /// Number of positions.
    pub positions: usize,
    /// Head dimension.
    pub head_dim: usize,
}

impl Vectors<'_> {
    /// Head `h`'s vector at position `p`.
    pub fn at(&self, h: usize, p: usize) -> &[f64] {
        let d = self.head_dim;
        &self.data[(h * self.positions + p) * d..][..d]
    }
}

/// A mistake that explains a rotation beyond its budget.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RotationMistake {
    /// Every rotated pair scaled by `ratio` (the engine's over ropescope's).
    Magnitude {
        /// The engine's magnitude over the expected one.
        ratio: f64,
    },
    /// Every position shifted: the engine rotates position `p` as `p + offset`.
    PositionOffset {
        /// The shift.
        offset: i64,
    },
    /// Pairs rotated with the other pairing convention.
    Pairing {
        /// The pairing the engine used.
        engine: &'static str,
        /// The pairing of the model.
        expected: &'static str,
    },
    /// The right rotation, stored permuted: each head's rotated part in the other pairing's order.
    Layout {
        /// `adjacent-to-half-split` or `half-split-to-adjacent`: the permutation applied to the rotated part.
        permutation: &'static str,
    },
    /// A partial rotation applied to the whole head: all `head_dim` coordinates rotated, at the plain rates of
    /// the base over the head dimension, where the model rotates `rot_dim`.
    WholeHead {
        /// The coordinates the model rotates.
        rot_dim: usize,
        /// The head dimension the engine rotated.
        head_dim: usize,
    },
    /// Some chunks turn at another rate (row 0 and the norms exact).
    Frequency {
        /// The chunks whose rate differs, with the rate fitted to the engine's vectors.
        chunks: Vec<ChunkRate>,
        /// The engine's magnitude over the expected one where it differs too (1 otherwise).
        magnitude: f64,
        /// The base whose plain RoPE rates `base^(−2l/d_rot)` the engine's rates of every rotating chunk are,
        /// to [`BASE_AGREEMENT`], when there is one: the engine used another base.
        engine_base: Option<f64>,
        /// The model's base.
        expected_base: f64,
    },
}

/// Relative agreement of every rotating chunk's fitted rate with another base's plain RoPE rate for the
/// diagnosis to name that base.
pub const BASE_AGREEMENT: f64 = 1e-3;

/// One chunk's angular frequency, expected and as the engine's vectors show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChunkRate {
    /// Chunk index (0 fastest).
    pub chunk: usize,
    /// ropescope's frequency, radians per token.
    pub expected: f64,
    /// The frequency fitted to the engine's rotation.
    pub engine: f64,
}

/// The RoPE stage of one tensor judged against its budget.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RotationCheck {
    /// Largest deviation over its budget (≤ 1: within budget).
    pub ratio: f64,
    /// `(head, position, coordinate)` of that deviation.
    pub worst: (usize, usize, usize),
    /// Chunks with a coordinate beyond its budget, ascending.
    pub chunks_beyond: Vec<usize>,
    /// Whether row 0 (position 0, where every rotation is the identity up to the magnitude) is within budget.
    pub row0_within: bool,
    /// The engine's rotated norms over the expected ones (1 for a rotation that keeps norms).
    pub norm_ratio: f64,
    /// The mistake that explains the deviations, when the stage is beyond its budget and one kind does.
    pub mistake: Option<RotationMistake>,
}

impl RotationCheck {
    /// Whether every coordinate is within its budget.
    pub fn within(&self) -> bool {
        self.ratio <= 1.0
    }
}

/// A hypothesis about how the engine rotated.
#[derive(Clone, Debug)]
struct Rotation {
    pairing: Pairing,
    freqs: Vec<f64>,
    magnitude: f64,
    offset: i64,
    /// Output permuted from `Adjacent` order to `HalfSplit` order (`Some(HalfSplit)`) or the reverse.
    stored_as: Option<Pairing>,
}

/// Deviations of `post` from a hypothesis, over their budgets.
struct Deviation {
    ratio: f64,
    worst: (usize, usize, usize),
    /// Per chunk of the model's pairing, the largest ratio of its coordinates.
    chunk_ratio: Vec<f64>,
    row0: f64,
}

/// Judges the RoPE stage: `post` against ropescope's rotation of `pre` (both the engine's), in `precision`.
///
/// # Panics
/// If the two tensors' shapes differ or a head is narrower than the layout.
pub fn check(
    pre: Vectors<'_>,
    post: Vectors<'_>,
    layout: &RotationLayout,
    precision: Precision,
) -> RotationCheck {
    assert_eq!(
        (pre.heads, pre.positions, pre.head_dim),
        (post.heads, post.positions, post.head_dim)
    );
    assert!(layout.first + layout.spec.rot_dim <= pre.head_dim);
    let expected = Rotation {
        pairing: layout.spec.pairing,
        freqs: layout.spec.inv_freq.clone(),
        magnitude: layout.spec.magnitude,
        offset: 0,
        stored_as: None,
    };
    let dev = deviation(pre, post, layout, &expected, precision);
    let chunks_beyond = (0..dev.chunk_ratio.len())
        .filter(|&l| dev.chunk_ratio[l] > 1.0)
        .collect();
    let ratio = norm_ratio(pre, post, layout);
    let mistake = (dev.ratio > 1.0)
        .then(|| explain(pre, post, layout, &expected, ratio, precision))
        .flatten();
    RotationCheck {
        ratio: dev.ratio,
        worst: dev.worst,
        chunks_beyond,
        row0_within: dev.row0 <= 1.0,
        norm_ratio: ratio,
        mistake,
    }
}

/// The first hypothesis, simplest first, whose prediction is within budget; `ratio` is the engine's rotated norms
/// over the expected ones ([`norm_ratio`]).
fn explain(
    pre: Vectors<'_>,
    post: Vectors<'_>,
    layout: &RotationLayout,
    expected: &Rotation,
    ratio: f64,
    precision: Precision,
) -> Option<RotationMistake> {
    let fits = |h: &Rotation| deviation(pre, post, layout, h, precision).ratio <= 1.0;
    let scaled = Rotation {
        magnitude: expected.magnitude * ratio,
        ..expected.clone()
    };
    if fits(&scaled) {
        return Some(RotationMistake::Magnitude { ratio });
    }
    for offset in (1..=MAX_OFFSET).flat_map(|o| [o, -o]) {
        if fits(&Rotation {
            offset,
            ..expected.clone()
        }) {
            return Some(RotationMistake::PositionOffset { offset });
        }
    }
    let other = match expected.pairing {
        Pairing::Adjacent => Pairing::HalfSplit,
        Pairing::HalfSplit => Pairing::Adjacent,
    };
    if fits(&Rotation {
        pairing: other,
        ..expected.clone()
    }) {
        return Some(RotationMistake::Pairing {
            engine: other.name(),
            expected: expected.pairing.name(),
        });
    }
    for (stored_as, permutation) in [
        (Pairing::HalfSplit, "adjacent-to-half-split"),
        (Pairing::Adjacent, "half-split-to-adjacent"),
    ] {
        if fits(&Rotation {
            stored_as: Some(stored_as),
            ..expected.clone()
        }) {
            return Some(RotationMistake::Layout { permutation });
        }
    }
    if let Some(mistake) = whole_head(pre, post, layout, expected, precision) {
        return Some(mistake);
    }
    let freqs = fitted_frequencies(pre, post, layout);
    let changed = |magnitude: f64| {
        let unchanged = Rotation {
            magnitude: expected.magnitude * magnitude,
            ..expected.clone()
        };
        let beyond = deviation(pre, post, layout, &unchanged, precision).chunk_ratio;
        RotationMistake::Frequency {
            chunks: (0..freqs.len())
                .filter(|&l| beyond[l] > 1.0)
                .map(|l| ChunkRate {
                    chunk: l,
                    expected: layout.spec.inv_freq[l],
                    engine: freqs[l],
                })
                .collect(),
            magnitude,
            engine_base: plain_base(&freqs, layout.spec.rot_dim),
            expected_base: layout.spec.base,
        }
    };
    let refitted = Rotation {
        freqs: freqs.clone(),
        ..expected.clone()
    };
    if fits(&refitted) {
        return Some(changed(1.0));
    }
    let refitted_scaled = Rotation {
        magnitude: expected.magnitude * ratio,
        ..refitted
    };
    fits(&refitted_scaled).then(|| changed(ratio))
}

/// A partial rotation applied to the whole head: every coordinate rotated at the plain rates of the base over
/// the head dimension (with the model's magnitude), when that explains `post`.
fn whole_head(
    pre: Vectors<'_>,
    post: Vectors<'_>,
    layout: &RotationLayout,
    expected: &Rotation,
    precision: Precision,
) -> Option<RotationMistake> {
    let spec = &layout.spec;
    let d = pre.head_dim - layout.first;
    if spec.rot_dim == 0 || spec.rot_dim >= d {
        return None;
    }
    let whole = RotationLayout {
        spec: RopeSpec {
            magnitude: spec.magnitude,
            ..RopeSpec::new(d, spec.base, spec.pairing)
        },
        first: layout.first,
    };
    let rotation = Rotation {
        freqs: whole.spec.inv_freq.clone(),
        ..expected.clone()
    };
    (deviation(pre, post, &whole, &rotation, precision).ratio <= 1.0).then_some(
        RotationMistake::WholeHead {
            rot_dim: spec.rot_dim,
            head_dim: d,
        },
    )
}

/// The deviations of `post` from `pre` rotated as `h` says, over their budgets.
fn deviation(
    pre: Vectors<'_>,
    post: Vectors<'_>,
    layout: &RotationLayout,
    h: &Rotation,
    precision: Precision,
) -> Deviation {
    let d = pre.head_dim;
    let model_pairing = layout.spec.pairing;
    let n_chunks = layout.spec.n_chunks();
    let chunk_of: Vec<Option<usize>> = (0..d)
        .map(|i| {
            (0..n_chunks).find(|&l| {
                let (a, b) = layout.dims(model_pairing, l);
                a == i || b == i
            })
        })
        .collect();
    let mut dev = Deviation {
        ratio: 0.0,
        worst: (0, 0, 0),
        chunk_ratio: vec![0.0; n_chunks],
        row0: 0.0,
    };
    let mut predicted = vec![0.0; d];
    let mut budgets = vec![0.0; d];
    for head in 0..pre.heads {
        for p in 0..pre.positions {
            let x = pre.at(head, p);
            rotate(
                x,
                p as i64 + h.offset,
                layout,
                h,
                &mut predicted,
                &mut budgets,
                precision,
            );
            let y = post.at(head, p);
            for i in 0..d {
                let diff = (y[i] - predicted[i]).abs();
                let r = match (diff, budgets[i]) {
                    (0.0, _) => 0.0,
                    (diff, b) if !diff.is_finite() || b == 0.0 => f64::INFINITY,
                    (diff, b) => diff / b,
                };
                if r > dev.ratio {
                    dev.ratio = r;
                    dev.worst = (head, p, i);
                }
                if let Some(l) = chunk_of[i] {
                    dev.chunk_ratio[l] = dev.chunk_ratio[l].max(r);
                }
                if p == 0 {
                    dev.row0 = dev.row0.max(r);
                }
            }
        }
    }
    dev
}

/// One head's vector `x` rotated to position `pos` as `h` says, into `out`, with each coordinate's budget.
fn rotate(
    x: &[f64],
    pos: i64,
    layout: &RotationLayout,
    h: &Rotation,
    out: &mut [f64],
    budgets: &mut [f64],
    precision: Precision,
) {
    out.copy_from_slice(x);
    for (i, b) in budgets.iter_mut().enumerate() {
        *b = budget::unrotated_coordinate(x[i], precision);
    }
    for (l, &g) in h.freqs.iter().enumerate() {
        if g == 0.0 {
            continue;
        }
        let (a, b) = layout.dims(h.pairing, l);
        let theta = pos as f64 * g;
        let (sin, cos) = theta.sin_cos();
        let (m, xa, xb) = (h.magnitude, x[a], x[b]);
        out[a] = m * (xa * cos - xb * sin);
        out[b] = m * (xb * cos + xa * sin);
        let at = pos.unsigned_abs() as usize;
        budgets[a] = budget::rotated_coordinate((xa, xb), out[a], at, g, m, precision);
        budgets[b] = budget::rotated_coordinate((xa, xb), out[b], at, g, m, precision);
    }
    if let Some(stored_as) = h.stored_as {
        permute(out, layout, stored_as);
        permute(budgets, layout, stored_as);
    }
}

/// Reorders each head's rotated part from the other pairing's order into `to`'s: the pair of chunk `l`
/// moves from its dims under the other pairing to its dims under `to`.
fn permute(v: &mut [f64], layout: &RotationLayout, to: Pairing) {
    let from = match to {
        Pairing::Adjacent => Pairing::HalfSplit,
        Pairing::HalfSplit => Pairing::Adjacent,
    };
    let old = v.to_vec();
    for l in 0..layout.spec.n_chunks() {
        let (fa, fb) = layout.dims(from, l);
        let (ta, tb) = layout.dims(to, l);
        v[ta] = old[fa];
        v[tb] = old[fb];
    }
}

/// `‖post_rot‖ / ‖pre_rot‖ / m` over the coordinates that rotate: the engine's magnitude over the expected
/// one (a rotation keeps norms, so only a magnitude moves this).
fn norm_ratio(pre: Vectors<'_>, post: Vectors<'_>, layout: &RotationLayout) -> f64 {
    let dims: Vec<usize> = (0..pre.head_dim)
        .filter(|&i| layout.rotates(layout.spec.pairing, i))
        .collect();
    let sum_sq = |v: Vectors<'_>| -> f64 {
        (0..v.heads)
            .flat_map(|h| (0..v.positions).map(move |p| (h, p)))
            .map(|(h, p)| dims.iter().map(|&i| v.at(h, p)[i].powi(2)).sum::<f64>())
            .sum()
    };
    let (a, b) = (sum_sq(pre), sum_sq(post));
    if a == 0.0 {
        return 1.0;
    }
    (b / a).sqrt() / layout.spec.magnitude
}

/// The base `b` whose plain rates `b^(−2l/r)` all of `freqs` (the rotating chunks', fitted) are within
/// [`BASE_AGREEMENT`], fitted by least squares on `ln g_l = −(2l/r) ln b` over chunks `l ≥ 1` (chunk 0 turns at
/// 1 whatever the base).
fn plain_base(freqs: &[f64], rot_dim: usize) -> Option<f64> {
    let points: Vec<(f64, f64)> = freqs
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, &g)| g > 0.0)
        .map(|(l, &g)| (2.0 * l as f64 / rot_dim as f64, g.ln()))
        .collect();
    let (xy, xx) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x * y, b + x * x));
    if points.len() < 2 || xx == 0.0 {
        return None;
    }
    let base = (-xy / xx).exp();
    let agrees = freqs
        .iter()
        .enumerate()
        .filter(|(_, &g)| g > 0.0)
        .all(|(l, &g)| {
            let plain = base.powf(-2.0 * l as f64 / rot_dim as f64);
            (g / plain - 1.0).abs() <= BASE_AGREEMENT
        });
    (agrees && base.is_finite()).then_some(base)
}

/// Each chunk's frequency as the engine's vectors show it: the angle from ropescope's unrotated pair (`pre`)
/// to the engine's rotated one (`post`), unwrapped along the positions, fitted through the origin by least
/// squares weighted by the pair's squared norm, pooled over heads. A chunk of frequency 0 stays 0.
fn fitted_frequencies(pre: Vectors<'_>, post: Vectors<'_>, layout: &RotationLayout) -> Vec<f64> {
    let pairing = layout.spec.pairing;
    (0..layout.spec.n_chunks())
        .map(|l| {
            if !layout.spec.rotates(l) {
                return 0.0;
            }
            let (a, b) = layout.dims(pairing, l);
            let (mut num, mut den) = (0.0, 0.0);
            for h in 0..pre.heads {
                let mut previous = 0.0;
                for p in 0..pre.positions {
                    let (x, y) = (pre.at(h, p), post.at(h, p));
                    let angle = (x[a] * y[b] - x[b] * y[a]).atan2(x[a] * y[a] + x[b] * y[b]);
                    let turns = ((previous - angle) / std::f64::consts::TAU).round();
                    let unwrapped = angle + turns * std::f64::consts::TAU;
                    previous = unwrapped;
                    let w = x[a] * x[a] + x[b] * x[b];
                    num += w * p as f64 * unwrapped;
                    den += w * (p * p) as f64;
                }
            }
            if den == 0.0 {
                layout.spec.inv_freq[l]
            } else {
                num / den
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const HEADS: usize = 2;
    const T: usize = 40;
    const D: usize = 16;

    fn layout(pairing: Pairing) -> RotationLayout {
        RotationLayout {
            spec: RopeSpec::new(D, 10_000.0, pairing),
            first: 0,
        }
    }

    fn random_pre() -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        (0..HEADS * T * D)
            .map(|_| rng.random_range(-2.0..2.0))
            .collect()
    }

    fn vectors(data: &[f64]) -> Vectors<'_> {
        Vectors {
            data,
            heads: HEADS,
            positions: T,
            head_dim: D,
        }
    }

    /// `pre` rotated by `spec` at positions `p + offset`, rounded to f32 (an honest f32 engine's last rounding).
    fn rotated(pre: &[f64], spec: &RopeSpec, offset: usize) -> Vec<f64> {
        let mut out = pre.to_vec();
        for (i, row) in out.chunks_mut(D).enumerate() {
            spec.rotate(row, i % T + offset);
            row.iter_mut().for_each(|v| *v = *v as f32 as f64);
        }
        out
    }

    fn check_of(post: &[f64], pre: &[f64], pairing: Pairing) -> RotationCheck {
        check(
            vectors(pre),
            vectors(post),
            &layout(pairing),
            Precision::F32,
        )
    }

    #[test]
    fn an_honest_f32_rotation_is_within_budget() {
        let pre = random_pre();
        let post = rotated(&pre, &layout(Pairing::HalfSplit).spec, 0);
        let c = check_of(&post, &pre, Pairing::HalfSplit);
        assert!(c.within() && c.ratio > 0.0, "{c:?}");
        assert_eq!(c.mistake, None);
    }

    #[test]
    fn each_kind_of_mistake_is_named() {
        let pre = random_pre();
        let spec = layout(Pairing::HalfSplit).spec;
        let mut yarn = spec.clone();
        yarn.magnitude = 1.1;
        let got = check_of(&rotated(&pre, &yarn, 0), &pre, Pairing::HalfSplit);
        assert!(
            matches!(got.mistake, Some(RotationMistake::Magnitude { ratio }) if (ratio - 1.1).abs() < 1e-6),
            "{got:?}"
        );
        assert!(!got.row0_within);

        let got = check_of(&rotated(&pre, &spec, 1), &pre, Pairing::HalfSplit);
        assert_eq!(
            got.mistake,
            Some(RotationMistake::PositionOffset { offset: 1 })
        );

        let interleaved = RopeSpec::new(D, 10_000.0, Pairing::Adjacent);
        let got = check_of(&rotated(&pre, &interleaved, 0), &pre, Pairing::HalfSplit);
        assert_eq!(
            got.mistake,
            Some(RotationMistake::Pairing {
                engine: "adjacent",
                expected: "half-split"
            })
        );

        let mut slow = spec.clone();
        slow.inv_freq[5] *= 0.5;
        slow.inv_freq[6] *= 0.5;
        let got = check_of(&rotated(&pre, &slow, 0), &pre, Pairing::HalfSplit);
        assert!(
            got.row0_within && (got.norm_ratio - 1.0).abs() < 1e-6,
            "{got:?}"
        );
        let Some(RotationMistake::Frequency {
            chunks,
            magnitude,
            engine_base: None,
            ..
        }) = got.mistake
        else {
            panic!("{got:?}")
        };
        assert_eq!(magnitude, 1.0);
        assert_eq!(chunks.iter().map(|c| c.chunk).collect::<Vec<_>>(), [5, 6]);
        assert!((chunks[0].engine / chunks[0].expected - 0.5).abs() < 1e-6);
    }

    #[test]
    fn a_wrong_base_is_named() {
        let pre = random_pre();
        let other = RopeSpec::new(D, 500_000.0, Pairing::HalfSplit);
        let got = check_of(&rotated(&pre, &other, 0), &pre, Pairing::HalfSplit);
        let Some(RotationMistake::Frequency {
            engine_base: Some(base),
            expected_base,
            ..
        }) = got.mistake
        else {
            panic!("{got:?}")
        };
        assert!(
            (base / 500_000.0 - 1.0).abs() < 1e-3 && expected_base == 10_000.0,
            "{base}"
        );
    }

    #[test]
    fn a_partial_rotation_applied_to_the_whole_head_is_named() {
        let pre = random_pre();
        let partial = RotationLayout {
            spec: RopeSpec::partial(D, D / 2, 10_000.0, Pairing::HalfSplit),
            first: 0,
        };
        let whole = RopeSpec::new(D, 10_000.0, Pairing::HalfSplit);
        let got = check(
            vectors(&pre),
            vectors(&rotated(&pre, &whole, 0)),
            &partial,
            Precision::F32,
        );
        assert_eq!(
            got.mistake,
            Some(RotationMistake::WholeHead {
                rot_dim: D / 2,
                head_dim: D
            })
        );
    }

    #[test]
    fn a_rotation_stored_in_the_other_order_is_a_layout_mistake() {
        let pre = random_pre();
        let lay = layout(Pairing::HalfSplit);
        let mut post = rotated(&pre, &lay.spec, 0);
        for row in post.chunks_mut(D) {
            permute(row, &lay, Pairing::Adjacent);
        }
        let got = check_of(&post, &pre, Pairing::HalfSplit);
        assert_eq!(
            got.mistake,
            Some(RotationMistake::Layout {
                permutation: "half-split-to-adjacent"
            })
        );
    }

    #[test]
    fn noise_beyond_rounding_is_beyond_budget_and_unexplained() {
        let pre = random_pre();
        let mut post = rotated(&pre, &layout(Pairing::HalfSplit).spec, 0);
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        post.iter_mut()
            .for_each(|v| *v += rng.random_range(-1e-3..1e-3));
        let got = check_of(&post, &pre, Pairing::HalfSplit);
        assert!(!got.within());
        assert_eq!(got.mistake, None);
    }
}
