//! `summary.json`: every head's scores, from the measures of both prompt sets, and its label.

use super::external::{head_record, TabulatedHead, CAUCHY_SCHWARZ_HEAD_SET};
use super::format::{
    Bands, EmbeddingCone as ConeJson, HeadCone, HeadFourier, HeadFrequency, HeadRank, HeadSlash,
    HeadSummary, Intrinsic, SlashDominantSets, SlashHead, Summary, FORMAT_VERSION,
};
use super::labels::{label, Evidence};
use super::measure::SetMeasures;
use super::params::{Analysis, ScanParams};
use crate::analysis::correlation::pearson;
use crate::analysis::embedding_cone::EmbeddingCone;
use crate::analysis::fourier::{logit_spectrum, BandShares, FrequencyBands, LogitSpectrum};
use crate::analysis::rank::rank_stats;
use crate::analysis::slash_stream::SlashCapture;
use crate::analysis::vector_stats::{HeadSums, RowSums};
use crate::model::Model;
use crate::numeric::Real;
use crate::rope::RopeSpec;
use std::collections::{BTreeMap, BTreeSet};

/// Builds the summary of the streaming and cone analyses (multi-pass reports are attached afterwards by
/// [`attach_external`]).
pub fn build<T: Real>(
    model: &Model<T>,
    natural: &SetMeasures,
    random: Option<&SetMeasures>,
    cone: Option<&EmbeddingCone>,
    params: &ScanParams,
) -> Summary {
    let c = &model.config;
    let bands = FrequencyBands {
        low_max: params.low_band_max_frequency,
        high_min: params.high_band_min_frequency,
    };
    let random_slash = random.and_then(|r| r.slash.as_ref());
    let natural_scores = natural.slash.as_ref().map(SlashCapture::scores);
    let random_scores = random_slash.map(SlashCapture::scores);
    let width = params.delta_max + 1;
    let mut heads = Vec::with_capacity(c.n_layers * c.n_heads);
    for layer in 0..c.n_layers {
        for head in 0..c.n_heads {
            let cell = layer * c.n_heads + head;
            let profile = |s: &Vec<f64>| s[cell * width..(cell + 1) * width].to_vec();
            let slash = natural.slash.as_ref().map(|s| {
                head_slash(
                    &profile(natural_scores.as_ref().expect("scores exist with slash")),
                    (s.sinks()[cell], s.learned_sinks().map(|l| l[cell])),
                    random_slash.map(|r| {
                        (
                            profile(random_scores.as_ref().expect("random scores")),
                            r.sinks()[cell],
                        )
                    }),
                    params.kappa,
                )
            });
            let sums = natural.vectors.as_ref().and_then(|v| v.head(layer, head));
            let mut summary = HeadSummary {
                layer,
                head,
                kv_head: head / (c.n_heads / c.layers[layer].n_kv_heads),
                label: String::new(),
                rank: sums
                    .filter(|_| params.runs(Analysis::Rank))
                    .and_then(head_rank),
                fourier: sums
                    .filter(|_| params.runs(Analysis::Fourier))
                    .and_then(|s| {
                        head_fourier(
                            s,
                            &bands,
                            params.delta_max,
                            slash.as_ref().map(|x| x.best_delta),
                        )
                    }),
                frequency: sums
                    .filter(|_| params.runs(Analysis::Frequency))
                    .and_then(|s| head_frequency(s, &bands)),
                cone: cone.and_then(|k| head_cone(k, cell)),
                slash,
                posym: None,
                detectors: None,
                cauchy_schwarz: None,
                ablation: None,
            };
            relabel(&mut summary, params);
            heads.push(summary);
        }
    }
    let sets = natural_scores.as_ref().map(|n| SlashDominantSets {
        kappa: params.kappa,
        natural: dominant(n, c.n_heads, width, params.kappa),
        random: random_scores
            .as_ref()
            .map(|r| dominant(r, c.n_heads, width, params.kappa))
            .unwrap_or_default(),
    });
    let intrinsic = match (&natural_scores, &random_scores, &sets) {
        (Some(n), Some(r), Some(s)) => Some(intrinsic(n, r, s, width)),
        _ => None,
    };
    Summary {
        format_version: FORMAT_VERSION,
        heads,
        slash_dominant: sets,
        intrinsic,
        cone: cone.and_then(|k| {
            k.embeddings.map(|e| ConeJson {
                n_tokens: k.n_tokens,
                mean_angle: e.mean_angle,
                max_angle: e.max_angle,
            })
        }),
        warnings: Vec::new(),
        claims: Vec::new(),
    }
}

/// Sets the head's label from its scores.
fn relabel(h: &mut HeadSummary, params: &ScanParams) {
    let evidence = Evidence {
        best_slash: h.slash.as_ref().map(|s| (s.best_delta, s.best_score)),
        slash_neighbour: h.slash.as_ref().and_then(|s| s.neighbour_score),
        sink: h.slash.as_ref().map(|s| s.sink),
        ..Default::default()
    }
    .with_reports(h.detectors.as_ref(), h.posym.as_ref());
    h.label = label(&evidence, params.kappa, params.sink_threshold);
}

