//! The report's headline numbers recomputed from a scan directory's JSON files, independently of the report
//! code, and found in a page's HTML (as written, or as Chromium rendered it).

use super::pearson;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn json(dir: &Path, name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join(name)).unwrap()).unwrap()
}

/// The text between `start` (which must occur) and the next `end` after it.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let i = html
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} missing from the page"))
        + start.len();
    &html[i..i + html[i..].find(end).unwrap()]
}

/// Checks the page's slash-dominant counts per Δ, ablation loss changes, positional–symbolic correlation and
/// strongest previous-token head (where a head has that label) against `summary.json` and `ablation.json`;
/// returns how many numbers it checked.
pub fn check(html: &str, dir: &Path) -> usize {
    let summary = json(dir, "summary.json");
    let mut checked = 0;

    // The findings open with the papers' claims, each row's verdict and value as summary.json has them.
    let claims = summary["claims"]
        .as_array()
        .expect("summary.json has claims");
    assert!(!claims.is_empty());
    let findings = &html[html.find("<section id=\"findings\">").expect("findings")..];
    assert!(findings.find("<table").unwrap() == findings.find("<table id=\"claims\">").unwrap());
    for c in claims {
        let row = between(
            html,
            &format!("<tr data-claim=\"{}\">", c["id"].as_str().unwrap()),
            "</tr>",
        );
        let verdict = c["verdict"].as_str().unwrap();
        assert_eq!(
            between(row, "class=\"verdict verdict-", "<")
                .split('>')
                .nth(1),
            Some(verdict)
        );
        if let Some(v) = c["statistic"]["value"].as_f64() {
            assert_eq!(
                between(row, "class=\"value\">", "<"),
                ropescope::report::spec::significant(v, 3)
            );
        }
        checked += 1;
    }

    let triples = |set: &str| -> BTreeSet<(u64, u64, u64)> {
        summary["slash_dominant"][set]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let n = |k: &str| s[k].as_u64().unwrap();
                (n("delta"), n("layer"), n("head"))
            })
            .collect()
    };
    let (natural, random) = (triples("natural"), triples("random"));
    let deltas: BTreeSet<u64> = natural.iter().chain(&random).map(|t| t.0).collect();
    assert!(!deltas.is_empty(), "the directory has slash-dominant heads");
    for d in deltas {
        let row = between(html, &format!("<tr data-delta=\"{d}\">"), "</tr>");
        let n = natural.iter().filter(|t| t.0 == d).count();
        let r = random.iter().filter(|t| t.0 == d).count();
        let both = natural.intersection(&random).filter(|t| t.0 == d).count();
        for (class, v) in [("natural", n), ("random", r), ("both", both)] {
            assert_eq!(
                between(row, &format!("class=\"{class}\">"), "<"),
                v.to_string(),
                "Δ = {d}, {class}"
            );
            checked += 1;
        }
    }

    let ablation = json(dir, "ablation.json");
    for (i, v) in ablation["variants"].as_array().unwrap().iter().enumerate() {
        let row = between(html, &format!("<tr data-variant=\"{i}\">"), "</tr>");
        let change = v["loss_change"].as_f64().unwrap();
        assert_eq!(
            between(row, "class=\"loss\">", "<"),
            format!("{change:+.3}")
        );
        checked += 1;
    }

    let heads = summary["heads"].as_array().unwrap();
    let (p, s): (Vec<f64>, Vec<f64>) = heads
        .iter()
        .map(|h| {
            (
                h["posym"]["s_pos"].as_f64().unwrap(),
                h["posym"]["s_sym"].as_f64().unwrap(),
            )
        })
        .unzip();
    assert_eq!(
        between(html, "id=\"posym-correlation\">", "<"),
        format!("{:.2}", pearson(&p, &s))
    );
    checked += 1;

    let Some(best_previous) = heads
        .iter()
        .filter(|h| h["label"] == "previous-token")
        .max_by(|a, b| {
            let score = |h: &Value| h["slash"]["best_score"].as_f64().unwrap();
            score(a).total_cmp(&score(b))
        })
    else {
        return checked;
    };
    let row = between(html, "<tr data-kind=\"previous-token\">", "</tr>");
    let (l, h) = (&best_previous["layer"], &best_previous["head"]);
    let first = between(row, "<span class=\"top\">", "</span></span>");
    assert!(
        first.starts_with(&format!(
            "<a href=\"#L{l}H{h}\">L{l}H{h}</a> <span class=\"score\">{:.3}",
            best_previous["slash"]["best_score"].as_f64().unwrap()
        )),
        "strongest previous-token head first: {first}"
    );
    checked + 1
}
