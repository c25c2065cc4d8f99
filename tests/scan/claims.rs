//! The papers' claims (`summary.json`'s `claims`): for each claim, heads built so that it holds give
//! `supported`, heads built so that it fails give `contradicted`, and a scan without the analyses it needs gives
//! `not measurable`; where the amplitude share and the band ablation disagree, the verdict is `mixed` and says
//! so. The end-to-end scan is in `designs.rs` and the rendered table in the browser test.

use ropescope::scan::claims::{evaluate, ClaimInputs};
use ropescope::scan::format::{Claim, HeadSummary, Summary, Verdict};
use ropescope::scan::ScanParams;
use serde_json::{json, Value};

/// One layer of 16 chunks: 0–3 high (g ≥ 0.1), 4–9 medium, 10–15 low (g < 0.01) under the default edges.
fn frequencies() -> Vec<Vec<f64>> {
    vec![vec![
        1.0, 0.5, 0.3, 0.15, 0.09, 0.07, 0.05, 0.03, 0.02, 0.015, 0.009, 0.005, 0.003, 0.001,
        0.0005, 0.0001,
    ]]
}

/// A head of layer 0 from the given parts (JSON objects as `summary.json` writes them; `null` for not run).
fn head(i: usize, parts: Value) -> HeadSummary {
    let mut h = json!({
        "layer": 0, "head": i, "kv_head": 0, "label": "mixed",
        "slash": null, "rank": null, "fourier": null, "frequency": null, "cone": null,
        "posym": null, "detectors": null, "cauchy_schwarz": null, "ablation": null,
    });
    for (k, v) in parts.as_object().unwrap() {
        h[k] = v.clone();
    }
    serde_json::from_value(h).unwrap()
}

fn slash(dominant: bool, random_dominant: Option<bool>) -> Value {
    json!({"best_delta": 1, "best_score": if dominant { 0.6 } else { 0.05 },
           "random_score_at_best_delta": random_dominant.map(|r| if r { 0.5 } else { 0.02 }),
           "random_best_delta": random_dominant.map(|_| 1), "sink": 0.1,
           "random_sink": random_dominant.map(|_| 0.1), "slash_dominant": dominant,
           "random_slash_dominant": random_dominant})
}

fn bands(low: f64, medium: f64, high: f64) -> Value {
    json!({"low": low, "medium": medium, "high": high})
}

fn rank(share: f64) -> Value {
    json!({"q_rank_one_share": share, "q_effective_rank": 1.5, "k_rank_one_share": share,
           "k_effective_rank": 1.5, "q_cos_mean": 0.9, "q_cos_std": 0.1, "k_cos_mean": 0.9, "k_cos_std": 0.1})
}

/// An ablation record whose band masks remove `removed` (high, medium, low) of the head's peak, with the
/// model-wide loss changes of p = 0.75 and reversed p = 0.75.
fn ablation(removed: [f64; 3], losses: (f64, f64)) -> Value {
    let band = |b: &str, r: f64| {
        json!({"variant": {"kind": "band_masked", "band": b},
        "loss_change": 0.1, "peak_delta": 1, "peak_score": 0.5, "baseline_peak_change": -r})
    };
    json!({"baseline": {"peak_delta": 1, "peak_score": 0.6, "baseline_peak_change": 0.0}, "variants": [
        {"variant": {"kind": "p_rope", "p": 0.75}, "loss_change": losses.0, "peak_delta": 1, "peak_score": 0.6,
         "baseline_peak_change": 0.0},
        {"variant": {"kind": "reversed", "p": 0.75}, "loss_change": losses.1, "peak_delta": 1, "peak_score": 0.6,
         "baseline_peak_change": 0.0},
        band("high", removed[0]), band("medium", removed[1]), band("low", removed[2])]})
}

fn summary(heads: Vec<HeadSummary>, cone: Option<(f64, f64)>) -> Summary {
    serde_json::from_value(json!({
        "format_version": 1, "heads": heads, "slash_dominant": null, "intrinsic": null,
        "cone": cone.map(|(mean, max)| json!({"n_tokens": 256, "mean_angle": mean.to_radians(),
                                               "max_angle": max.to_radians()})),
    }))
    .unwrap()
}

