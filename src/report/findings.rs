//! What a scan found, in the papers' terms, computed from `summary.json` and `ablation.json` only: slash-dominant
//! heads per Δ on both prompt sets and their overlap, the top heads of each kind, band dominance, the
//! positional–symbolic correlation, the ablation's loss changes, the Cauchy–Schwarz and detector summaries, and
//! on a model with NoPE layers the same measures on its RoPE and NoPE layers side by side.
//! The report opens with these; every number can be recomputed from the files.

use super::data::ScanData;
use crate::analysis::correlation::pearson;
use crate::scan::format::{Bands, HeadSummary, SlashHead};
use serde_json::Value;
use std::collections::BTreeSet;

/// Heads listed per kind in the top-heads table.
pub const TOP_HEADS: usize = 5;

/// Slash-dominant (layer, head, Δ) triples at one Δ.
#[derive(Clone, Debug, PartialEq)]
pub struct SdhCount {
    /// The offset.
    pub delta: usize,
    /// Triples on natural prompts.
    pub natural: usize,
    /// Triples on random prompts (`None` when they did not run).
    pub random: Option<usize>,
    /// Triples on both (`None` when the random prompts did not run).
    pub both: Option<usize>,
}

/// Whether the random prompts ran (analysis `intrinsic`).
pub fn random_ran(data: &ScanData) -> bool {
    data.summary.intrinsic.is_some()
}

/// Distinct heads of a set of `(layer, head, Δ)` triples.
pub fn distinct_heads(v: &[SlashHead]) -> BTreeSet<(usize, usize)> {
    v.iter().map(|s| (s.layer, s.head)).collect()
}

/// Counts per Δ (only offsets where either set has a head), natural against random prompts.
pub fn sdh_counts(data: &ScanData) -> Option<Vec<SdhCount>> {
    let sets = data.summary.slash_dominant.as_ref()?;
    let at = |v: &[SlashHead], d: usize| -> BTreeSet<(usize, usize)> {
        v.iter()
            .filter(|s| s.delta == d)
            .map(|s| (s.layer, s.head))
            .collect()
    };
    let deltas: BTreeSet<usize> = sets
        .natural
        .iter()
        .chain(&sets.random)
        .map(|s| s.delta)
        .collect();
    Some(
        deltas
            .into_iter()
            .map(|d| {
                let (n, r) = (at(&sets.natural, d), at(&sets.random, d));
                let ran = random_ran(data);
                SdhCount {
                    delta: d,
                    natural: n.len(),
                    random: ran.then_some(r.len()),
                    both: ran.then(|| n.intersection(&r).count()),
                }
            })
            .collect(),
    )
}

/// A kind of head and its heads sorted by the kind's score, best first.
#[derive(Clone, Debug, PartialEq)]
pub struct TopHeads {
    /// The label (or the label family `slash(Δ≥2)`).
    pub kind: String,
    /// What the score is.
    pub score: &'static str,
    /// `(layer, head, score)`, at most [`TOP_HEADS`].
    pub heads: Vec<(usize, usize, f64)>,
    /// Heads of this kind in all.
    pub count: usize,
}

/// A number in a multi-pass record.
fn field(record: &Option<Value>, name: &str) -> Option<f64> {
    record.as_ref()?.get(name)?.as_f64()
}

/// The score that names a head of `kind`.
fn kind_score(kind: &str, h: &HeadSummary) -> Option<f64> {
    match kind {
        "sink" => h.slash.as_ref().map(|s| s.sink),
        "induction" => field(&h.detectors, "induction"),
        "positional" => field(&h.posym, "s_pos"),
        "symbolic" => field(&h.posym, "s_sym"),
        _ => h.slash.as_ref().map(|s| s.best_score),
    }
}

