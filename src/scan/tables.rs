//! The scan's tables as CSV, for spreadsheets and data frames: `tables/heads.csv` (one row per head, the
//! report's per-head numbers), `tables/claims.csv` (the papers' claims and their verdicts) and
//! `tables/sdh_per_delta.csv` (slash-dominant heads per offset). An empty cell is a number that was not measured
//! (its analysis did not run, or the head has none).
//!
//! Written by hand: three flat tables whose only escaping is RFC 4180's quoting of a field, which one function
//! does; a CSV crate would add a dependency for it.

use super::format::{HeadSummary, Summary};
use crate::error::{Error, Result};
use crate::io::write_atomic;
use std::collections::BTreeSet;
use std::path::Path;

/// The folder of a scan directory that holds the tables.
pub const DIR: &str = "tables";

/// A field, quoted when it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    match s.contains([',', '"', '\n', '\r']) {
        true => format!("\"{}\"", s.replace('"', "\"\"")),
        false => s.to_string(),
    }
}

fn number(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map_or(String::new(), |v| format!("{v}"))
}

fn table(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut out = header.join(",");
    out.push('\n');
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| field(c)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

const HEADS: [&str; 24] = [
    "layer",
    "head",
    "kv_head",
    "label",
    "best_delta",
    "best_score",
    "neighbour_score",
    "random_score_at_best_delta",
    "slash_dominant",
    "sink",
    "learned_sink",
    "q_rank_one_share",
    "k_rank_one_share",
    "amplitude_low",
    "amplitude_medium",
    "amplitude_high",
    "amplitude_unrotated",
    "predicted_delta",
    "q_norm_low",
    "q_norm_medium",
    "q_norm_high",
    "q_norm_unrotated",
    "s_pos",
    "s_sym",
];

fn head_row(h: &HeadSummary) -> Vec<String> {
    let s = h.slash.as_ref();
    let r = h.rank.as_ref();
    let a = h.fourier.as_ref().map(|f| &f.amplitude_shares);
    let q = h.frequency.as_ref().map(|f| &f.q);
    let posym = |k: &str| h.posym.as_ref().and_then(|p| p.get(k)?.as_f64());
    vec![
        h.layer.to_string(),
        h.head.to_string(),
        h.kv_head.to_string(),
        h.label.clone(),
        s.map_or(String::new(), |s| s.best_delta.to_string()),
        number(s.map(|s| s.best_score)),
        number(s.and_then(|s| s.neighbour_score)),
        number(s.and_then(|s| s.random_score_at_best_delta)),
        s.map_or(String::new(), |s| s.slash_dominant.to_string()),
        number(s.map(|s| s.sink)),
        number(s.and_then(|s| s.learned_sink)),
        number(r.map(|r| r.q_rank_one_share)),
        number(r.map(|r| r.k_rank_one_share)),
        number(a.map(|b| b.low)),
        number(a.map(|b| b.medium)),
        number(a.map(|b| b.high)),
        number(a.and_then(|b| b.nope)),
        h.fourier
            .as_ref()
            .map_or(String::new(), |f| f.predicted_delta.to_string()),
        number(q.map(|b| b.low)),
        number(q.map(|b| b.medium)),
        number(q.map(|b| b.high)),
        number(q.and_then(|b| b.nope)),
        number(posym("s_pos")),
        number(posym("s_sym")),
    ]
}

/// Writes the tables of `summary` into `dir/tables` (created).
pub fn write(dir: &Path, summary: &Summary) -> Result<()> {
    let out = dir.join(DIR);
    std::fs::create_dir_all(&out).map_err(|e| Error::io(&out, e))?;
    let text = |name: &str, content: String| {
        write_atomic(&out.join(name), |w| w.write_all(content.as_bytes()))
    };
    text("heads.csv", table(&HEADS, summary.heads.iter().map(head_row)))?;
    text(
        "claims.csv",
        table(
            &[
                "id", "paper", "claim", "statistic", "value", "n", "low", "high", "verdict", "rule",
                "note",
            ],
            summary.claims.iter().map(|c| {
                vec![
                    c.id.clone(),
                    c.paper.clone(),
                    c.claim.clone(),
                    c.statistic.as_ref().map_or(String::new(), |s| s.name.clone()),
                    number(c.statistic.as_ref().map(|s| s.value)),
                    c.statistic.as_ref().map_or(String::new(), |s| s.n.to_string()),
                    number(c.uncertainty.as_ref().map(|i| i.low)),
                    number(c.uncertainty.as_ref().map(|i| i.high)),
                    c.verdict.name().to_string(),
                    c.rule.clone(),
                    c.note.clone(),
                ]
            }),
        ),
    )?;
    if let Some(sets) = &summary.slash_dominant {
        let ran = summary.intrinsic.is_some();
        let deltas: BTreeSet<usize> = sets.natural.iter().chain(&sets.random).map(|s| s.delta).collect();
        let at = |v: &[super::format::SlashHead], d: usize| v.iter().filter(|s| s.delta == d).count();
        text(
            "sdh_per_delta.csv",
            table(
                &["delta", "natural_heads", "random_heads"],
                deltas.into_iter().map(|d| {
                    vec![
                        d.to_string(),
                        at(&sets.natural, d).to_string(),
                        match ran {
                            true => at(&sets.random, d).to_string(),
                            false => String::new(),
                        },
                    ]
                }),
            ),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_separators_are_quoted() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a, b"), "\"a, b\"");
        assert_eq!(field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(number(None), "");
        assert_eq!(number(Some(f64::NAN)), "");
        assert_eq!(number(Some(0.25)), "0.25");
    }
}
