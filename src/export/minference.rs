//! Head patterns in MInference's per-layer JSON, so the slash heads a scan finds can drive its
//! vertical-and-slash sparse-attention kernels.
//!
//! MInference's configs (`minference/configs/*_best_pattern.json`) are a list with one object per layer,
//! mapping the head index (a string) to `["vertical_and_slash", v, s, score]`: keep the `v` most attended key
//! columns and the `s` most attended diagonals (both picked at run time from the last queries), and `score`,
//! the share of attention that pattern recovered in MInference's offline search. Its searched configs use
//! three budgets, and so do we, chosen from the measured scores:
//!
//! * sink heads (label `sink`): `(3500, 100)`, MInference's vertical-heavy budget;
//! * slash heads (`diagonal`, `previous-token`, `slash(Δ)`): `(30, 800)`, its slash-heavy budget;
//! * every other head: `(1000, 6096)`, its general budget.
//!
//! `score` is our estimate of the same recall from the natural prompts: the mean attention on key 0 plus the
//! mean slash scores of `Δ = 0..=Δmax` (the attention on those diagonals), capped at 1 (the two overlap only in
//! the entries `(Δ, 0)`). Without `slash_natural.npy` it is `sink + best_score`, capped at 1.

use crate::report::data::ScanData;
use crate::error::{Error, Result};
use crate::scan::format::{HeadSlash, HeadSummary};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// Default file name of the patterns, inside the scan directory.
pub const MINFERENCE_FILE: &str = "minference_pattern.json";

/// Writes the MInference patterns of the scan directory `dir` to `out` (default
/// `dir/minference_pattern.json`, checked before the scan is read); returns the path written.
pub fn write(dir: &Path, out: Option<&Path>) -> Result<PathBuf> {
    let out = out.map_or_else(|| dir.join(MINFERENCE_FILE), Path::to_path_buf);
    crate::io::check_output_file(
        &out,
        &crate::io::inputs::Inputs::new([dir]).replacing(MINFERENCE_FILE),
    )?;
    let data = ScanData::open(dir)?;
    crate::io::write_json(&out, &patterns(&data)?)?;
    Ok(out)
}

/// `(v, s)` budget of a sink head.
pub const SINK_BUDGET: (usize, usize) = (3500, 100);
/// `(v, s)` budget of a slash head.
pub const SLASH_BUDGET: (usize, usize) = (30, 800);
/// `(v, s)` budget of any other head.
pub const GENERAL_BUDGET: (usize, usize) = (1000, 6096);

/// The `(v, s)` budget of a head from its label.
pub fn budget(label: &str) -> (usize, usize) {
    if label == "sink" {
        SINK_BUDGET
    } else if label == "diagonal" || label == "previous-token" || label.starts_with("slash(") {
        SLASH_BUDGET
    } else {
        GENERAL_BUDGET
    }
}

/// The MInference config of a scan: one object per layer. Fails when the `slash` analysis did not run.
pub fn patterns(data: &ScanData) -> Result<Value> {
    let mut layers = vec![Map::new(); data.meta.model.n_layers];
    for h in &data.summary.heads {
        let slash = slash_scores(data, h, "MInference patterns")?;
        let score = (local_recall(data, h, slash) * 1000.0).round() / 1000.0;
        let (v, s) = budget(&h.label);
        if let Some(layer) = layers.get_mut(h.layer) {
            layer.insert(
                h.head.to_string(),
                json!(["vertical_and_slash", v, s, score]),
            );
        }
    }
    Ok(Value::Array(
        layers.into_iter().map(Value::Object).collect(),
    ))
}

/// The slash scores of head `h`, or the error saying that `user` needs the `slash` analysis, which did not run.
pub fn slash_scores<'a>(data: &ScanData, h: &'a HeadSummary, user: &str) -> Result<&'a HeadSlash> {
    h.slash.as_ref().ok_or_else(|| {
        Error::Argument(format!(
            "{}: head L{}H{} has no slash scores (the `slash` analysis did not run); {user} need them",
            data.dir.display(),
            h.layer,
            h.head
        ))
    })
}

/// The share of a head's attention on the first key and on the diagonals `Δ = 0..=Δmax`, from the natural
/// prompts: its sink score plus its slash scores, capped at 1 (the two overlap only in the entries `(Δ, 0)`);
/// `sink + best_score` without `slash_natural.npy`. What a sink-plus-recent-window pattern keeps.
pub fn local_recall(data: &ScanData, h: &HeadSummary, slash: &HeadSlash) -> f64 {
    let diagonals = data.slash[0]
        .as_ref()
        .and_then(|t| t.at(&[h.layer, h.head]))
        .map_or(slash.best_score, |v| v.iter().sum());
    (slash.sink + diagonals).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_follow_labels() {
        assert_eq!(budget("sink"), SINK_BUDGET);
        assert_eq!(budget("slash(4)"), SLASH_BUDGET);
        assert_eq!(budget("previous-token"), SLASH_BUDGET);
        assert_eq!(budget("mixed"), GENERAL_BUDGET);
    }
}
