//! The papers' empirical claims that a scan measures, each with its statistic, an uncertainty and a verdict
//! (`summary.json`'s `claims`; the report's first table).
//!
//! A claim's statistic is a mean (or a difference of means, or a correlation) over heads; its uncertainty is a
//! percentile bootstrap over those heads ([`BOOTSTRAP_RESAMPLES`] resamples, [`CONFIDENCE`] level, seeded by
//! the scan's seed). The verdict compares the interval with the claim's threshold: `supported` when the whole
//! interval lies on the claim's side, `contradicted` when it lies on the other, `mixed` when it straddles the
//! threshold or when a second measure of the same claim disagrees, and `not measurable` when the analyses it
//! needs did not run or the model has no head to measure it on. The thresholds are ours where the papers give
//! none (`docs/claims.md` states each and why).

use super::format::{Claim, HeadSummary, Interval, Statistic, Summary, Verdict};
use super::params::ScanParams;
use crate::analysis::correlation::pearson;
use crate::analysis::fourier::{Band, FrequencyBands};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Bootstrap resamples behind every interval.
pub const BOOTSTRAP_RESAMPLES: usize = 1000;
/// Level of every interval.
pub const CONFIDENCE: f64 = 0.95;
/// Share of the natural prompts' slash-dominant heads that must stay slash-dominant on random prompts for the
/// heads to be intrinsic (the slash paper reports stability, not a number).
pub const INTRINSIC_SHARE: f64 = 0.5;
/// Mean rank-one share `σ1²/Σσ²` of slash-dominant heads' pre-RoPE queries and keys above which they are "almost
/// rank one": the first direction carries most of the energy.
pub const RANK_ONE_SHARE: f64 = 0.5;
/// Share of the Fourier amplitude of slash-dominant heads' turning chunks in the medium and high bands above
/// which those bands dominate.
pub const MEDIUM_HIGH_SHARE: f64 = 0.5;
/// The largest angle (degrees) of a token embedding to the embeddings' mean direction that keeps them in a cone.
pub const CONE_DEGREES: f64 = 90.0;

/// Everything the claims are measured from.
pub struct ClaimInputs<'a> {
    /// The scan's summary, labels and multi-pass records attached.
    pub summary: &'a Summary,
    /// Its parameters.
    pub params: &'a ScanParams,
    /// Each layer's chunk frequencies (radians per token; 0 for a chunk that does not turn).
    pub frequencies: &'a [Vec<f64>],
}

/// Every claim, in the report's order.
pub fn evaluate(inputs: &ClaimInputs<'_>) -> Vec<Claim> {
    let mut rng = ChaCha8Rng::seed_from_u64(inputs.params.seed);
    let mut b = Bootstrap { rng: &mut rng };
    vec![
        sdh_exist(inputs, &mut b),
        sdh_intrinsic(inputs, &mut b),
        sdh_rank_one(inputs, &mut b),
        sdh_medium_high(inputs, &mut b),
        embedding_cone(inputs),
        low_frequency_use(inputs, &mut b),
        positional_high_frequencies(inputs, &mut b),
        cauchy_schwarz(inputs, &mut b),
        p_rope(inputs),
        posym_exclusion(inputs, &mut b),
        posym_frequencies(inputs, &mut b),
    ]
}

/// Percentile bootstrap intervals over heads.
struct Bootstrap<'r> {
    rng: &'r mut ChaCha8Rng,
}

impl Bootstrap<'_> {
    /// The interval of `stat` over resamples (with replacement) of `n` units, `stat` given their indices.
    fn interval(&mut self, n: usize, stat: &mut dyn FnMut(&[usize]) -> Option<f64>) -> Interval {
        let values: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
            .filter_map(|_| {
                let idx: Vec<usize> = (0..n).map(|_| self.rng.random_range(0..n)).collect();
                stat(&idx)
            })
            .collect();
        percentiles(values)
    }

    /// A mean over `values` and its interval.
    fn mean(&mut self, values: &[f64]) -> (f64, Interval) {
        let interval = self.interval(values.len(), &mut |idx| {
            Some(idx.iter().map(|&i| values[i]).sum::<f64>() / idx.len() as f64)
        });
        (mean(values), interval)
    }

    /// `mean(a) − mean(b)` and its interval, each group resampled on its own.
    fn difference(&mut self, a: &[f64], b: &[f64]) -> (f64, Interval) {
        let values = (0..BOOTSTRAP_RESAMPLES)
            .map(|_| self.resampled_mean(a) - self.resampled_mean(b))
            .collect();
        (mean(a) - mean(b), percentiles(values))
    }

    fn resampled_mean(&mut self, v: &[f64]) -> f64 {
        (0..v.len())
            .map(|_| v[self.rng.random_range(0..v.len())])
            .sum::<f64>()
            / v.len() as f64
    }
}

