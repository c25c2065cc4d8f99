//! The report's opening section: the findings of [`super::findings`] as tables and a chart, each head a link to
//! its card. Elements carry ids (`sdh-counts`, `top-heads`, `posym-correlation`, `ablation-losses`, …) so that
//! the browser test can read the rendered numbers back.

use super::data::ScanData;
use super::findings::{self, DETECTOR_FIELDS};
use super::html::variant_name;
use super::svg::escape;
use crate::scan::format::Bands;
use std::fmt::Write;

/// A head as a link to its card.
fn head_link(l: usize, h: usize) -> String {
    format!("<a href=\"#L{l}H{h}\">L{l}H{h}</a>")
}

/// An analysis that did not run, in a findings table's place.
fn not_run(out: &mut String, analysis: &str) {
    let _ = write!(
        out,
        "<p class=\"missing\">not run: analysis `{analysis}`</p>"
    );
}

/// The findings section.
pub fn render(out: &mut String, data: &ScanData) {
    out.push_str("<section id=\"findings\"><h2>Findings</h2>");
    super::claims_html::render(out, data);
    rope_and_nope(out, data);
    sdh(out, data);
    top_heads(out, data);
    bands(out, data);
    posym(out, data);
    ablation(out, data);
    alignment(out, data);
    detectors(out, data);
    cone(out, data);
    out.push_str("</section>\n");
}

/// Which prompts a multi-pass analysis's numbers come from (its slash peaks differ from those over all natural
/// prompts for that reason).
fn multi_pass_set(out: &mut String) {
    let _ = write!(
        out,
        "<p class=\"set\">Measured on the first {} natural prompts, as every multi-pass analysis is; a head's \
         slash peak here can differ from its score over all natural prompts in the other tables.</p>",
        crate::scan::external::MULTI_PASS_PROMPTS
    );
}

/// A number, or "not run" where its analysis did not run.
fn or_not_run(v: Option<String>) -> String {
    v.unwrap_or_else(|| "<span class=\"missing\">not run</span>".into())
}

/// On a model with NoPE layers: the papers' measures on its RoPE layers and on its NoPE layers, side by side.
fn rope_and_nope(out: &mut String, data: &ScanData) {
    let Some(groups) = findings::position_groups(data) else {
        return;
    };
    let has = |r: findings::Rotation| groups.iter().any(|g| g.rotation == r);
    let title = match has(findings::Rotation::None) {
        true => "RoPE layers against NoPE layers",
        false => "Fully and partially rotating layers",
    };
    let _ = write!(out, "<h3 id=\"f-nope\">{title}</h3><p>");
    if has(findings::Rotation::None) {
        out.push_str(
            "This model has layers that rotate nothing (NoPE): their queries and keys carry no position, so any \
             positional pattern they show is not RoPE's. They are the control group for the RoPE layers. \
             Frequency bands and the Fourier decomposition do not apply to them (null in \
             <code>summary.json</code>). ",
        );
    }
    if has(findings::Rotation::Partial) {
        out.push_str(
            "Partially rotating layers (p-RoPE: some chunks of frequency 0; or a rotated fraction of each head) \
             leave part of every query and key without position: their unrotated (NoPE) share is under \
             <a href=\"#f-bands\">band dominance</a>. Where layers also differ in window or head size (Gemma 4's \
             global layers), the groups differ in that too. ",
        );
    }
    out.push_str(
        "</p><table id=\"rope-nope\"><tr><th>group</th><th>layers</th><th>heads</th><th>slash-dominant heads \
         (natural / random)</th><th>mean best slash score</th><th>mean sink</th><th>mean s_pos / s_sym</th>\
         <th>mean rank-one share q / k</th><th>labels</th></tr>",
    );
    for g in &groups {
        let name = g.rotation.name();
        let layers: Vec<String> = g.layers.iter().map(|l| l.to_string()).collect();
        let labels: Vec<String> = g
            .labels
            .iter()
            .map(|(l, n)| format!("{} {n}", escape(l)))
            .collect();
        let sdh = g.sdh_natural.map(|n| {
            let r = g.sdh_random.map_or("not run".into(), |r| r.to_string());
            format!("{n} / {r}")
        });
        let _ = write!(
            out,
            "<tr data-group=\"{}\"><td>{name}</td><td>{}</td><td>{}</td><td class=\"sdh\">{}</td>\
             <td class=\"slash\">{}</td><td class=\"sink\">{}</td><td class=\"posym\">{}</td>\
             <td class=\"rank\">{}</td><td>{}</td></tr>",
            g.rotation.key(),
            layers.join(", "),
            g.heads,
            or_not_run(sdh),
            or_not_run(g.mean_best_slash.map(|v| format!("{v:.3}"))),
            or_not_run(g.mean_sink.map(|v| format!("{v:.3}"))),
            or_not_run(g.mean_posym.map(|(p, s)| format!("{p:.3} / {s:.3}"))),
            or_not_run(g.mean_rank_one.map(|(q, k)| format!("{q:.3} / {k:.3}"))),
            labels.join(", ")
        );
    }
    out.push_str("</table>");
}