/// The top heads of every label present, by the label's score.
pub fn top_heads(data: &ScanData) -> Vec<TopHeads> {
    let kinds = [
        ("previous-token", "slash score at Δ = 1"),
        ("diagonal", "slash score at Δ = 0"),
        ("slash(Δ≥2)", "best slash score"),
        ("sink", "attention on key 0"),
        ("induction", "induction score"),
        ("positional", "s_pos"),
        ("symbolic", "s_sym"),
    ];
    kinds
        .iter()
        .filter_map(|&(kind, score)| {
            let of_kind = |h: &&HeadSummary| match kind {
                "slash(Δ≥2)" => h.label.starts_with("slash("),
                k => h.label == k,
            };
            let mut heads: Vec<(usize, usize, f64)> = data
                .summary
                .heads
                .iter()
                .filter(of_kind)
                .filter_map(|h| Some((h.layer, h.head, kind_score(kind, h)?)))
                .collect();
            if heads.is_empty() {
                return None;
            }
            heads.sort_by(|a, b| b.2.total_cmp(&a.2));
            let count = heads.len();
            heads.truncate(TOP_HEADS);
            Some(TopHeads {
                kind: kind.to_string(),
                score,
                heads,
                count,
            })
        })
        .collect()
}

/// Mean band shares of a group of heads (each head weighted equally, a head without a NoPE share counting 0
/// there); `None` for no head. The mean has a NoPE share when some head has one.
pub(crate) fn mean_bands<'a>(shares: impl Iterator<Item = &'a Bands>) -> Option<Bands> {
    let (mut sum, mut n, mut still) = ([0.0; 4], 0usize, false);
    for b in shares {
        sum[0] += b.low;
        sum[1] += b.medium;
        sum[2] += b.high;
        sum[3] += b.nope.unwrap_or(0.0);
        still |= b.nope.is_some();
        n += 1;
    }
    (n > 0).then(|| Bands {
        low: sum[0] / n as f64,
        medium: sum[1] / n as f64,
        high: sum[2] / n as f64,
        nope: still.then_some(sum[3] / n as f64),
    })
}

/// Band dominance: mean shares of `Σ A_l` (Fourier) and of query chunk norm (frequency), slash-dominant heads
/// against the others.
#[derive(Clone, Debug, PartialEq)]
pub struct BandDominance {
    /// `Σ A_l` shares of SDHs and of the other heads.
    pub amplitude: (Option<Bands>, Option<Bands>),
    /// Query chunk-norm shares of SDHs and of the other heads.
    pub query_norm: (Option<Bands>, Option<Bands>),
}

/// Band dominance of the scan, `None` without slash scores.
pub fn band_dominance(data: &ScanData) -> Option<BandDominance> {
    let heads = &data.summary.heads;
    let sdh =
        |h: &&HeadSummary, want: bool| h.slash.as_ref().is_some_and(|s| s.slash_dominant == want);
    let group = |want: bool, f: fn(&HeadSummary) -> Option<&Bands>| {
        mean_bands(heads.iter().filter(|h| sdh(h, want)).filter_map(f))
    };
    fn amp(h: &HeadSummary) -> Option<&Bands> {
        h.fourier.as_ref().map(|f| &f.amplitude_shares)
    }
    fn qn(h: &HeadSummary) -> Option<&Bands> {
        h.frequency.as_ref().map(|f| &f.q)
    }
    heads
        .iter()
        .any(|h| h.slash.is_some())
        .then(|| BandDominance {
            amplitude: (group(true, amp), group(false, amp)),
            query_norm: (group(true, qn), group(false, qn)),
        })
}

/// Pearson correlation over heads of `s_pos` and `s_sym`, with the number of heads; `None` without posym.
pub fn posym_correlation(data: &ScanData) -> Option<(f64, usize)> {
    let (p, s): (Vec<f64>, Vec<f64>) = data
        .summary
        .heads
        .iter()
        .filter_map(|h| Some((field(&h.posym, "s_pos")?, field(&h.posym, "s_sym")?)))
        .unzip();
    (!p.is_empty()).then(|| (pearson(&p, &s).unwrap_or(0.0), p.len()))
}

/// The ablation's variants (`variant` object) and their loss changes, in the report's order.
pub fn ablation_losses(data: &ScanData) -> Option<Vec<(Value, f64)>> {
    data.ablation
        .as_ref()?
        .get("variants")?
        .as_array()?
        .iter()
        .map(|v| Some((v.get("variant")?.clone(), v.get("loss_change")?.as_f64()?)))
        .collect()
}

