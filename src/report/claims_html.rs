//! The report's first table: each claim of the three papers the scan measures, with its statistic, interval and
//! verdict, as `summary.json`'s `claims` holds them (`src/scan/claims.rs` says how each is decided).

use super::data::ScanData;
use super::svg::escape;
use crate::scan::format::Claim;
use std::fmt::Write;

/// The papers, as the table names them.
fn paper_name(paper: &str) -> &str {
    match paper {
        "slash" => "Slash pattern (Cheng et al.)",
        "round-and-round" => "Round and Round (Barbero et al.)",
        "positional-symbolic" => "Positional and symbolic (Urrutia et al.)",
        other => other,
    }
}

/// A number with three significant digits.
fn number(v: f64) -> String {
    crate::report::spec::significant(v, 3)
}

/// The claims table; a line saying so for a directory that has none (written before claims existed).
pub fn render(out: &mut String, data: &ScanData) {
    out.push_str(
        "<h3 id=\"f-claims\">The papers' claims on this model</h3><p>Each claim is measured over the heads the \
         rule names; the interval is a percentile bootstrap over those heads. A verdict is <b>supported</b> when \
         the whole interval lies on the claim's side of the threshold, <b>contradicted</b> when it lies on the \
         other side, <b>mixed</b> when it straddles the threshold or two measures of the claim disagree, and \
         <b>not measurable</b> when the analyses it needs did not run. Thresholds the papers leave open are ours \
         (docs/claims.md).</p>",
    );
    let claims = &data.summary.claims;
    if claims.is_empty() {
        out.push_str(
            "<p class=\"missing\">no claims in this summary.json (written before they existed)</p>",
        );
        return;
    }
    out.push_str(
        "<table id=\"claims\"><tr><th>paper</th><th>claim</th><th>statistic</th><th>value</th><th>interval</th>\
         <th>verdict</th><th>rule and notes</th></tr>",
    );
    for c in claims {
        row(out, c);
    }
    out.push_str("</table>");
}

fn row(out: &mut String, c: &Claim) {
    let (statistic, value) = match &c.statistic {
        Some(s) => (
            format!("{} (n = {})", escape(&s.name), s.n),
            number(s.value),
        ),
        None => (
            "–".into(),
            "<span class=\"missing\">not measured</span>".into(),
        ),
    };
    let interval = match &c.uncertainty {
        Some(i) => format!(
            "<span title=\"{}\">{} to {}</span>",
            escape(&i.method),
            number(i.low),
            number(i.high)
        ),
        None => "–".into(),
    };
    let verdict = c.verdict.name();
    let note = match c.note.is_empty() {
        true => String::new(),
        false => format!("<div class=\"note\">{}</div>", escape(&c.note)),
    };
    let _ = write!(
        out,
        "<tr data-claim=\"{id}\"><td>{}</td><td>{}</td><td>{statistic}</td><td class=\"value\">{value}</td>\
         <td class=\"interval\">{interval}</td><td class=\"verdict verdict-{}\">{verdict}</td><td>{}{note}</td></tr>",
        escape(paper_name(&c.paper)),
        escape(&c.claim),
        verdict.replace(' ', "-"),
        escape(&c.rule),
        id = escape(&c.id),
    );
}
