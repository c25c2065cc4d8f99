//! Frequency ablation on the built heads: the previous-token, Δ = 3 and diagonal heads live in chunks 0–3
//! (the fastest), so removing their rotation (NoPE, reversed p-RoPE, high band) flattens them, while removing
//! rotation from chunks they do not use leaves them exactly as they were.
//!
//! Known answers: `p = 1` is the plain forward bit for bit (the same rotations through the masked path). In
//! one layer a head's attention depends only on its own q and k, which are zero outside chunks 0–3, so any
//! variant that keeps chunks 0–3 rotating leaves these heads' profiles unchanged bit for bit. Without
//! rotation their logits are constant over keys: attention is uniform and `SlashScore(Δ)` is the mean of
//! `1/(i+1)` over rows `i ≥ Δ`. The streamed profiles equal [`slash::slash_score`] on full matrices to
//! rounding (`1e−12`).

use ropescope::analysis::ablation::{self, AblationParams, Variant};
use ropescope::analysis::fourier::Band;
use ropescope::analysis::slash;
use ropescope::capture::CollectSink;
use ropescope::model::ForwardOptions;
use ropescope::scan::ScanParams;
use ropescope_test_support::analysis::*;

const ROUNDING_TOL: f64 = 1e-12;

const POSITIONAL: [usize; 3] = [HEAD_PREV, HEAD_SLASH3, HEAD_DIAG];

fn uniform_slash(t: usize, delta: usize) -> f64 {
    (delta..t).map(|i| 1.0 / (i + 1) as f64).sum::<f64>() / (t - delta) as f64
}

#[test]
fn removing_the_fast_rotations_removes_the_slash_and_changes_the_loss() {
    let model = known_heads_model();
    let texts = prompts(2, 48);
    let params = AblationParams {
        delta_max: 6,
        ..AblationParams::default()
    };
    let r = ablation::run(&model, &texts, &params, &quiet).unwrap();
    let base = &r.baseline;
    assert_eq!(r.n_predicted, 2 * 47);
    assert_eq!(
        (
            base.peak_delta[0][HEAD_PREV],
            base.peak_delta[0][HEAD_SLASH3]
        ),
        (1, 3)
    );
    assert_eq!(base.peak_delta[0][HEAD_DIAG], 0);
    for h in POSITIONAL {
        assert!(base.peak_score[0][h] > 0.9, "head {h} is a slash head");
    }
    let find = |v: Variant| r.variants.iter().find(|x| x.variant == v).unwrap();
    // Loss changes are against the baseline's loss.
    assert_eq!(base.loss_change, 0.0);
    for v in &r.variants {
        assert_eq!(v.loss_change, v.loss - base.loss, "{:?}", v.variant);
    }

    let rope = find(Variant::PRope { p: 1.0 });
    assert_eq!(rope.loss.to_bits(), base.loss.to_bits());
    assert_eq!(rope.slash_profile, base.slash_profile);
    // p = 1 rotates what the baseline rotates, so it shares the baseline's measurement and says so; every
    // other variant names the first earlier one with its rotation, or none.
    assert_eq!(rope.same_rotation_as, Some(Variant::Baseline));
    for (i, v) in r.variants.iter().enumerate() {
        let first = std::iter::once(base)
            .chain(&r.variants[..i])
            .find(|e| e.rotated_chunks == v.rotated_chunks)
            .map(|e| e.variant);
        assert_eq!(v.same_rotation_as, first, "{:?}", v.variant);
    }

    let nope = find(Variant::PRope { p: 0.0 });
    assert!(nope.rotated_chunks.iter().all(|&k| !k));
    for h in POSITIONAL {
        for (d, &s) in nope.slash_profile[0][h].iter().enumerate() {
            assert!(
                (s - uniform_slash(48, d)).abs() < 1e-9,
                "head {h}, Δ = {d}: {s}"
            );
        }
        assert!(nope.baseline_peak_change[0][h] < -0.8);
    }
    assert!(
        nope.loss_change.abs() > 1e-3,
        "loss change {}",
        nope.loss_change
    );

    // Chunks 0–3 keep rotating: p = 0.75 keeps the 12 fastest of 16, low-band masking stops only g < 0.01.
    for v in [
        Variant::PRope { p: 0.75 },
        Variant::BandMasked { band: Band::Low },
    ] {
        let x = find(v);
        assert!(x.rotated_chunks[..4].iter().all(|&k| k));
        for h in POSITIONAL {
            assert_eq!(
                x.slash_profile[0][h], base.slash_profile[0][h],
                "{v:?}, head {h}"
            );
        }
    }
    // Reversed 0.75 stops the 4 fastest chunks; high-band masking stops at least chunks 0 and 1.
    for v in [
        Variant::Reversed { p: 0.75 },
        Variant::BandMasked { band: Band::High },
    ] {
        let x = find(v);
        assert!(!x.rotated_chunks[0] && !x.rotated_chunks[1]);
        assert!(x.baseline_peak_change[0][HEAD_PREV] < -0.5, "{v:?}");
    }
    assert_eq!(
        find(Variant::Reversed { p: 0.75 }).rotated_chunks,
        [vec![false; 4], vec![true; 12]].concat()
    );
    assert_eq!(r.chunk_bands[0], Some(Band::High));
    assert_eq!(r.chunk_bands[15], Some(Band::Low));
}