fn claims_of(s: &Summary) -> Vec<Claim> {
    evaluate(&ClaimInputs {
        summary: s,
        params: &ScanParams::default(),
        frequencies: &frequencies(),
    })
}

fn verdict(claims: &[Claim], id: &str) -> Verdict {
    claims.iter().find(|c| c.id == id).unwrap().verdict
}

/// A small deterministic spread, so that intervals have width.
fn jitter(i: usize) -> f64 {
    ((i * 37) % 11) as f64 / 11.0 * 0.02
}

/// Twenty heads; the first ten slash-dominant, built for every slash and Round-and-Round claim to hold (or,
/// with `hold` false, to fail).
fn slash_model(hold: bool) -> Summary {
    let heads = (0..20)
        .map(|i| {
            let sdh = i < 10;
            let positional = i < 5;
            let label = if positional { "previous-token" } else { "mixed" };
            // Query chunk-norm shares (low, high): the low band's 6 of 16 chunks hold more than 6/16 of the norm,
            // and positional heads more of the high band than the others; or neither.
            let (q_low, q_high) = match (positional, hold) {
                (true, true) => (0.35, 0.6),
                (false, true) => (0.6, 0.3),
                (true, false) => (0.1, 0.1),
                (false, false) => (0.1, 0.3),
            };
            let q_low = q_low + jitter(i);
            let mut parts = json!({
                "label": label,
                "slash": slash(sdh, Some(sdh && hold)),
                "rank": rank(if hold { 0.9 } else { 0.2 } - jitter(i)),
                "fourier": {"amplitude_shares": if hold { bands(0.2, 0.3, 0.5) } else { bands(0.8, 0.1, 0.1) },
                            "predicted_delta": 1, "measured_delta": 1},
                "frequency": {"q": bands(q_low, 1.0 - q_low - q_high, q_high),
                              "k": bands(0.4, 0.3, 0.3)},
                "ablation": if hold { ablation([0.5, 0.2, 0.01], (0.01, 0.5)) }
                            else { ablation([0.01, 0.01, 0.5], (0.5, 0.01)) },
            });
            if i < 5 {
                let gain = if hold { 0.3 } else { -0.3 } + jitter(i);
                parts["cauchy_schwarz"] = json!({"in_head_set": true, "kind": "previous_token",
                    "previous": {"mean_ratio": 0.1 + gain}, "baseline": {"mean_ratio": 0.1}});
            } else {
                parts["cauchy_schwarz"] = json!({"in_head_set": false, "head_set_rule": "…"});
            }
            head(i, parts)
        })
        .collect();
    summary(
        heads,
        Some(if hold { (40.0, 70.0) } else { (100.0, 120.0) }),
    )
}

#[test]
fn slash_and_round_and_round_claims_hold_and_fail_as_built() {
    let holds = claims_of(&slash_model(true));
    let fails = claims_of(&slash_model(false));
    for id in [
        "slash-intrinsic",
        "slash-rank-one",
        "slash-medium-high-frequencies",
        "slash-embedding-cone",
        "rr-low-frequencies-used-most",
        "rr-high-frequencies-positional-heads",
        "rr-cauchy-schwarz-alignment",
        "rr-p-rope",
    ] {
        assert_eq!(verdict(&holds, id), Verdict::Supported, "{id}: {holds:#?}");
        assert_eq!(
            verdict(&fails, id),
            Verdict::Contradicted,
            "{id}: {fails:#?}"
        );
    }
    assert_eq!(verdict(&holds, "slash-sdh-exist"), Verdict::Supported);
    let none = summary(
        (0..4)
            .map(|i| head(i, json!({"slash": slash(false, None)})))
            .collect(),
        None,
    );
    let none = claims_of(&none);
    assert_eq!(verdict(&none, "slash-sdh-exist"), Verdict::Contradicted);
    // With no slash-dominant head, the claims about them have nothing to be measured on.
    assert_eq!(verdict(&none, "slash-rank-one"), Verdict::NotMeasurable);
    // Every measured claim states an interval around its statistic, or none for a single measurement.
    for c in holds.iter().filter(|c| c.statistic.is_some()) {
        if let (Some(s), Some(i)) = (&c.statistic, &c.uncertainty) {
            assert!(i.low <= i.high && i.method.contains("bootstrap"), "{c:?}");
            assert!(s.n > 0, "{c:?}");
        }
    }
}