/// Index and value of the largest entry (the first on ties).
pub fn argmax(values: &[f64]) -> (usize, f64) {
    values
        .iter()
        .copied()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |best, (i, v)| {
            if v > best.1 {
                (i, v)
            } else {
                best
            }
        })
}

fn head_slash(
    natural: &[f64],
    (sink, learned_sink): (f64, Option<f64>),
    random: Option<(Vec<f64>, f64)>,
    kappa: f64,
) -> HeadSlash {
    let (best_delta, best_score) = argmax(natural);
    let neighbours = [best_delta.checked_sub(1), Some(best_delta + 1)];
    let neighbour_score = (neighbours.into_iter().flatten())
        .filter_map(|d| natural.get(d).copied())
        .reduce(f64::max);
    HeadSlash {
        best_delta,
        best_score,
        neighbour_score,
        random_score_at_best_delta: random.as_ref().map(|(r, _)| r[best_delta]),
        random_best_delta: random.as_ref().map(|(r, _)| argmax(r).0),
        sink,
        random_sink: random.as_ref().map(|(_, s)| *s),
        learned_sink,
        slash_dominant: best_score >= kappa,
        random_slash_dominant: random.as_ref().map(|(r, _)| r[best_delta] >= kappa),
    }
}

/// Rank statistics and cosines of one head's sums.
pub fn head_rank(s: &HeadSums) -> Option<HeadRank> {
    let (q, k) = (
        rank_stats(&s.q.singular_values()?)?,
        rank_stats(&s.k.singular_values()?)?,
    );
    let (qc, kc) = (
        s.q.cosine_to_mean_direction()?,
        s.k.cosine_to_mean_direction()?,
    );
    Some(HeadRank {
        q_rank_one_share: q.rank_one_share,
        q_effective_rank: q.effective_rank,
        k_rank_one_share: k.rank_one_share,
        k_effective_rank: k.effective_rank,
        q_cos_mean: qc.0,
        q_cos_std: qc.1,
        k_cos_mean: kc.0,
        k_cos_std: kc.1,
    })
}

/// The Fourier decomposition of the logit of a head's mean pre-RoPE query and key; `None` on a NoPE layer,
/// whose logit has no rotating term.
pub fn mean_spectrum(s: &HeadSums) -> Option<LogitSpectrum> {
    let rope = s.rope.as_ref().filter(|r| r.n_chunks() > 0)?;
    Some(logit_spectrum(rope, &s.q.mean(), &s.k.mean()))
}

/// The offset in `0..=delta_max` where the decomposed logit is largest.
pub fn predicted_delta(spectrum: &LogitSpectrum, delta_max: usize) -> usize {
    let logits: Vec<f64> = (0..=delta_max).map(|d| spectrum.logit(d as f64)).collect();
    argmax(&logits).0
}

fn head_fourier(
    s: &HeadSums,
    bands: &FrequencyBands,
    delta_max: usize,
    measured_delta: Option<usize>,
) -> Option<HeadFourier> {
    let spectrum = mean_spectrum(s)?;
    let shares = spectrum.band_shares(bands);
    Some(HeadFourier {
        amplitude_shares: bands_of(shares, spectrum_has_still_part(s)),
        predicted_delta: predicted_delta(&spectrum, delta_max),
        measured_delta,
    })
}

/// Whether the head's RoPE leaves some coordinates still.
fn spectrum_has_still_part(s: &HeadSums) -> bool {
    s.rope
        .as_ref()
        .is_some_and(|r| !r.unrotated_dims().is_empty())
}

/// The shares as `summary.json` writes them: the NoPE share only where there are coordinates that never rotate.
fn bands_of(s: BandShares, still: bool) -> Bands {
    Bands {
        low: s.low,
        medium: s.medium,
        high: s.high,
        nope: still.then_some(s.nope),
    }
}

/// Shares of `Σ values[l]` over chunks in each frequency band of `rope`, beside the part `unrotated` of the
/// coordinates that never rotate ([`BandShares::of`]).
pub fn band_shares(
    rope: &RopeSpec,
    values: &[f64],
    unrotated: f64,
    bands: &FrequencyBands,
) -> Bands {
    let s = BandShares::of(
        values
            .iter()
            .enumerate()
            .map(|(l, &v)| (rope.frequency(l), v)),
        unrotated,
        bands,
    );
    bands_of(s, !rope.unrotated_dims().is_empty())
}

/// Band shares of a head's chunk norms; `None` on a NoPE layer, which has no frequency to share among.
fn head_frequency(s: &HeadSums, bands: &FrequencyBands) -> Option<HeadFrequency> {
    let rope = s.rope.as_ref().filter(|r| r.n_chunks() > 0)?;
    let shares =
        |r: &RowSums| band_shares(rope, &r.mean_chunk_norms(), r.mean_unrotated_norm(), bands);
    Some(HeadFrequency {
        q: shares(&s.q),
        k: shares(&s.k),
    })
}