/// On a model trained with proportional RoPE (Gemma 4, converted by llama.cpp's converter: sliding layers
/// rotate their 8 chunks, global layers 4 of 16), every variant counts only the chunks that turn, layer by
/// layer with each layer's own frequencies, and the chunks the model leaves still stay still.
#[test]
fn a_p_rope_model_is_ablated_over_the_chunks_it_rotates() {
    let file = ropescope::gguf::GgufFile::open(ropescope_test_support::paths::fixture(
        "converted/gemma4/model.gguf",
    ))
    .unwrap();
    let model = ropescope::model::Model::<f64>::load(&file).unwrap();
    let texts: Vec<Vec<u32>> = (0..2)
        .map(|p| (0..24).map(|i| 5 + (7 * i + 13 * p) % 200).collect())
        .collect();
    let params = AblationParams {
        delta_max: 4,
        ..AblationParams::default()
    };
    let r = ablation::run(&model, &texts, &params, &quiet).unwrap();
    let (sliding, global) = (0, 2);
    let find = |v: Variant| r.variants.iter().find(|x| x.variant == v).unwrap();
    let turning = |l: usize| {
        [vec![true; 4], vec![false; 12]]
            .concat()
            .into_iter()
            .take(l)
    };
    // As trained: all 8 sliding chunks turn, the global layer's first 4 of 16.
    assert_eq!(r.baseline.layer_rotated_chunks[sliding], vec![true; 8]);
    assert_eq!(
        r.baseline.layer_rotated_chunks[global],
        turning(16).collect::<Vec<_>>()
    );
    // p = 0.75 keeps 6 of 8 and 3 of 4; reversed 0.75 drops the fastest 2 of 8 and 1 of 4.
    let p = find(Variant::PRope { p: 0.75 });
    assert_eq!(
        p.layer_rotated_chunks[sliding],
        [vec![true; 6], vec![false; 2]].concat()
    );
    assert_eq!(
        p.layer_rotated_chunks[global],
        [vec![true; 3], vec![false; 13]].concat()
    );
    let rev = find(Variant::Reversed { p: 0.75 });
    assert_eq!(
        rev.layer_rotated_chunks[global],
        [vec![false], vec![true; 3], vec![false; 12]].concat()
    );
    // p = 0.75 differs from the model as trained: it is measured, not taken from the baseline.
    assert_eq!(p.same_rotation_as, None);
    assert_ne!(p.loss, r.baseline.loss);
    // The still chunks have no band; each layer's bands come from its own frequencies.
    assert!(r.layer_chunk_bands[global][4..].iter().all(Option::is_none));
    assert!(r.layer_chunk_bands[sliding].iter().all(Option::is_some));
    assert_eq!(r.chunk_bands, r.layer_chunk_bands[global]);
    let low = find(Variant::BandMasked { band: Band::Low });
    for (l, layer) in low.layer_rotated_chunks.iter().enumerate() {
        for (c, &rotates) in layer.iter().enumerate() {
            let band = r.layer_chunk_bands[l][c];
            assert_eq!(
                rotates,
                band.is_some() && band != Some(Band::Low),
                "L{l} chunk {c}"
            );
        }
    }
}

#[test]
fn streamed_profiles_equal_slash_scores_of_full_matrices() {
    let model = known_heads_model();
    let ids = prompts(1, 150).remove(0);
    let params = AblationParams {
        p_values: vec![],
        reversed_p_values: vec![],
        masked_bands: vec![],
        delta_max: 70,
        ..AblationParams::default()
    };
    let r = ablation::run(&model, std::slice::from_ref(&ids), &params, &quiet).unwrap();
    let mut sink = CollectSink::new(vec![0], 0..ids.len());
    model
        .forward(&ids, &ForwardOptions::default(), &mut sink)
        .unwrap();
    for (h, rec) in sink.records.iter().enumerate() {
        for d in 0..=70 {
            let expected = slash::slash_score(&rec.probs, ids.len(), d).unwrap();
            assert!((r.baseline.slash_profile[0][h][d] - expected).abs() < ROUNDING_TOL);
        }
    }
}

