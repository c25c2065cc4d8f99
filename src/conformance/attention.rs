//! The attention stage judged on its own: another engine's probabilities against ropescope's float64 softmax of
//! that engine's own post-RoPE queries and keys (scale, soft-cap, mask and sink as the model states them), within
//! [`budget`]; and, beyond it, whether a wrong mask or a wrong scale explains them.

use super::budget::{self, Precision};
use super::rotation::Vectors;
use crate::capture::HeadInfo;
use serde::Serialize;

/// Engine probabilities below this fraction of their row's largest take no part in fitting a scale (their
/// logarithms are mostly rounding).
const FIT_FLOOR: f64 = 1e-6;

/// Expected probabilities above this that an engine gives exactly zero count as masked by mistake.
const MISSING_FLOOR: f64 = 1e-6;

/// A mistake that explains attention beyond its budget.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AttentionMistake {
    /// The mask differs: keys the model masks get weight, or keys it shows get none.
    Mask {
        /// Masked keys (future, outside the window or chunk) given nonzero weight.
        extra: usize,
        /// Visible keys given exactly zero weight where the expected weight is above 1e-6.
        missing: usize,
    },
    /// The scores are scaled by another factor (the engine's over the model's).
    Scale {
        /// The engine's scale over the expected one.
        factor: f64,
    },
}

/// The attention stage of one layer judged against its budget.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AttentionCheck {
    /// Largest deviation over its budget (≤ 1: within budget).
    pub ratio: f64,
    /// `(head, query position, key position)` of that deviation.
    pub worst: (usize, usize, usize),
    /// The mistake that explains the deviations, when beyond budget and one kind does.
    pub mistake: Option<AttentionMistake>,
}

impl AttentionCheck {
    /// Whether every probability is within its budget.
    pub fn within(&self) -> bool {
        self.ratio <= 1.0
    }
}

/// One layer's attention inputs as the engine computed them.
#[derive(Clone, Debug)]
pub struct AttentionInputs<'a> {
    /// Post-RoPE queries, `[heads, T, d]`.
    pub q: Vectors<'a>,
    /// Post-RoPE keys, `[kv_heads, T, d]`.
    pub k: Vectors<'a>,
    /// Probabilities of the query rows `rows`, `[heads, rows, T]`.
    pub probs: &'a [f64],
    /// The query positions of `probs`.
    pub rows: std::ops::Range<usize>,
}

/// Judges the attention stage of one layer whose heads are `heads` (one per query head, in order), with
/// soft-capping `softcap`, for an engine in `precision`.
///
/// # Panics
/// If the shapes disagree with `heads` or with each other.
pub fn check(
    inputs: &AttentionInputs<'_>,
    heads: &[HeadInfo],
    softcap: Option<f64>,
    precision: Precision,
) -> AttentionCheck {
    let (t, r) = (inputs.q.positions, inputs.rows.len());
    assert_eq!(inputs.q.heads, heads.len());
    assert_eq!(inputs.probs.len(), heads.len() * r * t);
    assert!(inputs.rows.end <= t && inputs.k.positions == t);
    let (ratio, worst) = deviation(inputs, heads, softcap, 1.0, precision);
    let mistake = (ratio > 1.0)
        .then(|| explain(inputs, heads, softcap, precision))
        .flatten();
    AttentionCheck {
        ratio,
        worst,
        mistake,
    }
}

/// A mask mistake if any, else a scale that brings every probability within budget.
fn explain(
    inputs: &AttentionInputs<'_>,
    heads: &[HeadInfo],
    softcap: Option<f64>,
    precision: Precision,
) -> Option<AttentionMistake> {
    let (mut extra, mut missing) = (0, 0);
    let mut rows: Vec<Vec<(f64, f64)>> = Vec::new();
    for_each_row(
        inputs,
        heads,
        softcap,
        1.0,
        |_, _, expected, engine, row| {
            for (j, (&p, &e)) in expected.iter().zip(engine).enumerate() {
                if p == 0.0 && e != 0.0 && !row.visible.contains(&j) {
                    extra += 1;
                }
                if e == 0.0 && p > MISSING_FLOOR {
                    missing += 1;
                }
            }
            let top = engine.iter().copied().fold(0.0, f64::max);
            let fit: Vec<(f64, f64)> = row
                .visible
                .clone()
                .filter(|&j| engine[j] > FIT_FLOOR * top)
                .map(|j| (row.raw[j], engine[j].ln()))
                .collect();
            if fit.len() >= 2 {
                rows.push(fit);
            }
        },
    );
    if extra + missing > 0 {
        return Some(AttentionMistake::Mask { extra, missing });
    }
    let factor = fitted_scale(&rows, softcap)?;
    (deviation(inputs, heads, softcap, factor, precision).0 <= 1.0)
        .then_some(AttentionMistake::Scale { factor })
}