/// The slash paper's worked disagreement: the amplitude share says the low band dominates, while masking the
/// high band removes the slash and masking the low band does not.
#[test]
fn amplitude_share_against_ablation_is_mixed_and_says_so() {
    let heads = (0..8)
        .map(|i| {
            head(
                i,
                json!({
                    "slash": slash(true, None),
                    "fourier": {"amplitude_shares": bands(0.8 + jitter(i), 0.1, 0.1 - jitter(i)),
                                "predicted_delta": 1, "measured_delta": 1},
                    "ablation": ablation([0.76 + jitter(i), 0.1, 0.04], (0.1, 0.2)),
                }),
            )
        })
        .collect();
    let c = claims_of(&summary(heads, None));
    let claim = c
        .iter()
        .find(|c| c.id == "slash-medium-high-frequencies")
        .unwrap();
    assert_eq!(claim.verdict, Verdict::Mixed);
    assert!(
        claim.note.contains("disagree") && claim.note.contains("contradicted"),
        "{}",
        claim.note
    );
}

#[test]
fn positional_symbolic_claims_hold_and_fail_as_built() {
    let build = |anti: bool| {
        let heads = (0..16)
            .map(|i| {
                let pos = i as f64 / 15.0;
                let sym = if anti { 1.0 - pos } else { pos } + jitter(i);
                // Positional behaviour on the fast chunks (0–3) and symbolic on the slow ones (10–15), or the
                // reverse.
                let chunk = |l: usize| -> (f64, f64) {
                    let fast = l < 4;
                    match (anti, fast) {
                        (true, true) | (false, false) => (0.9, 0.1 + jitter(i)),
                        _ => (0.1, 0.9 - jitter(i)),
                    }
                };
                let (cp, cs): (Vec<f64>, Vec<f64>) = (0..16).map(chunk).unzip();
                head(i, json!({"posym": {"s_pos": pos, "s_sym": sym, "chunk_s_pos": cp, "chunk_s_sym": cs}}))
            })
            .collect();
        claims_of(&summary(heads, None))
    };
    let (holds, fails) = (build(true), build(false));
    for id in ["ps-exclusion", "ps-frequencies"] {
        assert_eq!(verdict(&holds, id), Verdict::Supported, "{id}");
        assert_eq!(verdict(&fails, id), Verdict::Contradicted, "{id}");
    }
}

/// A scan of the slash analysis alone: every claim that needs another analysis says it is not measurable and
/// why, never a number.
#[test]
fn claims_without_their_analyses_are_not_measurable() {
    let heads = (0..6)
        .map(|i| head(i, json!({"slash": slash(i < 3, None)})))
        .collect();
    let c = claims_of(&summary(heads, None));
    for id in [
        "slash-intrinsic",
        "slash-rank-one",
        "slash-medium-high-frequencies",
        "slash-embedding-cone",
        "rr-low-frequencies-used-most",
        "rr-high-frequencies-positional-heads",
        "rr-cauchy-schwarz-alignment",
        "rr-p-rope",
        "ps-exclusion",
        "ps-frequencies",
    ] {
        let claim = c.iter().find(|c| c.id == id).unwrap();
        assert_eq!(claim.verdict, Verdict::NotMeasurable, "{id}");
        assert!(
            claim.statistic.is_none() && claim.uncertainty.is_none(),
            "{id}"
        );
        assert!(!claim.note.is_empty(), "{id} does not say why");
    }
    assert_eq!(verdict(&c, "slash-sdh-exist"), Verdict::Supported);
}
