//! The report's definitions: every score, label and parameter the page shows, each with the value this scan
//! used, so that a number can be read without the code (`fixtures/scan/FORMAT.md` is the full reference).

use super::catalog::{layer_types, ranges};
use super::data::ScanData;
use super::svg::{escape, tick_label};
use crate::analysis::fourier::{Band, FrequencyBands};
use crate::analysis::posym::{DEFAULT_BLOCK_COUNT, DEFAULT_SWAP_TEMPERATURE};
use crate::scan::external::MULTI_PASS_PROMPTS;
use crate::scan::labels::{INDUCTION_THRESHOLD, PEAK_RATIO, POSYM_MARGIN};
use std::fmt::Write;

/// How many of each layer type's turning chunks fall in each band, as `layers 0–4: 19 low, 6 medium, 7 high`.
fn chunks_per_band(data: &ScanData) -> String {
    let p = &data.meta.parameters;
    let bands = FrequencyBands {
        low_max: p.low_band_max_frequency,
        high_min: p.high_band_min_frequency,
    };
    let lines: Vec<String> = layer_types(data)
        .iter()
        .map(|(layers, freq)| {
            let turning: Vec<f64> = freq
                .iter()
                .copied()
                .filter(|g| g.is_finite() && *g > 0.0)
                .collect();
            let count = |b: Band| turning.iter().filter(|&&g| bands.band(g) == b).count();
            let still = freq.iter().filter(|&&g| g == 0.0).count();
            let still = match still {
                0 => String::new(),
                n => format!(", {n} unrotated"),
            };
            format!(
                "layers {}: {} low, {} medium, {} high{still}",
                ranges(layers),
                count(Band::Low),
                count(Band::Medium),
                count(Band::High)
            )
        })
        .collect();
    match lines.is_empty() {
        true => "not recorded (chunk_frequency.npy absent)".into(),
        false => lines.join("; "),
    }
}

/// The definitions section.
pub fn render(out: &mut String, data: &ScanData) {
    let meta = &data.meta;
    let p = &meta.parameters;
    let sets: Vec<String> = meta
        .prompt_sets
        .iter()
        .map(|s| {
            let mut lengths = s.lengths.clone();
            lengths.sort_unstable();
            lengths.dedup();
            let lengths: Vec<String> = lengths.iter().map(|l| l.to_string()).collect();
            format!("{} {} of {} tokens", s.count, s.name, lengths.join("/"))
        })
        .collect();
    let random = match meta.prompt_sets.iter().any(|s| s.name == "random") {
        true => "",
        false => " (random prompts not run)",
    };
    let rows: Vec<(&str, String, String)> = vec![
        (
            "prompts",
            "Natural prompts (texts, continued cyclically to the length) and as many random prompts (uniform token \
             ids). Streaming measures use every prompt of a set; the multi-pass analyses (posym, detectors, \
             Cauchy–Schwarz, ablation) the first natural prompts only."
                .into(),
            format!(
                "{}{random}; multi-pass analyses: first {MULTI_PASS_PROMPTS} natural",
                sets.join(", ")
            ),
        ),
        (
            "SlashScore(Δ)",
            "Mean attention on the Δ-th sub-diagonal, S[i, i−Δ] over the rows i ≥ Δ, then over a set's prompts."
                .into(),
            format!("Δ = 0..{}", p.delta_max),
        ),
        (
            "κ, slash-dominant head (SDH)",
            "A head whose best mean SlashScore(Δ) reaches κ is (κ, Δ)-slash-dominant; counted once per (head, Δ) \
             pair or once per head, as each table says."
                .into(),
            format!("κ = {}", p.kappa),
        ),
        (
            "labels",
            format!(
                "By the first rule that applies: diagonal (Δ = 0), previous-token (Δ = 1), slash(Δ): an SDH whose \
                 best score is at least {PEAK_RATIO}× that at either neighbouring Δ and not below its sink score \
                 when that is high; induction: detectors' induction score ≥ {INDUCTION_THRESHOLD}; sink: mean \
                 attention on key 0 ≥ the sink threshold; positional / symbolic: s_pos and s_sym apart by ≥ \
                 {POSYM_MARGIN}; mixed otherwise."
            ),
            format!("sink threshold {}", p.sink_threshold),
        ),
        (
            "sink",
            "Mean attention on the first key from queries 1..N−1; a learned sink (GPT-OSS) is the mass of a row \
             that goes to no key."
                .into(),
            String::new(),
        ),
        (
            "rank-one share",
            "σ1²/Σσ² of the stacked pre-RoPE queries (or keys) of a head over all natural tokens: 1 when they all \
             lie on one line."
                .into(),
            String::new(),
        ),
        (
            "frequency bands",
            "A chunk (2-D rotation pair) is low when its angular frequency g < the low edge, high when g ≥ the high \
             edge, medium between; chunks of frequency 0 and coordinates past a partial rotation are the \
             unrotated (NoPE) share, in no band. Band shares are of the query chunk norms or of the Fourier \
             amplitudes A_l."
                .into(),
            format!(
                "low g < {}, high g ≥ {} rad/token; {}",
                tick_label(p.low_band_max_frequency),
                tick_label(p.high_band_min_frequency),
                chunks_per_band(data)
            ),
        ),
        (
            "Fourier decomposition",
            "The logit of the mean pre-RoPE query and key as Σ_l A_l cos(g_l Δ + φ_l) + c, A_l = ‖q̄⁽ˡ⁾‖ ‖k̄⁽ˡ⁾‖; \
             the predicted Δ is where it peaks."
                .into(),
            String::new(),
        ),
        (
            "s_pos, s_sym",
            "Positional and symbolic scores of the block-swap test (positional–symbolic paper, §3): the prompt \
             cut into m blocks, two blocks swapped, the attention compared with a softmax at temperature τ."
                .into(),
            format!("m = {DEFAULT_BLOCK_COUNT}, τ = {DEFAULT_SWAP_TEMPERATURE}"),
        ),
        (
            "Cauchy–Schwarz ratio",
            "A head's activation q·k at a key over its bound ‖q‖‖k‖ (Round and Round, Tables 3–5), for heads \
             labelled diagonal or previous-token, at their target key and over all keys."
                .into(),
            String::new(),
        ),
        (
            "frequency ablation",
            "The trained model run at inference with some chunks left unrotated, without retraining (the paper's \
             p-RoPE is trained with it): p-RoPE keeps each layer's fastest ⌊p·n⌋ turning chunks, reversed p-RoPE \
             the slowest, a band mask stops one band; the change of next-token loss and of each head's slash peak."
                .into(),
            String::new(),
        ),
        (
            "cone",
            "Angles of the sampled token embeddings (and of their projections by each head's W_Q and W_K) to their \
             mean direction."
                .into(),
            format!("{} sampled rows", p.cone_tokens),
        ),
        (
            "claims",
            "A statistic over heads, its 95% bootstrap interval over those heads (1000 resamples, seeded), and a \
             verdict from the interval against the threshold the rule names (docs/claims.md)."
                .into(),
            format!("seed {}", p.seed),
        ),
    ];
    out.push_str(
        "<section id=\"glossary\"><h2>Definitions and parameters</h2><table id=\"glossary-table\">\
         <tr><th>term</th><th>definition</th><th>on this scan</th></tr>",
    );
    for (term, definition, value) in rows {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(term),
            escape(&definition),
            escape(&value)
        );
    }
    out.push_str("</table></section>\n");
}
