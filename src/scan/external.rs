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

/// A multi-pass analysis: how many forward passes it makes for a number of prompts and target heads, and how
/// to run it.
pub struct External<T> {
    /// Forward passes for `n` prompts and the tabulated heads (the length of its progress bar).
    pub passes: fn(usize, &[TabulatedHead]) -> u64,
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

/// The Cauchy–Schwarz parameters for the tabulated heads: the `diagonal` and `previous-token` ones.
fn cauchy_schwarz_params(heads: &[TabulatedHead]) -> cauchy_schwarz::CauchySchwarzParams {
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
    cauchy_schwarz::CauchySchwarzParams {
        heads,
        ..Default::default()
    }
}

/// The multi-pass analyses present in this build.
fn runners<T: Real>() -> Vec<(Analysis, External<T>)> {
    vec![
        (
            Analysis::Posym,
            External {
                passes: |n, _| posym_scan::passes(n, &Default::default()),
                run: |m, p, _, bar| json(posym_scan::run(m, p, &Default::default(), bar)?),
            },
        ),
        (
            Analysis::Detectors,
            External {
                passes: |n, _| detectors::passes(n, &Default::default()),
                run: |m, p, _, bar| {
                    detector_fields(&detectors::run(m, p, &Default::default(), bar)?)
                },
            },
        ),
        (
            Analysis::CauchySchwarz,
            External {
                passes: |n, heads| cauchy_schwarz::passes(n, &cauchy_schwarz_params(heads)),
                run: |m, p, heads, bar| {
                    json(cauchy_schwarz::run(
                        m,
                        p,
                        &cauchy_schwarz_params(heads),
                        bar,
                    )?)
                },
            },
        ),
        (
            Analysis::Ablation,
            External {
                passes: |n, _| ablation::passes(n, &Default::default()),
                run: |m, p, _, bar| json(ablation::run(m, p, &Default::default(), bar)?),
            },
        ),
    ]
}

/// The report of a multi-pass analysis as JSON.
pub fn json<R: Serialize>(report: R) -> Result<serde_json::Value> {
    serde_json::to_value(report).map_err(|e| Error::Internal(e.to_string()))
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

/// Fewest tokens each natural prompt needs for the multi-pass analysis `a` with its default parameters: the
/// block swaps' kept positions, one token per block and the query after them (`posym`); a first token and
/// its query (`detectors`); more than the ablation's own Δmax (`ablation`); one for any other analysis.
pub fn min_prompt_length(a: Analysis) -> usize {
    match a {
        Analysis::Posym => {
            let p = posym_scan::PosymParams::default();
            p.keep_first + p.m + 1
        }
        Analysis::Detectors => 2,
        Analysis::Ablation => ablation::AblationParams::default().delta_max.max(1) + 1,
        _ => 1,
    }
}

/// Refuses, before any pass, natural prompts of `lengths` (named by `sources`) of which one the multi-pass
/// analyses read (the first [`MULTI_PASS_PROMPTS`]) is shorter than one of `analyses` needs
/// ([`min_prompt_length`]), naming the analysis and its minimum.
pub fn check_prompt_lengths(analyses: &[Analysis], prompts: &[(usize, &str)]) -> Result<()> {
    for &(len, source) in prompts.iter().take(MULTI_PASS_PROMPTS) {
        if let Some(&a) = analyses.iter().find(|&&a| len < min_prompt_length(a)) {
            return Err(Error::Argument(format!(
                "prompt '{source}' has {len} tokens; the {} analysis needs at least {}: give a longer \
                 --length or prompt, or leave it out (--analyses)",
                a.name(),
                min_prompt_length(a)
            )));
        }
    }
    Ok(())
}

/// The runner of `a`, when present.
pub fn runner<T: Real>(a: Analysis) -> Option<External<T>> {
    runners::<T>()
        .into_iter()
        .find(|(b, _)| *b == a)
        .map(|(_, r)| r)
}

/// Field of a per-head record that says whether the analysis covered the head (Cauchy–Schwarz, which runs on a
/// chosen set of heads).
pub const IN_HEAD_SET_FIELD: &str = "in_head_set";
/// Field of the record of a head outside the analysis's head set: the rule that chose the set.
pub const HEAD_SET_RULE_FIELD: &str = "head_set_rule";
/// The rule choosing the heads of the Cauchy–Schwarz tables.
pub const CAUCHY_SCHWARZ_HEAD_SET: &str =
    "the heads labelled diagonal or previous-token (best slash score ≥ κ at Δ = 0 or 1, not a sink)";

/// The record of head `(layer, head)` in the report of the multi-pass analysis `a`, as `summary.json` holds
/// it (`fixtures/scan/FORMAT.md`); `None` when the report holds nothing for any head.
pub fn head_record(
    a: Analysis,
    report: &serde_json::Value,
    grid: (usize, usize),
    (layer, head): (usize, usize),
) -> Option<serde_json::Value> {
    match a {
        Analysis::CauchySchwarz => cauchy_schwarz_record(report, (layer, head)),
        Analysis::Ablation => ablation_record(report, (layer, head)),
        _ => head_slice(report, grid, (layer, head)),
    }
}

/// A head's Cauchy–Schwarz tables with `in_head_set: true`, or `in_head_set: false` and the rule of the set.
fn cauchy_schwarz_record(
    report: &serde_json::Value,
    (layer, head): (usize, usize),
) -> Option<serde_json::Value> {
    let tables = report.get("heads")?.as_array()?;
    let is_head = |t: &&serde_json::Value| {
        let target = &t["target"];
        target["layer"].as_u64() == Some(layer as u64)
            && target["head"].as_u64() == Some(head as u64)
    };
    let mut record = serde_json::Map::new();
    match tables.iter().find(is_head).and_then(|t| t.as_object()) {
        Some(table) => {
            record.insert(IN_HEAD_SET_FIELD.into(), true.into());
            record.insert("kind".into(), table["target"]["kind"].clone());
            for (k, v) in table.iter().filter(|(k, _)| k.as_str() != "target") {
                record.insert(k.clone(), v.clone());
            }
        }
        None => {
            record.insert(IN_HEAD_SET_FIELD.into(), false.into());
            record.insert(HEAD_SET_RULE_FIELD.into(), CAUCHY_SCHWARZ_HEAD_SET.into());
        }
    }
    Some(serde_json::Value::Object(record))
}

/// A head's slash peak under the baseline and under every ablation variant, with the variant's loss change.
fn ablation_record(
    report: &serde_json::Value,
    (layer, head): (usize, usize),
) -> Option<serde_json::Value> {
    let at = |v: &serde_json::Value, field: &str| v.get(field)?.get(layer)?.get(head).cloned();
    let peak = |v: &serde_json::Value| -> Option<serde_json::Map<String, serde_json::Value>> {
        let mut m = serde_json::Map::new();
        for field in ["peak_delta", "peak_score", "baseline_peak_change"] {
            m.insert(field.into(), at(v, field)?);
        }
        Some(m)
    };
    let baseline = peak(report.get("baseline")?)?;
    let variants = report
        .get("variants")?
        .as_array()?
        .iter()
        .map(|v| {
            let mut m = serde_json::Map::new();
            m.insert("variant".into(), v.get("variant")?.clone());
            m.insert("loss_change".into(), v.get("loss_change")?.clone());
            m.extend(peak(v)?);
            Some(serde_json::Value::Object(m))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(serde_json::json!({"baseline": baseline, "variants": variants}))
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
    fn cauchy_schwarz_record_says_whether_the_head_was_tabled() {
        let report = serde_json::json!({"heads": [
            {"target": {"layer": 1, "head": 2, "kind": "diagonal"}, "table": [], "diagonal": {"mean_ratio": 0.3}}
        ]});
        let a = Analysis::CauchySchwarz;
        let inside = head_record(a, &report, (2, 3), (1, 2)).unwrap();
        assert_eq!(inside[IN_HEAD_SET_FIELD], true);
        assert_eq!(inside["kind"], "diagonal");
        assert_eq!(inside["diagonal"]["mean_ratio"], 0.3);
        let outside = head_record(a, &report, (2, 3), (0, 2)).unwrap();
        assert_eq!(outside[IN_HEAD_SET_FIELD], false);
        assert_eq!(outside[HEAD_SET_RULE_FIELD], CAUCHY_SCHWARZ_HEAD_SET);
    }

    #[test]
    fn ablation_record_takes_each_variant_at_the_head() {
        let per_head = |x: f64| serde_json::json!([[x, x + 1.0], [x + 2.0, x + 3.0]]);
        let variant = |kind: &str, loss: f64, x: f64| {
            serde_json::json!({"variant": {"kind": kind}, "loss_change": loss, "peak_delta": [[0, 1], [2, 3]],
                               "peak_score": per_head(x), "baseline_peak_change": per_head(-x)})
        };
        let report = serde_json::json!({"baseline": variant("baseline", 0.0, 0.5),
                                        "variants": [variant("nope", 3.5, 0.1)]});
        let r = head_record(Analysis::Ablation, &report, (2, 2), (1, 0)).unwrap();
        assert_eq!(r["baseline"]["peak_score"], 2.5);
        assert_eq!(r["variants"][0]["variant"]["kind"], "nope");
        assert_eq!(r["variants"][0]["loss_change"], 3.5);
        assert_eq!(r["variants"][0]["peak_delta"], 2);
        assert_eq!(r["variants"][0]["baseline_peak_change"], 1.9);
        assert_eq!(
            head_record(Analysis::Ablation, &serde_json::json!({}), (2, 2), (0, 0)),
            None
        );
    }

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