/// The factor `c` on the scores that best explains the engine's log-probabilities: per row, `ln p_j` equals
/// `cap(c · s_j)` up to the row's normaliser, so both are centred on the row's mean and `c` is fitted by least
/// squares (Gauss–Newton steps through the soft-cap, one exact step without it). `rows` holds each row's
/// `(raw score, ln p)` pairs. `None` when the scores carry no information (all equal).
fn fitted_scale(rows: &[Vec<(f64, f64)>], softcap: Option<f64>) -> Option<f64> {
    let cap = |x: f64| softcap.map_or(x, |c| c * (x / c).tanh());
    let slope = |x: f64| softcap.map_or(1.0, |c| 1.0 - (x / c).tanh().powi(2));
    let mut c = 1.0;
    for _ in 0..20 {
        let (mut num, mut den) = (0.0, 0.0);
        for row in rows {
            let n = row.len() as f64;
            let f: Vec<f64> = row.iter().map(|&(s, _)| cap(c * s)).collect();
            let jac: Vec<f64> = row.iter().map(|&(s, _)| s * slope(c * s)).collect();
            let (mf, mj, my) = row
                .iter()
                .enumerate()
                .fold((0.0, 0.0, 0.0), |acc, (i, &(_, y))| {
                    (acc.0 + f[i] / n, acc.1 + jac[i] / n, acc.2 + y / n)
                });
            for (i, &(_, y)) in row.iter().enumerate() {
                let (r, j) = ((y - my) - (f[i] - mf), jac[i] - mj);
                num += j * r;
                den += j * j;
            }
        }
        if den == 0.0 {
            return None;
        }
        let step = num / den;
        c += step;
        if step.abs() <= 1e-12 * c.abs() {
            break;
        }
    }
    c.is_finite().then_some(c)
}

/// The largest deviation over its budget, and where, with the scores scaled by `factor` times the model's
/// scale.
fn deviation(
    inputs: &AttentionInputs<'_>,
    heads: &[HeadInfo],
    softcap: Option<f64>,
    factor: f64,
    precision: Precision,
) -> (f64, (usize, usize, usize)) {
    let (mut ratio, mut worst) = (0.0, (0, 0, 0));
    for_each_row(
        inputs,
        heads,
        softcap,
        factor,
        |h, i, expected, engine, row| {
            let vis = row.visible.clone();
            let score_budget: Vec<f64> = vis
                .clone()
                .map(|j| {
                    let d = inputs.q.head_dim;
                    budget::score(
                        row.abs_dot[j],
                        d,
                        row.scale,
                        row.scores[j],
                        softcap.is_some(),
                        precision,
                    )
                })
                .collect();
            let mut with_sink_p: Vec<f64> = expected[vis.clone()].to_vec();
            let mut with_sink_s: Vec<f64> = row.scores[vis.clone()].to_vec();
            let mut with_sink_b = score_budget;
            if let Some(sink) = row.sink {
                with_sink_p.push(row.sink_mass);
                with_sink_s.push(sink);
                with_sink_b.push(0.0);
            }
            let budgets =
                budget::probabilities(&with_sink_p, &with_sink_s, &with_sink_b, precision);
            for (j, (&p, &e)) in expected.iter().zip(engine).enumerate() {
                let b = if vis.contains(&j) {
                    budgets[j - vis.start]
                } else {
                    0.0
                };
                let diff = (e - p).abs();
                let r = match diff {
                    0.0 => 0.0,
                    d if !d.is_finite() || b == 0.0 => f64::INFINITY,
                    d => d / b,
                };
                if r > ratio {
                    (ratio, worst) = (r, (h, i, j));
                }
            }
        },
    );
    (ratio, worst)
}

/// One query row's exact quantities.
struct Row {
    /// Visible key positions.
    visible: std::ops::Range<usize>,
    /// Scores `scale · q·k` before soft-capping, every key.
    raw: Vec<f64>,
    /// Scores after soft-capping, every key.
    scores: Vec<f64>,
    /// `Σ |q_i k_i|` per key.
    abs_dot: Vec<f64>,
    /// The scale applied.
    scale: f64,
    /// The head's sink logit and the mass it takes.
    sink: Option<f64>,
    sink_mass: f64,
}