fn head_cone(k: &EmbeddingCone, cell: usize) -> Option<HeadCone> {
    let (q, kk) = (k.queries.get(cell).copied()??, k.keys.get(cell).copied()??);
    Some(HeadCone {
        q_mean_angle: q.mean_angle,
        q_max_angle: q.max_angle,
        k_mean_angle: kk.mean_angle,
        k_max_angle: kk.max_angle,
    })
}

/// Every `(layer, head, Δ)` with score `≥ kappa` in `[L, H, width]` scores.
fn dominant(scores: &[f64], n_heads: usize, width: usize, kappa: f64) -> Vec<SlashHead> {
    scores
        .iter()
        .enumerate()
        .filter(|(_, &s)| s >= kappa)
        .map(|(i, _)| SlashHead {
            layer: i / width / n_heads,
            head: i / width % n_heads,
            delta: i % width,
        })
        .collect()
}

fn jaccard<T: Ord>(a: &BTreeSet<T>, b: &BTreeSet<T>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        1.0
    } else {
        a.intersection(b).count() as f64 / union as f64
    }
}

fn intrinsic(natural: &[f64], random: &[f64], sets: &SlashDominantSets, width: usize) -> Intrinsic {
    let triples = |v: &[SlashHead]| v.iter().copied().collect::<BTreeSet<_>>();
    let heads = |v: &[SlashHead]| v.iter().map(|s| (s.layer, s.head)).collect::<BTreeSet<_>>();
    let best = |s: &[f64]| s.chunks(width).map(|c| argmax(c).1).collect::<Vec<f64>>();
    Intrinsic {
        jaccard: jaccard(&triples(&sets.natural), &triples(&sets.random)),
        jaccard_heads: jaccard(&heads(&sets.natural), &heads(&sets.random)),
        pearson_all: pearson(natural, random).unwrap_or(0.0),
        pearson_best: pearson(&best(natural), &best(random)).unwrap_or(0.0),
    }
}

/// The heads the labels call `diagonal` or `previous-token`, for the Cauchy–Schwarz tables.
pub fn tabulated_heads(summary: &Summary) -> Vec<TabulatedHead> {
    summary
        .heads
        .iter()
        .filter(|h| h.label == "diagonal" || h.label == "previous-token")
        .map(|h| TabulatedHead {
            layer: h.layer,
            head: h.head,
            kind: h.label.clone(),
        })
        .collect()
}

/// Copies each head's record of the multi-pass reports into its summary, labels it again, and warns of every
/// analysis that ran but gave no result.
pub fn attach_external<T: Real>(
    summary: &mut Summary,
    reports: &BTreeMap<String, serde_json::Value>,
    model: &Model<T>,
    params: &ScanParams,
) {
    let grid = (model.config.n_layers, model.config.n_heads);
    for h in &mut summary.heads {
        let record = |a: Analysis| {
            reports
                .get(a.name())
                .and_then(|r| head_record(a, r, grid, (h.layer, h.head)))
        };
        h.posym = record(Analysis::Posym);
        h.detectors = record(Analysis::Detectors);
        h.cauchy_schwarz = record(Analysis::CauchySchwarz);
        h.ablation = record(Analysis::Ablation);
        relabel(h, params);
    }
    summary.warnings = warnings(summary, reports, params);
}

/// What a reader must know before trusting the results: analyses that ran and gave nothing, and labels made
/// without any of the analyses they are decided from.
fn warnings(
    summary: &Summary,
    reports: &BTreeMap<String, serde_json::Value>,
    params: &ScanParams,
) -> Vec<String> {
    let mut out = Vec::new();
    if ![Analysis::Slash, Analysis::Detectors, Analysis::Posym]
        .iter()
        .any(|&a| params.runs(a))
    {
        out.push(
            "no analysis the labels are decided from ran (slash, detectors, posym): every head is labelled mixed"
                .to_string(),
        );
    }
    for name in reports.keys() {
        let Some(a) = Analysis::ALL.into_iter().find(|a| a.name() == name) else {
            continue;
        };
        let covered = summary.heads.iter().filter(|h| {
            let record = match a {
                Analysis::Posym => &h.posym,
                Analysis::Detectors => &h.detectors,
                Analysis::CauchySchwarz => &h.cauchy_schwarz,
                _ => &h.ablation,
            };
            record
                .as_ref()
                .is_some_and(|r| r.get(super::external::IN_HEAD_SET_FIELD) != Some(&false.into()))
        });
        if covered.count() == 0 {
            out.push(match a {
                Analysis::CauchySchwarz => format!(
                    "cauchy-schwarz ran but tabled no head: its head set is {CAUCHY_SCHWARZ_HEAD_SET}, and no head is"
                ),
                _ => format!("{name} ran but gave no per-head result"),
            });
        }
    }
    out
}