/// Cauchy–Schwarz summary of one kind of tabled head.
#[derive(Clone, Debug, PartialEq)]
pub struct AlignmentSummary {
    /// `diagonal` or `previous_token`.
    pub kind: String,
    /// Heads tabled.
    pub heads: usize,
    /// Mean over those heads of the mean cosine of their target pairs after RoPE.
    pub target_cos: f64,
    /// Mean over those heads of the mean cosine of the pairs `j ≤ i − 2`.
    pub other_cos: f64,
}

/// The Cauchy–Schwarz summary per kind, from the heads' records; `None` when the analysis did not run.
pub fn alignment(data: &ScanData) -> Option<Vec<AlignmentSummary>> {
    let records: Vec<&Value> = data
        .summary
        .heads
        .iter()
        .filter_map(|h| h.cauchy_schwarz.as_ref())
        .collect();
    if records.is_empty() {
        return None;
    }
    let kinds = [("diagonal", "diagonal"), ("previous_token", "previous")];
    Some(
        kinds
            .iter()
            .filter_map(|&(kind, pairs)| {
                let of_kind: Vec<&&Value> = records
                    .iter()
                    .filter(|r| r["in_head_set"] == true && r["kind"] == kind)
                    .collect();
                let mean = |f: &dyn Fn(&Value) -> Option<f64>| {
                    of_kind.iter().filter_map(|r| f(r)).sum::<f64>() / of_kind.len() as f64
                };
                (!of_kind.is_empty()).then(|| AlignmentSummary {
                    kind: kind.to_string(),
                    heads: of_kind.len(),
                    target_cos: mean(&|r| r[pairs]["mean_ratio"].as_f64()),
                    other_cos: mean(&|r| r["baseline"]["mean_ratio"].as_f64()),
                })
            })
            .collect(),
    )
}

/// The detector fields summarised, with their names on the page.
pub const DETECTOR_FIELDS: [(&str, &str); 5] = [
    ("previous_token", "previous-token"),
    ("induction", "induction"),
    ("duplicate_token", "duplicate-token"),
    ("diagonal", "diagonal"),
    ("sink", "sink"),
];

/// Heads with a score, `(layer, head, score)`, strongest first.
pub type RankedHeads = Vec<(usize, usize, f64)>;

/// The strongest heads of each detector pattern, `(field, [(layer, head, score)])`; `None` without detectors.
pub fn detector_tops(data: &ScanData) -> Option<Vec<(&'static str, RankedHeads)>> {
    let heads = &data.summary.heads;
    if heads.iter().all(|h| h.detectors.is_none()) {
        return None;
    }
    Some(
        DETECTOR_FIELDS
            .iter()
            .filter_map(|&(f, _)| {
                let mut v: RankedHeads = heads
                    .iter()
                    .filter_map(|h| Some((h.layer, h.head, field(&h.detectors, f)?)))
                    .collect();
                v.sort_by(|a, b| b.2.total_cmp(&a.2));
                v.truncate(3);
                (!v.is_empty()).then_some((f, v))
            })
            .collect(),
    )
}

/// How much of its heads a layer rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// Every coordinate.
    Full,
    /// Some coordinates never rotate: a partial rotation's tail, or p-RoPE's chunks of frequency 0.
    Partial,
    /// None (a NoPE layer).
    None,
}

impl Rotation {
    /// The group's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Rotation::Full => "RoPE",
            Rotation::Partial => "partial RoPE",
            Rotation::None => "NoPE",
        }
    }

    /// The group's `data-group` key in the report.
    pub fn key(self) -> &'static str {
        match self {
            Rotation::Full => "rope",
            Rotation::Partial => "partial",
            Rotation::None => "nope",
        }
    }
}

/// How many of layer `l`'s chunks the model leaves still (frequency 0: p-RoPE, Gemma 4's proportional RoPE); 0
/// on a NoPE layer, which has no chunk, and without `chunk_frequency.npy`.
pub fn still_chunks(data: &ScanData, l: usize) -> usize {
    let chunks = data.meta.model.chunks_of(l);
    (data.chunk_frequency.as_ref())
        .and_then(|t| t.at(&[l]))
        .map_or(0, |f| f.iter().take(chunks).filter(|&&g| g == 0.0).count())
}