/// Calls `f(head, query position, expected probabilities, engine probabilities, row)` for every row, the
/// expected ones computed in f64 with the scale multiplied by `factor`.
fn for_each_row(
    inputs: &AttentionInputs<'_>,
    heads: &[HeadInfo],
    softcap: Option<f64>,
    factor: f64,
    mut f: impl FnMut(usize, usize, &[f64], &[f64], &Row),
) {
    let t = inputs.q.positions;
    let r = inputs.rows.len();
    let mut expected = vec![0.0; t];
    for (h, info) in heads.iter().enumerate() {
        for (ri, i) in inputs.rows.clone().enumerate() {
            let q = inputs.q.at(h, i);
            let scale = info.scale * factor;
            let (mut raw, mut abs_dot) = (vec![0.0; t], vec![0.0; t]);
            for j in 0..t {
                let k = inputs.k.at(info.kv_head, j);
                raw[j] = scale * q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>();
                abs_dot[j] = q.iter().zip(k).map(|(a, b)| (a * b).abs()).sum::<f64>();
            }
            let scores: Vec<f64> = match softcap {
                Some(c) => raw.iter().map(|s| c * (s / c).tanh()).collect(),
                None => raw.clone(),
            };
            let visible = info.first_visible(i)..i + 1;
            let mut row_scores: Vec<f64> = scores[visible.clone()].to_vec();
            row_scores.extend(info.sink);
            crate::analysis::softmax::softmax_in_place(&mut row_scores);
            expected.fill(0.0);
            expected[visible.clone()].copy_from_slice(&row_scores[..visible.len()]);
            let sink_mass = info.sink.map_or(0.0, |_| row_scores[visible.len()]);
            let engine = &inputs.probs[(h * r + ri) * t..][..t];
            let row = Row {
                visible,
                raw,
                scores,
                abs_dot,
                scale,
                sink: info.sink,
                sink_mass,
            };
            f(h, i, &expected, engine, &row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::{Pairing, RopeSpec};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const T: usize = 24;
    const D: usize = 8;

    fn head(window: Option<usize>) -> HeadInfo {
        HeadInfo {
            layer: 0,
            head: 0,
            kv_head: 0,
            head_dim: D,
            value_dim: D,
            n_tokens: T,
            rope: RopeSpec::new(D, 10_000.0, Pairing::HalfSplit),
            window,
            chunk: None,
            sink: None,
            scale: (D as f64).powf(-0.5),
        }
    }

    fn qk() -> (Vec<f64>, Vec<f64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut v = || -> Vec<f64> { (0..T * D).map(|_| rng.random_range(-2.0..2.0)).collect() };
        (v(), v())
    }

    /// Causal attention of one head with `scale`, the keys before `i + 1 − window` masked, rounded to f32.
    fn engine_probs(q: &[f64], k: &[f64], scale: f64, window: usize) -> Vec<f64> {
        let mut out = vec![0.0; T * T];
        for i in 0..T {
            let first = (i + 1).saturating_sub(window);
            let mut s: Vec<f64> = (first..=i)
                .map(|j| scale * (0..D).map(|c| q[i * D + c] * k[j * D + c]).sum::<f64>())
                .collect();
            crate::analysis::softmax::softmax_in_place(&mut s);
            for (j, p) in (first..=i).zip(s) {
                out[i * T + j] = p as f32 as f64;
            }
        }
        out
    }

    fn judged(probs: &[f64], q: &[f64], k: &[f64], window: Option<usize>) -> AttentionCheck {
        let v = |data| Vectors {
            data,
            heads: 1,
            positions: T,
            head_dim: D,
        };
        let inputs = AttentionInputs {
            q: v(q),
            k: v(k),
            probs,
            rows: 0..T,
        };
        check(&inputs, &[head(window)], None, Precision::F32)
    }

    #[test]
    fn honest_f32_attention_is_within_budget() {
        let (q, k) = qk();
        let scale = head(None).scale;
        let got = judged(&engine_probs(&q, &k, scale, T), &q, &k, None);
        assert!(got.within() && got.ratio > 0.0, "{got:?}");
    }

    #[test]
    fn a_wrong_scale_and_a_missing_window_are_named() {
        let (q, k) = qk();
        let scale = head(None).scale;
        let got = judged(&engine_probs(&q, &k, scale * 1.25, T), &q, &k, None);
        assert!(
            matches!(got.mistake, Some(AttentionMistake::Scale { factor }) if (factor - 1.25).abs() < 1e-3),
            "{got:?}"
        );
        let got = judged(&engine_probs(&q, &k, scale, T), &q, &k, Some(8));
        assert!(
            matches!(got.mistake, Some(AttentionMistake::Mask { extra, missing: 0 }) if extra > 0),
            "{got:?}"
        );
    }
}