fn sdh(out: &mut String, data: &ScanData) {
    out.push_str("<h3 id=\"f-sdh\">Slash-dominant heads per Δ</h3>");
    let (Some(counts), Some(sets)) = (findings::sdh_counts(data), &data.summary.slash_dominant)
    else {
        return not_run(out, "slash");
    };
    let _ = write!(
        out,
        "<p>(layer, head, Δ) with mean SlashScore(Δ) ≥ κ = {}: a head counts once at each Δ where it reaches κ, so \
         the <i>all</i> row counts (head, Δ) pairs and the <i>distinct heads</i> row the heads themselves.</p>\
         <table id=\"sdh-counts\" class=\"sortable\"><tr><th>Δ</th><th>natural prompts</th><th>random prompts</th><th>both</th></tr>",
        sets.kappa
    );
    let cell = |v: Option<usize>| v.map_or_else(|| "not run".to_string(), |v| v.to_string());
    for c in &counts {
        let _ = write!(
            out,
            "<tr data-delta=\"{}\"><td>{}</td><td class=\"natural\">{}</td><td class=\"random\">{}</td><td class=\"both\">{}</td></tr>",
            c.delta,
            c.delta,
            c.natural,
            cell(c.random),
            cell(c.both)
        );
    }
    let ran = findings::random_ran(data);
    let total = |f: fn(&findings::SdhCount) -> Option<usize>| {
        cell(ran.then(|| counts.iter().filter_map(f).sum::<usize>()))
    };
    let (nat, ran_heads) = (
        findings::distinct_heads(&sets.natural),
        findings::distinct_heads(&sets.random),
    );
    let _ = write!(
        out,
        "<tr data-delta=\"all\"><th>all (head, Δ) pairs</th><th class=\"natural\">{}</th><th class=\"random\">{}</th><th class=\"both\">{}</th></tr>\
         <tr data-delta=\"heads\"><th>distinct heads</th><th class=\"natural\">{}</th><th class=\"random\">{}</th><th class=\"both\">{}</th></tr></table>",
        total(|c| Some(c.natural)),
        total(|c| c.random),
        total(|c| c.both),
        nat.len(),
        cell(ran.then_some(ran_heads.len())),
        cell(ran.then(|| nat.intersection(&ran_heads).count()))
    );
    if let Some(i) = &data.summary.intrinsic {
        let _ = write!(
            out,
            "<p>Natural against random prompts: Jaccard of the (layer, head, Δ) sets {:.2} (of the heads {:.2}); \
             Pearson of all slash scores {:.2} (of each head's best {:.2}).</p>",
            i.jaccard, i.jaccard_heads, i.pearson_all, i.pearson_best
        );
    }
}

fn top_heads(out: &mut String, data: &ScanData) {
    out.push_str("<h3 id=\"f-top\">Top heads of each kind</h3><p class=\"set\">Scores over all natural prompts \
         (the detectors' over their own prompts).</p><table id=\"top-heads\" class=\"sortable\"><tr><th>label</th><th>heads</th><th>score</th><th>strongest first</th></tr>");
    for t in findings::top_heads(data) {
        let heads: Vec<String> = t
            .heads
            .iter()
            .map(|&(l, h, s)| {
                format!(
                    "<span class=\"top\">{} <span class=\"score\">{s:.3}</span></span>",
                    head_link(l, h)
                )
            })
            .collect();
        let _ = write!(
            out,
            "<tr data-kind=\"{k}\"><td>{k}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            t.count,
            escape(t.score),
            heads.join(", "),
            k = escape(&t.kind)
        );
    }
    out.push_str("</table>");
}