/// The scan runs the ablation with its defaults: p-RoPE from RoPE (`p = 1`) down to NoPE (`p = 0`) through the
/// paper's 0.75, the half-way 0.5 and the paper's 0.25, in decreasing `p`; reversed p-RoPE at the fraction the
/// paper reports, 0.75, then at 0.25; then each band masked, fastest first. Its slash profiles cover the same
/// offsets `Δ = 0..=Δmax` as the scan's own slash profiles ([`ScanParams`]), so the two can be read side by side.
#[test]
fn default_variants_run_from_rope_to_nope_and_profiles_span_the_scans_offsets() {
    let model = known_heads_model();
    let r = ablation::run(&model, &prompts(1, 20), &AblationParams::default(), &quiet).unwrap();
    let variants: Vec<Variant> = r.variants.iter().map(|v| v.variant).collect();
    assert_eq!(
        variants,
        [
            Variant::PRope { p: 1.0 },
            Variant::PRope { p: 0.75 },
            Variant::PRope { p: 0.5 },
            Variant::PRope { p: 0.25 },
            Variant::PRope { p: 0.0 },
            Variant::Reversed { p: 0.75 },
            Variant::Reversed { p: 0.25 },
            Variant::BandMasked { band: Band::High },
            Variant::BandMasked { band: Band::Medium },
            Variant::BandMasked { band: Band::Low },
        ]
    );
    let offsets = ScanParams::default().delta_max + 1;
    for v in std::iter::once(&r.baseline).chain(&r.variants) {
        for head in &v.slash_profile[0] {
            assert_eq!(head.len(), offsets, "{:?}", v.variant);
        }
    }
}

#[test]
fn bad_input_is_an_error_and_progress_counts_passes() {
    let model = known_heads_model();
    let params = AblationParams::default();
    let short = "the ablation needs prompts, each longer than delta_max";
    assert_argument_error(ablation::run(&model, &[], &params, &quiet), short);
    assert_argument_error(
        ablation::run(&model, &prompts(1, 10), &params, &quiet),
        short,
    );
    let bad = AblationParams {
        p_values: vec![1.5],
        ..AblationParams::default()
    };
    assert_argument_error(
        ablation::run(&model, &prompts(1, 40), &bad, &quiet),
        "p = 1.5 is not in [0, 1]",
    );
    let count = std::cell::Cell::new(0);
    ablation::run(&model, &prompts(2, 20), &params, &|n| count.set(n)).unwrap();
    assert_eq!(count.get(), ablation::passes(2, &params));
    assert_eq!(ablation::passes(2, &params), 2 * 11);
}

#[test]
fn a_repeated_rotation_shares_the_first_measurement_of_it() {
    let model = known_heads_model();
    let texts = prompts(1, 24);
    // Reversed p = 0 rotates nothing, as p-RoPE p = 0 does; p = 0.5 is asked for twice.
    let params = AblationParams {
        p_values: vec![0.0, 0.5, 0.5],
        reversed_p_values: vec![0.0],
        masked_bands: vec![],
        delta_max: 4,
        ..AblationParams::default()
    };
    let count = std::cell::Cell::new(0);
    let r = ablation::run(&model, &texts, &params, &|n| count.set(n)).unwrap();
    assert_eq!(count.get(), ablation::passes(1, &params));
    let shared: Vec<_> = r.variants.iter().map(|v| v.same_rotation_as).collect();
    assert_eq!(
        shared,
        [
            None,
            None,
            Some(Variant::PRope { p: 0.5 }),
            Some(Variant::PRope { p: 0.0 })
        ]
    );
    assert_eq!(r.variants[3].variant, Variant::Reversed { p: 0.0 });
    for (v, first) in [(2, 1), (3, 0)] {
        let (v, first) = (&r.variants[v], &r.variants[first]);
        assert_eq!(v.loss.to_bits(), first.loss.to_bits());
        assert_eq!(v.slash_profile, first.slash_profile);
    }
    // A run without the sharing measures the same bits: p = 0 alone.
    let alone = AblationParams {
        p_values: vec![0.0],
        reversed_p_values: vec![],
        ..params.clone()
    };
    let single = ablation::run(&model, &texts, &alone, &quiet).unwrap();
    assert_eq!(
        single.variants[0].loss.to_bits(),
        r.variants[3].loss.to_bits()
    );
}