/// How much of its heads layer `l` rotates.
pub fn rotation(data: &ScanData, l: usize) -> Rotation {
    let model = &data.meta.model;
    if model.is_nope(l) {
        Rotation::None
    } else if still_chunks(data, l) > 0 || 2 * model.chunks_of(l) < model.head_dim_of(l) {
        Rotation::Partial
    } else {
        Rotation::Full
    }
}

/// The papers' measures over the heads of one group of layers of a model whose layers rotate differently: its
/// RoPE layers, its partially rotating layers (p-RoPE) and its NoPE layers (the control: no rotation, so no RoPE
/// mechanism).
#[derive(Clone, Debug, PartialEq)]
pub struct PositionGroup {
    /// How much the group's layers rotate.
    pub rotation: Rotation,
    /// The group's layers.
    pub layers: Vec<usize>,
    /// Its heads.
    pub heads: usize,
    /// Distinct heads slash-dominant at some Δ on natural prompts (`None` without `slash`).
    pub sdh_natural: Option<usize>,
    /// The same on random prompts (`None` without `intrinsic`).
    pub sdh_random: Option<usize>,
    /// Mean over the heads of the best slash score on natural prompts.
    pub mean_best_slash: Option<f64>,
    /// Mean attention on key 0, natural prompts.
    pub mean_sink: Option<f64>,
    /// Mean `s_pos` and `s_sym` (`posym`).
    pub mean_posym: Option<(f64, f64)>,
    /// Mean rank-one share `σ1²/Σσ²` of the pre-RoPE queries and of the keys (`rank`).
    pub mean_rank_one: Option<(f64, f64)>,
    /// Heads per label, in label order.
    pub labels: Vec<(String, usize)>,
}

/// The mean of the values, `None` for none.
fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// One group per kind of rotation the model's layers have, in the order RoPE, partial, NoPE; `None` when every
/// layer rotates alike.
pub fn position_groups(data: &ScanData) -> Option<Vec<PositionGroup>> {
    let model = &data.meta.model;
    let kinds: Vec<Rotation> = [Rotation::Full, Rotation::Partial, Rotation::None]
        .into_iter()
        .filter(|&r| (0..model.n_layers).any(|l| rotation(data, l) == r))
        .collect();
    if kinds.len() < 2 {
        return None;
    }
    let group = |kind: Rotation| {
        let layers: Vec<usize> = (0..model.n_layers)
            .filter(|&l| rotation(data, l) == kind)
            .collect();
        let heads: Vec<&HeadSummary> = data
            .summary
            .heads
            .iter()
            .filter(|h| layers.contains(&h.layer))
            .collect();
        let distinct = |v: &[SlashHead]| {
            v.iter()
                .filter(|s| layers.contains(&s.layer))
                .map(|s| (s.layer, s.head))
                .collect::<BTreeSet<_>>()
                .len()
        };
        let sets = data.summary.slash_dominant.as_ref();
        let random_ran = heads.iter().any(|h| {
            h.slash
                .as_ref()
                .is_some_and(|s| s.random_slash_dominant.is_some())
        });
        let mut labels: Vec<(String, usize)> = Vec::new();
        for h in &heads {
            match labels.iter_mut().find(|(l, _)| *l == h.label) {
                Some((_, n)) => *n += 1,
                None => labels.push((h.label.clone(), 1)),
            }
        }
        let slash = || heads.iter().filter_map(|h| h.slash.as_ref());
        let pos = mean(heads.iter().filter_map(|h| field(&h.posym, "s_pos")));
        let sym = mean(heads.iter().filter_map(|h| field(&h.posym, "s_sym")));
        let rank = || heads.iter().filter_map(|h| h.rank.as_ref());
        PositionGroup {
            rotation: kind,
            mean_rank_one: mean(rank().map(|r| r.q_rank_one_share))
                .zip(mean(rank().map(|r| r.k_rank_one_share))),
            heads: heads.len(),
            sdh_natural: sets.map(|s| distinct(&s.natural)),
            sdh_random: sets.filter(|_| random_ran).map(|s| distinct(&s.random)),
            mean_best_slash: mean(slash().map(|s| s.best_score)),
            mean_sink: mean(slash().map(|s| s.sink)),
            mean_posym: pos.zip(sym),
            labels,
            layers,
        }
    };
    Some(kinds.into_iter().map(group).collect())
}
