//! The analyses that run their own forward passes (6 `posym`, 7 `detectors`, 8 `cauchy-schwarz`,
//! 10 `ablation`, in `src/analysis/{posym_scan,detectors,cauchy_schwarz,ablation}.rs`), each with its default
//! parameters, on the first [`MULTI_PASS_PROMPTS`] natural prompts.

use super::params::Analysis;
use crate::analysis::detectors::{self, Pattern};
use crate::analysis::{ablation, cauchy_schwarz, posym_scan};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::numeric::Real;
use serde::Serialize;

/// A head for the Cauchy–Schwarz tables: `(layer, head, kind)` with kind `diagonal` or `previous-token`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TabulatedHead {
    /// Layer.
    pub layer: usize,
    /// Query head.
    pub head: usize,
    /// The head's label.
    pub kind: String,
}

/// Runs one multi-pass analysis on the natural prompts and returns its report as JSON. The heads are those
/// the labels call `diagonal` or `previous-token`; the callback receives the number of forward passes done.
pub type Runner<T> =
    fn(&Model<T>, &[Vec<u32>], &[TabulatedHead], &dyn Fn(u64)) -> Result<serde_json::Value>;

/// A multi-pass analysis: how many forward passes it makes for a number of prompts, and how to run it.
pub struct External<T> {
    /// Forward passes for `n` prompts (the length of its progress bar).
    pub passes: fn(usize) -> u64,
    /// The analysis itself.
    pub run: Runner<T>,
}

/// Natural prompts the multi-pass analyses run on (the first ones of the set): each prompt costs them many
/// forward passes (block swaps: `1 + m(m−1)/2`; ablation: one per variant), so they take a subset to keep the
/// default scan to minutes.
pub const MULTI_PASS_PROMPTS: usize = 2;

/// Per-head `[layer][head]` fields lifted out of the detectors' nested report, so that they reach each head's
/// entry of `summary.json` and the labels: the "mul" score of each pattern, previous-token, diagonal and sink
/// measured on the natural prompts, duplicate-token and induction on the repeated random sequences.
fn detector_fields(r: &detectors::DetectorReport) -> Result<serde_json::Value> {
    let mut out = serde_json::Map::new();
    for (set, patterns) in [
        (
            &r.text,
            [Pattern::PreviousToken, Pattern::Diagonal, Pattern::Sink].as_slice(),
        ),
        (
            &r.repeated,
            [Pattern::DuplicateToken, Pattern::Induction].as_slice(),
        ),
    ] {
        for p in set
            .patterns
            .iter()
            .filter(|p| patterns.contains(&p.pattern))
        {
            let name = json(p.pattern)?.as_str().unwrap_or_default().to_string(); // serde's snake_case name
            out.insert(name, json(&p.mul)?);
        }
    }
    out.insert("report".into(), json(r)?);
    Ok(serde_json::Value::Object(out))
}

/// The multi-pass analyses present in this build.
fn runners<T: Real>() -> Vec<(Analysis, External<T>)> {
    vec![
        (
            Analysis::Posym,
            External {
                passes: |n| posym_scan::passes(n, &Default::default()),
                run: |m, p, _, bar| json(posym_scan::run(m, p, &Default::default(), bar)?),
            },
        ),
        (
            Analysis::Detectors,
            External {
                passes: |n| detectors::passes(n, &Default::default()),
                run: |m, p, _, bar| {
                    detector_fields(&detectors::run(m, p, &Default::default(), bar)?)
                },
            },
        ),
        (
            Analysis::CauchySchwarz,
            External {
                passes: |n| cauchy_schwarz::passes(n, &Default::default()),
                run: |m, p, heads, bar| {
                    let heads = heads
                        .iter()
                        .filter_map(|h| {
                            let kind = match h.kind.as_str() {
                                "diagonal" => cauchy_schwarz::HeadKind::Diagonal,
                                "previous-token" => cauchy_schwarz::HeadKind::PreviousToken,
                                _ => return None,
                            };
                            Some(cauchy_schwarz::TargetHead {
                                layer: h.layer,
                                head: h.head,
                                kind,
                            })
                        })
                        .collect();
                    let params = cauchy_schwarz::CauchySchwarzParams {
                        heads,
                        ..Default::default()
                    };
                    json(cauchy_schwarz::run(m, p, &params, bar)?)
                },
            },
        ),
        (
            Analysis::Ablation,
            External {
                passes: |n| ablation::passes(n, &Default::default()),
                run: |m, p, _, bar| json(ablation::run(m, p, &Default::default(), bar)?),
            },
        ),
    ]
}

/// The report of a multi-pass analysis as JSON.
pub fn json<R: Serialize>(report: R) -> Result<serde_json::Value> {
    serde_json::to_value(report).map_err(|e| Error::Input(e.to_string()))
}

/// Whether `a` runs its own forward passes (rather than sharing the scan's streaming pass).
pub fn is_external(a: Analysis) -> bool {
    matches!(
        a,
        Analysis::Posym | Analysis::Detectors | Analysis::CauchySchwarz | Analysis::Ablation
    )
}

/// Whether the multi-pass analysis `a` is present in this build.
pub fn is_built(a: Analysis) -> bool {
    runners::<f32>().iter().any(|(b, _)| *b == a)
}

/// The runner of `a`, when present.
pub fn runner<T: Real>(a: Analysis) -> Option<External<T>> {
    runners::<T>()
        .into_iter()
        .find(|(b, _)| *b == a)
        .map(|(_, r)| r)
}

/// Every field of `report` indexed `[layer][head]` (an array of `n_layers` arrays of `n_heads` values), taken
/// at `(layer, head)`, as one object; `None` when the report has no such field.
pub fn head_slice(
    report: &serde_json::Value,
    (n_layers, n_heads): (usize, usize),
    (layer, head): (usize, usize),
) -> Option<serde_json::Value> {
    let fields = report.as_object()?;
    let slice: serde_json::Map<String, serde_json::Value> = fields
        .iter()
        .filter_map(|(name, v)| {
            let layers = v.as_array().filter(|a| a.len() == n_layers)?;
            let heads = layers[layer].as_array().filter(|a| a.len() == n_heads)?;
            Some((name.clone(), heads[head].clone()))
        })
        .collect();
    (!slice.is_empty()).then_some(serde_json::Value::Object(slice))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_slice_takes_every_layer_head_field() {
        let report = serde_json::json!({
            "score": [[1, 2], [3, 4], [5, 6]],
            "other": [1, 2, 3],
            "threshold": 0.5
        });
        assert_eq!(
            head_slice(&report, (3, 2), (2, 1)),
            Some(serde_json::json!({"score": 6}))
        );
        assert_eq!(
            head_slice(&serde_json::json!({"x": 1}), (3, 2), (0, 0)),
            None
        );
    }
}