/// The cells of one row of the band table: low, medium, high, and the unrotated share where the table has that
/// column (`still`).
fn bands_cells(b: &Option<Bands>, still: bool) -> String {
    match b {
        Some(b) => {
            let nope = match (still, b.nope) {
                (false, _) => String::new(),
                (true, n) => format!("<td>{:.2}</td>", n.unwrap_or(0.0)),
            };
            format!(
                "<td>{:.2}</td><td>{:.2}</td><td>{:.2}</td>{nope}",
                b.low, b.medium, b.high
            )
        }
        None => format!(
            "<td colspan=\"{}\" class=\"missing\">not run</td>",
            3 + usize::from(still)
        ),
    }
}

fn bands(out: &mut String, data: &ScanData) {
    out.push_str("<h3 id=\"f-bands\">Band dominance</h3>");
    let Some(d) = findings::band_dominance(data) else {
        return not_run(out, "slash");
    };
    let nope = if data.meta.model.has_nope_layers() {
        " The heads of NoPE layers have no frequencies and are left out."
    } else {
        ""
    };
    let groups = [
        ("Σ A_l of the logit (Fourier)", &d.amplitude),
        ("query chunk norm", &d.query_norm),
    ];
    let still = groups
        .iter()
        .any(|(_, (a, b))| [a, b].iter().any(|x| x.is_some_and(|x| x.nope.is_some())));
    let (still_text, still_head) = match still {
        true => (
            " Coordinates that never rotate (past the rotated dimensions, or chunks of frequency 0) are not in \
             any band: they are the unrotated (NoPE) share, of amplitude |q_u| |k_u| for the logit and norm \
             ‖q_u‖ for the query.",
            "<th>unrotated (NoPE)</th>",
        ),
        false => ("", ""),
    };
    let _ = write!(
        out,
        "<p>Mean share per frequency band (low 0 &lt; g &lt; {}, high g ≥ {} rad/token).{nope}{still_text}</p>\
         <table id=\"band-dominance\"><tr><th>quantity</th><th>heads</th><th>low</th><th>medium</th><th>high</th>{still_head}</tr>",
        data.meta.parameters.low_band_max_frequency, data.meta.parameters.high_band_min_frequency
    );
    for (name, (sdh, other)) in groups {
        let _ = write!(
            out,
            "<tr><td>{name}</td><td>slash-dominant</td>{}</tr><tr><td>{name}</td><td>others</td>{}</tr>",
            bands_cells(sdh, still),
            bands_cells(other, still)
        );
    }
    out.push_str("</table>");
}

fn posym(out: &mut String, data: &ScanData) {
    out.push_str("<h3 id=\"f-posym\">Positional and symbolic heads</h3>");
    multi_pass_set(out);
    match findings::posym_correlation(data) {
        Some((r, n)) => {
            let _ = write!(
                out,
                "<p>Pearson r(s_pos, s_sym) over {n} heads: <b id=\"posym-correlation\">{r:.2}</b> \
                 (the plane is under <a href=\"#model\">model-wide figures</a>).</p>"
            );
        }
        None => not_run(out, "posym"),
    }
}

fn ablation(out: &mut String, data: &ScanData) {
    out.push_str("<h3 id=\"f-ablation\">Frequency ablation: next-token loss change</h3>");
    multi_pass_set(out);
    let Some(losses) = findings::ablation_losses(data) else {
        return not_run(out, "ablation");
    };
    out.push_str("<div class=\"figs\"><table id=\"ablation-losses\" class=\"sortable\"><tr><th>variant</th><th>loss change (nats)</th></tr>");
    for (i, (v, change)) in losses.iter().enumerate() {
        let _ = write!(
            out,
            "<tr data-variant=\"{i}\"><td>{}</td><td class=\"loss\">{change:+.3}</td></tr>",
            escape(&variant_name(v))
        );
    }
    out.push_str("</table>");
    ablation_chart(out, &losses);
    out.push_str("</div>");
}

