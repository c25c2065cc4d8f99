//! The short ranked summary a scan prints on the terminal (and writes to `summary.txt`).

use super::format::{HeadSummary, Summary};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Rows of each ranking.
pub const TOP_ROWS: usize = 10;

/// Renders the summary: label counts, slash-dominant heads and their intrinsic-ness, the top heads by slash
/// score with their rank, Fourier and frequency figures, the top sinks, and the embedding cone.
pub fn render(summary: &Summary, title: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{title}");
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for h in &summary.heads {
        let kind = h.label.split('(').next().unwrap_or(&h.label);
        *counts.entry(kind.to_string()).or_default() += 1;
    }
    let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let _ = writeln!(out, "labels: {}", counts.join(", "));
    claims(&mut out, summary);
    if let Some(s) = &summary.slash_dominant {
        let heads = |v: &[super::format::SlashHead]| {
            v.iter()
                .map(|s| (s.layer, s.head))
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        };
        let _ = write!(
            out,
            "slash-dominant (κ = {}): {} (head, Δ) pairs in {} distinct heads on natural prompts; ",
            s.kappa,
            s.natural.len(),
            heads(&s.natural)
        );
        match summary.intrinsic.is_some() {
            true => {
                let _ = write!(
                    out,
                    "{} pairs in {} heads on random prompts",
                    s.random.len(),
                    heads(&s.random)
                );
            }
            false => out.push_str("random prompts not run (analysis intrinsic)"),
        }
        if let Some(i) = &summary.intrinsic {
            let _ = write!(
                out,
                "; Jaccard {:.2} (heads {:.2}), Pearson {:.2} all scores / {:.2} best per head",
                i.jaccard, i.jaccard_heads, i.pearson_all, i.pearson_best
            );
        }
        let _ = writeln!(out);
    }
    let mut ranked: Vec<&HeadSummary> =
        summary.heads.iter().filter(|h| h.slash.is_some()).collect();
    ranked.sort_by(|a, b| best(b).total_cmp(&best(a)));
    if !ranked.is_empty() {
        let _ = writeln!(
            out,
            "\ntop heads by slash score   label            Δ  natural  random  q σ1²/Σσ²  k σ1²/Σσ²  A high+med  Δ pred  q low-band norm"
        );
        for h in ranked.iter().take(TOP_ROWS) {
            let s = h.slash.as_ref().expect("filtered");
            let _ = writeln!(
                out,
                "  L{:<3} H{:<3} (kv {:<2})       {:<16} {:>2}  {:>7.3}  {:>6}  {:>9}  {:>9}  {:>10}  {:>6}  {:>15}",
                h.layer,
                h.head,
                h.kv_head,
                h.label,
                s.best_delta,
                s.best_score,
                opt(s.random_score_at_best_delta, 3),
                opt(h.rank.as_ref().map(|r| r.q_rank_one_share), 3),
                opt(h.rank.as_ref().map(|r| r.k_rank_one_share), 3),
                opt(
                    h.fourier
                        .as_ref()
                        .map(|f| f.amplitude_shares.high + f.amplitude_shares.medium),
                    2
                ),
                h.fourier
                    .as_ref()
                    .map_or("-".into(), |f| f.predicted_delta.to_string()),
                opt(h.frequency.as_ref().map(|f| f.q.low), 2),
            );
        }
        let _ = writeln!(out, "{LEGEND}");
        ranked.sort_by(|a, b| sink(b).total_cmp(&sink(a)));
        let sinks: Vec<String> = ranked
            .iter()
            .take(TOP_ROWS)
            .map(|h| format!("L{}H{} {:.2}", h.layer, h.head, sink(h)))
            .collect();
        let _ = writeln!(
            out,
            "\ntop attention on the first token: {}",
            sinks.join(", ")
        );
    }
    let mut learned: Vec<(f64, &HeadSummary)> = (summary.heads.iter())
        .filter_map(|h| Some((h.slash.as_ref()?.learned_sink?, h)))
        .collect();
    if !learned.is_empty() {
        let mean = learned.iter().map(|(m, _)| m).sum::<f64>() / learned.len() as f64;
        learned.sort_by(|a, b| b.0.total_cmp(&a.0));
        let top: Vec<String> = (learned.iter().take(5))
            .map(|(m, h)| format!("L{}H{} {m:.2}", h.layer, h.head))
            .collect();
        let _ = writeln!(
            out,
            "learned sinks take {mean:.2} of a row's attention on average over heads; most: {}",
            top.join(", ")
        );
    }
    let freq: Vec<f64> = summary
        .heads
        .iter()
        .filter_map(|h| h.frequency.as_ref().map(|f| f.q.low))
        .collect();
    if !freq.is_empty() {
        // NoPE layers' heads have no frequency result: the mean says over how many heads it runs when that is
        // not all of them.
        let over = match freq.len() == summary.heads.len() {
            true => "all heads".to_string(),
            false => format!("the {} heads that rotate", freq.len()),
        };
        let _ = writeln!(
            out,
            "mean share of query chunk norm in the low band over {over}: {:.2}",
            freq.iter().sum::<f64>() / freq.len() as f64
        );
    }
    if let Some(c) = &summary.cone {
        let _ = writeln!(
            out,
            "embedding cone ({} tokens): mean angle {:.1}°, largest {:.1}°",
            c.n_tokens,
            c.mean_angle.to_degrees(),
            c.max_angle.to_degrees()
        );
    }
    out
}

/// What the columns of the top-heads table mean.
pub const LEGEND: &str = "  columns: Δ = offset of the largest mean slash score; natural = that score on the natural prompts; \
random = the score at the same Δ on the random prompts;\n  q/k σ1²/Σσ² = rank-one share of the stacked pre-RoPE \
queries/keys; A high+med = share of Σ A_l (logit Fourier amplitudes of the mean q and k) in the high and medium \
bands;\n  Δ pred = the offset that decomposition predicts; q low-band norm = share of query chunk norm in the low band";

/// One line per claim of the papers: its verdict, id, statistic and interval.
fn claims(out: &mut String, summary: &Summary) {
    if summary.claims.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nthe papers' claims on this model (report.html and summary.json say how each is decided):");
    for c in &summary.claims {
        let measured = match (&c.statistic, &c.uncertainty) {
            (Some(s), Some(i)) => {
                format!("{:.3} [{:.3}, {:.3}] over {}", s.value, i.low, i.high, s.n)
            }
            (Some(s), None) => format!("{:.3}", s.value),
            (None, _) => c.note.clone(),
        };
        let _ = writeln!(out, "  {:<15} {:<38} {measured}", c.verdict.name(), c.id);
    }
    let _ = writeln!(out);
}

fn best(h: &HeadSummary) -> f64 {
    h.slash.as_ref().map_or(f64::NEG_INFINITY, |s| s.best_score)
}

fn sink(h: &HeadSummary) -> f64 {
    h.slash.as_ref().map_or(f64::NEG_INFINITY, |s| s.sink)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}