/// The central [`CONFIDENCE`] interval of bootstrap `values` (at least one).
fn percentiles(mut values: Vec<f64>) -> Interval {
    values.sort_by(f64::total_cmp);
    let last = values.len().saturating_sub(1);
    let at = |q: f64| {
        values
            .get((q * last as f64).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let tail = (1.0 - CONFIDENCE) / 2.0;
    Interval {
        method: format!(
            "bootstrap over heads, {BOOTSTRAP_RESAMPLES} resamples, {:.0}%",
            CONFIDENCE * 100.0
        ),
        low: at(tail),
        high: at(1.0 - tail),
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Whether the claim holds above `threshold`, from its interval.
fn above(i: &Interval, threshold: f64) -> Verdict {
    if i.low > threshold {
        Verdict::Supported
    } else if i.high < threshold {
        Verdict::Contradicted
    } else {
        Verdict::Mixed
    }
}

/// Whether the claim holds below `threshold`, from its interval.
fn below(i: &Interval, threshold: f64) -> Verdict {
    match above(i, threshold) {
        Verdict::Supported => Verdict::Contradicted,
        Verdict::Contradicted => Verdict::Supported,
        v => v,
    }
}

/// A claim's fixed text.
struct Text {
    id: &'static str,
    paper: &'static str,
    claim: &'static str,
}

impl Text {
    fn not_measurable(&self, rule: String, why: &str) -> Claim {
        Claim {
            id: self.id.into(),
            paper: self.paper.into(),
            claim: self.claim.into(),
            statistic: None,
            uncertainty: None,
            verdict: Verdict::NotMeasurable,
            rule,
            note: why.into(),
        }
    }

    /// The claim measured as the mean of `values` over heads, its verdict from the mean's interval against
    /// `threshold` (the claim's side above it).
    fn mean_above(
        &self,
        b: &mut Bootstrap<'_>,
        (name, values): (&str, &[f64]),
        threshold: f64,
        rule: String,
    ) -> Claim {
        let (value, interval) = b.mean(values);
        let verdict = above(&interval, threshold);
        self.measured(
            (name, value, values.len()),
            Some(interval),
            (verdict, rule, String::new()),
        )
    }

    fn measured(
        &self,
        (name, value, n): (&str, f64, usize),
        uncertainty: Option<Interval>,
        (verdict, rule, note): (Verdict, String, String),
    ) -> Claim {
        if !value.is_finite() {
            return self.not_measurable(rule, "the statistic is not a finite number on this model");
        }
        Claim {
            id: self.id.into(),
            paper: self.paper.into(),
            claim: self.claim.into(),
            statistic: Some(Statistic {
                name: name.into(),
                value,
                n,
            }),
            // An interval no resample could give (every one degenerate) is none: never a NaN in the file.
            uncertainty: uncertainty.filter(|i| i.low.is_finite() && i.high.is_finite()),
            verdict,
            rule,
            note,
        }
    }
}

fn heads<'a>(inputs: &ClaimInputs<'a>) -> &'a [HeadSummary] {
    &inputs.summary.heads
}

/// The distinct heads slash-dominant on natural prompts (best slash score ≥ κ), `None` without `slash`.
fn sdhs<'a>(inputs: &'a ClaimInputs<'_>) -> Option<Vec<&'a HeadSummary>> {
    let ran = heads(inputs).iter().any(|h| h.slash.is_some());
    ran.then(|| {
        heads(inputs)
            .iter()
            .filter(|h| h.slash.as_ref().is_some_and(|s| s.slash_dominant))
            .collect()
    })
}

const SDH_EXIST: Text = Text {
    id: "slash-sdh-exist",
    paper: "slash",
    claim: "LLMs have slash-dominant heads: attention concentrates on one sub-diagonal Δ",
};

fn sdh_exist(inputs: &ClaimInputs<'_>, b: &mut Bootstrap<'_>) -> Claim {
    let kappa = inputs.params.kappa;
    let rule = format!(
        "supported when some head's best mean SlashScore(Δ) over Δ = 0..{} is ≥ κ = {kappa}, contradicted when none",
        inputs.params.delta_max
    );
    let Some(sdh) = sdhs(inputs) else {
        return SDH_EXIST.not_measurable(rule, "the slash analysis did not run");
    };
    let indicator: Vec<f64> = (heads(inputs).iter())
        .filter(|h| h.slash.is_some())
        .map(|h| f64::from(u8::from(h.slash.as_ref().is_some_and(|s| s.slash_dominant))))
        .collect();
    let (share, interval) = b.mean(&indicator);
    let verdict = match sdh.is_empty() {
        true => Verdict::Contradicted,
        false => Verdict::Supported,
    };
    SDH_EXIST.measured(
        (
            "share of heads slash-dominant (natural prompts)",
            share,
            indicator.len(),
        ),
        Some(interval),
        (verdict, rule, format!("{} distinct heads", sdh.len())),
    )
}

const SDH_INTRINSIC: Text = Text {
    id: "slash-intrinsic",
    paper: "slash",
    claim: "slash-dominant heads are intrinsic: they stay slash-dominant on out-of-distribution (random) prompts",
};

fn sdh_intrinsic(inputs: &ClaimInputs<'_>, b: &mut Bootstrap<'_>) -> Claim {
    let rule = format!(
        "share of the natural prompts' slash-dominant heads still ≥ κ at the same Δ on random prompts: supported \
         when its interval lies above {INTRINSIC_SHARE}, contradicted when below"
    );
    let Some(sdh) = sdhs(inputs) else {
        return SDH_INTRINSIC.not_measurable(rule, "the slash analysis did not run");
    };
    let stays: Vec<f64> = (sdh.iter())
        .filter_map(|h| h.slash.as_ref()?.random_slash_dominant)
        .map(|s| f64::from(u8::from(s)))
        .collect();
    if sdh.is_empty() {
        return SDH_INTRINSIC.not_measurable(rule, "no head is slash-dominant");
    }
    if stays.is_empty() {
        return SDH_INTRINSIC
            .not_measurable(rule, "the random prompts did not run (analysis intrinsic)");
    }
    SDH_INTRINSIC.mean_above(
        b,
        ("share still slash-dominant on random prompts", &stays),
        INTRINSIC_SHARE,
        rule,
    )
}

const SDH_RANK_ONE: Text = Text {
    id: "slash-rank-one",
    paper: "slash",
    claim: "the pre-RoPE queries and keys of slash-dominant heads are almost rank one",
};

fn sdh_rank_one(inputs: &ClaimInputs<'_>, b: &mut Bootstrap<'_>) -> Claim {
    let rule = format!(
        "mean over slash-dominant heads of (σ1²/Σσ² of q + that of k) / 2: supported when its interval lies above \
         {RANK_ONE_SHARE}, contradicted when below"
    );
    let Some(sdh) = sdhs(inputs) else {
        return SDH_RANK_ONE.not_measurable(rule, "the slash analysis did not run");
    };
    let shares: Vec<f64> = (sdh.iter())
        .filter_map(|h| h.rank.as_ref())
        .map(|r| (r.q_rank_one_share + r.k_rank_one_share) / 2.0)
        .collect();
    if sdh.is_empty() {
        return SDH_RANK_ONE.not_measurable(rule, "no head is slash-dominant");
    }
    if shares.is_empty() {
        return SDH_RANK_ONE.not_measurable(rule, "the rank analysis did not run");
    }
    SDH_RANK_ONE.mean_above(
        b,
        ("mean rank-one share of q and k", &shares),
        RANK_ONE_SHARE,
        rule,
    )
}

const SDH_MEDIUM_HIGH: Text = Text {
    id: "slash-medium-high-frequencies",
    paper: "slash",
    claim: "RoPE's medium and high frequencies dominate slash-dominant heads",
};

/// The slash a band's masking removes from a head: minus the change of the baseline's peak score.
fn removed_by(h: &HeadSummary, band: Band) -> Option<f64> {
    let wanted = serde_json::to_value(band).ok()?;
    let variants = h.ablation.as_ref()?.get("variants")?.as_array()?;
    variants
        .iter()
        .find(|v| v["variant"]["kind"] == "band_masked" && v["variant"]["band"] == wanted)
        .and_then(|v| v["baseline_peak_change"].as_f64())
        .map(|change| -change)
}

fn sdh_medium_high(inputs: &ClaimInputs<'_>, b: &mut Bootstrap<'_>) -> Claim {
    let rule = format!(
        "mean over slash-dominant heads of the medium and high bands' share of the Fourier amplitude of the \
         chunks that turn: supported when its interval lies above {MEDIUM_HIGH_SHARE}, contradicted when below; \
         the band ablation, where it ran, must agree"
    );
    let Some(sdh) = sdhs(inputs) else {
        return SDH_MEDIUM_HIGH.not_measurable(rule, "the slash analysis did not run");
    };
    if sdh.is_empty() {
        return SDH_MEDIUM_HIGH.not_measurable(rule, "no head is slash-dominant");
    }
    let shares: Vec<f64> = (sdh.iter())
        .filter_map(|h| {
            let a = &h.fourier.as_ref()?.amplitude_shares;
            let turning = a.low + a.medium + a.high;
            (turning > 0.0).then(|| (a.medium + a.high) / turning)
        })
        .collect();
    // The causal measure: slash removed by masking the medium or high band, minus that removed by the low band.
    let causal: Vec<f64> = (sdh.iter())
        .filter_map(|h| {
            let fast = removed_by(h, Band::High)?.max(removed_by(h, Band::Medium)?);
            Some(fast - removed_by(h, Band::Low)?)
        })
        .collect();
    let ablation = (!causal.is_empty()).then(|| {
        let (value, interval) = b.mean(&causal);
        let verdict = above(&interval, 0.0);
        (value, interval, verdict)
    });
    let ablation_text = |(value, i, v): &(f64, Interval, Verdict)| {
        format!(
            "band ablation: masking the medium or high band removes {value:+.3} more of the peak slash score \
             than masking the low band (interval {:.3} to {:.3}, over {} heads): {}",
            i.low,
            i.high,
            causal.len(),
            v.name()
        )
    };
    if shares.is_empty() {
        return match ablation {
            Some((value, interval, verdict)) => SDH_MEDIUM_HIGH.measured(
                (
                    "slash removed by medium/high masking minus low masking",
                    value,
                    causal.len(),
                ),
                Some(interval.clone()),
                (
                    verdict,
                    rule,
                    format!(
                        "the fourier analysis did not run; {}",
                        ablation_text(&(value, interval, verdict))
                    ),
                ),
            ),
            None => SDH_MEDIUM_HIGH
                .not_measurable(rule, "neither the fourier analysis nor the ablation ran"),
        };
    }
    let (value, interval) = b.mean(&shares);
    let amplitude = above(&interval, MEDIUM_HIGH_SHARE);
    let (verdict, note) = match &ablation {
        None => (amplitude, "the band ablation did not run".to_string()),
        Some(a) if a.2 == amplitude => (amplitude, ablation_text(a)),
        Some(a) => (
            Verdict::Mixed,
            format!(
                "the two measures disagree: the amplitude share says {}, the {}",
                amplitude.name(),
                ablation_text(a)
            ),
        ),
    };
    SDH_MEDIUM_HIGH.measured(
        (
            "mean medium+high share of the logit's Fourier amplitude",
            value,
            shares.len(),
        ),
        Some(interval),
        (verdict, rule, note),
    )
}

const CONE: Text = Text {
    id: "slash-embedding-cone",
    paper: "slash",
    claim: "token embeddings lie approximately in a cone",
};

fn embedding_cone(inputs: &ClaimInputs<'_>) -> Claim {
    let rule = format!(
        "supported when every sampled embedding lies within {CONE_DEGREES}° of their mean direction, \
         contradicted when the mean angle is {CONE_DEGREES}° or more, mixed between"
    );
    let Some(c) = &inputs.summary.cone else {
        return CONE.not_measurable(rule, "the cone analysis did not run");
    };
    let (mean_deg, max_deg) = (c.mean_angle.to_degrees(), c.max_angle.to_degrees());
    let verdict = if max_deg < CONE_DEGREES {
        Verdict::Supported
    } else if mean_deg >= CONE_DEGREES {
        Verdict::Contradicted
    } else {
        Verdict::Mixed
    };
    CONE.measured(
        ("largest angle to the mean direction (degrees)", max_deg, c.n_tokens),
        None,
        (
            verdict,
            rule,
            format!(
                "mean angle {mean_deg:.1}° over {} sampled embeddings; a single measurement, not resampled",
                c.n_tokens
            ),
        ),
    )
}

fn bands_of(inputs: &ClaimInputs<'_>) -> FrequencyBands {
    FrequencyBands {
        low_max: inputs.params.low_band_max_frequency,
        high_min: inputs.params.high_band_min_frequency,
    }
}

const LOW_USE: Text = Text {
    id: "rr-low-frequencies-used-most",
    paper: "round-and-round",
    claim: "queries and keys put more of their norm in the lowest frequencies than an even spread would",
};

fn low_frequency_use(inputs: &ClaimInputs<'_>, b: &mut Bootstrap<'_>) -> Claim {
    let rule = "mean over heads of (the low band's share of the query chunk norms − the low band's share of the \
                layer's turning chunks): supported when its interval lies above 0, contradicted when below"
        .to_string();
    let bands = bands_of(inputs);
    let excess: Vec<f64> = (heads(inputs).iter())
        .filter_map(|h| {
            let f = h.frequency.as_ref()?;
            let turning: Vec<f64> = (inputs.frequencies.get(h.layer)?.iter())
                .copied()
                .filter(|&g| g != 0.0)
                .collect();
            let low = turning
                .iter()
                .filter(|&&g| bands.band(g) == Band::Low)
                .count();
            let still = f.q.nope.unwrap_or(0.0);
            // The share among the turning chunks, as the even spread is.
            (!turning.is_empty() && still < 1.0)
                .then(|| f.q.low / (1.0 - still) - low as f64 / turning.len() as f64)
        })
        .collect();
    if excess.is_empty() {
        return LOW_USE.not_measurable(rule, "the frequency analysis did not run");
    }
    LOW_USE.mean_above(
        b,
        ("mean excess of the low band's query-norm share", &excess),
        0.0,
        rule,
    )
}

const POSITIONAL_HIGH: Text = Text {
    id: "rr-high-frequencies-positional-heads",
    paper: "round-and-round",
    claim: "positional heads (diagonal, previous-token) are built from the highest frequencies",
};

/// The high band's share of a head's query chunk norms among its turning chunks.
fn high_share(h: &HeadSummary) -> Option<f64> {
    let q = &h.frequency.as_ref()?.q;
    let turning = q.low + q.medium + q.high;
    (turning > 0.0).then(|| q.high / turning)
}

fn positional_high_frequencies(inputs: &ClaimInputs<'_>, b: &mut Bootstrap<'_>) -> Claim {
    let rule = "mean high-band share of the query chunk norms of heads labelled diagonal or previous-token minus \
                that of the other heads: supported when its interval lies above 0, contradicted when below"
        .to_string();
    let positional = |h: &HeadSummary| matches!(h.label.as_str(), "diagonal" | "previous-token");
    let group = |want: bool| -> Vec<f64> {
        (heads(inputs).iter())
            .filter(|h| positional(h) == want)
            .filter_map(high_share)
            .collect()
    };
    let (a, o) = (group(true), group(false));
    if a.is_empty() && o.is_empty() {
        return POSITIONAL_HIGH.not_measurable(rule, "the frequency analysis did not run");
    }
    if a.is_empty() || o.is_empty() {
        return POSITIONAL_HIGH.not_measurable(
            rule,
            "no head (or every head) is labelled diagonal or previous-token",
        );
    }
    let (value, interval) = b.difference(&a, &o);
    let verdict = above(&interval, 0.0);
    POSITIONAL_HIGH.measured(
        (
            "high-band share, positional heads minus the others",
            value,
            a.len() + o.len(),
        ),
        Some(interval),
        (
            verdict,
            rule,
            format!("{} positional heads against {} others", a.len(), o.len()),
        ),
    )
}

const CAUCHY_SCHWARZ: Text = Text {
    id: "rr-cauchy-schwarz-alignment",
    paper: "round-and-round",
    claim: "diagonal and previous-token heads reach their pattern by pushing the target key's activation toward \
            its Cauchy–Schwarz bound",
};

fn cauchy_schwarz(inputs: &ClaimInputs<'_>, b: &mut Bootstrap<'_>) -> Claim {
    let rule = "mean over the tabled heads of (activation / bound at the target key − the same over all keys): \
                supported when its interval lies above 0, contradicted when below"
        .to_string();
    let ran = heads(inputs).iter().any(|h| h.cauchy_schwarz.is_some());
    if !ran {
        return CAUCHY_SCHWARZ.not_measurable(rule, "the cauchy-schwarz analysis did not run");
    }
    let gains: Vec<f64> = (heads(inputs).iter())
        .filter_map(|h| {
            let r = h.cauchy_schwarz.as_ref()?;
            let target = match r.get("kind")?.as_str()? {
                "diagonal" => "diagonal",
                _ => "previous",
            };
            Some(r[target]["mean_ratio"].as_f64()? - r["baseline"]["mean_ratio"].as_f64()?)
        })
        .collect();
    if gains.is_empty() {
        return CAUCHY_SCHWARZ
            .not_measurable(rule, "no head is labelled diagonal or previous-token");
    }
    CAUCHY_SCHWARZ.mean_above(
        b,
        ("mean gain of the target's activation/bound ratio", &gains),
        0.0,
        rule,
    )
}

const P_ROPE: Text = Text {
    id: "rr-p-rope",
    paper: "round-and-round",
    claim: "the lowest frequencies can be removed at less cost than the highest (p-RoPE keeps the fastest chunks)",
};

/// The model-wide loss change of the ablation variant `kind` at `p` (from any head's record).
fn loss_change(inputs: &ClaimInputs<'_>, kind: &str, p: f64) -> Option<f64> {
    let record = heads(inputs).iter().find_map(|h| h.ablation.as_ref())?;
    record
        .get("variants")?
        .as_array()?
        .iter()
        .find(|v| v["variant"]["kind"] == kind && v["variant"]["p"].as_f64() == Some(p))
        .and_then(|v| v["loss_change"].as_f64())
}

fn p_rope(inputs: &ClaimInputs<'_>) -> Claim {
    let rule = "next-token loss change of reversed p-RoPE (p = 0.75: the fastest quarter still) minus that of \
                p-RoPE (p = 0.75: the slowest quarter still): supported when above 0, contradicted when below"
        .to_string();
    let ran = heads(inputs).iter().any(|h| h.ablation.is_some());
    if !ran {
        return P_ROPE.not_measurable(rule, "the ablation did not run");
    }
    let (Some(fast_removed), Some(slow_removed)) = (
        loss_change(inputs, "reversed", 0.75),
        loss_change(inputs, "p_rope", 0.75),
    ) else {
        return P_ROPE.not_measurable(
            rule,
            "the ablation ran without p = 0.75 and reversed p = 0.75",
        );
    };
    let value = fast_removed - slow_removed;
    let verdict = if value > 0.0 {
        Verdict::Supported
    } else if value < 0.0 {
        Verdict::Contradicted
    } else {
        Verdict::Mixed
    };
    P_ROPE.measured(
        ("loss change without the fastest quarter minus without the slowest (nats)", value, 1),
        None,
        (
            verdict,
            rule,
            format!(
                "at inference on the trained model, not the paper's p-RoPE trained from scratch; loss changes \
                 {fast_removed:+.4} and {slow_removed:+.4} nats over the ablation's prompts (one measurement)"
            ),
        ),
    )
}

/// A head's `s_pos` and `s_sym`.
fn posym(h: &HeadSummary) -> Option<(f64, f64)> {
    let p = h.posym.as_ref()?;
    Some((p.get("s_pos")?.as_f64()?, p.get("s_sym")?.as_f64()?))
}

const EXCLUSION: Text = Text {
    id: "ps-exclusion",
    paper: "positional-symbolic",
    claim: "a head is positional or symbolic, not both: positional and symbolic scores are anticorrelated",
};

fn posym_exclusion(inputs: &ClaimInputs<'_>, b: &mut Bootstrap<'_>) -> Claim {
    let rule = "Pearson r(s_pos, s_sym) over heads: supported when its interval lies below 0, contradicted when \
                above"
        .to_string();
    let pairs: Vec<(f64, f64)> = heads(inputs).iter().filter_map(posym).collect();
    if pairs.len() < 3 {
        return EXCLUSION.not_measurable(rule, "the posym analysis did not run");
    }
    let (x, y): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let Some(r) = pearson(&x, &y) else {
        return EXCLUSION.not_measurable(rule, "the scores do not vary over heads");
    };
    let interval = b.interval(pairs.len(), &mut |idx| {
        let (x, y): (Vec<f64>, Vec<f64>) = idx.iter().map(|&i| pairs[i]).unzip();
        pearson(&x, &y)
    });
    let verdict = below(&interval, 0.0);
    EXCLUSION.measured(
        ("Pearson r(s_pos, s_sym)", r, pairs.len()),
        Some(interval),
        (verdict, rule, String::new()),
    )
}

const POSYM_FREQUENCIES: Text = Text {
    id: "ps-frequencies",
    paper: "positional-symbolic",
    claim:
        "positional behaviour lives in the high frequencies and symbolic behaviour in the low ones",
};

/// A head's `s_pos − s_sym` averaged over its high-band chunks minus that over its low-band chunks.
fn frequency_side(h: &HeadSummary, frequencies: &[f64], bands: &FrequencyBands) -> Option<f64> {
    let p = h.posym.as_ref()?;
    // Chunks past a layer's own (layers that differ in shape) are null.
    let field = |name: &str| -> Option<Vec<f64>> {
        let values = p.get(name)?.as_array()?.iter();
        Some(values.map(|v| v.as_f64().unwrap_or(f64::NAN)).collect())
    };
    let (pos, sym) = (field("chunk_s_pos")?, field("chunk_s_sym")?);
    let side = |band: Band| -> Option<f64> {
        let d: Vec<f64> = (0..pos.len().min(sym.len()))
            .filter(|&l| {
                frequencies
                    .get(l)
                    .is_some_and(|&g| g != 0.0 && bands.band(g) == band)
            })
            .map(|l| pos[l] - sym[l])
            .filter(|d| d.is_finite())
            .collect();
        (!d.is_empty()).then(|| mean(&d))
    };
    Some(side(Band::High)? - side(Band::Low)?)
}

fn posym_frequencies(inputs: &ClaimInputs<'_>, b: &mut Bootstrap<'_>) -> Claim {
    let rule = "mean over heads of (s_pos − s_sym on the high-band chunks − the same on the low-band chunks), from \
                the per-frequency scores: supported when its interval lies above 0, contradicted when below"
        .to_string();
    let bands = bands_of(inputs);
    let sides: Vec<f64> = (heads(inputs).iter())
        .filter_map(|h| frequency_side(h, inputs.frequencies.get(h.layer)?, &bands))
        .collect();
    if sides.is_empty() {
        let why = match heads(inputs).iter().any(|h| h.posym.is_some()) {
            true => "no layer has chunks in both the high and the low band",
            false => "the posym analysis did not run",
        };
        return POSYM_FREQUENCIES.not_measurable(rule, why);
    }
    POSYM_FREQUENCIES.mean_above(
        b,
        ("mean high-minus-low difference of s_pos − s_sym", &sides),
        0.0,
        rule,
    )
}
