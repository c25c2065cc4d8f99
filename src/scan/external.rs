//! The analyses that run their own forward passes (6 `posym`, 7 `detectors`, 8 `cauchy-schwarz`,
//! 10 `ablation`, in `src/analysis/{posym_scan,detectors,cauchy_schwarz,ablation}.rs`). Each plugs in with one
//! line in [`runners`]; until then the CLI reports it as not available in this build.

use super::params::Analysis;
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

/// The multi-pass analyses present in this build. To plug one in, add its line, e.g.
/// `(Analysis::Posym, |m, p, _, bar| json(crate::analysis::posym_scan::run(m, p, &Default::default(), bar)?)),`
fn runners<T: Real>() -> Vec<(Analysis, Runner<T>)> {
    vec![]
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
pub fn runner<T: Real>(a: Analysis) -> Option<Runner<T>> {
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