/// Horizontal bars of the loss changes, zero at a common axis.
fn ablation_chart(out: &mut String, losses: &[(serde_json::Value, f64)]) {
    let (label_w, bar_w, row) = (150.0, 260.0, 18.0);
    let lo = losses.iter().map(|l| l.1).fold(0.0, f64::min);
    let hi = losses.iter().map(|l| l.1).fold(0.0, f64::max);
    let span = (hi - lo).max(1e-12);
    let x = |v: f64| label_w + (v - lo) / span * bar_w;
    let height = row * losses.len() as f64 + 24.0;
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" font-size=\"11\" font-family=\"sans-serif\">",
        w = label_w + bar_w + 60.0
    );
    for (i, (v, change)) in losses.iter().enumerate() {
        let y = 4.0 + row * i as f64;
        let (a, b) = (x(0.0).min(x(*change)), x(0.0).max(x(*change)));
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><rect x=\"{a:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"{}\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{}\">{change:+.2}</text>",
            label_w - 4.0,
            y + 12.0,
            escape(&variant_name(v)),
            (b - a).max(0.5),
            row - 4.0,
            if *change >= 0.0 { "#c0504d" } else { "#4f81bd" },
            b + 3.0,
            y + 12.0
        );
    }
    let _ = write!(
        out,
        "<line x1=\"{z:.1}\" x2=\"{z:.1}\" y1=\"2\" y2=\"{}\" stroke=\"#333\"/><text x=\"{z:.1}\" y=\"{}\" text-anchor=\"middle\">0 nats</text></svg>",
        height - 18.0,
        height - 4.0,
        z = x(0.0)
    );
}

fn alignment(out: &mut String, data: &ScanData) {
    out.push_str("<h3 id=\"f-cs\">Cauchy–Schwarz alignment</h3>");
    multi_pass_set(out);
    let Some(rows) = findings::alignment(data) else {
        return not_run(out, "cauchy-schwarz");
    };
    if rows.is_empty() {
        out.push_str("<p class=\"missing\">no head tabled (see the warnings)</p>");
        return;
    }
    out.push_str("<p>Mean over the tabled heads of the mean cosine between q_i and k_j after RoPE.</p><table id=\"cauchy-schwarz\" class=\"sortable\"><tr><th>kind</th><th>heads</th><th>target pairs</th><th>pairs j ≤ i−2</th></tr>");
    for r in rows {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            escape(&r.kind),
            r.heads,
            r.target_cos,
            r.other_cos
        );
    }
    out.push_str("</table>");
}

fn detectors(out: &mut String, data: &ScanData) {
    out.push_str("<h3 id=\"f-detectors\">Head detectors</h3>");
    let Some(tops) = findings::detector_tops(data) else {
        return not_run(out, "detectors");
    };
    out.push_str(
        "<table id=\"detectors\" class=\"sortable\"><tr><th>pattern</th><th>strongest heads (score)</th></tr>",
    );
    for (f, heads) in tops {
        let name = DETECTOR_FIELDS.iter().find(|d| d.0 == f).map_or(f, |d| d.1);
        let list: Vec<String> = heads
            .iter()
            .map(|&(l, h, s)| format!("{} {s:.3}", head_link(l, h)))
            .collect();
        let _ = write!(out, "<tr><td>{name}</td><td>{}</td></tr>", list.join(", "));
    }
    out.push_str("</table>");
}

fn cone(out: &mut String, data: &ScanData) {
    out.push_str("<h3 id=\"f-cone\">Embedding cone</h3>");
    match &data.summary.cone {
        None => not_run(out, "cone"),
        Some(c) => {
            let _ = write!(
            out,
            "<p>Embedding cone ({} tokens): mean angle to the mean direction {:.1}°, largest {:.1}°.</p>",
            c.n_tokens,
            c.mean_angle.to_degrees(),
            c.max_angle.to_degrees()
            );
        }
    }
}
